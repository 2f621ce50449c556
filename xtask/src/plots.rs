//! `cargo xtask plots [--check]`: SVG plots of the benchmark results.
//!
//! Reads the CSV files the benchmarks write to `benches/results/` and writes one
//! SVG file per plot to `docs/plots/`. With `--check` nothing is written; the
//! task fails, naming the files, when a committed SVG differs from what it would
//! write. The output is deterministic (no timestamps; rows are sorted before
//! drawing), so the check only fails when the results changed.
//!
//! | file | source | what |
//! |---|---|---|
//! | `gflops_f64.svg`, `gflops_f32.svg` | `latest.csv`, `device.csv` | GFLOP/s against N for square power-of-two shapes (m = n = k; log2 x axis, log y axis): one line per stage at its best configuration, cuBLAS in thick black, and the device's peaks as dashed lines (f64: FP64 FMA and FP64 tensor core; f32: FP32 FMA). Non-square rows are skipped. |
//! | `heatmap_stage1.svg` (f64), `heatmap_stage1_<precision>.svg` (any other precision present) | `sweep.csv` | Stage 1's GFLOP/s for each block size `block {x}x{y}`: x across, y up, the value written in each cell. At the n with the most block shapes (the N = 1024 sweep); repeated rows keep their best value. |
//! | `stage4_outputs.svg` | `stage4.csv` | Stage 4 at n = 4096: GFLOP/s per outputs-per-thread count, one bar per precision, each annotated with registers per thread and occupancy. |
//! | `host_f64.svg` | `host.csv` (when present) | Seed 002's table: host-to-host time in ms against N (log-log) for each method (CPU, stages 1 and 3, the default path from pageable and page-locked matrices, cuBLAS with plain copies, cuBLASXt, any other method after them), and the transfer bound (`bound_ms`) dashed. |
//! | `emulation_f64.svg`, `emulation_f32.svg` | `emulation.csv` (when present) | Products emulated on INT8 tensor cores at phi = 1 (the latest run of each precision): TFLOP/s (left axis, solid) and the median relative error of sampled elements (right axis, log scale, dotted) against the number of moduli, one colour per size; cuBLAS's TFLOP/s and error at the largest size as dashed horizontal lines. |
//! | `roofline.svg` | `latest.csv`, `device.csv` | f64 roofline (log-log): the DRAM roof (`dram_gbs` x intensity) under the FP64 FMA and FP64 tensor-core peaks, and each stage's point at m = n = k = 4096 placed at its modeled `intensity`. cuBLAS is a point at its intensity or, when that is empty, a dotted line at its GFLOP/s with a point at the right edge. |
//!
//! Of `latest.csv` only the ladder's rows are drawn: those of single products
//! (column `batch` = 1; the batched rows' timings are of a whole batch) with
//! op flags NN and row-major operands (columns `ops` = `NN`, `layout` = `row`;
//! a file without these columns has no others), and of those the first of
//! each precision, stage and shape (the default path's own NN row-major row,
//! which the ladder writes after its own rows, repeats a stage); in a file
//! with the `path` column, only at shapes with a `stage-best` row and
//! never the shape suite's `suite` rows (step 5 runs shapes the ladder
//! does not, e.g. 16384³).
//!
//! Titles name the device and date of the first data row of the file plotted.
//!
//! Environment: `GEMM_RESULTS_DIR` overrides the input folder (default
//! `benches/results`), `GEMM_PLOTS_DIR` the output folder (default
//! `docs/plots`); relative paths are taken from the current directory.
//!
//! Text: plotters is built without its `ttf` feature, so no font file or
//! fontconfig is read. Text extents are estimated for the layout, and the SVG
//! holds `<text font-family="sans-serif">` elements that the viewer renders.

use std::collections::{BTreeMap, BTreeSet};
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

type Result<T> = std::result::Result<T, String>;

/// What the drawing code returns: plotters' errors and our own messages alike.
type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// A drawing area of the SVG backend, in pixels.
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Size of every plot, in pixels.
const SIZE: (u32, u32) = (900, 560);
/// Width of the panel right of each chart that holds its legend, in pixels.
const LEGEND_WIDTH: u32 = 230;
/// The size that `stage4.csv` is measured at (it has no n column).
const STAGE4_N: u32 = 4096;
/// The size whose points the roofline shows (m = n = k).
const ROOFLINE_N: u64 = 4096;

const FONT: &str = "sans-serif";
const GRID: RGBAColor = RGBAColor(0, 0, 0, 0.12);
const NOTE: RGBColor = RGBColor(90, 90, 90);
const ROOF: RGBColor = RGBColor(70, 70, 70);
/// Colour of each stage, indexed by stage number - 1 (matplotlib's tab10 without its grey).
const STAGE_COLORS: [RGBColor; 9] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
    RGBColor(188, 189, 34),
];
/// Colours after [`STAGE_COLORS`] for plots with more lines than stages (dark
/// teal, maroon, navy, olive: apart from tab10 and the grey of [`ROOF`]).
const EXTRA_COLORS: [RGBColor; 4] =
    [RGBColor(0, 128, 128), RGBColor(128, 0, 0), RGBColor(0, 0, 128), RGBColor(128, 128, 0)];
/// Colour of each precision in the stage-4 chart, in the order of [`precision_order`].
const PRECISION_COLORS: [RGBColor; 3] = [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44)];
/// Stops of the heat map's colour scale, low to high (viridis).
const HEAT_STOPS: [RGBColor; 5] =
    [RGBColor(68, 1, 84), RGBColor(59, 82, 139), RGBColor(33, 145, 140), RGBColor(94, 201, 98), RGBColor(253, 231, 37)];

