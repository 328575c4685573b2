//! Completion calls (test, wait and their variants), waiting, and the
//! helpers that run the protocol's hooks around them.

use super::Engine;
use super::requests::{RawBytes, ReqId, SlotKind};
use crate::error::{Error, Result};
use crate::protocol::{
    CallId, CommChange, CompletionKind, OutgoingMessage, PersistentInit, Protocol, Replay,
    RequestInfo, SendPlan, WaitKind,
};
use crate::status::Status;

/// Requests described to the protocol on the stack (see
/// `Engine::with_request_infos`).
const INLINE_REQUESTS: usize = 8;

impl Engine {
    /// Run a protocol hook; a hook failure is fatal (the protocol's
    /// guarantee would be gone).
    pub(super) fn hook<T>(&mut self, f: impl FnOnce(&mut dyn Protocol) -> Result<T>) -> Result<T> {
        match f(self.protocol.as_mut()) {
            Ok(v) => Ok(v),
            Err(e) => {
                self.fail(&e);
                Err(e)
            }
        }
    }

    /// Show a message about to leave to the protocol, which may wait
    /// (commit rule); sets `msg.call`.
    #[inline(always)]
    pub(super) fn protocol_send(&mut self, msg: &mut OutgoingMessage<'_>) -> Result<()> {
        // Matches made since the last report are events this send follows.
        self.report_matches()?;
        msg.call = self.next_call(msg.context)?;
        // The protocol's word that it has nothing to do for this send:
        // one load instead of a call, before the message leaves.
        if self.caps.send_gate.lets_through(msg.payload.len()) {
            return Ok(());
        }
        self.hook(|p| p.send(msg))?;
        Ok(())
    }

    /// Let the protocol keep the payload of a message it saw in
    /// [`Engine::protocol_send`]; returns what to transmit.
    #[inline]
    pub(super) fn protocol_keep(&mut self, msg: &OutgoingMessage<'_>) -> Result<SendPlan> {
        if !self.caps.keeps_payloads {
            return Ok(SendPlan::Transmit);
        }
        self.hook(|p| p.keep(msg))
    }

    /// Tell the protocol about ANY_SOURCE receives matched since last time.
    #[inline]
    pub(super) fn report_matches(&mut self) -> Result<()> {
        if self.core.matches.is_empty() {
            return Ok(());
        }
        self.report_pending_matches()
    }

    #[cold]
    fn report_pending_matches(&mut self) -> Result<()> {
        let mut matches = std::mem::take(&mut self.core.matches);
        let reported = self.hook(|p| {
            matches
                .iter()
                .try_for_each(|&(call, src)| p.matched(call, src))
        });
        // The buffer goes back, empty, for the next matches.
        matches.clear();
        self.core.matches = matches;
        reported
    }

    /// A completion call of `kind` over `ids`: decides which requests it
    /// completes (indices into `ids`) — from the logged answer while a
    /// restarted process replays, as usual otherwise — and reports that
    /// to the protocol.
    pub(crate) fn completion_call(
        &mut self,
        kind: CompletionKind,
        ids: &[Option<ReqId>],
    ) -> Result<Vec<usize>> {
        // (Sends complete at start have no status to carry the failure.)
        self.check_alive()?;
        // The call is on the lane of the first request passed that has a
        // call; without one (nothing active), its answer is determined:
        // it takes no call id and the protocol does not hear of it.
        let lane = ids
            .iter()
            .flatten()
            .find_map(|&id| self.call_of(id))
            .map(|c| c.lane);
        let call = match lane {
            Some(lane) => Some(self.next_call(lane)?),
            None => None,
        };
        let blocking = matches!(kind, CompletionKind::WaitAny | CompletionKind::WaitSome);
        // Past the last logged event of its lane (always, without a
        // protocol), there is nothing to replay (and nothing to check).
        let replay = if let Some(call) = call.filter(|&c| self.replay_covers(c)) {
            self.replay_completion(call, ids)?
        } else {
            Replay::Free
        };
        match replay {
            Replay::Logged(calls) => {
                let want: Vec<usize> = (0..ids.len())
                    .filter(|&i| {
                        ids[i]
                            .and_then(|id| self.call_of(id))
                            .is_some_and(|call| calls.contains(&call))
                    })
                    .collect();
                if want.len() != calls.len() {
                    // The protocol checked that every logged request was
                    // passed: only a request passed twice gets here.
                    let e = self.diverged(format!(
                        "completion call {} completed the requests of calls {calls:?} the first time; now {} of them are active",
                        call.unwrap_or_default(),
                        want.len()
                    ));
                    self.fail(&e);
                    return Err(e);
                }
                self.wait_until(|e| want.iter().all(|&i| ids[i].is_some_and(|id| e.is_done(id))))?;
                return Ok(want);
            }
            Replay::NotYet if !blocking => {
                self.progress()?;
                return Ok(Vec::new());
            }
            Replay::NotYet | Replay::Free => {}
        }
        let done = self.decide_completion(kind, ids)?;
        if let Some(call) = call {
            self.report_completion(call, kind, ids, &done)?;
        }
        Ok(done)
    }

