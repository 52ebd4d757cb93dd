//! The house style as a test (TigerBeetle's `tidy.zig`, rust-analyzer's `tidy.rs`): every Rust
//! file opens with a `//!` paragraph, lines stay within 100 columns, no debugging or unfinished
//! markers land, every `unsafe` block carries a `// SAFETY:` comment, crates other than the
//! engine and the C ABI forbid unsafe code (those two deny it outside one module each: the
//! io_uring backend, and the C ABI's exported functions), and `docs/format.md` carries the
//! checksum of `wal/src/format/` so the on-disk format cannot change without its document
//! being touched.
//!
//! Functions stay within 70 lines (TigerBeetle's limit) in the code under
//! [`FUNCTION_LENGTH_ROOTS`]: a longer one does several things, and each deserves a name. A
//! function's lines run from its `fn` line to its closing brace, both included, found by a
//! scan that rustfmt's layout makes reliable: a line whose code starts with `fn` (after `pub`,
//! `const`, `async`, `unsafe` or `extern` qualifiers) opens one, its signature ends at the
//! first line ending in `{` (a body), `;` (a declaration) or `}` (a one-line function; these
//! two are skipped), and its body at the first later line that is its own indentation followed
//! by `}`. Test code is exempt: `#[cfg(test)]` modules are skipped, and `tests/` directories
//! lie outside the roots. The roots are a ratchet: a crate joins once its functions fit.

use std::fs;
use std::path::{Path, PathBuf};

use sealog_tests::workspace_root;

/// The files under `directory` (build output, git's store and fuzz corpora aside) whose names
/// `keep` accepts.
fn files_where(directory: &Path, keep: &dyn Fn(&str) -> bool, files: &mut Vec<PathBuf>) {
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
                files_where(&path, keep, files);
            }
        } else if keep(&name) {
            files.push(path);
        }
    }
}

