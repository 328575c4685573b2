//! The benchmark suite: vpml side by side with the reference MPIs installed
//! here, ratios measured in the same run, JSON and SVG plots.
//!
//! ```text
//! cargo bench --bench suite                       # everything, 3 rounds
//! cargo bench --bench suite -- pingpong --rounds 5
//! cargo bench --bench suite -- collectives anysource heat3d
//! cargo bench --bench suite -- speed speed-mt speed-ranks speed-tcp speed-busy --rounds 10
//! ```
//!
//! The `speed` parts are the head-to-head with Open MPI through the C
//! library: `benches/c/mpi_bench.c` built by MPICH's `mpicc` runs on
//! vpml's MPI library (`vpml`) and natively under Open MPI and MPICH, every
//! test from 0 B to 4 MiB — on 2 ranks (`speed`), 4 and 8 (`speed-ranks`),
//! over TCP (`speed-tcp`) and beside two busy loops (`speed-busy`) — and
//! the report gives vpml / Open MPI per row as the median of per-pair
//! ratios, with one SVG per part and rank count (`plot::speed_ratios`).
//!
//! The other parts run vpml without a protocol (`vpml`) and with the pessimist
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
//! `nocheckpoint` (what logging costs an unmodified C program that never
//! checkpoints — latency, bandwidth, bi-directional bandwidth, message
//! rate and six collectives, 1 B to 4 MiB — the MPICH-built
//! `benches/c/mpi_bench.c` on vpml's MPI library with and without the
//! protocol, and natively; the ratios against issue 22's targets),
//! `patterns` (events logged per message for the NAS-like patterns,
//! next to seed 002's Table I), and `recovery` (heat3d on 4 ranks with
//! rank 2 killed halfway: the stages of its recovery and the job's extra
//! time), and — only when named, it takes minutes per round — `tradeoff`
//! (`suite/tradeoff.rs`: coordinated checkpointing against message
//! logging on heat3d and the LU and MG patterns, failure-free and with
//! failures at a mean time between failures of 10, 30 and 120 s; its
//! plot is `tradeoff.svg`). Each runs a Rust example under `vpml run` and,
//! where a C program of ours with the same method exists (`benches/c/`),
//! the same measurement under Open MPI and MPICH when their `mpicc`
//! wrappers are installed (`apt-get install -y openmpi-bin libopenmpi-dev
//! mpich libmpich-dev`); what is missing is skipped with a line saying so.
//! The configurations take turns within each round (in the opposite
//! order every other round); tables show medians over rounds and the
//! ratio vpml / reference. Results go to
//! `target/bench-report/suite.json` and plots to `target/bench-report/*.svg`.
//!
//! The suite is split by job: the parts and their configurations
//! (`suite/parts.rs`), the event-count and recovery measurements
//! (`suite/patterns.rs`, `suite/recovery.rs`), the tables
//! (`suite/report.rs`) and the plots (`suite/plot.rs`); this file holds
//! the shared records and the main loop. The modules sit in `suite/` and
//! are named by `#[path]`: next to this file, in `benches/`, Cargo would
//! take each of them for a benchmark of its own.

mod common;
#[path = "suite/parts.rs"]
mod parts;
#[path = "suite/patterns.rs"]
mod patterns;
#[path = "suite/plot.rs"]
mod plot;
#[path = "suite/recovery.rs"]
mod recovery;
#[path = "suite/report.rs"]
mod report;
#[path = "suite/tradeoff.rs"]
mod tradeoff;

use std::collections::BTreeMap;

use common::{Config, arg, json_lines, write_report};
use parts::{PARTS, configs, heat3d_json};
use patterns::patterns;
use recovery::recovery;
use report::{medians, print_nocheckpoint, print_protocol_overhead, print_speed, print_tables};
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
    /// CPU-bound processes that run beside every run of the part (a job
    /// sharing its cores with other work).
    busy: usize,
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
                let competing = common::Busy::start(part.busy);
                let rows = if part.name == "heat3d" {
                    heat3d_json(c)
                } else {
                    json_lines(c, 600)
                };
                drop(competing);
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
    print_nocheckpoint(&samples);
    let speed = report::speed_ratios(&samples);
    print_speed(&speed, &table);
    let mut pattern_rows =
        if words.is_empty() || words.iter().any(|w| w == "all" || w == "patterns") {
            patterns()
        } else {
            Vec::new()
        };
    if words.is_empty() || words.iter().any(|w| w == "all" || w == "recovery") {
        pattern_rows.extend(recovery(rounds));
    }
    // Long (minutes per round): only when named.
    if words.iter().any(|w| w == "tradeoff") {
        pattern_rows.extend(tradeoff::tradeoff(rounds));
    }
    let rows: Vec<Value> = table
        .iter()
        .map(|((part, ranks, metric, x), by)| json!({"part": part, "ranks": ranks, "metric": metric, "x": x, "medians": by}))
        .collect();
    write_report(
        "suite.json",
        &json!({"rounds": rounds, "rows": rows, "patterns": pattern_rows}),
    );
    if let Err(e) = plot::all(&table).and_then(|()| plot::speed_ratios(&speed)) {
        println!("# plots failed: {e}");
    }
}

/// A row of the results: (part, ranks, metric, x).
type RowKey = (String, usize, String, u64);

/// Row -> config -> median.
type Table = BTreeMap<RowKey, BTreeMap<String, f64>>;