    /// The logged answer of completion call `call` over `ids`.
    fn replay_completion(
        &mut self,
        call: CallId,
        ids: &[Option<ReqId>],
    ) -> Result<Replay<Vec<CallId>>> {
        let passed: Vec<CallId> = ids
            .iter()
            .flatten()
            .filter_map(|&id| self.call_of(id))
            .collect();
        // Only sends that completed when they started: the answer is
        // the same every time, and was never logged.
        let determined = ids.iter().flatten().all(|&id| {
            self.request_info(Some(id))
                .is_some_and(|r| r.is_send && r.completed_at_start)
        });
        Ok(match self.hook(|p| p.replay_completion(call, &passed))? {
            // Never logged: the answer is the same every time.
            Replay::NotYet if determined => Replay::Free,
            r => r,
        })
    }

    /// Which requests of `ids` a completion call of `kind` completes, as
    /// they are now (waiting if it blocks).
    fn decide_completion(
        &mut self,
        kind: CompletionKind,
        ids: &[Option<ReqId>],
    ) -> Result<Vec<usize>> {
        let first_done = |e: &Engine| ids.iter().position(|id| id.is_some_and(|id| e.is_done(id)));
        let all_done = |e: &Engine| -> Vec<usize> {
            (0..ids.len())
                .filter(|&i| ids[i].is_some_and(|id| e.is_done(id)))
                .collect()
        };
        let done = match kind {
            CompletionKind::WaitAny => {
                let mut first = None;
                self.wait_until(|e| {
                    first = first_done(e);
                    first.is_some()
                })?;
                first.into_iter().collect()
            }
            CompletionKind::WaitSome => {
                self.wait_until(|e| first_done(e).is_some())?;
                all_done(self)
            }
            CompletionKind::Test | CompletionKind::TestAny => {
                self.progress()?;
                first_done(self).into_iter().collect()
            }
            CompletionKind::TestSome => {
                self.progress()?;
                all_done(self)
            }
            CompletionKind::TestAll => {
                self.progress()?;
                if ids.iter().flatten().all(|&id| self.is_done(id)) {
                    (0..ids.len()).filter(|&i| ids[i].is_some()).collect()
                } else {
                    Vec::new()
                }
            }
        };
        Ok(done)
    }

    /// Completion call `call` reports `done` (indices into `ids`) as complete.
    fn report_completion(
        &mut self,
        call: CallId,
        kind: CompletionKind,
        ids: &[Option<ReqId>],
        done: &[usize],
    ) -> Result<()> {
        self.with_request_infos(ids, |p, infos| p.completion(call, kind, infos, done))
    }

    /// Run hook `f` with what the protocol is told of requests `ids`
    /// (without an allocation for up to [`INLINE_REQUESTS`] of them: a
    /// test in a polling loop, a collective's sendrecv).
    fn with_request_infos<T>(
        &mut self,
        ids: &[Option<ReqId>],
        f: impl FnOnce(&mut dyn Protocol, &[Option<RequestInfo>]) -> Result<T>,
    ) -> Result<T> {
        if ids.len() <= INLINE_REQUESTS {
            let mut buf = [None; INLINE_REQUESTS];
            for (info, &id) in buf.iter_mut().zip(ids) {
                *info = self.request_info(id);
            }
            let infos = &buf[..ids.len()];
            return self.hook(|p| f(p, infos));
        }
        let infos: Vec<Option<RequestInfo>> = ids.iter().map(|&id| self.request_info(id)).collect();
        self.hook(|p| f(p, &infos))
    }

