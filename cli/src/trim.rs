//! `sealog trim`: releases every entry up to and including an LSN, durably.

use std::path::Path;

use sealog::{Drive, DriveOptions};

use crate::failure::{open_failure, trim_failure, Failure};

pub(crate) fn trim(path: &Path, upto: u64) -> Result<(), Failure> {
    let drive = Drive::open(path, DriveOptions::default()).map_err(open_failure)?;
    let result = drive.trim(upto).map_err(|error| trim_failure(path, error));
    drive.close();
    result?;
    println!("trimmed {} up to LSN {upto}", path.display());
    Ok(())
}
