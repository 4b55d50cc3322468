#!/usr/bin/env python3
"""Fails when a crate's modules import each other in a cycle.

Reads every module of crates/*/src (a file or a folder's mod.rs) and resolves what its `use`
declarations, its inline `crate::`/`super::`/`self::` paths, its paths through a name in
scope (`plan::Plan` after `use crate::plan`) and the `crate::…` paths of its doc comments
name, down to the module that defines each item: `pub use` chains (groups, renames, globs)
are followed in every module, so `use crate::Plan` is an edge to plan.rs, not to lib.rs. A
private glob import is an edge to the modules defining the names the module uses from it.

Not edges: a module declaring (`mod x;`) or re-exporting (`pub use x::Y`) its descendants'
items, `#[cfg(test)]` items (tests may reach anywhere), plain comments, names from outside
the crate (std, other crates, what the script cannot resolve). A child naming an item its
parent defines is an edge.

Checks twice: file by file, and top-level module by top-level module, a folder module taken
whole (a file inside `a/` using `b` while a file inside `b/` uses `a` ties the folders in a
cycle even when no two files import each other). Prints each set of modules caught in a cycle
(a strongly-connected component) with the file:line of its edges and, file by file, its simple
cycles, and exits 1 if there is any. `-v` prints every
edge; `--root DIR` checks the crates of another checkout.
"""

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CYCLES_SHOWN = 20
SEARCH_BUDGET = 200_000

ITEM_KEYWORDS = {"struct", "enum", "union", "trait", "type", "fn", "const", "static"}
QUALIFIERS = {"const", "async", "unsafe", "extern", "default", "mut"}
ITEM_STARTS = ITEM_KEYWORDS | {"async", "unsafe", "extern", "impl", "mod", "use", "macro_rules"}
TOKEN = re.compile(
    r"""(?P<space>\s+)
    |(?P<doc>///(?!/)[^\n]*|//![^\n]*)|(?P<comment>//[^\n]*)
    |(?P<str>[bc]?r(?P<hashes>\#*)"(?:.|\n)*?"(?P=hashes)|[bc]?"(?:\\.|\\\n|[^"\\])*")
    |(?P<char>b?'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^'\\\n])')|(?P<lifetime>'\w+)
    |(?P<ident>r\#[A-Za-z_]\w*|[A-Za-z_]\w*)|(?P<num>\d[\w.]*)
    |(?P<punct>::|.)""",
    re.VERBOSE,
)
EXTERNAL = ("external", None)
DOC_PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_]\w*)+)")


@dataclass
class Token:
    kind: str  # ident, punct, lit or doc
    text: str
    line: int


@dataclass
class Import:
    path: tuple  # segments; a glob's path names the module it imports from
    binding: str | None  # the name it binds: None for a glob or `as _`
    glob: bool
    public: bool  # any `pub`: a re-export
    line: int
    depth: int  # inline `mod { }` blocks around it (each shifts `super` by one)
    module_scope: bool  # binds in the module itself, not in a function or inline module


@dataclass
class Module:
    path: tuple
    file: Path
    lines: list = field(default_factory=list)
    items: dict = field(default_factory=dict)  # name it defines -> public
    declared: dict = field(default_factory=dict)  # `mod x;` -> public
    test_children: set = field(default_factory=set)  # `#[cfg(test)] mod x;`
    imports: list = field(default_factory=list)
    paths: list = field(default_factory=list)  # (segments, line, depth)
    bare_names: set = field(default_factory=set)  # names used alone, as a glob may bind
    test_only: bool = False


