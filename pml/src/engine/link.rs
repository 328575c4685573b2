//! How a peer is reached ([`Link`]), the channel state kept for it
//! ([`Peer`]), and the frames waiting to be written to it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};

use super::FRAGMENT;
use super::requests::{RawBytes, ReqId};
use crate::lanes::LaneMap;
use crate::matching::{Envelope, Posted};
use crate::protocol::{Loan, LoggedMessage};
use crate::shm::futex;
use crate::shm::ring::{FrameHeader, RingReader, RingWriter, kind};
use crate::sim::SimLink;
use crate::tcp::TcpConn;

/// Frames waiting for space in a peer's ring, in channel order.
pub(super) enum Outgoing {
    /// One frame; `complete` names a send to finish once it is written.
    /// `_loan` keeps the protocol's memory `data` lies in (held, never
    /// read: dropped with the item once written).
    Frame {
        hdr: FrameHeader,
        data: RawBytes,
        complete: Option<ReqId>,
        _loan: Option<Loan>,
    },
    /// A large message sent as fragments (no single-copy path available).
    Fragments {
        hdr: FrameHeader,
        data: RawBytes,
        offset: usize,
        complete: Option<ReqId>,
        _loan: Option<Loan>,
    },
}

impl Outgoing {
    /// Is there room in `w` for this item's next frame?
    pub(super) fn fits(&self, w: &mut Link) -> bool {
        match self {
            Outgoing::Frame { hdr, data, .. } => w.has_room(hdr.kind, data.len),
            Outgoing::Fragments { data, offset, .. } => {
                let frag = w.fragment_size();
                w.has_room(kind::FRAG, (data.len - offset).min(frag))
            }
        }
    }
}

/// A fragmented message being reassembled.
pub(super) struct Partial {
    pub(super) env: Envelope,
    /// Where the fragments go.
    pub(super) dest: PartialDest,
    /// Bytes received so far.
    pub(super) got: usize,
    pub(super) sync: Option<u64>,
}

/// A fragmented message is copied straight into the receive it matched at
/// its first fragment, or, if none was posted, collected for the
/// unexpected queue.
pub(super) enum PartialDest {
    Posted(Posted<ReqId>),
    Buffered(Vec<u8>),
}

impl Outgoing {
    /// A frame that is its header alone (control frames, RTS).
    pub(super) fn header_only(hdr: FrameHeader) -> Outgoing {
        Outgoing::Frame {
            hdr,
            data: RawBytes {
                ptr: std::ptr::null_mut(),
                len: 0,
            },
            complete: None,
            _loan: None,
        }
    }
}

/// Channel state for one peer.
pub(super) struct Peer {
    pub(super) link: Link,
    pub(super) pending: VecDeque<Outgoing>,
    pub(super) partial: Option<Partial>,
    /// Large messages to this peer use single-copy reads (shared memory
    /// with cross-process reads allowed).
    pub(super) single_copy: bool,
    /// The peer's process died (or its link was dropped for a newer
    /// incarnation): nothing is read or written until the new process
    /// connects.
    pub(super) broken: bool,
    /// Synchronous sends to this peer waiting for their acknowledgement,
    /// by context and sequence number (with a protocol: a re-sent message
    /// carries the token again).
    pub(super) sync_waiting: BTreeMap<(u32, u64), u64>,
    /// Standard sends to this peer read in place (single copy from the
    /// caller's buffer) and waiting for the receiver's FIN, by context
    /// and sequence number, when the peer can restart: its next
    /// incarnation gets them from the sender log, so they complete when
    /// its link is dropped.
    pub(super) fin_waiting: BTreeMap<(u32, u64), u64>,
    /// Our synchronous messages the peer holds unmatched, as its newer
    /// process (or the survivor we reconnected to) told us after the link
    /// came up; `None` until it has. A re-executed synchronous send that
    /// the peer already has completes at once unless it is in this set,
    /// and otherwise when the peer acknowledges it (by context and
    /// sequence number).
    pub(super) sync_unmatched: Option<BTreeSet<(u32, u64)>>,
    /// The list being received (`SYNC_UNMATCHED` frames before `SYNC_STATE_END`).
    pub(super) sync_unmatched_incoming: BTreeSet<(u32, u64)>,
    /// How many of our messages on each context the peer had received,
    /// being received (`SYNC_RECEIVED` frames before `SYNC_STATE_END`).
    pub(super) sync_received_incoming: LaneMap<u64>,
    /// Nonblocking receives from this peer still to post without a look
    /// at its ring, after one found it empty, or in an exchange
    /// (`Engine::skips_look`); zero once a progress pass read the ring.
    pub(super) looks_to_skip: u32,
}

impl Peer {
    pub(super) fn new(link: Link, single_copy: bool) -> Peer {
        Peer {
            link,
            pending: VecDeque::new(),
            partial: None,
            single_copy,
            broken: false,
            sync_waiting: BTreeMap::new(),
            fin_waiting: BTreeMap::new(),
            sync_unmatched: None,
            sync_unmatched_incoming: BTreeSet::new(),
            sync_received_incoming: LaneMap::new(),
            looks_to_skip: 0,
        }
    }

