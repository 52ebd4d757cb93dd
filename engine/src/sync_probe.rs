//! Choosing a ring's default durability by measuring its device at format time (docs/design.md,
//! "The life of an append"). The two ways the engine can make a batch durable, an O_DIRECT write
//! with an fdatasync linked behind it and an O_DIRECT write with RWF_DSYNC (a FUA write where the
//! device has FUA), are timed one at a time (queue depth 1) on the ring's own backend, with the
//! write a small append really makes: a 4 KiB payload behind its 96-byte entry header fills two
//! 4 KiB blocks, so that is 8 KiB on a ring of 4 KiB blocks ([`append_write_bytes`]). The methods
//! take turns in rounds (one method's writes, then the other's, the order swapped every round), so
//! a drift in the device or the machine during the measurement falls on both alike.
//!
//! The rule ([`choose`]): RWF_DSYNC is chosen only when it beats the fdatasync by a clear margin
//! ([`MARGIN_PERCENT`]) at both the median and the 99th percentile; anything else, ties
//! included, keeps the linked fdatasync, the engine's long-standing default. A shorter median
//! with a worse tail (this machine's RWF_DSYNC completes in a kernel workqueue that can wait a
//! scheduler tick on a virtual machine) is not a win for a log whose writers wait on the
//! tail.
//!
//! The timed writes are zeros, written only into segment data areas (never the control area),
//! so the ring reads afterwards exactly as format left it: a zeroed data area is one never
//! written. This module owns the measurement and the rule; format ([`crate::storage`]) decides
//! when to run it and records the outcome in the control block, and a drive resolves its
//! durability from that record when it opens ([`resolve`]).

use std::io;
use std::time::{Duration, Instant};

use sealog_wal::format::{SyncChoice, SyncMeasurement, SyncMethod, ENTRY_HEADER_SIZE};
use sealog_wal::Geometry;

use crate::io::{Completion, Durability, FlushOrder, IoBackend, Tag, WriteSync};

/// By how many percent RWF_DSYNC must beat the linked fdatasync, at both p50 and p99, to be
/// chosen. Ten percent is above the run-to-run spread of either method's median on a quiet
/// device (repeated 4 KiB medians of one method, interleaved, fall within a few percent of each
/// other on the machines measured so far), so a win by less is noise, not a property of the drive.
pub const MARGIN_PERCENT: u8 = 10;

/// The payload whose append the measurement imitates: a 4 KiB record, the size the benchmark's
/// latency targets are stated for.
pub const PROBE_PAYLOAD_BYTES: u32 = 4096;

/// How long and how often the methods are timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbePlan {
    /// Rounds at most.
    pub rounds_max: u16,
    /// Rounds at least, whatever the time budget says.
    pub rounds_min: u16,
    /// Writes of each method per round.
    pub writes_per_round: u16,
    /// No round starts after this much time has gone (past `rounds_min`).
    pub budget: Duration,
}

impl ProbePlan {
    /// Format's plan: 40 rounds of 8 writes per method (320 samples of each; p99 is then the
    /// fourth-slowest), about 0.1 s at this machine's 150 us per commit. A device in a slow
    /// phase (4 ms per commit) stops at the budget after 6 rounds.
    pub const FORMAT: ProbePlan = ProbePlan {
        rounds_max: 40,
        rounds_min: 4,
        writes_per_round: 8,
        budget: Duration::from_millis(400),
    };
}

/// One method's latencies, as measured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MethodTimes {
    /// Each timed write, from submission to its last completion, in nanoseconds, in the order
    /// taken.
    pub latencies_ns: Vec<u64>,
    /// The time spent in this method's writes, all together.
    pub busy: Duration,
}

impl MethodTimes {
    /// The `quantile` (0 to 1) by nearest rank, in microseconds rounded to the nearest and at
    /// least 1; 0 when there are no samples.
    pub fn percentile_us(&self, quantile: f64) -> u32 {
        if self.latencies_ns.is_empty() {
            return 0;
        }
        let mut sorted = self.latencies_ns.clone();
        sorted.sort_unstable();
        // Nearest rank: the smallest sample at or above which `quantile` of them lie.
        let rank = (quantile * sorted.len() as f64).ceil() as usize;
        let nanos = sorted[rank.clamp(1, sorted.len()) - 1];
        u32::try_from(nanos.saturating_add(500) / 1000)
            .unwrap_or(u32::MAX)
            .max(1)
    }
}

