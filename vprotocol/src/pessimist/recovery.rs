//! The restart of a crashed rank, protocol side, and the re-execution
//! that follows it.
//!
//! The whole recovery of one rank, in order, and where each step lives:
//!
//! 1. **The launcher restarts the process** (`launcher/src/supervise.rs`).
//!    `Supervisor::on_exited` sees the rank's process killed by a signal
//!    (or `on_agent_lost`, its host's agent gone); `on_death` decides it
//!    may be restarted (a protocol is on, the rank had joined the job, the
//!    user did not stop it, restarts are left); `restart` bumps the rank's
//!    incarnation and the job's epoch in the job page
//!    (`Backend::announce_restart` → `JobPage::restart`,
//!    `pml/src/recovery.rs`; with hosts, every agent does it on its own
//!    page at `RESTART`), spawns the new process with `VPML_INCARNATION`
//!    set (`Backend::respawn`, on a spare host if the rank's host is lost)
//!    and wakes every rank.
//! 2. **The new process joins the running job** (`vpml::init` →
//!    `vpml_pml::init_with` → `Engine::join`, `pml/src/engine/join.rs`):
//!    it maps the job page and opens the listener that later restarted
//!    processes connect to (`Recovery::start`, `pml/src/engine/restart.rs`),
//!    but skips the start-up fences and sets up no link yet: links come
//!    once the protocol has restored the channel counters (step 4).
//! 3. **The protocol starts over what the previous process left**
//!    (`crate::build` → [`Config::new`] → [`Pessimist::start`],
//!    which connects to the loggers under the new incarnation →
//!    [`Pessimist::start_with`], `start.rs` → [`restart`], in this file).
//!    In order:
//!    * *Host loss* ([`restore_lost_host`]): with checkpoint copies on and
//!      the rank's directory gone, the newest copy of its checkpoint comes
//!      back from the event loggers (`crate::offhost::restore`), with the
//!      sender-log records it keeps as a spill file; without a copy the
//!      rank starts from the beginning.
//!    * *The newest intact checkpoint* ([`load_checkpoint`]): a damaged
//!      newest one falls back to the older kept one
//!      (`CheckpointStore::load_latest`, `crate::checkpoint`); it holds the
//!      id of the last event before it, the engine's snapshot and the
//!      application's bytes (`super::checkpointing::decode_checkpoint`).
//!    * *What the previous process sent after it* ([`read_previous`],
//!      `crate::previous_sends`): envelopes and checksums of the records
//!      its file log holds past the checkpoint, read before the log
//!      forgets them; re-executed sends are checked against them. (Gone
//!      with a lost host or a memory log: those sends go unchecked.)
//!    * *The sender log* ([`restore_log`]): reopened keeping the records
//!      sent before the checkpoint, which peers may still need; later ones
//!      are logged again by the re-execution. A memory log, or a file log
//!      copied back after a lost host, is rebuilt from the checkpoint's
//!      spill file. Without a checkpoint the log starts empty.
//!    * *The logged events* ([`fetch_events`]): every event of this rank
//!      after the checkpoint's last one, from the loggers
//!      (`EventLog::get_events`), into a [`ReplayLog`]. If the loggers
//!      freed some of them (after a checkpoint this process cannot restart
//!      from), replay is impossible and the start fails.
//!
//!    Back in [`Pessimist::start_with`]: the process is *replaying* if any
//!    event names a call; the next checkpoint gets the index after the
//!    loaded one, which becomes the newest kept one (the next checkpoint
//!    frees what precedes it); a restart mark goes to the output.
//! 4. **The engine restores its snapshot and links to the running ranks**
//!    (`Engine::set_protocol`, `pml/src/engine/mod.rs`, then
//!    `after_protocol_installed`, `pml/src/engine/restart.rs`). It takes
//!    the snapshot (`Protocol::take_restored`) and restores the last call
//!    id, the channel counters and the unexpected messages
//!    (`Engine::restore`); then `connect_to_job` connects to every process
//!    started before it, telling each how many of its messages it has
//!    (later ones connect to it; the handshake over TCP is
//!    `pml/src/engine/tcp_rendezvous.rs`, the simulator's
//!    `sim_rendezvous.rs`). Each running rank notices the restart in the
//!    job page (`notice_restarts`), drops its link to the dead process
//!    (`drop_link`), accepts the new one (`accept_restarted`) and, in
//!    `install_link`, re-sends from its sender log
//!    (`Protocol::logged_messages`) every message the restarted process
//!    lacks; the restarted process does the same from its reopened log.
//!    Duplicates are suppressed: a re-executed send the peer already has
//!    (sequence number up to what the peer said it holds) is logged but
//!    not transmitted (`Engine::suppressed`, used by
//!    `pml/src/engine/send.rs`).
//! 5. **Re-execution answers the non-deterministic calls from the events**
//!    (this file's second half). The application resumes from the
//!    checkpoint's bytes (`Comm::restart_state` ← `Protocol::restart_state`)
//!    and its calls get the same call ids as the first time. An ANY_SOURCE
//!    receive is forced to its logged source, or held back for a logged
//!    cancel ([`Pessimist::answer_recv`]); a completion call returns the
//!    logged set (`Engine::completion_call`, `pml/src/engine/completion.rs`,
//!    asks [`Pessimist::answer_completion`] for every call up to the last
//!    logged event, and waits for exactly those requests); probes and
//!    cancels get their logged outcomes ([`Pessimist::answer_probe`],
//!    [`Pessimist::answer_cancel`], asked by `pml/src/engine/recv.rs`); a
//!    test or iprobe without an event inside the logged range answers
//!    "nothing" (it failed the first time). Completion calls, probes and
//!    cancels up to the last logged event are not logged again
//!    ([`Pessimist::replayed`]); a receive forced to its logged source is
//!    not ANY_SOURCE any more, so its match is not reported again. Every
//!    send is checked ([`Pessimist::check_send`]): the send gate stays
//!    closed meanwhile (`Pessimist::update_gate`), so each one reaches
//!    `Protocol::send`. The first send past the last logged event ends
//!    the replay.
//! 6. **Divergence stops the job.** A call that does not fit its event
//!    (`crate::replay_log`), a send that differs from the one the previous
//!    process logged and its destination holds, or, at finalize, an event
//!    never consumed or such a logged send never made again (records a
//!    settled peer does not hold are dropped when this process links to
//!    it, [`Pessimist::peer_holds`](vpml_pml::protocol::Protocol::peer_holds))
//!    ([`Pessimist::check_reexecution_done`]) is an
//!    `Error::Diverged` ([`Pessimist::diverged`]; the engine makes its own
//!    for what only it sees). The engine fails on it (`Engine::hook` →
//!    `Engine::fail`, `pml/src/engine/progress.rs`) and aborts the job
//!    with exit status 70 and one line (`DIVERGED_EXIT_CODE`); the
//!    launcher ends the job with that status (`Supervisor::on_abort`).
//! 7. **Caught up.** Past its last logged event the process logs its
//!    events as on a first start; the send gate reopens once the replay is
//!    over and every send the previous process logged was made again. Once
//!    it is past its last logged event and has re-executed every send its
//!    peers already had, the engine prints how long each stage of the
//!    recovery took (`Engine::check_caught_up`). The running ranks never
//!    rolled back.
//!
//! The simulator (`vpml-sim`) runs the same path over its in-memory
//! loggers ([`Pessimist::start_with`]).

