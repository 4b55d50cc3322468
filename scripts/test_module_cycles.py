"""Unit tests of module-cycles.py on small crates written to a temporary directory."""

import contextlib
import importlib.util
import io
import tempfile
import textwrap
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "module-cycles.py"
spec = importlib.util.spec_from_file_location("module_cycles", SCRIPT)
module_cycles = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module_cycles)


class CrateTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.root = Path(self.tmp.name)

    def write(self, files: dict, crate: str = "x") -> Path:
        """Writes crates/<crate>/src/<path> for each file; returns the src folder."""
        src = self.root / "crates" / crate / "src"
        for path, text in files.items():
            (src / path).parent.mkdir(parents=True, exist_ok=True)
            (src / path).write_text(textwrap.dedent(text))
        return src

    def edges(self, files: dict) -> dict:
        """Each module's edges as {"a": {"b", …}}, the root named "lib"."""
        edges = module_cycles.Crate(self.write(files)).edges()
        name = module_cycles.name
        return {name(m): {name(t) for t in targets} for m, targets in edges.items()}

    def cycles(self, files: dict) -> list:
        """The modules of each strongly-connected component, by name."""
        edges = module_cycles.Crate(self.write(files)).edges()
        return [[module_cycles.name(m) for m in c] for c in module_cycles.components(edges)]

    def run_script(self, *args: str) -> tuple:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = module_cycles.main(["--root", str(self.root), *args])
        return code, out.getvalue()


class ResolvesNames(CrateTest):
    def test_cycle_through_a_lib_reexport(self):
        files = {
            "lib.rs": "pub mod a;\npub mod b;\npub use a::A;\npub use b::B;\n",
            "a.rs": "use crate::B;\npub struct A(B);\n",
            "b.rs": "pub struct B;\nfn f(_: crate::A) {}\n",
        }
        self.assertEqual(self.edges(files), {"lib": set(), "a": {"b"}, "b": {"a"}})
        self.assertEqual(self.cycles(files), [["a", "b"]])

    def test_cycle_through_a_glob_reexport(self):
        files = {
            "lib.rs": "mod a;\nmod b;\npub use a::*;\npub use b::*;\n",
            "a.rs": "use crate::B;\npub struct A;\n",
            "b.rs": "pub struct B;\nfn f() { crate::A::new(); }\n",
        }
        self.assertEqual(self.cycles(files), [["a", "b"]])

    def test_cycle_through_a_renamed_reexport(self):
        files = {
            "lib.rs": "mod a;\nmod b;\npub use b::Bee as B;\n",
            "a.rs": "use crate::B;\npub struct A;\n",
            "b.rs": "pub struct Bee;\nuse crate::a::A as Ay;\n",
        }
        self.assertEqual(self.cycles(files), [["a", "b"]])

    def test_cycle_through_a_nested_group(self):
        files = {
            "lib.rs": "mod a;\nmod b;\nmod c;\n",
            "a.rs": "use crate::{c::C, b::{B, Bee as Bb}};\npub struct A;\n",
            "b.rs": "pub struct B;\npub struct Bee;\n",
            "c.rs": "use crate::{a::{self, A}};\npub struct C;\n",
        }
        self.assertEqual(self.edges(files)["a"], {"b", "c"})
        self.assertEqual(self.cycles(files), [["a", "c"]])

    def test_cycle_through_super(self):
        files = {
            "lib.rs": "mod m;\n",
            "m/mod.rs": "mod a;\nmod b;\n",
            "m/a.rs": "use super::b::B;\npub struct A;\n",
            "m/b.rs": "pub struct B;\nfn f() -> super::super::m::a::A { todo!() }\n",
        }
        self.assertEqual(self.cycles(files), [["m::a", "m::b"]])

    def test_cycle_through_a_multiline_use_and_a_chain_of_reexports(self):
        files = {
            "lib.rs": "pub mod a;\npub mod m;\npub use m::*;\n",
            "m/mod.rs": "mod deep;\npub(crate) use self::deep::Thing as M;\n",
            "m/deep.rs": "pub struct Thing;\nuse crate::a::A;\n",
            "a.rs": "use crate::{\n    m::{\n        M,\n    },\n};\npub struct A;\n",
        }
        self.assertEqual(self.edges(files)["a"], {"m::deep"})
        self.assertEqual(self.cycles(files), [["a", "m::deep"]])

    def test_a_child_naming_what_its_parent_defines_is_an_edge(self):
        files = {
            "lib.rs": "mod a;\npub struct Shared;\nfn f() { a::handler(); }\n",
            "a.rs": "use crate::Shared;\npub fn handler() {}\n",
        }
        self.assertEqual(self.cycles(files), [["lib", "a"]])

    def test_a_private_glob_is_an_edge_to_what_the_module_uses(self):
        files = {
            "lib.rs": "mod a;\nmod b;\nmod c;\npub use b::*;\npub use c::*;\n",
            "a.rs": "use crate::*;\nfn f() -> C { todo!() }\n",
            "b.rs": "pub struct B;\nuse crate::a;\n",
            "c.rs": "pub struct C;\n",
        }
        self.assertEqual(self.edges(files)["a"], {"c"})
        self.assertEqual(self.cycles(files), [])

    def test_inline_paths_and_doc_comments(self):
        files = {
            "lib.rs": "mod a;\nmod b;\nmod c;\npub use b::B;\n",
            "a.rs": """
                /// Built from a [`crate::B`].
                pub struct A;
                fn f() { crate::c::C::new(); }
            """,
            "b.rs": "pub struct B;\n",
            "c.rs": "pub struct C;\n",
        }
        self.assertEqual(self.edges(files)["a"], {"b", "c"})

    def test_an_inline_module_belongs_to_its_file(self):
        files = {
            "lib.rs": "mod a;\nmod plan;\n",
            "plan.rs": """
                pub mod defaults {
                    use super::Plan;
                    pub fn x() {}
                }
                pub struct Plan;
            """,
            "a.rs": "fn f() { crate::plan::defaults::x(); }\n",
        }
        self.assertEqual(self.edges(files), {"lib": set(), "a": {"plan"}, "plan": set()})

    def test_super_in_an_inline_module_is_its_file(self):
        files = {
            "lib.rs": "mod m;\n",
            "m/mod.rs": "mod a;\nmod b;\npub use b::Thing;\n",
            "m/a.rs": "pub struct Thing;\nmod inner {\n    use super::Thing;\n}\n",
            "m/b.rs": "pub struct Thing;\n",
        }
        self.assertEqual(self.edges(files)["m::a"], set())

    def test_self_in_a_group_binds_the_module(self):
        files = {
            "lib.rs": "mod a;\nmod m;\n",
            "m/mod.rs": "mod deep;\npub use deep::Thing;\n",
            "m/deep.rs": "pub struct Thing;\n",
            "a.rs": "use crate::m::{self};\nfn f() { m::Thing::new(); }\n",
        }
        self.assertEqual(self.edges(files)["a"], {"m", "m::deep"})


