//! Receives: posting, cancelling and withdrawing them, and probes.

use super::Engine;
use super::link::{Link, Peer};
use super::requests::{RawBytes, ReqId, SlotKind};
use crate::error::{Error, Result};
use crate::matching::{Envelope, RecvSpec};
use crate::protocol::{CallId, RecvPlan, Replay};
use crate::shm::ring::{RingReader, kind};
use crate::status::Status;

/// Nonblocking receives from a peer posted without a look at its ring
/// after one found it empty (see `Engine::skips_look`). On 2 ranks of
/// one host: 4 gave bidirectional bandwidth (1 B) +12% with the one-way
/// message rate (16 B) unchanged; never looking again until the next
/// progress pass gave +40% and -25%.
pub(super) const LOOKS_SKIPPED_AFTER_EMPTY: u32 = 4;

/// Nonblocking receives from a peer posted without a look at its ring
/// once a message went to that peer while receives skipped their look
/// (an exchange), unless a progress pass reads the ring first. Each such
/// send counts them again, so a rank that keeps sending to the peer and
/// never waits or tests stops looking at its ring: its receives are then
/// posted and complete at its next wait. On 2 ranks of one host,
/// bidirectional bandwidth (1 B-1 KiB) +26-34% against
/// [`LOOKS_SKIPPED_AFTER_EMPTY`] alone in the VM's fast phase, +10-16% in
/// its slow phase, with message rate and latency unchanged (16, 64 and
/// 1000 measured alike).
pub(super) const LOOKS_SKIPPED_WHILE_EXCHANGING: u32 = 64;

/// The largest message whose sending starts an exchange
/// ([`LOOKS_SKIPPED_WHILE_EXCHANGING`]): with 16-64 KiB messages, looks
/// skipped cost 3-5% of bidirectional bandwidth (a look is cheap next to
/// the copy).
pub(super) const EXCHANGED_MESSAGE_MAX: usize = 4096;

impl Engine {
    // -------------------------------------------------------------- receives

    /// Post a receive into `len` bytes at `ptr`.
    ///
    /// # Safety
    /// `ptr..ptr+len` stays valid, writable and otherwise untouched until the
    /// returned request completes.
    #[inline(always)]
    pub(crate) unsafe fn start_recv(
        &mut self,
        spec: RecvSpec,
        ptr: *mut u8,
        len: usize,
    ) -> Result<ReqId> {
        // SAFETY: the caller's contract.
        unsafe { self.post_recv(spec.source, spec.tag, spec.context, ptr, len) }
    }

    /// [`Engine::start_recv`], the spec's fields passed one by one: a spec
    /// passed whole is a copy in memory the callee reads back with wider
    /// loads than the caller's stores, which wait for every store before
    /// them (a send's ring writes among them).
    ///
    /// # Safety
    /// As [`Engine::start_recv`].
    unsafe fn post_recv(
        &mut self,
        source: Option<usize>,
        tag: Option<i32>,
        context: u32,
        ptr: *mut u8,
        len: usize,
    ) -> Result<ReqId> {
        self.check_alive()?;
        let any_source = source.is_none();
        let call = self.next_call(context)?;
        let (source, tag, context, plan) = if self.caps.hears_posted_receives {
            self.plan_recv(call, source, tag, context)?
        } else {
            (source, tag, context, RecvPlan::Post)
        };
        let (id, s) = self.core.alloc_slot(SlotKind::Recv, RawBytes { ptr, len });
        s.call = call;
        // The log fixed its source.
        s.pinned = any_source && source.is_some();
        // Its match is reported to the protocol.
        s.any_source = source.is_none();
        s.held_for_cancel = plan == RecvPlan::HoldForCancel;
        if plan == RecvPlan::HoldForCancel {
            return Ok(id);
        }
        // (The spec is built twice, each time from registers: one copy in
        // memory, read back whole by `post`, would wait on earlier stores.)
        let unexpected = match self.core.matching.unexpected_len() {
            0 => None,
            _ => self.core.matching.take_unexpected(&RecvSpec {
                source,
                tag,
                context,
            }),
        };
        if let Some((env, u)) = unexpected {
            if let Err(e) = self.core.finish_unexpected(id, env, u) {
                // Like a failure inside progress: nothing may keep pointing
                // at user buffers afterwards.
                self.fail(&e);
                return Err(e);
            }
            self.flush_control();
        } else {
            let spec = RecvSpec {
                source,
                tag,
                context,
            };
            self.core.matching.post(spec, id);
        }
        self.report_matches()?;
        Ok(id)
    }

