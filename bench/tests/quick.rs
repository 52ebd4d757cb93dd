//! The README's main job runs: a very short quick benchmark, and the JSON fields scripts rely
//! on are there for every cell (engine, payload_bytes, writers, in_flight, appends_per_sec,
//! mb_per_sec, p50_us, p99_us, p999_us, ratio_to_ceiling), with a 4 KiB pipelined cell; the
//! raw paths (write + linked fdatasync, RWF_DSYNC, at queue depth 1) and the raw write
//! bandwidth are ceiling cells with the same fields, and the sync method the run's ring chose
//! is reported with its figures; the machine description and the targets are in the JSON, with
//! CPU per append and the single-writer rounds against the peers (with `--features peers`); the
//! plot is an SVG. Issue 11's read and open sections are in the JSON (`reads`, `open_times`),
//! so is the composition section (`compose`), and the server section (`server`), and
//! `--section` runs a section alone.

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
    let engine = |name: &str| cells.iter().find(|cell| cell["engine"] == name);
    let raw_fdatasync = engine("raw-fdatasync").expect("a raw write + fdatasync cell");
    assert_eq!(
        raw_fdatasync["payload_bytes"], 8192,
        "a 4 KiB append's write"
    );
    assert!(engine("raw-dsync").or(engine("raw-dsync-fua")).is_some());
    let raw_write = engine("raw-write-nosync").expect("a raw write bandwidth cell");
    assert!(raw_write["in_flight"].as_u64() > Some(1), "{raw_write}");
    assert!(
        table.contains("1 writer x 4 KiB: sealog p50"),
        "the raw paths beside the single writer: {table}"
    );
    let sync = &json["sync_method"];
    assert!(
        sync["ring_choice"] == "fdatasync" || sync["ring_choice"] == "dsync",
        "{sync}"
    );
    assert!(sync["measurement"]["rounds"].as_u64() >= Some(4), "{sync}");
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
    assert!(
        targets.iter().any(|target| target["name"]
            .as_str()
            .is_some_and(|name| name.contains("raw write bandwidth"))
            && target["goal"] == 0.8),
        "{targets:?}"
    );
    assert!(json["recovery"]["ratio_to_ceiling"].as_f64() > Some(0.0));
    // Issue 10's figures: CPU per append in sealog's cells, and the single writer against
    // the peers in interleaved rounds (judged only when the peers are built in).
    for cell in cells.iter().filter(|cell| cell["engine"] == "sealog") {
        assert!(cell["cpu_us_per_append"].as_f64() > Some(0.0), "{cell}");
    }
    let rounds = &json["single_writer_rounds"];
    assert_eq!(
        rounds["judged"].as_bool(),
        Some(cfg!(feature = "peers")),
        "{rounds}"
    );
    if cfg!(feature = "peers") {
        assert_eq!(rounds["runs"].as_array().map(Vec::len), Some(9), "{rounds}");
        assert_eq!(
            rounds["medians"].as_array().map(Vec::len),
            Some(3),
            "{rounds}"
        );
        assert!(rounds["sealog_p50_over_best_peer_p50"].as_f64() > Some(0.0));
    }
    // Tail markers: a busy cell writes one only when a stall leaves the log idle for the
    // marker's whole idle time (so never more than its duration over that time, against
    // hundreds of batches per second); a writer idle between appends, one per idle period
    // (fewer only if the drive thread itself stalled past the next append).
    let markers = &json["tail_markers"];
    let idle_seconds = markers["idle_us"].as_f64().expect("idle_us") / 1e6;
    let seconds = json["seconds_per_cell"].as_f64().expect("seconds_per_cell");
    for cell in cells.iter().filter(|cell| cell["engine"] == "sealog") {
        let written = cell["tail_markers"].as_f64().expect("tail_markers");
        assert!(written <= seconds / idle_seconds, "a busy cell: {cell}");
    }
    let periods = markers["idle_periods"].as_u64().expect("idle_periods");
    let written = markers["markers"].as_u64().expect("markers");
    assert!(
        periods > 0 && written <= periods && 2 * written >= periods,
        "{markers}"
    );

    let svg = std::fs::read_to_string(&plot_path).expect("plot written");
    assert!(svg.starts_with("<svg"), "an SVG plot");

    check_read_and_open_sections(&json);
    check_logdrive_section(&json);
    check_compose_section(&json);
    check_raft_section(&json);
    check_server_section(&json);
}

