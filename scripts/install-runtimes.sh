#!/usr/bin/env bash
# Installs the Node and Python reference services' pinned dependencies into the repository
# (targets/node/node_modules by npm ci from package-lock.json; targets/python/.venv by pip from
# requirements.txt), exactly as `loadlab serve --runtime node|python` does on first use, and the
# Socket.IO server the socketio tests run (crates/cli/tests/fixtures/socketio-server) and the
# Playwright package the browser flows' tests load (crates/cli/tests/fixtures/playwright-flows;
# it drives the system's chromium, which scripts/test.sh installs, and downloads no browser), and
# marks them installed the same way so loadlab does not install again. Idempotent: a second
# run with unchanged pins does nothing. On a fresh Debian machine, run as root it installs
# node, npm and python3-venv first; otherwise it says which package is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_install() {
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
  else
    echo "error: $1 is missing; install it with: sudo apt-get install $*" >&2
    exit 1
  fi
}

command -v node >/dev/null 2>&1 || apt_install nodejs
command -v npm >/dev/null 2>&1 || apt_install npm
command -v python3 >/dev/null 2>&1 || apt_install python3-venv

# The Node reference service, the Socket.IO server the socketio engine's tests run, and the
# browser flows' Playwright.
for node_dir in targets/node crates/cli/tests/fixtures/socketio-server crates/cli/tests/fixtures/playwright-flows; do
  if ! cmp -s "$node_dir/package-lock.json" "$node_dir/node_modules/.loadlab-installed"; then
    echo "install-runtimes: npm ci in $node_dir"
    (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error)
    cp "$node_dir/package-lock.json" "$node_dir/node_modules/.loadlab-installed"
  fi
done

py_dir=targets/python
venv=$py_dir/.venv
if ! cmp -s "$py_dir/requirements.txt" "$venv/.loadlab-installed"; then
  if [ ! -x "$venv/bin/python" ]; then
    echo "install-runtimes: python3 -m venv $venv"
    if ! python3 -m venv "$venv"; then
      rm -rf "$venv"
      apt_install python3-venv
      python3 -m venv "$venv"
    fi
  fi
  echo "install-runtimes: pip install -r $py_dir/requirements.txt"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$py_dir/requirements.txt"
  cp "$py_dir/requirements.txt" "$venv/.loadlab-installed"
fi

# `loadlab locust`'s Python: a virtual environment with gevent and the Locust dependencies
# that locustfiles import (pinned in crates/engine/src/locust/prepare.rs), where loadlab
# itself makes it on first use.
locust_venv="${XDG_CACHE_HOME:-$HOME/.cache}/loadlab/locust-venv"
locust_pins=$(grep -o -E '"[A-Za-z_-]+==[0-9.]+"' crates/engine/src/locust/prepare.rs | tr -d '"' | tr '\n' ' ')
if ! cmp -s <(echo "$locust_pins") "$locust_venv/.loadlab-installed" 2>/dev/null; then
  echo "install-runtimes: $locust_pins in $locust_venv"
  [ -x "$locust_venv/bin/python" ] || python3 -m venv "$locust_venv"
  # shellcheck disable=SC2086 # the pins are words
  "$locust_venv/bin/python" -m pip install -q --disable-pip-version-check $locust_pins
  echo "$locust_pins" > "$locust_venv/.loadlab-installed"
fi
