//! The median the bench takes of repeated measurements (the recovery's rounds, the opens of a
//! ring, the single-writer and LogDrive rounds): the device's speed drifts and stalls on a
//! shared host, and a median drops the round that a stall spoiled where a mean would carry it.
//! A leaf, importing nothing from the rest of the bench.

/// The median of a non-empty set of figures (of an even count, the upper of the middle two).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}