def tokenize(text: str) -> list:
    """Rust tokens: strings, chars, numbers and lifetimes as `lit`, doc comments as `doc`,
    plain comments dropped."""
    tokens, line, pos = [], 1, 0
    while pos < len(text):
        if text.startswith("/*", pos):
            depth, end = 1, pos + 2
            while depth and end < len(text):
                if text.startswith("/*", end):
                    depth, end = depth + 1, end + 2
                elif text.startswith("*/", end):
                    depth, end = depth - 1, end + 2
                else:
                    end += 1
            body = text[pos:end]
            if re.match(r"/\*(\*(?![*/])|!)", body):
                tokens.append(Token("doc", body, line))
            line += body.count("\n")
            pos = end
            continue
        match = TOKEN.match(text, pos)
        kind, value = match.lastgroup, match.group()
        if kind in ("str", "char", "num", "lifetime"):
            tokens.append(Token("lit", "", line))
        elif kind in ("doc", "ident", "punct"):
            tokens.append(Token(kind, value, line))
        line += value.count("\n")
        pos = match.end()
    return tokens


def is_punct(tokens: list, i: int, text: str) -> bool:
    return 0 <= i < len(tokens) and tokens[i].kind == "punct" and tokens[i].text == text


def group_end(tokens: list, i: int) -> int:
    """The index just past the bracket group that opens at tokens[i]."""
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j].kind != "punct":
            continue
        if tokens[j].text in ("(", "[", "{"):
            depth += 1
        elif tokens[j].text in (")", "]", "}"):
            depth -= 1
            if depth <= 0:
                return j + 1
    return len(tokens)


def is_public(tokens: list, i: int) -> bool:
    """Whether the declaration whose keyword is tokens[i] has a `pub` visibility."""
    j = i - 1
    while j >= 0 and (tokens[j].text in QUALIFIERS or tokens[j].kind == "lit"):
        j -= 1
    if is_punct(tokens, j, ")"):
        while j >= 0 and not is_punct(tokens, j, "("):
            j -= 1
        j -= 1
    return j >= 0 and tokens[j].text == "pub"


def skip_item(tokens: list, i: int, item_level: bool, module: Module) -> int:
    """The index past the item or statement at tokens[i], which a `#[cfg(test)]` drops; a
    `mod x;` dropped that way makes x a test-only module."""
    while i < len(tokens) and (tokens[i].kind == "doc" or is_punct(tokens, i, "#")):
        i = i + 1 if tokens[i].kind == "doc" else group_end(tokens, i + 1)
    j = i
    if j < len(tokens) and tokens[j].text == "pub":
        j = group_end(tokens, j + 1) if is_punct(tokens, j + 1, "(") else j + 1
    if j + 2 < len(tokens) and tokens[j].text == "mod" and is_punct(tokens, j + 2, ";"):
        module.test_children.add(tokens[j + 1].text)
    item_level = item_level or (j < len(tokens) and tokens[j].text in ITEM_STARTS)
    depth = 0
    while i < len(tokens):
        text = tokens[i].text if tokens[i].kind == "punct" else ""
        if text in ("(", "[", "{"):
            depth += 1
        elif text in (")", "]", "}"):
            if depth == 0:
                return i
            depth -= 1
            if depth == 0 and text == "}":
                return i + 1
        elif depth == 0 and (text == ";" or (text == "," and not item_level)):
            return i + 1
        i += 1
    return i


def parse_use_tree(tokens: list, i: int, prefix: tuple, leaves: list) -> int:
    """Appends the (path, binding, glob, line) leaves of the use tree at tokens[i]; returns
    the index after the tree."""
    segments = list(prefix)
    if is_punct(tokens, i, "::"):
        segments.append("::")  # `::name` always names another crate
        i += 1
    while i < len(tokens):
        if is_punct(tokens, i, "{"):
            i += 1
            while i < len(tokens) and not is_punct(tokens, i, "}"):
                i = parse_use_tree(tokens, i, tuple(segments), leaves)
                if is_punct(tokens, i, ","):
                    i += 1
                elif not is_punct(tokens, i, "}"):
                    return i
            return i + 1
        if is_punct(tokens, i, "*"):
            leaves.append((tuple(segments), None, True, tokens[i].line))
            return i + 1
        if tokens[i].kind != "ident":
            return i
        line = tokens[i].line
        segments.append(tokens[i].text)
        i += 1
        if is_punct(tokens, i, "::"):
            i += 1
            continue
        if segments[-1] == "self":
            segments.pop()
        binding = segments[-1] if segments else None
        if i + 1 < len(tokens) and tokens[i].text == "as":
            binding = None if tokens[i + 1].text == "_" else tokens[i + 1].text
            i += 2
        leaves.append((tuple(segments), binding, False, line))
        return i
    return i


