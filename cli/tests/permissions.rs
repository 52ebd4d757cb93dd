//! Rings are owner-only by default: `format` makes the ring's directory 0700 and its files
//! 0600 (an existing empty directory too), and `inspect` warns, naming each path and its mode,
//! when group or other may read or write any of them (plain report on stderr, and in `--json`
//! as `open_to_others`), without failing.

mod common;

use common::sealog;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn format_makes_rings_owner_only_and_inspect_warns_when_they_are_not() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    // An empty directory that group and other may read: format makes it owner-only.
    std::fs::create_dir(&ring).expect("mkdir");
    std::fs::set_permissions(&ring, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = ring.to_str().expect("utf-8");
    let output = sealog(&["format", path, "--size", "8MiB", "--segment-size", "1MiB"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(mode(&ring), 0o700);
    let files: Vec<_> = std::fs::read_dir(&ring)
        .expect("list")
        .flatten()
        .map(|entry| entry.path())
        .collect();
    assert!(files.len() >= 8, "control and segments: {files:?}");
    for file in &files {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
    let output = sealog(&["inspect", path]);
    assert_eq!(output.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&output.stderr).contains("warning"));

    let segment = ring.join("segment-00001");
    std::fs::set_permissions(&ring, std::fs::Permissions::from_mode(0o750)).expect("chmod");
    std::fs::set_permissions(&segment, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let output = sealog(&["inspect", path]);
    assert_eq!(output.status.code(), Some(0), "a warning, not a failure");
    let warnings = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        warnings.contains(&format!("{path} is open to others")),
        "{warnings}"
    );
    assert!(
        warnings.contains("(mode 0750)") && warnings.contains("chmod 0700"),
        "{warnings}"
    );
    assert!(
        warnings.contains("segment-00001 is open to others"),
        "{warnings}"
    );
    assert!(
        warnings.contains("(mode 0644)") && warnings.contains("chmod 0600"),
        "{warnings}"
    );
    let output = sealog(&["inspect", path, "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    let open: Vec<(String, String)> = json["open_to_others"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|entry| {
            (
                entry["path"].as_str().expect("path").to_string(),
                entry["mode"].as_str().expect("mode").to_string(),
            )
        })
        .collect();
    assert_eq!(
        open,
        [
            (path.to_string(), "0750".to_string()),
            (segment.display().to_string(), "0644".to_string())
        ]
    );
}
