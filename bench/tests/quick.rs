//! The README's main job runs: a very short quick benchmark, and the JSON fields scripts rely
//! on are there for every cell (engine, payload_bytes, writers, in_flight, appends_per_sec,
//! mb_per_sec, p50_us, p99_us, p999_us, ratio_to_ceiling), with a 4 KiB pipelined cell; the
//! machine description and the targets are in the JSON; the plot is an SVG.

use std::process::Command;

#[test]
fn the_quick_benchmark_writes_the_json_contract() {
    let directory = tempfile::tempdir_in(".").expect("tempdir");
    let json_path = directory.path().join("bench.json");
    let plot_path = directory.path().join("bench.svg");
    let output = Command::new(env!("CARGO_BIN_EXE_sealog-bench"))
        .args(["--quick", "--seconds", "0.3", "--dir"])
        .arg(directory.path())
        .arg("--json")
        .arg(&json_path)
        .arg("--plot")
        .arg(&plot_path)
        .output()
        .expect("runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(
        table.contains("ceiling-builtin") && table.contains("sealog"),
        "{table}"
    );
    let text = std::fs::read_to_string(&json_path).expect("json written");
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let cells = json["cells"].as_array().expect("a cells array");
    let fields = [
        "engine",
        "payload_bytes",
        "writers",
        "in_flight",
        "appends_per_sec",
        "mb_per_sec",
        "p50_us",
        "p99_us",
        "p999_us",
        "ratio_to_ceiling",
    ];
    for cell in cells {
        for field in fields {
            assert!(!cell[field].is_null(), "{field} missing in {cell}");
        }
    }
    let pipelined = cells.iter().any(|cell| {
        cell["engine"] == "sealog"
            && cell["payload_bytes"] == 4096
            && cell["in_flight"].as_u64() > Some(1)
    });
    assert!(pipelined, "a 4 KiB pipelined sealog cell");
    assert!(cells.iter().any(|cell| cell["engine"] == "ceiling-builtin"));
    assert!(cells
        .iter()
        .all(|cell| cell["appends_per_sec"].as_f64() > Some(0.0)));
    // At least 256 appends in flight in the deep cells, as the targets are stated.
    let deep = cells.iter().any(|cell| {
        cell["engine"] == "sealog"
            && cell["writers"].as_u64().unwrap_or(0) * cell["in_flight"].as_u64().unwrap_or(0)
                >= 256
    });
    assert!(deep, "a sealog cell with at least 256 appends in flight");

    let storage = &json["machine"]["storage"];
    for field in ["file_system", "write_cache", "fua", "physical_block_bytes"] {
        assert!(
            storage.get(field).is_some(),
            "machine.storage.{field} in {storage}"
        );
    }
    assert!(json["machine"]["kernel"].as_str().is_some());
    assert!(json["ring_block_bytes"].as_u64() >= Some(512));
    let targets = json["targets"].as_array().expect("a targets array");
    assert!(targets.len() >= 7, "{targets:?}");
    assert!(json["recovery"]["ratio_to_ceiling"].as_f64() > Some(0.0));
    // Tail markers: none while the cells keep the log busy, one per idle period.
    for cell in cells.iter().filter(|cell| cell["engine"] == "sealog") {
        assert_eq!(cell["tail_markers"].as_u64(), Some(0), "a busy cell: {cell}");
    }
    let markers = &json["tail_markers"];
    assert!(markers["idle_periods"].as_u64() > Some(0), "{markers}");
    assert_eq!(markers["markers"], markers["idle_periods"], "{markers}");

    let svg = std::fs::read_to_string(&plot_path).expect("plot written");
    assert!(svg.starts_with("<svg"), "an SVG plot");
}
