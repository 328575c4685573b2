//! Single-producer/single-consumer frame ring in shared memory.
//!
//! Layout of one ring: a 128-byte control block (the reader's `head` on the
//! first cache line, the writer's `writer_waiting` flag on the second), then
//! `cap` bytes of frames. Positions are absolute byte counts that only grow;
//! `position % cap` is the offset in the data area (`cap` is a power of
//! two: a mask, not a division, on every poll). Every frame starts on a
//! 64-byte boundary with a [`FrameHeader`] whose first word, the *stamp*,
//! is `position + 1` and is stored last (release). The reader polls the stamp
//! at its head: one cache line carries both the "ready" signal and a small
//! message.
//!
//! Invariant that makes stale data harmless: every 64-byte-aligned word of
//! free space is zero. The reader zeroes the line-start words of each frame
//! it consumes before handing the space back, so old payload bytes can never
//! be mistaken for a stamp, and the writer writes nothing outside its frame
//! (it only reads back the stamp of its last frame, see below).
//! Small eager messages start right after a 48-byte header, so up to 16
//! bytes travel in the same cache line as the stamp. A frame that does not
//! fit before the end of the data area is preceded by a `SKIP` frame
//! covering the rest of the lap. A writer whose reader has caught up starts
//! the next lap early, after a few KiB (see `RingWriter::wrap_if_drained`),
//! so that small messages reuse cache lines both cores already hold.
//!
//! The unit tests below also run under Miri, whose data-race detector checks
//! the writer/reader protocol on two threads (Miri's weak-memory emulation
//! crashes on this pattern today, so it is turned off):
//! `MIRIFLAGS=-Zmiri-disable-weak-memory-emulation cargo +nightly miri test -p vpml-pml --lib shm::ring`.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

/// Frames start on this boundary.
pub(crate) const FRAME_ALIGN: usize = 64;
/// Bytes reserved for the header at the start of each frame.
pub(crate) const HEADER_LEN: usize = 64;
/// Where the payload of an `EAGER` frame starts (it has no `aux1`).
pub(crate) const EAGER_PAYLOAD: usize = 48;
/// Bytes of the control block in front of the data area.
pub(crate) const RING_CONTROL: usize = 128;

/// Kinds of frames.
pub(crate) mod kind {
    /// A whole message in the frame.
    pub const EAGER: u8 = 1;
    /// Ready to send: the receiver copies `msg_len` bytes from address `aux0` of the sender.
    pub const RTS: u8 = 2;
    /// Rendezvous finished: the send identified by `aux1` may complete.
    pub const FIN: u8 = 3;
    /// A synchronous send identified by `aux1` was matched.
    pub const SYNC_ACK: u8 = 4;
    /// One fragment of a large message (`aux0` = bytes in this frame); the
    /// header fields of the first fragment describe the whole message.
    pub const FRAG: u8 = 5;
    /// Padding to the end of the lap.
    pub const SKIP: u8 = 6;
    /// The sender checkpointed: log records to it on `context` up to
    /// `seq` may be freed.
    pub const GC: u8 = 7;
    /// After a link to a newer process of the peer is set up: one of the
    /// peer's synchronous messages (`context`, `seq`) waits here unmatched.
    pub const SYNC_UNMATCHED: u8 = 8;
    /// Ends the `SYNC_UNMATCHED` and `SYNC_RECEIVED` lists: every other
    /// synchronous message of the peer that we received has matched (its
    /// acknowledgement went to the dead process).
    pub const SYNC_STATE_END: u8 = 9;
    /// After a link to a newer process of the peer is set up, before
    /// `SYNC_STATE_END`: we received the peer's messages on `context` up
    /// to `seq`.
    pub const SYNC_RECEIVED: u8 = 10;
    /// Coordinated checkpointing: the sender proposes to take global
    /// checkpoint `aux0` at its checkpoint call number `seq`.
    pub const COORD_PROPOSE: u8 = 11;
    /// Coordinated checkpointing: the sender had sent `seq` messages on
    /// `context` when it reached the checkpoint (a bookmark).
    pub const COORD_BOOKMARK: u8 = 12;
    /// Ends the sender's bookmarks for global checkpoint `aux0`: every
    /// message it sent before the checkpoint is ahead of this frame.
    pub const COORD_BOOKMARKS_END: u8 = 13;
    /// The sender has written its part of global checkpoint `aux0`.
    pub const COORD_WRITTEN: u8 = 14;
    /// The sender finalizes after `seq` checkpoint calls: it makes no more.
    pub const COORD_DONE: u8 = 15;
}

