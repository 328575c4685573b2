//! The request table and the rest of a rank's state outside its channels
//! ([`Core`]): slots, request ids, and delivering arrived messages into
//! receives.

use super::{EAGER_LIMIT, EngineStats};
use crate::error::{Error, Result};
use crate::lanes::LaneMap;
use crate::matching::{Envelope, MatchQueues};
use crate::protocol::CallId;
use crate::shm::ring::{FrameHeader, kind};
use crate::status::Status;

/// Identifies a request: an entry of the request table, whose generation
/// makes stale handles detectable, or an operation that completed when it
/// started and took no entry (see [`Engine::start_send_lean`] and
/// [`Engine::irecv_now`]). Language bindings hold it as a
/// [`crate::raw::RawRequest`].
///
/// Two whole words, so that a caller reading one back right after the
/// engine wrote it gets it forwarded from the store buffer: a send's
/// ring writes may still sit there, waiting for cache lines the
/// receiving core holds, and a load that cannot be forwarded (a wide
/// load over narrower stores, as an enum of mixed-width fields made)
/// waits for all of them.
///
/// [`Engine::start_send_lean`]: super::Engine::start_send_lean
/// [`Engine::irecv_now`]: super::Engine::irecv_now
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ReqId {
    /// 0 for a table entry; for an operation complete at start, its
    /// call's lane and [`SENT`] or [`RECEIVED`].
    head: u64,
    /// The entry's generation and index (its token), or the number of
    /// the call that completed at start.
    body: u64,
}

/// [`ReqId::head`]'s mark of a standard send written whole at start.
const SENT: u64 = 1 << 32;
/// [`ReqId::head`]'s mark of a receive whose message its call copied
/// straight off its source's ring.
const RECEIVED: u64 = 2 << 32;

impl ReqId {
    pub(super) fn slot(idx: u32, generation: u32) -> ReqId {
        ReqId {
            head: 0,
            body: (u64::from(generation) << 32) | u64::from(idx),
        }
    }
    pub(super) fn sent(call: CallId) -> ReqId {
        ReqId {
            head: SENT | u64::from(call.lane),
            body: call.n,
        }
    }
    pub(super) fn received(call: CallId) -> ReqId {
        ReqId {
            head: RECEIVED | u64::from(call.lane),
            body: call.n,
        }
    }
    /// The table entry's index and generation (`None` for an operation
    /// complete at start).
    #[inline]
    fn key(self) -> Option<(usize, u32)> {
        (self.head == 0).then_some((self.body as u32 as usize, (self.body >> 32) as u32))
    }
    /// The call of a send that completed when it started and took no
    /// table entry.
    #[inline]
    pub(super) fn sent_call(self) -> Option<CallId> {
        (self.head & SENT != 0).then(|| self.call())
    }
    /// The call of an operation that completed when it started, and
    /// whether it is a send.
    #[inline]
    pub(super) fn at_start(self) -> Option<(CallId, bool)> {
        (self.head != 0).then(|| (self.call(), self.head & SENT != 0))
    }
    /// The call of an operation complete at start (from its two words).
    #[inline]
    fn call(self) -> CallId {
        CallId::new(self.head as u32, self.body)
    }
    /// A standard send that completed when it started and left nothing in
    /// the engine: its status is the caller's to make (see
    /// [`crate::Status::of_send`]).
    pub fn is_complete_send(self) -> bool {
        self.head & SENT != 0
    }
    /// A send or a receive that completed when it started and left
    /// nothing in the engine (every completion call finds it done; it has
    /// no status to take).
    #[inline]
    pub fn is_complete_at_start(self) -> bool {
        self.head != 0
    }
    /// The id a peer echoes back in control frames (0, "no token", for an
    /// operation complete at start, which never waits for one).
    pub(super) fn token(self) -> u64 {
        if self.head == 0 { self.body } else { 0 }
    }
    pub(super) fn from_token(t: u64) -> ReqId {
        ReqId::slot(t as u32, (t >> 32) as u32)
    }
}

