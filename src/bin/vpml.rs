//! The `vpml` command: `vpml run` and friends.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// vpml: MPI-style message passing for Rust that survives crashes.
#[derive(Parser)]
#[command(name = "vpml", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program as a job of N ranks (on this host, or on several
    /// with --hosts/--hostfile).
    Run(Box<vpml_launcher::RunArgs>),
    /// Run an event logger: stable storage for the pessimist protocol's
    /// events. Prints its address on stdout, serves until SIGTERM/SIGINT.
    EventLogger(vpml_event_logger::cli::EventLoggerArgs),
    /// Re-run one rank of a recording (`vpml run --record`) alone: its
    /// receptions come from the recorded logs, its sends are checked
    /// against the recorded ones, and the first divergence is reported.
    Replay(vpml_replay::recording::ReplayArgs),
    /// Ask a running job (`--protocol coordinated`) for a global
    /// checkpoint and wait until it is complete.
    Checkpoint(vpml_launcher::control::CheckpointArgs),
    /// Look into recordings: ls, info, dump, stats, diff.
    Trace(vpml_replay::trace::TraceArgs),
    /// Record a program twice with different delivery timing (--chaos)
    /// and report the first send that differs.
    CheckDeterminism(vpml_replay::trace::CheckArgs),
    /// Compile and link an MPI C program for vpml (vpml's mpi.h and MPI
    /// library; the C compiler is $VPML_CC or cc): `vpml mpicc -O2 prog.c -o prog`.
    Mpicc(vpml_launcher::mpicc::MpiccArgs),
    /// A host's agent in a multi-host job (started by `vpml run`; reads
    /// the job token from standard input).
    #[command(hide = true)]
    Agent(vpml_launcher::agent::AgentArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("VPML_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colours on a terminal only: not as escape codes in a log file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => vpml_launcher::run(*args),
        Command::EventLogger(args) => vpml_event_logger::cli::run(args),
        Command::Agent(args) => vpml_launcher::agent::agent_main(args),
        Command::Checkpoint(args) => vpml_launcher::control::checkpoint_main(args),
        // An MPI C program replays on vpml's MPI library, which the
        // launcher finds and links as for `vpml run`.
        Command::Replay(args) => vpml_replay::recording::replay_main(args, |cmd, program, name| {
            Ok(vpml_launcher::mpi_abi_setup(cmd, program, name)?)
        }),
        Command::Trace(args) => vpml_replay::trace::trace_main(args),
        Command::CheckDeterminism(args) => vpml_replay::trace::check_main(args),
        Command::Mpicc(args) => vpml_launcher::mpicc::mpicc_main(args),
    }
}
