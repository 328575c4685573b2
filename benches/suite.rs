//! The benchmark suite: vpml side by side with the reference MPIs installed
//! here, ratios measured in the same run, JSON and SVG plots.
//!
//! ```text
//! cargo bench --bench suite                       # everything, 3 rounds
//! cargo bench --bench suite -- pingpong --rounds 5
//! cargo bench --bench suite -- collectives anysource heat3d
//! ```
//!
//! Every part runs vpml without a protocol (`vpml`) and with the pessimist
//! protocol (`vpml-pessimist`, ratio = overhead). `pingpong` runs both
//! with an empty checkpoint per 16 MiB each rank moves (the steady state
//! of a long job: receivers' checkpoints let senders reuse their log
//! memory) and adds `vpml-pessimist-nogc`, the same without checkpoints
//! up to 64 KiB (a log that only grows, paying for fresh memory; larger
//! sizes would grow it past 15 GB). Parts: `pingpong`
//! (latency and bandwidth, 0 B … 4 MiB, 2 ranks; vpml's runs also give
//! `latency_p50_us`, half the median round trip, which rare stalls do not
//! move), `latency` (the same up to 1 KiB, vpml with and without the
//! protocol only, 4 pairs of runs per round: a run's small-message
//! latency moves by up to ±10 % from one pair of processes to the next
//! here, so the overhead target needs many runs), `bandwidth` (the same
//! from 1 MiB to 4 MiB, for the bandwidth target), `pingpong-tcp` (the same
//! with every pair over TCP, against Open MPI's tcp BTL), `anysource` (the
//! ANY_SOURCE ping-pong of seed 002), `collectives` (allreduce 8 B / 1 MiB
//! and bcast 1 MiB on 2, 4, 8 ranks), `heat3d` (small problem, 4 ranks,
//! run 4 times per configuration in each round: a run takes about a
//! second and varies by ±10 % here),
//! `patterns` (events logged per message for the NAS-like patterns,
//! next to seed 002's Table I), and `recovery` (heat3d on 4 ranks with
//! rank 2 killed halfway: the stages of its recovery and the job's extra
//! time). Each runs a Rust example under `vpml run` and,
//! where a C program of ours with the same method exists (`benches/c/`),
//! the same measurement under Open MPI and MPICH when their `mpicc`
//! wrappers are installed (`apt-get install -y openmpi-bin libopenmpi-dev
//! mpich libmpich-dev`); what is missing is skipped with a line saying so.
//! The configurations take turns within each round (in the opposite
//! order every other round); tables show medians over rounds and the
//! ratio vpml / reference. Results go to
//! `target/bench-report/suite.json` and plots to `target/bench-report/*.svg`.

mod common;

use std::collections::BTreeMap;

use common::{
    Config, FLAVOURS, arg, example, json_lines, median, reference, vpml_run_with, write_report,
};
use serde_json::{Value, json};

/// One measured value.
#[derive(Clone, Debug)]
struct Sample {
    part: &'static str,
    config: String,
    ranks: usize,
    metric: String,
    x: u64,
    value: f64,
    /// Which pair of runs measured it (1, 2, …): the round, or with
    /// [`Part::repeats`] > 1 the run within it.
    pair: usize,
}

/// A benchmark part: which example and C program, on how many ranks, with
/// which arguments, and how to read its output.
struct Part {
    name: &'static str,
    example: &'static str,
    c_source: Option<&'static str>,
    ranks: &'static [usize],
    args: &'static [&'static str],
    parse: fn(&Value) -> Vec<(String, u64, f64)>,
    /// Every pair over TCP (vpml `--transport tcp`, Open MPI's tcp BTL).
    tcp: bool,
    /// Extra program arguments for vpml's runs that put a logging protocol
    /// in its steady state (periodic checkpoints, so sender-log memory is
    /// freed and reused). When set, `vpml-pessimist` uses them (and so
    /// does `vpml`, where they cost nothing), and `vpml-pessimist-nogc`
    /// runs without them (if `nogc`): a log that only grows.
    steady: &'static [&'static str],
    /// Also run `vpml-pessimist-nogc` (needs `steady`).
    nogc: bool,
    /// Runs of each configuration per round, taking turns. A short, noisy
    /// program runs several times, so that its ratio rests on more pairs.
    repeats: usize,
}

