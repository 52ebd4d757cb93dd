//! The types C sees: the status codes, the option structs a caller fills and the output
//! structs the library fills, and the constants their fields take. Names are C's
//! (`sealog_status`, `SEALOG_OK`) because cbindgen writes them into the header as they are.
//!
//! Every struct opens with `struct_size_bytes`, set by its `_init` function to the size the
//! caller was compiled with, so a struct can grow at its end without breaking a program built
//! against an older header (the library reads or writes only the fields that size covers) or
//! a newer one (fields this library does not know must be zero in an options struct; an
//! output struct's `struct_size_bytes` comes back as the bytes the library filled). Fields are
//! plain integers, never C enums, so no bit pattern a caller leaves in them is undefined.

#![allow(non_camel_case_types)]

/// What a call did. Every function of the library returns one of these as an `int`
/// (`SEALOG_OK` is 0); the message of the last failure on a thread is
/// `sealog_last_error_message()`. The numbers are stable: new codes are only ever added.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum sealog_status {
    /// The call did what it was asked.
    SEALOG_OK = 0,
    /// `sealog_ticket_poll`: the append is not durable yet (nor failed); poll again later.
    SEALOG_PENDING = 1,
    /// `sealog_iter_next`: no entry now, the iterator is at the durable tail; a later call
    /// goes on from there once more entries are durable.
    SEALOG_END = 2,
    /// The LSN was released by a trim (or is below the first live LSN).
    SEALOG_TRIMMED = 3,
    /// The LSN is not acknowledged yet (or was never appended), or a trim asked to release
    /// entries past the durable tail.
    SEALOG_NOT_YET_DURABLE = 4,
    /// The ring is full: trim to make room (the append was not made).
    SEALOG_RING_FULL = 5,
    /// The payload is over the ring's limit (`sealog_shape.payload_size_max_bytes`);
    /// nothing of it was written.
    SEALOG_TOO_LARGE = 6,
    /// Opening found acknowledged data damaged (strict recovery) or the ring's control
    /// blocks damaged.
    SEALOG_CORRUPT = 7,
    /// A read found the record damaged, or the device failed the read: that read's outcome
    /// only, the drive runs on.
    SEALOG_DAMAGED = 8,
    /// A system call failed (the message names the path and what was being done).
    SEALOG_IO = 9,
    /// The drive was closed before the request was carried out.
    SEALOG_CLOSED = 10,
    /// The drive stopped for good after a write or flush failed (fail-stop): reopen the ring
    /// to go on; nothing is acknowledged after the failure.
    SEALOG_FAILED = 11,
    /// An argument is wrong: a NULL pointer, a path that is not UTF-8, an option out of
    /// range, a struct size this library does not know.
    SEALOG_INVALID_ARGUMENT = 12,
    /// Another process (or handle) holds the ring.
    SEALOG_IN_USE = 13,
    /// The path holds no ring this library can open (not a ring, another format version, a
    /// segment file of the wrong length).
    SEALOG_NOT_A_RING = 14,
    /// `sealog_format`: the directory exists and is not empty (set `force` to format it).
    SEALOG_NOT_EMPTY = 15,
    /// A wait ran out of time before its LSN was durable.
    SEALOG_TIMED_OUT = 16,
    /// The library panicked (a bug in sealog): the panic was caught at the boundary and its
    /// message is the last error. The drive may be unusable; close it.
    SEALOG_PANIC = 17,
    /// `sealog_append_group*`: the group holds no entry (nothing was appended).
    SEALOG_EMPTY_GROUP = 18,
    /// `sealog_append_group*`: the group's entries, each with its 96-byte entry header, are
    /// together over the ring's batch limit (a group shares one batch); nothing was appended.
    /// Split it, or format the ring with a larger `batch_size_max_bytes`.
    SEALOG_GROUP_TOO_LARGE = 19,
    /// A LogDrive write: the address already holds different bytes; the first value stays
    /// (`sealog_logdrive_error.address`).
    SEALOG_CONFLICT = 20,
    /// The LogDrive is sealed (`sealog_logdrive_error.length`): a write at or past that
    /// length, or a seal at another.
    SEALOG_SEALED = 21,
    /// The LogDrive is fenced at a higher epoch than the caller's
    /// (`sealog_logdrive_error.epoch` is the fence).
    SEALOG_FENCED = 22,
    /// An address, seal length or trim point outside what the LogDrive allows
    /// (`sealog_logdrive_error.address`, `.valid_start`, `.valid_end`).
    SEALOG_OUT_OF_RANGE = 23,
    /// A weak-tail window over what the store answers (`sealog_logdrive_error.k`, `.k_max`).
    SEALOG_INVALID_WINDOW = 24,
    /// No live LogDrive of that id (and generation) (`sealog_logdrive_error.id`,
    /// `.generation`).
    SEALOG_MISSING = 25,
    /// A LogDrive of that id exists already (`sealog_logdrive_error.id`).
    SEALOG_EXISTS = 26,
    /// The store stopped (closed, or a control record could not be made durable): the
    /// operation may or may not have taken effect; reopen to find out.
    SEALOG_STOPPED = 27,
    /// A server refused the operation before doing it: too many in flight
    /// (`sealog_logdrive_error.in_flight_max`); nothing was done.
    SEALOG_OVERLOADED = 28,
    /// A server refused the caller (credentials or role); nothing was done.
    SEALOG_DENIED = 29,
}

