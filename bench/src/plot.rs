//! The run's figures as one SVG picture: on the left, 4 KiB throughput against the number of
//! writers, one line per engine and appends-in-flight setting, under the dashed 1 MiB
//! write+datasync ceilings that bound every engine; on the right, the p50, p99 and p99.9
//! latencies of the 4 KiB cells with one append in flight, the ceilings' 4 KiB cells among
//! them, on a logarithmic axis. Only the SVG backend of `plotters` is used: its text is SVG
//! `<text>`, laid out by the viewer, so no font files or native font libraries are needed.
//! Whatever subset of cells a run produced (the quick run, a run without fio or without peers)
//! is drawn: missing series are left out, and a panel without data still gets its axes.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::cell::Cell;

/// The picture's title.
const TITLE: &str = "sealog vs device ceiling and peers";
/// The picture's size in pixels: two panels side by side.
const SIZE: (u32, u32) = (1600, 760);
/// The payload of the plotted cells.
const SMALL_PAYLOAD: u64 = 4096;
/// The payload of the throughput ceilings (the largest write+datasync the ceilings measure).
const LARGE_PAYLOAD: u64 = 1 << 20;
/// The font family; the viewer picks the face, as the SVG names only the family.
const FONT: &str = "sans-serif";
/// Legend lines are about this many pixels high at `LEGEND_FONT_SIZE` (plus the box's margin).
const LEGEND_LINE_PX: f64 = 18.0;
/// The legend's font size.
const LEGEND_FONT_SIZE: u32 = 13;
/// The margin around each panel's chart.
const MARGIN_PX: u32 = 15;

/// Line colours (the "tableau 10" set): distinct from one another and readable on white,
/// unlike the pale yellows and cyans of `plotters`' `Palette99`.
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The drawing area of one panel.
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Writes an SVG at `path` with two panels: (left) throughput (MB/s) versus writers for 4 KiB
/// payloads, one line per (engine, in_flight) series, plus horizontal lines for the 1 MiB
/// ceilings ("ceiling-builtin", "fio"); (right) latency percentiles p50/p99/p99.9 (us, log
/// axis) of the 4 KiB cells with one append in flight, grouped by engine and writers,
/// including the ceilings' 4 KiB cells.
pub fn write_plot(path: &Path, cells: &[Cell]) -> Result<(), String> {
    // Rendered into memory first so that a failed write names the file, and a drawing error
    // leaves no half-written picture behind.
    let mut svg = String::new();
    draw(&mut svg, cells).map_err(|error| format!("{}: drawing: {error}", path.display()))?;
    std::fs::write(path, svg).map_err(|error| format!("{}: {error}", path.display()))
}

/// Draws both panels into `svg`.
fn draw(svg: &mut String, cells: &[Cell]) -> Result<(), String> {
    let root = SVGBackend::with_string(svg, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|error| error.to_string())?;
    let body = root
        .titled(TITLE, (FONT, 28))
        .map_err(|error| error.to_string())?;
    let (left, right) = body.split_horizontally(SIZE.0 / 2);
    throughput_panel(&left, cells)?;
    latency_panel(&right, cells)?;
    root.present().map_err(|error| error.to_string())
}

/// Whether the cell measures the device rather than an engine.
fn is_ceiling(engine: &str) -> bool {
    engine == "ceiling-builtin" || engine == "fio"
}

/// The order engines are listed in: the ceilings, then sealog, then the peers by name (the
/// name is the second key), so the legend reads the same from run to run.
fn engine_rank(engine: &str) -> u8 {
    match engine {
        "ceiling-builtin" => 0,
        "fio" => 1,
        "sealog" => 2,
        _ => 3,
    }
}

/// A figure fit to plot: a failed cell may carry NaN or infinity, and those would poison the
/// axis ranges.
fn plottable(value: f64) -> f64 {
    if value.is_finite() && value > 0.0 {
        value
    } else {
        0.0
    }
}

/// A latency for the logarithmic axis, which has no zero: 1 us is its floor.
fn log_plottable(value: f64) -> f64 {
    plottable(value).max(1.0)
}

/// The top of a linear axis that leaves the upper `legend_lines` rows to the legend, so that
/// the legend (drawn inside the plot, upper left) keeps clear of the data.
fn linear_top(max: f64, legend_lines: usize, plot_px: f64) -> f64 {
    let max = if max > 0.0 { max } else { 1.0 };
    max * 1.05 / (1.0 - legend_fraction(legend_lines, plot_px))
}

