//! What a locustfile's helpers need on this machine: loadlab's `locust` package written out
//! of the binary into a cache folder, and a Python interpreter with gevent (the one given, or
//! a virtual environment of loadlab's own, made on first use).

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use include_dir::{include_dir, Dir};

/// loadlab's `locust` package and its helper, shipped in the binary.
static PACKAGE: Dir = include_dir!("$CARGO_MANIFEST_DIR/src/locust/python");

/// The gevent the helpers' users run on (Locust 2.47 asks for gevent ≥ 24.10).
pub const GEVENT: &str = "gevent==26.9.0";

/// What Locust installs and locustfiles import themselves, at the versions Locust 2.47.0
/// installs: `requests` (a token fetched in `test_start`, an `HTTPError` caught) and Flask with
/// the extensions of Locust's web UI (a file that adds routes to it imports them at its top).
pub const LOCUST_DEPENDENCIES: [&str; 4] = [
    "requests==2.34.2",
    "flask==3.1.3",
    "flask-login==0.6.3",
    "flask-cors==6.0.5",
];

/// The modules [`LOCUST_DEPENDENCIES`] give, as a file imports them.
const DEPENDENCY_MODULES: &str = "import gevent, requests, flask, flask_login, flask_cors";

/// loadlab's cache folder: `$XDG_CACHE_HOME/loadlab`, else `~/.cache/loadlab`.
fn cache() -> io::Result<PathBuf> {
    let base = match (std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME")) {
        (Some(x), _) if !x.is_empty() => PathBuf::from(x),
        (_, Some(home)) => Path::new(&home).join(".cache"),
        _ => std::env::temp_dir(),
    };
    Ok(base.join("loadlab"))
}

/// The folder holding the `locust` package and `loadlab_locust`, written once per version of
/// their files.
pub fn package() -> io::Result<PathBuf> {
    // FNV-1a over the files' paths and contents: a new build's package goes to a new folder.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut files = Vec::new();
    collect(&PACKAGE, &mut files);
    for f in &files {
        for b in f
            .path()
            .as_os_str()
            .as_encoded_bytes()
            .iter()
            .chain(f.contents())
        {
            hash = (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    let dir = cache()?.join(format!("locust-{hash:016x}"));
    if dir.join("loadlab_locust").is_dir() {
        return Ok(dir);
    }
    // Written beside, then renamed: a helper never sees half a package.
    let partial = dir.with_extension(format!("partial-{}", std::process::id()));
    for f in &files {
        let path = partial.join(f.path());
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, f.contents())?;
    }
    match std::fs::rename(&partial, &dir) {
        Ok(()) => Ok(dir),
        // Another run wrote it first.
        Err(_) if dir.join("loadlab_locust").is_dir() => {
            let _ = std::fs::remove_dir_all(&partial);
            Ok(dir)
        }
        Err(e) => Err(e),
    }
}

/// The package's files, its tests left out.
fn collect<'a>(dir: &'a Dir<'a>, out: &mut Vec<&'a include_dir::File<'a>>) {
    for f in dir.files() {
        if f.path().extension().is_some_and(|e| e == "py") {
            out.push(f);
        }
    }
    for d in dir.dirs() {
        if !d.path().ends_with("tests") && !d.path().ends_with("__pycache__") {
            collect(d, out);
        }
    }
}

/// The Python interpreter the helpers run on: `$LOADLAB_PYTHON` when set, else a virtual
/// environment of loadlab's own with gevent, made on first use with `python3 -m venv` and
/// `pip` (which reach the package registry once).
pub fn python() -> io::Result<PathBuf> {
    if let Some(p) = std::env::var_os("LOADLAB_PYTHON").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let venv = cache()?.join("locust-venv");
    let python = venv.join("bin").join("python");
    if python.is_file() && has_packages(&python) {
        return Ok(python);
    }
    eprintln!(
        "loadlab locust: making a Python environment with {GEVENT} and {} in {} (once)",
        LOCUST_DEPENDENCIES.join(" "),
        venv.display()
    );
    let run = |cmd: &mut Command, what: &str| -> io::Result<()> {
        let status = cmd.status().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("{what} could not be started ({e}); install Python 3"),
            )
        })?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "{what} failed ({status}); or give a Python with gevent as LOADLAB_PYTHON"
            )))
        }
    };
    if !python.is_file() {
        run(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "python3 -m venv",
        )?;
    }
    run(
        Command::new(venv.join("bin").join("pip"))
            .args(["install", "-q", "--disable-pip-version-check", GEVENT])
            .args(LOCUST_DEPENDENCIES),
        "pip install gevent and Locust's dependencies",
    )?;
    Ok(python)
}

/// True when `python` imports gevent and Locust's dependencies.
fn has_packages(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", DEPENDENCY_MODULES])
        .status()
        .is_ok_and(|s| s.success())
}