/// `sealog_drive_options.durability`: what the ring recorded when it was formatted.
pub const SEALOG_DURABILITY_RING_DEFAULT: u32 = 0;
/// `sealog_drive_options.durability`: a write, then a linked fdatasync.
pub const SEALOG_DURABILITY_FDATASYNC: u32 = 1;
/// `sealog_drive_options.durability`: every write with RWF_DSYNC (FUA where the device has it).
pub const SEALOG_DURABILITY_DSYNC: u32 = 2;
/// `sealog_drive_options.durability`: no flush at all. A power cut can lose acknowledged
/// entries: for benchmarks only.
pub const SEALOG_DURABILITY_NO_SYNC_BENCHMARK_ONLY: u32 = 3;

/// `sealog_drive_options.recovery`: fail the open when acknowledged data is damaged.
pub const SEALOG_RECOVERY_STRICT: u32 = 0;
/// `sealog_drive_options.recovery`: cut the log at the damage and open.
pub const SEALOG_RECOVERY_TRUNCATE_AT_CORRUPTION: u32 = 1;

/// `sealog_format_options.sync_method`: measure the device and record the faster method.
pub const SEALOG_SYNC_MEASURE: u32 = 0;
/// `sealog_format_options.sync_method`: record fdatasync (and measure nothing).
pub const SEALOG_SYNC_FDATASYNC: u32 = 1;
/// `sealog_format_options.sync_method`: record RWF_DSYNC (and measure nothing).
pub const SEALOG_SYNC_DSYNC: u32 = 2;

/// `sealog_shape.state`: the drive accepts appends.
pub const SEALOG_DRIVE_RUNNING: u32 = 0;
/// `sealog_shape.state`: the drive stopped after a write or flush failed; reopen.
pub const SEALOG_DRIVE_FAILED: u32 = 1;
/// `sealog_shape.state`: the drive was closed.
pub const SEALOG_DRIVE_CLOSED: u32 = 2;

/// An entry's kind (`sealog_new_entry.kind`, `sealog_entry.kind`, `sealog_entry_view.kind`):
/// an embedder's data, the default.
pub const SEALOG_KIND_DATA: u32 = 1;
/// An entry's kind: a trim record of the layers above (sealog stores it as it stores data;
/// it trims nothing itself).
pub const SEALOG_KIND_TRIM: u32 = 3;
/// An entry's kind: a seal record of the layers above.
pub const SEALOG_KIND_SEAL: u32 = 4;
/// An entry's kind: a fence record of the layers above.
pub const SEALOG_KIND_FENCE: u32 = 5;
// Kind 2 is the format's padding, written by the engine only: appending it is
// `SEALOG_INVALID_ARGUMENT`, and no read returns it.

