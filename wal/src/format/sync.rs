//! The sync method a ring records (the choice format made, and the measurement it made it
//! on) and its encoding in the control block.

/// How a write is made durable: the two methods a ring's default durability is chosen from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SyncMethod {
    /// An O_DIRECT write, then an fdatasync linked behind it: one device flush per commit.
    Fdatasync = 1,
    /// An O_DIRECT write with RWF_DSYNC: durable when it completes (a FUA write where the
    /// device has FUA; else the kernel flushes after it).
    Dsync = 2,
}

impl SyncMethod {
    /// Decodes a method byte; `None` for a byte that names no method.
    pub fn from_byte(byte: u8) -> Option<SyncMethod> {
        match byte {
            1 => Some(SyncMethod::Fdatasync),
            2 => Some(SyncMethod::Dsync),
            _ => None,
        }
    }

    /// Lower-case name, for reports and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            SyncMethod::Fdatasync => "fdatasync",
            SyncMethod::Dsync => "dsync",
        }
    }
}

/// What format measured to choose a sync method: both methods timed at queue depth 1, one
/// write at a time of the size a small append writes, in interleaved rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct SyncMeasurement {
    /// Bytes of each timed write.
    pub write_size_bytes: u32,
    /// Rounds, each timing both methods.
    pub rounds: u16,
    /// Writes of each method per round.
    pub writes_per_round: u16,
    /// By how many percent RWF_DSYNC had to beat the fdatasync at both p50 and p99.
    pub margin_percent: u8,
    /// Whether the device reported FUA (RWF_DSYNC writes are FUA writes then).
    pub fua: bool,
    /// Write + linked fdatasync: median, microseconds.
    pub fdatasync_p50_us: u32,
    /// Write + linked fdatasync: 99th percentile, microseconds.
    pub fdatasync_p99_us: u32,
    /// Write with RWF_DSYNC: median, microseconds.
    pub dsync_p50_us: u32,
    /// Write with RWF_DSYNC: 99th percentile, microseconds.
    pub dsync_p99_us: u32,
}

/// How format chose a ring's default durability (the drive's own options may still override
/// it when it opens).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SyncChoice {
    /// Nothing recorded: a ring formatted before the choice was recorded, or one made without
    /// a device to measure (simulated rings). Its default is fdatasync.
    #[default]
    NotRecorded,
    /// Named by the operator at format time; nothing was measured.
    Named(SyncMethod),
    /// Chosen by measuring the device at format time.
    Measured {
        /// The method chosen.
        method: SyncMethod,
        /// The figures it was chosen on.
        measurement: SyncMeasurement,
    },
}

impl SyncChoice {
    /// The ring's default method: the one chosen, or fdatasync when none was recorded.
    pub fn method(&self) -> SyncMethod {
        match *self {
            SyncChoice::NotRecorded => SyncMethod::Fdatasync,
            SyncChoice::Named(method) | SyncChoice::Measured { method, .. } => method,
        }
    }

    /// The measurement behind the choice, if it was measured.
    pub fn measurement(&self) -> Option<SyncMeasurement> {
        match *self {
            SyncChoice::Measured { measurement, .. } => Some(measurement),
            SyncChoice::NotRecorded | SyncChoice::Named(_) => None,
        }
    }
}
