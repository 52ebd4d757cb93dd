//! The C option structs and their Rust counterparts: the defaults `_init` writes (the
//! engine's own) and the checked conversion back, which refuses a value no option takes
//! with a message naming the field.

use std::time::Duration;

use sealog::{DriveOptions, Durability, FormatOptions, Signature, SyncMethod, WhenFull};
use sealog_wal::RecoveryMode;

use crate::status::Failure;
use crate::types::*;

/// The engine's default drive options, as C sees them.
pub fn drive_options_default() -> sealog_drive_options {
    let defaults = DriveOptions::default();
    sealog_drive_options {
        struct_size_bytes: size_of::<sealog_drive_options>() as u32,
        durability: SEALOG_DURABILITY_RING_DEFAULT,
        recovery: SEALOG_RECOVERY_STRICT,
        cpu: -1,
        when_full_wait_us: 0,
        channel_capacity_requests: defaults.channel_capacity as u64,
        spin_before_block_us: defaults.spin_before_block_us,
        group_gather_us: defaults.group_gather_us,
        tail_marker_idle_us: defaults.tail_marker_idle_us,
        client_spin_us: defaults.client_spin_us,
        read_cache_bytes: defaults.read_cache_bytes,
        read_buffers: defaults.read_buffers as u64,
        read_ahead_bytes: defaults.read_ahead_bytes,
        sqpoll_idle_ms: 0,
        reserved_zero: 0,
    }
}

/// The drive options a C struct asks for; the engine checks the ranges of the numbers.
pub fn drive_options(options: &sealog_drive_options) -> Result<DriveOptions, Failure> {
    let durability = match options.durability {
        SEALOG_DURABILITY_RING_DEFAULT => None,
        SEALOG_DURABILITY_FDATASYNC => Some(Durability::Fdatasync),
        SEALOG_DURABILITY_DSYNC => Some(Durability::Dsync),
        SEALOG_DURABILITY_NO_SYNC_BENCHMARK_ONLY => Some(Durability::NoSyncBenchmarkOnly),
        other => return Err(field("durability", other, "a SEALOG_DURABILITY_* value")),
    };
    let recovery = match options.recovery {
        SEALOG_RECOVERY_STRICT => RecoveryMode::Strict,
        SEALOG_RECOVERY_TRUNCATE_AT_CORRUPTION => RecoveryMode::TruncateAtCorruption,
        other => return Err(field("recovery", other, "a SEALOG_RECOVERY_* value")),
    };
    let cpu = match options.cpu {
        -1 => None,
        cpu => Some(usize::try_from(cpu).map_err(|_| field("cpu", cpu, "-1 or a CPU number"))?),
    };
    if options.reserved_zero != 0 {
        return Err(field("reserved_zero", options.reserved_zero, "0"));
    }
    Ok(DriveOptions {
        durability,
        when_full: match options.when_full_wait_us {
            0 => WhenFull::Fail,
            wait_us => WhenFull::Wait(Duration::from_micros(wait_us)),
        },
        recovery,
        cpu,
        channel_capacity: to_usize(
            "channel_capacity_requests",
            options.channel_capacity_requests,
        )?,
        spin_before_block_us: options.spin_before_block_us,
        sqpoll_idle_ms: (options.sqpoll_idle_ms != 0).then_some(options.sqpoll_idle_ms),
        group_gather_us: options.group_gather_us,
        tail_marker_idle_us: options.tail_marker_idle_us,
        client_spin_us: options.client_spin_us,
        read_cache_bytes: options.read_cache_bytes,
        read_buffers: to_usize("read_buffers", options.read_buffers)?,
        read_ahead_bytes: options.read_ahead_bytes,
        ..DriveOptions::default()
    })
}

/// The default format options for a ring of `size_bytes`.
pub fn format_options_default(size_bytes: u64) -> sealog_format_options {
    sealog_format_options {
        struct_size_bytes: size_of::<sealog_format_options>() as u32,
        sync_method: SEALOG_SYNC_MEASURE,
        size_bytes,
        segment_size_bytes: 0,
        batch_size_max_bytes: 0,
        window_batches_max: 0,
        force: 0,
        overwrite_signatures: 0,
    }
}