    /// What the protocol makes of a receive it hears about (it may fix the
    /// source of an ANY_SOURCE receive): the spec's fields as the protocol
    /// left them, and the plan.
    #[allow(clippy::type_complexity)] // the spec's fields, kept out of memory
    fn plan_recv(
        &mut self,
        call: CallId,
        source: Option<usize>,
        tag: Option<i32>,
        context: u32,
    ) -> Result<(Option<usize>, Option<i32>, u32, RecvPlan)> {
        let mut spec = RecvSpec {
            source,
            tag,
            context,
        };
        let plan = self.hook(|p| p.post_recv(call, &mut spec))?;
        Ok((spec.source, spec.tag, spec.context, plan))
    }

    /// The application's `cancel`: withdraw a receive that has not matched
    /// (sends are never cancelled). Reported to the protocol.
    pub(crate) fn cancel(&mut self, id: ReqId) -> Result<bool> {
        let Some(slot) = self.core.slot(id) else {
            return Ok(false);
        };
        let (request, is_recv) = (slot.call, slot.kind == SlotKind::Recv);
        if !is_recv {
            // Sends and collectives are never cancelled.
            return Ok(self.withdraw(id));
        }
        let call = self.next_call(request.lane)?;
        match self.hook(|p| p.replay_cancel(call, request))? {
            Replay::Logged(false) => Ok(false),
            Replay::Logged(true) => {
                // The receive was held back from matching since it was
                // posted (`RecvPlan::HoldForCancel`).
                if !self.withdraw(id) {
                    let e = self.diverged(format!(
                        "call {call} cancelled the receive of call {request} the first time; now that receive has matched"
                    ));
                    self.fail(&e);
                    return Err(e);
                }
                Ok(true)
            }
            _ => {
                let cancelled = self.withdraw(id);
                self.hook(|p| p.cancel(call, request, cancelled))?;
                Ok(cancelled)
            }
        }
    }

    /// Withdraw a posted receive. True if it was withdrawn (it had not matched).
    pub(crate) fn withdraw(&mut self, id: ReqId) -> bool {
        let Some(slot) = self.core.slot(id) else {
            return false;
        };
        if slot.kind != SlotKind::Recv || slot.done {
            return false;
        }
        if !slot.held_for_cancel && !self.core.matching.remove_posted(&id) {
            return false;
        }
        let mut st = Status::new(0, 0, 0, 0);
        st.cancelled = true;
        self.core.set_status(id, st);
        self.core.complete(id);
        true
    }

    /// Look for a matching message without receiving it.
    pub(crate) fn iprobe(&mut self, spec: &RecvSpec) -> Result<Option<Status>> {
        let (call, answer) = self.replay_probe(spec, false)?;
        if let Some(answer) = answer {
            return Ok(answer);
        }
        let mut found = self.peek(spec);
        if found.is_none() {
            self.progress()?;
            found = self.peek(spec);
        }
        self.hook(|p| p.probe(call, spec.source.is_none(), false, found.as_ref()))?;
        Ok(found)
    }

    /// A probe takes the next call id of its lane; while a restarted
    /// process replays, the logged answer is returned (waiting for the
    /// logged message if need be). With the call id: `None` to probe as
    /// usual.
    fn replay_probe(
        &mut self,
        spec: &RecvSpec,
        blocking: bool,
    ) -> Result<(CallId, Option<Option<Status>>)> {
        let call = self.next_call(spec.context)?;
        match self.hook(|p| p.replay_probe(call, spec, blocking))? {
            Replay::Logged(Some((source, tag))) => {
                let exact = RecvSpec {
                    source: Some(source),
                    tag: Some(tag),
                    context: spec.context,
                };
                let mut found = None;
                self.wait_until(|e| {
                    found = e.peek(&exact);
                    found.is_some()
                })?;
                Ok((call, Some(found)))
            }
            Replay::Logged(None) | Replay::NotYet => {
                self.progress()?;
                Ok((call, Some(None)))
            }
            Replay::Free => Ok((call, None)),
        }
    }