/// A timeout that never runs out (`sealog_wait_durable`, `sealog_ticket_wait`).
pub const SEALOG_TIMEOUT_NONE_US: u64 = u64::MAX;

/// How `sealog_format` lays out a ring. Fill it with `sealog_format_options_init`, then
/// change what you need.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct sealog_format_options {
    /// `sizeof(sealog_format_options)` as the caller was compiled (set by the init function).
    pub struct_size_bytes: u32,
    /// The ring's default durability: `SEALOG_SYNC_MEASURE` (the default: about 0.1 s of
    /// measuring the device), `SEALOG_SYNC_FDATASYNC` or `SEALOG_SYNC_DSYNC`.
    pub sync_method: u32,
    /// Total bytes of the ring (control area and segments).
    pub size_bytes: u64,
    /// Bytes per segment; 0: 64 MiB or a quarter of the ring, whichever is smaller.
    pub segment_size_bytes: u64,
    /// The largest batch in bytes; 0: 1 MiB (or a segment's data area if smaller).
    pub batch_size_max_bytes: u32,
    /// Batches in flight; 0: 4.
    pub window_batches_max: u32,
    /// Nonzero: format a directory that exists and is not empty.
    pub force: u32,
    /// The signatures a block device may carry and still be formatted over, as a mask of
    /// `SEALOG_SIGNATURE_*` bits (0, the default: format refuses a device carrying any of
    /// them with `SEALOG_NOT_EMPTY`, naming what it found). A mounted, held or partitioned
    /// device is refused whatever this says.
    pub overwrite_signatures: u32,
}

/// `sealog_format_options.overwrite_signatures`: an existing sealog ring (of any identity).
pub const SEALOG_SIGNATURE_SEALOG: u32 = 1 << 0;
/// `sealog_format_options.overwrite_signatures`: an ext2/3/4 file system.
pub const SEALOG_SIGNATURE_EXT4: u32 = 1 << 1;
/// `sealog_format_options.overwrite_signatures`: an XFS file system.
pub const SEALOG_SIGNATURE_XFS: u32 = 1 << 2;
/// `sealog_format_options.overwrite_signatures`: a btrfs file system.
pub const SEALOG_SIGNATURE_BTRFS: u32 = 1 << 3;
/// `sealog_format_options.overwrite_signatures`: a swap area.
pub const SEALOG_SIGNATURE_SWAP: u32 = 1 << 4;
/// `sealog_format_options.overwrite_signatures`: an LVM2 physical volume.
pub const SEALOG_SIGNATURE_LVM2: u32 = 1 << 5;
/// `sealog_format_options.overwrite_signatures`: a GPT partition table.
pub const SEALOG_SIGNATURE_GPT: u32 = 1 << 6;
/// `sealog_format_options.overwrite_signatures`: an MBR partition table.
pub const SEALOG_SIGNATURE_MBR: u32 = 1 << 7;

/// How `sealog_open` opens a drive. Fill it with `sealog_drive_options_init` (the engine's
/// defaults), then change what you need; a NULL options pointer means the defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct sealog_drive_options {
    /// `sizeof(sealog_drive_options)` as the caller was compiled (set by the init function).
    pub struct_size_bytes: u32,
    /// `SEALOG_DURABILITY_*`; the default is the method the ring recorded at format.
    pub durability: u32,
    /// `SEALOG_RECOVERY_STRICT` (the default) or `SEALOG_RECOVERY_TRUNCATE_AT_CORRUPTION`.
    pub recovery: u32,
    /// Pin the drive thread to this CPU; -1 (the default): not pinned.
    pub cpu: i32,
    /// When the ring is full, how long an append waits for a trim before it fails with
    /// `SEALOG_RING_FULL`, in microseconds; 0 (the default): fail at once.
    pub when_full_wait_us: u64,
    /// Requests queued to the drive thread before an append blocks (1 to 2^24).
    pub channel_capacity_requests: u64,
    /// How long the drive thread spins on the completion queue before it blocks, in
    /// microseconds (0 blocks at once).
    pub spin_before_block_us: u64,
    /// Group commit's gathering window in microseconds (0 disables).
    pub group_gather_us: u64,
    /// How long the log stays idle before the drive writes a tail marker, in microseconds.
    pub tail_marker_idle_us: u64,
    /// How long a thread waiting on a ticket spins before it parks, in microseconds.
    pub client_spin_us: u64,
    /// Bytes of the recent-entry cache, from which reads of recent entries are served
    /// without touching the device (0 disables it).
    pub read_cache_bytes: u64,
    /// Reads on the device at once from callers' threads (more wait their turn).
    pub read_buffers: u64,
    /// Bytes an iterator reads from the device at a time (at least the ring's batch limit).
    pub read_ahead_bytes: u64,
    /// Let a kernel thread poll the submission queue (SQPOLL), asleep after this many idle
    /// milliseconds; 0 (the default): no polling thread.
    pub sqpoll_idle_ms: u32,
    /// Must be zero.
    pub reserved_zero: u32,
}

