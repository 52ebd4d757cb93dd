//! How a segment's loglet configuration becomes an [`AtomicLog`]: the [`LogletFactory`]
//! trait, and [`DriveLogletFactory`], which builds each loglet's data and seal LogDrives with
//! a function of the caller's and keeps one AtomicLog per loglet, since a loglet has exactly
//! one sequencer (two would hand out the same slots).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use sealog_logdrive::LogDrive;

use crate::atomic::{AtomicLog, AtomicOptions};
use crate::chain::{LogletConfig, Segment};
use crate::error::LogError;

/// What opening a loglet returns.
pub type LogletFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Arc<AtomicLog>, LogError>> + Send + 'a>>;

/// Opens the loglets of a chain's segments.
pub trait LogletFactory: Send + Sync {
    /// The AtomicLog of `segment` (writing with the segment's epoch): the same one for every
    /// call about the same loglet.
    fn open<'a>(&'a self, segment: &'a Segment) -> LogletFuture<'a>;

    /// The configuration a reconfiguration that was not told one gives the next segment
    /// (a roll-forward): like `config`, on a loglet of its own.
    fn successor(&self, config: &LogletConfig) -> LogletConfig;
}

/// A loglet's two LogDrives: its data, and the one holding its seal bit.
pub struct LogletDrives {
    /// The data LogDrive.
    pub data: Arc<dyn LogDrive>,
    /// The seal LogDrive.
    pub seal: Arc<dyn LogDrive>,
}

/// Builds a loglet's drives from its configuration.
pub type BuildDrives = dyn Fn(&LogletConfig) -> Result<LogletDrives, LogError> + Send + Sync;

/// Makes the next configuration from one before it.
pub type NextConfig = dyn Fn(&LogletConfig) -> LogletConfig + Send + Sync;

/// A factory over a function that builds each loglet's drives: see the module doc.
pub struct DriveLogletFactory {
    build: Box<BuildDrives>,
    next: Box<NextConfig>,
    options: AtomicOptions,
    open: Mutex<HashMap<u64, Arc<AtomicLog>>>,
}

impl DriveLogletFactory {
    /// A factory building drives with `build`, successors with `next`, and AtomicLogs with
    /// `options` (the epoch is each segment's).
    pub fn new(build: Box<BuildDrives>, next: Box<NextConfig>, options: AtomicOptions) -> Self {
        DriveLogletFactory {
            build,
            next,
            options,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// The AtomicLog of loglet `id` if it is open here.
    pub fn opened(&self, id: u64) -> Option<Arc<AtomicLog>> {
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned()
    }
}

impl LogletFactory for DriveLogletFactory {
    fn open<'a>(&'a self, segment: &'a Segment) -> LogletFuture<'a> {
        Box::pin(async move {
            if let Some(log) = self.opened(segment.loglet.id) {
                return Ok(log);
            }
            let drives = (self.build)(&segment.loglet)?;
            let options = AtomicOptions {
                epoch: segment.epoch,
                ..self.options.clone()
            };
            let log = Arc::new(AtomicLog::open(drives.data, drives.seal, 0, options).await?);
            let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
            // Another caller may have opened it meanwhile: theirs is the one.
            Ok(open.entry(segment.loglet.id).or_insert(log).clone())
        })
    }

    fn successor(&self, config: &LogletConfig) -> LogletConfig {
        (self.next)(config)
    }
}