fn parse_pingpong(v: &Value) -> Vec<(String, u64, f64)> {
    let b = v["bytes"].as_u64().unwrap_or(0);
    let mut out = Vec::new();
    if let Some(l) = v["latency_us"].as_f64() {
        out.push(("latency_us".into(), b, l));
    }
    // vpml's own programs also give the median round trip.
    if let Some(l) = v["latency_p50_us"].as_f64() {
        out.push(("latency_p50_us".into(), b, l));
    }
    if let Some(bw) = v["bandwidth_mbs"].as_f64() {
        out.push(("bandwidth_mbs".into(), b, bw));
    }
    out
}

fn parse_collective(v: &Value) -> Vec<(String, u64, f64)> {
    match (v["op"].as_str(), v["bytes"].as_u64(), v["us"].as_f64()) {
        (Some(op), Some(b), Some(us)) => vec![(format!("{op}_us"), b, us)],
        _ => Vec::new(),
    }
}

fn parse_heat3d(v: &Value) -> Vec<(String, u64, f64)> {
    v["elapsed_s"]
        .as_f64()
        .map(|s| vec![("elapsed_s".to_string(), 0, s)])
        .unwrap_or_default()
}

/// A ping-pong part for one of the protocol's targets: vpml with and
/// without it only, in the steady state, four pairs of runs per round. One
/// run's figures are steady, but they move by up to ±10 % from one run
/// (pair of processes) to the next here: a target wants many short runs,
/// not a few long ones.
const fn protocol_pingpong(name: &'static str, args: &'static [&'static str]) -> Part {
    Part {
        name,
        example: "pingpong",
        c_source: None,
        ranks: &[2],
        args,
        parse: parse_pingpong,
        tcp: false,
        steady: &["--checkpoint-every-mib", "16"],
        repeats: 4,
        nogc: false,
    }
}

const PARTS: [Part; 7] = [
    Part {
        name: "pingpong-tcp",
        example: "pingpong",
        c_source: Some("pingpong.c"),
        ranks: &[2],
        args: &["--json"],
        parse: parse_pingpong,
        tcp: true,
        steady: &[],
        repeats: 1,
        nogc: false,
    },
    Part {
        name: "pingpong",
        example: "pingpong",
        c_source: Some("pingpong.c"),
        ranks: &[2],
        args: &["--json"],
        parse: parse_pingpong,
        tcp: false,
        steady: &["--checkpoint-every-mib", "16"],
        repeats: 1,
        nogc: true,
    },
    // Small-message latency, for its target.
    protocol_pingpong("latency", &["--json", "--max", "1024"]),
    // Bandwidth at 1-4 MiB, for its target.
    protocol_pingpong("bandwidth", &["--json", "--min", "1048576"]),
    Part {
        name: "anysource",
        example: "anysource-pingpong",
        c_source: Some("anysource_pingpong.c"),
        ranks: &[2],
        args: &["--json"],
        parse: parse_pingpong,
        tcp: false,
        steady: &[],
        repeats: 1,
        nogc: false,
    },
    Part {
        name: "collectives",
        example: "collbench",
        c_source: Some("collectives.c"),
        ranks: &[2, 4, 8],
        args: &["--json"],
        parse: parse_collective,
        tcp: false,
        steady: &[],
        repeats: 1,
        nogc: false,
    },
    Part {
        name: "heat3d",
        example: "heat3d",
        c_source: None,
        ranks: &[4],
        args: &["--size", "small", "--steps", "50", "--timing"],
        parse: parse_heat3d,
        tcp: false,
        steady: &[],
        // About 1 s a run, with 4 ranks taking turns on the cores: one
        // run's time varies by ±10 % here, so one pair per round is not
        // enough to tell a 5 % overhead.
        repeats: 4,
        nogc: false,
    },
];

/// heat3d prints `key value` lines; turn the elapsed time into JSON.
fn heat3d_json(c: &Config) -> Result<Vec<Value>, String> {
    let out = std::process::Command::new("timeout")
        .arg("600")
        .args(&c.cmd)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "{} failed: {}",
            c.name,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("elapsed_s ")?.trim().parse::<f64>().ok())
        .map(|s| json!({ "elapsed_s": s }))
        .collect())
}