/// The embedder's header of an entry: 32 bytes the layer above sealog gives each entry it
/// appends and gets back from reads, iterators and the recovery visitor. They are stored in
/// the entry's header, under the header's CRC rather than the payload's, so a read that finds
/// the payload damaged can still say which of the embedder's records it was. sealog never
/// interprets them; the names are a convention for log servers. Zeros when none was given.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct sealog_embedder_header {
    /// Which of the embedder's logs the entry belongs to (a ledger, a stream, a raft group).
    pub log_id: u64,
    /// The entry's address in that log (an entry id, a byte offset, a raft index).
    pub address: u64,
    /// The epoch, term or fencing token it was written under.
    pub epoch: u64,
    /// A fourth word, for whatever else the embedder needs.
    pub extra: u64,
}

/// One entry to append (`sealog_append_entry*`, and the elements of the array
/// `sealog_append_group*` takes): its kind, embedder header and payload. Fill it with
/// `sealog_new_entry_init` (a data entry, header zeros, empty payload), then set what you
/// need. The library copies the payload before the call returns.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct sealog_new_entry {
    /// `sizeof(sealog_new_entry)` as the caller was compiled (set by the init function). In an
    /// array, every element has the same size, which is the array's stride.
    pub struct_size_bytes: u32,
    /// `SEALOG_KIND_*` (`SEALOG_KIND_DATA` after init).
    pub kind: u32,
    /// The embedder's header stored with the entry.
    pub header: sealog_embedder_header,
    /// The payload (NULL when `payload_len_bytes` is 0); read only until the call returns.
    pub payload: *const u8,
    /// The payload's length in bytes.
    pub payload_len_bytes: usize,
}

/// One entry of the log, as `sealog_read` and `sealog_iter_next` hand it out. Fill
/// `struct_size_bytes` with `sealog_entry_init` before the first use.
///
/// Versions: the fields up to `payload_len_bytes` are the first version of this struct;
/// `header`, `header_valid` and `reserved_zero` were added at its end. A caller built against
/// the first version (a smaller `struct_size_bytes`) gets those fields it knows, filled as
/// before; `kind` took the place of a field that was always zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct sealog_entry {
    /// In: `sizeof(sealog_entry)` as the caller was compiled. Out: the bytes filled.
    pub struct_size_bytes: u32,
    /// The entry's kind (`SEALOG_KIND_*`); 0 when unknown (a damaged entry).
    pub kind: u32,
    /// The entry's LSN.
    pub lsn: u64,
    /// The payload (NULL when it is empty). Who owns it depends on the call: see
    /// `sealog_read` and `sealog_iter_next`.
    pub payload: *const u8,
    /// The payload's length in bytes.
    pub payload_len_bytes: usize,
    /// The embedder's header the entry was appended with (zeros when none was given).
    pub header: sealog_embedder_header,
    /// 1 when `header` holds the entry's embedder header: always after `SEALOG_OK`; after
    /// `SEALOG_DAMAGED`, when the entry's header is intact and only its payload is damaged
    /// (0 when the header itself is damaged or the device failed the read).
    pub header_valid: u32,
    /// Zero.
    pub reserved_zero: u32,
}