    fn peek(&self, spec: &RecvSpec) -> Option<Status> {
        self.core
            .matching
            .peek_unexpected(spec)
            .map(|(env, _)| Status::new(env.source, env.tag, env.len, env.seq))
    }

    /// Block until a matching message is available; return its status.
    pub(crate) fn probe(&mut self, spec: &RecvSpec) -> Result<Status> {
        // A blocking probe always finds something; "nothing" cannot have
        // been logged for it.
        let (call, answer) = self.replay_probe(spec, true)?;
        if let Some(Some(st)) = answer {
            return Ok(st);
        }
        let mut found = None;
        self.wait_until(|e| {
            found = e.peek(spec);
            found.is_some()
        })?;
        let found = found.ok_or(Error::RequestState("probe ended without a message"))?;
        self.hook(|p| p.probe(call, spec.source.is_none(), true, Some(&found)))?;
        Ok(found)
    }

    // ------------------------------------------- receives straight off a ring

    /// May a blocking receive skip the request table and the matching
    /// queues ([`Engine::recv_now`])? Only when the protocol hears no
    /// receive and no wait, nothing replays, and no receive is posted and
    /// no message waits unexpected: then the next frame of the source, if
    /// it matches, is the one the general path would give the receive.
    /// ([`Engine::irecv_now`] first hands frames to posted receives.)
    #[inline]
    pub(crate) fn receives_may_bypass(&self) -> bool {
        self.bypass_allowed()
            && self.core.matching.posted_len() == 0
            && self.core.matching.unexpected_len() == 0
    }

    /// [`Engine::receives_may_bypass`] but for the matching queues.
    #[inline]
    fn bypass_allowed(&self) -> bool {
        !self.caps.hears_posted_receives
            && !self.caps.hears_waits
            && self.failed.is_none()
            && self.recovery.is_none()
            && self.replay_ends.is_empty()
            && !self.replay_alone
            && self.sim.is_none()
    }

    /// A blocking receive of a small message from one peer over shared
    /// memory, copied from the peer's ring straight into `ptr..ptr+len`,
    /// while nothing else is going on ([`Engine::receives_may_bypass`], and
    /// no other frame or queued send: each turn of the wait checks).
    ///
    /// Unless the message was taken, nothing was consumed and no call id
    /// taken: the caller posts the receive as usual. (The frame's checks,
    /// and its errors, are then the general path's.)
    ///
    /// # Safety
    /// `ptr..ptr+len` is valid for writes during the call.
    pub(crate) unsafe fn recv_now(
        &mut self,
        spec: &RecvSpec,
        ptr: *mut u8,
        len: usize,
    ) -> Result<RecvNow> {
        // SAFETY: the caller's contract.
        unsafe { self.recv_now_within(self.idle.spin, spec, ptr, len) }
    }

    /// [`Engine::recv_now`], looking at most `tries` times.
    ///
    /// # Safety
    /// As [`Engine::recv_now`].
    pub(crate) unsafe fn recv_now_within(
        &mut self,
        tries: u32,
        spec: &RecvSpec,
        ptr: *mut u8,
        len: usize,
    ) -> Result<RecvNow> {
        let Some(source) = spec.source else {
            return Ok(RecvNow::NotNow);
        };
        if !self.receives_may_bypass() {
            return Ok(RecvNow::NotNow);
        }
        for _ in 0..tries {
            if !self.quiet_but(Some(source)) {
                return Ok(RecvNow::NotNow);
            }
            // SAFETY: the caller's contract.
            match unsafe { self.take_frame(spec, source, ptr, len)? } {
                Taken::Message(_, st) => return Ok(RecvNow::Took(st)),
                Taken::Nothing => std::hint::spin_loop(),
                Taken::NotThis => return Ok(RecvNow::NotNow),
            }
        }
        Ok(RecvNow::Spun)
    }