/// The largest message `vpml-pessimist-nogc` sends.
const NOGC_MAX: usize = 64 << 10;

/// The configuration running MPICH's build of the C program on vpml.
const MPICH_ON_VPML: &str = "mpich-on-vpml";

fn configs(part: &Part, ranks: usize) -> Result<Vec<Config>, String> {
    let program = example(part.example)?;
    let args: Vec<String> = part.args.iter().map(|a| a.to_string()).collect();
    let transport: &[&str] = if part.tcp {
        &["--transport", "tcp"]
    } else {
        &[]
    };
    let steady: Vec<String> = part.steady.iter().map(|a| a.to_string()).collect();
    let pessimist = |name: &str, program_args: Vec<String>| Config {
        name: name.into(),
        cmd: [
            vpml_run_with(
                ranks,
                &[transport, &["--protocol", "pessimist"]].concat(),
                &program,
            ),
            program_args,
        ]
        .concat(),
        envs: vec![],
    };
    let mut out = vec![
        Config {
            name: "vpml".into(),
            cmd: [
                vpml_run_with(ranks, transport, &program),
                args.clone(),
                steady.clone(),
            ]
            .concat(),
            envs: vec![],
        },
        pessimist("vpml-pessimist", [args.clone(), steady.clone()].concat()),
    ];
    if part.nogc {
        // Up to 64 KiB: beyond, the log of a run without checkpoints grows
        // to over 15 GB in /dev/shm, which measures this machine's memory
        // reclaim, not logging, and slows the runs after it.
        let small = ["--max".to_string(), NOGC_MAX.to_string()];
        out.push(pessimist(
            "vpml-pessimist-nogc",
            [args.clone(), small.to_vec()].concat(),
        ));
    }
    match part.c_source {
        Some(src) => {
            for f in FLAVOURS {
                if part.tcp && f != "openmpi" {
                    println!(
                        "# {}: skipping {f}: only Open MPI's tcp BTL is compared",
                        part.name
                    );
                    continue;
                }
                match reference(f, src, ranks) {
                    Ok(mut c) => {
                        if part.tcp {
                            c.cmd.splice(
                                1..1,
                                ["--mca".to_string(), "btl".into(), "tcp,self".into()],
                            );
                        }
                        c.cmd.extend(args.iter().cloned());
                        // The same MPICH binary on vpml's MPICH-ABI library.
                        if f == "mpich"
                            && let Some(at) = c.cmd.iter().position(|a| a == "--name")
                        {
                            let exe = std::path::PathBuf::from(&c.cmd[at - 1]);
                            let mut cmd = vpml_run_with(ranks, transport, &exe);
                            cmd.extend(["--name".to_string(), MPICH_ON_VPML.into()]);
                            cmd.extend(args.iter().cloned());
                            out.push(Config {
                                name: MPICH_ON_VPML.into(),
                                cmd,
                                envs: vec![],
                            });
                        }
                        out.push(c);
                    }
                    Err(why) => println!("# {}: skipping {f}: {why}", part.name),
                }
            }
        }
        None => println!("# {}: no C reference program; vpml only", part.name),
    }
    Ok(out)
}

