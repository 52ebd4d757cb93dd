//! The composition section's place in a run: its three rings (directories in the run's
//! scratch directory, also with `--device`, whose one device cannot hold three rings; of the
//! cells' shape, recording the sync method the write section's ring chose), and the time of
//! its runs (a tenth of a cell's). The measurements are `compose.rs`, their figures
//! `compose_figures.rs` and their report `compose_report.rs`.

use sealog::SyncMethod;

use crate::cells::RingShape;
use crate::compose;
use crate::compose_figures::{ComposeFigures, RINGS};
use crate::compose_report;
use crate::run_context::RunContext;

/// The section on three rings of the cells' shape. Runs are a tenth of a cell (the quick
/// run's 0.3 s after 0.06 s of warm-up: some 1,500 appends at one in flight, 20,000 at 256)
/// and the quick run takes each group through one rotation (four rounds at least): 52 runs,
/// each with its opens and closes, about 30 s. The full run takes two rotations of 1 s runs.
pub fn compose_section(
    context: &RunContext<'_>,
    sync_method: Option<SyncMethod>,
) -> Result<ComposeFigures, String> {
    let plan = plan(context, sync_method, "compose");
    let figures = compose::compose_section(&plan);
    for ring in &plan.rings {
        let _ = std::fs::remove_dir_all(ring);
    }
    figures
}

/// The plan of a section on three rings named `name-N` in the scratch directory, of the
/// cells' shape with `sync_method`: runs a tenth of a cell's, a fifth of that to warm up,
/// one rotation of the engines in the quick run and two otherwise (the server section
/// shares it).
pub fn plan(
    context: &RunContext<'_>,
    sync_method: Option<SyncMethod>,
    name: &str,
) -> compose::Plan {
    let run = context.duration / 10;
    compose::Plan {
        rings: (0..RINGS)
            .map(|ring| context.scratch.join(format!("{name}-{ring}")))
            .collect(),
        shape: RingShape {
            sync_method,
            ..context.shape
        },
        options: context.drive_options.clone(),
        run,
        warmup: run / 5,
        rotations: if context.quick { 1 } else { 2 },
    }
}

/// The section's table and lines on the terminal.
pub fn print_compose_section(figures: &ComposeFigures) {
    println!();
    for line in compose_report::lines(figures) {
        println!("{line}");
    }
}
