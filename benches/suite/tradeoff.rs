//! The head-to-head of the two ways vpml survives crashes: coordinated
//! checkpointing (`coordinated`: nothing logged, every rank goes back to
//! the last global checkpoint) against message logging (`pessimist`:
//! every message and event logged, the crashed rank alone re-executes),
//! with `none` as the failure-free baseline — on heat3d, 4 ranks, one
//! checkpoint every 20 steps.
//!
//! Per protocol: the failure-free time (overhead against `none`), the
//! time one checkpoint's write takes, a rank killed halfway (detection to caught up,
//! the job's extra time, and the work done again: extra time less
//! recovery), and the total time with failures injected at a mean time
//! between failures of 10, 30 and 120 s (the same seeded plan for both
//! protocols in a round; a kill that comes after the end does not land).
//!
//! `cargo bench --bench suite -- tradeoff [--rounds 3] [--tradeoff-steps 4000]`

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

/// The head-to-head, `rounds` times: rows for the report.
pub(crate) fn tradeoff(rounds: usize) -> Vec<Value> {
    let steps = super::common::arg("--tradeoff-steps").unwrap_or(4000);
    println!(
        "\n## tradeoff — heat3d small, 4 ranks, {steps} steps, a checkpoint every 20: none, coordinated, pessimist"
    );
    let program = match example("heat3d") {
        Ok(p) => p,
        Err(e) => {
            println!("# tradeoff: {e}");
            return Vec::new();
        }
    };
    let steps_arg = steps.to_string();
    let heat = [
        "--size",
        "small",
        "--steps",
        steps_arg.as_str(),
        "--checkpoint-every",
        "20",
    ];
    let run = |protocol: &str, extra: &[String]| -> Option<Run> {
        let mut launcher = vec!["--protocol", protocol, "--stats", "--max-restarts", "1000"];
        launcher.extend(extra.iter().map(String::as_str));
        let mut cmd = vpml_run_with(4, &launcher, &program);
        cmd.extend(heat.iter().map(|a| a.to_string()));
        let t = std::time::Instant::now();
        let out = std::process::Command::new(&cmd[0])
            .args(&cmd[1..])
            .output()
            .ok()?;
        let seconds = t.elapsed().as_secs_f64();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            println!("# tradeoff: {protocol} failed: {}", stderr.trim());
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
    // (metric, protocol) -> samples
    let mut values: BTreeMap<(String, &str), Vec<f64>> = BTreeMap::new();
    let mut put = |metric: &str, protocol: &'static str, v: f64| {
        values
            .entry((metric.to_string(), protocol))
            .or_default()
            .push(v);
    };
    for round in 1..=rounds {
        let mut base: BTreeMap<&str, (f64, Option<String>)> = BTreeMap::new();
        for protocol in PROTOCOLS {
            eprintln!("# round {round}/{rounds}: tradeoff, {protocol}, failure-free");
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
        let Some(&(free, ref expected)) = base.get("none") else {
            continue;
        };
        for protocol in ["coordinated", "pessimist"] {
            eprintln!("# round {round}/{rounds}: tradeoff, {protocol}, rank 2 killed halfway");
            let kill = vec![
                "--inject-failure".to_string(),
                format!("2@{:.3}", free / 2.0),
            ];
            let Some(r) = run(protocol, &kill) else {
                put("failed_runs", protocol, 1.0);
                continue;
            };
            {
                if checksum(&r.stdout) != *expected {
                    println!("# tradeoff: {protocol}: checksum differs after a kill!");
                    continue;
                }
                let own = base.get(protocol).map_or(free, |b| b.0);
                let extra = r.seconds - own;
                let detected = largest_after(&r.stderr, "detected ").unwrap_or(0.0);
                // Detection to caught up: the launcher's part, then the
                // slowest restarted process's.
                // (From its exec: the process's own line counts from
                // entering vpml.)
                let exec = largest_after(&r.stderr, "process start ").unwrap_or(0.0);
                let recovery_ms = if protocol == "coordinated" {
                    detected
                        + largest_after(&r.stderr, "all stopped in ").unwrap_or(0.0)
                        + largest_after(&r.stderr, "spawned in ").unwrap_or(0.0)
                        + exec
                        + largest_after(&r.stderr, ") resumed ").unwrap_or(0.0)
                } else {
                    detected
                        + largest_after(&r.stderr, "spawned in ").unwrap_or(0.0)
                        + exec
                        + largest_after(&r.stderr, ") caught up ").unwrap_or(0.0)
                };
                put("one_kill_extra_s", protocol, extra);
                put("recovery_ms", protocol, recovery_ms);
                put("redone_work_s", protocol, extra - recovery_ms / 1e3);
            }
            for mtbf in MTBF_S {
                let seed = round as u64 * 1_000_003 + mtbf as u64;
                let plan = kill_plan(seed, mtbf, 4.0 * free);
                let mut extra = Vec::new();
                for spec in &plan {
                    extra.extend(["--inject-failure".to_string(), spec.clone()]);
                }
                eprintln!(
                    "# round {round}/{rounds}: tradeoff, {protocol}, MTBF {mtbf} s ({} kills planned)",
                    plan.len()
                );
                let Some(r) = run(protocol, &extra) else {
                    put("failed_runs", protocol, 1.0);
                    continue;
                };
                {
                    if checksum(&r.stdout) != *expected {
                        println!("# tradeoff: {protocol}: checksum differs after kills!");
                        continue;
                    }
                    let landed = r.stderr.matches("was killed by signal 9").count();
                    put(&format!("mtbf_{mtbf}s_total_s"), protocol, r.seconds);
                    put(&format!("mtbf_{mtbf}s_failures"), protocol, landed as f64);
                }
            }
        }
    }
    println!(
        "{:>26} {:>12} {:>12} {:>12}",
        "metric (median)", "none", "coordinated", "pessimist"
    );
    let metrics: Vec<String> = {
        let mut m: Vec<String> = values.keys().map(|(m, _)| m.clone()).collect();
        m.dedup();
        m
    };
    let mut rows = Vec::new();
    for metric in metrics {
        let cell = |p: &'static str| values.get(&(metric.clone(), p)).map(|v| median(v.clone()));
        let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
        println!(
            "{metric:>26} {:>12} {:>12} {:>12}",
            show(cell("none")),
            show(cell("coordinated")),
            show(cell("pessimist"))
        );
        for p in PROTOCOLS {
            if let Some(v) = values.get(&(metric.clone(), p)) {
                rows.push(json!({
                    "part": "tradeoff",
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