/// The top of a logarithmic axis starting at 1, with the same room for the legend.
fn log_top(max: f64, legend_lines: usize, plot_px: f64) -> f64 {
    // At least two decades, so that even a panel without data has a readable axis.
    let max = (max * 1.5).max(100.0);
    max.powf(1.0 / (1.0 - legend_fraction(legend_lines, plot_px)))
}

/// An axis figure with as many decimals as an axis reaching `top` needs to tell its ticks
/// apart: none for the usual hundreds of MB/s and microseconds, some for an axis of nothing.
fn axis_number(value: f64, top: f64) -> String {
    let decimals = if top >= 20.0 {
        0
    } else if top >= 2.0 {
        1
    } else {
        2
    };
    format!("{value:.decimals$}")
}

/// The share of the plot's height the legend takes, capped so that data keeps most of it.
fn legend_fraction(legend_lines: usize, plot_px: f64) -> f64 {
    if legend_lines == 0 || plot_px <= 0.0 {
        return 0.0;
    }
    let legend_px = legend_lines as f64 * LEGEND_LINE_PX + 20.0;
    (legend_px / plot_px).min(0.6)
}

/// An x axis of categories `0..count`, each centred on its index, with one tick per category
/// and no others: a plain `f64` axis would put its ticks at round numbers between categories.
/// Its figures stay `f64` so that the ceilings can span the whole axis, edge to edge.
struct Categories(usize);

impl Categories {
    /// The number of slots: an axis without categories still gets one, so it can be drawn.
    fn slots(&self) -> usize {
        self.0.max(1)
    }
}

impl Ranged for Categories {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let share = (value + 0.5) / self.slots() as f64;
        limit.0 + (share * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Light points would draw the fine grid between categories, which means nothing here.
        if hint.weight().allow_light_points() {
            return Vec::new();
        }
        (0..self.0).map(|index| index as f64).collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        -0.5..self.slots() as f64 - 0.5
    }
}

/// The label of the category at `x` (a tick), empty between categories.
fn category_label(labels: &[String], x: f64) -> String {
    let index = x.round();
    if (x - index).abs() > 1e-6 || index < 0.0 {
        return String::new();
    }
    labels.get(index as usize).cloned().unwrap_or_default()
}

/// The height of a panel's plotting area, before the chart is built (to size the legend's
/// headroom): the panel less its caption, x label area and margins.
fn plot_height(area: &Area<'_>, x_label_px: u32) -> f64 {
    let (_, height) = area.dim_in_pixel();
    f64::from(height) - f64::from(x_label_px) - f64::from(2 * MARGIN_PX) - 30.0
}

/// Draws the series' legend in the chart's upper left corner, over a nearly opaque background.
fn draw_legend<'a, Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<Categories, Y>>,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, LEGEND_FONT_SIZE))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(|error| error.to_string())
}

/// Draws "no data" in the middle of a chart that has nothing to show, so that an empty panel
/// reads as "not measured" rather than as a broken picture.
fn no_data_note<Y: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<Categories, Y>>,
    categories: usize,
    y: f64,
    what: &str,
) -> Result<(), String> {
    let x = (categories.max(1) as f64 - 1.0) / 2.0;
    chart
        .draw_series(std::iter::once(Text::new(
            format!("no {what}"),
            (x, y),
            (FONT, 18)
                .into_font()
                .color(&BLACK.mix(0.6))
                .pos(Pos::new(HPos::Center, VPos::Center)),
        )))
        .map(|_| ())
        .map_err(|error| error.to_string())
}

/// Throughput series by (rank, engine, in flight), each from writers to MB/s.
type Series = BTreeMap<(u8, String, u64), BTreeMap<u64, f64>>;

/// A chart of the categories `Categories` on x and figures on a `Y` axis, in the SVG.
type Chart<'a, Y> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<Categories, Y>>;