/// What [`measure`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    /// Bytes of each timed write.
    pub write_size_bytes: u32,
    /// Rounds run.
    pub rounds: u16,
    /// Writes of each method per round.
    pub writes_per_round: u16,
    /// Whether the device reported FUA (RWF_DSYNC writes are FUA writes then).
    pub fua: bool,
    /// Write + linked fdatasync.
    pub fdatasync: MethodTimes,
    /// Write with RWF_DSYNC.
    pub dsync: MethodTimes,
}

impl Probe {
    /// The figures the control block records.
    pub fn measurement(&self) -> SyncMeasurement {
        SyncMeasurement {
            write_size_bytes: self.write_size_bytes,
            rounds: self.rounds,
            writes_per_round: self.writes_per_round,
            margin_percent: MARGIN_PERCENT,
            fua: self.fua,
            fdatasync_p50_us: self.fdatasync.percentile_us(0.50),
            fdatasync_p99_us: self.fdatasync.percentile_us(0.99),
            dsync_p50_us: self.dsync.percentile_us(0.50),
            dsync_p99_us: self.dsync.percentile_us(0.99),
        }
    }

    /// The choice the figures make, with the figures.
    pub fn choice(&self) -> SyncChoice {
        let measurement = self.measurement();
        SyncChoice::Measured {
            method: choose(&measurement),
            measurement,
        }
    }
}

/// Why the measurement could not be made: the backend refused or failed an operation.
#[derive(Debug, thiserror::Error)]
#[error("timing {} at ring offset {ring_offset}: {source}", method_label(*.method))]
pub struct ProbeError {
    /// The method being timed.
    pub method: SyncMethod,
    /// Where its write went.
    pub ring_offset: u64,
    /// What failed.
    #[source]
    pub source: io::Error,
}

/// How reports name a method: the system calls it stands for.
pub fn method_label(method: SyncMethod) -> &'static str {
    match method {
        SyncMethod::Fdatasync => "write + linked fdatasync",
        SyncMethod::Dsync => "write with RWF_DSYNC",
    }
}

/// Bytes a lone append of `payload_bytes` writes: its entry header and payload rounded up to
/// the ring's block, and never more than a batch. Worked example: 4096 + 96 = 4192 bytes, on
/// 4 KiB blocks two blocks, 8192 bytes; on 16 KiB blocks one block, 16384 bytes.
pub fn append_write_bytes(geometry: &Geometry, payload_bytes: u32) -> u32 {
    let block = geometry.block_size_bytes;
    let record = payload_bytes.saturating_add(ENTRY_HEADER_SIZE as u32);
    record
        .div_ceil(block)
        .saturating_mul(block)
        .min(geometry.batch_size_max_bytes)
}

/// Ring offset of the `index`-th write of `write_size_bytes` (at most a segment's data area):
/// write-sized slots along the segments' data areas in ring order, wrapping at the end of the
/// ring, so the writes move on as a log's do and never touch the control area or a segment
/// header.
pub fn data_slot_offset(geometry: &Geometry, write_size_bytes: u32, index: u64) -> u64 {
    debug_assert!(u64::from(write_size_bytes) <= geometry.segment_data_bytes());
    let slots_per_segment = (geometry.segment_data_bytes() / u64::from(write_size_bytes)).max(1);
    let slot = index % (slots_per_segment * u64::from(geometry.segment_count));
    let segment = (slot / slots_per_segment) as u32;
    let inside = (slot % slots_per_segment) * u64::from(write_size_bytes);
    geometry.segment_ring_offset(segment) + u64::from(geometry.segment_data_offset()) + inside
}

/// Tags of the measurement's operations (nothing else is in flight on its backend).
const WRITE_TAG: Tag = 1;
const FLUSH_TAG: Tag = 2;

