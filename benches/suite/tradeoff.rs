//! The head-to-head of the two ways vpml survives crashes: coordinated
//! checkpointing (`coordinated`: nothing logged, every rank goes back to
//! the last global checkpoint) against message logging (`pessimist`:
//! every message and event logged, the crashed rank alone re-executes),
//! with `none` as the failure-free baseline — on 4 ranks of heat3d and
//! of the LU and MG patterns, each about 15 s long without failures and
//! checkpointing about every half second.
//!
//! Per protocol: the failure-free time (overhead against `none`), the
//! time one checkpoint's write takes, rank 2 killed halfway through the
//! protocol's own failure-free time (the job's extra time; the restart,
//! detection to every restarted process running; the work done again;
//! their sum, detection to caught up), and the total time with failures
//! injected at a mean time between failures of 10, 30 and 120 s (the
//! same seeded sequence for both protocols in a round; a kill that comes
//! after the end does not land). Every answer is compared with the
//! failure-free one without a protocol.
//!
//! `cargo bench --bench suite -- tradeoff [--rounds 3]
//! [--tradeoff-percent 100] [--tradeoff-only=heat3d,lu,mg]`: the
//! percent scales every job's length; the table goes to stdout, the rows
//! to `suite.json` and the plot to `target/bench-report/tradeoff.svg`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::common::{example, median, vpml_run_with};
use super::recovery::number_after;

/// Mean times between failures, in seconds.
const MTBF_S: [f64; 3] = [10.0, 30.0, 120.0];
/// Protocols compared, the baseline first.
const PROTOCOLS: [&str; 3] = ["none", "coordinated", "pessimist"];

/// One run of the job: its wall time and what it printed.
struct Run {
    seconds: f64,
    stdout: String,
    stderr: String,
}

/// The largest number after `prefix` on any line of `text`.
fn largest_after(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .filter_map(|l| number_after(l, prefix))
        .max_by(f64::total_cmp)
}

