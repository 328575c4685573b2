//! # vpml-replay — recordings, the replay debugger and the trace tools
//!
//! Everything vpml offers to look back at a job, in three steps:
//!
//! 1. **Recording** ([`recording`]): `vpml run --record` runs the job with
//!    the pessimist protocol and keeps what it wrote — every rank's sender
//!    log, the event loggers' data — in a directory, with a manifest
//!    ([`recording::Manifest`]) naming the program, its arguments and each
//!    rank's counters. The launcher calls [`recording::prepare`] before the
//!    job and [`recording::finish`] after it.
//! 2. **Replay of one rank** ([`replayer`]): `vpml replay [DIR] --rank R`
//!    starts rank R's program alone with `VPML_PROTOCOL=replay`; in that
//!    process [`build`] (called by `vpml::init`) builds the
//!    [`replayer::Replayer`] protocol, which feeds the rank the recorded
//!    messages and outcomes and stops at the first send or event that
//!    differs. It answers from vprotocol's
//!    [`ReplayLog`](vpml_vprotocol::replay_log::ReplayLog), as the
//!    pessimist protocol does after a restart. `--until N` stops it before
//!    event N for a debugger; `--gdb` runs it under one.
//! 3. **Trace tools** ([`trace`]): `vpml trace ls/info/dump/stats/diff`
//!    read recordings without running anything, and
//!    `vpml check-determinism` records a program twice with different
//!    delivery timing and diffs the two.
//!
//! The `vpml` binary dispatches `replay`, `trace` and `check-determinism`
//! here; each command prints an [`Error`] after its own name and exits
//! with status 1.

mod error;
pub mod recording;
pub mod replayer;
pub mod trace;

pub use error::{Error, ManifestError};

use vpml_pml::JobConfig;
use vpml_pml::protocol::Protocol;

/// Build the `replay` protocol for this process (`VPML_PROTOCOL=replay`,
/// set by `vpml replay` with the recording directory and the job's rank,
/// size and id); `vpml::init` passes it to [`vpml_pml::init_with`].
pub fn build(cfg: &JobConfig) -> vpml_pml::Result<Option<Box<dyn Protocol>>> {
    let (Some(job), Some(replay)) = (&cfg.job, &cfg.replay) else {
        return Err(vpml_pml::Error::Bootstrap(format!(
            "replay needs the environment `vpml replay` sets ({} is not set)",
            vpml_pml::config::var::REPLAY_DIR
        )));
    };
    Ok(Some(Box::new(replayer::Replayer::start(
        job,
        &replay.dir,
        replay.until,
    )?)))
}
