"""Writes the first inputs of a fuzz target's corpus from the repository's own files: the
Artillery corpus and examples, the experiments, the helper protocol's messages, committed run
and lab directories, and hand-made HTTP/1.1 responses.

    python3 fuzz/seeds.py TARGET CORPUS_DIR
"""

import hashlib
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SEP = b"\xff"


def responses():
    """HTTP/1.1 response streams, each after a shape byte (see fuzz_targets/http1_response.rs)."""
    bodies = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nSet-Cookie: a=b\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.0 404 Not Found\r\nContent-Length: 3\r\n\r\nno!HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 4\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n",
    ]
    for shape in (0, 1, 6, 0x38, 0xFF):
        for b in bodies:
            yield bytes([shape]) + b


def texts(patterns):
    for pattern in patterns:
        for path in sorted(ROOT.glob(pattern)):
            if path.is_file():
                yield path.read_bytes()


def protocol_lines():
    text = (ROOT / "crates/engine/src/locust/PROTOCOL.md").read_text()
    for line in re.findall(r"`(\{\"op\".*?\})`", text):
        yield line.encode()
    yield b'{"op":"request","id":1,"user":2,"method":"GET","url":"http://h/a?b=1","body":"aGk=","intended":1.5,"interval":0.5,"timeout":2}'
    yield b'{"op":"event","request_type":"GET","name":"x","response_time_ms":12.0,"response_length":3}'


def run_dirs():
    files = ["summary.json", "timeline.csv", "latency.hlog", "server.csv", "plan.json",
             "records.json", "profile.folded"]
    stopped = (ROOT / "crates/run/tests/fixtures/stopped-run/seconds.jsonl").read_bytes()
    for cell in sorted(ROOT.glob("bench/runs/2026-11-23-seed-001-calc/cells/*/*")):
        parts = [(cell / f).read_bytes() if (cell / f).exists() else b"" for f in files]
        # A complete run, then the same files as a run stopped before its summary.
        yield SEP.join(parts)
        yield SEP.join([b""] + parts[1:] + [stopped])


def lab_dirs():
    """Committed labs: the experiment, lab.json and the files of the experiment's first cell."""
    for lab in sorted(ROOT.glob("bench/runs/seeds-*/*/experiment.json")):
        lab = lab.parent
        exp = json.loads((lab / "experiment.json").read_text())
        first = (exp["topologies"][0]["name"], exp["workloads"][0], 0)
        cell = None
        for record in lab.glob("**/cell.json"):
            c = json.loads(record.read_text())
            if (c.get("topology"), c.get("workload"), c.get("round")) == first:
                cell = record.parent
                break
        parts = [(lab / "experiment.json").read_bytes(),
                 (lab / "lab.json").read_bytes() if (lab / "lab.json").exists() else b""]
        if cell is not None:
            for f in ["cell.json", "summary.json", "capacity.json", "probe.json"]:
                parts.append((cell / f).read_bytes() if (cell / f).exists() else b"")
        yield SEP.join(parts)


SOURCES = {
    "http1_response": responses,
    "scenario": lambda: texts(["crates/cli/tests/fixtures/artillery-corpus/**/*.y*ml",
                               "crates/cli/tests/fixtures/artillery-corpus/**/*.json",
                               "examples/scenarios/*.yml", "examples/*.yml"]),
    "experiment": lambda: texts(["examples/seed-*.yaml", "examples/*.yaml"]),
    "locust_messages": protocol_lines,
    "run_dir": run_dirs,
    "lab_dir": lab_dirs,
}


def main():
    target, corpus = sys.argv[1], pathlib.Path(sys.argv[2])
    if target not in SOURCES:
        sys.exit(f"unknown target {target}; one of: {', '.join(SOURCES)}")
    corpus.mkdir(parents=True, exist_ok=True)
    n = 0
    for data in SOURCES[target]():
        # Named by content, as libFuzzer names its own finds: a seed written twice is one file.
        (corpus / hashlib.sha1(data).hexdigest()).write_bytes(data)
        n += 1
    print(f"{target}: {n} seed inputs in {corpus}")


if __name__ == "__main__":
    main()