fn workspace_rust_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    files_where(&workspace_root(), &|name| name.ends_with(".rs"), &mut files);
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
fn unsafe_code_lives_in_the_io_uring_backend_and_the_c_abi_only() {
    let root = workspace_root();
    for crate_root in [
        "wal/src/lib.rs",
        "tests/src/lib.rs",
        "cli/src/main.rs",
        "fault-inject/src/lib.rs",
        "fault-inject/src/bin/sealog-fault.rs",
        "logdrive/src/lib.rs",
        "vlog/src/lib.rs",
        "raftstore/src/lib.rs",
        "raftstore/src/bin/sealog-kv.rs",
        "server/src/lib.rs",
        "server/src/bin/sealog-server.rs",
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
    // The C ABI is the second, stated exception: raw pointers and `#[no_mangle]` cannot be
    // had without `unsafe`. Its crate root denies it and allows it on the `ffi` module only.
    let capi = fs::read_to_string(root.join("capi/src/lib.rs")).expect("capi lib.rs");
    assert!(
        capi.contains("#![deny(unsafe_code)]"),
        "capi/src/lib.rs must deny unsafe code outside its ffi module"
    );
    let allowed = ["#[allow(", "unsafe_code)]\npub mod ffi;"].concat();
    assert!(
        capi.contains(allowed.as_str()) && capi.matches("allow(unsafe_code)").count() == 1,
        "capi/src/lib.rs allows unsafe code on its ffi module and nowhere else"
    );
    let unsafe_word = ["unsafe", " "].concat();
    for path in workspace_rust_files() {
        let name = relative(&path);
        if name.starts_with("engine/src/uring/")
            || name.starts_with("capi/src/ffi/")
            || name.starts_with("tests/tests/tidy.rs")
        {
            continue;
        }
        let text = fs::read_to_string(&path).expect("readable");
        for (index, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            assert!(
                !code.contains(unsafe_word.as_str()) || code.contains("unsafe_code"),
                "{name}:{}: unsafe outside engine/src/uring and capi/src/ffi",
                index + 1
            );
        }
    }
}

/// The words of `line` that name a file: a Markdown document (`docs/recovery.md`, `README.md`)
/// or any path that climbs with `../`. Trailing punctuation of the sentence is not part of it.
fn cited_paths(line: &str) -> Vec<&str> {
    line.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/')))
        .map(|word| word.trim_end_matches('.'))
        .filter(|word| {
            let document = word.len() > ".md".len() && word.ends_with(".md");
            document || word.starts_with("../")
        })
        .collect()
}

/// Whether `cited`, written in the file at `path`, names a file inside the repository: read
/// from the repository's root or from the citing file's own folder, as links in Markdown are.
fn resolves_inside(root: &Path, path: &Path, cited: &str) -> bool {
    let folder = path.parent().unwrap_or(root);
    [root.join(cited), folder.join(cited)]
        .iter()
        .filter_map(|candidate| candidate.canonicalize().ok())
        .any(|found| found.starts_with(root))
}

#[test]
fn the_path_scan_finds_documents_and_climbs() {
    // The cases that must not resolve are built at run time, so that this file cites nothing.
    let (md, up) = (".md", "..");
    let outside = format!("see {up}/elsewhere/DESIGN{md}, and the {md} files");
    assert_eq!(
        cited_paths(&outside),
        vec![format!("{up}/elsewhere/DESIGN{md}")]
    );
    let linked = format!("(docs/recovery.md, I-16) and [faults](faults{md}).");
    assert_eq!(
        cited_paths(&linked),
        vec!["docs/recovery.md".to_string(), format!("faults{md}")]
    );
    assert!(cited_paths("no document in `wal/src/format.rs`.").is_empty());
    let root = workspace_root().canonicalize().expect("root");
    let docs = root.join("docs/design.md");
    assert!(resolves_inside(&root, &docs, &format!("recovery{md}")));
    assert!(resolves_inside(&root, &docs, "docs/recovery.md"));
    assert!(!resolves_inside(&root, &docs, &format!("absent{md}")));
    assert!(!resolves_inside(
        &root,
        &docs,
        &format!("{up}/{up}/{up}/README{md}")
    ));
}

/// Every document the code, the docs, the manifests and CI cite lies in the repository: a
/// reader of a clone can follow each one, and none leads to a file beside the checkout.
#[test]
fn every_cited_document_is_in_the_repository() {
    let root = workspace_root().canonicalize().expect("root");
    let text = |name: &str| {
        name == "run"
            || [".rs", ".md", ".toml", ".h", ".c", ".sh", ".yml"]
                .iter()
                .any(|extension| name.ends_with(extension))
    };
    let mut files = Vec::new();
    files_where(&root, &text, &mut files);
    assert!(
        files.len() > 100,
        "the scan found only {} files",
        files.len()
    );
    let mut dangling = Vec::new();
    for path in &files {
        let Ok(content) = fs::read_to_string(path) else {
            continue;
        };
        for (index, line) in content.lines().enumerate() {
            for cited in cited_paths(line) {
                if !resolves_inside(&root, path, cited) {
                    dangling.push(format!("{}:{}: {cited}", relative(path), index + 1));
                }
            }
        }
    }
    assert!(
        dangling.is_empty(),
        "citations of documents that are not in the repository (write what is needed under \
         docs/ and cite that):\n{}",
        dangling.join("\n")
    );
}

/// The checksum of the format's code: every file of `wal/src/format/`, in name order, each
/// preceded by its name, so that a file moved or renamed changes it too.
fn format_checksum(root: &Path) -> String {
    let folder = root.join("wal/src/format");
    let mut files: Vec<PathBuf> = fs::read_dir(&folder)
        .expect("wal/src/format")
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "rs"))
        .collect();
    files.sort();
    let mut crc = 0;
    for path in files {
        let name = path
            .file_name()
            .expect("a name")
            .to_string_lossy()
            .into_owned();
        crc = crc32c::crc32c_append(crc, name.as_bytes());
        crc = crc32c::crc32c_append(crc, &fs::read(&path).expect("readable"));
    }
    format!("{crc:08x}")
}

#[test]
fn the_format_document_is_touched_with_the_format() {
    let root = workspace_root();
    let checksum = format_checksum(&root);
    let document = fs::read_to_string(root.join("docs/format.md")).expect("docs/format.md");
    let line = format!("wal/src/format/ crc32c: {checksum}");
    assert!(
        document.contains(&line),
        "wal/src/format/ changed without docs/format.md: review the document, then record \
         `{line}` in it"
    );
}

/// The most lines a function may take, its `fn` line and closing brace included.
const FUNCTION_LINES_MAX: usize = 70;