/// Times both methods on `backend` (whose pool buffer 0 must hold a write of
/// [`append_write_bytes`] for a 4 KiB payload; it is filled with zeros) as `plan` says, after
/// one untimed write of each. Nothing else may be in flight on the backend.
pub fn measure(
    backend: &mut dyn IoBackend,
    geometry: &Geometry,
    plan: &ProbePlan,
) -> Result<Probe, ProbeError> {
    assert!(plan.writes_per_round > 0);
    assert!(plan.rounds_min <= plan.rounds_max);
    let write_size_bytes = append_write_bytes(geometry, PROBE_PAYLOAD_BYTES);
    let buffer = backend.pool().buffer_mut(0);
    assert!(buffer.len() >= write_size_bytes as usize);
    buffer.fill(0);
    let fua = backend.cache_info().is_some_and(|cache| cache.fua);
    let mut probe = Probe {
        write_size_bytes,
        rounds: 0,
        writes_per_round: plan.writes_per_round,
        fua,
        fdatasync: MethodTimes::default(),
        dsync: MethodTimes::default(),
    };
    let mut next_slot = 0u64;
    let mut timed = |backend: &mut dyn IoBackend, method: SyncMethod| {
        let ring_offset = data_slot_offset(geometry, write_size_bytes, next_slot);
        next_slot += 1;
        commit_once(backend, method, ring_offset, write_size_bytes).map_err(|source| ProbeError {
            method,
            ring_offset,
            source,
        })
    };
    // The first operations of a ring set up the kernel's workers for it: not the device's time.
    for method in [SyncMethod::Fdatasync, SyncMethod::Dsync] {
        timed(backend, method)?;
    }
    let started = Instant::now();
    while probe.rounds < plan.rounds_max {
        if probe.rounds >= plan.rounds_min && started.elapsed() >= plan.budget {
            break;
        }
        // A B, then B A: neither method always follows the other.
        let order = if probe.rounds % 2 == 0 {
            [SyncMethod::Fdatasync, SyncMethod::Dsync]
        } else {
            [SyncMethod::Dsync, SyncMethod::Fdatasync]
        };
        for method in order {
            for _ in 0..plan.writes_per_round {
                let took = timed(backend, method)?;
                let times = match method {
                    SyncMethod::Fdatasync => &mut probe.fdatasync,
                    SyncMethod::Dsync => &mut probe.dsync,
                };
                times
                    .latencies_ns
                    .push(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX));
                times.busy += took;
            }
        }
        probe.rounds += 1;
    }
    debug_assert_eq!(
        probe.fdatasync.latencies_ns.len(),
        probe.dsync.latencies_ns.len()
    );
    Ok(probe)
}

/// One durable write by `method` at `ring_offset`, timed from its submission to its last
/// completion.
fn commit_once(
    backend: &mut dyn IoBackend,
    method: SyncMethod,
    ring_offset: u64,
    len: u32,
) -> io::Result<Duration> {
    let started = Instant::now();
    let mut waiting_for = match method {
        SyncMethod::Fdatasync => {
            backend.submit_write(WRITE_TAG, ring_offset, 0, 0, len, WriteSync::None)?;
            backend.submit_flush(FLUSH_TAG, ring_offset, FlushOrder::AfterPreviousWrite)?;
            2
        }
        SyncMethod::Dsync => {
            backend.submit_write(WRITE_TAG, ring_offset, 0, 0, len, WriteSync::Dsync)?;
            1
        }
    };
    let mut completions: Vec<Completion> = Vec::with_capacity(2);
    while waiting_for > 0 {
        completions.clear();
        backend.wait(1, &mut completions)?;
        for completion in &completions {
            let expected = completion.tag == WRITE_TAG
                || (completion.tag == FLUSH_TAG && method == SyncMethod::Fdatasync);
            if !expected {
                return Err(io::Error::other(format!(
                    "the I/O backend completed an operation never submitted (tag {:#x})",
                    completion.tag
                )));
            }
            completion.result.map_err(io::Error::from_raw_os_error)?;
            waiting_for -= 1;
        }
    }
    Ok(started.elapsed())
}

/// The rule: RWF_DSYNC when it is faster than the linked fdatasync by at least the recorded
/// margin at both p50 and p99, else the fdatasync (ties, a win at one percentile only, and
/// missing figures all keep it).
pub fn choose(measurement: &SyncMeasurement) -> SyncMethod {
    let margin = u64::from(measurement.margin_percent.min(100));
    // dsync <= fdatasync * (1 - margin), in integers; and strictly faster, so a zero margin
    // still leaves a tie to the fdatasync.
    let clearly_faster = |dsync_us: u32, fdatasync_us: u32| {
        dsync_us > 0
            && dsync_us < fdatasync_us
            && u64::from(dsync_us) * 100 <= u64::from(fdatasync_us) * (100 - margin)
    };
    let p50 = clearly_faster(measurement.dsync_p50_us, measurement.fdatasync_p50_us);
    let p99 = clearly_faster(measurement.dsync_p99_us, measurement.fdatasync_p99_us);
    if p50 && p99 {
        SyncMethod::Dsync
    } else {
        SyncMethod::Fdatasync
    }
}

/// The drive's durability for a method.
pub fn durability_of(method: SyncMethod) -> Durability {
    match method {
        SyncMethod::Fdatasync => Durability::Fdatasync,
        SyncMethod::Dsync => Durability::Dsync,
    }
}