/// Writes (or with `check`, compares) every plot; see the module docs.
pub fn plots(check: bool) -> Result<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let dir = |var: &str, default: &str| env::var_os(var).map(PathBuf::from).unwrap_or_else(|| root.join(default));
    let input = dir("GEMM_RESULTS_DIR", "benches/results");
    let output = dir("GEMM_PLOTS_DIR", "docs/plots");
    let files = render_all(&input)?;
    if check {
        let stale: Vec<String> = files
            .iter()
            .map(|(name, svg)| (output.join(name), svg))
            .filter(|(path, svg)| fs::read_to_string(path).ok().as_ref() != Some(*svg))
            .map(|(path, _)| path.display().to_string())
            .collect();
        if !stale.is_empty() {
            return Err(format!("{} differ from {} (run `cargo xtask plots`)", stale.join(", "), input.display()));
        }
        println!("{} plots in {} are up to date", files.len(), output.display());
    } else {
        fs::create_dir_all(&output).map_err(|e| format!("{}: {e}", output.display()))?;
        for (name, svg) in &files {
            let path = output.join(name);
            fs::write(&path, svg).map_err(|e| format!("{}: {e}", path.display()))?;
            println!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// Every plot as (file name, SVG text), in a fixed order.
fn render_all(input: &Path) -> Result<Vec<(String, String)>> {
    let ladder = LadderRow::read(&Table::read(input, "latest.csv")?)?;
    let device = Device::read(&Table::read(input, "device.csv")?)?;
    let sweep = SweepRow::read(&Table::read(input, "sweep.csv")?)?;
    let stage4 = Stage4Row::read(&Table::read(input, "stage4.csv")?)?;

    let mut files = Vec::new();
    for precision in ["f64", "f32"] {
        files.push((format!("gflops_{precision}.svg"), gflops_plot(&ladder, &device, precision)?));
    }
    let swept: BTreeSet<&str> = sweep.iter().filter(|r| r.stage == 1).map(|r| r.precision.as_str()).collect();
    if !swept.contains("f64") {
        return Err(format!("{}: no f64 rows of stage 1", input.join("sweep.csv").display()));
    }
    for precision in precision_order(swept) {
        let name = match precision {
            "f64" => "heatmap_stage1.svg".to_string(),
            other => format!("heatmap_stage1_{other}.svg"),
        };
        files.push((name, heatmap_plot(&sweep, precision)?));
    }
    files.push(("stage4_outputs.svg".to_string(), stage4_plot(&stage4)?));
    files.push(("roofline.svg".to_string(), roofline_plot(&ladder, &device)?));
    if input.join("host.csv").exists() {
        let host = HostRow::read(&Table::read(input, "host.csv")?)?;
        files.push(("host_f64.svg".to_string(), host_plot(&host)?));
    }
    if input.join("emulation.csv").exists() {
        let rows = EmulationRow::read(&Table::read(input, "emulation.csv")?)?;
        for precision in ["f64", "f32"] {
            if rows.iter().any(|r| r.precision == precision) {
                files.push((format!("emulation_{precision}.svg"), emulation_plot(&rows, precision)?));
            }
        }
    }
    Ok(files)
}

// ---------------------------------------------------------------------------
// Input

/// One CSV file of results, fields looked up by column name.
struct Table {
    path: PathBuf,
    columns: Vec<String>,
    records: Vec<csv::StringRecord>,
}

impl Table {
    /// Reads `dir/file`; fails on a missing file, a ragged row or no data rows.
    fn read(dir: &Path, file: &str) -> Result<Table> {
        let path = dir.join(file);
        let fail = |e: csv::Error| format!("{}: {e}", path.display());
        let mut reader = csv::ReaderBuilder::new().trim(csv::Trim::All).from_path(&path).map_err(fail)?;
        let columns = reader.headers().map_err(fail)?.iter().map(str::to_owned).collect();
        let records = reader.records().collect::<std::result::Result<Vec<_>, _>>().map_err(fail)?;
        if records.is_empty() {
            return Err(format!("{}: no data rows", path.display()));
        }
        Ok(Table { path, columns, records })
    }

    fn rows(&self) -> impl Iterator<Item = Row<'_>> {
        self.records.iter().map(move |record| Row { table: self, record })
    }
}

/// One data row of a [`Table`].
struct Row<'a> {
    table: &'a Table,
    record: &'a csv::StringRecord,
}

impl<'a> Row<'a> {
    /// The field of `column`, or `default` when the file has no such column.
    fn str_or(&self, column: &str, default: &'a str) -> Result<&'a str> {
        if self.table.columns.iter().any(|c| c == column) {
            self.str(column)
        } else {
            Ok(default)
        }
    }

    fn str(&self, column: &str) -> Result<&'a str> {
        let i = self
            .table
            .columns
            .iter()
            .position(|c| c == column)
            .ok_or_else(|| format!("{}: no column `{column}`", self.table.path.display()))?;
        self.record.get(i).ok_or_else(|| self.error(column, "missing"))
    }

    fn parse<T: FromStr>(&self, column: &str) -> Result<T> {
        let s = self.str(column)?;
        s.parse().map_err(|_| self.error(column, &format!("cannot parse {s:?}")))
    }

    /// As [`Row::parse`], with an empty field read as `None`.
    fn parse_opt<T: FromStr>(&self, column: &str) -> Result<Option<T>> {
        if self.str(column)?.is_empty() {
            Ok(None)
        } else {
            self.parse(column).map(Some)
        }
    }

    fn run(&self) -> Result<Run> {
        Ok(Run {
            device: self.str("device")?.into(),
            date: self.str("date")?.into(),
            commit: self.str("commit")?.into(),
        })
    }

    fn error(&self, column: &str, what: &str) -> String {
        let line = self.record.position().map_or(0, csv::Position::line);
        format!("{}:{line}: column `{column}`: {what}", self.table.path.display())
    }
}

/// Where a result was measured: the first three columns of every results file.
#[derive(Clone)]
struct Run {
    device: String,
    date: String,
    commit: String,
}

impl Run {
    /// "device, date", for titles.
    fn title(&self) -> String {
        format!("{}, {}", self.device, self.date)
    }
}

/// A row of `latest.csv`: one stage (0 = cuBLAS) at its best configuration for one shape
/// (op flags NN, row-major operands).
struct LadderRow {
    run: Run,
    precision: String,
    stage: u32,
    stage_name: String,
    m: u64,
    n: u64,
    k: u64,
    gflops: f64,
    /// Modeled arithmetic intensity, flop/byte (may be empty for cuBLAS).
    intensity: Option<f64>,
}

impl LadderRow {
    /// The ladder's rows (see the module docs).
    fn read(table: &Table) -> Result<Vec<LadderRow>> {
        // Where the file has the `path` column: only shapes the ladder ran
        // (a `stage-best` row), so that the shape suite's rows (step 5:
        // cuBLAS and the default path, at shapes such as 16384³ the ladder
        // does not run) draw no points of their own.
        let has_path = table.columns.iter().any(|c| c == "path");
        let mut ladder_shapes: Vec<(&str, &str, &str, &str)> = Vec::new();
        for r in table.rows().filter(|r| r.str_or("path", "") == Ok("stage-best")) {
            ladder_shapes.push((r.str("precision")?, r.str("m")?, r.str("n")?, r.str("k")?));
        }
        let mut rows: Vec<LadderRow> = Vec::new();
        for r in table.rows() {
            if r.str_or("ops", "NN")? != "NN" || r.str_or("layout", "row")? != "row" || r.str_or("batch", "1")? != "1" {
                continue;
            }
            let shape = (r.str("precision")?, r.str("m")?, r.str("n")?, r.str("k")?);
            if has_path && (r.str("path")? == "suite" || !ladder_shapes.contains(&shape)) {
                continue;
            }
            let row = LadderRow {
                run: r.run()?,
                precision: r.str("precision")?.into(),
                stage: r.parse("stage")?,
                stage_name: r.str("stage_name")?.into(),
                m: r.parse("m")?,
                n: r.parse("n")?,
                k: r.parse("k")?,
                gflops: r.parse("gflops")?,
                intensity: r.parse_opt("intensity")?,
            };
            let key = |x: &LadderRow| (x.precision.clone(), x.stage, x.m, x.n, x.k);
            if !rows.iter().any(|seen| key(seen) == key(&row)) {
                rows.push(row);
            }
        }
        Ok(rows)
    }

