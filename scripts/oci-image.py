#!/usr/bin/env python3
"""Writes a container image as an OCI image layout in one tar file, from files on this machine,
with no base image and no registry: one layer holding the given files (and, with --libs, the
shared libraries a dynamically linked program loads, found by ldd), and a config naming its
entrypoint and user. `ctr -n k8s.io images import FILE` puts it where a kubelet on containerd
finds it (with `imagePullPolicy: Never`, nothing is pulled).

    python3 scripts/oci-image.py --name loadlab:dev --out loadlab.tar \\
        --add target/release/loadlab:/usr/local/bin/loadlab --libs --user 10001 \\
        --entrypoint /usr/local/bin/loadlab

The layer is the same bytes for the same files (times, owners and order fixed), so the image's
digest changes only when its files do.
"""

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile


def reference(name):
    """The name as containerd and the kubelet store it: `loadlab:dev` is
    `docker.io/library/loadlab:dev`; a name whose first part is a host stays as it is."""
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return name
    if not rest:
        return "docker.io/library/" + name
    return "docker.io/" + name


def shared_libraries(program):
    """The files of the shared libraries `program` loads (the dynamic loader among them);
    none for a static program."""
    out = subprocess.run(["ldd", program], capture_output=True, text=True)
    if out.returncode != 0:
        return []
    paths = []
    for line in out.stdout.splitlines():
        words = line.split()
        if "=>" in words:
            at = words.index("=>") + 1
            if at < len(words) and words[at].startswith("/"):
                paths.append(words[at])
        elif words and words[0].startswith("/"):
            paths.append(words[0])
    return paths


def add_dirs(tar, path, seen):
    """The folders above `path`, each once."""
    parts = path.strip("/").split("/")[:-1]
    for i in range(1, len(parts) + 1):
        d = "/".join(parts[:i])
        if d not in seen:
            seen.add(d)
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)


def layer(files, dirs):
    """An uncompressed layer tar: `files` maps a path in the image to a file here; `dirs` maps
    a folder in the image to its mode."""
    buf = io.BytesIO()
    seen = set()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d, mode in sorted(dirs.items()):
            add_dirs(tar, d, seen)
            info = tarfile.TarInfo(d.strip("/"))
            info.type = tarfile.DIRTYPE
            info.mode = mode
            tar.addfile(info)
            seen.add(d.strip("/"))
        for dest, src in sorted(files.items()):
            add_dirs(tar, dest, seen)
            with open(src, "rb") as f:
                data = f.read()
            info = tarfile.TarInfo(dest.strip("/"))
            info.size = len(data)
            info.mode = os.stat(src).st_mode & 0o777
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def blob(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--name", required=True, help="the image's name, e.g. loadlab:dev")
    p.add_argument("--out", required=True, help="the tar file to write")
    p.add_argument("--add", action="append", default=[], metavar="SRC:DEST",
                   help="a file here and its path in the image")
    p.add_argument("--libs", action="store_true",
                   help="add the shared libraries the added programs load")
    p.add_argument("--entrypoint", required=True, help="the program the image runs")
    p.add_argument("--user", default="0", help="the user it runs as (a number)")
    args = p.parse_args()

    files = {}
    for spec in args.add:
        src, sep, dest = spec.rpartition(":")
        if not sep or not dest.startswith("/"):
            sys.exit(f"error: --add {spec!r}: give SRC:DEST with DEST an absolute path")
        if not os.path.isfile(src):
            sys.exit(f"error: --add {spec!r}: {src} is not a file")
        files[dest] = src
    if args.libs:
        for src in list(files.values()):
            for lib in shared_libraries(src):
                files.setdefault(lib, os.path.realpath(lib))
    if args.entrypoint not in files:
        sys.exit(f"error: the entrypoint {args.entrypoint} is not among the files added")

    diff = layer(files, {"/tmp": 0o1777})
    config = json.dumps({
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Entrypoint": [args.entrypoint],
            "User": args.user,
            "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"],
            "WorkingDir": "/tmp",
        },
        "rootfs": {"type": "layers", "diff_ids": [blob(diff)]},
    }, sort_keys=True).encode()
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": blob(config), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": blob(diff), "size": len(diff)}],
    }, sort_keys=True).encode()
    name = reference(args.name)
    index = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": blob(manifest), "size": len(manifest),
            "annotations": {"io.containerd.image.name": name,
                            "org.opencontainers.image.ref.name": name.rpartition(":")[2]},
        }],
    }, sort_keys=True).encode()

    tmp = args.out + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as out:
        def put(path, data):
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o644
            out.addfile(info, io.BytesIO(data))
        put("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        put("index.json", index)
        for data in (manifest, config, diff):
            put("blobs/sha256/" + blob(data).split(":")[1], data)
    os.replace(tmp, args.out)
    print(f"{name} {blob(manifest)}")


if __name__ == "__main__":
    main()