def parse_module(module: Module, text: str) -> None:
    """Fills a module's items, declarations, imports and paths from its source."""
    tokens = tokenize(text)
    braces = []  # "mod" for an inline module's braces, "other" for any other
    inline_mod_next = False
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        item_level = all(b == "mod" for b in braces)
        depth = braces.count("mod")
        module_scope = not braces
        word = tok.text if tok.kind == "ident" else None
        if tok.kind == "doc":
            for match in DOC_PATH.finditer(tok.text):
                line = tok.line + tok.text.count("\n", 0, match.start())
                segments = (match.group(1), *match.group(2).split("::")[1:])
                module.paths.append((segments, line, depth))
            i += 1
        elif is_punct(tokens, i, "#"):
            inner = is_punct(tokens, i + 1, "!")
            start = i + 2 if inner else i + 1
            end = group_end(tokens, start)
            if [t.text for t in tokens[start:end]] != ["[", "cfg", "(", "test", ")", "]"]:
                i += 1
            elif inner:
                module.test_only = module.test_only or module_scope
                i = end
            else:
                i = skip_item(tokens, end, item_level, module)
        elif word == "use":
            public = is_public(tokens, i)
            leaves = []
            i = parse_use_tree(tokens, i + 1, (), leaves)
            for path, binding, glob, line in leaves:
                module.imports.append(
                    Import(path, binding, glob, public, line, depth, module_scope)
                )
        elif word == "pub" and is_punct(tokens, i + 1, "("):
            i = group_end(tokens, i + 1)  # `pub(in crate::x)` names no dependency
        elif word == "mod" and i + 1 < len(tokens) and tokens[i + 1].kind == "ident":
            name = tokens[i + 1].text
            if is_punct(tokens, i + 2, ";"):
                if module_scope:
                    module.declared[name] = is_public(tokens, i)
            else:
                inline_mod_next = True
                if module_scope:
                    module.items[name] = is_public(tokens, i)
            i += 2
        elif word == "macro_rules" and is_punct(tokens, i + 1, "!") and i + 2 < len(tokens):
            if module_scope:
                module.items[tokens[i + 2].text] = True
            i += 3
        elif word in ITEM_KEYWORDS and module_scope and not (
            i > 0 and tokens[i - 1].text in ("<", ",", "*")  # `<const N: usize>`, `*const T`
        ):
            j = i + 1
            while j < len(tokens) and tokens[j].text == "mut":
                j += 1
            if j < len(tokens) and tokens[j].kind == "ident":
                name = tokens[j].text
                if name not in ITEM_KEYWORDS | QUALIFIERS and name != "_":
                    module.items[name] = is_public(tokens, i)
            i += 1
        elif word is not None and not (
            i > 0 and tokens[i - 1].kind == "punct" and tokens[i - 1].text in ("::", ".")
        ):
            segments = [word]
            j = i + 1
            while is_punct(tokens, j, "::") and j + 1 < len(tokens):
                if tokens[j + 1].kind != "ident":
                    break
                segments.append(tokens[j + 1].text)
                j += 2
            if len(segments) > 1:
                module.paths.append((tuple(segments), tok.line, depth))
            else:
                module.bare_names.add(word)
            i = j
        else:
            if is_punct(tokens, i, "{"):
                braces.append("mod" if inline_mod_next else "other")
                inline_mod_next = False
            elif is_punct(tokens, i, "}") and braces:
                braces.pop()
            elif is_punct(tokens, i, ";"):
                inline_mod_next = False
            i += 1


