//! The pessimist protocol (seed 002, made complete): failure-free path.
//!
//! * **Events.** Only non-deterministic outcomes become events, each named
//!   by the call id of the call it belongs to (never by a request slot):
//!   `Match` when a receive posted with ANY_SOURCE matches; `Delivery` with
//!   the completed request ids for `test`, `test_any`, `test_some`,
//!   `test_all`, `wait_any`, `wait_some` (unless every completed request is
//!   a send that completed when it started — that answer is determined);
//!   `Probe` for every `iprobe` and for `probe` with ANY_SOURCE; `Cancel`
//!   for `cancel` of a receive. Consecutive unsuccessful tests and iprobes
//!   are one lazy `NoneRun`: dropped if a later call of the run succeeds
//!   before anything was flushed, otherwise logged before the next send.
//! * **Commit rule.** Events are batched and pipelined to the loggers by
//!   the client; before an application message leaves, every event created
//!   before it must be durable. A send with no event pending pays nothing:
//!   while none is pending and the log has room ready, the protocol's
//!   [`Protocol::send_gate`] tells the engine that small sends need no
//!   [`Protocol::send`] call at all (an event closes it at once).
//! * **Sender-based log.** Every payload is copied into the rank's
//!   memory-mapped sender log, and a send completes only once it is there.
//!   [`Protocol::send`] reserves the room (so the copy cannot fail later);
//!   [`Protocol::keep`] copies. The engine overlaps the copy with the
//!   transfer where it can: a small message is copied right after it is
//!   written to the receiver's ring, and a large one on shared memory while
//!   the receiver reads it out of the caller's buffer (single copy), so
//!   logging adds one copy that runs beside the transfer's. Otherwise
//!   (fragments, TCP) the transport sends from the log.
//! * **Checkpoints and garbage collection.** [`Protocol::checkpoint`]
//!   stores the engine's state, the id of the last event and the
//!   application's bytes in the rank's [`CheckpointStore`] (last two
//!   kept). Then everything older than the *older* kept checkpoint is
//!   freed: the loggers truncate this rank's events up to that
//!   checkpoint's last event, and every sender frees its log records to
//!   this rank up to the number it had received then.
//! * **Restart.** A restarted process (incarnation > 0) loads its newest
//!   intact checkpoint, reopens its sender log keeping the records sent
//!   before that checkpoint (peers may still need them — the log files
//!   outlive the process), and fetches its events logged after it. While
//!   re-executing up to the last logged event it answers from them:
//!   ANY_SOURCE receives are forced to the logged source, completion calls
//!   return the logged sets, probes the logged answers, and calls without
//!   an event "nothing" (they failed the first time). Nothing is logged
//!   again during that replay.
//! * **Divergence is never silent.** While it re-executes, a restarted
//!   process checks every logged outcome as its call consumes it
//!   ([`crate::replay_log`]) and every send against the record its previous
//!   process logged for the same destination and sequence number
//!   (`previous_sends.rs`); the first difference stops the job with
//!   [`Error::Diverged`]. None of this runs on a first start.
//!
//! Where each part lives, in this module's files:
//!
//! * `mod.rs` (here): [`Pessimist`], its failure-free path (`put`;
//!   `failed_call` and `drop_none_run` for the lazy `NoneRun`; `commit`,
//!   the commit rule; `update_gate`, the send gate) and `impl Protocol for
//!   Pessimist`, whose methods call into the files below;
//! * `config.rs`: [`Config`], read from the environment by
//!   [`Config::new`];
//! * `start.rs`: [`Pessimist::start`], a first start or a restart;
//! * `recovery.rs`: the restart of a crashed rank and the answers its
//!   re-execution gets from the logged events. Its documentation walks
//!   through the whole recovery of one rank, top to bottom, the
//!   launcher's and the engine's sides included;
//! * `checkpointing.rs`: taking a checkpoint, and the garbage collection
//!   it allows.
//!
//! The building blocks are modules of this crate: the checkpoint files
//! ([`crate::checkpoint`]), the logged events a re-execution answers from
//! ([`crate::replay_log`]), the previous process's sends
//! (`previous_sends.rs`), the off-host copies of checkpoints
//! (`offhost.rs`) and the event loggers as a trait ([`crate::event_log`]).

use std::collections::BTreeMap;
use std::time::Instant;

use vpml_event_logger::Event;

