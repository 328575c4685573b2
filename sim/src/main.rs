//! `vpml-sim`: run seeded simulated jobs and report the first that breaks a rule.
//!
//! `vpml-sim --seed S` runs one seed (what a failure report tells you to
//! run); `vpml-sim --seeds N [--from S]` sweeps N seeds; `--minutes M`
//! sweeps until the time is up.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use vpml_sim::{Acknowledge, Options, Protocol};

/// Run simulated vpml jobs from seeds.
#[derive(Parser, Debug)]
#[command(name = "vpml-sim", version)]
struct Cli {
    /// Run this one seed (decimal or 0x-prefixed hex).
    #[arg(long, value_parser = parse_seed, conflicts_with_all = ["seeds", "minutes"])]
    seed: Option<u64>,
    /// Number of seeds to sweep.
    #[arg(long, default_value_t = 1000)]
    seeds: u64,
    /// First seed of the sweep.
    #[arg(long, value_parser = parse_seed, default_value = "1")]
    from: u64,
    /// Sweep until this many minutes have passed (overrides --seeds).
    #[arg(long, value_parser = parse_minutes)]
    minutes: Option<f64>,
    /// Hand-overs before a job counts as stuck (a deadlock).
    #[arg(long, default_value_t = Options::default().max_steps)]
    max_steps: u64,
    /// Ranks per job.
    #[arg(long, default_value_t = 3)]
    ranks: usize,
    /// Rounds per program.
    #[arg(long, default_value_t = 6)]
    rounds: usize,
    /// Crashes per job, at most (0: none).
    #[arg(long, default_value_t = 2)]
    crashes: u32,
    /// Restarts the supervisor allows, as `vpml run --max-restarts`
    /// (default: as many as there are crashes).
    #[arg(long, default_value_t = u32::MAX, hide_default_value = true)]
    max_restarts: u32,
    /// Protocol the ranks run.
    #[arg(long, value_enum, default_value_t = Protocol::Pessimist)]
    protocol: Protocol,
    /// Print the engine's and protocol's log lines (`tracing`, at info
    /// level unless RUST_LOG says otherwise) while running.
    #[arg(long)]
    trace: bool,
    /// Use a broken logger client that acknowledges events before they are
    /// durable (the commit-rule check must catch it).
    #[arg(long)]
    break_commit_rule: bool,
}

fn parse_minutes(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(m) if m.is_finite() && m > 0.0 && m < 1e6 => Ok(m),
        _ => Err(format!("{s:?} is not a number of minutes above 0")),
    }
}

fn parse_seed(s: &str) -> Result<u64, String> {
    let parsed = match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    parsed.map_err(|e| format!("{s:?} is not a seed: {e}"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.trace {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .without_time()
            .init();
    }
    if cli.ranks < 2 {
        eprintln!("vpml-sim: --ranks must be at least 2");
        return ExitCode::from(2);
    }
    let opts = Options {
        ranks: cli.ranks,
        rounds: cli.rounds,
        protocol: cli.protocol,
        max_crashes: cli.crashes,
        max_restarts: cli.max_restarts,
        max_steps: cli.max_steps,
        acknowledge: if cli.break_commit_rule {
            Acknowledge::AtOnce
        } else {
            Acknowledge::WhenDurable
        },
    };
    let started = Instant::now();
    let deadline = cli
        .minutes
        .map(|m| started + Duration::from_secs_f64(m * 60.0));
    let mut seed = cli.seed.unwrap_or(cli.from);
    let mut runs = 0u64;
    loop {
        let outcome = vpml_sim::run(seed, &opts);
        runs += 1;
        if let Some(why) = &outcome.failure {
            println!(
                "seed {seed:#018x} failed after {} steps (crashes: {:?}): {why}",
                outcome.steps, outcome.crashes
            );
            println!("run it again: {}", vpml_sim::replay_command(seed, &opts));
            return ExitCode::FAILURE;
        }
        if cli.seed.is_some() {
            println!(
                "seed {seed:#018x}: {} steps, crashes {:?}, outputs {:x?}",
                outcome.steps, outcome.crashes, outcome.outputs
            );
            return ExitCode::SUCCESS;
        }
        seed = seed.wrapping_add(1);
        let done = match deadline {
            Some(d) => Instant::now() >= d,
            None => runs >= cli.seeds,
        };
        if done {
            break;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{runs} seeds passed in {secs:.1} s ({:.0} per minute)",
        runs as f64 / secs * 60.0
    );
    ExitCode::SUCCESS
}
