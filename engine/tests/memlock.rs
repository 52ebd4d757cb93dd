//! A drive run by a non-root user keeps its registered buffers within the locked-memory budget
//! such a user has (RLIMIT_MEMLOCK, 8 MiB by default here, and a tiny 64 KiB one), and still
//! formats, appends, reads back and reopens a ring of default geometry, whose 9 MiB buffer pool
//! would not fit whole.
//!
//! CI runs as root, whose CAP_IPC_LOCK exempts it from the limit, so the test re-runs its own
//! binary as a child process that is someone else: uid and gid 65534 (nobody, nogroup), no
//! supplementary groups, and, since it is not root after setuid, no capabilities. The child
//! runs the `#[ignore]`d test [`memlock_child`] alone, lowers its own RLIMIT_MEMLOCK to the
//! budget, works on a ring in a temporary directory it owns, and prints one `memlock-child:`
//! line with what it found; it fails (exit status) when a check fails. Run by a non-root user,
//! the test runs the same body in its own process, with the soft limit lowered for the while.
//!
//! What was registered is read from the kernel, not from the engine: VmPin in
//! `/proc/self/status` counts the pages the process's io_uring registrations pin (the count the
//! kernel charges to the user's locked memory), so a check cannot pass by the engine's own
//! report agreeing with itself. It also checks that reads were served from the recent-entry
//! cache, which is ordinary memory and so outside the budget.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::sys::resource::{getrlimit, setrlimit, Resource};
use nix::unistd::geteuid;
use sealog::storage::{BATCH_SIZE_DEFAULT_MAX_BYTES, WINDOW_BATCHES_DEFAULT};
use sealog::uring::memlock::MEMLOCK_MARGIN_BYTES;
use sealog::{format, Drive, DriveOptions, FormatOptions};

/// The budget the child runs under, in bytes.
const CHILD_BUDGET_ENV: &str = "SEALOG_MEMLOCK_CHILD_BUDGET_BYTES";
/// The directory the child makes its ring in.
const CHILD_DIRECTORY_ENV: &str = "SEALOG_MEMLOCK_CHILD_DIRECTORY";
/// The line the child reports on.
const REPORT_PREFIX: &str = "memlock-child:";
/// nobody and nogroup.
const UNPRIVILEGED_ID: u32 = 65534;
/// A non-root process's default RLIMIT_MEMLOCK here (`ulimit -l` = 8192), and a tiny one that
/// holds no buffer at all.
const BUDGETS_BYTES: [u64; 2] = [8 << 20, 64 << 10];
/// A ring of default geometry: 16 MiB segments, 1 MiB batches, a window of 4.
const RING_BYTES: u64 = 64 << 20;
/// Entries appended before the reopen, and after it.
const ENTRIES_FIRST: u64 = 3000;
const ENTRIES_AFTER_REOPEN: u64 = 200;
/// The block size of the file rings here (a segment header block precedes each batch buffer).
const BLOCK_BYTES: u64 = 4096;
/// CAP_IPC_LOCK's bit in `CapEff`.
const CAP_IPC_LOCK_BIT: u32 = 14;

#[test]
fn a_drive_run_as_a_non_root_user_registers_within_its_memlock_budget() {
    for budget_bytes in BUDGETS_BYTES {
        if geteuid().is_root() {
            println!(
                "memlock: root here: running the drive as uid/gid {UNPRIVILEGED_ID} in a child \
                 process, RLIMIT_MEMLOCK {budget_bytes} bytes"
            );
            run_as_unprivileged_child(budget_bytes);
        } else {
            println!(
                "memlock: not root (uid {}): running the drive in this process, soft \
                 RLIMIT_MEMLOCK {budget_bytes} bytes",
                geteuid()
            );
            run_in_this_process(budget_bytes);
        }
    }
}

/// The child's body: run by the test above as an unprivileged process (or by hand, under the
/// budget the environment names, or the process's own limit without one).
#[test]
#[ignore = "the body of the unprivileged child process that the memlock test runs"]
fn memlock_child() {
    let budget_bytes = match std::env::var(CHILD_BUDGET_ENV) {
        Ok(value) => value.parse().expect("a budget in bytes"),
        Err(_) => getrlimit(Resource::RLIMIT_MEMLOCK).expect("getrlimit").0,
    };
    let scratch;
    let directory = match std::env::var_os(CHILD_DIRECTORY_ENV) {
        Some(directory) => PathBuf::from(directory),
        None => {
            scratch = tempfile::tempdir().expect("tempdir");
            scratch.path().to_path_buf()
        }
    };
    // Lower the hard limit too: this process is someone else's until it exits.
    setrlimit(Resource::RLIMIT_MEMLOCK, budget_bytes, budget_bytes).expect("lowers the limit");
    let report = run_unprivileged(budget_bytes, &directory);
    println!("{REPORT_PREFIX} {report}");
}

