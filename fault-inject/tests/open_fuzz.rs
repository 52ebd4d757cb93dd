//! The engine's open against crafted metadata (issue defect 5): arithmetic on on-disk fields
//! must never panic the drive thread. The story, in steps:
//!
//! 1. A control block is checked by its CRC, so damage alone never gives replay a sequence near
//!    `u64::MAX`; a crafted block with a valid CRC does (a bug in another writer, a tool, an
//!    attacker with the device).
//! 2. Replay accepted it, and recovery then wrote the next control block with
//!    `control.sequence + 1`: an overflow, so a panic (overflow checks are on in every profile),
//!    on the drive thread. A trim does the same sum in `start_trim`.
//! 3. Replay's own fuzzing could not see this: the sum is in the engine. This test opens
//!    crafted rings with the real recovery.
//!
//! Each case takes a valid ring from the model writer (small geometries, several laps and
//! incarnations: `sealog_wal_kit::fuzz::Bases`), crafts up to three control blocks or segment
//! headers with valid CRCs and fields at their edges (`sealog_wal_kit::fuzz::craft_metadata`, the
//! structure-aware fuzzer's generator), and opens it with `DriveCore::recover` on a correct
//! simulated drive. Before the random cases come hand-picked ones (sequence at and near
//! `CONTROL_SEQUENCE_LIMIT` and `u64::MAX`, the incarnation exhausted, the trim point and head
//! at their limits). Expected: `Ok` or a typed `OpenError` agreeing with replay's verdict on
//! the same image (or refusing, typed, a ring whose incarnation or control sequence is
//! exhausted), never a panic; after an `Ok` open, an append and a trim of everything durable
//! (which runs `start_trim`) complete with a reply, `Ok` or a typed error. It prints how many
//! opened and how many were refused, by error kind, and every panic with the crafted fields.
//! `SEALOG_OPEN_FUZZ_CASES=N` runs N random cases (default 10,000).

use std::collections::BTreeMap;
use std::path::Path;

use sealog::drive::{buffer_bytes, buffer_count};
use sealog::{DriveCore, DriveOptions, OpenError, Request, Wait};
use sealog_fault::{FaultConfig, SimDevice};
use sealog_wal::format::CONTROL_SEQUENCE_LIMIT;
use sealog_wal::{read_control, Geometry, Kind, RecoveryMode, RecoveryReport};
use sealog_wal_kit::fuzz::{
    case_seed, catch_panic, craft_control_with, craft_metadata, error_kind, replay_image,
    variant_name, Bases, Choices, ControlField, Mutation, Ring, Unreadable,
};

/// The run's seed.
const SEED: u64 = 5;

/// Pool buffers a case's simulated drive gets at most: a crafted window of millions of batches
/// would have the engine map millions of buffers (see `pool_capped` in the summary).
const POOL_BUFFERS_MAX: usize = 1 << 12;

/// Steps a request may take before its missing reply counts as a hang.
const STEPS_MAX: u32 = 10_000;

/// What became of one crafted input.
enum Opened {
    /// Recovery opened it; the append and the trim ended so.
    Ok { append: String, trim: String },
    /// Recovery refused it with a typed error of this kind.
    Refused(String),
}

/// The kind of an open error: its variant, and for replay's errors the replay error's too.
fn open_error_kind(error: &OpenError) -> String {
    let variant = variant_name(&format!("{error:?}"));
    match error {
        OpenError::Ring { source, .. } | OpenError::Corrupt { source, .. } => {
            format!("{variant}/{}", error_kind(source))
        }
        _ => variant,
    }
}

/// Steps the core until `poll` has an answer; `None` if it never comes.
fn step_until<T>(
    core: &mut DriveCore<SimDevice>,
    mut poll: impl FnMut() -> Option<T>,
) -> Option<T> {
    for _ in 0..STEPS_MAX {
        if let Some(answer) = poll() {
            return Some(answer);
        }
        core.step(Wait::ForCompletion);
    }
    poll()
}