/// The format options a C struct asks for (zero: the default).
pub fn format_options(options: &sealog_format_options) -> Result<FormatOptions, Failure> {
    let sync_method = match options.sync_method {
        SEALOG_SYNC_MEASURE => None,
        SEALOG_SYNC_FDATASYNC => Some(SyncMethod::Fdatasync),
        SEALOG_SYNC_DSYNC => Some(SyncMethod::Dsync),
        other => return Err(field("sync_method", other, "a SEALOG_SYNC_* value")),
    };
    let mut overwrite = Vec::new();
    let mut unknown = options.overwrite_signatures;
    for (bit, signature) in SIGNATURE_BITS {
        if options.overwrite_signatures & bit != 0 {
            overwrite.push(signature);
            unknown &= !bit;
        }
    }
    if unknown != 0 {
        return Err(field(
            "overwrite_signatures",
            format!("{:#x}", options.overwrite_signatures),
            "SEALOG_SIGNATURE_* bits",
        ));
    }
    Ok(FormatOptions {
        overwrite,
        size_bytes: options.size_bytes,
        segment_size_bytes: (options.segment_size_bytes != 0).then_some(options.segment_size_bytes),
        force: options.force != 0,
        batch_size_max_bytes: (options.batch_size_max_bytes != 0)
            .then_some(options.batch_size_max_bytes),
        window_batches_max: (options.window_batches_max != 0).then_some(options.window_batches_max),
        sync_method,
        ..FormatOptions::default()
    })
}

/// Each `SEALOG_SIGNATURE_*` bit and the signature it names.
const SIGNATURE_BITS: [(u32, Signature); 8] = [
    (SEALOG_SIGNATURE_SEALOG, Signature::Sealog),
    (SEALOG_SIGNATURE_EXT4, Signature::Ext4),
    (SEALOG_SIGNATURE_XFS, Signature::Xfs),
    (SEALOG_SIGNATURE_BTRFS, Signature::Btrfs),
    (SEALOG_SIGNATURE_SWAP, Signature::Swap),
    (SEALOG_SIGNATURE_LVM2, Signature::Lvm2),
    (SEALOG_SIGNATURE_GPT, Signature::Gpt),
    (SEALOG_SIGNATURE_MBR, Signature::Mbr),
];

fn field(name: &str, value: impl std::fmt::Display, wanted: &str) -> Failure {
    Failure::invalid(format!("options.{name} is {value}: it takes {wanted}"))
}

fn to_usize(name: &str, value: u64) -> Result<usize, Failure> {
    usize::try_from(value).map_err(|_| field(name, value, "a value that fits this machine"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_bits_name_the_signatures_format_may_overwrite() {
        let mut options = format_options_default(64 << 20);
        assert!(format_options(&options)
            .expect("valid")
            .overwrite
            .is_empty());
        options.overwrite_signatures = SEALOG_SIGNATURE_EXT4 | SEALOG_SIGNATURE_SEALOG;
        let named = format_options(&options).expect("valid").overwrite;
        assert_eq!(named, vec![Signature::Sealog, Signature::Ext4]);
        let every = SIGNATURE_BITS.iter().fold(0, |mask, (bit, _)| mask | bit);
        assert_eq!(
            every.count_ones() as usize,
            Signature::ALL.len(),
            "one bit each"
        );
        options.overwrite_signatures = 1 << 20;
        let refused = format_options(&options).expect_err("an unknown bit is refused");
        assert!(format!("{refused:?}").contains("overwrite_signatures"));
    }

    #[test]
    fn the_defaults_convert_back_to_the_engines() {
        let options = drive_options(&drive_options_default()).expect("defaults are valid");
        let engine = DriveOptions::default();
        assert_eq!(options.channel_capacity, engine.channel_capacity);
        assert_eq!(options.read_cache_bytes, engine.read_cache_bytes);
        assert_eq!(options.when_full, WhenFull::Fail);
        assert_eq!(options.durability, None);
        assert_eq!(options.cpu, None);
        let format = format_options(&format_options_default(1 << 20)).expect("valid");
        assert_eq!(format.size_bytes, 1 << 20);
        assert_eq!(format.segment_size_bytes, None);
        assert_eq!(format.sync_method, None);
    }

    #[test]
    fn a_value_no_option_takes_is_named() {
        let mut options = drive_options_default();
        options.durability = 9;
        let failure = drive_options(&options).expect_err("9 is no durability");
        assert_eq!(failure.status, sealog_status::SEALOG_INVALID_ARGUMENT);
        assert_eq!(
            failure.message,
            "options.durability is 9: it takes a SEALOG_DURABILITY_* value"
        );
        let mut options = drive_options_default();
        options.cpu = -2;
        assert!(drive_options(&options).is_err());
        let mut format = format_options_default(1 << 20);
        format.sync_method = 7;
        assert!(format_options(&format).is_err());
    }
}