    /// A nonblocking receive whose message already waits in its source's
    /// ring, while nothing else is going on: copied straight into
    /// `ptr..ptr+len` as [`Engine::recv_now`] does, and complete at start
    /// (its id takes no table entry; the status comes with it). Earlier
    /// posted receives are first given the frames of that ring that the
    /// oldest of them takes, as a progress pass would: a window of
    /// receives posted before its messages came then goes this way from
    /// the first receive that looks again. After a look that found the
    /// ring empty, the next [`LOOKS_SKIPPED_AFTER_EMPTY`] receives from
    /// that source do not look, and [`LOOKS_SKIPPED_WHILE_EXCHANGING`]
    /// once this rank sends to it meanwhile, until a progress pass reads
    /// the ring (see [`Engine::skips_look`]).
    ///
    /// `None`: nothing was consumed for this receive and no call id taken;
    /// the caller posts it as usual.
    ///
    /// # Safety
    /// `ptr..ptr+len` is valid for writes during the call.
    pub(crate) unsafe fn irecv_now(
        &mut self,
        spec: &RecvSpec,
        ptr: *mut u8,
        len: usize,
    ) -> Result<Option<(ReqId, Status)>> {
        let Some(source) = spec.source else {
            return Ok(None);
        };
        if !self.bypass_allowed()
            || self.core.matching.unexpected_len() != 0
            || self.skips_look(source)
        {
            return Ok(None);
        }
        if self.core.matching.posted_len() != 0 && !self.deliver_to_oldest(source)? {
            return Ok(None);
        }
        if !self.quiet_but(Some(source)) {
            return Ok(None);
        }
        // SAFETY: the caller's contract.
        Ok(match unsafe { self.take_frame(spec, source, ptr, len)? } {
            Taken::Message(call, st) => {
                self.core.stats.received_at_start += 1;
                Some((ReqId::received(call), st))
            }
            Taken::Nothing => {
                self.mark_looked_empty(source);
                None
            }
            Taken::NotThis => None,
        })
    }

    /// Is this receive one of the few posted without a look at `source`'s
    /// ring because a receive just found it empty?
    ///
    /// Looking costs a cache miss when the peer is writing that very line,
    /// and takes the line from under the writer, which must fetch it back
    /// while its other stores wait. In an exchange (each side posts its
    /// receives and sends, then waits) every receive would look just
    /// before its message comes. Skipping a few looks leaves the writer
    /// alone, and a window of receives still completes at start once its
    /// messages are there. A rank that also sends to that peer meanwhile
    /// is in an exchange: its receives skip their looks until a progress
    /// pass (a wait, a test) has read the ring (see
    /// [`LOOKS_SKIPPED_WHILE_EXCHANGING`]). Only a progress pass ends the
    /// skip: the receives that look, and take frames here, do so only once
    /// it is over.
    #[inline]
    fn skips_look(&mut self, source: usize) -> bool {
        match self.peers.get_mut(source).and_then(Option::as_mut) {
            Some(p) if p.looks_to_skip > 0 => {
                p.looks_to_skip -= 1;
                true
            }
            _ => false,
        }
    }

    /// Note that `source`'s ring was empty (see [`Engine::skips_look`]).
    fn mark_looked_empty(&mut self, source: usize) {
        if let Some(p) = self.peers.get_mut(source).and_then(Option::as_mut) {
            p.looked_empty();
        }
    }

    /// Hand `source`'s waiting frames to the posted receives while each is
    /// a whole small message the oldest posted receive takes (the general
    /// path, frame by frame). True if no receive is left posted and no
    /// message waits unexpected.
    fn deliver_to_oldest(&mut self, source: usize) -> Result<bool> {
        let mut frames = 0;
        while self.core.matching.posted_len() != 0 {
            let Some(peer) = self.peers.get_mut(source).and_then(Option::as_mut) else {
                break;
            };
            let hdr = match &mut peer.link {
                Link::Shm { reader, .. } => match reader.peek() {
                    Ok(Some(hdr)) => hdr,
                    Ok(None) => {
                        peer.looked_empty();
                        break;
                    }
                    // A bad frame the general path reports.
                    Err(_) => break,
                },
                _ => break,
            };
            let env = Envelope {
                source,
                tag: hdr.tag,
                context: hdr.context,
                seq: hdr.seq,
                len: usize::try_from(hdr.msg_len).unwrap_or(usize::MAX),
            };
            if hdr.kind != kind::EAGER || hdr.flags != 0 || !self.core.matching.oldest_accepts(&env)
            {
                break;
            }
            if let Err(e) = self.core.handle_frame(source, peer, &hdr) {
                self.fail(&e);
                return Err(e);
            }
            peer.link.consume(&hdr);
            frames += 1;
        }
        if frames > 0 {
            self.release_read(source);
            // An ANY_SOURCE receive that matched is the protocol's to hear.
            self.report_matches()?;
        }
        Ok(self.core.matching.posted_len() == 0 && self.core.matching.unexpected_len() == 0)
    }