def module_path(src: Path, file: Path) -> tuple:
    parts = file.relative_to(src).with_suffix("").parts
    if parts[-1] == "mod" or parts in (("lib",), ("main",)):
        parts = parts[:-1]
    return tuple(parts)


def is_descendant(path: tuple, of: tuple) -> bool:
    return len(path) > len(of) and path[: len(of)] == of


class Crate:
    """A crate's modules and the names they define, import and re-export.

    A resolved name is ("mod", path) for a module or ("item", path) for an item defined in
    the module at path (either way the path is the module an edge goes to), or EXTERNAL
    for a name a module imports from outside the crate."""

    def __init__(self, src: Path):
        files = [f for f in src.rglob("*.rs") if f.relative_to(src).parts[0] != "bin"]
        if (src / "lib.rs").exists():
            files = [f for f in files if f != src / "main.rs"]  # binaries are other crates
        self.modules = {module_path(src, f): Module(module_path(src, f), f) for f in files}
        for module in self.modules.values():
            text = module.file.read_text(encoding="utf-8")
            module.lines = text.splitlines()
            parse_module(module, text)
        test_roots = [m.path for m in self.modules.values() if m.test_only]
        test_roots += [m.path + (c,) for m in self.modules.values() for c in m.test_children]
        for module in self.modules.values():
            if any(module.path[: len(t)] == t for t in test_roots):
                module.test_only = True

    def lookup(self, where, name, want_module, viewer=None, seen=frozenset()):
        """What `name` is in module `where`: a child module, an item defined there, an import
        (followed to its definition) or a glob import's name; a module first if want_module
        (a path goes on), else an item. With a viewer, only names the viewer may see (public
        ones, or any when the viewer is inside `where`)."""
        module = self.modules.get(where)
        if module is None or (where, name) in seen:
            return None
        seen = seen | {(where, name)}
        inside = viewer is None or viewer[: len(where)] == where
        found, external = [], False
        if where + (name,) in self.modules and (inside or module.declared.get(name, True)):
            found.append(("mod", where + (name,)))
        if name in module.items and (inside or module.items[name]):
            found.append(("item", where))
        for imp in module.imports:
            if imp.module_scope and not imp.glob and imp.binding == name and (inside or imp.public):
                target = self.resolve(where, imp.path, imp.depth, want_module, seen)
                if target:
                    found.append(target)
                external = external or self.leaves_crate(where, imp.path, seen)
        if found:
            return min(found, key=lambda t: (t[0] == "mod") != want_module)
        for imp in module.imports:
            if imp.module_scope and imp.glob and (inside or imp.public):
                source = self.resolve(where, imp.path, imp.depth, True, seen)
                if source and source[0] == "mod":
                    target = self.lookup(source[1], name, want_module, where, seen)
                    if target:
                        return target
        return EXTERNAL if external else None

    def leaves_crate(self, where: tuple, segments: tuple, seen: frozenset) -> bool:
        """Whether a path written in module `where` starts outside the crate."""
        return segments[0] == "::" or (
            segments[0] not in ("crate", "self", "super")
            and self.lookup(where, segments[0], True, None, seen) in (None, EXTERNAL)
        )

    def resolve(self, where, segments, depth, want_module, seen=frozenset()):
        """What a path written in module `where` (inside `depth` inline modules) names, or
        None when it leads out of the crate or to a name the script does not know."""
        if not segments or segments[0] == "::":
            return None
        named_module = False
        if segments[0] == "crate":
            current, rest = ("mod", ()), segments[1:]
        elif segments[0] in ("self", "super"):
            ups = 0
            while segments and segments[0] in ("self", "super"):
                ups += segments[0] == "super"
                segments = segments[1:]
            ups = max(0, ups - depth)
            if ups > len(where):
                return None
            current, rest = ("mod", where[: len(where) - ups]), segments
        else:
            current = self.lookup(where, segments[0], want_module or len(segments) > 1, None, seen)
            if current is None or current == EXTERNAL:
                return None
            rest, named_module = segments[1:], current[0] == "mod"
        for k, name in enumerate(rest):
            if current[0] == "item":
                return current  # the rest is an associated item or a variant
            more = k < len(rest) - 1
            following = self.lookup(current[1], name, want_module or more, None, seen)
            if following == EXTERNAL:
                return None
            if following is None:
                return current if named_module else None
            current = following
            named_module = named_module or current[0] == "mod"
        return current

    def visible_names(self, where: tuple, viewer: tuple, seen=frozenset()) -> set:
        """Every name module `where` binds that `viewer` may see: what a glob imports."""
        module = self.modules.get(where)
        if module is None or where in seen:
            return set()
        inside = viewer[: len(where)] == where
        children = [p[-1] for p in self.modules if len(p) == len(where) + 1 and p[:-1] == where]
        names = {child for child in children if inside or module.declared.get(child, True)}
        names |= {name for name, public in module.items.items() if inside or public}
        for imp in module.imports:
            if not imp.module_scope or not (inside or imp.public):
                continue
            if not imp.glob and imp.binding:
                names.add(imp.binding)
            elif imp.glob:
                source = self.resolve(where, imp.path, imp.depth, True)
                if source and source[0] == "mod":
                    names |= self.visible_names(source[1], where, seen | {where})
        return names

    def edges(self) -> dict:
        """module -> {module it depends on -> (line, note)} for every module but tests'."""
        kept = {path for path, module in self.modules.items() if not module.test_only}
        return {path: self.edges_of(path, kept) for path in sorted(kept)}

    def edges_of(self, path: tuple, kept: set) -> dict:
        """The modules in `kept` that module `path` depends on -> (first line naming each,
        note)."""
        module = self.modules[path]
        found = {}

        def add(target, line, note=""):
            if target in (None, EXTERNAL) or target[1] == path or target[1] not in kept:
                return
            if target[1] not in found or line < found[target[1]][0]:
                found[target[1]] = (line, note)

        bound = set(module.items) | {imp.binding for imp in module.imports if imp.binding}
        bound |= {p[-1] for p in self.modules if len(p) == len(path) + 1 and p[:-1] == path}
        for imp in module.imports:
            if not imp.glob:
                target = self.resolve(path, imp.path, imp.depth, False)
                if not (imp.public and target and is_descendant(target[1], path)):
                    add(target, imp.line)
                continue
            source = self.resolve(path, imp.path, imp.depth, True)
            if not source or source[0] != "mod":
                continue
            names = self.visible_names(source[1], path)
            if not imp.public:
                names &= module.bare_names - bound
            for name in sorted(names):
                target = self.lookup(source[1], name, False, path)
                if not (imp.public and target and is_descendant(target[1], path)):
                    add(target, imp.line, f"{name}, through the glob")
        for segments, line, depth in module.paths:
            add(self.resolve(path, segments, depth, False), line)
        return found


