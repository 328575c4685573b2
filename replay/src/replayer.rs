//! [`Replayer`], the protocol behind `vpml replay`: it re-runs one rank of
//! a recorded job alone. Its receptions come from the other ranks'
//! recorded sender logs, its non-deterministic outcomes from its recorded
//! events (answered and checked by vprotocol's [`ReplayLog`], which the
//! pessimist protocol also uses after a restart), and each message it
//! sends is checked against the one it recorded. The first difference
//! stops it with a report.

use std::collections::BTreeMap;
use std::path::Path;

use vpml_pml::bootstrap::JobEnv;
use vpml_pml::matching::RecvSpec;
use vpml_pml::protocol::{
    CallId, CommChange, CompletionKind, LoggedMessage, OutgoingMessage, PersistentInit, Protocol,
    RecvPlan, Replay, RequestInfo, SendPlan, WaitKind,
};
use vpml_pml::recovery::EngineSnapshot;
use vpml_pml::{Error, Result, Status};
use vpml_sender_log::SenderLog;
use vpml_vprotocol::replay_log::{Divergence, ReplayLog, describe_send};

/// The protocol of `vpml replay` (see the module docs).
pub struct Replayer {
    rank: usize,
    events: ReplayLog,
    /// This rank's recorded sender log: what it must send.
    own: SenderLog,
    /// The other ranks' recorded logs: what it receives (mapped for as
    /// long as the engine reads from them).
    peers: Vec<Option<SenderLog>>,
    sends_checked: u64,
    until: Option<u64>,
    /// Recent calls with an event, for the divergence report.
    recent: Vec<String>,
    /// Highest call number seen so far in each lane.
    reached: BTreeMap<u32, u64>,
}

fn fail(what: String) -> Error {
    Error::EngineFailed(format!("replay: {what}"))
}

impl Replayer {
    /// Open the recording in `dir` for rank `job.rank`; stop before the
    /// event with id `until`, if given.
    pub fn start(job: &JobEnv, dir: &Path, until: Option<u64>) -> Result<Replayer> {
        let open = |r: usize| {
            SenderLog::open_read_only(&dir.join(format!("rank-{r}")))
                .map_err(|e| fail(format!("cannot read the recording: {e}")))
        };
        let own = open(job.rank)?;
        let mut peers = Vec::with_capacity(job.size);
        for p in 0..job.size {
            peers.push(if p == job.rank { None } else { Some(open(p)?) });
        }
        // The rank's events are on one logger (or several replicas): take
        // the most complete copy.
        let mut events = Vec::new();
        for entry in std::fs::read_dir(dir)
            .map_err(|e| fail(format!("cannot list {}: {e}", dir.display())))?
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with("logger-") {
                continue;
            }
            let got =
                vpml_event_logger::read_stored_events(&entry.path(), &job.job_id, job.rank as u32)
                    .map_err(|e| fail(format!("cannot read the recorded events: {e}")))?;
            if got.len() > events.len() {
                events = got;
            }
        }
        let events = ReplayLog::new(events, &[]);
        Ok(Replayer {
            rank: job.rank,
            events,
            own,
            peers,
            sends_checked: 0,
            until,
            recent: Vec::new(),
            reached: BTreeMap::new(),
        })
    }

    /// Call `call` was made.
    fn saw(&mut self, call: CallId) {
        let n = self.reached.entry(call.lane).or_default();
        *n = (*n).max(call.n);
    }

    /// Note that call `call` is answered from its event; stop there if
    /// asked to.
    fn reached(&mut self, call: CallId, what: String) {
        let Some(id) = self.events.event_of(call) else {
            return;
        };
        self.recent
            .push(format!("event {id} (call {call}): {what}"));
        if self.recent.len() > 5 {
            self.recent.remove(0);
        }
        if self.until.is_some_and(|u| id >= u) {
            self.until = None;
            eprintln!(
                "vpml replay: rank {} stopped at event {id} (call {call}: {what}); attach a debugger: gdb -p {}",
                self.rank,
                std::process::id()
            );
            // Stops the whole process (as raise() did); a debugger or
            // SIGCONT resumes it. Failure only means no stop.
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::STOP,
            );
        }
    }

    /// A logged outcome that does not fit the re-executed call.
    fn diverged_at(&self, d: Divergence) -> Error {
        self.diverged(format!("{d}"))
    }

    fn diverged(&self, what: String) -> Error {
        let context = if self.recent.is_empty() {
            "none".to_string()
        } else {
            self.recent.join("; ")
        };
        let report = format!(
            "rank {} diverged from the recording: {what} (after {} matching sends; last events replayed: {context})",
            self.rank, self.sends_checked
        );
        eprintln!("vpml replay: {report}");
        fail(report)
    }
}