use crate::event_log::EventLog;
use vpml_fault_points::fault_point;
use vpml_pml::lanes::LaneMap;
use vpml_pml::matching::RecvSpec;
use vpml_pml::protocol::{
    CallId, CommChange, CompletionKind, KeptBytes, LoggedMessage, OutgoingMessage, PersistentInit,
    Protocol, RecvPlan, Replay, RequestInfo, SendGate, SendPlan, WaitKind,
};
use vpml_pml::recovery::EngineSnapshot;
use vpml_pml::{Error, Result, Status};
use vpml_sender_log::{RecordHeader, SenderLog};

use crate::checkpoint::CheckpointStore;
use crate::histogram::Histogram;
use crate::previous_sends::PreviousSends;
use crate::replay_log::ReplayLog;

mod checkpointing;
mod config;
/// The checkpoint payload decoder, for the fuzz targets (`fuzz/`).
#[cfg(fuzzing)]
pub mod fuzzing {
    /// Decode `bytes` as a checkpoint's payload: a state or an error,
    /// never a panic.
    pub fn checkpoint_payload(bytes: &[u8]) {
        let _ = super::checkpointing::decode_checkpoint(bytes);
    }
}
mod recovery;
mod start;

use checkpointing::SavedCheckpoint;
pub use config::Config;

/// Counters for `--stats`.
#[derive(Default, Debug, Clone)]
struct Counters {
    matches: u64,
    probes: u64,
    deliveries: u64,
    none_runs: u64,
    none_runs_dropped: u64,
    cancels: u64,
    sends: u64,
    sends_waited: u64,
    /// Time each waiting send spent waiting for durability.
    waits: Histogram,
    /// Time spent handing events to the logger client, in ns.
    put_ns: u64,
    checkpoints: u64,
    checkpoint_ns: u64,
    events_replayed: u64,
    records_freed: u64,
}

/// The pessimist protocol of one rank.
pub struct Pessimist {
    client: Box<dyn EventLog>,
    log: SenderLog,
    /// Runs of unsuccessful tests/iprobes not yet logged, by lane: the
    /// numbers of their first and last calls.
    none_runs: BTreeMap<u32, (u64, u64)>,
    /// Highest event id known durable.
    durable: u64,
    /// Id of the last event handed to the client.
    last_put: u64,
    /// The engine's shortcut past [`Protocol::send`]: sends of fewer
    /// payload bytes need nothing from it (see [`Pessimist::update_gate`]).
    gate: SendGate,
    counters: Counters,
    store: CheckpointStore,
    /// Index the next checkpoint gets.
    next_checkpoint: u64,
    /// The newest checkpoint (the older kept one once the next is saved).
    newest: Option<SavedCheckpoint>,
    /// The engine state to restore, until the engine takes it.
    restored: Option<EngineSnapshot>,
    /// The application's state of the checkpoint restarted from.
    app_state: Option<Vec<u8>>,
    /// Logged events to replay (restarted process).
    replay: ReplayLog,
    /// Re-executing: some lane has logged events ahead (checked again at
    /// each send).
    replaying: bool,
    /// What the previous process sent after the checkpoint: re-executed
    /// sends are checked against it.
    previous: PreviousSends,
    rank: usize,
    incarnation: u32,
    log_in_memory: bool,
    keep_logs: bool,
    /// Copy checkpoints to the loggers ([`Config::copies`]).
    copies: bool,
}

fn fail(what: &str, e: impl std::fmt::Display) -> Error {
    Error::EngineFailed(format!("pessimist protocol: {what}: {e}"))
}

/// The error of a send the sender log has no room for.
fn log_full(dest: usize, e: vpml_sender_log::Error) -> Error {
    match e {
        // One line naming the limit and the directory.
        e @ vpml_sender_log::Error::Full { .. } => {
            Error::EngineFailed(format!("{e} (the limit is --sender-log-limit)"))
        }
        e => fail(
            &format!("making room in the sender log for a send to rank {dest}"),
            e,
        ),
    }
}

impl Pessimist {
    /// Open the engine's shortcut past `send` for the room the log has
    /// ready, if no event waits to become durable (the commit rule has
    /// nothing to wait for); closed otherwise.
    fn update_gate(&self) {
        let nothing_pending = self.none_runs.is_empty()
            && self.last_put <= self.durable
            && !self.replaying
            && self.previous.is_done();
        if nothing_pending {
            self.gate.open_below(self.log.ready_below());
        } else {
            self.gate.close();
        }
    }

