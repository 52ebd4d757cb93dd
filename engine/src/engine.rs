//! An engine: several drives opened together, each a ring on its own thread (optionally
//! pinned to its own CPU). It owns nothing a drive does not; it exists so an embedder opens and
//! closes its drives as one.

use std::path::Path;

use crate::drive::{Drive, DriveOptions};
use crate::error::OpenError;

/// Drives opened together.
pub struct Engine {
    drives: Vec<Drive>,
}

impl Engine {
    /// Opens every ring in `paths` with `options`; drive `i` is pinned to CPU `cpus[i]` when
    /// given. Fails with the first drive that cannot open (those already open are closed).
    pub fn open(
        paths: &[&Path],
        options: &DriveOptions,
        cpus: Option<&[usize]>,
    ) -> Result<Engine, OpenError> {
        let mut drives = Vec::with_capacity(paths.len());
        for (index, path) in paths.iter().enumerate() {
            let mut drive_options = options.clone();
            if let Some(cpus) = cpus {
                drive_options.cpu = cpus.get(index).copied();
            }
            drives.push(Drive::open(path, drive_options)?);
        }
        Ok(Engine { drives })
    }

    /// The drives, in the order opened.
    pub fn drives(&self) -> &[Drive] {
        &self.drives
    }

    /// Drive `index`.
    pub fn drive(&self, index: usize) -> Option<&Drive> {
        self.drives.get(index)
    }
}
