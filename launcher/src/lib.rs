//! # vpml-launcher — `vpml run`
//!
//! Starts the N rank processes of a job on this host and watches them:
//!
//! 1. creates one shared-memory mailbox (memfd) per rank, which every rank
//!    inherits — nothing is created under `/dev/shm` for them, so nothing
//!    can be left behind, however the job ends (the C library's shared
//!    windows do make files there: the launcher and its agents remove what
//!    killed ranks left when the job ends, unless they are killed too);
//! 2. serves the bootstrap key/value exchange ([`vpml_pml::bootstrap`]) on
//!    loopback, guarded by a random job token;
//! 3. spawns the ranks with `PR_SET_PDEATHSIG`, so a killed launcher takes
//!    its ranks along, and optionally binds each to a core;
//! 4. forwards their output line by line (`--tag-output` prefixes the rank);
//! 5. ends the job at the first failure (non-zero exit, signal, or exit
//!    without finalize), on `abort`, on Ctrl-C/SIGTERM (forwarded to the
//!    ranks) or at `--timeout`, and exits with the first failure's status —
//!    except that with a fault-tolerance protocol a rank killed by a signal
//!    is restarted alone as its next incarnation (up to `--max-restarts`),
//!    announced to the others on the job page ([`vpml_pml::recovery`]);
//! 6. injects failures on request (`--inject-failure`), for testing.
//!
//! ## Modules
//!
//! * `cli` — the options of `vpml run` ([`RunArgs`]);
//! * `error` — [`Error`], what the commands report when they fail;
//! * `job` — checking the options, starting a job and cleaning up after it;
//! * `backend` — where ranks run (children here, or of host agents);
//! * `supervise` — the loop that watches, restarts and stops the ranks, and
//!   `event`, what it hears from the other threads;
//! * `output` — forwarding the ranks' output;
//! * `process` — rank and logger processes: set-up before exec, exit
//!   watching, reaping;
//! * `mpi_abi` — running MPI C programs on vpml's MPI library;
//! * `ids` — random job ids and tokens;
//! * `inject` — `--inject-failure`;
//! * `protocol` — the fault-tolerance protocol's set-up (event loggers);
//! * `kv` — the bootstrap key/value service;
//! * [`agent`] — `vpml agent` and the launcher's side of multi-host jobs;
//! * [`mpicc`] — `vpml mpicc`.
//!
//! Recordings (`--record`) are written through `vpml-replay`, which also
//! holds `vpml replay`, `vpml trace` and `vpml check-determinism`;
//! [`mpi_abi_setup`] is how `vpml replay` runs an MPI C program on vpml's
//! MPI library, as `vpml run` does.

pub mod agent;
mod backend;
mod cli;
pub mod control;
mod error;
mod event;
mod ids;
mod inject;
mod job;
mod kv;
mod mpi_abi;
pub mod mpicc;
mod output;
mod process;
mod protocol;
pub mod supervise;

/// Longest time, in seconds, a command line may ask vpml run to wait
/// (about 136 years: any instant that far ahead is representable).
pub const MAX_SECONDS: u64 = 1 << 32;

/// `secs` seconds, if it is a time vpml run can wait (finite, not
/// negative, at most [`MAX_SECONDS`]).
pub(crate) fn seconds(secs: f64) -> Option<std::time::Duration> {
    std::time::Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| d.as_secs() <= MAX_SECONDS)
}

pub use cli::{BindPolicy, RunArgs, SenderLogKind, Transport};
/// The parsers of untrusted input, for the fuzz targets (`fuzz/`).
#[cfg(fuzzing)]
pub mod fuzzing {
    pub use crate::inject::fuzzing::inject_specs;
    pub use crate::kv::fuzzing::kv_line;
}
pub use error::Error;
pub use inject::SpecError;
pub use job::run;
pub use mpi_abi::{mpi_abi_setup, mpi_library};
pub use protocol::LoggerStartError;
pub use supervise::{Policy, SupervisedJob, Supervisor, TIMEOUT_EXIT};
