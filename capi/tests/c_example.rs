//! The C examples (`capi/examples/pipeline.c`, the engine's appends; `capi/examples/bookie.c`,
//! the LogDrive store as a bookie uses it) compiled with the system C compiler (`$CC`, else
//! `cc`), every warning an error, against the checked-in header and the static library cargo
//! built for this profile (`libsealog_capi.a`, beside this test's executable in
//! `target/<profile>/deps`), then run on a ring in a temporary directory: each must exit 0,
//! and its output is printed. Without a C
//! compiler the test fails under CI (`CI=true`) and is skipped, loudly, elsewhere.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The static library cargo built with this test, next to this executable
/// (`target/<profile>/deps`, where `cargo test` leaves it: only `cargo build` copies it up to
/// `target/<profile>`), checked to be at least as new as every source its dep-info file
/// (`sealog_capi.d`, beside it) lists: a stale one would test old code.
fn static_library(workspace: &Path) -> PathBuf {
    let executable = std::env::current_exe().expect("the test's own path");
    let deps = executable
        .parent()
        .expect("tests run from target/<profile>/deps");
    let library = deps.join("libsealog_capi.a");
    let built = std::fs::metadata(&library)
        .and_then(|meta| meta.modified())
        .unwrap_or_else(|error| {
            panic!(
                "{}: not built ({error}); cargo builds it with this test \
                 (crate-type staticlib in capi/Cargo.toml)",
                library.display()
            )
        });
    let dep_info = deps.join("sealog_capi.d");
    let rules = std::fs::read_to_string(&dep_info)
        .unwrap_or_else(|error| panic!("{}: {error}", dep_info.display()));
    let first_rule = rules.lines().next().unwrap_or_default();
    let (_, sources) = first_rule
        .split_once(": ")
        .expect("a make rule: target: sources");
    for source in sources.split_whitespace() {
        let modified = std::fs::metadata(workspace.join(source)).and_then(|meta| meta.modified());
        assert!(
            modified.is_ok_and(|modified| modified <= built),
            "{} is older than {source}: cargo did not rebuild it",
            library.display()
        );
    }
    library
}

/// The C compiler, or `None` (with the reason printed) where there is none and CI is not set.
fn c_compiler() -> Option<String> {
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    match Command::new(&compiler).arg("--version").output() {
        Ok(output) if output.status.success() => Some(compiler),
        outcome => {
            let why = format!("the C compiler `{compiler}` does not run ({outcome:?})");
            assert!(
                std::env::var("CI").map_or(true, |ci| ci != "true"),
                "{why}: CI must build the C example (install gcc)"
            );
            eprintln!("SKIPPED c_example: {why}; set CC or install gcc to run it");
            None
        }
    }
}

/// Compiles `capi/examples/NAME.c` with every warning an error, runs it on a temporary
/// directory, prints its output and checks that it ends with `NAME: ok`.
fn build_and_run(name: &str) {
    let Some(compiler) = c_compiler() else {
        return;
    };
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let library = static_library(crate_dir.parent().expect("capi/ sits in the workspace"));
    let scratch = tempfile::tempdir().expect("a temporary directory");
    let program = scratch.path().join(name);
    let source = crate_dir.join(format!("examples/{name}.c"));
    let compiled = Command::new(&compiler)
        .args([
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Wpedantic",
            "-Werror",
            "-O1",
            "-I",
        ])
        .arg(crate_dir.join("include"))
        .arg(&source)
        .arg(&library)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&program)
        .output()
        .expect("the C compiler runs");
    assert!(
        compiled.status.success(),
        "{compiler} failed on capi/examples/{name}.c ({}):\n{}{}",
        compiled.status,
        String::from_utf8_lossy(&compiled.stdout),
        String::from_utf8_lossy(&compiled.stderr)
    );
    let ran = Command::new(&program)
        .arg(scratch.path())
        .output()
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&ran.stdout);
    let stderr = String::from_utf8_lossy(&ran.stderr);
    println!("capi/examples/{name}.c, built with {compiler}:\n{stdout}{stderr}");
    assert!(
        ran.status.success(),
        "the C example {name}.c failed ({})",
        ran.status
    );
    assert!(
        stdout.contains(&format!("{name}: ok")),
        "the C example {name}.c did not finish"
    );
}

#[test]
fn the_c_pipeline_example_runs() {
    build_and_run("pipeline");
}

#[test]
fn the_c_bookie_example_runs() {
    build_and_run("bookie");
}
