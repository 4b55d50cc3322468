//! Rebuilds the engine when the Python files it embeds (loadlab's `locust` package) change:
//! cargo follows only the Rust sources on its own.

fn main() {
    println!("cargo:rerun-if-changed=src/locust/python");
}
