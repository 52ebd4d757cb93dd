//! What format looks for on a block device before it writes anything: a mount or a holder
//! (device-mapper, md), partitions, and the signatures of what a device commonly carries (file
//! systems, swap, an LVM physical volume, partition tables, a sealog ring). Format refuses a
//! device where it finds any of them, unless its caller names each signature found in
//! [`crate::FormatOptions::overwrite`]; a mount, a holder or partitions cannot be overridden
//! (unmount, or format the partition instead).
//!
//! Detection is pure: [`detect`] looks at the device's first bytes ([`PROBE_BYTES`], read with
//! a plain read) and [`device_facts`] at text and directories the caller hands it (the
//! process's mountinfo and a sysfs directory), so both are unit-tested on crafted input. The
//! offsets are the ones `blkid` (util-linux's libblkid) probes.
//!
//! - `found`: the signatures, and one found;
//! - `probe`: looking for them in a device's first bytes;
//! - `facts`: a device's mounts, holders and partitions, and the refusal they and the
//!   signatures found make.
//!
//! This module is only a hub: its children import from each other, never from here.

mod facts;
pub(crate) mod found;
mod probe;

pub use self::facts::{device_facts, facts_of, refusal, DeviceFacts};
pub use self::found::{Found, Signature};
pub use self::probe::{detect, PROBE_BYTES};