    fn put(&mut self, event: Event) -> Result<()> {
        // The next send must wait for this event.
        self.gate.close();
        // No logged event may follow an unlogged failed test of another
        // lane: a re-execution answers "none" to a lane's calls without an
        // event only up to the lane's last event, so the runs of other
        // lanes pending now go first (a single thread moving between
        // communicators would otherwise see a test that failed before
        // this event succeed when re-executed). The event's own lane
        // needs none: a delivery or probe drops its run (the event covers
        // it), a match names a receive posted before the run, and a
        // cancel's call comes after it, extending the lane's logged range
        // over it.
        let lane = match &event {
            Event::Match { recv: call, .. }
            | Event::Probe { call, .. }
            | Event::Delivery { call, .. }
            | Event::Cancel { call, .. } => Some(call.lane),
            Event::NoneRun { .. } => None,
        };
        if let Some(lane) = lane {
            let others: Vec<(u32, (u64, u64))> = self
                .none_runs
                .iter()
                .filter(|(l, _)| **l != lane)
                .map(|(l, r)| (*l, *r))
                .collect();
            for (l, (first, last)) in others {
                self.none_runs.remove(&l);
                self.put(Event::NoneRun {
                    lane: l,
                    first,
                    last,
                })?;
            }
        }
        match &event {
            Event::Match { .. } => self.counters.matches += 1,
            Event::Probe { .. } => self.counters.probes += 1,
            Event::Delivery { .. } => self.counters.deliveries += 1,
            Event::NoneRun { .. } => self.counters.none_runs += 1,
            Event::Cancel { .. } => self.counters.cancels += 1,
        }
        let t = Instant::now();
        self.last_put = self
            .client
            .put(&event)
            .map_err(|e| fail("logging an event", e))?;
        fault_point!("event.after_put");
        self.counters.put_ns += t.elapsed().as_nanos() as u64;
        Ok(())
    }

    /// A successful non-deterministic call: an unflushed run of failures
    /// before it in its lane needs no event any more (replay answers
    /// "none" to calls without an event while a later event of the lane
    /// exists).
    fn drop_none_run(&mut self, lane: u32) {
        if self.none_runs.remove(&lane).is_some() {
            self.counters.none_runs_dropped += 1;
        }
    }

    fn failed_call(&mut self, call: CallId) {
        // The next send must log the run first.
        self.gate.close();
        self.none_runs
            .entry(call.lane)
            .and_modify(|(_, last)| *last = call.n)
            .or_insert((call.n, call.n));
    }

    /// The commit rule: everything created so far is durable before a
    /// message leaves.
    fn commit(&mut self) -> Result<()> {
        for (lane, (first, last)) in std::mem::take(&mut self.none_runs) {
            self.put(Event::NoneRun { lane, first, last })?;
        }
        // The id of the last event we put, known without asking the client
        // (whose state sits behind a lock): a send with nothing pending
        // costs one comparison.
        let last = self.last_put;
        if last <= self.durable {
            return Ok(());
        }
        let t0 = Instant::now();
        fault_point!("send.before_events_durable");
        self.client
            .wait_all_durable()
            .map_err(|e| fail("waiting for the event loggers", e))?;
        fault_point!("send.after_events_durable");
        self.durable = last;
        self.counters.sends_waited += 1;
        self.counters.waits.record(t0.elapsed().as_nanos() as u64);
        Ok(())
    }
}

/// How much of the sender log ahead of the last record [`Protocol::idle`]
/// brings into the cache while the log is still taking memory: a few
/// small records' worth.
const WARM_AHEAD: usize = 4096;