    fn is_square(&self) -> bool {
        self.m == self.n && self.n == self.k
    }

    /// "3 smem_tiled", or "cuBLAS" for stage 0.
    fn label(&self) -> String {
        if self.stage == 0 {
            "cuBLAS".into()
        } else {
            format!("{} {}", self.stage, self.stage_name)
        }
    }
}

/// `device.csv`: the device's peaks, in GFLOP/s and GB/s.
struct Device {
    fp64_fma_gflops: f64,
    fp64_tensor_gflops: f64,
    fp32_fma_gflops: f64,
    dram_gbs: f64,
}

impl Device {
    fn read(table: &Table) -> Result<Device> {
        let r = table.rows().next().expect("Table::read rejects files without rows");
        Ok(Device {
            fp64_fma_gflops: r.parse("fp64_fma_gflops")?,
            fp64_tensor_gflops: r.parse("fp64_tensor_gflops")?,
            fp32_fma_gflops: r.parse("fp32_fma_gflops")?,
            dram_gbs: r.parse("dram_gbs")?,
        })
    }

    /// The peaks drawn on the GFLOP/s plot of `precision`, as (label, GFLOP/s).
    fn peaks(&self, precision: &str) -> Vec<(&'static str, f64)> {
        match precision {
            "f64" => vec![("FP64 FMA", self.fp64_fma_gflops), ("FP64 tensor", self.fp64_tensor_gflops)],
            "f32" => vec![("FP32 FMA", self.fp32_fma_gflops)],
            _ => vec![],
        }
    }
}

/// A row of `sweep.csv`: one configuration of one stage at one size.
struct SweepRow {
    run: Run,
    precision: String,
    stage: u32,
    configuration: String,
    n: u64,
    gflops: f64,
}

impl SweepRow {
    fn read(table: &Table) -> Result<Vec<SweepRow>> {
        table
            .rows()
            .map(|r| {
                let row = SweepRow {
                    run: r.run()?,
                    precision: r.str("precision")?.into(),
                    stage: r.parse("stage")?,
                    configuration: r.str("configuration")?.into(),
                    n: r.parse("n")?,
                    gflops: r.parse("gflops")?,
                };
                if row.stage == 1 && row.block().is_none() {
                    return Err(r.error("configuration", "stage 1 needs `block {x}x{y}`"));
                }
                Ok(row)
            })
            .collect()
    }

    /// Stage 1's block shape (x, y), from "block {x}x{y}".
    fn block(&self) -> Option<(u32, u32)> {
        let (x, y) = self.configuration.strip_prefix("block ")?.split_once('x')?;
        Some((x.parse().ok()?, y.parse().ok()?))
    }
}

/// A row of `stage4.csv`: stage 4 with one outputs-per-thread count.
struct Stage4Row {
    run: Run,
    precision: String,
    outputs: u32,
    gflops: f64,
    registers: u32,
    occupancy_pct: f64,
}

