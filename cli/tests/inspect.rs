//! What `sealog inspect` says of each segment header, run against the built binary: only an
//! all-zero header is "not started"; a header with a bad CRC is damaged, one of another format
//! version says so, and a block with no segment magic has no segment header.

mod common;

use common::{sealog, text};

#[test]
fn inspect_tells_a_damaged_segment_header_from_a_segment_not_started() {
    let directory = tempfile::tempdir().expect("tempdir");
    let ring = directory.path().join("ring");
    let path = ring.to_str().expect("utf-8");
    let format = sealog(&["format", path, "--size", "8M", "--segment-size", "1M"]);
    assert!(format.status.success(), "{}", text(&format.stderr));
    let append = sealog(&["append", path, "--count", "3", "--size", "100"]);
    assert!(append.status.success(), "{}", text(&append.stderr));
    let segment = |index: u32| ring.join(format!("segment-{index:05}"));
    let mut started = std::fs::read(segment(0)).expect("reads segment 0");
    let header: Vec<u8> = started[..64].to_vec();
    assert_eq!(&header[..4], b"SLGS", "segment 0 was started");
    // Segment 0: one byte of its lap flipped, so its CRC no longer matches.
    started[16] ^= 0x01;
    std::fs::write(segment(0), &started).expect("writes segment 0");
    // Segment 1: a valid-looking header but for another format version.
    let mut other_version = std::fs::read(segment(1)).expect("reads segment 1");
    other_version[..64].copy_from_slice(&header);
    other_version[4] = 0x7f;
    std::fs::write(segment(1), &other_version).expect("writes segment 1");
    // Segment 2: bytes that are not zeros and not a segment header.
    let mut garbage = std::fs::read(segment(2)).expect("reads segment 2");
    garbage[..64].fill(0x5a);
    std::fs::write(segment(2), &garbage).expect("writes segment 2");
    let inspect = sealog(&["inspect", path]);
    assert_eq!(inspect.status.code(), Some(0), "{}", text(&inspect.stderr));
    let report = text(&inspect.stdout);
    let line = |index: u32| {
        let prefix = format!("segment {index}: ");
        report
            .lines()
            .find(|line| line.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no line for segment {index}: {report}"))
            .to_string()
    };
    assert!(
        line(0).contains("header damaged") && line(0).contains("CRC"),
        "{report}"
    );
    assert!(line(1).contains("another format version"), "{report}");
    assert!(line(2).contains("no segment header"), "{report}");
    for index in 0..3 {
        assert!(!line(index).contains("not started"), "{report}");
    }
    for index in 3..7 {
        assert_eq!(
            line(index),
            format!("segment {index}: not started"),
            "{report}"
        );
    }
}