/// `slot IDX gen G`, `sent LANE:N` or `received LANE:N`.
impl std::fmt::Debug for ReqId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.key(), self.at_start()) {
            (Some((idx, generation)), _) => write!(f, "slot {idx} gen {generation}"),
            (None, Some((call, true))) => write!(f, "sent {call}"),
            (None, _) => write!(f, "received {}", self.call()),
        }
    }
}

/// A byte range owned by a request (or by a blocked caller) while an
/// operation is in flight.
#[derive(Clone, Copy)]
pub(super) struct RawBytes {
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
}

impl RawBytes {
    /// # Safety
    /// The range must be valid for reads for as long as the engine uses it
    /// (see `Slot::buf`).
    pub(super) unsafe fn as_slice<'a>(self) -> &'a [u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: caller contract.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    /// # Safety
    /// As `as_slice`, and valid for writes with no other live reference.
    unsafe fn as_mut_slice<'a>(self) -> &'a mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: caller contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum SlotKind {
    Send,
    Recv,
    /// A nonblocking collective: done when all its `parts` are.
    Group,
    /// A request the application completes itself (MPI's generalized
    /// requests): done when [`super::Engine::complete_external`] says so.
    External,
}

/// The most parts whose list's memory a slot keeps after its group ended.
const GROUP_PARTS_KEPT: usize = 64;

/// One entry of the request table.
pub(super) struct Slot {
    pub(super) generation: u32,
    pub(super) in_use: bool,
    pub(super) done: bool,
    /// The user dropped its handle: free the slot when the operation ends.
    pub(super) detached: bool,
    pub(super) kind: SlotKind,
    /// The user's buffer. Invariant: while `in_use && !done` the memory
    /// stays valid and untouched by anyone but the engine, because the
    /// owning handle keeps the buffer private (or, once detached,
    /// `keepalive` owns it, or a blocking caller waits for completion).
    pub(super) buf: RawBytes,
    pub(super) keepalive: Option<Box<dyn std::any::Any>>,
    pub(super) status: Option<Status>,
    /// Call id of the call that created the request.
    pub(super) call: CallId,
    /// A receive posted with ANY_SOURCE while a protocol listens: its
    /// match is reported.
    pub(super) any_source: bool,
    /// A standard send of at most [`EAGER_LIMIT`] bytes, complete when it
    /// started. Whether a send is one is the same in every execution of
    /// the call (a re-executed send its peer already has completes at once
    /// whatever its size), so a completion call over such sends alone
    /// needs no event.
    pub(super) completed_at_start: bool,
    /// A restarted process re-executes a receive that a logged cancel
    /// withdrew: it is not posted, and the cancel completes it.
    pub(super) held_for_cancel: bool,
    /// A receive for any source that is bound to one: the log fixed its
    /// source (re-execution), or it matched that source's first fragment
    /// and was posted again when the sender died mid-message. Whatever
    /// message of that source it takes next, a durable event may name
    /// (see [`crate::engine::Engine::settled_for`]).
    pub(super) pinned: bool,
    /// A group's sends and receives (empty for the other kinds).
    pub(super) parts: Vec<ReqId>,
    /// The part whose status is the group's (else an empty one).
    pub(super) result_part: Option<usize>,
}

/// An unexpected message waiting for its receive.
pub(super) enum Unexpected {
    /// The bytes, already copied out of the ring; `sync` holds the sender's
    /// token when it waits for a match acknowledgement.
    Eager { data: Vec<u8>, sync: Option<u64> },
    /// A large message still in the sender's memory.
    Rendezvous { addr: u64, token: u64 },
    /// A synchronous send to self, waiting in the sender's own buffer.
    SelfSync { data: RawBytes, token: u64 },
}

/// All per-rank state except the shared-memory channels (split so frames can
/// be read from a channel while the rest is updated).
pub(super) struct Core {
    pub(super) rank: usize,
    pub(super) slots: Vec<Slot>,
    free: Vec<u32>,
    pub(super) matching: MatchQueues<ReqId, Unexpected>,
    pub(super) recv_seq: Vec<LaneMap<u64>>,
    /// Control frames to send after the current batch: (peer, header).
    pub(super) control_out: Vec<(usize, FrameHeader)>,
    pub(super) pids: Vec<i32>,
    pub(super) stats: EngineStats,
    /// ANY_SOURCE receives matched since the protocol last heard: (call, source).
    pub(super) matches: Vec<(CallId, usize)>,
    /// Crashed ranks can be restarted (a protocol logs every message): a
    /// failed read from a dead sender is not fatal, and large unexpected
    /// messages are read at once, so nothing queued here ever points into
    /// another process.
    pub(super) restartable: bool,
    /// Set when a read from this sender failed because it died.
    pub(super) gone: Option<usize>,
    /// Peers that checkpointed: (peer, free log records to it up to).
    pub(super) gc_notices: Vec<(usize, u32, u64)>,
    /// Frames of coordinated checkpointing that came, for the engine:
    /// (peer, header).
    pub(super) coordination_in: Vec<(usize, FrameHeader)>,
}

/// Copy `dst.len()` bytes from address `addr` of process `pid`.
pub(super) fn read_remote(pid: i32, addr: u64, dst: &mut [u8]) -> std::io::Result<()> {
    let mut done = 0usize;
    while done < dst.len() {
        let local = libc::iovec {
            // SAFETY: in bounds of `dst`.
            iov_base: unsafe { dst.as_mut_ptr().add(done) } as *mut libc::c_void,
            iov_len: dst.len() - done,
        };
        let remote = libc::iovec {
            iov_base: (addr as usize + done) as *mut libc::c_void,
            iov_len: dst.len() - done,
        };
        // SAFETY: `local` describes writable memory we own; the kernel
        // validates the remote range and fails with EFAULT if it is bad.
        let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "remote read returned no data",
            ));
        }
        done += n as usize;
    }
    Ok(())
}