impl Stage4Row {
    fn read(table: &Table) -> Result<Vec<Stage4Row>> {
        table
            .rows()
            .map(|r| {
                Ok(Stage4Row {
                    run: r.run()?,
                    precision: r.str("precision")?.into(),
                    outputs: r.parse("outputs")?,
                    gflops: r.parse("gflops")?,
                    registers: r.parse("registers")?,
                    occupancy_pct: r.parse("occupancy_pct")?,
                })
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------
// Plots

/// GFLOP/s against N for square power-of-two shapes of one precision.
fn gflops_plot(ladder: &[LadderRow], device: &Device, precision: &str) -> Result<String> {
    // Powers of two only: 1000, 1023 and 3000 sit beside 1024 and 2048 on a
    // log axis and would zigzag the lines (they are in BENCHMARKS.md).
    let rows: Vec<&LadderRow> =
        ladder.iter().filter(|r| r.precision == precision && r.is_square() && r.n.is_power_of_two()).collect();
    let first = rows.first().ok_or_else(|| format!("latest.csv: no square {precision} rows"))?;
    // stage -> (n, GFLOP/s) sorted by n; BTreeMaps keep the drawing order stable.
    let mut lines: BTreeMap<u32, (String, BTreeMap<u64, f64>)> = BTreeMap::new();
    for r in &rows {
        lines.entry(r.stage).or_insert_with(|| (r.label(), BTreeMap::new())).1.insert(r.n, r.gflops);
    }
    let peaks = device.peaks(precision);
    let (n_min, n_max) = (rows.iter().map(|r| r.n).min().unwrap(), rows.iter().map(|r| r.n).max().unwrap());
    let (x_lo, x_hi) = (n_min as f64 / 1.15, n_max as f64 * 1.15);
    let powers: Vec<f64> = (0..64).map(|p| 2f64.powi(p)).filter(|p| (x_lo..=x_hi).contains(p)).collect();
    let values = rows.iter().map(|r| r.gflops).chain(peaks.iter().map(|p| p.1));
    let (y_lo, y_hi) = (rows.iter().map(|r| r.gflops).fold(f64::MAX, f64::min) / 1.5, values.fold(0.0, f64::max) * 1.5);

    let title = format!("{precision} GEMM, m = n = k = N: GFLOP/s by size ({})", first.run.title());
    render(&title, |area| {
        let (plot, panel) = area.split_horizontally(SIZE.0 - LEGEND_WIDTH);
        let mut chart = ChartBuilder::on(&plot)
            .margin(10)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d((x_lo..x_hi).log_scale().with_key_points(powers), (y_lo..y_hi).log_scale())?;
        chart
            .configure_mesh()
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .x_desc("N (log2 scale)")
            .y_desc("GFLOP/s (log scale)")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .draw()?;

        let mut legend = Vec::new();
        // Our stages first, cuBLAS (stage 0) last, on top.
        for (&stage, (label, points)) in lines.range(1..).chain(lines.range(..1)) {
            let (color, width) = if stage == 0 { (BLACK, 3) } else { (stage_color(stage), 2) };
            let points: Vec<(f64, f64)> = points.iter().map(|(&n, &g)| (n as f64, g)).collect();
            chart.draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(width)))?;
            chart.draw_series(points.iter().map(|&p| Circle::new(p, width + 1, color.filled())))?;
            legend.push(Legend::line(label, color, width));
        }
        for (label, gflops) in &peaks {
            let style = ROOF.stroke_width(2);
            chart.draw_series(DashedLineSeries::new([(x_lo, *gflops), (x_hi, *gflops)], 8, 6, style))?;
            legend.push(Legend::dashed(&format!("{label} {}", tflops(*gflops)), ROOF));
        }
        let notes = [format!("{} rows, best", precision), "configuration per stage".into(), commit(&first.run)];
        draw_legend(&panel, &legend, &notes)
    })
}

/// Stage 1's GFLOP/s over its block shapes, at the n swept with the most block shapes for `precision`.
fn heatmap_plot(sweep: &[SweepRow], precision: &str) -> Result<String> {
    let rows: Vec<&SweepRow> = sweep.iter().filter(|r| r.stage == 1 && r.precision == precision).collect();
    // The sweep proper: the n with the most block shapes (the ladder also
    // times a few finalists at every other size).
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for r in &rows {
        *counts.entry(r.n).or_insert(0) += 1;
    }
    let n = counts
        .iter()
        .max_by_key(|&(n, c)| (*c, *n))
        .map(|(&n, _)| n)
        .expect("caller passes a precision present in the sweep");
    let first = rows.iter().find(|r| r.n == n).unwrap();
    let mut cells: BTreeMap<(u32, u32), f64> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.n == n) {
        let cell = cells.entry(r.block().unwrap()).or_insert(0.0);
        *cell = cell.max(r.gflops);
    }
    let xs: Vec<u32> = cells.keys().map(|b| b.0).collect::<BTreeSet<_>>().into_iter().collect();
    let ys: Vec<u32> = cells.keys().map(|b| b.1).collect::<BTreeSet<_>>().into_iter().collect();
    let lo = cells.values().copied().fold(f64::MAX, f64::min);
    let hi = cells.values().copied().fold(0.0, f64::max);
    let scale = |g: f64| if hi > lo { (g - lo) / (hi - lo) } else { 0.5 };

    let title = format!("Stage 1 (naive), {precision}, n = {n}: GFLOP/s by block shape ({})", first.run.title());
    render(&title, |area| {
        let (plot, panel) = area.split_horizontally(SIZE.0 - LEGEND_WIDTH);
        let mut chart = ChartBuilder::on(&plot)
            .margin(10)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(Categories::new(xs.len()), Categories::new(ys.len()))?;
        let label = |values: &[u32], v: f64| values.get(v.max(0.0) as usize).map_or(String::new(), u32::to_string);
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("block x (threads)")
            .y_desc("block y (threads)")
            .x_label_formatter(&|v| label(&xs, *v))
            .y_label_formatter(&|v| label(&ys, *v))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .draw()?;
        for (i, x) in xs.iter().enumerate() {
            for (j, y) in ys.iter().enumerate() {
                let Some(&gflops) = cells.get(&(*x, *y)) else { continue };
                let (x0, y0) = (i as f64, j as f64);
                let t = scale(gflops);
                chart.draw_series([Rectangle::new([(x0, y0), (x0 + 1.0, y0 + 1.0)], heat_color(t).filled())])?;
                let ink = if t < 0.6 { WHITE } else { BLACK };
                let style = text_style(13, ink, HPos::Center, VPos::Center);
                chart.draw_series([Text::new(format!("{gflops:.0}"), (x0 + 0.5, y0 + 0.5), style)])?;
            }
        }
        draw_color_bar(&panel, lo, hi)?;
        let notes = [
            "cell: GFLOP/s of".to_string(),
            format!("block x by y, n = {n}"),
            "blank: not measured".into(),
            commit(&first.run),
        ];
        draw_notes(&panel, 300, &notes)
    })
}

/// Stage 4's GFLOP/s per outputs-per-thread count, one bar per precision.
fn stage4_plot(rows: &[Stage4Row]) -> Result<String> {
    let first = rows.first().expect("Table::read rejects files without rows");
    let precisions = precision_order(rows.iter().map(|r| r.precision.as_str()).collect());
    let outputs: Vec<u32> = rows.iter().map(|r| r.outputs).collect::<BTreeSet<_>>().into_iter().collect();
    let find = |p: &str, o: u32| {
        rows.iter().filter(|r| r.precision == p && r.outputs == o).max_by(|a, b| a.gflops.total_cmp(&b.gflops))
    };
    let y_hi = rows.iter().map(|r| r.gflops).fold(0.0, f64::max) * 1.3;
    let bar = 0.8 / precisions.len() as f64;

    let title = format!("Stage 4, n = {STAGE4_N}: GFLOP/s by outputs per thread ({})", first.run.title());
    render(&title, |area| {
        let (plot, panel) = area.split_horizontally(SIZE.0 - LEGEND_WIDTH);
        let mut chart = ChartBuilder::on(&plot)
            .margin(10)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(Categories::new(outputs.len()), 0.0..y_hi)?;
        chart
            .configure_mesh()
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .disable_x_mesh()
            .x_desc("outputs per thread")
            .y_desc("GFLOP/s")
            .x_label_formatter(&|v| outputs.get(v.max(0.0) as usize).map_or(String::new(), u32::to_string))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .draw()?;
        let mut legend = Vec::new();
        for (p, (&precision, color)) in precisions.iter().zip(PRECISION_COLORS.iter().cycle()).enumerate() {
            for (i, &o) in outputs.iter().enumerate() {
                let Some(r) = find(precision, o) else { continue };
                let x0 = i as f64 + 0.1 + p as f64 * bar;
                chart.draw_series([Rectangle::new([(x0, 0.0), (x0 + bar * 0.9, r.gflops)], color.filled())])?;
                let top = (x0 + bar * 0.45, r.gflops);
                let lines = [
                    format!("{:.0}", r.gflops),
                    format!("{} regs", r.registers),
                    format!("{:.0}% occ", r.occupancy_pct),
                ];
                for (l, text) in lines.into_iter().enumerate() {
                    let style = text_style(13, BLACK, HPos::Center, VPos::Bottom);
                    let offset = (0, -4 - 14 * (2 - l as i32));
                    chart.draw_series([EmptyElement::at(top) + Text::new(text, offset, style)])?;
                }
            }
            legend.push(Legend::bar(precision, *color));
        }
        draw_legend(
            &panel,
            &legend,
            &[
                "above each bar: GFLOP/s,".into(),
                "registers per thread,".into(),
                "occupancy (% of the".into(),
                "SM's threads)".into(),
                commit(&first.run),
            ],
        )
    })
}

/// The f64 roofline with each stage's point at m = n = k = [`ROOFLINE_N`].
fn roofline_plot(ladder: &[LadderRow], device: &Device) -> Result<String> {
    let rows: Vec<&LadderRow> = ladder
        .iter()
        .filter(|r| r.precision == "f64" && r.is_square() && r.n == ROOFLINE_N)
        .map(|r| (r.stage, r))
        .collect::<BTreeMap<u32, &LadderRow>>()
        .into_values()
        .collect();
    let stages: Vec<(&LadderRow, f64)> = rows
        .iter()
        .filter(|r| r.stage != 0)
        .map(|r| r.intensity.map(|i| (*r, i)).ok_or_else(|| format!("latest.csv: stage {} has no intensity", r.stage)))
        .collect::<Result<_>>()?;
    if stages.is_empty() {
        return Err(format!("latest.csv: no f64 stage rows at m = n = k = {ROOFLINE_N}"));
    }
    let cublas = rows.iter().find(|r| r.stage == 0);
    let (dram, fma, tensor) = (device.dram_gbs, device.fp64_fma_gflops, device.fp64_tensor_gflops);
    let ridge = |peak: f64| peak / dram;
    let intensities = stages.iter().map(|s| s.1).chain(cublas.and_then(|c| c.intensity));
    let x_lo = intensities.clone().fold(f64::MAX, f64::min).min(ridge(fma)) / 3.0;
    let x_hi = intensities.fold(0.0, f64::max).max(ridge(tensor)) * 4.0;
    let gflops = stages.iter().map(|s| s.0.gflops).chain(cublas.map(|c| c.gflops));
    let y_lo = gflops.fold(f64::MAX, f64::min).min(dram * x_lo) / 2.0;
    let y_hi = tensor.max(cublas.map_or(0.0, |c| c.gflops)) * 2.0;

    let title = format!("f64 roofline, m = n = k = {ROOFLINE_N} ({})", stages[0].0.run.title());
    render(&title, |area| {
        let (plot, panel) = area.split_horizontally(SIZE.0 - LEGEND_WIDTH);
        let mut chart = ChartBuilder::on(&plot)
            .margin(10)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())?;
        chart
            .configure_mesh()
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .x_desc("arithmetic intensity (flop/byte, modeled DRAM traffic; log scale)")
            .y_desc("GFLOP/s (log scale)")
            .x_label_formatter(&|v| short(*v))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .draw()?;

        // Roofs: the DRAM slope up to the tensor ridge, then the two flat peaks.
        let solid = ROOF.stroke_width(2);
        chart.draw_series(LineSeries::new([(x_lo, dram * x_lo), (ridge(tensor), tensor)], solid))?;
        chart.draw_series(LineSeries::new([(ridge(fma), fma), (x_hi, fma)], solid))?;
        chart.draw_series(DashedLineSeries::new([(ridge(tensor), tensor), (x_hi, tensor)], 8, 6, solid))?;
        let roof_text = |text: String, at: (f64, f64), pos: Pos, offset: (i32, i32)| {
            EmptyElement::at(at) + Text::new(text, offset, text_style(13, ROOF, pos.h_pos, pos.v_pos))
        };
        // Peak labels left of their ridge points, where no point can be (all lie under the roof).
        let left_of = Pos::new(HPos::Right, VPos::Center);
        chart.draw_series([
            roof_text(format!("FP64 FMA {}", tflops(fma)), (ridge(fma), fma), left_of, (-8, 0)),
            roof_text(format!("FP64 tensor {}", tflops(tensor)), (ridge(tensor), tensor), left_of, (-8, 0)),
            roof_text(
                format!("DRAM {:.2} TB/s", dram / 1000.0),
                (x_lo * 1.5, dram * x_lo * 1.5),
                Pos::new(HPos::Left, VPos::Top),
                (10, 6),
            ),
        ])?;

        let mut legend = Vec::new();
        for &(r, intensity) in &stages {
            let color = stage_color(r.stage);
            // Alternate label sides so neighbouring stages with equal intensity stay readable.
            let (pos, dx) = if r.stage % 2 == 1 { (HPos::Left, 9) } else { (HPos::Right, -9) };
            let style = text_style(14, color, pos, VPos::Center);
            chart.draw_series([EmptyElement::at((intensity, r.gflops))
                + Circle::new((0, 0), 5, color.filled())
                + Text::new(r.stage.to_string(), (dx, 0), style)])?;
            legend.push(Legend::point(&r.label(), color));
        }
        if let Some(c) = cublas {
            let at = match c.intensity {
                Some(i) => (i, c.gflops),
                None => {
                    let style = BLACK.mix(0.6).stroke_width(1);
                    chart.draw_series(DottedLineSeries::new([(x_lo, c.gflops), (x_hi, c.gflops)], 0, 4, move |p| {
                        Circle::new(p, 1, style.filled())
                    }))?;
                    (x_hi / 1.6, c.gflops)
                }
            };
            let style = text_style(14, BLACK, HPos::Right, VPos::Bottom);
            chart.draw_series([EmptyElement::at(at)
                + Circle::new((0, 0), 6, BLACK.filled())
                + Text::new("cuBLAS", (-8, -6), style)])?;
            legend.push(Legend::point(&format!("cuBLAS {:.0} GFLOP/s", c.gflops), BLACK));
        }
        legend.push(Legend::line(&format!("DRAM {:.2} TB/s, FP64 FMA", dram / 1000.0), ROOF, 2));
        legend.push(Legend::dashed("FP64 tensor peak", ROOF));
        let notes = [
            "x: modeled flop per".into(),
            "byte of DRAM traffic".into(),
            "y: measured GFLOP/s".into(),
            commit(&stages[0].0.run),
        ];
        draw_legend(&panel, &legend, &notes)
    })
}