impl Protocol for Replayer {
    fn name(&self) -> &'static str {
        "replay"
    }

    /// Nothing is written, but a replayed rank goes through its
    /// checkpoints as the recorded one did (the program may branch on
    /// what `checkpoint` returned).
    fn takes_checkpoints(&self) -> bool {
        true
    }

    fn send(&mut self, msg: &OutgoingMessage<'_>) -> Result<()> {
        self.saw(msg.call);
        let now = describe_send(msg);
        self.events
            .plain(msg.call, &now)
            .map_err(|d| self.diverged_at(d))?;
        let recorded = self
            .own
            .get(msg.dest as u32, msg.context, msg.seq)
            .map_err(|e| {
                Error::EngineFailed(format!("reading the recording's send #{}: {e}", msg.seq))
            })?;
        let Some(rec) = recorded else {
            return Err(self.diverged(format!(
                "send #{} to rank {} on context {} (call {}, tag {}, {} bytes) was not made in the recording",
                msg.seq,
                msg.dest,
                msg.context,
                msg.call,
                msg.tag,
                msg.payload.len()
            )));
        };
        let now = vpml_sender_log::crc32c(msg.payload);
        let then = vpml_sender_log::crc32c(rec.payload);
        if rec.header.tag != msg.tag
            || rec.header.context != msg.context
            || rec.payload.len() != msg.payload.len()
            || now != then
        {
            return Err(self.diverged(format!(
                "send #{} to rank {} (call {}): recorded tag {}, {} bytes, checksum {then:08x}; now tag {}, {} bytes, checksum {now:08x}",
                msg.seq,
                msg.dest,
                msg.call,
                rec.header.tag,
                rec.payload.len(),
                msg.tag,
                msg.payload.len()
            )));
        }
        self.sends_checked += 1;
        Ok(())
    }

    fn keep(&mut self, _msg: &OutgoingMessage<'_>) -> Result<SendPlan> {
        Ok(SendPlan::Transmit)
    }

    fn idle(&mut self) {}

    fn post_recv(&mut self, call: CallId, spec: &mut RecvSpec) -> Result<RecvPlan> {
        self.saw(call);
        let answer = self
            .events
            .post_recv(call, spec.source)
            .map_err(|d| self.diverged_at(d))?;
        if let Some(source) = answer.source {
            spec.source = Some(source);
            self.reached(call, format!("ANY_SOURCE receive matched rank {source}"));
        }
        Ok(if answer.cancelled_later {
            RecvPlan::HoldForCancel
        } else {
            RecvPlan::Post
        })
    }

    fn matched(&mut self, _recv: CallId, _source: usize) -> Result<()> {
        Ok(())
    }

    fn completion(
        &mut self,
        _call: CallId,
        _kind: CompletionKind,
        _requests: &[Option<RequestInfo>],
        _done: &[usize],
    ) -> Result<()> {
        Ok(())
    }

    fn hears_waits(&self) -> bool {
        // `waited` has nothing to do.
        false
    }

    fn waited(&mut self, _kind: WaitKind, _requests: &[Option<RequestInfo>]) -> Result<()> {
        // Determined: nothing was recorded, nothing to check.
        Ok(())
    }

    fn communicator(&mut self, _change: &CommChange<'_>) -> Result<()> {
        // Made by deterministic collectives, whose messages are checked.
        Ok(())
    }

    fn persistent(&mut self, _init: &PersistentInit) -> Result<()> {
        // Its starts are checked as sends and receives.
        Ok(())
    }

    fn probe(
        &mut self,
        _call: CallId,
        _any_source: bool,
        _blocking: bool,
        _found: Option<&Status>,
    ) -> Result<()> {
        Ok(())
    }

    fn cancel(&mut self, _call: CallId, _request: CallId, _cancelled: bool) -> Result<()> {
        Ok(())
    }

    fn finalize(&mut self) -> Result<()> {
        self.events.finish().map_err(|d| self.diverged_at(d))?;
        eprintln!(
            "vpml replay: rank {} replayed {} events and checked {} sends: no divergence",
            self.rank,
            self.events.len(),
            self.sends_checked
        );
        Ok(())
    }

    fn stats(&self) -> Vec<(String, u64)> {
        // As the recorded run counted them at this point, so a program
        // that reports its protocol counters sends the same bytes.
        let logged = self.events.events_up_to(&self.reached) as u64;
        vec![
            ("events_total".into(), logged),
            ("events_recorded".into(), self.events.len() as u64),
            ("sends_checked".into(), self.sends_checked),
        ]
    }

    fn take_restored(&mut self) -> Option<EngineSnapshot> {
        None
    }

    fn restart_state(&self) -> Option<Vec<u8>> {
        None
    }

    fn replay_ends(&self) -> Vec<(u32, u64)> {
        self.events.ends()
    }

    fn replay_logged_completion(&self, call: CallId) -> Option<Vec<CallId>> {
        self.events.logged_completion(call)
    }

    fn replay_completion(
        &mut self,
        call: CallId,
        passed: &[CallId],
    ) -> Result<Replay<Vec<CallId>>> {
        self.saw(call);
        let r = self
            .events
            .completion(call, passed)
            .map_err(|d| self.diverged_at(d))?;
        if let Replay::Logged(set) = &r {
            self.reached(call, format!("completed the requests of calls {set:?}"));
        }
        Ok(r)
    }

    fn replay_probe(
        &mut self,
        call: CallId,
        spec: &RecvSpec,
        blocking: bool,
    ) -> Result<Replay<Option<(usize, i32)>>> {
        self.saw(call);
        let r = self
            .events
            .probe(call, spec.source, spec.tag, blocking)
            .map_err(|d| self.diverged_at(d))?;
        if let Replay::Logged(found) = &r {
            self.reached(call, format!("probe found {found:?}"));
        }
        Ok(r)
    }

    fn replay_cancel(&mut self, call: CallId, request: CallId) -> Result<Replay<bool>> {
        self.saw(call);
        let r = self
            .events
            .cancel(call, request)
            .map_err(|d| self.diverged_at(d))?;
        if let Replay::Logged(c) = &r {
            self.reached(call, format!("cancel took effect: {c}"));
        }
        Ok(r)
    }

    fn logged_messages(
        &mut self,
        _dest: usize,
        _after: &vpml_pml::lanes::LaneMap<u64>,
    ) -> Result<Vec<LoggedMessage>> {
        Ok(Vec::new())
    }

    fn recorded_incoming(&mut self, from: usize) -> Result<Vec<LoggedMessage>> {
        let rank = self.rank as u32;
        let Some(log) = self.peers.get(from).and_then(Option::as_ref) else {
            return Ok(Vec::new());
        };
        log.contexts_to(rank)
            .into_iter()
            .flat_map(|ctx| log.iter_from(rank, ctx, 1))
            .map(|r| {
                let r = r.map_err(|e| {
                    Error::EngineFailed(format!("reading rank {from}'s recorded messages: {e}"))
                })?;
                // SAFETY: the engine owns the replayer, which keeps the
                // recorded logs mapped, read-only and never freed, as long
                // as it lives.
                Ok(unsafe { vpml_vprotocol::logged_message(r) })
            })
            .collect()
    }

    fn checkpoint(
        &mut self,
        _engine: &EngineSnapshot,
        _app: &[u8],
    ) -> Result<Vec<(usize, u32, u64)>> {
        Ok(Vec::new())
    }

    fn free_log(&mut self, _dest: usize, _context: u32, _up_to: u64) -> Result<()> {
        Ok(())
    }
}