impl Core {
    pub(super) fn new(rank: usize, size: usize) -> Core {
        Core {
            rank,
            slots: Vec::new(),
            free: Vec::new(),
            matching: MatchQueues::new(),
            recv_seq: vec![LaneMap::new(); size],
            control_out: Vec::new(),
            pids: vec![0; size],
            stats: EngineStats::default(),
            matches: Vec::new(),
            restartable: false,
            gone: None,
            gc_notices: Vec::new(),
            coordination_in: Vec::new(),
        }
    }

    pub(super) fn alloc(&mut self, kind: SlotKind, buf: RawBytes) -> ReqId {
        self.alloc_slot(kind, buf).0
    }

    /// A fresh slot for a request of `kind` on `buf`: its id, and the slot
    /// to fill in further.
    #[inline(always)]
    pub(super) fn alloc_slot(&mut self, kind: SlotKind, buf: RawBytes) -> (ReqId, &mut Slot) {
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    in_use: false,
                    done: false,
                    detached: false,
                    kind,
                    buf,
                    keepalive: None,
                    status: None,
                    call: CallId::default(),
                    any_source: false,
                    completed_at_start: false,
                    held_for_cancel: false,
                    pinned: false,
                    parts: Vec::new(),
                    result_part: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let s = &mut self.slots[idx as usize];
        // Generation 0 would make token 0, which means "no token".
        s.generation = s.generation.wrapping_add(1).max(1);
        s.in_use = true;
        s.done = false;
        s.detached = false;
        s.kind = kind;
        s.buf = buf;
        s.keepalive = None;
        s.status = None;
        s.call = CallId::default();
        s.any_source = false;
        s.completed_at_start = false;
        s.held_for_cancel = false;
        s.pinned = false;
        s.parts.clear();
        s.result_part = None;
        (ReqId::slot(idx, s.generation), s)
    }