    /// What the protocol is told of request `id`.
    fn request_info(&self, id: Option<ReqId>) -> Option<RequestInfo> {
        let id = id?;
        if let Some((call, is_send)) = id.at_start() {
            return Some(RequestInfo {
                call,
                is_send,
                completed_at_start: true,
            });
        }
        let s = self.core.slot(id)?;
        Some(RequestInfo {
            call: s.call,
            is_send: s.kind == SlotKind::Send,
            completed_at_start: s.completed_at_start,
        })
    }

    /// A determined wait over `ids` returned: tell the protocol.
    fn report_waited(&mut self, kind: WaitKind, ids: &[Option<ReqId>]) -> Result<()> {
        if !self.caps.hears_waits {
            return Ok(());
        }
        self.with_request_infos(ids, |p, infos| p.waited(kind, infos))
    }

    /// A communicator was made or freed: tell the protocol.
    pub(crate) fn communicator_changed(&mut self, change: &CommChange<'_>) -> Result<()> {
        self.hook(|p| p.communicator(change))?;
        Ok(())
    }

    /// A persistent request was made: tell the protocol.
    pub(crate) fn persistent_made(&mut self, init: &PersistentInit) -> Result<()> {
        self.hook(|p| p.persistent(init))?;
        Ok(())
    }

    // ----------------------------------------------------------- completions

    #[inline]
    pub(crate) fn is_done(&self, id: ReqId) -> bool {
        id.is_complete_at_start()
            || self
                .core
                .slot(id)
                .is_some_and(|s| s.done || (s.kind == SlotKind::Group && self.core.group_done(id)))
    }

    /// A request that completes when every one of `parts` (sends and
    /// receives this rank started) has: a nonblocking collective. It is one
    /// call, and one request to every completion call and to the protocol;
    /// taking its status takes the parts'.
    pub(crate) fn start_group(
        &mut self,
        lane: u32,
        parts: &[ReqId],
        result_part: Option<usize>,
    ) -> Result<ReqId> {
        let call = self.next_call(lane)?;
        let empty = RawBytes {
            ptr: std::ptr::NonNull::dangling().as_ptr(),
            len: 0,
        };
        let (id, s) = self.core.alloc_slot(SlotKind::Group, empty);
        s.call = call;
        // (Into the slot's own list: it keeps its memory from the last
        // group that used the slot, so a collective allocates nothing.)
        s.parts.extend_from_slice(parts);
        s.result_part = result_part;
        Ok(id)
    }

    /// A request that completes when the application says so
    /// ([`Engine::complete_external`]): one call, and one request to every
    /// completion call and to the protocol, like any other.
    pub(crate) fn start_external(&mut self) -> Result<ReqId> {
        let call = self.next_call(CallId::GENERALIZED_LANE)?;
        let empty = RawBytes {
            ptr: std::ptr::NonNull::dangling().as_ptr(),
            len: 0,
        };
        let (id, s) = self.core.alloc_slot(SlotKind::External, empty);
        s.call = call;
        Ok(id)
    }

    /// Complete request `id` of [`Engine::start_external`] (its status is
    /// empty: the application gives the real one).
    pub(crate) fn complete_external(&mut self, id: ReqId) -> Result<()> {
        match self.core.slot_mut(id) {
            Some(s) if s.kind == SlotKind::External && !s.done => {
                s.status = Some(Status::new(0, 0, 0, 0));
            }
            _ => return Err(Error::RequestState("not an incomplete generalized request")),
        }
        self.core.complete(id);
        Ok(())
    }

    /// Take the status of a completed request and free its slot.
    #[inline]
    pub(crate) fn take_status(&mut self, id: ReqId) -> Result<Status> {
        // The common case returns `take_done`'s result as it is, not
        // read back from a copy on the stack (see `ReqId`).
        if let Some(why) = &self.failed {
            let why = why.clone();
            let _ = self.core.take_done(id);
            return Err(Error::EngineFailed(why));
        }
        self.core.take_done(id)
    }

    /// The user dropped an active request: keep `keepalive` (the buffer)
    /// until the operation completes, then free everything.
    pub(crate) fn detach(&mut self, id: ReqId, keepalive: Option<Box<dyn std::any::Any>>) {
        let Some(slot) = self.core.slot_mut(id) else {
            return;
        };
        if slot.kind == SlotKind::Group {
            // Its parts finish on their own (the caller keeps the memory).
            let parts = std::mem::take(&mut slot.parts);
            self.core.free_slot(id);
            for p in parts {
                self.detach(p, None);
            }
            return;
        }
        if slot.done {
            self.core.free_slot(id);
        } else {
            slot.detached = true;
            slot.keepalive = keepalive;
        }
    }

