//! The read and restart sections' report: the read rows' table (sealog's tail, cold and
//! catch-up reads, the writer beside the tail readers, and the read ceilings they are judged
//! against), and issue 11's read targets. The rows themselves and their JSON (`reads.rows`) are
//! `read_row.rs`.

use crate::read_plan::TAIL_READS_PER_SEC_GOAL;
use crate::read_row::{
    ReadLoad, ReadRow, CATCH_UP, COLD_ASYNC, COLD_BLOCKING, SECTION_CATCH_UP, SECTION_COLD,
    SECTION_TAIL, TAIL_READ, TAIL_WRITER,
};
use crate::target::Target;

/// The read table's header.
pub fn header() -> String {
    format!(
        "{:<9} {:<18} {:>7} {:>7} {:>6} {:>8} {:>11} {:>9} {:>8} {:>8} {:>7} {:>6}  {}",
        "reads",
        "engine",
        "bytes",
        "threads",
        "flight",
        "readers",
        "ops/s",
        "MB/s",
        "p50 us",
        "p99 us",
        "xceil",
        "xp50",
        "against"
    )
}

/// The readers column: reader threads beside a writer's row, and `@500k` when readers were
/// paced at 500 k reads/s in all (on a reader's row, its own pace).
fn readers_text(row: &ReadRow) -> String {
    let pace = if row.readers_paced_per_sec > 0.0 {
        format!("@{:.0}k", row.readers_paced_per_sec / 1e3)
    } else {
        String::new()
    };
    if row.readers_alongside > 0 || pace.is_empty() {
        format!("{}{pace}", row.readers_alongside)
    } else {
        pace
    }
}

/// One row of the read table.
pub fn row(row: &ReadRow) -> String {
    let judged = !row.ceiling.is_empty();
    let ratio = |value: f64| {
        if judged && value > 0.0 {
            format!("{value:.2}")
        } else {
            "-".to_string()
        }
    };
    format!(
        "{:<9} {:<18} {:>7} {:>7} {:>6} {:>8} {:>11.0} {:>9.1} {:>8.1} {:>8.1} {:>7} {:>6}  {}",
        row.section,
        row.engine,
        row.entry_bytes,
        row.load.threads,
        row.load.in_flight,
        readers_text(row),
        row.ops_per_sec,
        row.mb_per_sec,
        row.p50_us,
        row.p99_us,
        ratio(row.ratio_to_ceiling),
        ratio(row.p50_ratio_to_ceiling),
        if judged { row.ceiling.as_str() } else { "-" }
    )
}

/// The row of `section` and `engine` at `threads` and `in_flight`, if the run measured it.
pub fn find<'a>(
    rows: &'a [ReadRow],
    section: &str,
    engine: &str,
    load: ReadLoad,
) -> Option<&'a ReadRow> {
    rows.iter()
        .find(|row| row.section == section && row.engine == engine && row.load == load)
}

/// Issue 11's read targets from this run's read rows (a row the run did not measure leaves
/// its target "not measured").
pub fn targets(rows: &[ReadRow]) -> Vec<Target> {
    // The readers as fast as they go; the writer beside readers paced at the goal's rate.
    let tail_readers = rows.iter().find(|row| {
        row.section == SECTION_TAIL
            && row.engine == TAIL_READ
            && row.load == ReadLoad::blocking_threads(4)
            && row.readers_paced_per_sec == 0.0
    });
    let writer_with_readers = rows.iter().find(|row| {
        row.section == SECTION_TAIL
            && row.engine == TAIL_WRITER
            && row.readers_alongside == 4
            && row.readers_paced_per_sec > 0.0
    });
    let cold = |engine: &str, load: ReadLoad| {
        find(rows, SECTION_COLD, engine, load).filter(|row| !row.ceiling.is_empty())
    };
    let catch_up = rows
        .iter()
        .find(|row| row.section == SECTION_CATCH_UP && row.engine == CATCH_UP);
    vec![
        Target {
            name: "tail reads, 4 reader threads x 4 KiB while the writer appends: reads/s",
            value: tail_readers.map(|row| row.ops_per_sec),
            goal: TAIL_READS_PER_SEC_GOAL,
            higher_is_better: true,
        },
        Target {
            name: "tail reads: the writer's appends/s beside 4 readers reading 500 k/s over its \
                   no-reader figure",
            value: writer_with_readers
                .filter(|row| !row.ceiling.is_empty())
                .map(|row| row.ratio_to_ceiling),
            goal: 0.8,
            higher_is_better: true,
        },
        Target {
            name: "cold reads, 16 in flight (16 threads, blocking): reads/s over the built-in \
                   random-read ceiling's",
            value: cold(COLD_BLOCKING, ReadLoad::blocking_threads(16))
                .map(|row| row.ratio_to_ceiling),
            goal: 0.8,
            higher_is_better: true,
        },
        Target {
            name: "cold reads, 16 in flight (one thread, 16 futures): reads/s over the built-in \
                   random-read ceiling's",
            value: cold(COLD_ASYNC, ReadLoad::single_thread(16)).map(|row| row.ratio_to_ceiling),
            goal: 0.8,
            higher_is_better: true,
        },
        Target {
            name: "cold reads, 1 in flight: p50 over the built-in random-read ceiling's p50",
            value: cold(COLD_BLOCKING, ReadLoad::blocking_threads(1))
                .map(|row| row.p50_ratio_to_ceiling),
            goal: 1.2,
            higher_is_better: false,
        },
        Target {
            name: "catch-up iterator: MB/s over the sequential O_DIRECT read ceiling",
            value: catch_up
                .filter(|row| !row.ceiling.is_empty())
                .map(|row| row.ratio_to_ceiling),
            goal: 0.8,
            higher_is_better: true,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read_row::RANDOM_READ;

    fn row(section: &'static str, engine: &str, load: ReadLoad, ops_per_sec: f64) -> ReadRow {
        ReadRow {
            section,
            engine: engine.to_string(),
            entry_bytes: 4096,
            load,
            ops_per_sec,
            mb_per_sec: ops_per_sec * 4096.0 / 1e6,
            p50_us: 1e6 / ops_per_sec,
            ..ReadRow::default()
        }
    }

    /// A row is judged against the ceiling it names, by operations or by bytes, and a target
    /// is judged only when its row ran and was judged.
    #[test]
    fn read_targets_judge_rows_against_their_ceilings() {
        let ceiling = row(
            SECTION_COLD,
            RANDOM_READ,
            ReadLoad::single_thread(16),
            100_000.0,
        );
        let mut blocking = row(
            SECTION_COLD,
            COLD_BLOCKING,
            ReadLoad::blocking_threads(16),
            90_000.0,
        );
        blocking.judge_against(&ceiling, false);
        assert_eq!(blocking.ceiling, RANDOM_READ);
        assert!((blocking.ratio_to_ceiling - 0.9).abs() < 1e-9);
        assert!((blocking.p50_ratio_to_ceiling - 100.0 / 90.0).abs() < 1e-9);
        let mut tail = row(
            SECTION_TAIL,
            TAIL_READ,
            ReadLoad::blocking_threads(4),
            400_000.0,
        );
        tail.mb_per_sec = 1.0;
        let targets = targets(&[blocking, tail]);
        assert_eq!(targets.len(), 6);
        assert_eq!(targets[0].held(), Some(false), "400 k/s is under 500 k/s");
        assert_eq!(targets[1].held(), None, "no writer row");
        assert_eq!(targets[2].held(), Some(true));
        assert_eq!(targets[3].held(), None, "no async row");
    }
}