use std::path::Path;

use vpml_fault_points::fault_point;
use vpml_pml::matching::RecvSpec;
use vpml_pml::protocol::{CallId, OutgoingMessage, RecvPlan, Replay};
use vpml_pml::recovery::EngineSnapshot;
use vpml_pml::{Error, Result};
use vpml_sender_log::SenderLog;

use super::checkpointing::{decode_checkpoint, spill_path};
use super::start::{Start, bounded, new_sender_log};
use super::{Config, Pessimist, fail};
use crate::checkpoint::CheckpointStore;
use crate::event_log::EventLog;
use crate::previous_sends::PreviousSends;
use crate::replay_log::ReplayLog;

/// The checkpoint a restarted process resumes from.
pub(super) struct Resumed {
    /// Its index in the store.
    pub(super) index: u64,
    /// Id of the last event logged before it.
    pub(super) event_id: u64,
    /// The engine's state then.
    pub(super) snap: EngineSnapshot,
    /// The application's bytes.
    pub(super) app: Vec<u8>,
}

/// Everything a restarted process (incarnation > 0) takes over from its
/// previous one, step by step (see the module's documentation).
pub(super) fn restart(cfg: &Config, client: &dyn EventLog, ckpt_dir: &Path) -> Result<Start> {
    if cfg.copies && !cfg.log_dir.exists() {
        restore_lost_host(cfg, client)?;
    }
    let store =
        CheckpointStore::open(ckpt_dir).map_err(|e| fail("opening the checkpoint directory", e))?;
    let loaded = load_checkpoint(cfg, &store)?;
    // The log of the checkpoint comes from its spill file: always for
    // a memory log; for a file log, when the checkpoint was copied back
    // from the loggers after its host was lost (until the records are
    // in the new log, the spill stays: a restart meanwhile reads it
    // again).
    let from_spill = loaded
        .as_ref()
        .is_some_and(|c| cfg.log_in_memory || spill_path(ckpt_dir, c.index).exists());
    let previous = read_previous(cfg, loaded.as_ref(), from_spill)?;
    let log = restore_log(cfg, ckpt_dir, loaded.as_ref(), from_spill)?;
    let replay = fetch_events(cfg, client, loaded.as_ref())?;
    Ok(Start {
        store,
        loaded,
        previous,
        log,
        replay,
    })
}

