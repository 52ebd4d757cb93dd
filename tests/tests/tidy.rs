//! The house style as a test (TigerBeetle's `tidy.zig`, rust-analyzer's `tidy.rs`): every Rust
//! file opens with a `//!` paragraph, lines stay within 100 columns, no debugging or unfinished
//! markers land, every `unsafe` block carries a `// SAFETY:` comment, crates other than the
//! engine forbid unsafe code, and `docs/format.md` carries the checksum of `wal/src/format.rs`
//! so the on-disk format cannot change without its document being touched.

use std::fs;
use std::path::{Path, PathBuf};

use sealog_tests::workspace_root;

fn rust_files(directory: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(directory) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !matches!(
                name.as_ref(),
                "target" | ".git" | "corpus" | "artifacts" | "coverage"
            ) {
                rust_files(&path, files);
            }
        } else if name.ends_with(".rs") {
            files.push(path);
        }
    }
}

fn workspace_rust_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&workspace_root(), &mut files);
    assert!(
        files.len() > 10,
        "tidy found only {} Rust files",
        files.len()
    );
    files
}

fn relative(path: &Path) -> String {
    path.strip_prefix(workspace_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    for path in workspace_rust_files() {
        let text = fs::read_to_string(&path).expect("readable");
        let first = text
            .lines()
            .find(|line| !line.trim().is_empty())
            .unwrap_or("");
        assert!(
            first.starts_with("//!"),
            "{} does not open with a //! paragraph",
            relative(&path)
        );
    }
}

#[test]
fn lines_stay_within_100_columns() {
    for path in workspace_rust_files() {
        let text = fs::read_to_string(&path).expect("readable");
        for (index, line) in text.lines().enumerate() {
            let columns = line.chars().count();
            assert!(
                columns <= 100,
                "{}:{} is {columns} columns",
                relative(&path),
                index + 1
            );
        }
    }
}

#[test]
fn no_debugging_or_unfinished_markers() {
    // Spelled in pieces so this file does not trip itself.
    let markers = [
        ["db", "g!("].concat(),
        ["to", "do!("].concat(),
        ["FIX", "ME"].concat(),
    ];
    for path in workspace_rust_files() {
        let text = fs::read_to_string(&path).expect("readable");
        for (index, line) in text.lines().enumerate() {
            for marker in &markers {
                assert!(
                    !line.contains(marker.as_str()),
                    "{}:{}: {marker}",
                    relative(&path),
                    index + 1
                );
            }
        }
    }
}

#[test]
fn every_unsafe_block_says_why_it_is_sound() {
    let unsafe_block = ["unsafe", " {"].concat();
    for path in workspace_rust_files() {
        let text = fs::read_to_string(&path).expect("readable");
        let lines: Vec<&str> = text.lines().collect();
        for (index, line) in lines.iter().enumerate() {
            if line.contains(unsafe_block.as_str()) && !line.trim_start().starts_with("//") {
                let above = &lines[index.saturating_sub(6)..index];
                assert!(
                    above.iter().any(|line| line.contains("// SAFETY:")),
                    "{}:{}: unsafe block without a // SAFETY: comment",
                    relative(&path),
                    index + 1
                );
            }
        }
    }
}

#[test]
fn unsafe_code_lives_in_the_io_uring_backend_only() {
    let root = workspace_root();
    for crate_root in [
        "wal/src/lib.rs",
        "tests/src/lib.rs",
        "cli/src/main.rs",
        "fault-inject/src/lib.rs",
        "fault-inject/src/bin/sealog-fault.rs",
    ] {
        let text = fs::read_to_string(root.join(crate_root)).expect("crate root");
        assert!(
            text.contains("#![forbid(unsafe_code)]"),
            "{crate_root} must forbid unsafe code"
        );
    }
    let engine = fs::read_to_string(root.join("engine/src/lib.rs")).expect("engine lib.rs");
    assert!(
        engine.contains("#![deny(unsafe_code)]"),
        "the engine denies unsafe outside uring"
    );
    let unsafe_word = ["unsafe", " "].concat();
    for path in workspace_rust_files() {
        let name = relative(&path);
        if name.starts_with("engine/src/uring/") || name.starts_with("tests/tests/tidy.rs") {
            continue;
        }
        let text = fs::read_to_string(&path).expect("readable");
        for (index, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            assert!(
                !code.contains(unsafe_word.as_str()) || code.contains("unsafe_code"),
                "{name}:{}: unsafe outside engine/src/uring",
                index + 1
            );
        }
    }
}

#[test]
fn the_format_document_is_touched_with_the_format() {
    let root = workspace_root();
    let format = fs::read(root.join("wal/src/format.rs")).expect("format.rs");
    let checksum = format!("{:08x}", crc32c::crc32c(&format));
    let document = fs::read_to_string(root.join("docs/format.md")).expect("docs/format.md");
    let line = format!("wal/src/format.rs crc32c: {checksum}");
    assert!(
        document.contains(&line),
        "wal/src/format.rs changed without docs/format.md: review the document, then record \
         `{line}` in it"
    );
}