/// A row of `host.csv` (`examples/host_streams.rs`): one method's
/// host-to-host time at one N, beside that N's transfer bound.
struct HostRow {
    run: Run,
    n: u64,
    method: String,
    ms: f64,
    bound_ms: f64,
}

impl HostRow {
    fn read(table: &Table) -> Result<Vec<HostRow>> {
        table
            .rows()
            .map(|r| {
                Ok(HostRow {
                    run: r.run()?,
                    n: r.parse("n")?,
                    method: r.str("method")?.to_string(),
                    ms: r.parse("ms")?,
                    bound_ms: r.parse("bound_ms")?,
                })
            })
            .collect()
    }
}

/// The methods of `host.csv` in drawing order, with their legend labels;
/// a method not listed is drawn after these under its own name.
const HOST_METHODS: [(&str, &str); 7] = [
    ("cpu", "CPU (matrixmultiply, all cores)"),
    ("stage1", "stage 1 (naive)"),
    ("stage3", "stage 3 (smem-tiled)"),
    ("cublas_plain_copies", "cuBLAS + plain copies"),
    ("cublasxt", "cuBLASXt (cublasXtDgemm)"),
    ("default_pageable", "default, pageable matrices"),
    ("default_pinned", "default, page-locked matrices"),
];

/// Seed 002's table as a plot: host-to-host ms against N, one line per
/// method, the transfer bound dashed.
fn host_plot(rows: &[HostRow]) -> Result<String> {
    let first = rows.first().ok_or("host.csv: no rows")?;
    let rank = |m: &str| HOST_METHODS.iter().position(|(name, _)| *name == m).unwrap_or(HOST_METHODS.len());
    // (rank, method) -> n -> ms; BTreeMaps keep the drawing order stable.
    let mut lines: BTreeMap<(usize, &str), BTreeMap<u64, f64>> = BTreeMap::new();
    let mut bound: BTreeMap<u64, f64> = BTreeMap::new();
    for r in rows {
        lines.entry((rank(&r.method), r.method.as_str())).or_default().insert(r.n, r.ms);
        bound.entry(r.n).or_insert(r.bound_ms);
    }
    let (n_min, n_max) = (rows.iter().map(|r| r.n).min().unwrap(), rows.iter().map(|r| r.n).max().unwrap());
    let (x_lo, x_hi) = (n_min as f64 / 1.15, n_max as f64 * 1.15);
    let powers: Vec<f64> = (0..64).map(|p| 2f64.powi(p)).filter(|p| (x_lo..=x_hi).contains(p)).collect();
    let values = rows.iter().flat_map(|r| [r.ms, r.bound_ms]).filter(|v| *v > 0.0);
    let (lo, hi) = values.fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (y_lo, y_hi) = (lo / 1.5, hi * 1.5);
    let decades: Vec<f64> = (-6..=9).map(|p| 10f64.powi(p)).filter(|d| (y_lo..=y_hi).contains(d)).collect();

    let title = format!("Host-to-host DGEMM, copies included ({})", first.run.title());
    render(&title, |area| {
        let (plot, panel) = area.split_horizontally(SIZE.0 - LEGEND_WIDTH);
        let mut chart =
            ChartBuilder::on(&plot).margin(10).x_label_area_size(45).y_label_area_size(70).build_cartesian_2d(
                (x_lo..x_hi).log_scale().with_key_points(powers),
                (y_lo..y_hi).log_scale().with_key_points(decades),
            )?;
        chart
            .configure_mesh()
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .x_desc("N (m = n = k, log2 scale)")
            .y_desc("ms (log scale)")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| short(*v))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .draw()?;

        let mut legend = Vec::new();
        for (i, (&(r, method), points)) in lines.iter().enumerate() {
            let label = HOST_METHODS.get(r).map_or(method, |(_, label)| *label);
            let ours = method.starts_with("default");
            let (color, width) = (line_color(i), if ours { 3 } else { 2 });
            let points: Vec<(f64, f64)> = points.iter().map(|(&n, &ms)| (n as f64, ms)).collect();
            chart.draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(width)))?;
            chart.draw_series(points.iter().map(|&p| Circle::new(p, width + 1, color.filled())))?;
            legend.push(Legend::line(label, color, width));
        }
        let bound: Vec<(f64, f64)> = bound.iter().map(|(&n, &ms)| (n as f64, ms)).collect();
        chart.draw_series(DashedLineSeries::new(bound, 8, 6, ROOF.stroke_width(2)))?;
        legend.push(Legend::dashed("transfer bound", ROOF));
        let notes = [
            "f64, median of 3 runs".to_string(),
            "(1 run when over 1 s)".into(),
            "bound: max(bytes up, bytes".into(),
            "down at the pinned rates,".into(),
            "kernel alone)".into(),
            commit(&first.run),
        ];
        draw_legend(&panel, &legend, &notes)
    })
}