/// What a drive opened with `requested` (its options' durability) uses on a ring whose control
/// block recorded `sync`: the request when there is one, else the ring's choice (fdatasync when
/// none was recorded).
pub fn resolve(requested: Option<Durability>, sync: &SyncChoice) -> Durability {
    requested.unwrap_or_else(|| durability_of(sync.method()))
}

/// A measurement's figures by the names reports give them (the keys of `sealog inspect --json`
/// and of the benchmark's JSON), all but FUA.
pub fn figures(measurement: &SyncMeasurement) -> [(&'static str, u64); 8] {
    let m = measurement;
    [
        ("write_size_bytes", u64::from(m.write_size_bytes)),
        ("rounds", u64::from(m.rounds)),
        ("writes_per_round", u64::from(m.writes_per_round)),
        ("margin_percent", u64::from(m.margin_percent)),
        ("fdatasync_p50_us", u64::from(m.fdatasync_p50_us)),
        ("fdatasync_p99_us", u64::from(m.fdatasync_p99_us)),
        ("dsync_p50_us", u64::from(m.dsync_p50_us)),
        ("dsync_p99_us", u64::from(m.dsync_p99_us)),
    ]
}

/// How much faster (positive) or slower (negative) RWF_DSYNC was than the fdatasync, in
/// percent of the fdatasync's figure.
pub fn dsync_gain_percent(dsync_us: u32, fdatasync_us: u32) -> f64 {
    if fdatasync_us == 0 {
        return 0.0;
    }
    (f64::from(fdatasync_us) - f64::from(dsync_us)) * 100.0 / f64::from(fdatasync_us)
}

/// One sentence on why the ring uses the method it does: what `inspect` prints.
pub fn explain(sync: &SyncChoice) -> String {
    match *sync {
        SyncChoice::NotRecorded => "not measured (formatted before the sync method was \
                                    recorded, or without a device to measure): fdatasync"
            .to_string(),
        SyncChoice::Named(method) => format!(
            "{} ({}), named at format time; nothing was measured",
            method.name(),
            method_label(method)
        ),
        SyncChoice::Measured {
            method,
            measurement: m,
        } => {
            let verdict = if method == SyncMethod::Dsync {
                "at least"
            } else {
                "not"
            };
            format!(
                "{} ({}), measured at format time: {}-byte writes at queue depth 1, {} rounds \
                 of {} per method; write + linked fdatasync p50 {} us, p99 {} us; RWF_DSYNC{} \
                 p50 {} us ({:+.0}%), p99 {} us ({:+.0}%); RWF_DSYNC is {verdict} {}% faster \
                 at both p50 and p99",
                method.name(),
                method_label(method),
                m.write_size_bytes,
                m.rounds,
                m.writes_per_round,
                m.fdatasync_p50_us,
                m.fdatasync_p99_us,
                if m.fua { " (FUA)" } else { "" },
                m.dsync_p50_us,
                -dsync_gain_percent(m.dsync_p50_us, m.fdatasync_p50_us),
                m.dsync_p99_us,
                -dsync_gain_percent(m.dsync_p99_us, m.fdatasync_p99_us),
                m.margin_percent
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(p50: (u32, u32), p99: (u32, u32)) -> SyncMeasurement {
        SyncMeasurement {
            write_size_bytes: 8192,
            rounds: 40,
            writes_per_round: 8,
            margin_percent: MARGIN_PERCENT,
            fua: false,
            fdatasync_p50_us: p50.0,
            fdatasync_p99_us: p99.0,
            dsync_p50_us: p50.1,
            dsync_p99_us: p99.1,
        }
    }

    #[test]
    fn dsync_wins_only_by_the_margin_at_both_p50_and_p99() {
        // (fdatasync, dsync) at p50, then at p99.
        let cases = [
            ((150, 100), (400, 300), SyncMethod::Dsync, "both well ahead"),
            (
                (100, 90),
                (400, 360),
                SyncMethod::Dsync,
                "both exactly 10% ahead",
            ),
            ((150, 100), (400, 390), SyncMethod::Fdatasync, "p50 only"),
            ((150, 140), (400, 200), SyncMethod::Fdatasync, "p99 only"),
            ((100, 91), (400, 300), SyncMethod::Fdatasync, "p50 9% ahead"),
            ((150, 150), (400, 400), SyncMethod::Fdatasync, "a tie"),
            ((150, 200), (400, 300), SyncMethod::Fdatasync, "p50 behind"),
            (
                (150, 0),
                (400, 0),
                SyncMethod::Fdatasync,
                "no dsync figures",
            ),
            ((0, 0), (0, 0), SyncMethod::Fdatasync, "nothing measured"),
        ];
        for (p50, p99, expected, what) in cases {
            assert_eq!(choose(&figures(p50, p99)), expected, "{what}");
        }
    }

    #[test]
    fn a_tie_keeps_the_fdatasync_even_without_a_margin() {
        let tie = SyncMeasurement {
            margin_percent: 0,
            ..figures((150, 150), (400, 400))
        };
        assert_eq!(choose(&tie), SyncMethod::Fdatasync);
        let ahead = SyncMeasurement {
            margin_percent: 0,
            ..figures((150, 149), (400, 399))
        };
        assert_eq!(choose(&ahead), SyncMethod::Dsync);
    }

    #[test]
    fn percentiles_are_nearest_rank_in_microseconds() {
        let times = MethodTimes {
            latencies_ns: (1..=100).map(|us| us * 1000).rev().collect(),
            busy: Duration::ZERO,
        };
        assert_eq!(times.percentile_us(0.50), 50);
        assert_eq!(times.percentile_us(0.99), 99);
        assert_eq!(times.percentile_us(1.0), 100);
        assert_eq!(MethodTimes::default().percentile_us(0.5), 0);
        let tiny = MethodTimes {
            latencies_ns: vec![100],
            busy: Duration::ZERO,
        };
        assert_eq!(tiny.percentile_us(0.5), 1, "at least 1 us");
    }

    fn geometry(block: u32, batch: u32) -> Geometry {
        Geometry {
            block_size_bytes: block,
            segment_size_bytes: 16 * u64::from(block),
            segment_count: 3,
            batch_size_max_bytes: batch,
            window_batches_max: 2,
            window_bytes_max: 2 * u64::from(batch),
        }
    }

    #[test]
    fn a_4_kib_append_writes_its_header_and_payload_rounded_to_blocks() {
        assert_eq!(append_write_bytes(&geometry(4096, 1 << 16), 4096), 8192);
        assert_eq!(append_write_bytes(&geometry(16384, 1 << 16), 4096), 16384);
        assert_eq!(
            append_write_bytes(&geometry(4096, 4096), 4096),
            4096,
            "capped"
        );
        assert_eq!(append_write_bytes(&geometry(4096, 1 << 16), 0), 4096);
    }

    #[test]
    fn probe_writes_stay_in_the_data_areas_and_wrap() {
        let geometry = geometry(4096, 1 << 16);
        let data = geometry.segment_data_bytes();
        // 15 data blocks per segment: 7 slots of 8 KiB each, then the next segment.
        let slots = data / 8192;
        assert_eq!(slots, 7);
        for index in 0..3 * slots * 2 {
            let offset = data_slot_offset(&geometry, 8192, index);
            let segment = ((index % (3 * slots)) / slots) as u32;
            let start = geometry.segment_ring_offset(segment);
            assert!(offset >= start + 4096, "after the header: {index}");
            assert!(offset + 8192 <= start + geometry.segment_size_bytes);
            assert!(offset >= geometry.control_area_bytes());
        }
        assert_eq!(
            data_slot_offset(&geometry, 8192, 3 * slots),
            data_slot_offset(&geometry, 8192, 0)
        );
    }

    #[test]
    fn the_ring_choice_is_the_default_and_an_option_overrides_it() {
        let dsync = SyncChoice::Named(SyncMethod::Dsync);
        assert_eq!(resolve(None, &dsync), Durability::Dsync);
        assert_eq!(
            resolve(None, &SyncChoice::NotRecorded),
            Durability::Fdatasync
        );
        assert_eq!(
            resolve(Some(Durability::NoSyncBenchmarkOnly), &dsync),
            Durability::NoSyncBenchmarkOnly
        );
        assert_eq!(
            resolve(Some(Durability::Fdatasync), &dsync),
            Durability::Fdatasync
        );
    }

    #[test]
    fn the_explanation_names_the_figures_and_the_rule() {
        let measured = SyncChoice::Measured {
            method: SyncMethod::Fdatasync,
            measurement: figures((150, 100), (400, 390)),
        };
        let text = explain(&measured);
        assert!(text.starts_with("fdatasync"), "{text}");
        assert!(text.contains("p50 100 us (-33%)"), "{text}");
        assert!(text.contains("not 10% faster"), "{text}");
        assert!(explain(&SyncChoice::NotRecorded).starts_with("not measured"));
    }
}