    /// Send `id` just completed as it started: mark it if it is a standard
    /// send small enough to do so in every execution (see
    /// [`Slot::completed_at_start`]).
    pub(super) fn mark_completed_at_start(&mut self, id: ReqId, sync: bool) {
        if let Some(s) = self.slot_mut(id) {
            s.completed_at_start = !sync && s.done && s.buf.len <= EAGER_LIMIT;
        }
    }

    #[inline]
    pub(super) fn slot(&self, id: ReqId) -> Option<&Slot> {
        let (idx, generation) = id.key()?;
        self.slots
            .get(idx)
            .filter(|s| s.in_use && s.generation == generation)
    }

    #[inline]
    pub(super) fn slot_mut(&mut self, id: ReqId) -> Option<&mut Slot> {
        let (idx, generation) = id.key()?;
        self.slots
            .get_mut(idx)
            .filter(|s| s.in_use && s.generation == generation)
    }

    pub(super) fn free_slot(&mut self, id: ReqId) {
        if let Some(s) = self.slot_mut(id) {
            s.in_use = false;
            s.keepalive = None;
            s.status = None;
            if let Some((idx, _)) = id.key() {
                self.free.push(idx as u32);
            }
        }
    }

    /// Take the status of completed request `id` and free its slot (one
    /// lookup: this runs once per completed request).
    #[inline]
    pub(super) fn take_done(&mut self, id: ReqId) -> Result<Status> {
        // (`let … else` rather than `ok_or`: an `Error` built eagerly is
        // dropped through a call on the success path.)
        let Some((idx, generation)) = id.key() else {
            return Err(Error::RequestState(
                "an operation complete at start has no status in the engine",
            ));
        };
        let Some(s) = self
            .slots
            .get_mut(idx)
            .filter(|s| s.in_use && s.generation == generation)
        else {
            return Err(Error::RequestState("stale request handle"));
        };
        if !s.done {
            if s.kind == SlotKind::Group && self.group_done(id) {
                return self.take_group(id);
            }
            return Err(Error::RequestState("request is not complete"));
        }
        let st = s.status.take();
        s.in_use = false;
        s.keepalive = None;
        self.free.push(idx as u32);
        let Some(st) = st else {
            return Err(Error::RequestState("status already taken"));
        };
        Ok(st)
    }

    /// Every part of group `id` is done.
    pub(super) fn group_done(&self, id: ReqId) -> bool {
        self.slot(id).is_some_and(|g| {
            g.parts
                .iter()
                .all(|&p| p.is_complete_send() || self.slot(p).is_some_and(|s| s.done))
        })
    }

    /// Take the statuses of a done group's parts and free them and the
    /// group: its result part's status (or an empty one), or the first
    /// error among the parts (for a collective's, a receive that got more
    /// or fewer bytes than its buffer holds is one).
    fn take_group(&mut self, id: ReqId) -> Result<Status> {
        let (mut parts, result_part) = self
            .slot_mut(id)
            .map(|g| (std::mem::take(&mut g.parts), g.result_part))
            .unwrap_or_default();
        let result = match result_part {
            Some(k) => self.take_group_result(&parts, k),
            None => self.take_group_parts(&parts),
        };
        // A short list goes back to the slot, to keep its memory for the
        // next group there (a long one is let go: slots outlive groups).
        parts.clear();
        if parts.capacity() <= GROUP_PARTS_KEPT
            && let Some(g) = self.slot_mut(id)
        {
            g.parts = parts;
        }
        self.free_slot(id);
        result
    }