/// Events logged per message received for the NAS-like patterns under
/// pessimist, next to seed 002's Table I. Returns JSON rows.
fn patterns() -> Vec<Value> {
    let mut rows = Vec::new();
    println!(
        "\n## patterns — events logged / messages received under pessimist (seed 002, Table I)"
    );
    println!(
        "{:>12} {:>5} {:>10} {:>10} {:>8} {:>12}",
        "program", "ranks", "received", "events", "percent", "paper"
    );
    for (name, ranks, paper, args) in [
        ("cg-pattern", 4, "0 %", vec!["--iterations", "100"]),
        ("mg-pattern", 8, "20-40 %", vec!["--cycles", "10"]),
        ("lu-pattern", 4, "~1 %", vec!["--iterations", "10"]),
    ] {
        let program = match example(name) {
            Ok(p) => p,
            Err(e) => {
                println!("# {name}: {e}");
                continue;
            }
        };
        let mut cmd = vpml_run_with(ranks, &["--protocol", "pessimist", "--stats"], &program);
        cmd.extend(args.iter().map(|a| a.to_string()));
        let out = match std::process::Command::new(&cmd[0]).args(&cmd[1..]).output() {
            Ok(o) if o.status.success() => o,
            Ok(o) => {
                println!(
                    "# {name} failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                continue;
            }
            Err(e) => {
                println!("# {name}: {e}");
                continue;
            }
        };
        let stderr = String::from_utf8_lossy(&out.stderr);
        let sum = |key: &str| -> u64 {
            stderr
                .lines()
                .filter(|l| l.starts_with("vpml stats:"))
                .flat_map(|l| l.split_whitespace())
                .filter_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse::<u64>().ok())
                .sum()
        };
        let (received, events) = (sum("messages_received"), sum("events_total"));
        let pct = 100.0 * events as f64 / received.max(1) as f64;
        println!("{name:>12} {ranks:>5} {received:>10} {events:>10} {pct:>7.1}% {paper:>12}");
        rows.push(json!({"program": name, "ranks": ranks, "messages_received": received, "events": events, "percent": pct, "paper": paper}));
    }
    rows
}