class IgnoresWhatIsNoDependency(CrateTest):
    def test_a_parent_reexporting_its_children_is_not_a_cycle(self):
        files = {
            "lib.rs": "pub mod a;\npub mod b;\npub use a::A;\npub use crate::b::*;\n",
            "a.rs": "use crate::B;\npub struct A;\n",
            "b.rs": "pub struct B;\n",
        }
        self.assertEqual(self.edges(files), {"lib": set(), "a": {"b"}, "b": set()})

    def test_test_modules_reach_anywhere(self):
        files = {
            "lib.rs": "mod a;\nmod b;\n#[cfg(test)]\nmod fuzz;\n",
            "a.rs": """
                pub struct A;
                #[cfg(test)]
                mod tests {
                    use crate::b::B;
                    fn f() { let s = "}"; crate::b::g(); }
                }

                pub fn after() {}
            """,
            "b.rs": """
                use crate::a::A;
                pub struct B;
                pub fn g() {}
                #[cfg(test)]
                mod tests {
                    use super::*;
                }
            """,
            "fuzz.rs": "use crate::a::A;\nuse crate::b::B;\n",
        }
        self.assertEqual(self.edges(files), {"lib": set(), "a": set(), "b": {"a"}})

    def test_other_crates_with_a_module_name_are_no_edge(self):
        files = {
            "lib.rs": "mod a;\nmod serde;\nmod m;\n",
            "a.rs": """
                use serde::Serialize;
                use ::serde::de;
                fn f() { serde::json(); std::mem::drop(1); }
                use crate::m::Json;
            """,
            "serde.rs": "use crate::a;\n",
            "m.rs": "pub use serde_json::Value as Json;\nuse crate::a;\n",
        }
        self.assertEqual(self.edges(files)["a"], set())
        self.assertEqual(self.cycles(files), [])

    def test_a_lifetime_is_no_item(self):
        files = {
            "lib.rs": "mod a;\npub fn name() -> &'static str { \"x\" }\n",
            "a.rs": "use super::*;\nfn f(_: &str) {}\n",
        }
        self.assertEqual(self.edges(files)["a"], set())

    def test_comments_and_strings_are_no_edge(self):
        files = {
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": """
                // use crate::b::B;
                /* crate::b::B */
                const S: &str = "crate::b::B";
                const R: &str = r#"crate::b"#;
            """,
            "b.rs": "use crate::a;\n",
        }
        self.assertEqual(self.edges(files)["a"], set())


class Reports(CrateTest):
    def test_a_one_way_chain_passes(self):
        self.write({
            "lib.rs": "mod a;\nmod b;\nmod c;\npub use c::C;\n",
            "a.rs": "use crate::b::B;\n",
            "b.rs": "pub struct B(crate::C);\n",
            "c.rs": "pub struct C;\n",
        })
        code, out = self.run_script()
        self.assertEqual(code, 0)
        self.assertEqual(out, "module cycles: none in x\n")

    def test_a_cycle_prints_its_modules_edges_and_cycles(self):
        self.write({
            "lib.rs": "mod a;\nmod b;\npub use b::B;\n",
            "a.rs": "use crate::B;\npub struct A;\n",
            "b.rs": "pub struct B;\n\nuse crate::a::A;\n",
        })
        self.write({"lib.rs": "mod one;\n", "one.rs": "use crate::one::X;\n"}, crate="y")
        code, out = self.run_script()
        self.assertEqual(code, 1)
        self.assertIn("x: import cycle among 2 modules: a, b", out)
        self.assertIn("a -> b  crates/x/src/a.rs:1: use crate::B;", out)
        self.assertIn("b -> a  crates/x/src/b.rs:3: use crate::a::A;", out)
        self.assertIn("a -> b -> a", out)
        self.assertNotIn("y:", out)

    def test_every_simple_cycle_is_found_once(self):
        nodes = [("a",), ("b",), ("c",), ("d",)]
        edges = {n: {m for m in nodes if m != n} for n in nodes}
        cycles, cut = module_cycles.simple_cycles(edges, nodes)
        self.assertFalse(cut)
        self.assertEqual([len(c) - 1 for c in cycles], [2] * 6 + [3] * 8 + [4] * 6)
        self.assertEqual(cycles[0], [("a",), ("b",), ("a",)])

    def test_verbose_prints_every_edge(self):
        self.write({
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::B;\n",
            "b.rs": "pub struct B;\n",
        })
        code, out = self.run_script("-v")
        self.assertEqual(code, 0)
        self.assertIn("x: a -> b  (crates/x/src/a.rs:1: use crate::b::B;)", out)


if __name__ == "__main__":
    unittest.main()


class FolderModules(CrateTest):
    def test_two_folders_whose_files_use_each_other_are_a_cycle(self):
        # No two files import each other, but folder `h` (its parser) is used by `x`, and a
        # file inside `h` uses `x`: the folders depend on each other.
        self.write({
            "lib.rs": "mod h;\nmod x;\n",
            "h/mod.rs": "mod parse;\nmod conn;\npub use parse::Parser;\n",
            "h/parse.rs": "pub struct Parser;\n",
            "h/conn.rs": "use crate::x::Wire;\npub struct Conn(Wire);\n",
            "x.rs": "use crate::h::Parser;\npub struct Wire(Parser);\n",
        })
        self.assertEqual(self.cycles({}), [], "no file-level cycle")
        code, out = self.run_script()
        self.assertEqual(code, 1, out)
        self.assertIn("top-level modules h, x", out)
        self.assertIn("h/conn.rs:1", out)

    def test_a_folder_using_its_own_files_and_a_leaf_outside_is_fine(self):
        self.write({
            "lib.rs": "mod conn;\nmod codec;\n",
            "codec.rs": "pub struct Parser;\n",
            "conn/mod.rs": "mod wire;\nmod one;\nuse wire::Wire;\nuse one::One;\n",
            "conn/wire.rs": "use crate::codec::Parser;\npub struct Wire(Parser);\n",
            "conn/one.rs": "use super::wire::Wire;\npub struct One(Wire);\n",
        })
        code, out = self.run_script()
        self.assertEqual(code, 0, out)