/// The left panel: 4 KiB throughput against writers, under the 1 MiB ceilings.
fn throughput_panel(area: &Area<'_>, cells: &[Cell]) -> Result<(), String> {
    let series = throughput_series(cells);
    let ceilings: Vec<&Cell> = cells
        .iter()
        .filter(|cell| cell.payload_bytes == LARGE_PAYLOAD && is_ceiling(&cell.engine))
        .collect();
    let writers = writer_counts(&series);
    let labels: Vec<String> = writers.iter().map(u64::to_string).collect();

    let max = series
        .values()
        .flat_map(|points| points.values().copied())
        .chain(ceilings.iter().map(|cell| plottable(cell.mb_per_sec)))
        .fold(0.0, f64::max);
    let legend_lines = series.len() + ceilings.len();
    let x_label_px = 50;
    let top = linear_top(max, legend_lines, plot_height(area, x_label_px));

    let mut chart = ChartBuilder::on(area)
        .caption("throughput, 4 KiB payloads", (FONT, 20))
        .margin(MARGIN_PX)
        .x_label_area_size(x_label_px)
        .y_label_area_size(70)
        .build_cartesian_2d(Categories(writers.len()), 0.0..top)
        .map_err(|error| error.to_string())?;
    let x_formatter = |x: &f64| category_label(&labels, *x);
    let y_formatter = |y: &f64| axis_number(*y, top);
    chart
        .configure_mesh()
        .x_desc("writers")
        .y_desc("MB/s (10^6 bytes per second)")
        .x_label_formatter(&x_formatter)
        .y_label_formatter(&y_formatter)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .light_line_style(BLACK.mix(0.04))
        .draw()
        .map_err(|error| error.to_string())?;
    draw_throughput_lines(&mut chart, &series, &writers)?;
    draw_ceilings(&mut chart, &ceilings, writers.len())?;

    if series.is_empty() && ceilings.is_empty() {
        no_data_note(
            &mut chart,
            writers.len(),
            top / 2.0,
            "4 KiB or ceiling cells",
        )?;
    }
    if legend_lines > 0 {
        draw_legend(&mut chart)?;
    }
    Ok(())
}

/// The engines' 4 KiB cells (the ceilings aside) as throughput series.
fn throughput_series(cells: &[Cell]) -> Series {
    let mut series: Series = BTreeMap::new();
    for cell in cells {
        if cell.payload_bytes != SMALL_PAYLOAD || is_ceiling(&cell.engine) {
            continue;
        }
        let key = (
            engine_rank(&cell.engine),
            cell.engine.clone(),
            cell.in_flight,
        );
        // A repeated cell keeps its first figures: the table printed them first.
        series
            .entry(key)
            .or_default()
            .entry(cell.writers)
            .or_insert(plottable(cell.mb_per_sec));
    }
    series
}

/// The writer counts of the series, in order: the categories of the throughput panel's x axis.
fn writer_counts(series: &Series) -> Vec<u64> {
    // Writers as categories: 1, 4 and 32 are evenly spaced, as a log axis would space them,
    // and any other set of counts still gets one tick each.
    let mut writers: Vec<u64> = series
        .values()
        .flat_map(|points| points.keys().copied())
        .collect();
    writers.sort_unstable();
    writers.dedup();
    writers
}