/// The server section in the JSON: every engine at 1 and 256 in flight, with appends
/// measured and its ratios to the engine append and to the AtomicLog over a local quorum.
fn check_server_section(json: &serde_json::Value) {
    let rows = json["server"]["rows"].as_array().expect("server.rows");
    for engine in [
        "engine append",
        "AtomicLog, local quorum",
        "replicated log, no TLS",
        "replicated log, TLS",
        "replicated log, TLS, 2 groups",
    ] {
        for in_flight in [1, 256] {
            let row = rows
                .iter()
                .find(|row| row["engine"] == engine && row["in_flight"] == in_flight)
                .unwrap_or_else(|| panic!("no {engine} at {in_flight} in {rows:?}"));
            assert!(row["appends_per_sec"].as_f64() > Some(0.0), "{row}");
            assert!(row["ratio_to_engine_append"].as_f64() > Some(0.0), "{row}");
            assert!(row["ratio_to_local_quorum"].as_f64() > Some(0.0), "{row}");
        }
    }
}

/// The raft section in the JSON: store-level cells for sealog and the mem store (and
/// raft-engine with the peers), cluster-level cells, and its seven targets.
fn check_raft_section(json: &serde_json::Value) {
    let raft = &json["raft"];
    let store = raft["store"].as_array().expect("raft.store");
    let cluster = raft["cluster"].as_array().expect("raft.cluster");
    for name in ["sealog", "mem"] {
        assert!(store.iter().any(|cell| cell["store"] == name), "{store:?}");
        assert!(
            cluster.iter().any(|cell| cell["store"] == name),
            "{cluster:?}"
        );
    }
    for cell in store {
        assert!(cell["appends_per_sec"].as_f64() > Some(0.0), "{cell}");
    }
    for cell in cluster {
        assert!(cell["writes_per_sec"].is_number(), "{cell}");
    }
    let targets = json["targets"].as_array().expect("targets");
    let count = targets
        .iter()
        .filter(|target| {
            target["name"]
                .as_str()
                .is_some_and(|name| name.starts_with("raft "))
        })
        .count();
    assert_eq!(count, 7, "{targets:?}");
}