/// Opens `image` with the engine's recovery, then appends and trims. `Err` is a broken
/// invariant (a panic is caught by the caller).
fn open_append_trim(
    image: Vec<u8>,
    geometry: &Geometry,
    seed: u64,
    replayed: &Result<RecoveryReport, String>,
) -> Result<Opened, String> {
    let buffers = buffer_count(geometry).min(POOL_BUFFERS_MAX);
    let block_bytes = geometry.block_size_bytes as usize;
    let device = SimDevice::new(
        image,
        FaultConfig::none(),
        seed,
        buffers,
        buffer_bytes(geometry),
        block_bytes,
    )
    .map_err(|error| format!("the simulated drive cannot be made: {error}"))?;
    let opened = DriveCore::recover(device, Path::new("fuzz"), &DriveOptions::default());
    let mut core = match (opened, replayed) {
        (Ok(core), Ok(report)) => {
            if core.recovery_report() != report {
                return Err(format!(
                    "recovery's report differs from replay's: {:?} against {report:?}",
                    core.recovery_report()
                ));
            }
            core
        }
        (Err(error), Err(kind)) => {
            let refused = open_error_kind(&error);
            if !refused.ends_with(&format!("/{kind}")) {
                return Err(format!("replay refused with {kind}, the open with {error}"));
            }
            return Ok(Opened::Refused(refused));
        }
        // Replay only reads; the open must also bump the incarnation and the control block's
        // sequence, and may refuse with a typed error when one of them is exhausted (a later
        // trim needs one more sequence number, so refusing one step early is fine too).
        (Err(error), Ok(report))
            if report.incarnation_max == u32::MAX
                || report.control.sequence >= CONTROL_SEQUENCE_LIMIT - 1 =>
        {
            return Ok(Opened::Refused(format!(
                "{} (a counter exhausted)",
                open_error_kind(&error)
            )));
        }
        (Ok(_), Err(kind)) => return Err(format!("replay refused with {kind}, the open did not")),
        (Err(error), Ok(_)) => return Err(format!("replay opened, the open failed: {error}")),
    };
    let (request, ticket) = Request::append(Kind::Data, b"after a crafted open".to_vec());
    core.submit(request);
    let append = step_until(&mut core, || ticket.try_outcome())
        .ok_or("an append after the open got no reply")?;
    let (request, reply) = Request::trim(core.lsn_durable());
    core.submit(request);
    let trim = step_until(&mut core, || reply.try_recv().ok())
        .ok_or("a trim after the open got no reply")?;
    let name = |result: Result<String, String>| result.unwrap_or_else(|kind| kind);
    Ok(Opened::Ok {
        append: name(
            append
                .map(|_| "ok".into())
                .map_err(|e| variant_name(&format!("{e:?}"))),
        ),
        trim: name(
            trim.map(|()| "ok".into())
                .map_err(|e| variant_name(&format!("{e:?}"))),
        ),
    })
}

/// Counts over the run.
#[derive(Default)]
struct Tally {
    cases: u64,
    opened: u64,
    refused: BTreeMap<String, u64>,
    appends: BTreeMap<String, u64>,
    trims: BTreeMap<String, u64>,
    pool_capped: u64,
    failures: Vec<String>,
}

/// Runs one crafted image through the engine's open, append and trim.
fn run_case(tally: &mut Tally, ring: &Ring, image: Vec<u8>, crafted: &[Mutation], seed: u64) {
    tally.cases += 1;
    let mut source: &[u8] = &image;
    // The drive's buffers follow the crafted geometry when it is valid, else the ring's own
    // (recovery must then refuse the ring with a typed error).
    let geometry = read_control(&mut source).map_or(ring.geometry, |control| control.geometry);
    tally.pool_capped += u64::from(buffer_count(&geometry) > POOL_BUFFERS_MAX);
    let replayed = replay_image(&image, &Unreadable::none(), RecoveryMode::Strict)
        .0
        .map_err(|error| error_kind(&error));
    match catch_panic(|| open_append_trim(image, &geometry, seed, &replayed)) {
        Ok(Ok(Opened::Ok { append, trim })) => {
            tally.opened += 1;
            *tally.appends.entry(append).or_default() += 1;
            *tally.trims.entry(trim).or_default() += 1;
        }
        Ok(Ok(Opened::Refused(kind))) => *tally.refused.entry(kind).or_default() += 1,
        Ok(Err(violation)) => tally.failures.push(format!(
            "violation: {violation}\n  base: {}\n  crafted: {crafted:?}",
            ring.name
        )),
        Err(panic) => tally.failures.push(format!(
            "panic: {panic}\n  base: {}\n  crafted: {crafted:?}",
            ring.name
        )),
    }
}

