//! The suite's tables: medians over rounds, the ratios to vpml and to the
//! reference MPIs, and the pessimist protocol's overhead against its
//! targets.

use std::collections::BTreeMap;

use super::common::median;
use super::parts::MPICH_ON_VPML;
use super::{RowKey, Sample, Table};

pub(crate) fn medians(samples: &[Sample]) -> Table {
    let mut grouped: BTreeMap<RowKey, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for s in samples {
        grouped
            .entry((s.part.to_string(), s.ranks, s.metric.clone(), s.x))
            .or_default()
            .entry(s.config.clone())
            .or_default()
            .push(s.value);
    }
    grouped
        .into_iter()
        .map(|(k, by)| (k, by.into_iter().map(|(c, v)| (c, median(v))).collect()))
        .collect()
}

/// The pessimist protocol's targets in one place: ping-pong latency
/// overhead up to 1 KiB (mean and median round trip; from `pingpong` and
/// from the many short runs of `latency`), bandwidth ratio at 1-4 MiB
/// (from `pingpong` and from the many short runs of `bandwidth`), and
/// heat3d's time. Each size's ratio pessimist / vpml is taken within a
/// pair of runs (next to each other in time, so the machine's drift
/// cancels) and then the median over pairs; the line gives the geometric
/// mean of those over the sizes, and their range. A second line gives the
/// spread of single pairs.
pub(crate) fn print_protocol_overhead(samples: &[Sample]) {
    let value = |part: &str, config: &str, metric: &str, x: u64, pair: usize| {
        samples
            .iter()
            .find(|s| {
                s.part == part
                    && s.config == config
                    && s.metric == metric
                    && s.x == x
                    && s.pair == pair
            })
            .map(|s| s.value)
    };
    let geometric_mean = |v: &[f64]| (v.iter().map(|v| v.ln()).sum::<f64>() / v.len() as f64).exp();
    let pairs = samples.iter().map(|s| s.pair).max().unwrap_or(0);
    let latency = 0..=1024u64;
    for (part, what, metric, sizes) in [
        (
            "pingpong",
            "latency 0 B-1 KiB (mean)",
            "latency_us",
            latency.clone(),
        ),
        (
            "pingpong",
            "latency 0 B-1 KiB (median)",
            "latency_p50_us",
            latency.clone(),
        ),
        (
            "latency",
            "latency 0 B-1 KiB (mean)",
            "latency_us",
            latency.clone(),
        ),
        (
            "latency",
            "latency 0 B-1 KiB (median)",
            "latency_p50_us",
            latency,
        ),
        (
            "pingpong",
            "bandwidth 1-4 MiB",
            "bandwidth_mbs",
            1 << 20..=4 << 20,
        ),
        (
            "bandwidth",
            "bandwidth 1-4 MiB",
            "bandwidth_mbs",
            1 << 20..=4 << 20,
        ),
        ("heat3d", "heat3d time", "elapsed_s", 0..=0),
    ] {
        let mut xs: Vec<u64> = samples
            .iter()
            .filter(|s| s.part == part && s.metric == metric && sizes.contains(&s.x))
            .map(|s| s.x)
            .collect();
        xs.sort_unstable();
        xs.dedup();
        // ratio[pair][size], where both runs of the pair gave the size.
        let ratio: Vec<Vec<Option<f64>>> = (1..=pairs)
            .map(|k| {
                xs.iter()
                    .map(|&x| {
                        let r = value(part, "vpml-pessimist", metric, x, k)?
                            / value(part, "vpml", metric, x, k)?;
                        r.is_finite().then_some(r)
                    })
                    .collect()
            })
            .collect();
        let per_size: Vec<f64> = (0..xs.len())
            .filter_map(|i| {
                let r: Vec<f64> = ratio.iter().filter_map(|pair| pair[i]).collect();
                (!r.is_empty()).then(|| median(r))
            })
            .collect();
        if per_size.is_empty() {
            continue;
        }
        let lo = per_size.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = per_size.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        println!(
            "# pessimist / vpml, {what}, {part}: geometric mean {:.3} over {} size(s) (range {lo:.2}-{hi:.2}; per size, the median over pairs of runs of the ratio within a pair)",
            geometric_mean(&per_size),
            per_size.len()
        );
        // How far single pairs of runs spread: each complete pair's
        // geometric mean over the sizes.
        let pair_ratios: Vec<f64> = ratio
            .iter()
            .filter_map(|pair| pair.iter().copied().collect::<Option<Vec<f64>>>())
            .filter(|r| !r.is_empty())
            .map(|r| geometric_mean(&r))
            .collect();
        let complete = pair_ratios.len();
        if complete > 0 {
            let (q1, q3) = quartiles(pair_ratios);
            println!(
                "#   {complete} pair(s) of runs; quartiles of a pair's ratio {q1:.3} and {q3:.3}"
            );
        }
    }
}