    /// Wait for one request.
    pub(crate) fn wait(&mut self, id: ReqId) -> Result<()> {
        self.check_alive()?;
        self.check_not_held(id)?;
        self.wait_until(|e| e.is_done(id))?;
        self.report_waited(WaitKind::One, &[Some(id)])
    }

    /// [`Engine::wait`] for a receive whose caller already spun through a
    /// blocking wait's empty polls ([`super::RecvNow::Spun`]): it yields
    /// or sleeps at once rather than spinning as long again.
    pub(crate) fn wait_spun(&mut self, id: ReqId) -> Result<()> {
        self.check_alive()?;
        self.check_not_held(id)?;
        self.wait_until_from(self.idle.spin, |e| e.is_done(id))?;
        self.report_waited(WaitKind::One, &[Some(id)])
    }

    /// Wait for every request of `ids`.
    pub(crate) fn wait_all(&mut self, ids: &[Option<ReqId>]) -> Result<()> {
        // A failed engine says so even to a wait over sends complete at
        // start, which have no status to carry it.
        self.check_alive()?;
        for &id in ids.iter().flatten() {
            self.check_not_held(id)?;
        }
        // Requests stay done until their status is taken: each is checked
        // until it is, not once per progress step (a window of n requests
        // would cost n² checks).
        let mut pending = 0;
        self.wait_until(|e| {
            while ids
                .get(pending)
                .is_some_and(|id| id.is_none_or(|id| e.is_done(id)))
            {
                pending += 1;
            }
            pending == ids.len()
        })?;
        self.report_waited(WaitKind::All, ids)
    }

    /// A re-executed receive held back for a logged cancel completes only
    /// at that cancel: waiting for it first would never end, and means the
    /// re-execution left the logged one.
    #[inline]
    fn check_not_held(&mut self, id: ReqId) -> Result<()> {
        if self.replay_ends.is_empty() {
            return Ok(());
        }
        self.check_not_held_replaying(id)
    }

    #[cold]
    fn check_not_held_replaying(&mut self, id: ReqId) -> Result<()> {
        let Some(call) = self
            .core
            .slot(id)
            .filter(|s| s.held_for_cancel && !s.done)
            .map(|s| s.call)
        else {
            return Ok(());
        };
        let e = self.diverged(format!(
            "waits for the receive of call {call}, which the logged execution cancelled before it matched"
        ));
        self.fail(&e);
        Err(e)
    }

    /// [`Error::Diverged`] for this rank.
    pub(crate) fn diverged(&self, what: impl std::fmt::Display) -> Error {
        Error::diverged(self.core.rank, self.incarnation(), what)
    }

    /// Progress until `done` holds, idling politely.
    pub(crate) fn wait_until(&mut self, done: impl FnMut(&Engine) -> bool) -> Result<()> {
        self.wait_until_from(0, done)
    }

    /// [`Engine::wait_until`] as if `spun` empty polls had gone by.
    fn wait_until_from(&mut self, spun: u32, mut done: impl FnMut(&Engine) -> bool) -> Result<()> {
        let mut idle: u32 = spun;
        let mut yield_until: Option<std::time::Instant> = None;
        // The protocol heard of the quiet since the last progress.
        let mut told_idle = false;
        loop {
            if done(self) {
                return Ok(());
            }
            if self.progress()? {
                idle = 0;
                yield_until = None;
                told_idle = false;
                continue;
            }
            idle += 1;
            if !told_idle {
                told_idle = true;
                // Nothing arrived: the protocol may prepare for what comes.
                self.hook(|p| {
                    p.idle();
                    Ok(())
                })?;
            }
            if idle < self.idle.spin {
                std::hint::spin_loop();
                continue;
            }
            let now = std::time::Instant::now();
            let until = *yield_until.get_or_insert(now + self.idle.yield_for);
            if now < until {
                std::thread::yield_now();
            } else {
                self.sleep();
                // After a wake-up, poll briefly before sleeping again.
                idle = self.idle.spin.saturating_sub(1000).max(self.idle.spin / 2);
                yield_until = Some(std::time::Instant::now());
            }
        }
    }
}