    /// [`Core::take_group`]'s parts, for a group without a result part.
    fn take_group_parts(&mut self, parts: &[ReqId]) -> Result<Status> {
        // A part of the wrong size is the group's status's error, as a
        // truncation is a receive's: the request completes (its caller
        // frees it and reports the error), only a failure to take a part
        // fails the call.
        let mut status = Status::new(usize::MAX, 0, 0, 0);
        let mut failed = None;
        for &p in parts {
            if p.is_complete_send() {
                continue;
            }
            let room = self.slot(p).map(|s| (s.kind == SlotKind::Recv, s.buf.len));
            match (self.take_done(p), room) {
                (Err(e), _) => {
                    failed.get_or_insert(e);
                }
                (Ok(st), Some((true, room))) if status.error.is_none() => {
                    let got = match st.error() {
                        Some(Error::Truncated { message_len, .. }) => *message_len,
                        _ => st.len(),
                    };
                    if got != room {
                        status.error = Some(Box::new(Error::Collective(format!(
                            "world rank {} sent {got} bytes where {room} were expected",
                            st.source()
                        ))));
                    }
                }
                (Ok(_), _) => {}
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(status),
        }
    }

    /// [`Core::take_group`] for a group whose status is part `k`'s (a
    /// sendrecv: its receive may be truncated, as any receive).
    fn take_group_result(&mut self, parts: &[ReqId], k: usize) -> Result<Status> {
        let mut result = Ok(Status::new(usize::MAX, 0, 0, 0));
        for (i, &p) in parts.iter().enumerate() {
            if p.is_complete_send() {
                continue;
            }
            match self.take_done(p) {
                Ok(st) if i == k => result = result.and(Ok(st)),
                Ok(_) => {}
                Err(e) => result = result.and(Err(e)),
            }
        }
        result
    }

    pub(super) fn set_status(&mut self, id: ReqId, st: Status) {
        if let Some(s) = self.slot_mut(id) {
            s.status = Some(st);
        }
    }

    pub(super) fn complete(&mut self, id: ReqId) {
        let Some(s) = self.slot_mut(id) else {
            return;
        };
        s.done = true;
        if s.detached {
            self.free_slot(id);
        }
    }

    /// Copy `data` into receive `id` and complete it (truncating if needed).
    fn fill(&mut self, id: ReqId, env: &Envelope, data: &[u8]) {
        // One lookup (this runs for every message received): copy, note
        // an ANY_SOURCE match (as `note_match`), set the status, complete.
        let Some((idx, generation)) = id.key() else {
            return;
        };
        let Some(slot) = self
            .slots
            .get_mut(idx)
            .filter(|s| s.in_use && s.generation == generation)
        else {
            return;
        };
        let buf_len = slot.buf.len;
        let n = data.len().min(buf_len);
        // SAFETY: `slot.buf` belongs to an active receive (Slot invariant).
        unsafe { slot.buf.as_mut_slice()[..n].copy_from_slice(&data[..n]) };
        if slot.any_source {
            slot.any_source = false;
            self.matches.push((slot.call, env.source));
        }
        self.stats.messages_received += 1;
        slot.status = Some(recv_status(env, buf_len));
        slot.done = true;
        if slot.detached {
            self.free_slot(id);
        }
    }

    /// Copy `bytes` into receive `id` at `offset`, dropping what does not
    /// fit (the receive then reports truncation).
    pub(super) fn write_at(&mut self, id: ReqId, offset: usize, bytes: &[u8]) {
        let Some(slot) = self.slot_mut(id) else {
            return;
        };
        let room = slot.buf.len.saturating_sub(offset);
        let n = bytes.len().min(room);
        if n > 0 {
            // SAFETY: `slot.buf` belongs to an active receive (Slot
            // invariant) and offset + n <= its length.
            unsafe { slot.buf.as_mut_slice()[offset..offset + n].copy_from_slice(&bytes[..n]) };
        }
    }

    /// Remember that an ANY_SOURCE receive matched (for the protocol),
    /// once: a receive matched at a message's first fragment is not
    /// reported again when the message completes (or matches again after
    /// its sender died mid-message).
    pub(super) fn note_match(&mut self, id: ReqId, source: usize) {
        if let Some(slot) = self.slot_mut(id)
            && slot.any_source
        {
            slot.any_source = false;
            let call = slot.call;
            self.matches.push((call, source));
        }
    }

    #[inline(always)]
    pub(super) fn recv_status(&mut self, env: &Envelope, buf_len: usize) -> Status {
        self.stats.messages_received += 1;
        recv_status(env, buf_len)
    }

    /// Check and advance the sequence number of `source`'s messages on
    /// context `ctx`.
    #[inline]
    pub(super) fn accept_seq(&mut self, source: usize, ctx: u32, seq: u64) -> Result<()> {
        let last = self.recv_seq[source].entry(ctx);
        if seq != *last + 1 {
            return Err(out_of_sequence(source, ctx, seq, *last + 1));
        }
        *last = seq;
        Ok(())
    }

    /// Is `seq` the next message of `source` on context `ctx`?
    #[inline]
    pub(super) fn check_seq(&self, source: usize, ctx: u32, seq: u64) -> Result<()> {
        let expected = self.recv_seq[source].get(ctx) + 1;
        if seq != expected {
            return Err(out_of_sequence(source, ctx, seq, expected));
        }
        Ok(())
    }

    /// A complete small message arrived (or was sent to self).
    ///
    /// (`env` by reference: a copy of an envelope just built field by field
    /// would be read back with wider loads that wait for earlier stores.)
    #[inline]
    pub(super) fn deliver_eager(
        &mut self,
        env: &Envelope,
        data: &[u8],
        sync: Option<u64>,
    ) -> Result<()> {
        if let Some(id) = self.matching.match_arrival(env) {
            self.fill(id, env, data);
            if let Some(token) = sync {
                self.ack(env.source, kind::SYNC_ACK, token, env.context, env.seq);
            }
        } else {
            self.matching.push_unexpected(
                *env,
                Unexpected::Eager {
                    data: data.to_vec(),
                    sync,
                },
            );
        }
        Ok(())
    }

    /// A reassembled message: like `deliver_eager` but the bytes are owned.
    pub(super) fn deliver_owned(&mut self, env: Envelope, data: Vec<u8>, sync: Option<u64>) {
        if let Some(id) = self.matching.match_arrival(&env) {
            self.fill(id, &env, &data);
            if let Some(token) = sync {
                self.ack(env.source, kind::SYNC_ACK, token, env.context, env.seq);
            }
        } else {
            self.matching
                .push_unexpected(env, Unexpected::Eager { data, sync });
        }
    }

    pub(super) fn deliver_self_sync(
        &mut self,
        env: Envelope,
        data: RawBytes,
        token: u64,
    ) -> Result<()> {
        if let Some(id) = self.matching.match_arrival(&env) {
            // SAFETY: the sender's buffer is live until its send completes,
            // which happens right here.
            let bytes = unsafe { data.as_slice() };
            self.fill(id, &env, bytes);
            self.ack(self.rank, kind::SYNC_ACK, token, env.context, env.seq);
        } else {
            self.matching
                .push_unexpected(env, Unexpected::SelfSync { data, token });
        }
        Ok(())
    }

    /// Acknowledge message `seq` on context `ctx` from `to` (token: the
    /// sender's request).
    pub(super) fn ack(&mut self, to: usize, k: u8, token: u64, ctx: u32, seq: u64) {
        let mut hdr = FrameHeader::new(k);
        hdr.aux1 = token;
        hdr.context = ctx;
        hdr.seq = seq;
        self.control_out.push((to, hdr));
    }

    /// Read a rendezvous message out of the sender's memory into receive `id`.
    pub(super) fn pull(&mut self, id: ReqId, env: &Envelope, addr: u64, token: u64) -> Result<()> {
        let Some(slot) = self.slot_mut(id) else {
            return Ok(());
        };
        let n = env.len.min(slot.buf.len);
        // SAFETY: `slot.buf` belongs to an active receive (Slot invariant).
        let dst = unsafe { &mut slot.buf.as_mut_slice()[..n] };
        let buf_len = slot.buf.len;
        read_remote(self.pids[env.source], addr, dst).map_err(|source| Error::RemoteRead {
            peer: env.source,
            len: n,
            source,
        })?;
        self.note_match(id, env.source);
        let st = self.recv_status(env, buf_len);
        self.set_status(id, st);
        self.complete(id);
        self.ack(env.source, kind::FIN, token, env.context, env.seq);
        Ok(())
    }

    /// A receive matched an unexpected message.
    pub(super) fn finish_unexpected(
        &mut self,
        id: ReqId,
        env: Envelope,
        u: Unexpected,
    ) -> Result<()> {
        match u {
            Unexpected::Eager { data, sync } => {
                self.fill(id, &env, &data);
                if let Some(token) = sync {
                    self.ack(env.source, kind::SYNC_ACK, token, env.context, env.seq);
                }
            }
            Unexpected::Rendezvous { addr, token } => self.pull(id, &env, addr, token)?,
            Unexpected::SelfSync { data, token } => {
                // SAFETY: the blocked or request-owned sender buffer is live
                // until the acknowledgement below completes its send.
                let bytes = unsafe { data.as_slice() };
                self.fill(id, &env, bytes);
                self.ack(self.rank, kind::SYNC_ACK, token, env.context, env.seq);
            }
        }
        Ok(())
    }
}

/// The status of a receive into `buf_len` bytes of the message `env`
/// (truncated if it is longer).
///
/// Inlined: built in registers and stored once into its slot (a status
/// written by a call and copied back with wider loads would wait for the
/// stores before it, a send's ring writes among them).
#[inline(always)]
fn recv_status(env: &Envelope, buf_len: usize) -> Status {
    let mut st = Status::new(env.source, env.tag, env.len.min(buf_len), env.seq);
    if env.len > buf_len {
        st.error = Some(truncated(env, buf_len));
    }
    st
}

/// The error of a receive into `buf_len` bytes of the longer message `env`.
#[cold]
#[inline(never)]
fn truncated(env: &Envelope, buf_len: usize) -> Box<Error> {
    Box::new(Error::Truncated {
        source_rank: env.source,
        tag: env.tag,
        message_len: env.len,
        buffer_len: buf_len,
    })
}

/// A message of `source` on `ctx` numbered `seq` where `expected` was due.
#[cold]
#[inline(never)]
fn out_of_sequence(source: usize, ctx: u32, seq: u64, expected: u64) -> Error {
    Error::CorruptFrame {
        peer: source,
        reason: format!("sequence number {seq} on context {ctx}, expected {expected}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_tokens_are_never_zero_even_when_generations_wrap() {
        let empty = RawBytes {
            ptr: std::ptr::null_mut(),
            len: 0,
        };
        let mut core = Core::new(0, 1);
        let id = core.alloc(SlotKind::Send, empty);
        core.free_slot(id);
        core.slots[0].generation = u32::MAX;
        let id = core.alloc(SlotKind::Send, empty);
        assert_eq!(id.key(), Some((0, 1)));
        assert_ne!(
            id.token(),
            0,
            "token 0 means a logged send with nothing to complete"
        );
    }

    #[test]
    fn request_ids_keep_what_they_were_made_from() {
        let call = CallId::new(CallId::PROCESS_LANE, u64::MAX);
        let sent = ReqId::sent(call);
        assert_eq!(sent.sent_call(), Some(call));
        assert_eq!(sent.at_start(), Some((call, true)));
        assert!(sent.is_complete_send() && sent.is_complete_at_start());
        assert_eq!((sent.key(), sent.token()), (None, 0));
        assert_eq!(format!("{sent:?}"), format!("sent {call}"));

        let first = CallId::new(0, 1);
        let received = ReqId::received(first);
        assert_eq!(received.sent_call(), None);
        assert_eq!(received.at_start(), Some((first, false)));
        assert!(!received.is_complete_send() && received.is_complete_at_start());
        assert_ne!(ReqId::received(call), sent);

        let slot = ReqId::slot(u32::MAX, 7);
        assert_eq!(slot.key(), Some((u32::MAX as usize, 7)));
        assert_eq!((slot.at_start(), slot.sent_call()), (None, None));
        assert!(!slot.is_complete_at_start());
        assert_eq!(ReqId::from_token(slot.token()), slot);
    }
}