    /// Take `source`'s next frame into `ptr..ptr+len` if it is a whole
    /// small message for `spec` that fits, is next in sequence and is
    /// intact; the receive's call id is taken only then.
    ///
    /// # Safety
    /// `ptr..ptr+len` is valid for writes during the call.
    #[inline(always)]
    unsafe fn take_frame(
        &mut self,
        spec: &RecvSpec,
        source: usize,
        ptr: *mut u8,
        len: usize,
    ) -> Result<Taken> {
        let Some(reader) = self.shm_reader(source) else {
            return Ok(Taken::NotThis);
        };
        let hdr = match reader.peek() {
            Ok(Some(hdr)) => hdr,
            Ok(None) => return Ok(Taken::Nothing),
            // A bad frame: the general path reports it.
            Err(_) => return Ok(Taken::NotThis),
        };
        let whole = hdr.kind == kind::EAGER && hdr.flags == 0;
        let matches = hdr.context == spec.context && spec.tag.is_none_or(|t| t == hdr.tag);
        let n = match usize::try_from(hdr.msg_len) {
            Ok(n) if whole && matches && n <= len => n,
            _ => return Ok(Taken::NotThis),
        };
        // Where the payload lies: in the current frame, which stays in
        // the ring, untouched by the writer, until `consume` below.
        let Ok(data) = reader.payload(&hdr, n).map(<[u8]>::as_ptr) else {
            return Ok(Taken::NotThis);
        };
        if self.core.check_seq(source, hdr.context, hdr.seq).is_err() {
            return Ok(Taken::NotThis);
        }
        // The receive's call id, before anything is consumed.
        let call = self.next_call(spec.context)?;
        if n > 0 {
            // SAFETY: `data` holds the frame's `n` payload bytes (above),
            // `ptr` holds `len` ≥ `n` > 0 writable bytes (caller contract);
            // they cannot overlap, the ring being ours alone to read.
            unsafe { std::ptr::copy_nonoverlapping(data, ptr, n) };
        }
        let Some(reader) = self.shm_reader(source) else {
            return Err(Error::RequestState("ring vanished"));
        };
        reader.consume(&hdr);
        self.release_read(source);
        *self.core.recv_seq[source].entry(hdr.context) = hdr.seq;
        self.core.stats.messages_received += 1;
        Ok(Taken::Message(
            call,
            Status::new(source, hdr.tag, n, hdr.seq),
        ))
    }

    /// The reading end of `source`'s ring, if it is reached over shared memory.
    fn shm_reader(&mut self, source: usize) -> Option<&mut RingReader> {
        match self.peers.get_mut(source)?.as_mut()? {
            Peer {
                link: Link::Shm { reader, .. },
                ..
            } => Some(reader),
            _ => None,
        }
    }
}

/// What [`Engine::take_frame`] found.
enum Taken {
    /// The message is in the buffer: the receive's call and status.
    Message(CallId, Status),
    /// The ring is empty.
    Nothing,
    /// Not a frame to take this way: the receive is to be posted.
    NotThis,
}

/// What a receive straight off the ring did (`crate::raw::Comm::recv_now_raw`).
#[derive(Debug)]
pub enum RecvNow {
    /// The message is in the buffer: its status.
    Took(Status),
    /// Not this way: the receive is to be posted.
    NotNow,
    /// Nothing came while it looked (a blocking wait's spinning, for
    /// `Engine::recv_now`): the receive is to be posted, or looked for
    /// again; a wait after this may yield or sleep at once
    /// (`Engine::wait_spun`).
    Spun,
}