/// Header flags.
pub(crate) mod flags {
    /// The sender waits for a `SYNC_ACK` (synchronous send), token in `aux1`.
    pub const SYNC: u8 = 1;
    /// First fragment of a fragmented message.
    pub const FIRST: u8 = 2;
}

/// The fixed header of every frame.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub(crate) struct FrameHeader {
    stamp: u64,
    /// Bytes this frame occupies in the ring (header, payload, padding).
    pub frame_len: u32,
    /// One of [`kind`].
    pub kind: u8,
    /// Bits of [`flags`].
    pub flags: u8,
    _pad: u16,
    /// Communicator context id.
    pub context: u32,
    /// Message tag.
    pub tag: i32,
    /// Sequence number of the message on its context (per ordered pair).
    pub seq: u64,
    /// Length of the whole message.
    pub msg_len: u64,
    /// Kind-specific (EAGER: sync token; RTS: sender address; FRAG: bytes
    /// in this frame).
    pub aux0: u64,
    /// Kind-specific (sender's request token for RTS/FIN/SYNC_ACK and
    /// synchronous FRAG). Not present in EAGER frames (payload overlaps).
    pub aux1: u64,
}

const _: () = assert!(std::mem::size_of::<FrameHeader>() <= HEADER_LEN);
const _: () = assert!(EAGER_PAYLOAD <= std::mem::size_of::<FrameHeader>());

impl FrameHeader {
    /// A header of the given kind with everything else zero.
    pub(crate) fn new(kind: u8) -> Self {
        FrameHeader {
            kind,
            ..Default::default()
        }
    }

    /// The header after its stamp, as the six words that lie in memory
    /// at bytes 8..56 of a frame, built in registers.
    ///
    /// Writing these rather than copying the header's bytes off the stack
    /// matters: the copy read the fields back with loads wider than the
    /// stores that made them, which the store buffer cannot forward, so
    /// every send waited there for the previous send's ring writes to
    /// reach cache lines the reader holds.
    #[inline(always)]
    fn words_after_stamp(&self) -> [u64; 6] {
        let [a, b, c, d] = self.frame_len.to_ne_bytes();
        let [e, f] = self._pad.to_ne_bytes();
        let [g, h, i, j] = self.context.to_ne_bytes();
        let [k, l, m, n] = self.tag.to_ne_bytes();
        [
            u64::from_ne_bytes([a, b, c, d, self.kind, self.flags, e, f]),
            u64::from_ne_bytes([g, h, i, j, k, l, m, n]),
            self.seq,
            self.msg_len,
            self.aux0,
            self.aux1,
        ]
    }
}

// `words_after_stamp` follows this layout.
const _: () = {
    assert!(std::mem::offset_of!(FrameHeader, frame_len) == 8);
    assert!(std::mem::offset_of!(FrameHeader, kind) == 12);
    assert!(std::mem::offset_of!(FrameHeader, flags) == 13);
    assert!(std::mem::offset_of!(FrameHeader, _pad) == 14);
    assert!(std::mem::offset_of!(FrameHeader, context) == 16);
    assert!(std::mem::offset_of!(FrameHeader, tag) == 20);
    assert!(std::mem::offset_of!(FrameHeader, seq) == 24);
    assert!(std::mem::offset_of!(FrameHeader, msg_len) == 32);
    assert!(std::mem::offset_of!(FrameHeader, aux0) == 40);
    assert!(std::mem::offset_of!(FrameHeader, aux1) == 48);
    assert!(std::mem::size_of::<FrameHeader>() == 56);
};

/// Offset of the payload in a frame of kind `k`.
fn payload_offset(k: u8) -> usize {
    if k == kind::EAGER {
        EAGER_PAYLOAD
    } else {
        HEADER_LEN
    }
}

fn frame_size(k: u8, payload: usize) -> u64 {
    (payload_offset(k) + payload).next_multiple_of(FRAME_ALIGN) as u64
}

#[repr(C)]
struct RingControl {
    head: AtomicU64,
    _pad: [u8; 56],
    writer_waiting: AtomicU32,
}

