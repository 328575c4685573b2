//! Sends: the blocking fast path, starting a send (eager, single-copy
//! announcement or fragments), and writing queued frames to a peer.

use std::sync::atomic::Ordering;

use super::link::{Outgoing, Peer, message_header, ring, write_or_announce};
use super::requests::{RawBytes, ReqId, SlotKind};
use super::{EAGER_LIMIT, Engine};
use crate::error::{Error, Result};
use crate::matching::Envelope;
use crate::protocol::{OutgoingMessage, SendPlan};
use crate::shm::ring::{flags, kind};
use crate::status::Status;

impl Engine {
    // ----------------------------------------------------------------- sends

    /// Blocking-send fast path: write a small message straight into the
    /// ring. Returns false (nothing done) if the caller must take the
    /// general path.
    pub(crate) fn try_send_now(
        &mut self,
        dest: usize,
        tag: i32,
        ctx: u32,
        data: &[u8],
    ) -> Result<bool> {
        let seq = self.send_seq[dest].get(ctx) + 1;
        if !self.can_write_now(dest, ctx, seq, data.len()) {
            return Ok(false);
        }
        self.send_now(&mut outgoing(dest, ctx, tag, seq, data, false))?;
        Ok(true)
    }

    /// Send `msg`, which [`Engine::can_write_now`] accepted, from the
    /// caller's buffer; the protocol copies it after, while the receiver
    /// takes it.
    #[inline(always)]
    fn send_now(&mut self, msg: &mut OutgoingMessage<'_>) -> Result<()> {
        self.protocol_send(msg)?;
        self.write_now(msg)?;
        // Only a protocol that keeps payloads is asked: building and
        // reading back `Ok(SendPlan::Transmit)` through the stack would
        // wait for the ring writes just made (see `ReqId`).
        if self.caps.keeps_payloads {
            self.protocol_keep(msg)?;
        }
        Ok(())
    }

    /// Can a standard send of `len` bytes, sequence `seq` on `ctx`, to
    /// `dest` be written whole into the ring right now?
    #[inline(always)]
    fn can_write_now(&mut self, dest: usize, ctx: u32, seq: u64, len: usize) -> bool {
        if len > EAGER_LIMIT
            || dest == self.core.rank
            || self.failed.is_some()
            || self.suppressed(dest, ctx, seq)
        {
            return false;
        }
        let Some(peer) = self.peers[dest].as_mut() else {
            return false;
        };
        !peer.broken && peer.pending.is_empty() && peer.link.has_room(kind::EAGER, len)
    }

    /// Write `msg` into the ring to its destination, which
    /// [`Engine::can_write_now`] said has room (the protocol hook between
    /// them runs no engine code, and room only grows meanwhile).
    #[inline(always)]
    fn write_now(&mut self, msg: &OutgoingMessage<'_>) -> Result<()> {
        let hdr = message_header(
            kind::EAGER,
            msg.tag,
            msg.context,
            msg.seq,
            msg.payload.len(),
        );
        let Some(peer) = self.peers[msg.dest].as_mut() else {
            return Err(Error::RequestState("peer vanished"));
        };
        vpml_fault_points::fault_point!("send.before_frame");
        if !peer.link.try_write(&hdr, msg.payload) {
            return Err(Error::RequestState("ring space vanished"));
        }
        peer.sent_while_skipping_looks(msg.payload.len());
        vpml_fault_points::fault_point!("send.after_frame");
        *self.send_seq[msg.dest].entry(msg.context) = msg.seq;
        self.core.stats.messages_sent += 1;
        self.core.stats.bytes_sent += msg.payload.len() as u64;
        self.ring_doorbell(msg.dest);
        Ok(())
    }

    /// Start a send of `len` bytes at `ptr`: a request with a table entry,
    /// whose status gives the destination, tag and length.
    ///
    /// # Safety
    /// `ptr..ptr+len` stays valid and unmodified until the returned request
    /// completes (the caller owns it through a request handle or blocks).
    pub(crate) unsafe fn start_send(
        &mut self,
        dest: usize,
        tag: i32,
        ctx: u32,
        ptr: *const u8,
        len: usize,
        sync: bool,
    ) -> Result<ReqId> {
        // SAFETY: caller contract.
        let id = unsafe { self.start_send_lean(dest, tag, ctx, ptr, len, sync)? };
        let Some(call) = id.sent_call() else {
            return Ok(id);
        };
        let status = Status::new(dest, tag, len, self.send_seq[dest].get(ctx));
        let data = RawBytes {
            ptr: ptr as *mut u8,
            len,
        };
        let (id, s) = self.core.alloc_slot(SlotKind::Send, data);
        s.call = call;
        s.completed_at_start = true;
        s.status = Some(status);
        // Complete (a fresh slot is not detached).
        s.done = true;
        Ok(id)
    }

