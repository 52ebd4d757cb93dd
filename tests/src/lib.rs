//! Workspace-wide tests live in `tests/`: the house-style check (`tidy`) now, integration tests
//! on real files, loop devices and killed processes as the engine grows. This library holds
//! only what those tests share.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the root")
        .to_path_buf()
}