/// Restarted, and this rank's files are gone with the host that held
/// them: start from the copy on the loggers.
fn restore_lost_host(cfg: &Config, client: &dyn EventLog) -> Result<()> {
    let copied = crate::offhost::restore(client, cfg.rank as u32, &cfg.log_dir, spill_path)?;
    if cfg.notices {
        eprintln!(
            "vpml: rank {}: {} is gone (its host was lost): restarting from {}",
            cfg.rank,
            cfg.log_dir.display(),
            match copied {
                Some(i) => format!("the copy of checkpoint {i} on the event loggers"),
                None => "the beginning (no checkpoint was copied)".to_string(),
            }
        );
    }
    Ok(())
}

/// The newest intact checkpoint, if any.
fn load_checkpoint(cfg: &Config, store: &CheckpointStore) -> Result<Option<Resumed>> {
    let Some(l) = store
        .load_latest()
        .map_err(|e| fail("reading the checkpoints", e))?
    else {
        return Ok(None);
    };
    let (event_id, snap, app) =
        decode_checkpoint(&l.payload).map_err(|e| fail(&format!("checkpoint {}", l.index), e))?;
    tracing::info!(
        rank = cfg.rank,
        checkpoint = l.index,
        fell_back = l.skipped.is_some(),
        "restarting from a checkpoint"
    );
    if let Some(why) = &l.skipped
        && cfg.notices
    {
        eprintln!(
            "vpml: rank {}: falling back to checkpoint {}: {why}",
            cfg.rank, l.index
        );
    }
    let loaded = Resumed {
        index: l.index,
        event_id,
        snap,
        app,
    };
    fault_point!("recovery.loaded_checkpoint");
    Ok(Some(loaded))
}

/// Before the log forgets them: what the previous process sent after its
/// checkpoint, to check the re-execution against. (Gone with a lost host:
/// re-executed sends go unchecked then.)
fn read_previous(
    cfg: &Config,
    loaded: Option<&Resumed>,
    from_spill: bool,
) -> Result<PreviousSends> {
    if from_spill || cfg.log_in_memory {
        return Ok(PreviousSends::default());
    }
    let after = |d: u32, ctx: u32| {
        loaded.map_or(0, |c| {
            c.snap
                .send_seq
                .get(d as usize)
                .map_or(0, |counts| counts.get(ctx))
        })
    };
    PreviousSends::read(&cfg.log_dir, after)
        .map_err(|e| fail("reading the previous process's sender log", e))
}

/// The sender log, keeping the records sent before the checkpoint (a new
/// one without a checkpoint).
fn restore_log(
    cfg: &Config,
    ckpt_dir: &Path,
    loaded: Option<&Resumed>,
    from_spill: bool,
) -> Result<SenderLog> {
    let Some(c) = loaded else {
        return new_sender_log(cfg);
    };
    let rank = cfg.rank as u32;
    let keep = |d: u32, ctx: u32| {
        c.snap
            .send_seq
            .get(d as usize)
            .map_or(0, |counts| counts.get(ctx))
    };
    let spill = spill_path(ckpt_dir, c.index);
    let log = if from_spill && cfg.log_in_memory {
        SenderLog::restore(&spill, None, rank, cfg.segment_size, keep)
            .map_err(|e| fail("restoring the sender log of the checkpoint", e))?
    } else if from_spill {
        // Copied back after a lost host: the spill becomes the
        // file log's first segment, kept like any other (peers
        // may need its records after later checkpoints too).
        SenderLog::adopt_saved(&spill, &cfg.log_dir)
            .map_err(|e| fail("restoring the sender log of the checkpoint", e))?;
        let log = SenderLog::reopen(&cfg.log_dir, rank, cfg.segment_size, keep)
            .map_err(|e| fail("reopening the sender log", e))?;
        std::fs::remove_file(&spill)
            .map_err(|e| fail(&format!("removing {}", spill.display()), e))?;
        log
    } else {
        SenderLog::reopen(&cfg.log_dir, rank, cfg.segment_size, keep)
            .map_err(|e| fail("reopening the sender log", e))?
    };
    bounded(log, cfg)
}

