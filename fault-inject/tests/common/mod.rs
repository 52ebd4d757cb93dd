//! The harness of the engine scenarios: a ring of a given shape on either backend, the
//! simulated device (deterministic, with scripted or seeded faults) or io_uring over a
//! directory of segment files on the real file system, opened as a [`Drive`] with its own
//! thread either way. A scenario is written once against [`TestRing`] and runs on both
//! (`scenario!` makes one test per backend), so the engine's behaviour is checked where it is
//! exact (the simulation) and where it is real (the kernel).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sealog::reader::RingReader;
use sealog::storage::{plan_geometry, FormatOptions};
use sealog::{Drive, DriveOptions, OpenError, SyncMethod};
use sealog_fault::{FaultConfig, SimDevice};
use sealog_wal::{Geometry, RecoveryReport, ReplayError, ReplayOptions, RingId};
use sealog_wal_kit::model::ModelWriter;

/// The I/O backend a scenario runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The simulated device, in memory.
    Simulated,
    /// io_uring over segment files in a temporary directory.
    Uring,
}

/// One test per backend for a scenario `fn name(backend: Backend)`.
#[macro_export]
macro_rules! scenario {
    ($name:ident) => {
        mod $name {
            #[test]
            fn on_the_simulated_device() {
                super::$name($crate::common::Backend::Simulated);
            }

            #[test]
            fn on_io_uring() {
                super::$name($crate::common::Backend::Uring);
            }
        }
    };
}

/// A ring's shape: what `format` is asked for.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Segments in the ring.
    pub segment_count: u32,
    /// Bytes per segment.
    pub segment_size_bytes: u64,
    /// The largest batch.
    pub batch_size_max_bytes: u32,
    /// Batches in flight at most.
    pub window_batches_max: u32,
}

impl Shape {
    /// 16 segments of 128 KiB, batches up to 32 KiB, 3 in flight: small enough to fill and
    /// wrap quickly.
    pub fn small() -> Shape {
        Shape {
            segment_count: 16,
            segment_size_bytes: 32 * 4096,
            batch_size_max_bytes: 8 * 4096,
            window_batches_max: 3,
        }
    }

    /// 4 segments of 1 MiB with the default batch limit and window: the engine's defaults on
    /// a small ring.
    pub fn default_geometry() -> Shape {
        Shape {
            segment_count: 4,
            segment_size_bytes: 1 << 20,
            batch_size_max_bytes: 1 << 20,
            window_batches_max: 4,
        }
    }

    fn format_options(&self) -> FormatOptions {
        FormatOptions {
            size_bytes: 2 * 4096 + u64::from(self.segment_count) * self.segment_size_bytes,
            segment_size_bytes: Some(self.segment_size_bytes),
            batch_size_max_bytes: Some(self.batch_size_max_bytes),
            window_batches_max: Some(self.window_batches_max),
            sync_method: Some(SyncMethod::Fdatasync),
            ..FormatOptions::default()
        }
    }
}

/// A formatted ring on one backend, reopened as often as a scenario likes.
pub struct TestRing {
    /// The backend it lives on.
    pub backend: Backend,
    /// Its geometry.
    pub geometry: Geometry,
    directory: tempfile::TempDir,
    path: PathBuf,
    /// The simulated ring's bytes between opens: the device leaves here, when its drive is
    /// dropped, what a power cut at that moment leaves.
    image: Arc<Mutex<Option<Vec<u8>>>>,
    faults: FaultConfig,
    seed: u64,
}

impl TestRing {
    /// Formats a ring of `shape` on `backend`.
    pub fn new(backend: Backend, shape: &Shape) -> TestRing {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let path = directory.path().join("ring");
        let options = shape.format_options();
        let (geometry, image) = match backend {
            Backend::Uring => {
                let control = sealog::format(&path, &options).expect("formats");
                (control.geometry, None)
            }
            Backend::Simulated => {
                let geometry = plan_geometry(&options, 4096, &path).expect("a valid shape");
                let image = ModelWriter::format(geometry, RingId(*b"sealog-scenarios"));
                (geometry, Some(image))
            }
        };
        TestRing {
            backend,
            geometry,
            directory,
            path,
            image: Arc::new(Mutex::new(image)),
            faults: FaultConfig::none(),
            seed: 1,
        }
    }

    /// The simulated device gets these faults from the next open on (the real one has none).
    pub fn set_faults(&mut self, faults: FaultConfig) {
        self.faults = faults;
    }