/// A row of `emulation.csv` (`examples/emulated_dgemm.rs --study`).
struct EmulationRow {
    run: Run,
    precision: String,
    n: u64,
    phi: f64,
    moduli: u32,
    mode: String,
    tflops: f64,
    median_rel_err: f64,
}

impl EmulationRow {
    fn read(table: &Table) -> Result<Vec<EmulationRow>> {
        table
            .rows()
            .map(|r| {
                Ok(EmulationRow {
                    run: r.run()?,
                    precision: r.str("precision")?.to_string(),
                    n: r.parse("n")?,
                    phi: r.parse("phi")?,
                    moduli: r.parse("moduli")?,
                    mode: r.str("mode")?.to_string(),
                    tflops: r.parse("tflops")?,
                    median_rel_err: r.parse("median_rel_err")?,
                })
            })
            .collect()
    }
}

fn emulation_plot(all: &[EmulationRow], precision: &str) -> Result<String> {
    // The latest run (by date, then file order) of this precision at phi = 1.
    let ours: Vec<&EmulationRow> = all.iter().filter(|r| r.precision == precision && r.phi == 1.0).collect();
    let date = ours.iter().map(|r| r.run.date.clone()).max().ok_or("emulation.csv: no phi = 1 rows")?;
    let last = ours
        .iter()
        .rev()
        .find(|r| r.run.date == date)
        .map(|r| (r.run.date.clone(), r.run.commit.clone()))
        .ok_or("emulation.csv: no phi = 1 rows")?;
    let rows: Vec<&EmulationRow> =
        ours.into_iter().filter(|r| (r.run.date.clone(), r.run.commit.clone()) == last).collect();
    let first = rows[0];
    let fast: Vec<&&EmulationRow> = rows.iter().filter(|r| r.mode == "fast").collect();
    if fast.is_empty() {
        return Err(format!("emulation.csv: no emulated {precision} rows at phi = 1"));
    }
    let sizes: BTreeSet<u64> = fast.iter().map(|r| r.n).collect();
    let largest = *sizes.iter().next_back().unwrap();
    let cublas = rows.iter().find(|r| r.mode == "cublas" && r.n == largest);
    let (m_lo, m_hi) = (fast.iter().map(|r| r.moduli).min().unwrap(), fast.iter().map(|r| r.moduli).max().unwrap());
    let (x_lo, x_hi) = (m_lo as f64 - 0.5, m_hi as f64 + 0.5);
    let t_hi = rows.iter().map(|r| r.tflops).fold(0.0f64, f64::max) * 1.15;
    let errs = fast.iter().map(|r| r.median_rel_err).chain(cublas.map(|c| c.median_rel_err)).filter(|e| *e > 0.0);
    let (e_lo, e_hi) = errs.fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (e_lo, e_hi) = (e_lo / 3.0, e_hi * 3.0);
    // A zero error (exact at every sample) is drawn at the axis' floor.
    let floor = |e: f64| if e > 0.0 { e } else { e_lo };
    let title = format!("{precision} emulated on INT8 tensor cores, phi = 1 ({})", first.run.title());
    render(&title, |area| {
        let (plot, panel) = area.split_horizontally(SIZE.0 - LEGEND_WIDTH);
        let mut chart = ChartBuilder::on(&plot)
            .margin(10)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .right_y_label_area_size(70)
            .build_cartesian_2d(x_lo..x_hi, 0.0..t_hi)?
            .set_secondary_coord(x_lo..x_hi, (e_lo..e_hi).log_scale());
        chart
            .configure_mesh()
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .x_desc("moduli (INT8 products)")
            .y_desc("TFLOP/s (solid)")
            .x_labels((m_hi - m_lo + 1) as usize)
            .x_label_formatter(&|v| format!("{v:.0}"))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .draw()?;
        chart
            .configure_secondary_axes()
            .y_desc("median relative error (dotted)")
            .y_label_formatter(&|v| format!("{v:.0e}"))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .draw()?;
        let mut legend = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            let color = line_color(i);
            let mut pts: Vec<(u32, f64, f64)> =
                fast.iter().filter(|r| r.n == n).map(|r| (r.moduli, r.tflops, r.median_rel_err)).collect();
            pts.sort_by_key(|p| p.0);
            let speed: Vec<(f64, f64)> = pts.iter().map(|p| (p.0 as f64, p.1)).collect();
            chart.draw_series(LineSeries::new(speed.iter().copied(), color.stroke_width(2)))?;
            chart.draw_series(speed.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
            let err: Vec<(f64, f64)> = pts.iter().map(|p| (p.0 as f64, floor(p.2))).collect();
            chart.draw_secondary_series(DashedLineSeries::new(err.iter().copied(), 2, 4, color.stroke_width(2)))?;
            chart.draw_secondary_series(err.iter().map(|&p| Cross::new(p, 4, color.stroke_width(2))))?;
            legend.push(Legend::line(&format!("N = {n}"), color, 2));
        }
        if let Some(c) = cublas {
            chart.draw_series(DashedLineSeries::new(
                [(x_lo, c.tflops), (x_hi, c.tflops)],
                8,
                6,
                ROOF.stroke_width(2),
            ))?;
            let e = floor(c.median_rel_err);
            chart.draw_secondary_series(DashedLineSeries::new([(x_lo, e), (x_hi, e)], 2, 6, ROOF.stroke_width(1)))?;
            legend.push(Legend::dashed(&format!("cuBLAS, N = {largest}"), ROOF));
        }
        let notes = [
            "m = n = k = N; inputs".to_string(),
            "(u - 0.5) exp(phi z)".into(),
            "error: sampled elements".into(),
            "against Dot2 (double-".into(),
            "double accuracy); 0 drawn".into(),
            "at the axis floor".into(),
            commit(&first.run),
        ];
        draw_legend(&panel, &legend, &notes)
    })
}

