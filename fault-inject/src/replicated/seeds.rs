//! Which seeds a simulation test runs, and how a failure says to replay one: `SEALOG_SIM_SEED`
//! names one seed, else `SEALOG_SIM_SEEDS` a count of seeds from 0 (for soaks), else the
//! test's default count. A failure's history is saved to a file under the temporary
//! directory, whose path it prints.

use std::path::PathBuf;

/// The seeds to run: see the module doc.
pub fn seeds(default_count: u64) -> Vec<u64> {
    if let Some(seed) = env_number("SEALOG_SIM_SEED") {
        return vec![seed];
    }
    let count = env_number("SEALOG_SIM_SEEDS").unwrap_or(default_count);
    (0..count).collect()
}

fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let number = text.trim().replace('_', "");
    Some(
        number
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text} is not a number")),
    )
}

/// The command that replays `seed` of the test `test` in the integration test `target` of
/// the package `package`.
pub fn replay_command(package: &str, target: &str, test: &str, seed: u64) -> String {
    format!("SEALOG_SIM_SEED={seed} cargo test -p {package} --test {target} -- {test} --exact")
}

/// Saves a failing seed's history (as text) under the temporary directory: its path, or
/// `None` when it could not be written.
pub fn save_history(test: &str, seed: u64, text: &str) -> Option<PathBuf> {
    let path = std::env::temp_dir().join(format!("sealog-sim-{test}-seed-{seed}.txt"));
    std::fs::write(&path, text).ok()?;
    Some(path)
}