    /// A receive found this peer's ring empty: the next few do not look
    /// (`Engine::skips_look`).
    pub(super) fn looked_empty(&mut self) {
        self.looks_to_skip = super::recv::LOOKS_SKIPPED_AFTER_EMPTY;
    }

    /// A message of `len` bytes went to this peer. If it is small and
    /// receives from the peer skip their look at its ring, this is an
    /// exchange (each side posts receives and sends to the other, then
    /// waits), whose receives are better left to the wait (see
    /// `Engine::skips_look`).
    #[inline(always)]
    pub(super) fn sent_while_skipping_looks(&mut self, len: usize) {
        if self.looks_to_skip > 0 && len <= super::recv::EXCHANGED_MESSAGE_MAX {
            self.looks_to_skip = super::recv::LOOKS_SKIPPED_WHILE_EXCHANGING;
        }
    }
}

/// How a peer is reached: a pair of shared-memory rings, or a TCP connection.
pub(super) enum Link {
    Shm {
        writer: RingWriter,
        reader: RingReader,
    },
    Tcp(TcpConn),
    /// No link: the peer died and its next incarnation has not connected.
    Dead,
    /// A replayed rank (`vpml replay`): the peer's recorded messages, as
    /// eager frames; what is written is dropped (checked by the protocol).
    Feed(VecDeque<LoggedMessage>),
    /// A rank of the simulator (`vpml-sim`): in-memory pipes.
    Sim(SimLink),
}

/// The frame a recorded message is read as.
fn feed_header(m: &LoggedMessage) -> FrameHeader {
    message_header(kind::EAGER, m.tag, m.context, m.seq, m.bytes.len())
}

impl Link {
    pub(super) fn is_shm(&self) -> bool {
        matches!(self, Link::Shm { .. })
    }
    #[inline(always)]
    pub(super) fn has_room(&mut self, k: u8, len: usize) -> bool {
        match self {
            Link::Shm { writer, .. } => writer.has_room(k, len),
            Link::Tcp(c) => c.has_room(k, len),
            Link::Dead => false,
            Link::Feed(_) => true,
            Link::Sim(l) => l.has_room(),
        }
    }
    #[inline(always)]
    pub(super) fn try_write(&mut self, hdr: &FrameHeader, payload: &[u8]) -> bool {
        match self {
            Link::Shm { writer, .. } => writer.try_write(hdr, payload),
            Link::Tcp(c) => c.try_write(hdr, payload),
            Link::Dead => false,
            Link::Feed(_) => true,
            Link::Sim(l) => l.try_write(hdr, payload),
        }
    }
    fn announce_waiting(&mut self, k: u8, len: usize) -> bool {
        match self {
            Link::Shm { writer, .. } => writer.announce_waiting(k, len),
            Link::Tcp(c) => c.has_room(k, len),
            Link::Dead => false,
            Link::Feed(_) => true,
            Link::Sim(l) => l.has_room(),
        }
    }
    pub(super) fn has_frame(&self) -> bool {
        match self {
            Link::Shm { reader, .. } => reader.has_frame(),
            Link::Tcp(c) => c.has_frame(),
            Link::Dead => false,
            Link::Feed(q) => !q.is_empty(),
            Link::Sim(l) => l.has_frame(),
        }
    }
    pub(super) fn peek(&mut self) -> std::result::Result<Option<FrameHeader>, String> {
        match self {
            Link::Shm { reader, .. } => reader.peek(),
            Link::Tcp(c) => c.peek(),
            Link::Dead => Ok(None),
            Link::Feed(q) => Ok(q.front().map(feed_header)),
            Link::Sim(l) => Ok(l.peek()),
        }
    }
    pub(super) fn payload(
        &self,
        hdr: &FrameHeader,
        len: usize,
    ) -> std::result::Result<&[u8], String> {
        match self {
            Link::Shm { reader, .. } => reader.payload(hdr, len),
            Link::Tcp(c) => c.payload(hdr, len),
            Link::Dead => Err("no link".into()),
            Link::Feed(q) => match q.front() {
                Some(m) if m.bytes.len() == len && m.seq == hdr.seq => {
                    // SAFETY: the protocol keeps the recorded log mapped
                    // (and unchanged) as long as the engine lives.
                    Ok(unsafe { m.bytes.as_slice() })
                }
                _ => Err("recorded message out of step".into()),
            },
            Link::Sim(l) => l.payload(len),
        }
    }
    pub(super) fn consume(&mut self, hdr: &FrameHeader) {
        match self {
            Link::Shm { reader, .. } => reader.consume(hdr),
            Link::Tcp(c) => c.consume(hdr),
            Link::Dead => {}
            Link::Feed(q) => {
                q.pop_front();
            }
            Link::Sim(l) => l.consume(),
        }
    }
    /// Over TCP, the header of a large fragment whose payload is still on
    /// its way (see [`crate::tcp::TcpConn::incomplete_fragment`]).
    pub(super) fn incomplete_fragment(&self) -> Option<FrameHeader> {
        match self {
            Link::Tcp(c) => c.incomplete_fragment(),
            _ => None,
        }
    }
    /// Start reading that fragment's payload into `dst` (TCP only).
    ///
    /// # Safety
    /// As [`crate::tcp::TcpConn::start_direct`].
    pub(super) unsafe fn start_direct(&mut self, hdr: FrameHeader, dst: *mut u8) {
        if let Link::Tcp(c) = self {
            // SAFETY: the caller's contract.
            unsafe { c.start_direct(hdr, dst) };
        }
    }
    /// Go on with a direct read: the frame's header once its payload is
    /// all in place.
    pub(super) fn continue_direct(&mut self) -> Option<FrameHeader> {
        match self {
            Link::Tcp(c) => c.continue_direct(),
            _ => None,
        }
    }
    /// Is a direct read under way?
    pub(super) fn direct_pending(&self) -> bool {
        matches!(self, Link::Tcp(c) if c.direct_pending())
    }
    /// Forget a direct read whose buffer is going away.
    pub(super) fn abandon_direct(&mut self) {
        if let Link::Tcp(c) = self {
            c.abandon_direct();
        }
    }
    /// Payload bytes per fragment of a large message.
    pub(super) fn fragment_size(&self) -> usize {
        match self {
            Link::Tcp(_) => crate::tcp::MAX_FRAME_PAYLOAD,
            _ => FRAGMENT,
        }
    }
    /// Bytes accepted but not yet handed to the operating system.
    pub(super) fn unsent(&self) -> usize {
        match self {
            Link::Shm { .. } | Link::Dead | Link::Feed(_) | Link::Sim(_) => 0,
            Link::Tcp(c) => c.queued(),
        }
    }
    /// Hand consumed space back; true if the writer asked to be woken.
    pub(super) fn publish(&mut self) -> bool {
        match self {
            Link::Shm { reader, .. } => reader.publish(),
            Link::Tcp(c) => {
                c.flush();
                false
            }
            Link::Dead | Link::Feed(_) | Link::Sim(_) => false,
        }
    }
}