/// Draws one line per series, each point at its writer count's category in `writers`.
fn draw_throughput_lines<'a, Y: Ranged<ValueType = f64>>(
    chart: &mut Chart<'a, Y>,
    series: &Series,
    writers: &[u64],
) -> Result<(), String> {
    let position = |count: u64| writers.binary_search(&count).unwrap_or(0) as f64;
    for (index, ((_, engine, in_flight), points)) in series.iter().enumerate() {
        let color = COLORS[index % COLORS.len()];
        let line: Vec<(f64, f64)> = points
            .iter()
            .map(|(&count, &mb)| (position(count), mb))
            .collect();
        chart
            .draw_series(LineSeries::new(line, color.stroke_width(2)).point_size(4))
            .map_err(|error| error.to_string())?
            .label(format!("{engine}, {in_flight} in flight"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    Ok(())
}

/// Draws the 1 MiB ceilings as dashed lines across an axis of `categories` writer counts.
fn draw_ceilings<'a, Y: Ranged<ValueType = f64>>(
    chart: &mut Chart<'a, Y>,
    ceilings: &[&Cell],
    categories: usize,
) -> Result<(), String> {
    // The ceilings span the whole axis: they bound every writer count alike.
    let left = -0.5;
    let right = categories.max(1) as f64 - 0.5;
    for (index, cell) in ceilings.iter().enumerate() {
        let color = if index % 2 == 0 {
            BLACK
        } else {
            RGBColor(128, 128, 128)
        };
        let mb = plottable(cell.mb_per_sec);
        let style = color.stroke_width(2);
        chart
            .draw_series(DashedLineSeries::new(
                vec![(left, mb), (right, mb)],
                10,
                6,
                style,
            ))
            .map_err(|error| error.to_string())?
            .label(format!(
                "{} 1 MiB write+datasync: {mb:.0} MB/s",
                cell.engine
            ))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    Ok(())
}

/// One latency group of the right panel: an engine's 4 KiB cell at one writer count.
struct LatencyGroup {
    /// The x axis label.
    label: String,
    /// p50, p99 and p99.9, clamped for the log axis.
    percentiles: [f64; 3],
}

/// The names of [`LatencyGroup::percentiles`], in the legend.
const PERCENTILES: [&str; 3] = ["p50", "p99", "p99.9"];

/// The right panel: 4 KiB latency percentiles with one append in flight, log axis.
fn latency_panel(area: &Area<'_>, cells: &[Cell]) -> Result<(), String> {
    let groups = latency_groups(cells);
    let labels: Vec<String> = groups.iter().map(|group| group.label.clone()).collect();

    // Labels stand vertically (there may be a dozen groups); the area fits the longest one.
    let longest = labels.iter().map(String::len).max().unwrap_or(0);
    let x_label_px = (longest as u32 * 8 + 45).clamp(60, 220);
    let max = groups
        .iter()
        .flat_map(|group| group.percentiles)
        .fold(1.0, f64::max);
    let legend_lines = if groups.is_empty() {
        0
    } else {
        PERCENTILES.len()
    };
    let top = log_top(max, legend_lines, plot_height(area, x_label_px));

    let mut chart = ChartBuilder::on(area)
        .caption("latency, 4 KiB payloads, 1 append in flight", (FONT, 20))
        .margin(MARGIN_PX)
        .x_label_area_size(x_label_px)
        .y_label_area_size(70)
        .build_cartesian_2d(Categories(groups.len()), (1.0..top).log_scale())
        .map_err(|error| error.to_string())?;
    // The mesh draws the ticks only: it centres every label on its tick, which puts half of a
    // vertical label above the axis, so the labels are drawn below, hanging from the ticks.
    let no_label = |_: &f64| String::new();
    let y_formatter = |y: &f64| axis_number(*y, top);
    chart
        .configure_mesh()
        .x_desc("engine, writers")
        .y_desc("latency, us (log scale)")
        .x_label_formatter(&no_label)
        .y_label_formatter(&y_formatter)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .light_line_style(BLACK.mix(0.04))
        .draw()
        .map_err(|error| error.to_string())?;
    draw_hanging_labels(area, &chart, &labels)?;
    draw_percentiles(&mut chart, &groups)?;

    if groups.is_empty() {
        no_data_note(
            &mut chart,
            0,
            top.sqrt(),
            "4 KiB cells with 1 append in flight",
        )?;
    } else {
        draw_legend(&mut chart)?;
    }
    Ok(())
}

/// The 4 KiB cells with one append in flight as latency groups, by engine and writers.
fn latency_groups(cells: &[Cell]) -> Vec<LatencyGroup> {
    let mut found: BTreeMap<(u8, String, u64), [f64; 3]> = BTreeMap::new();
    for cell in cells {
        if cell.payload_bytes != SMALL_PAYLOAD || cell.in_flight != 1 {
            continue;
        }
        let key = (engine_rank(&cell.engine), cell.engine.clone(), cell.writers);
        found.entry(key).or_insert([
            log_plottable(cell.p50_us),
            log_plottable(cell.p99_us),
            log_plottable(cell.p999_us),
        ]);
    }
    found
        .into_iter()
        .map(|((_, engine, writers), percentiles)| LatencyGroup {
            label: format!("{engine}, {writers} w"),
            percentiles,
        })
        .collect()
}

/// Draws `labels` vertically below the x axis of `chart` in `area`, each hanging from its
/// category's tick.
fn draw_hanging_labels<'a, Y: Ranged<ValueType = f64>>(
    area: &Area<'_>,
    chart: &Chart<'a, Y>,
    labels: &[String],
) -> Result<(), String> {
    let (base_x, base_y) = area.get_base_pixel();
    let label_style = TextStyle::from((FONT, 14).into_font().transform(FontTransform::Rotate270))
        .pos(Pos::new(HPos::Right, VPos::Center));
    for (index, label) in labels.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(index as f64, 1.0));
        area.draw(&Text::new(
            label.as_str(),
            (x - base_x, y - base_y + 10),
            label_style.clone(),
        ))
        .map_err(|error| error.to_string())?;
    }
    Ok(())
}