def components(edges: dict) -> list:
    """The strongly-connected components of more than one module (Tarjan), sorted."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(edges[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(result)


def simple_cycles(edges: dict, component: list) -> tuple:
    """The simple cycles inside a component, each from its least module, shortest first; and
    whether the search ran out of its budget before finding them all."""
    cycles, budget = [], SEARCH_BUDGET
    for start in component:
        allowed = {node for node in component if node >= start}
        reaches_start, frontier = {start}, [start]
        while frontier:
            node = frontier.pop()
            for pred in allowed - reaches_start:
                if node in edges[pred]:
                    reaches_start.add(pred)
                    frontier.append(pred)
        path = [start]

        def extend(node):
            nonlocal budget
            for succ in sorted(edges[node]):
                budget -= 1
                if budget < 0:
                    return
                if succ == start:
                    cycles.append(path + [start])
                elif succ in reaches_start and succ not in path:
                    path.append(succ)
                    extend(succ)
                    path.pop()

        extend(start)
    return sorted(cycles, key=lambda c: (len(c), c)), budget < 0


def name(path: tuple, root_file: str = "lib") -> str:
    return "::".join(path) or root_file


def check_crate(src: Path, root: Path, verbose: bool) -> bool:
    """Prints a crate's cycles (and with verbose, its edges); True when it has none."""
    crate = Crate(src)
    edges = crate.edges()
    label = src.parent.name
    root_file = crate.modules[()].file.stem if () in crate.modules else "lib"

    def name_of(path):
        return name(path, root_file)

    def where(frm, to):
        line, note = edges[frm][to]
        file = crate.modules[frm].file
        text = crate.modules[frm].lines[line - 1].strip()
        return f"{file.relative_to(root)}:{line}: {text[:100]}" + (f"  [{note}]" if note else "")

    if verbose:
        for frm in sorted(edges):
            for to in sorted(edges[frm]):
                print(f"{label}: {name_of(frm)} -> {name_of(to)}  ({where(frm, to)})")
    found = components(edges)
    for component in found:
        members = set(component)
        listed = ", ".join(map(name_of, component))
        print(f"{label}: import cycle among {len(component)} modules: {listed}")
        print("  edges:")
        for frm in component:
            for to in sorted(t for t in edges[frm] if t in members):
                print(f"    {name_of(frm)} -> {name_of(to)}  {where(frm, to)}")
        cycles, cut = simple_cycles(edges, component)
        count = f"{len(cycles)}{' or more' if cut else ''}"
        print(f"  simple cycles ({count}):")
        for cycle in cycles[:CYCLES_SHOWN]:
            print(f"    {' -> '.join(map(name_of, cycle))}")
        if len(cycles) > CYCLES_SHOWN:
            more = len(cycles) - CYCLES_SHOWN
            print(f"    … {'at least ' if cut else ''}{more} more")
    folders = folder_cycles(edges)
    for component, through in folders:
        listed = ", ".join(map(name_of, component))
        print(f"{label}: import cycle among the top-level modules {listed} (through their files)")
        print("  edges:")
        for (top, other), (frm, to) in sorted(through.items()):
            print(f"    {name_of(top)} -> {name_of(other)}  {where(frm, to)}")
    return not found and not folders