/// Write a frame, or, if the ring is full, ask the reader to ring our
/// doorbell when it frees space (and try once more in case it just did).
pub(super) fn write_or_announce(w: &mut Link, hdr: &FrameHeader, bytes: &[u8]) -> bool {
    w.try_write(hdr, bytes)
        || (w.announce_waiting(hdr.kind, bytes.len()) && w.try_write(hdr, bytes))
}

/// Wake the owner of `bell` if it sleeps or is about to, after a frame
/// was published to it; `owner_membarrier`: the owner said it sleeps with
/// membarrier (the barrier pairs with its arming, see
/// [`crate::shm::doorbell_fence`]).
pub(super) fn ring(bell: &AtomicU32, owner_membarrier: bool) {
    crate::shm::doorbell_fence::before_ring(owner_membarrier);
    if bell.load(Ordering::Relaxed) != 0 {
        bell.store(0, Ordering::Relaxed);
        futex::wake(bell);
    }
}

/// The header of an application message of frame kind `k`.
pub(super) fn message_header(k: u8, tag: i32, ctx: u32, seq: u64, len: usize) -> FrameHeader {
    let mut hdr = FrameHeader::new(k);
    hdr.tag = tag;
    hdr.context = ctx;
    hdr.seq = seq;
    hdr.msg_len = len as u64;
    hdr
}

#[cfg(test)]
mod tests {
    use super::super::recv::{
        EXCHANGED_MESSAGE_MAX, LOOKS_SKIPPED_AFTER_EMPTY, LOOKS_SKIPPED_WHILE_EXCHANGING,
    };
    use super::*;

    #[test]
    fn a_small_send_extends_the_skipped_looks_only_while_they_are_skipped() {
        let mut p = Peer::new(Link::Dead, false);
        // Not skipping: a send is no exchange.
        p.sent_while_skipping_looks(1);
        assert_eq!(p.looks_to_skip, 0);
        p.looked_empty();
        assert_eq!(p.looks_to_skip, LOOKS_SKIPPED_AFTER_EMPTY);
        // A large message is no exchange either.
        p.sent_while_skipping_looks(EXCHANGED_MESSAGE_MAX + 1);
        assert_eq!(p.looks_to_skip, LOOKS_SKIPPED_AFTER_EMPTY);
        p.sent_while_skipping_looks(EXCHANGED_MESSAGE_MAX);
        assert_eq!(p.looks_to_skip, LOOKS_SKIPPED_WHILE_EXCHANGING);
        const { assert!(LOOKS_SKIPPED_WHILE_EXCHANGING > LOOKS_SKIPPED_AFTER_EMPTY) };
    }
}
