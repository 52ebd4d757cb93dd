//! The benchmark on a raw block device (`--device`): a loop device with direct I/O and 4096-byte
//! sectors stands in for an NVMe namespace. Every ring goes on the device, sized to fit it, and
//! the JSON describes the device itself. Needs root; under CI=true it must run.

use std::process::Command;

use sealog_tests::loop_device_or_skip;

#[test]
fn the_quick_benchmark_runs_on_a_block_device() {
    let directory = tempfile::tempdir_in(".").expect("tempdir");
    let test = "sealog-bench --device";
    let Some(device) = loop_device_or_skip(directory.path(), 320 << 20, 4096, test) else {
        return;
    };
    let json_path = directory.path().join("bench.json");
    let output = Command::new(env!("CARGO_BIN_EXE_sealog-bench"))
        // 64 KiB appends fill this small ring within the cell unless the writers trim in
        // proportion to the ring (they once kept a fixed 8,192 entries: 512 MiB).
        .args([
            "--quick",
            "--seconds",
            "0.5",
            "--cell",
            "65536x4x16",
            "--dir",
        ])
        .arg(directory.path())
        .arg("--device")
        .arg(&device.path)
        .arg("--json")
        .arg(&json_path)
        .output()
        .expect("runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&json_path).expect("json written");
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let storage = &json["machine"]["storage"];
    assert_eq!(storage["raw_block_device"], true, "{storage}");
    assert_eq!(storage["logical_block_bytes"], 4096, "{storage}");
    assert_eq!(
        json["device"].as_str(),
        Some(device.path.to_string_lossy().as_ref())
    );
    // The recovery ring fits the 320 MiB device, and replay found what was appended.
    assert!(json["recovery"]["ring_bytes"].as_u64() <= Some(320 << 20));
    assert!(json["recovery"]["entries"].as_u64() > Some(0));
    let cells = json["cells"].as_array().expect("cells");
    assert!(cells
        .iter()
        .any(|cell| cell["engine"] == "sealog" && cell["appends_per_sec"].as_f64() > Some(0.0)));
    // The device node is still there (nothing removed it as if it were a scratch file).
    assert!(device.path.exists());
}