/// Runs [`memlock_child`] as uid/gid 65534 and checks what it reports.
fn run_as_unprivileged_child(budget_bytes: u64) {
    // The child owns the directory (it makes the ring there); the copy of this binary in it
    // is one the child can execute whatever the permissions on the way to the build directory.
    let directory = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::chown(
        directory.path(),
        Some(UNPRIVILEGED_ID),
        Some(UNPRIVILEGED_ID),
    )
    .expect("chown the ring's directory to the child");
    let binary = directory.path().join("memlock-child");
    std::fs::copy(std::env::current_exe().expect("the test binary"), &binary).expect("copy");
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // std's `uid` as root also clears the supplementary groups (setgroups(0)) before setuid,
    // and setuid away from root clears the capability sets.
    let output = Command::new(&binary)
        .args(["memlock_child", "--exact", "--ignored", "--nocapture"])
        .args(["--test-threads=1"])
        .env(CHILD_BUDGET_ENV, budget_bytes.to_string())
        .env(CHILD_DIRECTORY_ENV, directory.path())
        .current_dir(directory.path())
        .gid(UNPRIVILEGED_ID)
        .uid(UNPRIVILEGED_ID)
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // libtest prints the test's name on the same line before the test's own output.
    let report = stdout
        .lines()
        .find_map(|line| line.find(REPORT_PREFIX).map(|at| &line[at..]));
    assert!(
        output.status.success() && report.is_some(),
        "the unprivileged child failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    let report = report.unwrap_or_default();
    // The child checked that it is not root and lacks CAP_IPC_LOCK; that it shed root's
    // groups and every capability is checked here, on what it reported.
    assert!(
        report.contains(" groups=[] ") && report.contains(" cap_eff=0x0 "),
        "the child kept groups or capabilities: {report}"
    );
    println!("{report}");
}

/// Runs the child's body in this (non-root) process, its soft limit lowered for the while.
fn run_in_this_process(budget_bytes: u64) {
    let (soft, hard) = getrlimit(Resource::RLIMIT_MEMLOCK).expect("getrlimit");
    let lowered = budget_bytes.min(hard);
    setrlimit(Resource::RLIMIT_MEMLOCK, lowered, hard).expect("lowers the soft limit");
    let directory = tempfile::tempdir().expect("tempdir");
    let report = run_unprivileged(lowered, directory.path());
    setrlimit(Resource::RLIMIT_MEMLOCK, soft, hard).expect("restores the soft limit");
    println!("{REPORT_PREFIX} (in process) {report}");
}

/// Formats a ring of default geometry in `directory`, appends and reads back entries, reopens
/// and reads them again, checking the pinned memory against `budget_bytes` each time the
/// drive is open; returns the report line.
fn run_unprivileged(budget_bytes: u64, directory: &Path) -> String {
    let identity = Identity::of_this_process();
    assert!(
        !identity.uids.split_whitespace().any(|uid| uid == "0"),
        "the drive must run as a non-root user (uids {})",
        identity.uids
    );
    assert_eq!(
        identity.capabilities & (1 << CAP_IPC_LOCK_BIT),
        0,
        "the drive must run without CAP_IPC_LOCK"
    );
    let path = directory.join("ring");
    let options = FormatOptions {
        size_bytes: RING_BYTES,
        ..FormatOptions::default()
    };
    format(&path, &options).expect("formats as the unprivileged user");

    let drive = Drive::open(&path, DriveOptions::default()).expect("opens");
    let pinned_open = check_pinned(budget_bytes);
    let appended = append_checked(&drive, 0, ENTRIES_FIRST);
    read_back(&drive, &appended);
    // The recent-entry cache (64 MiB by default, ordinary memory, never locked) served them.
    let cache_hits = drive.read_stats().cache_hits;
    assert!(cache_hits > 0, "the cache works within the budget");
    drive.close();
    drop(drive);

    let drive = Drive::open(&path, DriveOptions::default()).expect("reopens");
    let pinned_reopen = check_pinned(budget_bytes);
    read_back(&drive, &appended);
    let more = append_checked(&drive, ENTRIES_FIRST, ENTRIES_AFTER_REOPEN);
    read_back(&drive, &more);
    drive.close();
    drop(drive);
    let pinned_closed = pinned_bytes();
    assert_eq!(pinned_closed, 0, "a closed drive leaves nothing pinned");

    format!(
        "uid={} gid={} groups=[{}] cap_eff={:#x} memlock_budget_bytes={budget_bytes} \
         pinned_open_bytes={pinned_open} pinned_reopen_bytes={pinned_reopen} \
         pinned_closed_bytes={pinned_closed} cache_hits={cache_hits} entries={} appended, \
         read back, reopened, read back: ok",
        identity.uids.split_whitespace().next().unwrap_or_default(),
        identity.gids.split_whitespace().next().unwrap_or_default(),
        identity.groups,
        identity.capabilities,
        ENTRIES_FIRST + ENTRIES_AFTER_REOPEN,
    )
}

/// Checks what an open drive pins: within the budget, the margin kept, and, where the budget
/// holds it, at least the batch lane (the buffers registration prefers); returns the bytes.
fn check_pinned(budget_bytes: u64) -> u64 {
    let pinned = pinned_bytes();
    assert!(
        pinned <= budget_bytes.saturating_sub(MEMLOCK_MARGIN_BYTES),
        "{pinned} bytes pinned, over the budget of {budget_bytes} less the margin"
    );
    let batch_lane =
        u64::from(WINDOW_BATCHES_DEFAULT) * (BLOCK_BYTES + u64::from(BATCH_SIZE_DEFAULT_MAX_BYTES));
    if budget_bytes >= batch_lane + MEMLOCK_MARGIN_BYTES {
        assert!(
            pinned >= batch_lane,
            "{pinned} bytes pinned: the budget of {budget_bytes} holds the batch lane's \
             {batch_lane}, which must be registered"
        );
    }
    pinned
}

/// Appends `count` entries numbered from `first`, waits for them all, and returns their LSNs
/// and payloads.
fn append_checked(drive: &Drive, first: u64, count: u64) -> Vec<(u64, Vec<u8>)> {
    let tickets: Vec<_> = (first..first + count)
        .map(|number| {
            let bytes = payload(number);
            (drive.append(bytes.clone()).expect("queued"), bytes)
        })
        .collect();
    let appended: Vec<(u64, Vec<u8>)> = tickets
        .into_iter()
        .map(|(ticket, bytes)| (ticket.wait().expect("durable"), bytes))
        .collect();
    for (index, (lsn, _)) in appended.iter().enumerate() {
        assert_eq!(*lsn, first + index as u64 + 1, "LSNs follow the appends");
    }
    appended
}

fn read_back(drive: &Drive, appended: &[(u64, Vec<u8>)]) {
    for (lsn, bytes) in appended {
        let read = drive.read(*lsn).expect("reads back");
        assert!(read == *bytes, "entry {lsn} read back different bytes");
    }
}

/// Entry `number`'s payload: 1 to 4000 bytes, its contents a function of the number.
fn payload(number: u64) -> Vec<u8> {
    let len = 1 + (number.wrapping_mul(7919) % 4000) as usize;
    (0..len)
        .map(|index| (number.wrapping_mul(31) as usize + index * 7) as u8)
        .collect()
}

/// Pages this process's io_uring registrations pin, in bytes (VmPin; 0 when absent).
fn pinned_bytes() -> u64 {
    status_field("VmPin:")
        .and_then(|value| value.trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

fn status_field(field: &str) -> Option<String> {
    std::fs::read_to_string("/proc/self/status")
        .expect("/proc/self/status")
        .lines()
        .find_map(|line| line.strip_prefix(field).map(|rest| rest.trim().to_string()))
}

/// Who this process is, from `/proc/self/status`.
struct Identity {
    /// Real, effective, saved and file-system uids.
    uids: String,
    /// The same four gids.
    gids: String,
    /// Supplementary groups.
    groups: String,
    /// The effective capability set.
    capabilities: u64,
}

impl Identity {
    fn of_this_process() -> Identity {
        Identity {
            uids: status_field("Uid:").unwrap_or_default(),
            gids: status_field("Gid:").unwrap_or_default(),
            groups: status_field("Groups:").unwrap_or_default(),
            capabilities: status_field("CapEff:")
                .and_then(|hex| u64::from_str_radix(&hex, 16).ok())
                .expect("CapEff"),
        }
    }
}
