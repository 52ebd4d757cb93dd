//! How much of a buffer pool the io_uring backend registers: registered buffers are pinned
//! memory, and for a process without CAP_IPC_LOCK the kernel charges every page of them to the
//! user's locked-memory count, refusing a registration (ENOMEM) that would take it past
//! RLIMIT_MEMLOCK (8 MiB for a non-root process on this machine, less than the 9 MiB pool of a
//! ring of default geometry). So the backend registers the longest prefix of the pool that fits
//! what the limit leaves, and ops on the buffers past it use plain READ and WRITE. A prefix is
//! what the kernel's table takes (buffer `i` is entry `i`), and the drive numbers its buffers so
//! that the ones that pay most come first (batches, then the control buffer, then reads).
//!
//! The budget is an estimate: the kernel counts per user, and what other processes of the same
//! user hold is invisible from here. So a margin stays free, and a registration the kernel
//! refuses anyway is retried with one buffer fewer until one fits (or none).

use std::fmt;
use std::io;

use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};

/// Locked memory left free below the limit: room for the locked memory this process cannot
/// see (other processes of the same user, whose registrations the kernel charges to the same
/// count) and for small pins that come later (another ring's buffers, a probe at format).
pub const MEMLOCK_MARGIN_BYTES: u64 = 256 << 10;

/// CAP_IPC_LOCK's bit in the capability sets of `/proc/self/status`.
const CAP_IPC_LOCK_BIT: u32 = 14;

/// What registrations may lock, as this process sees it when the backend is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemlockBudget {
    /// RLIMIT_MEMLOCK's soft limit (the one the kernel checks); `None`: unlimited.
    pub limit_bytes: Option<u64>,
    /// Memory this process already holds locked or pinned (VmLck plus VmPin, which includes
    /// buffers other rings of this process registered): it counts against the same limit.
    pub held_bytes: u64,
    /// CAP_IPC_LOCK is in effect: the kernel charges registrations to nobody.
    pub exempt: bool,
}

impl MemlockBudget {
    /// The budget of the calling process: its limit, what it holds, and its capabilities.
    /// What cannot be read (no /proc) counts as nothing held and no capability: the kernel's
    /// refusal is still handled.
    pub fn of_this_process() -> MemlockBudget {
        let limit_bytes = match getrlimit(Resource::RLIMIT_MEMLOCK) {
            Ok((soft, _)) if soft == RLIM_INFINITY => None,
            Ok((soft, _)) => Some(soft),
            // getrlimit cannot fail for a valid resource; an unknown limit is taken as none
            // and the kernel's refusal is what bounds the registration then.
            Err(_) => None,
        };
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let held_bytes =
            status_kib(&status, "VmLck:").saturating_add(status_kib(&status, "VmPin:"));
        MemlockBudget {
            limit_bytes,
            held_bytes,
            exempt: has_ipc_lock(&status),
        }
    }

    /// Bytes registrations may still take under the limit, margin kept (`None`: no cap,
    /// whether from CAP_IPC_LOCK or an unlimited RLIMIT_MEMLOCK).
    pub fn available_bytes(&self) -> Option<u64> {
        if self.exempt {
            return None;
        }
        self.limit_bytes.map(|limit| {
            limit
                .saturating_sub(self.held_bytes)
                .saturating_sub(MEMLOCK_MARGIN_BYTES)
        })
    }

    /// The cap after the kernel refused a registration the budget allowed: the limit's
    /// share even when this process looked exempt (a capability that holds in its own user
    /// namespace only, say), else no tighter than before.
    fn after_refusal_bytes(&self) -> Option<u64> {
        MemlockBudget {
            exempt: false,
            ..*self
        }
        .available_bytes()
    }
}

/// A `/proc/self/status` field given in kB, in bytes (0 when absent).
fn status_kib(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib.saturating_mul(1024))
}

/// Whether CAP_IPC_LOCK is in the effective set of `/proc/self/status`.
fn has_ipc_lock(status: &str) -> bool {
    status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|effective| effective & (1 << CAP_IPC_LOCK_BIT) != 0)
}

/// Bytes the kernel charges for registering `len` bytes at `address`: every page the range
/// touches, whole (on a kernel that backs the range with small pages; the pool asks for them
/// where the budget is capped).
pub fn charged_bytes(address: usize, len: usize, page_bytes: usize) -> u64 {
    if len == 0 {
        return 0;
    }
    let first_page = address / page_bytes;
    let last_page = (address + len - 1) / page_bytes;
    ((last_page - first_page + 1) * page_bytes) as u64
}