/// The writing end of a ring (one per process and ring).
/// Clear a ring (control block and data) so that a new writer and reader
/// can start on it from position 0, as on a fresh mailbox.
///
/// # Safety
/// `base` is the start of a ring of `cap` data bytes inside a live
/// mapping, and neither side uses the ring during the call (the engine
/// guarantees it by the handshake order, see `crate::recovery`).
pub(crate) unsafe fn reset(base: *mut u8, cap: usize) {
    // SAFETY: caller contract: the range is mapped and nobody else touches it.
    unsafe { std::ptr::write_bytes(base, 0, RING_CONTROL + cap) };
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Where absolute position `pos` lies in a data area of `cap` bytes, a
/// power of two.
#[inline]
fn offset(pos: u64, cap: u64) -> u64 {
    pos & (cap - 1)
}

/// Does a frame of `frame_len` bytes at data offset `off` end inside a data
/// area of `cap` bytes, on a line boundary, after at least one line?
#[inline(always)]
fn fits(frame_len: u32, off: u64, cap: u64) -> bool {
    let len = u64::from(frame_len);
    len >= FRAME_ALIGN as u64 && len.is_multiple_of(FRAME_ALIGN as u64) && len <= cap - off
}

/// Map the pages of `len` bytes at `p` into this process now, contents
/// unchanged (best effort: older kernels refuse, and nothing changes).
///
/// Without it, the first lap of a ring takes a page fault every 64 small
/// frames on each side, and a fault costs microseconds in a virtual
/// machine; a ring is mapped only once a frame goes through it, so jobs
/// whose ranks talk to few peers do not pay for every pair's ring.
fn prefault(p: *mut u8, len: usize, write: bool) {
    #[cfg(not(miri))]
    {
        use rustix::mm::{Advice, madvise};
        // (Not `rustix::param::page_size`: its auxiliary-vector reader
        // crashes a program run under valgrind.)
        // SAFETY: sysconf reads a constant of the system.
        let Ok(page) = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }) else {
            return;
        };
        if page == 0 {
            return;
        }
        let start = (p as usize).next_multiple_of(page);
        let end = (p as usize + len) / page * page;
        if end > start {
            let advice = if write {
                Advice::LinuxPopulateWrite
            } else {
                Advice::LinuxPopulateRead
            };
            // SAFETY: the range lies inside the ring's data area, mapped
            // read-write for as long as the ring exists; populating pages
            // changes no byte of them.
            let _ = unsafe { madvise(start as *mut std::ffi::c_void, end - start, advice) };
        }
    }
    #[cfg(miri)]
    let _ = (p, len, write);
}

pub(crate) struct RingWriter {
    ctrl: *const RingControl,
    data: *mut u8,
    cap: u64,
    tail: u64,
    head_cache: u64,
    /// Where the last frame written starts (its stamp tells whether the
    /// reader has released it, see [`RingWriter::wrap_if_drained`]).
    last_frame: u64,
    /// Where the lap starts in which the writer last looked whether the
    /// ring was drained (once per lap; `u64::MAX` before the first).
    looked_in_lap: u64,
}

/// How far into a lap the writer goes before it starts the next lap early
/// when the reader has caught up (a quarter of a smaller ring).
const SHORT_LAP: u64 = 8 * 1024;

impl RingWriter {
    /// # Safety
    ///
    /// `base` points to `RING_CONTROL + cap` bytes of zero-initialised (or
    /// previously used by this protocol) shared memory, 64-byte aligned,
    /// that stay mapped while the writer lives; `cap` is a power of two of
    /// at least 64; no other writer exists for this ring.
    pub(crate) unsafe fn new(base: *mut u8, cap: usize) -> Self {
        assert!(
            cap.is_power_of_two() && cap >= FRAME_ALIGN,
            "ring capacity {cap}"
        );
        debug_assert!((base as usize).is_multiple_of(64));
        RingWriter {
            ctrl: base as *const RingControl,
            // SAFETY: the data area follows the control block inside the mapping.
            data: unsafe { base.add(RING_CONTROL) },
            cap: cap as u64,
            tail: 0,
            head_cache: 0,
            last_frame: 0,
            looked_in_lap: u64::MAX,
        }
    }

    fn ctrl(&self) -> &RingControl {
        // SAFETY: `ctrl` points into a live mapping (constructor contract)
        // and RingControl only holds atomics.
        unsafe { &*self.ctrl }
    }

    /// Free bytes, refreshing the reader's head if `needed` does not fit.
    fn has_space(&mut self, needed: u64) -> bool {
        if self.cap - (self.tail - self.head_cache) >= needed {
            return true;
        }
        // (The published head may lag what `wrap_if_drained` saw.)
        let published = self.ctrl().head.load(Ordering::Acquire);
        self.head_cache = self.head_cache.max(published);
        self.cap - (self.tail - self.head_cache) >= needed
    }