/// The number after `prefix` in `text` (e.g. `"detected "` → 5.8 from
/// "detected 5.8 ms").
fn number_after(text: &str, prefix: &str) -> Option<f64> {
    let at = text.find(prefix)? + prefix.len();
    let rest = &text[at..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// heat3d with rank 2 killed halfway through, `rounds` times, against
/// failure-free runs in the same rounds: detection and respawn (launcher),
/// the restarted process's stages (its "caught up" line), restarts per
/// kill, and the job's extra wall time.
fn recovery(rounds: usize) -> Vec<Value> {
    println!(
        "\n## recovery — heat3d, 4 ranks, pessimist, checkpoint every 20 of 200 steps, rank 2 killed halfway"
    );
    let program = match example("heat3d") {
        Ok(p) => p,
        Err(e) => {
            println!("# recovery: {e}");
            return Vec::new();
        }
    };
    let heat = [
        "--size",
        "small",
        "--steps",
        "200",
        "--checkpoint-every",
        "20",
    ];
    let run = |extra: &[&str]| -> Option<(f64, String, String)> {
        let mut launcher = vec!["--protocol", "pessimist"];
        launcher.extend_from_slice(extra);
        let mut cmd = vpml_run_with(4, &launcher, &program);
        cmd.extend(heat.iter().map(|a| a.to_string()));
        let t = std::time::Instant::now();
        let out = std::process::Command::new(&cmd[0])
            .args(&cmd[1..])
            .output()
            .ok()?;
        let took = t.elapsed().as_secs_f64();
        if !out.status.success() {
            println!(
                "# recovery: run failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        Some((
            took,
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    };
    let keys = [
        ("detection_ms", "detected "),
        ("respawn_ms", "spawned in "),
        ("process_start_ms", "process start "),
        ("join_ms", "join "),
        ("checkpoint_and_events_ms", " events "),
        ("connect_and_resend_ms", "connect and re-send "),
        ("reexecution_ms", "re-execution "),
        ("caught_up_ms", "caught up "),
    ];
    let mut values: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for round in 1..=rounds {
        eprintln!("# round {round}/{rounds}: recovery");
        let Some((base, base_out, _)) = run(&[]) else {
            continue;
        };
        let kill = format!("2@{:.3}", base / 2.0);
        let Some((took, out, err)) = run(&["--inject-failure", &kill]) else {
            continue;
        };
        let checksum = |s: &str| {
            s.lines()
                .find(|l| l.starts_with("checksum"))
                .map(str::to_string)
        };
        if checksum(&out) != checksum(&base_out) || checksum(&out).is_none() {
            println!("# recovery: round {round}: checksums differ!");
            continue;
        }
        values.entry("job_failure_free_s").or_default().push(base);
        values.entry("job_with_kill_s").or_default().push(took);
        values.entry("extra_s").or_default().push(took - base);
        values
            .entry("restarted_ranks")
            .or_default()
            .push(err.matches("restarted it as incarnation").count() as f64);
        for (name, prefix) in keys {
            if let Some(v) = err.lines().find_map(|l| number_after(l, prefix)) {
                values.entry(name).or_default().push(v);
            }
        }
    }
    let mut rows = Vec::new();
    for (name, v) in &values {
        let m = median(v.clone());
        println!("{name:>26} {m:>12.3}   (median of {})", v.len());
        rows.push(json!({"part": "recovery", "metric": name, "median": m, "samples": v}));
    }
    rows
}

fn main() {
    let rounds = arg("--rounds").unwrap_or(3).max(1);
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--") && a.parse::<usize>().is_err())
        .collect();
    let selected: Vec<&Part> = PARTS
        .iter()
        .filter(|p| words.is_empty() || words.iter().any(|w| w == "all" || w == p.name))
        .collect();
    let mut samples: Vec<Sample> = Vec::new();
    let mut plans = Vec::new();
    for part in &selected {
        for &ranks in part.ranks {
            match configs(part, ranks) {
                Ok(c) => plans.push((*part, ranks, c)),
                Err(e) => println!("# {}: {e}", part.name),
            }
        }
    }
    for round in 1..=rounds {
        for ((part, ranks, cfgs), repeat) in plans
            .iter()
            .flat_map(|plan| (0..plan.0.repeats).map(move |r| (plan, r)))
        {
            // A run's pairing for the ratios: (round, repeat) numbered
            // from 1.
            let pair = (round - 1) * part.repeats + repeat + 1;
            // Every other time the other way round, so that no
            // configuration always runs right after the same one (a run
            // leaves the machine's memory and caches in a state the next
            // one starts from).
            let mut order: Vec<&Config> = cfgs.iter().collect();
            if pair % 2 == 0 {
                order.reverse();
            }
            for c in order {
                let of = if part.repeats > 1 {
                    format!(" (run {}/{})", repeat + 1, part.repeats)
                } else {
                    String::new()
                };
                eprintln!(
                    "# round {round}/{rounds}{of}: {} on {ranks} ranks, {}",
                    part.name, c.name
                );
                let rows = if part.name == "heat3d" {
                    heat3d_json(c)
                } else {
                    json_lines(c, 600)
                };
                match rows {
                    Ok(rows) => {
                        for v in &rows {
                            for (metric, x, value) in (part.parse)(v) {
                                samples.push(Sample {
                                    part: part.name,
                                    config: c.name.clone(),
                                    ranks: *ranks,
                                    metric,
                                    x,
                                    value,
                                    pair,
                                });
                            }
                        }
                    }
                    Err(e) => println!("# {}: {e}", part.name),
                }
            }
        }
    }
    let table = medians(&samples);
    print_tables(&table, rounds);
    print_protocol_overhead(&samples);
    let mut pattern_rows =
        if words.is_empty() || words.iter().any(|w| w == "all" || w == "patterns") {
            patterns()
        } else {
            Vec::new()
        };
    if words.is_empty() || words.iter().any(|w| w == "all" || w == "recovery") {
        pattern_rows.extend(recovery(rounds));
    }
    let rows: Vec<Value> = table
        .iter()
        .map(|((part, ranks, metric, x), by)| json!({"part": part, "ranks": ranks, "metric": metric, "x": x, "medians": by}))
        .collect();
    write_report(
        "suite.json",
        &json!({"rounds": rounds, "rows": rows, "patterns": pattern_rows}),
    );
    if let Err(e) = plot::all(&table) {
        println!("# plots failed: {e}");
    }
}

/// A row of the results: (part, ranks, metric, x).
type RowKey = (String, usize, String, u64);

/// Row -> config -> median.
type Table = BTreeMap<RowKey, BTreeMap<String, f64>>;

fn medians(samples: &[Sample]) -> Table {
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
fn print_protocol_overhead(samples: &[Sample]) {
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

fn print_tables(table: &Table, rounds: usize) {
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

mod plot {
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
}