/// First and third quartiles (the medians of the lower and upper halves).
fn quartiles(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let half = v.len() / 2;
    let upper = v.len() - half;
    (
        median(v[..half.max(1)].to_vec()),
        median(v[upper.min(v.len() - 1)..].to_vec()),
    )
}

pub(crate) fn print_tables(table: &Table, rounds: usize) {
    let mut last = String::new();
    let mut refs: Vec<String> = Vec::new();
    for ((part, ranks, metric, x), by) in table {
        if *part != last {
            // Columns: every configuration any row of this part has (some
            // metrics only come from some configurations).
            refs = table
                .iter()
                .filter(|((p, ..), _)| p == part)
                .flat_map(|(_, by)| by.keys().filter(|c| *c != "vpml").cloned())
                .collect();
            refs.sort();
            refs.dedup();
            println!(
                "\n## {part} — medians of {rounds} round(s); ratio: vpml / reference MPI, \
                 vpml-pessimist / vpml (protocol overhead), mpich-on-vpml / mpich (the \
                 same MPICH binary on vpml's library and on MPICH)"
            );
            print!(
                "{:>5} {:>14} {:>9} {:>12}",
                "ranks", "metric", "bytes", "vpml"
            );
            for r in &refs {
                print!(" {:>12} {:>6}", r, "ratio");
            }
            println!();
            last = part.clone();
        }
        let v = by.get("vpml").copied().unwrap_or(f64::NAN);
        print!("{ranks:>5} {metric:>14} {x:>9} {v:>12.3}");
        for r in &refs {
            let Some(&o) = by.get(r) else {
                print!(" {:>12} {:>6}", "-", "-");
                continue;
            };
            let ratio = if r.starts_with("vpml-") {
                o / v
            } else if r == MPICH_ON_VPML {
                o / by.get("mpich").copied().unwrap_or(f64::NAN)
            } else {
                v / o
            };
            print!(" {o:>12.3} {ratio:>6.2}");
        }
        println!();
    }
}

/// The target of issue 22 for `test` at `bytes` of the `nocheckpoint`
/// part, as (bound, true if the ratio pessimist / vpml must stay at or
/// below it — a time — else at or above — a rate), if there is one.
fn nocheckpoint_target(test: &str, bytes: u64) -> Option<(f64, bool)> {
    const KIB: u64 = 1024;
    match test {
        "latency" if bytes <= KIB => Some((1.05, true)),
        "latency" if (4 * KIB..=64 * KIB).contains(&bytes) => Some((1.15, true)),
        "bw" | "bibw" | "msgrate" if bytes <= KIB => Some((0.90, false)),
        "bw" | "bibw" | "msgrate" if (64 * KIB..=4096 * KIB).contains(&bytes) => {
            Some((0.85, false))
        }
        "allreduce" | "bcast" | "allgather" | "allgatherv" | "alltoall" | "alltoallv" => {
            Some((1.15, true))
        }
        _ => None,
    }
}

/// What logging costs a C program that never checkpoints (the
/// `nocheckpoint` part): for every test and size, the ratio pessimist /
/// vpml within each pair of runs, its median over pairs and its range,
/// against the target where there is one.
pub(crate) fn print_nocheckpoint(samples: &[Sample]) {
    for config in ["vpml-pessimist", "vpml-pessimist-memlog"] {
        print_nocheckpoint_of(samples, config);
    }
}

/// [`print_nocheckpoint`] for the pessimist configuration `config`.
fn print_nocheckpoint_of(samples: &[Sample], config: &str) {
    let part = super::parts::NOCHECKPOINT;
    let mine: Vec<&Sample> = samples.iter().filter(|s| s.part == part).collect();
    if !mine.iter().any(|s| s.config == config) {
        return;
    }
    let value = |config: &str, test: &str, x: u64, pair: usize| {
        mine.iter()
            .find(|s| s.config == config && s.metric == test && s.x == x && s.pair == pair)
            .map(|s| s.value)
    };
    let pairs = mine.iter().map(|s| s.pair).max().unwrap_or(0);
    println!(
        "# {part}: {config} / vpml for a C program that never checkpoints (MPICH-built, on vpml's MPI library, 2 ranks); median over {pairs} pair(s) of runs [range]"
    );
    let (mut met, mut missed) = (0, 0);
    let mut tests: Vec<&str> = Vec::new();
    for s in &mine {
        if !tests.contains(&s.metric.as_str()) {
            tests.push(&s.metric);
        }
    }
    for test in tests {
        let mut xs: Vec<u64> = mine
            .iter()
            .filter(|s| s.metric == test)
            .map(|s| s.x)
            .collect();
        xs.sort_unstable();
        xs.dedup();
        for x in xs {
            let ratios: Vec<f64> = (1..=pairs)
                .filter_map(|k| {
                    let r = value(config, test, x, k)? / value("vpml", test, x, k)?;
                    r.is_finite().then_some(r)
                })
                .collect();
            if ratios.is_empty() {
                continue;
            }
            let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let mid = median(ratios);
            let verdict = match nocheckpoint_target(test, x) {
                Some((bound, at_most)) => {
                    let ok = if at_most { mid <= bound } else { mid >= bound };
                    if ok {
                        met += 1;
                    } else {
                        missed += 1;
                    }
                    format!(
                        "target {} {bound:.2}: {}",
                        if at_most { "<=" } else { ">=" },
                        if ok { "met" } else { "MISSED" }
                    )
                }
                None => "no target".into(),
            };
            println!("#   {test:<10} {x:>8} B  {mid:7.3} [{lo:.3}-{hi:.3}]  {verdict}");
        }
    }
    println!("# {part}, {config}: {met} target(s) met, {missed} missed");
}