    /// Start the next lap now if this one is [`SHORT_LAP`] bytes along and
    /// the reader has released every frame (looked at once per lap).
    ///
    /// A ring used by small messages that are answered, or sent in
    /// bursts the reader keeps up with, then cycles through the first few
    /// KiB, whose lines stay in both cores' caches, instead of through
    /// the whole ring: sending 256 B took ~75 ns more than 64 B before,
    /// against ~20 ns for Open MPI, whose small messages go through a
    /// 4 KiB box per peer. A writer that is ahead of its reader when it
    /// looks keeps the whole lap.
    ///
    /// The price: from the early SKIP until the reader has read it (its
    /// next progress pass), the writer has `off` bytes of room (8-24 KiB)
    /// instead of up to the whole ring, so a peer that stays out of MPI
    /// meanwhile holds fewer small messages before sends queue.
    ///
    /// The reader zeroes a frame's stamp last, with release, when it
    /// releases the frame, so a zero stamp at the last frame means that
    /// the reader is done with everything written.
    ///
    /// Only for a `frame` that fits in what the skipped lap frees (`off`
    /// bytes once the reader is done), so a frame `has_room` accepted
    /// always fits.
    #[inline]
    fn wrap_if_drained(&mut self, frame: u64) {
        let off = offset(self.tail, self.cap);
        let short_lap = SHORT_LAP.min(self.cap / 4);
        if off >= short_lap && self.tail - off != self.looked_in_lap && frame <= off {
            self.wrap_if_drained_now(off);
        }
    }

    /// The once-per-lap part of [`RingWriter::wrap_if_drained`].
    #[cold]
    #[inline(never)]
    fn wrap_if_drained_now(&mut self, off: u64) {
        self.looked_in_lap = self.tail - off;
        let at = offset(self.last_frame, self.cap) as usize;
        // SAFETY: `at` is the 64-aligned start of the last frame, inside
        // the data area; the stamp word is only ever accessed atomically.
        let stamp = unsafe { (*(self.data.add(at) as *const AtomicU64)).load(Ordering::Acquire) };
        if stamp == 0 {
            self.head_cache = self.tail;
            self.put(&FrameHeader::new(kind::SKIP), &[], self.cap - off);
        }
    }

    /// Write header fields (all but the stamp) and payload at `self.tail`,
    /// then publish the stamp.
    ///
    /// Caller guarantees that `frame` bytes are free and that the frame does
    /// not cross the end of the data area.
    #[inline(always)]
    fn put(&mut self, hdr: &FrameHeader, payload: &[u8], frame: u64) {
        let off = offset(self.tail, self.cap) as usize;
        let mut h = *hdr;
        h.frame_len = frame as u32;
        let start = payload_offset(h.kind);
        if self.tail == 0 {
            // The first frame of this writer: map the whole ring now.
            prefault(self.data, self.cap as usize, true);
        }
        // SAFETY: [off, off+frame) lies in the data area (caller contract)
        // and in free space, which the reader does not touch until the stamp
        // below is published. The data area and frame offsets are
        // multiples of 64 (see `RingWriter::new`), so the stamp and the
        // header words after it are aligned u64s.
        unsafe {
            let dst = self.data.add(off);
            // The header after the stamp, as far as the payload (an EAGER
            // frame's payload starts where `aux1` would be).
            let words = h.words_after_stamp();
            let n = if start == EAGER_PAYLOAD { 5 } else { 6 };
            for (i, w) in words.iter().take(n).enumerate() {
                (dst.add(8 + 8 * i) as *mut u64).write(*w);
            }
            if !payload.is_empty() {
                std::ptr::copy_nonoverlapping(payload.as_ptr(), dst.add(start), payload.len());
            }
            (*(dst as *const AtomicU64)).store(self.tail + 1, Ordering::Release);
        }
        self.last_frame = self.tail;
        self.tail += frame;
    }

    /// Is there room for a frame of kind `k` with `payload` bytes right now?
    /// (If so, `try_write` takes it, whether or not it starts a lap early.)
    pub(crate) fn has_room(&mut self, k: u8, payload: usize) -> bool {
        let needed = self.needed(k, payload);
        self.has_space(needed)
    }