/// splitmix64: the kill plans' random numbers.
fn next(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Kills of random ranks at exponentially spaced instants (mean `mtbf`
/// seconds) up to `horizon` seconds, from `seed`: `--inject-failure`
/// specs.
fn kill_plan(seed: u64, mtbf: f64, horizon: f64) -> Vec<String> {
    let mut x = seed;
    let mut t = 0.0;
    let mut specs = Vec::new();
    loop {
        let u = (next(&mut x) >> 11) as f64 / (1u64 << 53) as f64;
        t += -mtbf * (1.0 - u).ln();
        if t > horizon {
            return specs;
        }
        specs.push(format!("{}@{t:.3}", next(&mut x) % 4));
    }
}

/// A program of the head-to-head and its arguments.
struct Workload {
    name: &'static str,
    program: &'static str,
    args: Vec<String>,
}

/// The head-to-head's programs, their lengths scaled by `percent`: about
/// 15 s each at 100 % without failures, on this class of machine (2
/// cores), a checkpoint about every 0.5 s.
fn workloads(percent: usize) -> Vec<Workload> {
    let n = |base: usize| (base * percent / 100).max(1).to_string();
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        Workload {
            name: "heat3d",
            program: "heat3d",
            args: args(&[
                "--size",
                "small",
                "--steps",
                &n(1600),
                "--checkpoint-every",
                "50",
            ]),
        },
        Workload {
            name: "lu",
            program: "lu-pattern",
            args: args(&["--iterations", &n(75_000), "--checkpoint-every", "2500"]),
        },
        Workload {
            name: "mg",
            program: "mg-pattern",
            args: args(&[
                "--size",
                "512",
                "--cycles",
                &n(33_000),
                "--checkpoint-every",
                "1000",
            ]),
        },
    ]
}

/// `--tradeoff-only=a,b`: the workloads named, or all.
fn only() -> Option<Vec<String>> {
    std::env::args()
        .find_map(|a| a.strip_prefix("--tradeoff-only=").map(str::to_string))
        .map(|list| list.split(',').map(str::to_string).collect())
}

/// Samples by (workload, metric, protocol).
type Values = BTreeMap<(&'static str, String, &'static str), Vec<f64>>;

/// The head-to-head, `rounds` times: rows for the report.
pub(crate) fn tradeoff(rounds: usize) -> Vec<Value> {
    let percent = super::common::arg("--tradeoff-percent")
        .unwrap_or(100)
        .max(1);
    let only = only();
    let mut values = Values::new();
    let chosen: Vec<Workload> = workloads(percent)
        .into_iter()
        .filter(|w| only.as_ref().is_none_or(|o| o.iter().any(|n| n == w.name)))
        .collect();
    if chosen.is_empty() {
        println!("# tradeoff: --tradeoff-only names none of heat3d, lu, mg");
        return Vec::new();
    }
    println!("\n## tradeoff — 4 ranks, none / coordinated / pessimist, {percent} % length");
    for round in 1..=rounds {
        for w in &chosen {
            println!("# {}: {} {}", w.name, w.program, w.args.join(" "));
            match example(w.program) {
                Ok(program) => one_round(&mut values, w, &program, round, rounds),
                Err(e) => println!("# tradeoff: {e}"),
            }
        }
    }
    let mut rows = Vec::new();
    for w in &chosen {
        rows.extend(print_table(&values, w.name));
    }
    if let Err(e) = super::plot::tradeoff(&rows) {
        println!("# tradeoff plot failed: {e}");
    }
    rows
}

/// One round of workload `w`: each protocol without failures, then
/// coordinated and pessimist with one kill halfway and with kills at
/// each mean time between failures.
fn one_round(
    values: &mut Values,
    w: &Workload,
    program: &std::path::Path,
    round: usize,
    rounds: usize,
) {
    let run = |protocol: &str, extra: &[String]| -> Option<Run> {
        let mut launcher = vec!["--protocol", protocol, "--stats", "--max-restarts", "1000"];
        launcher.extend(extra.iter().map(String::as_str));
        let mut cmd = vpml_run_with(4, &launcher, program);
        cmd.extend(w.args.iter().cloned());
        let t = std::time::Instant::now();
        let out = std::process::Command::new(&cmd[0])
            .args(&cmd[1..])
            .output()
            .ok()?;
        let seconds = t.elapsed().as_secs_f64();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            println!(
                "# tradeoff: {} {protocol} failed: {}",
                w.name,
                stderr.trim()
            );
            return None;
        }
        Some(Run {
            seconds,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr,
        })
    };
    let checksum = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("checksum"))
            .map(str::to_string)
    };
    let name = w.name;
    let mut put = |metric: &str, protocol: &'static str, v: f64| {
        values
            .entry((name, metric.to_string(), protocol))
            .or_default()
            .push(v);
    };
    let mut base: BTreeMap<&str, (f64, Option<String>)> = BTreeMap::new();
    for protocol in PROTOCOLS {
        eprintln!("# round {round}/{rounds}: tradeoff {name}, {protocol}, failure-free");
        let Some(r) = run(protocol, &[]) else {
            put("failed_runs", protocol, 1.0);
            continue;
        };
        put("failure_free_s", protocol, r.seconds);
        // Per rank: checkpoints taken and their total time.
        let per = |key: &str| -> Vec<f64> {
            r.stderr
                .lines()
                .filter_map(|l| number_after(l, &format!(" {key}=")))
                .collect()
        };
        // (pessimist: `checkpoint_ns_total`; coordinated times the
        // write only, not the agreement, drain and commit: those show
        // in the failure-free time.)
        let mut ns = per("checkpoint_ns");
        ns.extend(per("checkpoint_ns_total"));
        let n = per("checkpoints");
        if let (Some(&n), Some(ns)) = (n.first(), ns.iter().copied().reduce(f64::max))
            && n > 0.0
        {
            put("checkpoint_write_ms", protocol, ns / n / 1e6);
        }
        base.insert(protocol, (r.seconds, checksum(&r.stdout)));
    }
    // Every answer is the failure-free one without a protocol: no checksum
    // (a program that printed none) compares as wrong.
    let Some(expected) = base.get("none").and_then(|b| b.1.clone()) else {
        println!("# tradeoff: {name}: no checksum without a protocol");
        return;
    };
    let right = |r: &Run| checksum(&r.stdout).as_ref() == Some(&expected);
    for protocol in ["coordinated", "pessimist"] {
        let Some(&(own, ref answer)) = base.get(protocol) else {
            continue;
        };
        if answer.as_ref() != Some(&expected) {
            println!("# tradeoff: {name} {protocol}: checksum differs without failures!");
            put("wrong_answers", protocol, 1.0);
            continue;
        }
        eprintln!("# round {round}/{rounds}: tradeoff {name}, {protocol}, rank 2 killed halfway");
        let kill = vec![
            "--inject-failure".to_string(),
            format!("2@{:.3}", own / 2.0),
        ];
        match run(protocol, &kill) {
            None => put("failed_runs", protocol, 1.0),
            Some(r) if !right(&r) => {
                println!("# tradeoff: {name} {protocol}: checksum differs after a kill!");
                put("wrong_answers", protocol, 1.0);
            }
            Some(r) => {
                let extra = r.seconds - own;
                put("one_kill_extra_s", protocol, extra);
                match recovery(protocol, &r.stderr, extra) {
                    Some(rec) => {
                        put("restart_ms", protocol, rec.restart_ms);
                        put("redone_work_s", protocol, rec.redone_s);
                        put(
                            "caught_up_ms",
                            protocol,
                            rec.restart_ms + rec.redone_s * 1e3,
                        );
                    }
                    None => println!(
                        "# tradeoff: {name} {protocol}: a recovery line is missing from its stderr"
                    ),
                }
            }
        }
        for mtbf in MTBF_S {
            let seed = round as u64 * 1_000_003 + mtbf as u64;
            // (The same seeded sequence for both protocols, cut at four
            // times the protocol's own failure-free time.)
            let plan = kill_plan(seed, mtbf, 4.0 * own);
            let mut extra = Vec::new();
            for spec in &plan {
                extra.extend(["--inject-failure".to_string(), spec.clone()]);
            }
            eprintln!(
                "# round {round}/{rounds}: tradeoff {name}, {protocol}, MTBF {mtbf} s ({} kills planned)",
                plan.len()
            );
            match run(protocol, &extra) {
                None => put("failed_runs", protocol, 1.0),
                Some(r) if !right(&r) => {
                    println!("# tradeoff: {name} {protocol}: checksum differs after kills!");
                    put("wrong_answers", protocol, 1.0);
                }
                Some(r) => {
                    let landed = r.stderr.matches("was killed by signal 9").count();
                    put(&format!("mtbf_{mtbf}s_total_s"), protocol, r.seconds);
                    put(&format!("mtbf_{mtbf}s_failures"), protocol, landed as f64);
                }
            }
        }
    }
}