    /// Start a send of `len` bytes at `ptr`, as [`Engine::start_send`],
    /// except that a standard send written whole into the ring at once
    /// takes no table entry: its id only says so (and which call made it),
    /// every completion call finds it done, and its status is the
    /// caller's to make. What a binding with its own request table uses.
    ///
    /// # Safety
    /// As [`Engine::start_send`].
    pub(crate) unsafe fn start_send_lean(
        &mut self,
        dest: usize,
        tag: i32,
        ctx: u32,
        ptr: *const u8,
        len: usize,
        sync: bool,
    ) -> Result<ReqId> {
        self.check_alive()?;
        let mut data = RawBytes {
            ptr: ptr as *mut u8,
            len,
        };
        let seq = self.send_seq[dest].get(ctx) + 1;
        let mut logged = false;
        // SAFETY: caller contract.
        let payload = unsafe { data.as_slice() };
        let mut msg = outgoing(dest, ctx, tag, seq, payload, sync);
        if !sync && self.can_write_now(dest, ctx, seq, len) {
            // As `try_send_now`: a standard send within the eager limit
            // (`can_write_now`), complete at once.
            self.send_now(&mut msg)?;
            return Ok(ReqId::sent(msg.call));
        }
        self.protocol_send(&mut msg)?;
        let call = msg.call;
        // A large message to a single-copy peer leaves first: the receiver
        // reads it out of the caller's buffer while the protocol copies it
        // into its log (after the announcement below), so the two copies
        // overlap; the send completes on the receiver's FIN, as without a
        // protocol. Anything else is kept first and sent from the copy.
        let read_in_place = len > EAGER_LIMIT
            && dest != self.core.rank
            && !self.suppressed(dest, ctx, seq)
            && self.peers[dest].as_ref().is_some_and(|p| p.single_copy);
        let plan = if read_in_place {
            SendPlan::Transmit
        } else {
            msg.from_copy = true;
            self.protocol_keep(&msg)?
        };
        let mut loan = None;
        if let SendPlan::Logged(kept) = plan
            && kept.len() == len
        {
            let ptr = kept.as_ptr();
            data = RawBytes {
                ptr: ptr as *mut u8,
                len,
            };
            loan = kept.loan();
            logged = true;
        }
        let ptr = data.ptr as *const u8;
        let id = self.core.alloc(SlotKind::Send, data);
        if let Some(s) = self.core.slot_mut(id) {
            s.call = call;
        }
        *self.send_seq[dest].entry(ctx) = seq;
        self.core.stats.messages_sent += 1;
        self.core.stats.bytes_sent += len as u64;
        let me = self.core.rank;
        if dest == me {
            let env = Envelope {
                source: me,
                tag,
                context: ctx,
                seq,
                len,
            };
            self.core.set_status(id, Status::new(dest, tag, len, seq));
            if sync {
                self.core.deliver_self_sync(env, data, id.token())?;
            } else {
                // SAFETY: caller contract; the bytes are copied right away.
                let bytes = unsafe { data.as_slice() };
                self.core.deliver_eager(&env, bytes, None)?;
                self.core.complete(id);
            }
            self.core.mark_completed_at_start(id, sync);
            self.flush_control();
            self.report_matches()?;
            return Ok(id);
        }
        self.core.set_status(id, Status::new(dest, tag, len, seq));
        if self.suppressed(dest, ctx, seq) {
            // Re-executed after a restart, and the receiver already has it:
            // logged (above), not transmitted. A synchronous send completes
            // only once the receiver has matched it, as the first time.
            // (Replayed alone, there is no receiver to wait for.)
            let alone = self.replay_alone;
            let peer = self.peer_mut(dest)?;
            let matched = alone
                || peer
                    .sync_unmatched
                    .as_ref()
                    .is_some_and(|unmatched| !unmatched.contains(&(ctx, seq)));
            if sync && !matched {
                peer.sync_waiting.insert((ctx, seq), id.token());
            } else {
                self.core.complete(id);
                self.core.mark_completed_at_start(id, sync);
            }
            return Ok(id);
        }
        // A logged standard send is complete: its bytes live in the log,
        // and the transport sends from there (no completion token needed).
        let token = if logged && !sync {
            self.core.complete(id);
            self.core.mark_completed_at_start(id, sync);
            0
        } else {
            id.token()
        };
        let pending_id = (token != 0).then_some(id);
        let item = if len <= EAGER_LIMIT {
            let mut hdr = message_header(kind::EAGER, tag, ctx, seq, len);
            if sync {
                hdr.flags |= flags::SYNC;
                hdr.aux0 = id.token();
            }
            Outgoing::Frame {
                hdr,
                data,
                complete: pending_id.filter(|_| !sync),
                _loan: loan,
            }
        } else if read_in_place {
            let mut hdr = message_header(kind::RTS, tag, ctx, seq, len);
            hdr.aux0 = ptr as u64;
            hdr.aux1 = token;
            Outgoing::header_only(hdr)
        } else {
            let mut hdr = message_header(kind::FRAG, tag, ctx, seq, len);
            if sync {
                hdr.flags |= flags::SYNC;
                hdr.aux1 = id.token();
            }
            Outgoing::Fragments {
                hdr,
                data,
                offset: 0,
                complete: pending_id.filter(|_| !sync),
                _loan: loan,
            }
        };
        let restartable = self.core.restartable;
        let peer = self.peer_mut(dest)?;
        if sync && restartable {
            peer.sync_waiting.insert((ctx, seq), id.token());
        } else if read_in_place && restartable {
            peer.fin_waiting.insert((ctx, seq), id.token());
        }
        vpml_fault_points::fault_point!("send.before_frame");
        peer.pending.push_back(item);
        self.push_pending(dest);
        vpml_fault_points::fault_point!("send.after_frame");
        if read_in_place {
            // The send completes only after this (its FIN cannot be
            // handled before the call returns).
            self.protocol_keep(&msg)?;
        }
        Ok(id)
    }