    /// Append one frame. Returns false, writing nothing, if the ring is full.
    /// `payload.len()` must not exceed a quarter of the ring minus one header.
    ///
    /// Inlined with `put`, so that the header's fields go from the
    /// sender's registers into the ring (see
    /// `FrameHeader::words_after_stamp`).
    #[inline(always)]
    pub(crate) fn try_write(&mut self, hdr: &FrameHeader, payload: &[u8]) -> bool {
        let frame = frame_size(hdr.kind, payload.len());
        // `RingReader::publish`'s liveness rests on it (the engine's
        // limits are checked at compile time, `engine/mod.rs`).
        debug_assert!(frame <= self.cap / 4, "frame of {frame} bytes");
        self.wrap_if_drained(frame);
        let to_end = self.cap - offset(self.tail, self.cap);
        // As `needed`, from what is known here.
        let needed = if frame > to_end {
            to_end + frame
        } else {
            frame
        };
        if !self.has_space(needed) {
            return false;
        }
        if frame > to_end {
            self.put(&FrameHeader::new(kind::SKIP), &[], to_end);
        }
        self.put(hdr, payload, frame);
        true
    }

    /// Tell the reader that this writer waits for space, then check again.
    /// Returns true if space for a frame of kind `k` with `payload` bytes
    /// is now free.
    pub(crate) fn announce_waiting(&mut self, k: u8, payload: usize) -> bool {
        self.ctrl().writer_waiting.store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.has_space(self.needed(k, payload))
    }

    /// Bytes a frame of kind `k` with `payload` bytes takes at the current
    /// tail, including the SKIP frame in front of it if it must wrap.
    fn needed(&self, k: u8, payload: usize) -> u64 {
        let frame = frame_size(k, payload);
        let to_end = self.cap - offset(self.tail, self.cap);
        if frame > to_end {
            to_end + frame
        } else {
            frame
        }
    }
}

/// The reading end of a ring.
pub(crate) struct RingReader {
    ctrl: *const RingControl,
    data: *mut u8,
    cap: u64,
    head: u64,
    published: u64,
    /// Whether the ring was mapped in (before the first frame is read).
    prefaulted: bool,
}

/// Why a frame in a ring cannot be trusted.
pub(crate) type FrameError = String;

impl RingReader {
    /// # Safety
    ///
    /// Same as [`RingWriter::new`]; no other reader exists for this ring.
    pub(crate) unsafe fn new(base: *mut u8, cap: usize) -> Self {
        assert!(
            cap.is_power_of_two() && cap >= FRAME_ALIGN,
            "ring capacity {cap}"
        );
        debug_assert!((base as usize).is_multiple_of(64));
        RingReader {
            ctrl: base as *const RingControl,
            // SAFETY: the data area follows the control block inside the mapping.
            data: unsafe { base.add(RING_CONTROL) },
            cap: cap as u64,
            head: 0,
            published: 0,
            prefaulted: false,
        }
    }

    fn ctrl(&self) -> &RingControl {
        // SAFETY: see RingWriter::ctrl.
        unsafe { &*self.ctrl }
    }

    /// True if a frame (possibly a SKIP) is ready.
    #[inline(always)]
    pub(crate) fn has_frame(&self) -> bool {
        let off = offset(self.head, self.cap) as usize;
        // SAFETY: `off` is a 64-aligned offset inside the data area.
        let stamp = unsafe { (*(self.data.add(off) as *const AtomicU64)).load(Ordering::Acquire) };
        stamp == self.head + 1
    }

    /// The next frame's header, skipping padding; `Ok(None)` if none is ready.
    ///
    /// Inlined, the common case (a frame in bounds, not the first, not a
    /// SKIP) hands the header over in registers: returned through memory,
    /// the caller read it back with loads the store buffer cannot forward,
    /// which wait for this reader's earlier stores to reach lines the
    /// writer holds (the zeroed stamps of consumed frames). The rare cases
    /// go out of line and come back here to read the header again, so that
    /// every header returned comes from the same loads.
    #[inline(always)]
    pub(crate) fn peek(&mut self) -> Result<Option<FrameHeader>, FrameError> {
        loop {
            if !self.has_frame() {
                return Ok(None);
            }
            let off = offset(self.head, self.cap);
            // SAFETY: the acquire load in has_frame saw the writer's release
            // of this stamp, so the header bytes are complete; the writer
            // does not touch them until we move `head` past them.
            let hdr: FrameHeader =
                unsafe { std::ptr::read(self.data.add(off as usize) as *const FrameHeader) };
            if self.prefaulted && hdr.kind != kind::SKIP && fits(hdr.frame_len, off, self.cap) {
                return Ok(Some(hdr));
            }
            self.pass_padding(hdr.kind, hdr.frame_len, off)?;
        }
    }