/// Hand-picked crafted control blocks: the edges the engine's arithmetic meets first.
fn hand_picked() -> Vec<Vec<(ControlField, u64)>> {
    let max32 = u64::from(u32::MAX);
    let limit = CONTROL_SEQUENCE_LIMIT;
    let sequences = [
        u64::MAX,
        u64::MAX - 1,
        limit + 1,
        limit,
        limit - 1,
        limit - 2,
        0,
        1,
    ];
    let mut cases: Vec<Vec<(ControlField, u64)>> = sequences
        .into_iter()
        .map(|sequence| vec![(ControlField::Sequence, sequence)])
        .collect();
    cases.extend([
        vec![(ControlField::Incarnation, max32)],
        vec![(ControlField::Incarnation, max32 - 1)],
        vec![(ControlField::HeadIncarnation, max32)],
        vec![(ControlField::CutIncarnation, max32)],
        vec![(ControlField::TrimLsn, u64::MAX / 2 - 1)],
        vec![(ControlField::TrimLsn, u64::MAX / 2)],
        vec![(ControlField::HeadLap, max32 - 2)],
        vec![(ControlField::HeadLap, max32 - 1)],
        vec![(ControlField::CutLap, max32)],
        vec![(ControlField::WindowBatches, max32)],
        vec![(ControlField::WindowBatches, 0)],
        vec![(ControlField::WindowBytes, u64::MAX)],
        vec![(ControlField::BatchSize, 64 << 20)],
        vec![(ControlField::SegmentCount, max32)],
        vec![(ControlField::BlockSize, 65536)],
    ]);
    cases
}

#[test]
fn crafted_metadata_never_panics_the_engines_open() {
    let random_cases = std::env::var("SEALOG_OPEN_FUZZ_CASES")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(10_000u64);
    let mut bases = Bases::new(SEED, 64);
    let mut tally = Tally::default();
    for (index, edits) in hand_picked().into_iter().enumerate() {
        for base in 0..3 {
            let mut choices = Choices::from_seed(case_seed(SEED, base));
            let ring = bases.pick(&mut choices, false).expect("a base ring");
            let mut image = ring.image.clone();
            let crafted = vec![craft_control_with(&ring, &mut image, &edits)];
            run_case(&mut tally, &ring, image, &crafted, index as u64);
        }
    }
    for index in 0..random_cases {
        let seed = case_seed(SEED ^ 0x6f70_656e, index);
        let mut choices = Choices::from_seed(seed);
        let ring = bases.pick(&mut choices, false).expect("a base ring");
        let mut image = ring.image.clone();
        let crafted: Vec<Mutation> = (0..choices.between(1, 3))
            .map(|_| craft_metadata(&ring, &mut image, &mut choices))
            .collect();
        run_case(&mut tally, &ring, image, &crafted, seed);
    }
    let join = |counts: &BTreeMap<String, u64>| {
        counts
            .iter()
            .map(|(kind, count)| format!("{kind} {count}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let refused: u64 = tally.refused.values().sum();
    println!(
        "open fuzz: {} crafted inputs, {} opened, {refused} refused, {} failed (panics and \
         violations)",
        tally.cases,
        tally.opened,
        tally.failures.len()
    );
    println!("open fuzz: refused by kind: {}", join(&tally.refused));
    println!(
        "open fuzz: after an open, appends: {}",
        join(&tally.appends)
    );
    println!("open fuzz: after an open, trims: {}", join(&tally.trims));
    println!(
        "open fuzz: {} inputs had their drive's pool capped at {POOL_BUFFERS_MAX} buffers",
        tally.pool_capped
    );
    let mut by_place: BTreeMap<String, u64> = BTreeMap::new();
    for failure in &tally.failures {
        let first_line = failure.lines().next().unwrap_or("");
        *by_place.entry(first_line.to_string()).or_default() += 1;
    }
    println!("open fuzz: failures by kind and place: {}", join(&by_place));
    for failure in tally.failures.iter().take(10) {
        println!("open fuzz: {failure}");
    }
    assert!(
        tally.failures.is_empty(),
        "{} of {} crafted inputs panicked the engine or broke an invariant; the first:\n{}",
        tally.failures.len(),
        tally.cases,
        tally.failures[..tally.failures.len().min(3)].join("\n")
    );
}