/// Draws each group's p50, p99 and p99.9 markers, tied together by a thin bar.
fn draw_percentiles<'a, Y: Ranged<ValueType = f64>>(
    chart: &mut Chart<'a, Y>,
    groups: &[LatencyGroup],
) -> Result<(), String> {
    // A thin bar from p50 to p99.9 ties each group's three markers together.
    chart
        .draw_series(groups.iter().enumerate().map(|(index, group)| {
            let x = index as f64;
            PathElement::new(
                vec![(x, group.percentiles[0]), (x, group.percentiles[2])],
                BLACK.mix(0.35).stroke_width(2),
            )
        }))
        .map_err(|error| error.to_string())?;

    let colors = [COLORS[0], COLORS[1], COLORS[3]];
    for (rank, (name, color)) in PERCENTILES.iter().zip(colors).enumerate() {
        let style = color.filled();
        let points = groups
            .iter()
            .enumerate()
            .map(|(index, group)| (index as f64, group.percentiles[rank]));
        // A shape per percentile as well as a colour, so the picture survives grey print.
        let annotation = match rank {
            0 => chart.draw_series(points.map(|point| Circle::new(point, 5, style).into_dyn())),
            1 => chart
                .draw_series(points.map(|point| TriangleMarker::new(point, 6, style).into_dyn())),
            _ => chart.draw_series(
                points.map(|point| Cross::new(point, 5, color.stroke_width(2)).into_dyn()),
            ),
        }
        .map_err(|error| error.to_string())?;
        annotation.label(*name).legend(move |(x, y)| match rank {
            0 => Circle::new((x + 10, y), 5, style).into_dyn(),
            1 => TriangleMarker::new((x + 10, y), 6, style).into_dyn(),
            _ => Cross::new((x + 10, y), 5, color.stroke_width(2)).into_dyn(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(engine: &str, payload: u64, writers: u64, in_flight: u64, mb: f64, p50: f64) -> Cell {
        let mut cell = Cell::empty(engine, payload, writers, in_flight);
        cell.mb_per_sec = mb;
        cell.appends_per_sec = mb * 1e6 / payload as f64;
        cell.p50_us = p50;
        cell.p99_us = p50 * 3.0;
        cell.p999_us = p50 * 10.0;
        cell
    }

    /// The quick run's cells: sealog alone, one 4 KiB writer count per in-flight setting.
    fn quick() -> Vec<Cell> {
        vec![
            cell("ceiling-builtin", 4096, 1, 1, 20.0, 180.0),
            cell("ceiling-builtin", 1 << 20, 1, 1, 900.0, 1100.0),
            cell("sealog", 4096, 1, 1, 15.0, 250.0),
            cell("sealog", 4096, 32, 1, 300.0, 400.0),
            cell("sealog", 4096, 4, 64, 700.0, 900.0),
            cell("sealog", 128, 4, 64, 60.0, 800.0),
        ]
    }

    /// A full run with fio and peers, and figures a failed cell could carry (zero, NaN).
    fn full() -> Vec<Cell> {
        let mut cells = quick();
        cells.push(cell("fio", 4096, 1, 1, 22.0, 170.0));
        cells.push(cell("fio", 1 << 20, 1, 1, 950.0, 1000.0));
        for (rank, engine) in ["sealog", "raft-engine", "okaywal"].iter().enumerate() {
            for writers in [1, 4, 32] {
                for in_flight in [1, 16] {
                    let mb = (writers * in_flight) as f64 * 10.0 / (rank + 1) as f64;
                    let p50 = 100.0 * (rank + 1) as f64 * writers as f64;
                    cells.push(cell(engine, 4096, writers, in_flight, mb, p50));
                }
            }
        }
        cells.push(cell("okaywal", 4096, 64, 1, 0.0, 0.0));
        cells.push(cell("raft-engine", 4096, 64, 1, f64::NAN, f64::INFINITY));
        cells
    }

    fn assert_plots(name: &str, cells: &[Cell]) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("{name}.svg"));
        write_plot(&path, cells).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.is_empty(), "{name}: empty file");
        assert!(
            text.starts_with("<svg"),
            "{name}: {}",
            &text[..text.len().min(80)]
        );
        assert!(text.contains(TITLE), "{name}: no title");
    }

    #[test]
    fn plot_full_run_with_peers() {
        let cells = full();
        assert_plots("full", &cells);
    }

    #[test]
    fn plot_quick_run() {
        assert_plots("quick", &quick());
    }

    #[test]
    fn plot_one_x_value() {
        let cells = vec![
            cell("sealog", 4096, 4, 1, 120.0, 300.0),
            cell("raft-engine", 4096, 4, 1, 80.0, 500.0),
        ];
        assert_plots("one", &cells);
    }

    #[test]
    fn plot_ceilings_only_and_nothing() {
        let ceilings = vec![cell("fio", 1 << 20, 1, 1, 950.0, 1000.0)];
        assert_plots("ceilings", &ceilings);
        assert_plots("nothing", &[]);
    }

    #[test]
    fn plot_into_a_missing_directory_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("plot.svg");
        let error = write_plot(&path, &quick()).unwrap_err();
        assert!(error.contains("plot.svg"), "{error}");
    }
}