/// How many buffers, taken in index order, fit in `available` bytes (`None`: all).
pub fn buffers_within(charged: &[u64], available: Option<u64>) -> usize {
    let Some(available) = available else {
        return charged.len();
    };
    let mut total = 0u64;
    charged
        .iter()
        .take_while(|&&bytes| {
            total = total.saturating_add(bytes);
            total <= available
        })
        .count()
}

/// What the backend registered of its pool, and why not all of it.
#[derive(Debug)]
pub struct BufferRegistration {
    /// Buffers registered: indices `[0, buffers_registered)` of the pool.
    pub buffers_registered: usize,
    /// Buffers in the pool.
    pub buffers_total: usize,
    /// Bytes of each buffer.
    pub buffer_bytes: usize,
    /// The budget the registration was planned in.
    pub budget: MemlockBudget,
    /// The kernel's last refusal, when it refused one: ENOMEM when locked memory it charged
    /// ran out (retried with fewer buffers), another error when it refused registration itself.
    pub refusal: Option<io::Error>,
}

impl BufferRegistration {
    /// Registers the longest prefix of a pool whose buffers the kernel charges `charged`
    /// bytes each that fits `budget`, through `register(count)` (which registers buffers
    /// `[0, count)`); a prefix the kernel refuses with ENOMEM is retried one buffer shorter.
    pub fn register(
        charged: &[u64],
        buffer_bytes: usize,
        budget: MemlockBudget,
        mut register: impl FnMut(usize) -> io::Result<()>,
    ) -> BufferRegistration {
        let mut count = buffers_within(charged, budget.available_bytes());
        let mut refusal = None;
        while count > 0 {
            match register(count) {
                Ok(()) => break,
                Err(error) if error.raw_os_error() == Some(libc::ENOMEM) => {
                    let within = buffers_within(charged, budget.after_refusal_bytes());
                    count = (count - 1).min(within);
                    refusal = Some(error);
                }
                Err(error) => {
                    count = 0;
                    refusal = Some(error);
                }
            }
        }
        BufferRegistration {
            buffers_registered: count,
            buffers_total: charged.len(),
            buffer_bytes,
            budget,
            refusal,
        }
    }

    /// Bytes of the buffers registered.
    pub fn registered_bytes(&self) -> u64 {
        (self.buffers_registered * self.buffer_bytes) as u64
    }

    /// Whether the whole pool is registered.
    pub fn is_complete(&self) -> bool {
        self.buffers_registered == self.buffers_total
    }
}

