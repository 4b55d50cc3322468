#!/usr/bin/env python3
"""Fails when a crate's modules import each other in a cycle.

Reads every `use crate::…` / `crate::…` path and `super::` import in crates/*/src, maps each
to the module it names (a file or a folder's mod.rs), and looks for a cycle among a crate's
modules; `#[cfg(test)]` blocks at the end of a file are skipped (tests may reach anywhere).
A parent module re-exporting or declaring its children is not an edge; a child naming its
parent is. Prints the edges of each crate and exits 1 on the first cycle found.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def module_of(src: Path, file: Path) -> tuple:
    rel = file.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def body_without_tests(text: str) -> str:
    """The code of a file with its doc comments (rustdoc resolves their links as paths, so a
    link is an edge too): no trailing test module, no plain `//` comments."""
    cut = text.find("#[cfg(test)]\nmod tests")
    code = text if cut < 0 else text[:cut]
    lines = []
    for line in code.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("///") or stripped.startswith("//!"):
            lines.append(line)
        else:
            lines.append(line.split("//")[0])
    return "\n".join(lines)


def edges_of(src: Path):
    modules = {module_of(src, f): f for f in src.rglob("*.rs")}
    edges = {m: set() for m in modules}
    for mod, file in modules.items():
        text = body_without_tests(file.read_text())
        # `use crate::a::b::{…}` and inline `crate::a::b::name` paths.
        for path in re.findall(r"\bcrate((?:::[A-Za-z_][A-Za-z0-9_]*)+)", text):
            names = [p for p in path.split("::") if p]
            target = ()
            for n in names:
                if target + (n,) in modules:
                    target = target + (n,)
                else:
                    break
            if target and target != mod and mod[: len(target)] != target:
                edges[mod].add(target)
            elif target and mod[: len(target)] == target and target != mod:
                edges[mod].add(target)  # a child naming its parent
        for path in re.findall(r"\bsuper((?:::[A-Za-z_][A-Za-z0-9_]*)+)", text):
            parent = mod[:-1]
            names = [p for p in path.split("::") if p]
            target = parent
            for n in names:
                if target + (n,) in modules:
                    target = target + (n,)
                else:
                    break
            if target != mod:
                edges[mod].add(target)
    return edges


def find_cycle(edges):
    state = {}
    stack = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(edges.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if state.get(n) is None:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(edges):
        if state.get(m) is None:
            found = visit(m)
            if found:
                return found
    return None


def name(m):
    return "::".join(m) or "lib"


def main():
    failed = False
    verbose = "-v" in sys.argv
    for src in sorted(ROOT.glob("crates/*/src")):
        edges = edges_of(src)
        crate = src.parent.name
        if verbose:
            for m in sorted(edges):
                if edges[m]:
                    print(f"{crate}: {name(m)} -> {', '.join(name(n) for n in sorted(edges[m]))}")
        cycle = find_cycle(edges)
        if cycle:
            print(f"{crate}: module cycle: {' -> '.join(name(m) for m in cycle)}")
            failed = True
    if failed:
        sys.exit(1)
    print("module cycles: none in", ", ".join(p.parent.name for p in sorted(ROOT.glob("crates/*/src"))))


if __name__ == "__main__":
    main()