// ---------------------------------------------------------------------------
// Drawing helpers

/// Draws a titled white canvas of [`SIZE`], passes the area under the title to
/// `draw`, and returns the SVG text.
fn render(title: &str, draw: impl FnOnce(&Area<'_>) -> DrawResult) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let result: DrawResult = (|| {
            root.fill(&WHITE)?;
            let area = root.titled(title, (FONT, 20))?;
            draw(&area)?;
            root.present()?;
            Ok(())
        })();
        result.map_err(|e| format!("drawing \"{title}\": {e}"))?;
    }
    Ok(svg)
}

/// How one legend entry's sample is drawn.
enum Sample {
    Line { width: u32, dashed: bool },
    Point,
    Bar,
}

/// One entry of the legend panel right of a chart.
struct Legend {
    label: String,
    color: RGBColor,
    sample: Sample,
}

impl Legend {
    fn line(label: &str, color: RGBColor, width: u32) -> Legend {
        Legend { label: label.into(), color, sample: Sample::Line { width, dashed: false } }
    }
    fn dashed(label: &str, color: RGBColor) -> Legend {
        Legend { label: label.into(), color, sample: Sample::Line { width: 2, dashed: true } }
    }
    fn point(label: &str, color: RGBColor) -> Legend {
        Legend { label: label.into(), color, sample: Sample::Point }
    }
    fn bar(label: &str, color: RGBColor) -> Legend {
        Legend { label: label.into(), color, sample: Sample::Bar }
    }
}

/// Draws `entries` top-down in `panel`, then `notes` in grey under them.
fn draw_legend(panel: &Area<'_>, entries: &[Legend], notes: &[String]) -> DrawResult {
    const TOP: i32 = 30;
    const STEP: i32 = 22;
    for (i, e) in entries.iter().enumerate() {
        let y = TOP + STEP * i as i32;
        match e.sample {
            Sample::Line { width, dashed: false } => {
                panel.draw(&PathElement::new([(4, y), (32, y)], e.color.stroke_width(width)))?;
            }
            Sample::Line { width, dashed: true } => {
                for x in [4, 15, 26] {
                    panel.draw(&PathElement::new([(x, y), (x + 7, y)], e.color.stroke_width(width)))?;
                }
            }
            Sample::Point => panel.draw(&Circle::new((18, y), 5, e.color.filled()))?,
            Sample::Bar => panel.draw(&Rectangle::new([(8, y - 7), (28, y + 7)], e.color.filled()))?,
        }
        let style = text_style(15, BLACK, HPos::Left, VPos::Center);
        panel.draw(&Text::new(e.label.as_str(), (40, y), style))?;
    }
    draw_notes(panel, TOP + STEP * entries.len() as i32 + 10, notes)
}

/// Draws `notes`, one a line, in grey from height `top` of `panel`.
fn draw_notes(panel: &Area<'_>, top: i32, notes: &[String]) -> DrawResult {
    for (i, note) in notes.iter().enumerate() {
        let style = text_style(14, NOTE, HPos::Left, VPos::Center);
        panel.draw(&Text::new(note.as_str(), (4, top + 18 * i as i32), style))?;
    }
    Ok(())
}

/// The heat map's colour scale from `lo` (bottom) to `hi` (top), with both ends and the middle labelled.
fn draw_color_bar(panel: &Area<'_>, lo: f64, hi: f64) -> DrawResult {
    const TOP: i32 = 40;
    const STEPS: i32 = 100;
    const STEP_HEIGHT: i32 = 2;
    let header = text_style(15, BLACK, HPos::Left, VPos::Center);
    panel.draw(&Text::new("GFLOP/s", (4, TOP - 20), header))?;
    for i in 0..STEPS {
        let t = 1.0 - f64::from(i) / f64::from(STEPS - 1);
        let y = TOP + i * STEP_HEIGHT;
        panel.draw(&Rectangle::new([(4, y), (28, y + STEP_HEIGHT)], heat_color(t).filled()))?;
    }
    let style = text_style(14, BLACK, HPos::Left, VPos::Center);
    let bottom = TOP + STEPS * STEP_HEIGHT;
    for (value, y) in [(hi, TOP), ((lo + hi) / 2.0, (TOP + bottom) / 2), (lo, bottom)] {
        panel.draw(&Text::new(format!("{value:.0}"), (36, y), style.clone()))?;
    }
    Ok(())
}

/// Text of `size` (plotters' units: the SVG font size is `size / 1.24` px) anchored at `h`, `v`.
fn text_style(size: u32, color: RGBColor, h: HPos, v: VPos) -> TextStyle<'static> {
    (FONT, size).into_font().color(&color).pos(Pos::new(h, v))
}