/// A recovered entry as the recovery visitor of `sealog_open_visiting` sees it, borrowed
/// from the open's replay buffer: every pointer in it (the view itself, the payload) is valid
/// only during the visitor's call; copy out what you keep. Filled by the library:
/// `struct_size_bytes` says how many bytes of it are (later versions add fields at its end;
/// check the size before reading one the first version does not have).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct sealog_entry_view {
    /// The bytes of this struct the library filled.
    pub struct_size_bytes: u32,
    /// The entry's kind (`SEALOG_KIND_*`).
    pub kind: u32,
    /// The entry's LSN.
    pub lsn: u64,
    /// The embedder's header it was appended with (zeros when none was given).
    pub header: sealog_embedder_header,
    /// The payload, checked against its CRC (NULL when it is empty). Borrowed: valid during
    /// the call only.
    pub payload: *const u8,
    /// The payload's length in bytes.
    pub payload_len_bytes: usize,
}

/// The log's shape (`sealog_drive_shape`): what the drive publishes, read without asking
/// its thread, so at most a moment old.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct sealog_shape {
    /// In: `sizeof(sealog_shape)` as the caller was compiled. Out: the bytes filled.
    pub struct_size_bytes: u32,
    /// `SEALOG_DRIVE_RUNNING`, `SEALOG_DRIVE_FAILED` or `SEALOG_DRIVE_CLOSED`.
    pub state: u32,
    /// The first live LSN (the trim point plus one).
    pub first_live_lsn: u64,
    /// The trim point: every entry at or below it is released.
    pub trim_lsn: u64,
    /// The highest acknowledged (durable) LSN; 0 when nothing was ever appended.
    pub durable_lsn: u64,
    /// The LSN the next append will get.
    pub next_lsn: u64,
    /// Acknowledged entries not trimmed.
    pub live_entries: u64,
    /// The ring's bytes for the log (every segment, headers included).
    pub capacity_bytes: u64,
    /// The ring's bytes from its head (the oldest live batch) to the write position.
    pub occupied_bytes: u64,
    /// The largest payload an append takes, in bytes (from the ring's geometry).
    pub payload_size_max_bytes: u32,
    /// The ring's block size in bytes.
    pub block_size_bytes: u32,
}

/// `sealog_store_options.recovery`: fail the open when acknowledged data is damaged.
pub const SEALOG_STORE_RECOVERY_STRICT: u32 = 0;
/// `sealog_store_options.recovery`: open with damaged records in quarantine: their
/// addresses read `SEALOG_LOGDRIVE_DAMAGED` (never unwritten) until a write of the same
/// value repairs them, and the open's report counts them.
pub const SEALOG_STORE_RECOVERY_QUARANTINE: u32 = 1;

/// How `sealog_store_open` opens a LogDrive store. Fill it with
/// `sealog_store_options_init`, then change what you need.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct sealog_store_options {
    /// `sizeof(sealog_store_options)` as the caller was compiled (set by the init function).
    pub struct_size_bytes: u32,
    /// `SEALOG_STORE_RECOVERY_STRICT` (the default) or `SEALOG_STORE_RECOVERY_QUARANTINE`.
    pub recovery: u32,
}

/// What `sealog_store_open` found on the ring.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct sealog_store_report {
    /// In: `sizeof(sealog_store_report)` as the caller was compiled. Out: the bytes filled.
    pub struct_size_bytes: u32,
    /// Zero.
    pub reserved_zero: u32,
    /// The live LogDrives.
    pub logdrives: u64,
    /// Damaged records or LSN ranges a quarantined open stepped over (0 when strict).
    pub damaged_records: u64,
    /// Addresses that read damaged, over every LogDrive.
    pub damaged_addresses: u64,
    /// Entries that took no effect on any live LogDrive.
    pub skipped_records: u64,
}