/// Where [`FUNCTION_LINES_MAX`] holds: the source of every crate, tests aside (`tests/`
/// directories, `#[cfg(test)]` modules and test-module files).
const FUNCTION_LENGTH_ROOTS: [&str; 11] = [
    "engine/src/",
    "logdrive/src/",
    "cli/src/",
    "capi/src/",
    "wal/src/",
    "bench/src/",
    "fault-inject/src/",
    "wal-kit/src/",
    "vlog/src/",
    "raftstore/src/",
    "server/src/",
];

/// Whether `name` is a file of test code: a `tests.rs` or `*_tests.rs` module that its parent
/// declares under `#[cfg(test)]`.
fn is_test_module(name: &str) -> bool {
    let file = name.rsplit('/').next().unwrap_or(name);
    file == "tests.rs" || file.ends_with("_tests.rs")
}

/// A function found by the scan: its name, the line its `fn` is on (1-based) and how many
/// lines it takes.
#[derive(Debug, PartialEq, Eq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

/// The name of the function a line opens, if its code starts with `fn` after qualifiers.
fn opens_function(line: &str) -> Option<&str> {
    let mut code = line.trim_start();
    loop {
        let before = code;
        if let Some(rest) = code.strip_prefix("pub(") {
            code = rest.split_once(") ").map_or(rest, |(_, after)| after);
        }
        for qualifier in ["pub ", "const ", "async ", "unsafe ", "default "] {
            code = code.strip_prefix(qualifier).unwrap_or(code);
        }
        if let Some(rest) = code.strip_prefix("extern \"") {
            code = rest.split_once("\" ").map_or(rest, |(_, after)| after);
        }
        if code == before {
            break;
        }
    }
    let name = code.strip_prefix("fn ")?;
    let end = name
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(name.len());
    (end > 0).then(|| &name[..end])
}

/// The line index at which the block opened at `start` with `indent` closes: the first later
/// line that is the indentation followed by `}` (rustfmt puts it there).
fn block_end(lines: &[&str], start: usize, indent: &str) -> Option<usize> {
    (start + 1..lines.len()).find(|&index| {
        let line = lines[index].trim_end();
        line.strip_prefix(indent) == Some("}")
    })
}

/// Every function with a body in `text`, `#[cfg(test)]` modules left out.
fn functions(text: &str) -> Vec<Function> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        let indent = &line[..line.len() - line.trim_start().len()];
        let test_module = line.trim() == "#[cfg(test)]"
            && lines.get(index + 1).is_some_and(|next| {
                let next = next.trim();
                (next.starts_with("mod ") || next.starts_with("pub mod ")) && next.ends_with('{')
            });
        if test_module {
            index = block_end(&lines, index + 1, indent).map_or(lines.len(), |end| end + 1);
            continue;
        }
        if let Some(name) = opens_function(line) {
            let signature_end = (index..lines.len()).find(|&at| {
                let code = lines[at].trim_end();
                code.ends_with('{') || code.ends_with(';') || code.ends_with('}')
            });
            let body = signature_end.filter(|&at| lines[at].trim_end().ends_with('{'));
            if let Some(end) = body.and_then(|at| block_end(&lines, at, indent)) {
                found.push(Function {
                    name: name.to_string(),
                    line: index + 1,
                    lines: end - index + 1,
                });
            }
        }
        index += 1;
    }
    found
}

#[test]
fn the_function_scan_finds_bodies_and_skips_declarations_and_test_modules() {
    let text = "\
pub(crate) fn short(a: u32) -> u32 {
    a + 1
}

trait Seam {
    fn declared(
        &self,
    ) -> u32;

    fn provided(&self) -> u32 {
        0
    }
}

pub unsafe extern \"C\" fn spread<T>(
    a: T,
) -> T
where
    T: Copy,
{
    let inner = || {
        a
    };
    inner()
}

fn one_line() -> u32 { 1 }

#[cfg(test)]
mod tests {
    fn skipped() {
    }
}
";
    let found: Vec<(String, usize, usize)> = functions(text)
        .into_iter()
        .map(|function| (function.name, function.line, function.lines))
        .collect();
    let expected = [("short", 1, 3), ("provided", 10, 3), ("spread", 15, 11)];
    let expected: Vec<(String, usize, usize)> = expected
        .iter()
        .map(|(name, line, lines)| (name.to_string(), *line, *lines))
        .collect();
    assert_eq!(found, expected);
}

