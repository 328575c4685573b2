//! SVG plots of the suite's medians with plotters.

use plotters::prelude::*;

use super::Table;

const COLOURS: [RGBColor; 4] = [
    RGBColor(200, 30, 30),
    RGBColor(30, 90, 200),
    RGBColor(40, 150, 60),
    RGBColor(140, 80, 160),
];

fn out(name: &str) -> std::path::PathBuf {
    let dir = super::common::target_dir();
    dir.parent().unwrap_or(&dir).join("bench-report").join(name)
}

/// One line per configuration of `metric` in `part` against bytes.
fn lines(
    table: &Table,
    part: &str,
    metric: &str,
    title: &str,
    unit: &str,
    file: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut series: std::collections::BTreeMap<String, Vec<(f64, f64)>> = Default::default();
    for ((p, _, m, x), by) in table {
        if p == part && m == metric {
            for (c, v) in by {
                if v.is_finite() && *v > 0.0 {
                    series
                        .entry(c.clone())
                        .or_default()
                        .push(((*x).max(1) as f64, *v));
                }
            }
        }
    }
    if series.is_empty() {
        return Ok(());
    }
    let all: Vec<(f64, f64)> = series.values().flatten().copied().collect();
    let (xmax, ymin, ymax) = all
        .iter()
        .fold((1f64, f64::MAX, 0f64), |(a, b, c), &(x, y)| {
            (a.max(x), b.min(y), c.max(y))
        });
    let path = out(file);
    let root = SVGBackend::new(&path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (1f64..xmax * 1.5).log_scale(),
            (ymin * 0.7..ymax * 1.4).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("message size (bytes)")
        .y_desc(unit)
        .draw()?;
    // vpml first, so it always gets the first colour.
    let mut series: Vec<(String, Vec<(f64, f64)>)> = series.into_iter().collect();
    series.sort_by_key(|(name, _)| name != "vpml");
    for (i, (name, pts)) in series.into_iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(pts, colour.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()?;
    root.present()?;
    println!("# plot {}", path.display());
    Ok(())
}

/// Bars: one group per (part, ranks, metric, x) row, one bar per configuration.
fn bars(
    table: &Table,
    parts: &[&str],
    title: &str,
    file: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let rows: Vec<(String, &std::collections::BTreeMap<String, f64>)> = table
        .iter()
        .filter(|((p, ..), _)| parts.contains(&p.as_str()))
        .map(|((p, r, m, x), by)| (format!("{p} {m} {x}B n={r}"), by))
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    let configs: Vec<String> = {
        let mut c: Vec<String> = rows.iter().flat_map(|(_, by)| by.keys().cloned()).collect();
        c.sort();
        c.dedup();
        c.sort_by_key(|name| name != "vpml");
        c
    };
    let path = out(file);
    let height = 120 + 26 * rows.len() as u32 * configs.len() as u32;
    let root = SVGBackend::new(&path, (1000, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let title_area = root.titled(title, ("sans-serif", 22))?;
    let (w, _) = title_area.dim_in_pixel();
    let mut y = 20i32;
    for (label, by) in &rows {
        title_area.draw(&Text::new(label.clone(), (10, y), ("sans-serif", 15)))?;
        y += 18;
        // Normalise each group to its vpml value (bars show ratio to vpml).
        let base = by.get("vpml").copied().unwrap_or(1.0).max(1e-12);
        for (i, c) in configs.iter().enumerate() {
            let Some(v) = by.get(c) else { continue };
            let len = ((v / base) * 300.0).clamp(1.0, w as f64 - 320.0) as i32;
            let colour = COLOURS[i % COLOURS.len()];
            title_area.draw(&Rectangle::new(
                [(150, y), (150 + len, y + 16)],
                colour.filled(),
            ))?;
            title_area.draw(&Text::new(
                format!("{c}: {v:.3} ({:.2}x vpml)", v / base),
                (160 + len, y + 2),
                ("sans-serif", 13),
            ))?;
            y += 20;
        }
        y += 8;
    }
    root.present()?;
    println!("# plot {}", path.display());
    Ok(())
}

/// Every plot the suite makes.
pub fn all(table: &Table) -> Result<(), Box<dyn std::error::Error>> {
    lines(
        table,
        "pingpong",
        "latency_us",
        "Ping-pong one-way latency",
        "µs",
        "latency.svg",
    )?;
    lines(
        table,
        "pingpong",
        "bandwidth_mbs",
        "Ping-pong bandwidth (window of 64)",
        "MB/s",
        "bandwidth.svg",
    )?;
    lines(
        table,
        "anysource",
        "latency_us",
        "ANY_SOURCE ping-pong latency",
        "µs",
        "anysource.svg",
    )?;
    bars(
        table,
        &["collectives", "heat3d"],
        "Collectives (µs per call) and heat3d (s), bar length relative to vpml",
        "applications.svg",
    )?;
    Ok(())
}

/// For every `speed` part and rank count, vpml's slowdown against Open
/// MPI by message size (the medians of `report::speed_ratios`): one line
/// per test, and the line y = 1 (below it vpml is faster). 0 B is drawn
/// at 0.5 B.
pub fn speed_ratios(ratios: &super::report::SpeedRatios) -> Result<(), Box<dyn std::error::Error>> {
    type Lines = std::collections::BTreeMap<String, Vec<(f64, f64)>>;
    let mut plots: std::collections::BTreeMap<(String, usize), Lines> = Default::default();
    for ((part, ranks, metric, x), &(r, _, _)) in ratios {
        let at = if *x == 0 { 0.5 } else { *x as f64 };
        plots
            .entry((part.clone(), *ranks))
            .or_default()
            .entry(metric.clone())
            .or_default()
            .push((at, r));
    }
    for ((part, ranks), lines) in plots {
        let path = out(&format!("{part}-{ranks}.svg"));
        let all: Vec<f64> = lines.values().flatten().map(|p| p.1).collect();
        let ymin = all.iter().copied().fold(1.0, f64::min) * 0.7;
        let ymax = all.iter().copied().fold(1.0, f64::max) * 1.4;
        let root = SVGBackend::new(&path, (1000, 620)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("{part}, {ranks} ranks: vpml / Open MPI (time; rates inverted) — below 1, vpml is faster"),
                ("sans-serif", 20),
            )
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d((0.4f64..8e6).log_scale(), (ymin..ymax).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("bytes per message or per rank (0 B at 0.5)")
            .y_desc("vpml / Open MPI")
            .draw()?;
        chart.draw_series(LineSeries::new(
            vec![(0.4, 1.0), (8e6, 1.0)],
            BLACK.stroke_width(1),
        ))?;
        let n = lines.len().max(1) as f64;
        for (i, (metric, pts)) in lines.into_iter().enumerate() {
            let colour = HSLColor(i as f64 / n, 0.75, 0.42);
            chart
                .draw_series(LineSeries::new(pts, colour.stroke_width(2)))?
                .label(metric)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.85))
            .draw()?;
        root.present()?;
        println!("# plot {}", path.display());
    }
    Ok(())
}

/// The head-to-head (`tradeoff` rows): one panel per workload, the total
/// time of coordinated and pessimist without failures and at each mean
/// time between failures, `none`'s failure-free time as a dashed line.
pub fn tradeoff(rows: &[serde_json::Value]) -> Result<(), Box<dyn std::error::Error>> {
    const COLUMNS: [(&str, &str); 4] = [
        ("failure_free_s", "no failures"),
        ("mtbf_120s_total_s", "MTBF 120 s"),
        ("mtbf_30s_total_s", "MTBF 30 s"),
        ("mtbf_10s_total_s", "MTBF 10 s"),
    ];
    let median = |workload: &str, metric: &str, protocol: &str| {
        rows.iter()
            .find(|r| {
                r["workload"] == workload && r["metric"] == metric && r["protocol"] == protocol
            })
            .and_then(|r| r["median"].as_f64())
    };
    let mut workloads: Vec<&str> = rows.iter().filter_map(|r| r["workload"].as_str()).collect();
    workloads.dedup();
    if workloads.is_empty() {
        return Ok(());
    }
    let path = out("tradeoff.svg");
    let root = SVGBackend::new(&path, (420 * workloads.len() as u32, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        "total time, 4 ranks: coordinated checkpointing against message logging",
        ("sans-serif", 20),
    )?;
    for (panel, workload) in root
        .split_evenly((1, workloads.len()))
        .iter()
        .zip(&workloads)
    {
        let ymax = ["none", "coordinated", "pessimist"]
            .iter()
            .flat_map(|p| {
                COLUMNS
                    .iter()
                    .filter_map(move |(m, _)| median(workload, m, p))
            })
            .fold(1f64, f64::max);
        let mut chart = ChartBuilder::on(panel)
            .caption(*workload, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(-0.3f64..3.3f64, 0f64..ymax * 1.15)?;
        chart
            .configure_mesh()
            .x_labels(4)
            .x_label_formatter(&|x| {
                COLUMNS
                    .get(x.round().max(0.0) as usize)
                    .map_or(String::new(), |c| c.1.to_string())
            })
            .y_desc("seconds")
            .draw()?;
        if let Some(free) = median(workload, "failure_free_s", "none") {
            let colour = COLOURS[2];
            chart
                .draw_series(DashedLineSeries::new(
                    [(-0.3, free), (3.3, free)],
                    6,
                    4,
                    colour.stroke_width(1),
                ))?
                .label("none, no failures")
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        }
        for (i, protocol) in ["coordinated", "pessimist"].into_iter().enumerate() {
            let colour = COLOURS[i];
            let points: Vec<(f64, f64)> = COLUMNS
                .iter()
                .enumerate()
                .filter_map(|(x, (m, _))| median(workload, m, protocol).map(|y| (x as f64, y)))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?
                .label(protocol)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            chart.draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 4, colour.filled())),
            )?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()?;
    }
    root.present()?;
    println!("# plot {}", path.display());
    Ok(())
}