/// Issue 13's section in the JSON: the write comparisons with every run and each engine's
/// medians carrying the `cells` contract's fields (the raw engine's and its control run beside
/// LogDrive writes on one and on 1,000 LogDrives), the cached and cold reads judged against the
/// raw read,
/// the four weak_tail cases, and the three targets, each judged.
fn check_logdrive_section(json: &serde_json::Value) {
    let logdrive = &json["logdrive"];
    let writes = logdrive["writes"].as_array().expect("logdrive.writes");
    let names: Vec<&str> = writes.iter().filter_map(|w| w["name"].as_str()).collect();
    assert_eq!(names, ["latency", "throughput"], "{writes:?}");
    for comparison in writes {
        let medians = comparison["medians"].as_array().expect("medians");
        let runs = comparison["runs"].as_array().expect("runs");
        // As many rounds as engines or a multiple of it (every engine runs equally often in
        // every position), each running every engine once.
        let rounds = comparison["rounds"].as_u64().expect("rounds") as usize;
        assert_eq!(rounds % medians.len(), 0, "{comparison}");
        assert_eq!(runs.len(), medians.len() * rounds, "{comparison}");
        for cell in medians.iter().chain(runs) {
            for field in [
                "engine",
                "payload_bytes",
                "writers",
                "in_flight",
                "logdrives",
                "appends_per_sec",
                "mb_per_sec",
                "p50_us",
                "p99_us",
                "ratio_to_ceiling",
            ] {
                assert!(!cell[field].is_null(), "{field} missing in {cell}");
            }
        }
        // A run of this test's 75 ms can see nothing acknowledged in a host stall; the median
        // of three cannot, short of two stalls.
        for cell in medians {
            assert!(cell["appends_per_sec"].as_f64() > Some(0.0), "{cell}");
            assert!(cell["p50_us"].as_f64() > Some(0.0), "{cell}");
            assert!(cell["ratio_to_ceiling"].as_f64() > Some(0.0), "{cell}");
        }
        assert_eq!(medians[0]["engine"], "sealog", "{comparison}");
        assert_eq!(medians[1]["engine"], "sealog-control", "{comparison}");
        assert_eq!(medians[1]["control"], true, "{comparison}");
        assert!(medians[1]["over_raw"].as_f64() > Some(0.0), "{comparison}");
        assert!(medians[2]["over_raw"].as_f64() > Some(0.0), "{comparison}");
    }
    let drives: Vec<u64> = writes[1]["medians"]
        .as_array()
        .expect("medians")
        .iter()
        .filter_map(|cell| cell["logdrives"].as_u64())
        .collect();
    assert_eq!(drives, [0, 0, 1, 1000]);
    assert_eq!(writes[1]["medians"][2]["writers"], 8);
    assert_eq!(writes[1]["medians"][2]["in_flight"], 32);
    let reads = logdrive["reads"].as_array().expect("logdrive.reads");
    for section in ["logdrive-cached", "logdrive-cold"] {
        let row = reads
            .iter()
            .find(|row| row["section"] == section && row["engine"] == "sealog-logdrive-read")
            .unwrap_or_else(|| panic!("no {section} LogDrive read in {reads:?}"));
        assert_eq!(row["ceiling"], "sealog-read-entry", "{row}");
        assert!(row["p50_ratio_to_ceiling"].as_f64() > Some(0.0), "{row}");
    }
    let tails = logdrive["weak_tail"]
        .as_array()
        .expect("logdrive.weak_tail");
    let windows: Vec<u64> = tails.iter().filter_map(|row| row["k"].as_u64()).collect();
    assert_eq!(windows, [64, 64, 4096, 4096]);
    assert!(tails.iter().all(|row| row["p50_ns"].as_f64() > Some(0.0)));
    let targets = json["targets"].as_array().expect("targets");
    let logdrive_targets: Vec<&serde_json::Value> = targets
        .iter()
        .filter(|target| {
            target["name"]
                .as_str()
                .is_some_and(|name| name.starts_with("LogDrive"))
        })
        .collect();
    assert_eq!(logdrive_targets.len(), 3, "{targets:?}");
    assert!(logdrive_targets
        .iter()
        .all(|target| target["held"].is_boolean()));
}

/// The composition section in the JSON: each group at 1 and 256 in flight, every engine's
/// medians with its shape and its ratios to its base, and the section's five targets judged.
fn check_compose_section(json: &serde_json::Value) {
    let comparisons = json["compose"]["comparisons"]
        .as_array()
        .expect("compose.comparisons");
    assert_eq!(comparisons.len(), 6, "{comparisons:?}");
    for comparison in comparisons {
        let medians = comparison["medians"].as_array().expect("medians");
        let rounds = comparison["rounds"].as_u64().expect("rounds") as usize;
        let runs = comparison["runs"].as_array().expect("runs");
        assert_eq!(runs.len(), rounds * medians.len(), "{comparison}");
        for median in medians {
            for field in [
                "engine",
                "appends_per_sec",
                "p50_us",
                "rings",
                "logdrives",
                "base",
            ] {
                assert!(median.get(field).is_some(), "{field} missing in {median}");
            }
            if !median["base"].is_null() {
                assert!(median["p50_over_base"].is_number(), "{median}");
                assert!(median["appends_per_sec_over_base"].is_number(), "{median}");
            }
        }
    }
    let in_flight: Vec<u64> = comparisons
        .iter()
        .filter_map(|comparison| comparison["in_flight"].as_u64())
        .collect();
    assert_eq!(in_flight, [1, 1, 1, 256, 256, 256]);
    let targets = json["targets"].as_array().expect("targets");
    let compose: Vec<&serde_json::Value> = targets
        .iter()
        .filter(|target| {
            target["name"]
                .as_str()
                .is_some_and(|name| name.starts_with("AtomicLog"))
        })
        .collect();
    assert_eq!(compose.len(), 5, "{targets:?}");
    assert!(compose.iter().all(|target| target["held"].is_boolean()));
}