#[test]
fn functions_stay_within_70_lines() {
    let mut scanned = 0;
    let mut long = Vec::new();
    for path in workspace_rust_files() {
        let name = relative(&path);
        if !FUNCTION_LENGTH_ROOTS
            .iter()
            .any(|root| name.starts_with(root))
            || is_test_module(&name)
        {
            continue;
        }
        let text = fs::read_to_string(&path).expect("readable");
        for function in functions(&text) {
            scanned += 1;
            if function.lines > FUNCTION_LINES_MAX {
                long.push(format!(
                    "{name}:{}: {} is {} lines",
                    function.line, function.name, function.lines
                ));
            }
        }
    }
    assert!(scanned > 100, "the scan found only {scanned} functions");
    assert!(
        long.is_empty(),
        "functions over {FUNCTION_LINES_MAX} lines (split them into steps with names):\n{}",
        long.join("\n")
    );
}

/// The `mod.rs` files whose children may still import items defined in them: none now. A
/// ratchet: a folder that must break the rule for a while is named here, with its reason.
const MOD_RS_IMPORTED_BACK_ALLOWED: [&str; 0] = [];

/// The names of the items `text` defines at its top level (structs, enums, traits, type
/// aliases, functions, constants and statics), not the ones it re-exports.
fn defined_items(text: &str) -> Vec<String> {
    let kinds = [
        "struct ", "enum ", "trait ", "type ", "fn ", "const ", "static ",
    ];
    text.lines()
        .filter(|line| !line.starts_with(' ') && !line.starts_with("//"))
        .filter_map(|line| {
            let code = ["pub(crate) ", "pub(super) ", "pub "]
                .iter()
                .find_map(|visibility| line.strip_prefix(visibility))
                .unwrap_or(line);
            let rest = kinds.iter().find_map(|kind| code.strip_prefix(kind))?;
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// The names a child module takes from its parent: `super::Name` paths and the names inside
/// `use super::{...}`, comments aside.
fn names_from_parent(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
    {
        for (index, _) in line.match_indices("super::") {
            let rest = &line[index + "super::".len()..];
            let list = match rest.strip_prefix('{') {
                Some(list) => list.split('}').next().unwrap_or(""),
                None => rest,
            };
            for part in list.split(',') {
                let name: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    names.push(name);
                }
            }
        }
    }
    names
}

#[test]
fn the_parent_scan_finds_definitions_and_imports() {
    let parent = "pub use child::Thing;\npub(crate) struct Hub {\n}\nfn helper() {}\n";
    assert_eq!(defined_items(parent), vec!["Hub", "helper"]);
    let child = "use super::{Hub, sibling::Other};\n// super::Commented\nlet x = super::helper();";
    assert_eq!(names_from_parent(child), vec!["Hub", "sibling", "helper"]);
}

/// A folder module's `mod.rs` is a hub: its children import from each other, not back from
/// it, so that the folder has no circle through its own root. An item a child needs from
/// `mod.rs` belongs in a sibling module both can import.
#[test]
fn no_mod_rs_is_imported_back_by_its_children() {
    let mut back = Vec::new();
    let mut hubs = 0;
    for path in workspace_rust_files() {
        let name = relative(&path);
        if !name.ends_with("/mod.rs") || name.contains("/tests/") {
            continue;
        }
        hubs += 1;
        let defined = defined_items(&fs::read_to_string(&path).expect("readable"));
        let folder = path.parent().expect("a folder");
        let Ok(children) = fs::read_dir(folder) else {
            continue;
        };
        for child in children.flatten().map(|entry| entry.path()) {
            let child_name = relative(&child);
            if child == path || !child_name.ends_with(".rs") || is_test_module(&child_name) {
                continue;
            }
            let text = fs::read_to_string(&child).expect("readable");
            let text = text.split("#[cfg(test)]\nmod ").next().unwrap_or("");
            for taken in names_from_parent(text) {
                if defined.contains(&taken)
                    && !MOD_RS_IMPORTED_BACK_ALLOWED.contains(&name.as_str())
                {
                    back.push(format!("{child_name} imports {taken} from {name}"));
                }
            }
        }
    }
    assert!(hubs > 3, "the scan found only {hubs} mod.rs files");
    assert!(
        back.is_empty(),
        "children importing from their mod.rs (move the item to a sibling module):\n{}",
        back.join("\n")
    );
}