def top_level(path: tuple) -> tuple:
    """The crate's top-level module a module belongs to (its folder, or itself)."""
    return path[:1]


def folder_cycles(edges: dict) -> list:
    """Cycles among top-level modules, each folder module taken whole (its `mod.rs` and
    everything below it): a file inside `a/` importing `b` while a file inside `b/` imports
    `a` is a cycle between `a` and `b` even when no two files import each other. Each with
    the first file edge behind every arrow between its members."""
    tops: dict = {}
    through: dict = {}
    for frm, targets in edges.items():
        a = top_level(frm)
        tops.setdefault(a, set())
        for to in sorted(targets):
            b = top_level(to)
            tops.setdefault(b, set())
            if a != b and () not in (a, b):
                tops[a].add(b)
                through.setdefault((a, b), (frm, to))
    found = []
    for component in components(tops):
        members = set(component)
        arrows = {k: v for k, v in through.items() if k[0] in members and k[1] in members}
        found.append((component, arrows))
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print every edge")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout holding crates/")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    sources = sorted(root.glob("crates/*/src"))
    results = [check_crate(src, root, args.verbose) for src in sources]
    if not all(results):
        return 1
    print("module cycles: none in", ", ".join(p.parent.name for p in sources))
    return 0


if __name__ == "__main__":
    sys.exit(main())