impl fmt::Display for BufferRegistration {
    /// One sentence: what was registered, under what limit, and why not more.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pool_bytes = self.buffers_total * self.buffer_bytes;
        write!(
            formatter,
            "registered {} of {} buffers ({} of {} bytes, the lowest indices first)",
            self.buffers_registered,
            self.buffers_total,
            self.registered_bytes(),
            pool_bytes,
        )?;
        match (self.budget.exempt, self.budget.limit_bytes) {
            (true, _) => write!(formatter, " with CAP_IPC_LOCK")?,
            (false, None) => write!(formatter, " under an unlimited RLIMIT_MEMLOCK")?,
            (false, Some(limit)) => write!(
                formatter,
                " within RLIMIT_MEMLOCK {limit} bytes ({} already locked or pinned by this \
                 process, {MEMLOCK_MARGIN_BYTES} kept free)",
                self.budget.held_bytes
            )?,
        }
        if let Some(error) = &self.refusal {
            write!(formatter, "; the kernel refused more ({error})")?;
        }
        if !self.is_complete() {
            write!(
                formatter,
                "; the other buffers use unregistered reads and writes (raise RLIMIT_MEMLOCK \
                 or grant CAP_IPC_LOCK to register them)"
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    /// A buffer of a ring of default geometry: a 4 KiB block plus a 1 MiB batch.
    const BUFFER: u64 = 4096 + MIB;

    fn limited(limit_bytes: u64, held_bytes: u64) -> MemlockBudget {
        MemlockBudget {
            limit_bytes: Some(limit_bytes),
            held_bytes,
            exempt: false,
        }
    }

    #[test]
    fn a_default_pool_registers_seven_of_nine_buffers_in_eight_mib() {
        let charged = [BUFFER; 9];
        assert_eq!(
            buffers_within(&charged, limited(8 * MIB, 0).available_bytes()),
            7
        );
        assert_eq!(
            buffers_within(&charged, limited(64 << 10, 0).available_bytes()),
            0
        );
        // What the process already holds comes off the top.
        assert_eq!(
            buffers_within(&charged, limited(8 * MIB, 2 * MIB).available_bytes()),
            5
        );
        assert_eq!(
            buffers_within(&charged, limited(8 * MIB, 9 * MIB).available_bytes()),
            0
        );
    }

    #[test]
    fn the_capability_or_an_unlimited_limit_registers_everything() {
        let charged = [BUFFER; 9];
        let exempt = MemlockBudget {
            exempt: true,
            ..limited(8 * MIB, 0)
        };
        assert_eq!(buffers_within(&charged, exempt.available_bytes()), 9);
        let unlimited = MemlockBudget {
            limit_bytes: None,
            held_bytes: 0,
            exempt: false,
        };
        assert_eq!(buffers_within(&charged, unlimited.available_bytes()), 9);
    }

    #[test]
    fn the_kernel_charges_every_page_a_buffer_touches() {
        assert_eq!(charged_bytes(0, 4096, 4096), 4096);
        assert_eq!(charged_bytes(0, 4097, 4096), 8192);
        assert_eq!(charged_bytes(4095, 2, 4096), 8192);
        assert_eq!(charged_bytes(8192, BUFFER as usize, 4096), BUFFER);
        assert_eq!(charged_bytes(0, 4096, 65536), 65536);
        assert_eq!(charged_bytes(123, 0, 4096), 0);
    }

    #[test]
    fn a_refused_registration_is_retried_shorter_until_one_fits() {
        let charged = [BUFFER; 9];
        // Another process of the same user holds 3 MiB the budget cannot see.
        let mut tried = Vec::new();
        let registration =
            BufferRegistration::register(&charged, BUFFER as usize, limited(8 * MIB, 0), |n| {
                tried.push(n);
                if n as u64 * BUFFER + 3 * MIB > 8 * MIB {
                    Err(io::Error::from_raw_os_error(libc::ENOMEM))
                } else {
                    Ok(())
                }
            });
        assert_eq!(tried, [7, 6, 5, 4]);
        assert_eq!(registration.buffers_registered, 4);
        assert_eq!(registration.registered_bytes(), 4 * BUFFER);
        assert!(!registration.is_complete());
        let note = registration.to_string();
        assert!(note.contains("registered 4 of 9 buffers"), "{note}");
        assert!(note.contains("RLIMIT_MEMLOCK 8388608 bytes"), "{note}");
        assert!(note.contains("refused more"), "{note}");
    }

    #[test]
    fn a_refusal_under_an_apparent_exemption_falls_back_to_the_limit() {
        let charged = [BUFFER; 9];
        let budget = MemlockBudget {
            exempt: true,
            ..limited(8 * MIB, 0)
        };
        let mut tried = Vec::new();
        let registration = BufferRegistration::register(&charged, BUFFER as usize, budget, |n| {
            tried.push(n);
            if n as u64 * BUFFER > 8 * MIB {
                Err(io::Error::from_raw_os_error(libc::ENOMEM))
            } else {
                Ok(())
            }
        });
        assert_eq!(tried, [9, 7]);
        assert_eq!(registration.buffers_registered, 7);
    }

    #[test]
    fn an_error_other_than_enomem_registers_nothing() {
        let charged = [BUFFER; 9];
        let mut calls = 0;
        let registration =
            BufferRegistration::register(&charged, BUFFER as usize, limited(64 * MIB, 0), |_| {
                calls += 1;
                Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
            });
        assert_eq!(calls, 1);
        assert_eq!(registration.buffers_registered, 0);
        assert!(registration.to_string().contains("unregistered"));
    }

    #[test]
    fn status_fields_are_read_in_bytes() {
        let status = "Name:\tx\nVmLck:\t     12 kB\nVmPin:\t   1028 kB\n\
                      CapEff:\t000001fffeffffff\n";
        assert_eq!(status_kib(status, "VmLck:"), 12 * 1024);
        assert_eq!(status_kib(status, "VmPin:"), 1028 * 1024);
        assert_eq!(status_kib(status, "VmSwap:"), 0);
        assert!(has_ipc_lock(status));
        assert!(!has_ipc_lock("CapEff:\t0000000000000000\n"));
        assert!(!has_ipc_lock(""));
    }
}