/// Issue 11's sections in the JSON: every read row the targets need (sealog's beside its
/// ceiling, which it names), the open times of three ring sizes at two live regions, the read
/// index's bytes per entry, and the read and open targets.
fn check_read_and_open_sections(json: &serde_json::Value) {
    assert_eq!(
        json["sections"],
        serde_json::json!(["write", "logdrive", "compose", "read", "open", "raft", "server"])
    );
    let rows = json["reads"]["rows"].as_array().expect("reads.rows");
    let expected = [
        ("tail", "sealog-writer"),
        ("tail", "sealog-tail-read"),
        ("cold", "ceiling-randread"),
        ("cold", "sealog-read"),
        ("cold", "sealog-read-async"),
        ("catch-up", "ceiling-seqread"),
        ("catch-up", "sealog-iter"),
    ];
    for (section, engine) in expected {
        let row = rows
            .iter()
            .find(|row| row["section"] == section && row["engine"] == engine);
        let row = row.unwrap_or_else(|| panic!("no {section} {engine} row in {rows:?}"));
        assert!(row["ops_per_sec"].as_f64() > Some(0.0), "{row}");
    }
    for row in rows.iter().filter(|row| {
        ["sealog-read", "sealog-read-async", "sealog-iter"]
            .contains(&row["engine"].as_str().unwrap_or(""))
    }) {
        assert!(
            row["ceiling"].as_str().is_some_and(|name| !name.is_empty()),
            "{row}"
        );
        assert!(row["ratio_to_ceiling"].as_f64() > Some(0.0), "{row}");
    }
    let cold_depths: Vec<u64> = rows
        .iter()
        .filter(|row| row["engine"] == "ceiling-randread")
        .filter_map(|row| row["in_flight"].as_u64())
        .collect();
    assert_eq!(cold_depths, [1, 16], "{rows:?}");
    assert!(json["reads"]["read_index_bytes_per_entry"].as_f64() > Some(0.0));
    let opens = json["open_times"].as_array().expect("open_times");
    assert_eq!(
        opens.len(),
        6,
        "three ring sizes, two live regions: {opens:?}"
    );
    for open in opens {
        assert!(open["open_ms"].as_f64() > Some(0.0), "{open}");
        assert!(open["repetitions"].as_u64() >= Some(1), "{open}");
        assert!(
            [1, 1000].contains(&open["live_entries"].as_u64().unwrap_or(0)),
            "{open}"
        );
    }
    let targets = json["targets"].as_array().expect("targets");
    for name in [
        "cold reads, 16 in flight",
        "catch-up iterator",
        "open of a ring holding one entry",
    ] {
        assert!(
            targets.iter().any(|target| target["name"]
                .as_str()
                .is_some_and(|text| text.contains(name))),
            "a target on {name}: {targets:?}"
        );
    }
}

/// `--section read` runs the read section alone: no append cells and no open times, the read
/// rows and their targets only.
#[test]
fn a_section_runs_alone() {
    let directory = tempfile::tempdir_in(".").expect("tempdir");
    let json_path = directory.path().join("bench.json");
    let output = Command::new(env!("CARGO_BIN_EXE_sealog-bench"))
        .args(["--quick", "--seconds", "0.3", "--section", "read", "--dir"])
        .arg(directory.path())
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
    assert_eq!(json["sections"], serde_json::json!(["read"]));
    assert_eq!(json["cells"].as_array().map(Vec::len), Some(0));
    assert_eq!(json["open_times"].as_array().map(Vec::len), Some(0));
    assert!(json["reads"]["rows"]
        .as_array()
        .is_some_and(|rows| !rows.is_empty()));
    let targets = json["targets"].as_array().expect("targets");
    assert!(
        targets.iter().all(|target| target["name"]
            .as_str()
            .is_some_and(|name| !name.contains("ring holding"))),
        "{targets:?}"
    );
}
