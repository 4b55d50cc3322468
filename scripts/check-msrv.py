#!/usr/bin/env python3
"""Checks the workspace's `rust-version` against what its dependencies declare.

Cargo refuses to build a package with a toolchain older than its `rust-version`, so the
workspace's promise ("builds with Rust X") holds only if no dependency resolved for Linux asks
for a newer one. This reads the resolved graph (`cargo metadata`, offline, from Cargo.lock)
and fails naming every dependency that asks for more than the workspace declares. Clippy's
`incompatible_msrv` lint (on in `cargo clippy -D warnings`) checks our own use of the
standard library against the same version.
"""
import json
import subprocess
import sys


def version(text):
    """(major, minor, patch) of a `rust-version` such as 1.89 or 1.85.1."""
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def newer_than_declared(metadata):
    """The workspace's declared version, and the resolved packages that ask for more, as
    (name, version, their rust-version) sorted by their rust-version, newest first."""
    packages = {p["id"]: p for p in metadata["packages"]}
    members = set(metadata["workspace_members"])
    declared = {packages[m]["rust_version"] for m in members if packages[m].get("rust_version")}
    if len(declared) != 1:
        raise SystemExit(f"error: the workspace's crates declare {sorted(declared) or 'no'} "
                         "rust-version; declare one in [workspace.package]")
    ours = declared.pop()
    resolved = {n["id"] for n in metadata["resolve"]["nodes"]}
    over = [(p["name"], p["version"], p["rust_version"])
            for i, p in packages.items()
            if i in resolved and i not in members and p.get("rust_version")
            and version(p["rust_version"]) > version(ours)]
    return ours, sorted(over, key=lambda x: version(x[2]), reverse=True)


def main():
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked",
         "--filter-platform", "x86_64-unknown-linux-gnu"],
        check=True, capture_output=True, text=True).stdout
    ours, over = newer_than_declared(json.loads(out))
    if over:
        print(f"error: the workspace declares rust-version {ours}, but these dependencies ask "
              "for a newer Rust:", file=sys.stderr)
        for name, v, rust in over:
            print(f"  {name} {v}: rust-version {rust}", file=sys.stderr)
        print("raise rust-version in Cargo.toml to the newest of them, or pin older versions",
              file=sys.stderr)
        return 1
    print(f"rust-version {ours}: no dependency asks for a newer Rust")
    return 0


if __name__ == "__main__":
    sys.exit(main())