/// An axis of `len` categories: category `i` spans `i..i + 1` and is labelled at
/// its centre, `i + 0.5`. (plotters' `WithKeyPoints` over `f64` gets no label
/// formatter in plotters 0.3.)
struct Categories {
    inner: RangedCoordf64,
    len: usize,
}

impl Categories {
    fn new(len: usize) -> Categories {
        Categories { inner: (0.0..len as f64).into(), len }
    }
}

impl Ranged for Categories {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        (0..self.len).map(|i| i as f64 + 0.5).collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

/// Colour of the `i`th line of a plot with an open-ended number of lines: the
/// stage colours, then [`EXTRA_COLORS`], then again from the start.
fn line_color(i: usize) -> RGBColor {
    let n = STAGE_COLORS.len() + EXTRA_COLORS.len();
    STAGE_COLORS.get(i % n).copied().unwrap_or_else(|| EXTRA_COLORS[i % n - STAGE_COLORS.len()])
}

/// Colour of stage `stage` (1-based) in every plot.
fn stage_color(stage: u32) -> RGBColor {
    STAGE_COLORS[(stage.max(1) as usize - 1) % STAGE_COLORS.len()]
}

/// The heat map's colour at `t` in 0..=1, interpolated between [`HEAT_STOPS`].
fn heat_color(t: f64) -> RGBColor {
    let x = t.clamp(0.0, 1.0) * (HEAT_STOPS.len() - 1) as f64;
    let i = (x.floor() as usize).min(HEAT_STOPS.len() - 2);
    let (a, b, f) = (HEAT_STOPS[i], HEAT_STOPS[i + 1], x - i as f64);
    let mix = |p: u8, q: u8| (f64::from(p) + (f64::from(q) - f64::from(p)) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// Precisions in plotting order: f64, f32, then any other sorted by name.
fn precision_order(set: BTreeSet<&str>) -> Vec<&str> {
    let rank = |p: &str| match p {
        "f64" => 0,
        "f32" => 1,
        _ => 2,
    };
    let mut v: Vec<&str> = set.into_iter().collect();
    v.sort_by_key(|p| rank(p));
    v
}

/// "33.5 TFLOP/s" from GFLOP/s.
fn tflops(gflops: f64) -> String {
    format!("{:.1} TFLOP/s", gflops / 1000.0)
}

/// A positive axis value without float noise: "0.125", "0.3", "16".
fn short(v: f64) -> String {
    if v >= 1.0 {
        return format!("{v:.0}");
    }
    let decimals = (2.0 - v.log10().floor()) as usize;
    format!("{v:.decimals$}").trim_end_matches('0').trim_end_matches('.').to_string()
}

/// "commit abc1234", for the notes under a legend.
fn commit(run: &Run) -> String {
    format!("commit {}", run.commit)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `latest.csv` with and without the `ops`, `layout` and `batch` columns:
    /// only the ladder's rows (single products, NN, row-major), the first of
    /// each precision, stage and shape.
    #[test]
    fn ladder_rows_are_nn_row_major_and_first() {
        let dir = env::temp_dir().join(format!("xtask-plots-ladder-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let head = "device,date,commit,precision,stage,stage_name,configuration,m,n,k,gflops,intensity";
        let row = |stage: u32, gflops: f64| format!("GPU,2026-01-01,abc,f64,{stage},s,c,64,64,64,{gflops},1.0");
        let old = format!("{head}\n{}\n{}\n", row(0, 10.0), row(8, 5.0));
        let new = format!(
            "{head},ops,layout\n{},NN,row\n{},NN,row\n{},NN,row\n{},NT,row\n{},NN,col\n",
            row(0, 10.0),
            row(8, 5.0),
            row(8, 7.0),
            row(8, 9.0),
            row(8, 9.0)
        );
        let batched = format!(
            "{head},ops,layout,batch,batch_kind,path\n{},NN,row,100,strided,cublas\n{},NN,row,1,single,cublas\n\
             {},NN,row,100,strided,config\n{},NN,row,1,single,stage-best\n{},NN,row,1,single,default\n\
             {},NN,row,64,grouped,default\n",
            row(0, 99.0),
            row(0, 10.0),
            row(8, 99.0),
            row(8, 5.0),
            row(8, 7.0),
            row(8, 99.0)
        );
        // The shape suite's rows (step 5): at a shape of the ladder they
        // come after its rows; at another shape they are not drawn.
        let other =
            |stage: u32, gflops: f64| format!("GPU,2026-01-01,abc,f64,{stage},s,c,16384,16384,16384,{gflops},1.0");
        let suite = format!(
            "{head},ops,layout,batch,batch_kind,path\n{},NN,row,1,single,cublas\n{},NN,row,1,single,stage-best\n\
             {},NN,row,1,single,cublas\n{},NN,row,1,single,suite\n{},NN,row,1,single,cublas\n{},NN,row,1,single,suite\n",
            row(0, 10.0),
            row(8, 5.0),
            row(0, 99.0),
            row(8, 99.0),
            other(0, 99.0),
            other(8, 99.0)
        );
        for text in [old, new, batched, suite] {
            fs::write(dir.join("latest.csv"), text).unwrap();
            let rows = LadderRow::read(&Table::read(&dir, "latest.csv").unwrap()).unwrap();
            let got: Vec<(u32, f64)> = rows.iter().map(|r| (r.stage, r.gflops)).collect();
            assert_eq!(got, [(0, 10.0), (8, 5.0)]);
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    /// `host.csv`: every method is a line in the known order (unknown ones
    /// after), missing sizes are skipped, and the bound is drawn once.
    #[test]
    fn host_plot_draws_every_method() {
        let dir = env::temp_dir().join(format!("xtask-plots-host-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut text = String::from("device,date,commit,n,precision,method,ms,bound_ms\n");
        for (n, ms) in [(64u64, 0.1), (128, 0.4), (256, 2.0)] {
            for method in ["default_pinned", "zz_other", "cpu"] {
                if method == "cpu" && n == 256 {
                    continue;
                }
                text += &format!("GPU,2026-01-01,abc,{n},f64,{method},{ms},{}\n", ms / 3.0);
            }
        }
        fs::write(dir.join("host.csv"), text).unwrap();
        let rows = HostRow::read(&Table::read(&dir, "host.csv").unwrap()).unwrap();
        assert_eq!(rows.len(), 8);
        let svg = host_plot(&rows).unwrap();
        let at = |label: &str| svg.find(label).unwrap_or_else(|| panic!("no {label:?} in the plot"));
        assert!(at("CPU (matrixmultiply") < at("default, page-locked") && at("default, page-locked") < at("zz_other"));
        assert!(svg.contains("transfer bound") && svg.contains("GPU, 2026-01-01"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