    /// The ring's path (a directory for io_uring; a name only for the simulation).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the ring as a drive with its own thread.
    pub fn open(&self, options: DriveOptions) -> Result<Drive, OpenError> {
        match self.backend {
            Backend::Uring => Drive::open(&self.path, options),
            Backend::Simulated => {
                let geometry = self.geometry;
                let faults = self.faults;
                let seed = self.seed;
                let sink = Arc::clone(&self.image);
                Drive::open_with(&self.path, geometry, options, move || {
                    // Taken on the drive thread, so an open refused before it starts leaves
                    // the ring's bytes where they were.
                    let image = sink
                        .lock()
                        .expect("image lock")
                        .take()
                        .expect("the ring is not open elsewhere");
                    let mut device = SimDevice::for_ring(image, &geometry, faults, seed)?;
                    device.leave_image_on_drop(sink);
                    Ok(device)
                })
            }
        }
    }

    /// Opens with the default options.
    pub fn open_default(&self) -> Drive {
        self.open(DriveOptions::default()).expect("opens")
    }

    /// Replays the closed ring read-only, as `sealog verify` does.
    pub fn replay(&self) -> Result<RecoveryReport, ReplayError> {
        let options = ReplayOptions::default();
        match self.backend {
            Backend::Uring => {
                let mut reader = RingReader::open(&self.path).expect("opens read-only");
                sealog_wal::scan(&mut reader, &options)
            }
            Backend::Simulated => {
                let guard = self.image.lock().expect("image lock");
                let mut image: &[u8] = guard.as_deref().expect("the ring is closed");
                sealog_wal::scan(&mut image, &options)
            }
        }
    }

    /// Changes the closed ring's bytes at `ring_offset` (damage for corruption scenarios).
    pub fn damage(&self, ring_offset: u64, change: impl FnOnce(&mut [u8])) {
        let block = self.geometry.block_size_bytes as usize;
        let block_start = ring_offset / block as u64 * block as u64;
        let inside = (ring_offset - block_start) as usize;
        match self.backend {
            Backend::Simulated => {
                let mut guard = self.image.lock().expect("image lock");
                let image = guard.as_mut().expect("the ring is closed");
                let start = block_start as usize;
                change(&mut image[start + inside..start + block]);
            }
            Backend::Uring => {
                use std::os::unix::fs::FileExt;
                let control = self.geometry.control_area_bytes();
                let (file, offset) = if block_start < control {
                    (self.path.join("control"), block_start)
                } else {
                    let segment = (block_start - control) / self.geometry.segment_size_bytes;
                    let inside_segment = (block_start - control) % self.geometry.segment_size_bytes;
                    (
                        self.path.join(format!("segment-{segment:05}")),
                        inside_segment,
                    )
                };
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&file)
                    .expect("opens the ring's file");
                let mut bytes = vec![0u8; block];
                file.read_exact_at(&mut bytes, offset).expect("reads");
                change(&mut bytes[inside..]);
                file.write_all_at(&bytes, offset).expect("writes");
                file.sync_all().expect("syncs");
            }
        }
    }

    /// Ring offset of the record with `lsn` in the closed ring (its header's first byte).
    pub fn record_offset(&self, lsn: u64) -> u64 {
        let options = ReplayOptions::default();
        let mut found = None;
        let mut visit = |entry: &sealog_wal::Entry<'_>| {
            if entry.lsn == lsn {
                found = Some(self.geometry.ring_offset(entry.position));
            }
        };
        match self.backend {
            Backend::Uring => {
                let mut reader = RingReader::open(&self.path).expect("opens read-only");
                sealog_wal::replay(&mut reader, &options, &mut visit).expect("replays");
            }
            Backend::Simulated => {
                let guard = self.image.lock().expect("image lock");
                let mut image: &[u8] = guard.as_deref().expect("the ring is closed");
                sealog_wal::replay(&mut image, &options, &mut visit).expect("replays");
            }
        }
        found.expect("the LSN is live")
    }

    /// The temporary directory the ring lives under.
    pub fn directory(&self) -> &Path {
        self.directory.path()
    }
}

/// A payload derived from a seed.
pub fn payload(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|index| (seed.wrapping_mul(31) as usize + index) as u8)
        .collect()
}

/// Runs `work` on its own thread and fails the test, naming `what`, if it takes longer than
/// `limit`: the watchdog of liveness scenarios (a livelock or a stranded caller shows up as a
/// timeout here rather than as a hung test run).
pub fn within<T: Send + 'static>(
    what: &str,
    limit: std::time::Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(work());
    });
    match receiver.recv_timeout(limit) {
        Ok(value) => value,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what} did not finish within {limit:?}")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}