impl Protocol for Pessimist {
    fn name(&self) -> &'static str {
        "pessimist"
    }
    fn takes_checkpoints(&self) -> bool {
        true
    }

    fn send(&mut self, msg: &OutgoingMessage<'_>) -> Result<()> {
        if self.replaying || !self.previous.is_done() {
            self.check_send(msg)?;
        }
        self.commit()?;
        self.log
            .reserve(msg.payload.len())
            .map_err(|e| log_full(msg.dest, e))?;
        Ok(())
    }

    fn send_gate(&self) -> Option<SendGate> {
        Some(self.gate.clone())
    }

    fn keep(&mut self, msg: &OutgoingMessage<'_>) -> Result<SendPlan> {
        let header = RecordHeader {
            dest: msg.dest as u32,
            context: msg.context,
            tag: msg.tag,
            seq: msg.seq,
        };
        self.counters.sends += 1;
        fault_point!("send.before_log_append");
        let (at, stored) = self
            .log
            .append_stored(header, msg.payload)
            .map_err(|e| fail("appending to the sender log", e))?;
        fault_point!("send.after_log_append");
        let plan = if msg.from_copy {
            // SAFETY: as for `logged_messages`: the record stays until the
            // receiver checkpointed past it, and its memory takes no other
            // record while the loan lives.
            let kept = unsafe { KeptBytes::new(stored) };
            SendPlan::Logged(match self.log.lend(at.segment) {
                Some(loan) => kept.with_loan(loan),
                None => kept,
            })
        } else {
            SendPlan::Transmit
        };
        // The record used room: what is left decides the next shortcut.
        self.update_gate();
        Ok(plan)
    }

    fn idle(&mut self) {
        // Memory for the next records, taken (and cached) now rather than
        // by the next send; nothing to do once the log reuses its segments.
        self.log.warm_up(WARM_AHEAD);
        self.update_gate();
    }

    fn post_recv(&mut self, call: CallId, spec: &mut RecvSpec) -> Result<RecvPlan> {
        // Only a restarted process has anything to say (`recovery.rs`).
        self.answer_recv(call, spec)
    }

    fn matched(&mut self, recv: CallId, source: usize) -> Result<()> {
        fault_point!("recv.after_match");
        // (A receive forced to its logged source is not ANY_SOURCE any
        // more: the engine does not report its match.)
        self.put(Event::Match {
            recv,
            source: source as u32,
        })
    }

    fn completion(
        &mut self,
        call: CallId,
        _kind: CompletionKind,
        requests: &[Option<RequestInfo>],
        done: &[usize],
    ) -> Result<()> {
        if self.replayed(call) {
            return Ok(());
        }
        if done.is_empty() {
            self.failed_call(call);
            return Ok(());
        }
        let infos: Vec<RequestInfo> = done
            .iter()
            .filter_map(|&i| requests.get(i).copied().flatten())
            .collect();
        if requests
            .iter()
            .flatten()
            .all(|r| r.is_send && r.completed_at_start)
        {
            // Determined: every request passed is a send that completed
            // when it started, so any replay gives the same answer.
            return Ok(());
        }
        self.drop_none_run(call.lane);
        self.put(Event::Delivery {
            call,
            completed: infos.iter().map(|r| r.call).collect(),
        })
    }

    fn hears_waits(&self) -> bool {
        // `waited` has nothing to do.
        false
    }

    fn waited(&mut self, _kind: WaitKind, _requests: &[Option<RequestInfo>]) -> Result<()> {
        // Determined: every request passed completes, whatever the timing
        // (a re-execution waits for the same ones).
        Ok(())
    }

    fn communicator(&mut self, _change: &CommChange<'_>) -> Result<()> {
        // Context ids are agreed by deterministic collectives, and the
        // next free one is in the engine's checkpoint state: a
        // re-execution makes the same communicators.
        Ok(())
    }

    fn persistent(&mut self, _init: &PersistentInit) -> Result<()> {
        // Each start is a send or a receive, logged as any other.
        Ok(())
    }

    fn probe(
        &mut self,
        call: CallId,
        any_source: bool,
        blocking: bool,
        found: Option<&Status>,
    ) -> Result<()> {
        if self.replayed(call) {
            return Ok(());
        }
        match found {
            None => {
                self.failed_call(call);
                Ok(())
            }
            Some(_) if blocking && !any_source => Ok(()),
            Some(st) => {
                self.drop_none_run(call.lane);
                self.put(Event::Probe {
                    call,
                    found: true,
                    source: st.source() as u32,
                    tag: st.tag(),
                    length: st.len() as u64,
                })
            }
        }
    }

    fn cancel(&mut self, call: CallId, request: CallId, cancelled: bool) -> Result<()> {
        if self.replayed(call) {
            return Ok(());
        }
        self.put(Event::Cancel {
            call,
            request,
            cancelled,
        })
    }

    fn finalize(&mut self) -> Result<()> {
        self.check_reexecution_done()?;
        // Trailing runs of failed tests precede no send: nobody depends on them.
        self.none_runs.clear();
        self.client
            .wait_all_durable()
            .map_err(|e| fail("making the last events durable", e))?;
        Ok(())
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let c = &self.counters;
        vec![
            ("events_match".into(), c.matches),
            ("events_probe".into(), c.probes),
            ("events_delivery".into(), c.deliveries),
            ("events_none_run".into(), c.none_runs),
            ("none_runs_dropped".into(), c.none_runs_dropped),
            ("events_cancel".into(), c.cancels),
            (
                "events_total".into(),
                c.matches + c.probes + c.deliveries + c.none_runs + c.cancels,
            ),
            ("logged_sends".into(), c.sends),
            ("sends_waiting_for_loggers".into(), c.sends_waited),
            ("logger_wait_p50_ns".into(), c.waits.quantile(0.5)),
            ("logger_wait_p99_ns".into(), c.waits.quantile(0.99)),
            ("logger_wait_mean_ns".into(), c.waits.mean()),
            ("sender_log_bytes".into(), self.log.bytes_logged()),
            (
                "sender_log_memory_bytes".into(),
                self.log.memory_bytes() as u64,
            ),
            (
                "sender_log_memory_peak_bytes".into(),
                self.log.peak_memory_bytes() as u64,
            ),
            (
                "sender_log_memory_limit_bytes".into(),
                self.log.memory_limit().unwrap_or(0) as u64,
            ),
            ("sender_log_disk_bytes".into(), self.log.disk_bytes()),
            (
                "sender_log_segments_to_disk".into(),
                self.log.spill_counts().0,
            ),
            (
                "sender_log_waits_for_disk".into(),
                self.log.spill_counts().1,
            ),
            ("sender_log_over_limit".into(), self.log.spill_counts().2),
            (
                "sender_log_segments".into(),
                self.log.segment_count() as u64,
            ),
            (
                "sender_log_segments_new".into(),
                self.log.segments_started().0.into(),
            ),
            (
                "sender_log_segments_reused".into(),
                self.log.segments_started().1.into(),
            ),
            ("event_put_ns_total".into(), c.put_ns),
            ("checkpoints".into(), c.checkpoints),
            ("checkpoint_ns_total".into(), c.checkpoint_ns),
            ("events_replayed".into(), c.events_replayed),
            ("log_records_freed".into(), c.records_freed),
        ]
    }

    fn take_restored(&mut self) -> Option<EngineSnapshot> {
        self.restored.take()
    }

    fn restart_state(&self) -> Option<Vec<u8>> {
        self.app_state.clone()
    }

    fn replay_ends(&self) -> Vec<(u32, u64)> {
        self.replay.ends()
    }

    fn replay_completion(
        &mut self,
        call: CallId,
        passed: &[CallId],
    ) -> Result<Replay<Vec<CallId>>> {
        self.answer_completion(call, passed)
    }

    fn replay_probe(
        &mut self,
        call: CallId,
        spec: &RecvSpec,
        blocking: bool,
    ) -> Result<Replay<Option<(usize, i32)>>> {
        self.answer_probe(call, spec, blocking)
    }

    fn replay_logged_completion(&self, call: CallId) -> Option<Vec<CallId>> {
        self.replaying
            .then(|| self.replay.logged_completion(call))
            .flatten()
    }

    fn replay_cancel(&mut self, call: CallId, request: CallId) -> Result<Replay<bool>> {
        self.answer_cancel(call, request)
    }

    fn peer_holds(&mut self, dest: usize, held: &LaneMap<u64>) {
        if dest != self.rank {
            self.previous.forget_unheld(dest, |ctx| held.get(ctx));
            self.update_gate();
        }
    }

    fn logged_messages(&mut self, dest: usize, after: &LaneMap<u64>) -> Result<Vec<LoggedMessage>> {
        let log = &self.log;
        log.contexts_to(dest as u32)
            .into_iter()
            .flat_map(|ctx| log.iter_from(dest as u32, ctx, after.get(ctx) + 1))
            .map(|r| {
                // The job can no longer end with the failure-free answer:
                // it stops, with the file and offset (never a hang, nor a
                // message silently missing).
                let r = r.map_err(|e| {
                    Error::Unrecoverable(format!(
                        "rank {} cannot re-send the messages restarted rank {dest} needs: {e}",
                        self.rank
                    ))
                })?;
                let loan = log.lend(r.location.segment);
                // SAFETY: the record stays in the log, unchanged, until
                // `free_log` frees it, which happens only once the
                // receiver checkpointed past it (it will never ask for it
                // again); in memory, the loan keeps its memory from other
                // records (a segment on disk stays mapped until freed).
                let mut m = unsafe { crate::logged_message(r) };
                if let Some(loan) = loan {
                    m.bytes = m.bytes.with_loan(loan);
                }
                Ok(m)
            })
            .collect()
    }

    fn checkpoint(
        &mut self,
        engine: &EngineSnapshot,
        app: &[u8],
    ) -> Result<Vec<(usize, u32, u64)>> {
        // `checkpointing.rs`, with the garbage collection it allows.
        self.save_checkpoint(engine, app)
    }

    fn recorded_incoming(&mut self, _from: usize) -> Result<Vec<LoggedMessage>> {
        Ok(Vec::new())
    }

    fn free_log(&mut self, dest: usize, context: u32, up_to: u64) -> Result<()> {
        self.free_records(dest, context, up_to)
    }
}