/// The rate metrics of `benches/c/mpi_bench.c` (larger is better); the
/// others are times.
fn is_rate(metric: &str) -> bool {
    matches!(
        metric,
        "bw" | "bibw" | "msgrate" | "mrate" | "put_bw" | "get_bw"
    )
}

/// vpml's time over the reference's for one row (for a rate, the
/// reference's rate over vpml's): at most 1 where vpml is as fast or
/// faster.
pub(crate) fn slowdown(metric: &str, vpml: f64, reference: f64) -> f64 {
    if is_rate(metric) {
        reference / vpml
    } else {
        vpml / reference
    }
}

/// Per row of the `speed` parts: vpml's slowdown against Open MPI (see
/// [`slowdown`]) as the median over pairs of runs of its ratio within
/// each pair (the two ran one after the other, in the same state of this
/// machine, whose speed changes from one minute to the next), and its
/// range.
pub(crate) type SpeedRatios = BTreeMap<RowKey, (f64, f64, f64)>;

pub(crate) fn speed_ratios(samples: &[Sample]) -> SpeedRatios {
    let mut by_pair: BTreeMap<(RowKey, usize), (Option<f64>, Option<f64>)> = BTreeMap::new();
    for s in samples
        .iter()
        .filter(|s| s.part.starts_with(super::parts::SPEED))
    {
        let key = ((s.part.to_string(), s.ranks, s.metric.clone(), s.x), s.pair);
        let e = by_pair.entry(key).or_default();
        match s.config.as_str() {
            "vpml" => e.0 = Some(s.value),
            "openmpi" => e.1 = Some(s.value),
            _ => {}
        }
    }
    let mut ratios: BTreeMap<RowKey, Vec<f64>> = BTreeMap::new();
    for ((row, _), (v, o)) in by_pair {
        if let (Some(v), Some(o)) = (v, o) {
            let r = slowdown(&row.2, v, o);
            if r.is_finite() && r > 0.0 {
                ratios.entry(row).or_default().push(r);
            }
        }
    }
    ratios
        .into_iter()
        .map(|(row, v)| {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (row, (median(v), lo, hi))
        })
        .collect()
}

/// Issue 23's head-to-head: for every `speed` part, rank count and test,
/// vpml's slowdown against Open MPI at each size ([`speed_ratios`]), and
/// how many rows meet the target (≤ 1).
pub(crate) fn print_speed(ratios: &SpeedRatios, table: &Table) {
    let mut last: Option<(String, usize, String)> = None;
    let (mut met, mut missed) = (0, 0);
    let mut line = String::new();
    for ((part, ranks, metric, x), &(r, _, _)) in ratios {
        let key = (part.clone(), *ranks, metric.clone());
        if last.as_ref() != Some(&key) {
            if !line.is_empty() {
                println!("{line}");
            }
            if last
                .as_ref()
                .is_none_or(|(p, n, _)| p != part || n != ranks)
            {
                println!(
                    "\n## {part} on {ranks} ranks — vpml / Open MPI by size, median of the per-pair ratios (time; rates inverted): ≤ 1 meets the target"
                );
            }
            line = format!("{metric:>21}");
            last = Some(key);
        }
        if r <= 1.0 {
            met += 1;
        } else {
            missed += 1;
        }
        let size = if *x >= 1 << 20 {
            format!("{}M", x >> 20)
        } else if *x >= 1024 {
            format!("{}K", x >> 10)
        } else {
            x.to_string()
        };
        line.push_str(&format!(
            " {size}:{r:.2}{}",
            if r <= 1.0 { "" } else { "*" }
        ));
    }
    if !line.is_empty() {
        println!("{line}");
    }
    if met + missed > 0 {
        println!(
            "# speed: vpml at least as fast as Open MPI in {met} of {} rows (* marks the others)",
            met + missed
        );
    }
    let zero = table
        .iter()
        .find(|((p, r, m, x), _)| p == super::parts::SPEED && *r == 2 && m == "latency" && *x == 0)
        .map(|(_, by)| (by.get("vpml"), by.get("openmpi")));
    if let Some((Some(v), Some(o))) = zero {
        println!(
            "# speed: 0 B one-way latency through the C library: vpml {v:.3} µs, Open MPI {o:.3} µs (medians; target ≤ 0.15 µs)"
        );
    }
}
