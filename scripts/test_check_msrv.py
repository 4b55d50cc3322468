"""The rust-version check says no when a resolved dependency asks for a newer Rust."""
import importlib.util
import pathlib
import unittest

spec = importlib.util.spec_from_file_location(
    "check_msrv", pathlib.Path(__file__).with_name("check-msrv.py"))
check_msrv = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_msrv)


def metadata(ours, deps, unresolved=()):
    packages = [{"id": "ws", "name": "loadlab", "version": "0.1.0", "rust_version": ours}]
    packages += [{"id": n, "name": n, "version": "1.0.0", "rust_version": r}
                 for n, r in list(deps) + list(unresolved)]
    return {
        "packages": packages,
        "workspace_members": ["ws"],
        "resolve": {"nodes": [{"id": "ws"}] + [{"id": n} for n, _ in deps]},
    }


class RustVersion(unittest.TestCase):
    def test_a_dependency_that_asks_for_more_is_named(self):
        ours, over = check_msrv.newer_than_declared(
            metadata("1.89", [("tokio", "1.70"), ("fancy", "1.90.1"), ("plain", None)]))
        self.assertEqual(ours, "1.89")
        self.assertEqual(over, [("fancy", "1.0.0", "1.90.1")])

    def test_versions_compare_as_numbers_and_unresolved_packages_do_not_count(self):
        ours, over = check_msrv.newer_than_declared(
            metadata("1.89", [("a", "1.9"), ("b", "1.89.0")], unresolved=[("windows", "1.99")]))
        self.assertEqual(over, [])


if __name__ == "__main__":
    unittest.main()