    fn peer_mut(&mut self, p: usize) -> Result<&mut Peer> {
        let size = self.size;
        match self.peers.get_mut(p).and_then(Option::as_mut) {
            Some(peer) => Ok(peer),
            None => Err(Error::InvalidRank {
                rank: p as i64,
                size,
            }),
        }
    }

    /// Write as many queued frames to `dest` as fit. Returns true if any was written.
    pub(super) fn push_pending(&mut self, dest: usize) -> bool {
        let Some(peer) = self.peers[dest].as_mut() else {
            return false;
        };
        let mut wrote = false;
        while let Some(item) = peer.pending.front_mut() {
            match item {
                Outgoing::Frame {
                    hdr,
                    data,
                    complete,
                    ..
                } => {
                    // SAFETY: `data` belongs to an active send (start_send contract).
                    let bytes = unsafe { data.as_slice() };
                    if !write_or_announce(&mut peer.link, hdr, bytes) {
                        break;
                    }
                    wrote = true;
                    if let Some(id) = complete.take() {
                        self.core.complete(id);
                    }
                    peer.pending.pop_front();
                }
                Outgoing::Fragments {
                    hdr,
                    data,
                    offset,
                    complete,
                    ..
                } => {
                    let mut finished = false;
                    loop {
                        let chunk = (data.len - *offset).min(peer.link.fragment_size());
                        let mut h = *hdr;
                        h.aux0 = chunk as u64;
                        if *offset == 0 {
                            h.flags |= flags::FIRST;
                        }
                        // SAFETY: as above; offset + chunk <= len.
                        let bytes = unsafe {
                            RawBytes {
                                ptr: data.ptr.add(*offset),
                                len: chunk,
                            }
                            .as_slice()
                        };
                        if !write_or_announce(&mut peer.link, &h, bytes) {
                            break;
                        }
                        wrote = true;
                        *offset += chunk;
                        if *offset == data.len {
                            finished = true;
                            break;
                        }
                    }
                    if !finished {
                        break;
                    }
                    if let Some(id) = complete.take() {
                        self.core.complete(id);
                    }
                    peer.pending.pop_front();
                }
            }
        }
        if wrote {
            self.ring_doorbell(dest);
        }
        wrote
    }

    /// Give the frames read from `p`'s ring back to its writer (lazily, see
    /// `RingReader::publish`), waking it if it waits for room.
    pub(super) fn release_read(&mut self, p: usize) {
        if self
            .peers
            .get_mut(p)
            .and_then(Option::as_mut)
            .is_some_and(|peer| peer.link.publish())
        {
            self.ring_doorbell(p);
        }
    }

    /// Wake `dest` if it sleeps on its doorbell.
    fn ring_doorbell(&self, dest: usize) {
        let shm = self.peers[dest].as_ref().is_some_and(|p| p.link.is_shm());
        if shm && let Some(mb) = self.mailboxes[dest].as_ref() {
            ring(
                mb.doorbell(),
                mb.sleeps_with_membarrier().load(Ordering::Relaxed) != 0,
            );
        }
    }

    /// Queue the control frames produced while handling arrivals.
    pub(super) fn flush_control(&mut self) {
        let out = std::mem::take(&mut self.core.control_out);
        for (p, hdr) in out {
            if p == self.core.rank {
                // Acknowledgements to ourselves complete the send directly.
                self.core.complete(ReqId::from_token(hdr.aux1));
                continue;
            }
            if let Some(peer) = self.peers[p].as_mut() {
                peer.pending.push_back(Outgoing::header_only(hdr));
            }
            self.push_pending(p);
        }
    }
}

/// A message about to leave, before the protocol gave it a call id.
fn outgoing<'a>(
    dest: usize,
    context: u32,
    tag: i32,
    seq: u64,
    payload: &'a [u8],
    synchronous: bool,
) -> OutgoingMessage<'a> {
    OutgoingMessage {
        call: crate::protocol::CallId::default(),
        dest,
        context,
        tag,
        seq,
        payload,
        synchronous,
        from_copy: false,
    }
}