    /// [`RingReader::peek`] for the rest, given the ready frame's kind and
    /// length at data offset `off`: map the ring before the first frame
    /// (see `prefault`), step over a SKIP frame, or report a frame out of
    /// bounds. Each call either makes progress or fails.
    #[cold]
    #[inline(never)]
    fn pass_padding(&mut self, k: u8, frame_len: u32, off: u64) -> Result<(), FrameError> {
        if !self.prefaulted {
            prefault(self.data, self.cap as usize, false);
            self.prefaulted = true;
            return Ok(());
        }
        if !fits(frame_len, off, self.cap) {
            return Err(format!(
                "frame length {frame_len} at ring offset {off} is out of bounds"
            ));
        }
        if k == kind::SKIP {
            // The rest of a skipped lap holds only zeroed line starts.
            self.zero_line_starts(self.head, FRAME_ALIGN as u64);
            self.head += u64::from(frame_len);
        }
        Ok(())
    }

    /// The first `len` payload bytes of the current frame (validated by the
    /// caller against `frame_len`).
    pub(crate) fn payload(&self, hdr: &FrameHeader, len: usize) -> Result<&[u8], FrameError> {
        let start = payload_offset(hdr.kind);
        if start + len > hdr.frame_len as usize {
            return Err(format!(
                "payload of {len} bytes does not fit a {}-byte frame",
                hdr.frame_len
            ));
        }
        let off = offset(self.head, self.cap) as usize + start;
        // SAFETY: the bytes lie inside the current frame (checked above and
        // in peek), which the writer leaves alone until `consume`.
        Ok(unsafe { std::slice::from_raw_parts(self.data.add(off), len) })
    }

    /// Release the current frame (zeroing its line starts, see module docs).
    pub(crate) fn consume(&mut self, hdr: &FrameHeader) {
        self.zero_line_starts(self.head, u64::from(hdr.frame_len));
        self.head += u64::from(hdr.frame_len);
    }

    fn zero_line_starts(&mut self, from: u64, len: u64) {
        let off = offset(from, self.cap) as usize;
        for line in (FRAME_ALIGN..len as usize).step_by(FRAME_ALIGN) {
            // SAFETY: [off, off+len) is the current frame, inside the data
            // area (validated in peek) and not yet released to the writer;
            // line starts are 8-byte aligned.
            unsafe {
                (*(self.data.add(off + line) as *const AtomicU64)).store(0, Ordering::Relaxed)
            };
        }
        // The stamp last, with release: the writer takes a zero stamp as
        // "done with this frame and every one before" (`wrap_if_drained`).
        // SAFETY: as above; `off` is the frame's 64-aligned start.
        unsafe { (*(self.data.add(off) as *const AtomicU64)).store(0, Ordering::Release) };
    }

    /// Publish the head to the writer (after a batch of `consume`s) and
    /// report whether the writer asked to be woken for space.
    ///
    /// Lazily: only once a quarter of the ring was consumed since the last
    /// time, even when the writer waits. Storing the head (and the fence
    /// after it) on every receive costs a cache-line transfer each, and
    /// the writer needs it only when the ring looks full: a frame with the
    /// padding before it takes less than half the ring, so then more than
    /// half is unpublished, and since less than a quarter is consumed but
    /// unpublished, more than a quarter is still unread: the reader has
    /// frames to read, and reading them publishes. (Publishing at every
    /// frame while the writer waited made a sender that runs ahead, as in
    /// a loop of 2-rank `MPI_Reduce`s, and its reader trade two lines per
    /// message: the loop took 0.114 µs per call instead of 0.079.)
    pub(crate) fn publish(&mut self) -> bool {
        if self.head - self.published < self.cap / 4 {
            return false;
        }
        self.published = self.head;
        let ctrl = self.ctrl();
        ctrl.head.store(self.head, Ordering::Release);
        fence(Ordering::SeqCst);
        if ctrl.writer_waiting.load(Ordering::Relaxed) != 0 {
            ctrl.writer_waiting.store(0, Ordering::Relaxed);
            return true;
        }
        false
    }
}

#[cfg(test)]
#[path = "ring_tests.rs"]
mod tests;