/// `sealog_logdrive_value.outcome`: the address holds `payload`.
pub const SEALOG_LOGDRIVE_VALUE: u32 = 0;
/// `sealog_logdrive_value.outcome`: nothing is written there.
pub const SEALOG_LOGDRIVE_UNWRITTEN: u32 = 1;
/// `sealog_logdrive_value.outcome`: below the trim point (`first` is the trim point).
pub const SEALOG_LOGDRIVE_TRIMMED: u32 = 2;
/// `sealog_logdrive_value.outcome`: written, and its record damaged (never unwritten).
pub const SEALOG_LOGDRIVE_DAMAGED: u32 = 3;

/// What `sealog_logdrive_read` found at an address.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct sealog_logdrive_value {
    /// In: `sizeof(sealog_logdrive_value)` as the caller was compiled. Out: the bytes filled.
    pub struct_size_bytes: u32,
    /// `SEALOG_LOGDRIVE_VALUE`, `_UNWRITTEN`, `_TRIMMED` or `_DAMAGED`.
    pub outcome: u32,
    /// With `SEALOG_LOGDRIVE_TRIMMED`, the trim point (the first address not trimmed).
    pub first: u64,
    /// With `SEALOG_LOGDRIVE_VALUE`, the value, allocated by the library (NULL when
    /// empty): free it with `sealog_buffer_free(payload, payload_len_bytes)`.
    pub payload: *mut u8,
    /// The value's length in bytes.
    pub payload_len_bytes: usize,
}

/// A LogDrive's lengths and settings (`sealog_logdrive_length`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct sealog_logdrive_lengths {
    /// In: `sizeof(sealog_logdrive_lengths)` as the caller was compiled. Out: the bytes
    /// filled.
    pub struct_size_bytes: u32,
    /// 1 when sealed (`sealed_length` holds the length).
    pub sealed: u32,
    /// N: one past the highest written address.
    pub n: u64,
    /// T: the first unwritten address at or past the trim point.
    pub t: u64,
    /// The sealed length (0 unless `sealed`).
    pub sealed_length: u64,
    /// The fence epoch (0 before any fence).
    pub fence: u64,
    /// The trim point: the first address not trimmed.
    pub first: u64,
}

/// The details of the last LogDrive error on this thread (`sealog_logdrive_last_error`):
/// which fields hold something depends on `status`, as each `SEALOG_*` code says.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct sealog_logdrive_error {
    /// In: `sizeof(sealog_logdrive_error)` as the caller was compiled. Out: the bytes filled.
    pub struct_size_bytes: u32,
    /// The cause's status (`SEALOG_OK` when the thread's last call met no LogDrive error).
    pub status: i32,
    /// 1 when nothing was written (definite); 0 when the operation may or may not have
    /// taken effect (indeterminate: a stopped store, an I/O error, a quorum that does not
    /// know). Retrying an indeterminate write of the same value is safe: a LogDrive address
    /// is written once.
    pub definite: u32,
    /// Zero.
    pub reserved_zero: u32,
    /// `SEALOG_CONFLICT` and `SEALOG_OUT_OF_RANGE`: the address (or length, or trim point).
    pub address: u64,
    /// `SEALOG_SEALED`: the sealed length.
    pub length: u64,
    /// `SEALOG_FENCED`: the fence epoch.
    pub epoch: u64,
    /// `SEALOG_OUT_OF_RANGE`: the range allowed, `[valid_start, valid_end)`.
    /// `SEALOG_DAMAGED` from a weak tail: the addresses in doubt.
    pub valid_start: u64,
    /// See `valid_start`.
    pub valid_end: u64,
    /// `SEALOG_INVALID_WINDOW`: the window asked for.
    pub k: u64,
    /// `SEALOG_INVALID_WINDOW`: the largest window answered.
    pub k_max: u64,
    /// `SEALOG_MISSING` and `SEALOG_EXISTS`: the LogDrive's id.
    pub id: u64,
    /// `SEALOG_MISSING`: the generation asked for (0 when none).
    pub generation: u64,
    /// `SEALOG_TOO_LARGE`: the payload's length.
    pub len_bytes: u64,
    /// `SEALOG_TOO_LARGE`: the ring's limit.
    pub max_bytes: u64,
    /// `SEALOG_OVERLOADED`: the server's bound on operations in flight.
    pub in_flight_max: u64,
}