/// The events logged after the checkpoint (all of them without one), to
/// replay.
fn fetch_events(
    cfg: &Config,
    client: &dyn EventLog,
    loaded: Option<&Resumed>,
) -> Result<ReplayLog> {
    let (from, after) = loaded.map_or((1, &[][..]), |c| (c.event_id + 1, &c.snap.last_calls[..]));
    let events = client
        .get_events(from)
        .map_err(|e| fail("fetching the logged events", e))?;
    // The loggers numbered events up to `last_id`: from `from` on,
    // every one of them must still be there.
    let first = events.first().map_or(client.last_id() + 1, |&(id, _)| id);
    if first != from && client.last_id() >= from {
        // Freed after a checkpoint this process cannot restart from.
        return Err(fail(
            "fetching the logged events",
            format!(
                "the loggers no longer hold events {from}..{}: replay from {} is impossible",
                first - 1,
                if from == 1 {
                    "the beginning".to_string()
                } else {
                    format!("event {from}")
                }
            ),
        ));
    }
    let replay = ReplayLog::new(events, after);
    fault_point!("recovery.fetched_events");
    tracing::info!(
        rank = cfg.rank,
        events = replay.len(),
        lanes = replay.ends().len(),
        "replaying logged events"
    );
    Ok(replay)
}

/// Re-execution: the answers of the logged events, and the checks that
/// make a divergence loud.
impl Pessimist {
    /// Calls up to the last logged event are replayed, not logged again.
    pub(super) fn replayed(&self, call: CallId) -> bool {
        self.replay.covers(call)
    }

    /// The one-line error of a re-execution that left the logged one.
    pub(super) fn diverged(&self, what: impl std::fmt::Display) -> Error {
        Error::diverged(self.rank, self.incarnation, what)
    }

    /// A re-executed send: no event may be logged at its call, and it must
    /// equal the previous process's record of it.
    pub(super) fn check_send(&mut self, msg: &OutgoingMessage<'_>) -> Result<()> {
        if self.replaying {
            let now = crate::replay_log::describe_send(msg);
            if let Err(d) = self.replay.plain(msg.call, &now) {
                return Err(self.diverged(d));
            }
            self.replaying = !self.replay.done();
        }
        if let Err(what) = self.previous.check(msg) {
            return Err(self.diverged(what));
        }
        Ok(())
    }

    /// A receive posted at `call` (`Protocol::post_recv`): while replaying,
    /// an ANY_SOURCE one takes its logged source, and one a logged cancel
    /// withdrew is held back.
    pub(super) fn answer_recv(&mut self, call: CallId, spec: &mut RecvSpec) -> Result<RecvPlan> {
        if !self.replaying {
            return Ok(RecvPlan::Post);
        }
        fault_point!("recovery.replaying");
        let answer = match self.replay.post_recv(call, spec.source) {
            Ok(a) => a,
            Err(d) => return Err(self.diverged(d)),
        };
        if let Some(source) = answer.source {
            // Channel order then picks the same message as the first time.
            spec.source = Some(source);
        }
        Ok(if answer.cancelled_later {
            RecvPlan::HoldForCancel
        } else {
            RecvPlan::Post
        })
    }

    /// The logged answer of completion call `call` over the requests of
    /// the calls `passed` (`Protocol::replay_completion`).
    pub(super) fn answer_completion(
        &mut self,
        call: CallId,
        passed: &[CallId],
    ) -> Result<Replay<Vec<CallId>>> {
        if !self.replaying {
            return Ok(Replay::Free);
        }
        fault_point!("recovery.replaying");
        self.replay
            .completion(call, passed)
            .map_err(|d| self.diverged(d))
    }

    /// The logged answer of probe `call` (`Protocol::replay_probe`).
    pub(super) fn answer_probe(
        &mut self,
        call: CallId,
        spec: &RecvSpec,
        blocking: bool,
    ) -> Result<Replay<Option<(usize, i32)>>> {
        if !self.replaying {
            return Ok(Replay::Free);
        }
        fault_point!("recovery.replaying");
        self.replay
            .probe(call, spec.source, spec.tag, blocking)
            .map_err(|d| self.diverged(d))
    }

    /// The logged outcome of cancel `call` of the receive created by call
    /// `request` (`Protocol::replay_cancel`).
    pub(super) fn answer_cancel(&mut self, call: CallId, request: CallId) -> Result<Replay<bool>> {
        if !self.replaying {
            return Ok(Replay::Free);
        }
        fault_point!("recovery.replaying");
        self.replay
            .cancel(call, request)
            .map_err(|d| self.diverged(d))
    }

    /// At finalize: every logged event was consumed, and every send the
    /// previous process logged was made again.
    pub(super) fn check_reexecution_done(&self) -> Result<()> {
        if self.replaying
            && let Err(d) = self.replay.finish()
        {
            return Err(self.diverged(d));
        }
        if let Some(unmet) = self.previous.first_unmet() {
            // By the commit rule a correct re-execution makes every send
            // the previous process logged but those forgotten (no settled
            // peer held them).
            return Err(self.diverged(format!(
                "the previous process sent {unmet}, which re-execution never sent"
            )));
        }
        Ok(())
    }
}