/// One kill's recovery, from the launcher's and the restarted
/// processes' lines.
struct Recovery {
    /// Detection → every restarted process running the program again
    /// (coordinated: all four resumed from the global checkpoint;
    /// pessimist: the one restarted, before its re-execution).
    restart_ms: f64,
    /// Work done again (coordinated: the job's extra time less the
    /// restart, every rank re-executing from the checkpoint; pessimist:
    /// the restarted rank's re-execution, its peers waiting or not).
    redone_s: f64,
}

/// The recovery of a run whose one kill cost `extra` seconds; `None` if
/// a line is missing.
fn recovery(protocol: &str, stderr: &str, extra: f64) -> Option<Recovery> {
    let at = |prefix: &str| largest_after(stderr, prefix);
    // The launcher's part; then the slowest restarted process's, from
    // its exec (its own line counts from entering vpml).
    let launcher = at("detected ")? + at("spawned in ")? + at("process start ")?;
    if protocol == "coordinated" {
        let restart_ms = launcher + at("all stopped in ")? + at(") resumed ")?;
        Some(Recovery {
            restart_ms,
            redone_s: extra - restart_ms / 1e3,
        })
    } else {
        let redone_ms = at(" re-execution ")?;
        Some(Recovery {
            restart_ms: launcher + at(") caught up ")? - redone_ms,
            redone_s: redone_ms / 1e3,
        })
    }
}

/// Print `workload`'s table (median, and the range over rounds) and
/// return its rows for the report.
fn print_table(values: &Values, workload: &'static str) -> Vec<Value> {
    println!("\n### tradeoff: {workload}");
    println!(
        "{:>24} {:>22} {:>22} {:>22}",
        "metric: median [min–max]", "none", "coordinated", "pessimist"
    );
    let metrics: Vec<&String> = {
        let mut m: Vec<&String> = values
            .keys()
            .filter(|(w, ..)| *w == workload)
            .map(|(_, m, _)| m)
            .collect();
        m.dedup();
        m
    };
    let mut rows = Vec::new();
    for metric in metrics {
        let samples = |p: &'static str| values.get(&(workload, metric.clone(), p));
        let show = |p: &'static str| {
            samples(p).map_or("-".to_string(), |v| {
                let (lo, hi) = v
                    .iter()
                    .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
                format!("{:.3} [{lo:.2}–{hi:.2}]", median(v.clone()))
            })
        };
        println!(
            "{metric:>24} {:>22} {:>22} {:>22}",
            show("none"),
            show("coordinated"),
            show("pessimist")
        );
        for p in PROTOCOLS {
            if let Some(v) = samples(p) {
                rows.push(json!({
                    "part": "tradeoff",
                    "workload": workload,
                    "metric": metric,
                    "protocol": p,
                    "median": median(v.clone()),
                    "samples": v,
                }));
            }
        }
    }
    rows
}
