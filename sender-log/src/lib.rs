//! # vpml-sender-log — the sender-based message log
//!
//! Under pessimistic sender-based message logging every message a rank sends
//! stays in the sender's memory until the receiver no longer needs it, so a
//! crashed receiver can be sent its messages again. This crate keeps that
//! log in files of the rank's log directory, mapped `MAP_SHARED`
//! ([`SenderLog::create`], vpml's default: they survive the process and
//! can be kept after the job for replay) or in anonymous memory
//! ([`SenderLog::create_in_memory`], huge pages where the kernel gives
//! them). Either way freed segments are reused, so a log that checkpoints
//! garbage-collect stops costing page faults and kernel zeroing once it
//! has reached its working size. A memory log dies with its process; [`SenderLog::spill`] writes its
//! kept records to one file (at a checkpoint: peers may need them after a
//! restart) and [`SenderLog::restore`] starts a new log from such a file.
//!
//! For a file log:
//!
//! * appending a record is a memory copy into the current segment (a send
//!   completes once its payload is in the log), and the bytes survive the
//!   process (they are in the page cache and the file);
//! * a segment is a sparse file whose memory is taken as records reach it
//!   ([`SenderLog::reserve`] populates pages a step ahead, and
//!   [`SenderLog::warm_up`] further ahead in idle moments), so no append
//!   waits for a whole segment to be zeroed, and a full file system is an
//!   error before the message leaves, never a `SIGBUS` during the copy;
//! * another process can map the same files: the replay debugger reads a
//!   finished job's logs, and a restarted rank reopens its own;
//! * records are indexed by (destination, channel sequence number),
//!   iterated from a sequence number for re-sending, and freed per
//!   destination up to a sequence number; a segment whose records are all
//!   freed is set aside (renamed out of the log) and reused as the next
//!   segment, so a log that is garbage-collected by checkpoints stops
//!   costing page faults once it has reached its working size. Memory
//!   already taken is used before more is: a record that would reach past
//!   the current segment's taken memory starts a spare segment that has
//!   memory for it, leaving the rest of the current one untouched.
//!
//! ## On-disk format (version 1)
//!
//! A log is the files `seg-<index>.vlog` of one directory. Each segment starts
//! with a 64-byte header: magic `VPMLSLOG`, version (u32), rank (u32), segment
//! index (u64), capacity in bytes (u64), CRC-32C of the first 60 bytes at
//! offset 60. Records follow at 64-byte boundaries: a 48-byte header — magic
//! `0x564C5243` (u32), destination (u32), context (u32), tag (i32), channel
//! sequence (u64), payload length (u64), payload CRC-32C (u32), CRC-32C of
//! the header's first 40 bytes (u32) — then the payload. All integers are
//! little-endian. A zero magic ends a segment. An append first zeroes the
//! magic after its record, then writes the payload, then the header, so a
//! crash mid-append leaves at most a torn last record, which readers
//! ignore, and never exposes the old bytes of a reused segment. Memory for a
//! record is taken before it is written, so a full disk is an error from
//! [`SenderLog::reserve`], never a fault while copying.

use std::collections::{BTreeMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use memmap2::{Advice, Mmap, MmapMut, MmapOptions};

/// Default capacity of a segment. A segment is reused only once all its
/// records are freed, so its size sets how soon a checkpointing job stops
/// taking fresh memory (about two segments, plus what two checkpoint
/// intervals log) and how much it holds. Fresh memory is costly: ~0.4 µs
/// per KiB on tmpfs, which is 10 % of a small message's latency. 16 MiB
/// still holds three 4 MiB records; a record larger than a segment gets
/// one of its own.
pub const DEFAULT_SEGMENT_SIZE: usize = 16 << 20;
const SEGMENT_MAGIC: &[u8; 8] = b"VPMLSLOG";
const RECORD_MAGIC: u32 = 0x564C_5243;
const VERSION: u32 = 1;
const SEGMENT_HEADER: usize = 64;
const RECORD_HEADER: usize = 48;
const ALIGN: usize = 64;

/// Errors of the sender log; each names the file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file operation failed (including a full disk at segment creation).
    #[error("sender log {path}: {what}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// A record was appended for a rank of [`MAX_DESTINATIONS`] or above.
    #[error("sender log {path}: destination rank {dest} is out of range (at most {max})", max = MAX_DESTINATIONS - 1)]
    DestinationOutOfRange {
        /// The log directory.
        path: PathBuf,
        /// The rank asked for.
        dest: u32,
    },
    /// A segment does not have the expected format.
    #[error("sender log {path}: {reason}")]
    Corrupt {
        /// The segment file.
        path: PathBuf,
        /// What is wrong, with the offset.
        reason: String,
    },
}

/// Result of sender-log operations.
pub type Result<T> = std::result::Result<T, Error>;

fn io<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error::Io {
        path: path.to_path_buf(),
        what,
        source,
    }
}

/// The envelope of a logged message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// Destination rank (world rank).
    pub dest: u32,
    /// Communicator context.
    pub context: u32,
    /// Tag.
    pub tag: i32,
    /// Channel sequence number (1, 2, 3, … per destination).
    pub seq: u64,
}

/// A logged message: its envelope, payload and where it lives.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a> {
    /// Envelope.
    pub header: RecordHeader,
    /// The message bytes (inside the mapping).
    pub payload: &'a [u8],
    /// Where the record is (for readers in other processes).
    pub location: Location,
}

/// Where a record's payload lies: segment index and byte offset of the
/// payload in that segment's file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// Segment index (`seg-<index>.vlog`).
    pub segment: u64,
    /// Offset of the payload in the file.
    pub offset: u64,
    /// Payload length.
    pub len: u64,
}

enum Map {
    Writable(MmapMut),
    ReadOnly(Mmap),
}

impl Map {
    fn bytes(&self) -> &[u8] {
        match self {
            Map::Writable(m) => m,
            Map::ReadOnly(m) => m,
        }
    }
}

struct Segment {
    path: PathBuf,
    /// The segment is a file (deleted once freed); otherwise memory.
    on_disk: bool,
    map: Map,
    used: usize,
    live: usize,
    /// Up to where [`SenderLog::warm_up`] already fetched.
    warm_until: usize,
    /// Bytes from the start backed by memory and mapped writable (see
    /// [`populate`]): appends below it neither fault nor fail.
    populated: usize,
}

impl Segment {
    /// Room for records on memory already taken: a record spanning at most
    /// this many bytes fits, with the zero magic after it.
    fn ready(&self) -> usize {
        self.populated.saturating_sub(self.used + RECORD_HEADER)
    }
}

#[derive(Clone, Copy, Default)]
struct Entry {
    seq: u64,
    segment: u64,
    /// Offset of the record header.
    offset: usize,
}

/// The largest destination rank a log takes, plus one. The index is an
/// array by destination, so a rank number read from a damaged file must not
/// make it allocate without bound (at most 64 MiB of empty queues here).
pub const MAX_DESTINATIONS: u32 = 1 << 20;

/// The records of each destination, in sequence order: an array by
/// destination rank (ranks are small and dense, and an append looks its
/// queue up without hashing).
#[derive(Default)]
struct Index {
    by_dest: Vec<DestQueue>,
}

impl Index {
    /// The queue of `dest`, made if new. `dest` < [`MAX_DESTINATIONS`]
    /// (checked by callers: `append_stored` and `decode_record`).
    fn queue(&mut self, dest: u32) -> &mut DestQueue {
        let d = dest as usize;
        if d >= self.by_dest.len() {
            self.by_dest.resize_with(d + 1, DestQueue::default);
        }
        &mut self.by_dest[d]
    }

    fn get(&self, dest: u32) -> Option<&VecDeque<Entry>> {
        self.by_dest.get(dest as usize).map(|q| &q.entries)
    }

    fn get_mut(&mut self, dest: u32) -> Option<&mut DestQueue> {
        self.by_dest.get_mut(dest as usize)
    }

    /// Every destination's records (empty ones included), by rank.
    fn iter(&self) -> impl Iterator<Item = (u32, &VecDeque<Entry>)> {
        (0u32..).zip(self.by_dest.iter().map(|q| &q.entries))
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut DestQueue)> {
        (0u32..).zip(&mut self.by_dest)
    }
}

/// One destination's records in sequence order, and the same records as
/// runs by segment (consecutive records mostly share one), so that
/// freeing a checkpoint interval's records costs a step per segment, not
/// per record.
#[derive(Default)]
struct DestQueue {
    entries: VecDeque<Entry>,
    /// (segment, how many consecutive entries lie in it), front to back.
    runs: VecDeque<(u64, usize)>,
}

impl DestQueue {
    /// Append a record (in sequence order).
    #[inline]
    fn push(&mut self, e: Entry) {
        push_touched(&mut self.entries, e);
        self.count_in_runs(e.segment);
    }

    /// One more record, the last, lies in `segment`.
    #[inline]
    fn count_in_runs(&mut self, segment: u64) {
        match self.runs.back_mut() {
            Some((s, n)) if *s == segment => *n += 1,
            _ => self.runs.push_back((segment, 1)),
        }
    }

    /// Sort the entries (read back from files in segment order) and make
    /// the runs that match them.
    fn sort(&mut self) {
        self.entries
            .make_contiguous()
            .sort_by_key(|e| (e.seq, e.segment));
        self.runs.clear();
        for i in 0..self.entries.len() {
            self.count_in_runs(self.entries[i].segment);
        }
    }

    /// Forget the first `n` records, telling `freed` how many went from
    /// each segment.
    fn pop_front(&mut self, mut n: usize, mut freed: impl FnMut(u64, usize)) {
        n = n.min(self.entries.len());
        // Entries are `Copy`: dropping the drained range does not read it.
        self.entries.drain(..n);
        while n > 0 {
            let Some((segment, count)) = self.runs.front_mut() else {
                break;
            };
            let take = n.min(*count);
            freed(*segment, take);
            *count -= take;
            n -= take;
            if *count == 0 {
                self.runs.pop_front();
            }
        }
    }
}

/// One rank's sender log (writable), or a finished log opened for reading.
pub struct SenderLog {
    dir: PathBuf,
    rank: u32,
    segment_size: usize,
    segments: BTreeMap<u64, Segment>,
    current: Option<u64>,
    /// Room known to be ready in the current segment: a record spanning at
    /// most this many bytes fits in its taken memory, with the zero magic
    /// after it (0 when unknown, and always in a read-only log). Lets
    /// [`SenderLog::reserve`] answer the common case without a lookup.
    ready: usize,
    next_index: u64,
    /// Per destination, its records in sequence order.
    index: Index,
    writable: bool,
    bytes_logged: u64,
    /// New segments are anonymous memory, not files.
    in_memory: bool,
    /// Freed segments kept for reuse (their pages are already faulted
    /// in: reusing them costs no page fault and no zeroing).
    spare: Vec<Spare>,
    /// The most segments the log has had at once.
    peak_segments: usize,
    /// Segments this log has made (new or reused).
    made: u32,
    /// How many of those were freed segments reused.
    reused: u32,
}

/// A freed segment kept for reuse.
struct Spare {
    map: MmapMut,
    /// Its `populated` bytes when it was freed.
    populated: usize,
    /// For a file log, the file backing `map`, renamed out of the log
    /// (`.seg-spare-*.tmp`: readers and restarts ignore it).
    file: Option<PathBuf>,
}

/// Freed segments are kept for reuse while live and spare segments
/// together stay within the most the log ever had live (its working size:
/// a log garbage-collected by checkpoints needs it again at the next
/// burst), or within this many.
const SPARE_SEGMENTS: usize = 4;

/// Path of segment `index` in `dir`.
pub fn segment_path(dir: &Path, index: u64) -> PathBuf {
    dir.join(format!("seg-{index:08}.vlog"))
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Write the 48-byte header of a record into `dst` (48 bytes). It is
/// built and summed as the 64-bit words it is stored as: summing the
/// bytes of a freshly built array would read them back before its stores
/// have landed (a store-forwarding stall per word), which costs more than
/// the sum itself.
///
/// The first word (magic and destination) is stored last, so a process
/// killed part-way leaves a zero magic — the end of the chain — rather
/// than a header that fails its checksum: readers (a restarted process
/// reopening its log) see a torn last record as no record.
fn write_record_header(dst: &mut [u8], h: &RecordHeader, len: u64, payload_crc: u32) {
    let words = [
        u64::from(RECORD_MAGIC) | u64::from(h.dest) << 32,
        u64::from(h.context) | u64::from(h.tag as u32) << 32,
        h.seq,
        len,
        u64::from(payload_crc),
    ];
    let crc = crc32c_words(&words);
    let rest = words[1..].iter().copied().chain([u64::from(crc)]);
    for (d, w) in dst[8..].chunks_exact_mut(8).zip(rest) {
        d.copy_from_slice(&w.to_le_bytes());
    }
    vpml_fault_points::fault_point!("send.mid_log_append");
    // A release store: every store above (payload, the rest of the header,
    // the chain's new end) reaches the mapping — which outlives this
    // process — before the magic that makes the record valid; plain
    // stores could be reordered past it.
    let first = &mut dst[..8];
    assert!(first.as_ptr().cast::<u64>().is_aligned());
    // SAFETY: `first` is 8 bytes, 8-aligned (checked; records start at
    // 64-byte boundaries of page-aligned mappings), exclusively borrowed
    // for this call, and only ever accessed as plain bytes otherwise.
    let magic = unsafe { std::sync::atomic::AtomicU64::from_ptr(first.as_mut_ptr().cast()) };
    magic.store(words[0].to_le(), std::sync::atomic::Ordering::Release);
}

/// Decode the record at `off` of a segment: `Ok(None)` at the end of the
/// used area (zero magic, or a torn last record).
fn decode_record(
    bytes: &[u8],
    off: usize,
) -> std::result::Result<Option<(RecordHeader, usize, usize)>, String> {
    if off + RECORD_HEADER > bytes.len() {
        return Ok(None);
    }
    let b = &bytes[off..off + RECORD_HEADER];
    let magic = le_u32(b, 0);
    if magic == 0 {
        return Ok(None);
    }
    if magic != RECORD_MAGIC {
        return Err(format!("bad record magic {magic:#x} at offset {off}"));
    }
    if crc32c(&b[0..40]) != le_u32(b, 40) {
        return Err(format!("record header checksum mismatch at offset {off}"));
    }
    let dest = le_u32(b, 4);
    if dest >= MAX_DESTINATIONS {
        return Err(format!(
            "destination rank {dest} out of range in the record at offset {off}"
        ));
    }
    let header = RecordHeader {
        dest,
        context: le_u32(b, 8),
        tag: le_u32(b, 12) as i32,
        seq: le_u64(b, 16),
    };
    let len = usize::try_from(le_u64(b, 24))
        .map_err(|_| format!("record length overflow at offset {off}"))?;
    let start = off + RECORD_HEADER;
    let end = start
        .checked_add(len)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| format!("record at offset {off} runs past the segment end"))?;
    if crc32c(&bytes[start..end]) != le_u32(b, 32) {
        // The payload is written before the header, so a valid header with
        // a bad payload is corruption, not a torn append.
        return Err(format!(
            "payload checksum mismatch in the record at offset {off}"
        ));
    }
    Ok(Some((header, start, len)))
}

/// Memory page size assumed for rounding (the kernel rounds to its own).
const PAGE: usize = 4096;
/// How much memory `reserve` takes at a time beyond what a record needs.
const POPULATE_STEP: usize = 64 * 1024;
/// How far ahead of the last record [`SenderLog::warm_up`] keeps memory
/// taken.
pub const POPULATE_AHEAD: usize = 512 * 1024;

/// Back bytes `from..to` of `map` (rounded out to pages, clipped to the
/// map) with memory, mapped writable (`MADV_POPULATE_WRITE`): later writes
/// there neither fault nor fail. Taking pages as records reach them, rather
/// than a whole segment at once, spreads the kernel's zeroing over the
/// appends instead of stalling one of them for milliseconds; and a full
/// file system shows up here as an error, not as a `SIGBUS` on a write.
/// Returns where the backed bytes now end (`to` rounded to pages).
fn populate(map: &MmapMut, from: usize, to: usize) -> std::io::Result<usize> {
    let start = from / PAGE * PAGE;
    let end = to.next_multiple_of(PAGE).min(map.len());
    if start >= end {
        return Ok(end.max(from));
    }
    map.advise_range(Advice::PopulateWrite, start, end - start)
        .map(|()| end)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::EFAULT) {
                // What the kernel says when a page cannot be had.
                std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    "no space left on the log's file system or in memory",
                )
            } else {
                e
            }
        })
}

/// Prefetch for writing the lines of `map` from `used` to `end` (not past
/// `populated`) that were not already, up to `warm_until`; returns the new
/// `warm_until`.
fn warm_lines(map: &[u8], used: usize, warm_until: usize, end: usize, populated: usize) -> usize {
    let end = end.min(populated).min(map.len());
    let mut line = used.max(warm_until).next_multiple_of(64);
    while line < end {
        prefetch_for_write(&map[line]);
        line += 64;
    }
    warm_until.max(end)
}

/// Ask the cache for the line holding `byte`, in a state ready for
/// writing (`prefetchw`); elsewhere, nothing.
fn prefetch_for_write(byte: &u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads and writes nothing; the pointer comes from
    // a reference, so it is valid anyway.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_ET0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_ET0>(byte as *const u8 as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = byte;
}

/// CRC-32C (Castagnoli) of `bytes`. `crc-fast` folds with carry-less
/// multiplies where the CPU has them: about twice as fast as the plain
/// `crc32` instruction on a payload of 1 KiB or more. Below
/// [`SMALL_CRC`] bytes (every record header, small payloads) its ~18 ns
/// of setup is most of the cost, and the instruction itself, inline, is
/// 3-4x faster.
fn crc32c(bytes: &[u8]) -> u32 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if bytes.len() < SMALL_CRC && std::arch::is_x86_feature_detected!("sse4.2") {
        let (whole, tail) = bytes.split_at(bytes.len() / 8 * 8);
        let words = whole.chunks_exact(8).map(|w| {
            let mut word = [0u8; 8];
            word.copy_from_slice(w);
            u64::from_le_bytes(word)
        });
        // SAFETY: the CPU has SSE4.2 (checked just above).
        return unsafe { crc32c_sse42(words, tail) };
    }
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
}

/// CRC-32C of `words` as their little-endian bytes (a record header).
fn crc32c_words(words: &[u64]) -> u32 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU has SSE4.2 (checked just above).
        return unsafe { crc32c_sse42(words.iter().copied(), &[]) };
    }
    let mut crc = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    for w in words {
        crc.update(&w.to_le_bytes());
    }
    crc.finalize() as u32
}

/// Below this many bytes, [`crc32c`] runs the `crc32` instruction inline:
/// `crc_fast` folds faster only from here (measured on this machine:
/// 8 ns against 13 ns at 128 B, 24 ns against 35 ns at 384 B, 29 ns
/// against 23 ns at 448 B).
const SMALL_CRC: usize = 448;

/// CRC-32C of `words` (as little-endian bytes) followed by `tail`, with
/// the SSE4.2 `crc32` instruction.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[target_feature(enable = "sse4.2")]
fn crc32c_sse42(words: impl Iterator<Item = u64>, tail: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u8, _mm_crc32_u64};
    let mut crc = u64::from(u32::MAX);
    for w in words {
        crc = _mm_crc32_u64(crc, w);
    }
    let mut crc = crc as u32;
    for &b in tail {
        crc = _mm_crc32_u8(crc, b);
    }
    !crc
}

/// Payloads at least this long are written to the log with streaming
/// (non-temporal) stores: nothing reads a record soon after it is written
/// (on shared memory the receiver reads the sender's buffer, not the log),
/// and writing around the cache skips reading each destination line
/// first. From a cached source into the log's uncached memory that copies
/// 1.6-2x faster here (16 KiB-4 MiB).
const STREAM_FROM: usize = 16 * 1024;

/// Copy `src` into `dst` (same length) and return the crc32c of the bytes,
/// in one pass: each chunk is summed, then copied while it is still in the
/// core's cache, so a large payload is read from memory once. Summing
/// first keeps the sum from waiting on the (uncached) destination; the two
/// agree because a send's buffer does not change until the send completes.
/// Once it returns, every byte is in place for the stores that follow
/// (the record header is written after the payload).
fn copy_with_checksum(dst: &mut [u8], src: &[u8]) -> u32 {
    /// Small enough to stay in L1/L2 between the sum and the copy.
    const CHUNK: usize = 16 * 1024;
    if src.len() < SMALL_CRC {
        let crc = crc32c(src);
        dst.copy_from_slice(src);
        return crc;
    }
    let stream = src.len() >= STREAM_FROM;
    let copy = |d: &mut [u8], s: &[u8]| {
        if stream {
            copy_streaming(d, s);
        } else {
            d.copy_from_slice(s);
        }
    };
    let crc = if src.len() <= CHUNK {
        // One piece: the plain call, without a digest's state.
        let crc = crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, src);
        copy(dst, src);
        crc
    } else {
        let mut digest = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
        for (d, s) in dst.chunks_mut(CHUNK).zip(src.chunks(CHUNK)) {
            digest.update(s);
            copy(d, s);
        }
        digest.finalize()
    };
    if stream {
        store_fence();
    }
    crc as u32
}

/// Copy `src` into `dst` (same length), whole 16-byte blocks with
/// non-temporal stores; call [`store_fence`] before stores that must be
/// seen after these.
fn copy_streaming(dst: &mut [u8], src: &[u8]) {
    let len = dst.len().min(src.len());
    // Plain stores up to `dst`'s first 16-byte boundary, then whole
    // blocks from there (each 16-byte aligned), then plain stores again.
    let head = dst.as_ptr().align_offset(16).min(len);
    dst[..head].copy_from_slice(&src[..head]);
    let mut at = head;
    while at + 16 <= len {
        stream_block(&mut dst[at..at + 16], &src[at..at + 16]);
        at += 16;
    }
    dst[at..len].copy_from_slice(&src[at..len]);
}

/// Write the 16 bytes of `src` to `dst` (16 bytes, 16-byte aligned) with a
/// non-temporal store (a plain copy where there is none, and under Miri,
/// which cannot run it).
#[inline(always)]
fn stream_block(dst: &mut [u8], src: &[u8]) {
    debug_assert!(dst.len() == 16 && src.len() == 16 && dst.as_ptr().addr().is_multiple_of(16));
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: both slices hold 16 bytes (the caller slices them so), and
    // `dst` is 16-byte aligned, as `_mm_stream_si128` requires (the
    // caller starts at an aligned address and steps by 16); the load may
    // be unaligned.
    unsafe {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let v = _mm_loadu_si128(src.as_ptr().cast::<__m128i>());
        _mm_stream_si128(dst.as_mut_ptr().cast::<__m128i>(), v);
    }
    #[cfg(any(not(target_arch = "x86_64"), miri))]
    dst.copy_from_slice(src);
}

/// Order the non-temporal stores before this after every store after it.
fn store_fence() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: `sfence` only orders stores (SSE, present on every x86_64).
    unsafe {
        std::arch::x86_64::_mm_sfence();
    }
}

#[inline]
fn record_span(len: usize) -> usize {
    (RECORD_HEADER + len).next_multiple_of(ALIGN)
}

impl SenderLog {
    /// Start an empty log for `rank` in `dir` (created if missing; segments
    /// left there by an earlier incarnation are removed).
    pub fn create(dir: &Path, rank: u32, segment_size: usize) -> Result<SenderLog> {
        std::fs::create_dir_all(dir).map_err(io(dir, "creating the log directory"))?;
        for entry in std::fs::read_dir(dir)
            .map_err(io(dir, "listing the log directory"))?
            .flatten()
        {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("seg-") || name.starts_with(".seg-") {
                let p = entry.path();
                std::fs::remove_file(&p).map_err(io(&p, "removing an old segment"))?;
            }
        }
        Ok(SenderLog {
            dir: dir.to_path_buf(),
            rank,
            segment_size: segment_size.max(4096).next_multiple_of(ALIGN),
            segments: BTreeMap::new(),
            current: None,
            ready: 0,
            next_index: 0,
            index: Index::default(),
            writable: true,
            bytes_logged: 0,
            in_memory: false,
            spare: Vec::new(),
            reused: 0,
            peak_segments: 0,
            made: 0,
        })
    }

    /// Start an empty log for `rank` in anonymous memory (see the crate
    /// docs): the fastest, but it dies with the process.
    pub fn create_in_memory(rank: u32, segment_size: usize) -> SenderLog {
        SenderLog {
            dir: PathBuf::from("(memory)"),
            rank,
            segment_size: segment_size.max(4096).next_multiple_of(ALIGN),
            segments: BTreeMap::new(),
            current: None,
            ready: 0,
            next_index: 0,
            index: Index::default(),
            writable: true,
            bytes_logged: 0,
            in_memory: true,
            spare: Vec::new(),
            reused: 0,
            peak_segments: 0,
            made: 0,
        }
    }

    /// Open the log in `dir` for reading (e.g. from another process, or
    /// after the job): every record of every segment is indexed. A torn last
    /// record is ignored; other damage is an error naming file and offset.
    pub fn open_read_only(dir: &Path) -> Result<SenderLog> {
        Self::open_existing(dir, false)
    }

    /// Reopen the log a crashed process of this rank left in `dir`, to
    /// continue it after a restart: the records to each destination `d`
    /// with a sequence number up to `keep(d)` stay (peers may still need
    /// them); later ones are forgotten, because the restarted process
    /// re-executes and logs them again. New records go to new segments,
    /// so nothing already written is overwritten; when a message was
    /// logged twice (by two incarnations), the later copy counts.
    pub fn reopen(
        dir: &Path,
        rank: u32,
        segment_size: usize,
        keep: impl Fn(u32) -> u64,
    ) -> Result<SenderLog> {
        std::fs::create_dir_all(dir).map_err(io(dir, "creating the log directory"))?;
        let mut log = Self::open_existing(dir, true)?;
        log.rank = rank;
        log.segment_size = segment_size.max(4096).next_multiple_of(ALIGN);
        for (dest, q) in log.index.iter_mut() {
            let limit = keep(dest);
            let mut kept: VecDeque<Entry> = VecDeque::with_capacity(q.entries.len());
            for e in q.entries.drain(..) {
                let dropped = if e.seq > limit {
                    Some(e)
                } else if kept.back().is_some_and(|k| k.seq == e.seq) {
                    // Sorted by (seq, segment): the later copy replaces it.
                    let old = kept.pop_back();
                    kept.push_back(e);
                    old
                } else {
                    kept.push_back(e);
                    None
                };
                if let Some(d) = dropped
                    && let Some(seg) = log.segments.get_mut(&d.segment)
                {
                    seg.live = seg.live.saturating_sub(1);
                }
            }
            q.entries = kept;
            q.sort();
        }
        log.bytes_logged = 0;
        Ok(log)
    }

    fn open_existing(dir: &Path, writable: bool) -> Result<SenderLog> {
        if writable {
            // Segments a crashed incarnation had set aside for reuse.
            for e in std::fs::read_dir(dir)
                .map_err(io(dir, "listing the log directory"))?
                .flatten()
            {
                if e.file_name().to_string_lossy().starts_with(".seg-") {
                    let p = e.path();
                    std::fs::remove_file(&p).map_err(io(&p, "removing a spare segment"))?;
                }
            }
        }
        let mut paths: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
            .map_err(io(dir, "listing the log directory"))?
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let idx = name
                    .strip_prefix("seg-")?
                    .strip_suffix(".vlog")?
                    .parse()
                    .ok()?;
                Some((idx, e.path()))
            })
            .collect();
        paths.sort();
        let mut log = SenderLog {
            dir: dir.to_path_buf(),
            rank: 0,
            segment_size: DEFAULT_SEGMENT_SIZE,
            segments: BTreeMap::new(),
            current: None,
            ready: 0,
            next_index: 0,
            index: Index::default(),
            writable,
            bytes_logged: 0,
            in_memory: false,
            spare: Vec::new(),
            reused: 0,
            peak_segments: 0,
            made: 0,
        };
        for (idx, path) in paths {
            let file = OpenOptions::new()
                .read(true)
                .write(writable)
                .open(&path)
                .map_err(io(&path, "opening a segment"))?;
            let map = if writable {
                // SAFETY: the process that wrote this segment is dead (we
                // restart in its place); we never write into it again, the
                // mapping is writable only so freed segments can be
                // handled like our own.
                Map::Writable(
                    unsafe { MmapMut::map_mut(&file) }.map_err(io(&path, "mapping a segment"))?,
                )
            } else {
                // SAFETY: the mapping is read-only; a writer only appends
                // past the records we index.
                Map::ReadOnly(unsafe { Mmap::map(&file) }.map_err(io(&path, "mapping a segment"))?)
            };
            let map_bytes = map.bytes();
            let rank = check_segment_header(map_bytes, idx, &path)?;
            log.rank = rank;
            let mut off = SEGMENT_HEADER;
            let mut live = 0;
            while let Some((h, _, len)) =
                decode_record(map_bytes, off).map_err(|reason| Error::Corrupt {
                    path: path.clone(),
                    reason,
                })?
            {
                log.index.queue(h.dest).push(Entry {
                    seq: h.seq,
                    segment: idx,
                    offset: off,
                });
                live += 1;
                log.bytes_logged += len as u64;
                off += record_span(len);
            }
            log.segments.insert(
                idx,
                Segment {
                    path,
                    on_disk: true,
                    map,
                    used: off,
                    live,
                    warm_until: 0,
                    // Written, so backed; we never write there again.
                    populated: off / PAGE * PAGE,
                },
            );
            log.next_index = idx + 1;
        }
        for (_, q) in log.index.iter_mut() {
            q.sort();
        }
        Ok(log)
    }

    /// The directory of the log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Rank whose log this is.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Payload bytes appended since creation (or found when opened).
    pub fn bytes_logged(&self) -> u64 {
        self.bytes_logged
    }

    /// Segments currently on disk.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Segments this log has started: (freshly made, reused after being
    /// freed). In a steady state only the second count grows; fresh
    /// segments cost zeroing their memory.
    pub fn segments_started(&self) -> (u32, u32) {
        (self.made - self.reused, self.reused)
    }

    /// Start a new current segment with room for a record of
    /// `min_payload` bytes: anonymous memory (reusing a freed one when
    /// possible) or a file.
    fn new_segment(&mut self, min_payload: usize) -> Result<u64> {
        let idx = self.next_index;
        // Full size at once: memory is only taken as records need it (see
        // `populate`), so a short job pays for what it logs, not for the
        // segment.
        let capacity = self
            .segment_size
            .max(4096)
            .next_multiple_of(ALIGN)
            .max(SEGMENT_HEADER + record_span(min_payload));
        self.made = self.made.saturating_add(1);
        let (path, map, populated) = if self.in_memory {
            self.memory_segment(idx, capacity)?
        } else {
            self.file_segment(idx, capacity)?
        };
        self.segments.insert(
            idx,
            Segment {
                path,
                on_disk: !self.in_memory,
                map: Map::Writable(map),
                used: SEGMENT_HEADER,
                live: 0,
                warm_until: 0,
                populated,
            },
        );
        self.next_index += 1;
        self.current = Some(idx);
        self.ready = 0;
        self.peak_segments = self.peak_segments.max(self.segments.len());
        Ok(idx)
    }

    fn file_segment(&mut self, idx: u64, capacity: usize) -> Result<(PathBuf, MmapMut, usize)> {
        let path = segment_path(&self.dir, idx);
        let reusable = best_spare(&self.spare, capacity, true);
        if let Some(i) = reusable
            && let Spare {
                mut map,
                populated,
                file: Some(tmp),
            } = self.spare.swap_remove(i)
        {
            // Made ready under its spare name, then renamed into the log: a
            // crash in between leaves no half-made segment. Old records stay
            // after the new header, but the zero magic that ends the chain
            // hides them (see `append`).
            let cap = map.len();
            map[..SEGMENT_HEADER].copy_from_slice(&segment_header(self.rank, idx, cap as u64));
            end_chain(&mut map, SEGMENT_HEADER);
            std::fs::rename(&tmp, &path).map_err(io(&path, "reusing a freed segment"))?;
            self.reused += 1;
            return Ok((path, map, populated));
        }
        // Built under a temporary name and renamed once its header is
        // written: a crash in between leaves no half-made segment.
        let tmp = self.dir.join(format!(".seg-{idx:010}.tmp"));
        let _ = std::fs::remove_file(&tmp);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io(&tmp, "creating a segment"))?;
        // Sparse: pages are taken as records reach them (`populate`).
        file.set_len(capacity as u64)
            .map_err(io(&tmp, "sizing a segment"))?;
        // SAFETY: the file is ours alone to write (fresh, create_new); other
        // processes only read records we have completed.
        let mut map = unsafe { MmapOptions::new().len(capacity).map_mut(&file) }
            .map_err(io(&path, "mapping a segment"))?;
        let populated = match populate(&map, 0, SEGMENT_HEADER) {
            Ok(end) => end,
            // A kernel without MADV_POPULATE_WRITE (before 5.14): reserve
            // the whole file at once instead, so writes cannot fail later.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                preallocate(&file, capacity)
                    .map_err(io(&path, "reserving disk space for a segment"))?;
                capacity
            }
            Err(e) => return Err(io(&path, "taking memory for a segment")(e)),
        };
        map[..SEGMENT_HEADER].copy_from_slice(&segment_header(self.rank, idx, capacity as u64));
        std::fs::rename(&tmp, &path).map_err(io(&path, "naming a new segment"))?;
        Ok((path, map, populated))
    }

    fn memory_segment(&mut self, idx: u64, capacity: usize) -> Result<(PathBuf, MmapMut, usize)> {
        let path = PathBuf::from(format!("(memory segment {idx})"));
        let (map, populated) = match best_spare(&self.spare, capacity, false) {
            Some(i) => {
                self.reused += 1;
                let spare = self.spare.swap_remove(i);
                (spare.map, spare.populated)
            }
            None => {
                let map = MmapOptions::new()
                    .len(capacity)
                    .map_anon()
                    .map_err(io(&path, "allocating a memory segment"))?;
                // Fewer page faults where the kernel allows huge pages.
                let _ = map.advise(Advice::HugePage);
                (map, 0)
            }
        };
        Ok((path, map, populated))
    }

    /// Write every kept record to the file `path` (one read-only segment,
    /// written under a temporary name, synced, then renamed). Returns the
    /// number of records written.
    pub fn spill(&self, path: &Path) -> Result<u64> {
        use std::io::Write;
        let tmp = path.with_extension("tmp");
        let mut entries: Vec<&Entry> = self.index.iter().flat_map(|(_, q)| q).collect();
        entries.sort_by_key(|e| (e.segment, e.offset));
        let mut body: Vec<(usize, usize, u64)> = Vec::with_capacity(entries.len());
        let mut total = SEGMENT_HEADER;
        for e in &entries {
            let seg = self
                .segments
                .get(&e.segment)
                .ok_or_else(|| Error::Corrupt {
                    path: path.to_path_buf(),
                    reason: format!("segment {} vanished", e.segment),
                })?;
            let len = le_u64(seg.map.bytes(), e.offset + 24) as usize;
            let span = record_span(len);
            body.push((e.offset, span, e.segment));
            total += span;
        }
        let mut f = std::io::BufWriter::with_capacity(
            1 << 20,
            File::create(&tmp).map_err(io(&tmp, "creating a log spill file"))?,
        );
        f.write_all(&segment_header(self.rank, 0, total as u64))
            .map_err(io(&tmp, "writing a log spill file"))?;
        for &(offset, span, segment) in &body {
            let bytes = self
                .segments
                .get(&segment)
                .map(|s| s.map.bytes())
                .unwrap_or_default();
            let end = (offset + span).min(bytes.len());
            f.write_all(&bytes[offset..end])
                .and_then(|_| f.write_all(&vec![0u8; offset + span - end]))
                .map_err(io(&tmp, "writing a log spill file"))?;
        }
        let f = f
            .into_inner()
            .map_err(|e| io(&tmp, "writing a log spill file")(e.into_error()))?;
        f.sync_all().map_err(io(&tmp, "syncing a log spill file"))?;
        std::fs::rename(&tmp, path).map_err(io(path, "naming a log spill file"))?;
        Ok(entries.len() as u64)
    }

    /// Make the spill file `spill` (see [`SenderLog::spill`]: one segment,
    /// number 0) the first segment of the file log in `dir`, which has no
    /// segment yet, so that [`SenderLog::reopen`] continues the log from
    /// it; `spill` may be removed afterwards. A hard link: nothing is
    /// copied, and doing it again (after a crash) changes nothing.
    pub fn adopt_spill(spill: &Path, dir: &Path) -> Result<()> {
        let first = segment_path(dir, 0);
        if first.exists() {
            return Ok(());
        }
        std::fs::hard_link(spill, &first).map_err(io(&first, "adopting a log spill file"))
    }

    /// Start a new log for `rank` (in memory, or in `dir` if given) that
    /// holds the records of the spill file `spill` — those to each
    /// destination `d` up to sequence number `keep(d)`.
    pub fn restore(
        spill: &Path,
        dir: Option<&Path>,
        rank: u32,
        segment_size: usize,
        keep: impl Fn(u32) -> u64,
    ) -> Result<SenderLog> {
        let mut log = match dir {
            Some(d) => SenderLog::create(d, rank, segment_size)?,
            None => SenderLog::create_in_memory(rank, segment_size),
        };
        let file = File::open(spill).map_err(io(spill, "opening a log spill file"))?;
        // SAFETY: read-only mapping of a finished file nobody writes.
        let map = unsafe { Mmap::map(&file) }.map_err(io(spill, "mapping a log spill file"))?;
        check_segment_header(&map, 0, spill)?;
        let idx = log.next_index;
        let mut off = SEGMENT_HEADER;
        let mut live = 0;
        while let Some((h, _, len)) = decode_record(&map, off).map_err(|reason| Error::Corrupt {
            path: spill.to_path_buf(),
            reason,
        })? {
            if h.seq <= keep(h.dest) {
                log.index.queue(h.dest).push(Entry {
                    seq: h.seq,
                    segment: idx,
                    offset: off,
                });
                live += 1;
            }
            off += record_span(len);
        }
        for (_, q) in log.index.iter_mut() {
            q.sort();
        }
        log.segments.insert(
            idx,
            Segment {
                path: spill.to_path_buf(),
                on_disk: false,
                map: Map::ReadOnly(map),
                used: off,
                live,
                warm_until: 0,
                populated: off / PAGE * PAGE,
            },
        );
        log.next_index += 1;
        Ok(log)
    }

    /// Append a message. Sequence numbers per destination must increase.
    pub fn append(&mut self, header: RecordHeader, payload: &[u8]) -> Result<Location> {
        self.append_stored(header, payload).map(|(loc, _)| loc)
    }

    /// Make sure a record of `payload_len` bytes fits in the current
    /// segment, starting a new one if not, and return that segment's
    /// index. After it succeeds, appending a payload of that length cannot
    /// fail for want of room: a protocol reserves before the message
    /// leaves and copies the payload after.
    #[inline]
    pub fn reserve(&mut self, payload_len: usize) -> Result<u64> {
        // The common case, inline: room ready in the current segment.
        if record_span(payload_len) <= self.ready
            && let Some(i) = self.current
        {
            return Ok(i);
        }
        self.reserve_slow(payload_len)
    }

    /// The payload lengths [`SenderLog::reserve`] accepts right now without
    /// any work (room ready in the current segment): those below the
    /// returned bound (0: none). A protocol can tell its caller that a
    /// send this small needs no `reserve` before it leaves.
    #[inline]
    pub fn ready_below(&self) -> usize {
        match self.current {
            // The largest payload whose record spans at most `ready`, + 1.
            Some(_) => (self.ready / ALIGN * ALIGN)
                .checked_sub(RECORD_HEADER)
                .map_or(0, |max| max + 1),
            None => 0,
        }
    }

    /// [`SenderLog::reserve`] past the common case: take memory, or start
    /// a segment.
    #[inline(never)]
    fn reserve_slow(&mut self, payload_len: usize) -> Result<u64> {
        if !self.writable {
            return Err(Error::Corrupt {
                path: self.dir.clone(),
                reason: "the log was opened read-only".into(),
            });
        }
        let span = record_span(payload_len);
        let idx = match self.current.and_then(|i| Some((i, self.segments.get(&i)?))) {
            // Room, and memory taken for it (the record and the zero magic
            // after it).
            Some((i, s)) if s.used + span + RECORD_HEADER <= s.populated => i,
            // Memory the log already took is reused before more is taken:
            // a record that would reach past the current segment's taken
            // memory starts a spare segment that has it (the rest of this
            // one stays untouched, costing nothing).
            Some((i, s)) if s.used + span <= s.map.bytes().len() && !self.spare_has_taken(span) => {
                i
            }
            _ => self.new_segment(payload_len)?,
        };
        if let Some(seg) = self.segments.get_mut(&idx)
            && let Map::Writable(map) = &seg.map
            // The record, and the zero magic written after it.
            && let needed = (seg.used + span + RECORD_HEADER).min(map.len())
            && seg.populated < needed
        {
            // A step ahead, so that small records do not each pay a call.
            let to = needed.max(seg.populated + POPULATE_STEP);
            seg.populated = populate(map, seg.populated, to)
                .map_err(io(&seg.path, "taking memory for the sender log"))?;
        }
        self.ready = self.segments.get(&idx).map_or(0, Segment::ready);
        Ok(idx)
    }

    /// Is there a spare segment (of the current kind) whose taken memory
    /// holds a record of `span` bytes?
    fn spare_has_taken(&self, span: usize) -> bool {
        self.spare.iter().any(|s| {
            s.file.is_some() != self.in_memory
                && s.populated >= SEGMENT_HEADER + span + RECORD_HEADER
        })
    }

    /// Get the next records' memory ready for writing, for idle moments:
    /// while less than [`POPULATE_AHEAD`] of taken memory is ready, take
    /// memory a step further ahead and bring the next `ahead` bytes into
    /// this core's cache (a hint: nothing changes in the log). The next
    /// appends then copy into cached memory instead of waiting for it, or
    /// for the kernel. With that much ready (a log reusing its segments)
    /// it returns at once: each append prefetches the next record's lines
    /// itself, and prefetching further on every idle moment measured no
    /// better.
    #[inline]
    pub fn warm_up(&mut self, ahead: usize) {
        // Plenty of taken memory ahead: the common case, inline. The next
        // record's lines were prefetched by the last append.
        if self.ready >= POPULATE_AHEAD {
            return;
        }
        self.warm_up_now(ahead);
    }

    /// [`SenderLog::warm_up`]'s work, when there is some.
    #[inline(never)]
    fn warm_up_now(&mut self, ahead: usize) {
        // With a spare's taken memory to go to, `reserve` switches there.
        let spare_ready = self.spare_has_taken(POPULATE_STEP);
        let Some(seg) = self.current.and_then(|i| self.segments.get_mut(&i)) else {
            return;
        };
        let Map::Writable(map) = &mut seg.map else {
            return;
        };
        if seg.populated < (seg.used + POPULATE_AHEAD).min(map.len()) && !spare_ready {
            // Best effort: `reserve` reports a failure when it matters.
            let to = seg.populated + POPULATE_STEP;
            if let Ok(end) = populate(map, seg.populated, to) {
                seg.populated = end;
            }
        }
        seg.warm_until = warm_lines(
            map,
            seg.used,
            seg.warm_until,
            seg.used + ahead,
            seg.populated,
        );
        // What was taken now is ready for `reserve` (and for a protocol's
        // `ready_below`) without a look at the segment.
        self.ready = seg.ready();
    }

    /// [`SenderLog::append`], also returning the logged copy of the payload
    /// (what a transport sends from).
    pub fn append_stored(
        &mut self,
        header: RecordHeader,
        payload: &[u8],
    ) -> Result<(Location, &[u8])> {
        if header.dest >= MAX_DESTINATIONS {
            return Err(Error::DestinationOutOfRange {
                path: self.dir.clone(),
                dest: header.dest,
            });
        }
        let idx = self.reserve(payload.len())?;
        let Some(seg) = self.segments.get_mut(&idx) else {
            return Err(Error::Corrupt {
                path: self.dir.clone(),
                reason: format!("segment {idx} vanished"),
            });
        };
        let Map::Writable(map) = &mut seg.map else {
            return Err(Error::Corrupt {
                path: seg.path.clone(),
                reason: "segment is read-only".into(),
            });
        };
        let off = seg.used;
        let span = record_span(payload.len());
        let start = off + RECORD_HEADER;
        // The chain of records ends at a zero magic. A reused segment holds
        // old bytes past `used`: end the chain after this record before
        // the record itself becomes valid, so a crash at any point leaves
        // readers a chain of whole records and nothing stale behind it.
        end_chain(map, off + span);
        let crc = copy_with_checksum(&mut map[start..start + payload.len()], payload);
        // Header last: a record is complete once its header is there.
        write_record_header(
            &mut map[off..off + RECORD_HEADER],
            &header,
            payload.len() as u64,
            crc,
        );
        seg.used += span;
        seg.live += 1;
        self.ready = self.ready.saturating_sub(span);
        self.bytes_logged += payload.len() as u64;
        if span < STREAM_FROM {
            // The next record likely comes soon and about as long: ask for
            // its lines now, so that its copy does not wait for memory
            // (back-to-back sends leave no idle moment for `warm_up`).
            seg.warm_until = warm_lines(
                map,
                seg.used,
                seg.warm_until,
                seg.used + span,
                seg.populated,
            );
        }
        self.index.queue(header.dest).push(Entry {
            seq: header.seq,
            segment: idx,
            offset: off,
        });
        let location = Location {
            segment: idx,
            offset: start as u64,
            len: payload.len() as u64,
        };
        Ok((location, &map[start..start + payload.len()]))
    }

    fn record(&self, e: &Entry) -> Option<Record<'_>> {
        let seg = self.segments.get(&e.segment)?;
        let (header, start, len) = decode_record(seg.map.bytes(), e.offset).ok()??;
        Some(Record {
            header,
            payload: &seg.map.bytes()[start..start + len],
            location: Location {
                segment: e.segment,
                offset: start as u64,
                len: len as u64,
            },
        })
    }

    /// The payload bytes at `loc` (as returned by [`SenderLog::append`]),
    /// without re-validating them.
    pub fn payload(&self, loc: &Location) -> Option<&[u8]> {
        let seg = self.segments.get(&loc.segment)?;
        let start = usize::try_from(loc.offset).ok()?;
        let end = start.checked_add(usize::try_from(loc.len).ok()?)?;
        seg.map.bytes().get(start..end)
    }

    /// The record of message `seq` to `dest`, if logged and not freed.
    pub fn get(&self, dest: u32, seq: u64) -> Option<Record<'_>> {
        let q = self.index.get(dest)?;
        let i = q.binary_search_by_key(&seq, |e| e.seq).ok()?;
        self.record(&q[i])
    }

    /// Every kept record to `dest` with a sequence number ≥ `from`, in order.
    pub fn iter_from(&self, dest: u32, from: u64) -> impl Iterator<Item = Record<'_>> + '_ {
        let q = self.index.get(dest);
        let start = q.map_or(0, |q| q.partition_point(|e| e.seq < from));
        q.into_iter()
            .flat_map(move |q| q.iter().skip(start))
            .filter_map(|e| self.record(e))
    }

    /// Number of kept records to `dest`.
    pub fn records_to(&self, dest: u32) -> usize {
        self.index.get(dest).map_or(0, VecDeque::len)
    }

    /// Destinations with at least one kept record.
    pub fn destinations(&self) -> Vec<u32> {
        let mut d: Vec<u32> = self
            .index
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(d, _)| d)
            .collect();
        d.sort_unstable();
        d
    }

    /// Forget the records to `dest` up to and including `seq` (that rank
    /// checkpointed past them); delete segments left without a live record.
    /// Returns how many segments were deleted.
    pub fn free_up_to(&mut self, dest: u32, seq: u64) -> Result<usize> {
        let Some(q) = self.index.get_mut(dest) else {
            return Ok(0);
        };
        // A checkpoint frees a whole interval's records: one step per
        // segment they lie in.
        let freed = q.entries.partition_point(|e| e.seq <= seq);
        let segments = &mut self.segments;
        q.pop_front(freed, |index, n| {
            if let Some(seg) = segments.get_mut(&index) {
                seg.live = seg.live.saturating_sub(n);
            }
        });
        let empty: Vec<u64> = self
            .segments
            .iter()
            .filter(|(i, s)| s.live == 0 && Some(**i) != self.current)
            .map(|(i, _)| *i)
            .collect();
        for i in &empty {
            if let Some(seg) = self.segments.remove(i) {
                match seg.map {
                    Map::Writable(map)
                        if self.writable
                            && self.spare.len() + self.segments.len()
                                < SPARE_SEGMENTS.max(self.peak_segments)
                            && map.len() == self.segment_size =>
                    {
                        // Out of the log (for readers, as good as deleted)
                        // but kept, pages and all, for the next segment.
                        let file = if seg.on_disk {
                            let tmp = self.dir.join(format!(".seg-spare-{i:08}.tmp"));
                            std::fs::rename(&seg.path, &tmp)
                                .map_err(io(&seg.path, "setting a freed segment aside"))?;
                            Some(tmp)
                        } else {
                            None
                        };
                        self.spare.push(Spare {
                            map,
                            populated: seg.populated,
                            file,
                        });
                    }
                    map => {
                        drop(map);
                        if self.writable && seg.on_disk {
                            std::fs::remove_file(&seg.path)
                                .map_err(io(&seg.path, "deleting a freed segment"))?;
                        }
                    }
                }
            }
        }
        Ok(empty.len())
    }
}

/// Append `e` to a destination's index. When the queue is full it
/// doubles, and every slot of the new room is written once right away: the
/// queue is a ring that later appends go round, so otherwise each fresh
/// page would cost its own page fault whenever an append first reached it
/// (every 170 appends, for as long as it takes to go once round).
fn push_touched(q: &mut VecDeque<Entry>, e: Entry) {
    if q.len() == q.capacity() {
        let len = q.len();
        q.reserve(len.max(64));
        q.resize(q.capacity(), Entry::default());
        q.truncate(len);
    }
    q.push_back(e);
}

/// The spare segment (a file, or memory) of at least `capacity` bytes
/// with the most memory already taken, if any.
fn best_spare(spare: &[Spare], capacity: usize, file: bool) -> Option<usize> {
    (0..spare.len())
        .filter(|&i| spare[i].file.is_some() == file && spare[i].map.len() >= capacity)
        .max_by_key(|&i| spare[i].populated)
}

/// Zero the record magic at `off` (if a record fits there): readers stop
/// at it.
fn end_chain(map: &mut [u8], off: usize) {
    if off + RECORD_HEADER <= map.len() {
        map[off..off + 4].fill(0);
    }
}

impl Drop for SenderLog {
    fn drop(&mut self) {
        // Spare files are not part of the log: leave none behind.
        for s in &self.spare {
            if let Some(f) = &s.file {
                let _ = std::fs::remove_file(f);
            }
        }
    }
}

fn segment_header(rank: u32, idx: u64, capacity: u64) -> [u8; SEGMENT_HEADER] {
    let mut h = [0u8; SEGMENT_HEADER];
    h[0..8].copy_from_slice(SEGMENT_MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&rank.to_le_bytes());
    h[16..24].copy_from_slice(&idx.to_le_bytes());
    h[24..32].copy_from_slice(&capacity.to_le_bytes());
    let crc = crc32c(&h[0..60]);
    h[60..64].copy_from_slice(&crc.to_le_bytes());
    h
}

fn check_segment_header(map: &[u8], idx: u64, path: &Path) -> Result<u32> {
    let corrupt = |reason: String| Error::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    if map.len() < SEGMENT_HEADER || &map[0..8] != SEGMENT_MAGIC {
        return Err(corrupt(
            "not a vpml sender-log segment (bad magic at offset 0)".into(),
        ));
    }
    if crc32c(&map[0..60]) != le_u32(map, 60) {
        return Err(corrupt(
            "segment header checksum mismatch at offset 60".into(),
        ));
    }
    let version = le_u32(map, 8);
    if version != VERSION {
        return Err(corrupt(format!("unsupported format version {version}")));
    }
    if le_u64(map, 16) != idx {
        return Err(corrupt(format!(
            "header says segment {}, file name says {idx}",
            le_u64(map, 16)
        )));
    }
    Ok(le_u32(map, 12))
}

/// Reserve `len` bytes of real disk space, so writing through the mapping
/// can never hit a full disk (which would be SIGBUS, not an error).
fn preallocate(file: &File, len: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let len = libc::off_t::try_from(len).map_err(|_| std::io::Error::other("segment too large"))?;
    // SAFETY: plain syscall on a descriptor we own.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
    if rc == 0 {
        Ok(())
    } else if rc == libc::EOPNOTSUPP {
        file.set_len(len as u64)
    } else {
        Err(std::io::Error::from_raw_os_error(rc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("vpml-slog-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// How many different segment indexes `segments` names.
    fn distinct(segments: impl Iterator<Item = u64>) -> usize {
        segments.collect::<std::collections::BTreeSet<u64>>().len()
    }

    fn hdr(dest: u32, seq: u64) -> RecordHeader {
        RecordHeader {
            dest,
            context: 0,
            tag: (seq % 7) as i32,
            seq,
        }
    }

    #[test]
    fn the_one_pass_copy_sums_like_crc32c() {
        let src: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let lens = [
            0,
            1,
            40,
            63,
            SMALL_CRC - 1,
            SMALL_CRC,
            SMALL_CRC + 1,
            STREAM_FROM - 1,
            STREAM_FROM,
            STREAM_FROM + 1,
            100_000 - 48,
        ];
        for (len, at) in lens.into_iter().flat_map(|l| [0, 1, 48].map(|a| (l, a))) {
            // Misaligned by `at`, as a payload after a record header is:
            // the streaming copy's head and tail take plain stores.
            let mut dst = vec![0u8; len + at + 1];
            let crc = copy_with_checksum(&mut dst[at..at + len], &src[..len]);
            assert_eq!(&dst[at..at + len], &src[..len], "length {len} at {at}");
            assert!(dst[..at].iter().all(|&b| b == 0), "wrote before {at}");
            assert_eq!(dst[at + len], 0, "wrote past {len} at {at}");
            assert_eq!(crc, crc32c::crc32c(&src[..len]), "length {len}");
            assert_eq!(super::crc32c(&src[..len]), crc, "length {len}");
        }
    }

    #[test]
    fn a_record_header_is_summed_as_its_bytes() {
        // 8-aligned, as records are in a segment.
        #[repr(align(8))]
        struct Aligned([u8; RECORD_HEADER]);
        let mut a = Aligned([0; RECORD_HEADER]);
        let b = &mut a.0[..];
        let h = RecordHeader {
            dest: 3,
            context: 0x1234_5678,
            tag: -7,
            seq: 0x0102_0304_0506_0708,
        };
        write_record_header(b, &h, 4242, 0xdead_beef);
        let b = &a.0;
        assert_eq!(le_u32(b, 0), RECORD_MAGIC);
        assert_eq!(le_u32(b, 12) as i32, -7);
        assert_eq!(le_u64(b, 24), 4242);
        assert_eq!(le_u32(b, 32), 0xdead_beef);
        assert_eq!(le_u32(b, 40), crc32c::crc32c(&b[..40]));
        assert_eq!(b[44..], [0; 4]);
    }

    #[test]
    fn an_out_of_range_destination_is_refused_on_append_and_on_read() {
        let dir = tmp("dest-range");
        let mut log = SenderLog::create(&dir, 0, 1 << 16).unwrap();
        let err = log
            .append(hdr(MAX_DESTINATIONS, 1), b"x")
            .expect_err("rank past the bound");
        assert!(
            err.to_string().contains("destination rank 1048576"),
            "{err}"
        );
        log.append(hdr(1000, 1), b"far rank").unwrap();
        log.append(hdr(2, 1), b"two").unwrap();
        assert_eq!(log.destinations(), vec![2, 1000]);
        assert_eq!(log.get(1000, 1).map(|r| r.payload), Some(&b"far rank"[..]));
        drop(log);
        // A damaged file whose header sum still matches names the rank.
        let path = segment_path(&dir, 0);
        let mut bytes = std::fs::read(&path).unwrap();
        let h = SEGMENT_HEADER;
        bytes[h + 4..h + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        let sum = crc32c::crc32c(&bytes[h..h + 40]);
        bytes[h + 40..h + 44].copy_from_slice(&sum.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let err = SenderLog::open_read_only(&dir)
            .err()
            .expect("damaged record refused");
        assert!(
            err.to_string()
                .contains("destination rank 4294967295 out of range in the record at offset 64"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn small_sums_agree_with_crc32c_at_every_length_and_offset() {
        let src: Vec<u8> = (0..2 * SMALL_CRC as u32)
            .map(|i| (i * 131 + 7) as u8)
            .collect();
        for at in 0..8 {
            for len in 0..=SMALL_CRC + 8 {
                let bytes = &src[at..at + len];
                assert_eq!(crc32c(bytes), crc32c::crc32c(bytes), "length {len} at {at}");
            }
        }
    }

    #[test]
    fn a_segment_takes_memory_only_as_records_reach_it() {
        use std::os::unix::fs::MetadataExt;
        let dir = tmp("lazy");
        let mut log = SenderLog::create(&dir, 0, 16 << 20).unwrap();
        log.append(hdr(1, 1), &[1u8; 100]).unwrap();
        let file = segment_path(&dir, 0);
        let taken = |f: &Path| std::fs::metadata(f).unwrap().blocks() * 512;
        let first = taken(&file);
        assert!(
            first <= (POPULATE_STEP + PAGE) as u64,
            "a 16 MiB segment took {first} bytes for one record"
        );
        // Records far past the first step still land on taken memory.
        for seq in 2..=200u64 {
            log.append(hdr(1, seq), &[seq as u8; 4000]).unwrap();
        }
        assert!(
            taken(&file) < 4 << 20,
            "200 records took {} bytes",
            taken(&file)
        );
        let r = log.get(1, 200).unwrap();
        assert_eq!(r.payload, &[200u8; 4000][..]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_record_lands_on_taken_memory_and_ready_room_is_exact() {
        let dir = tmp("ready");
        let mut log = SenderLog::create(&dir, 0, 1 << 20).unwrap();
        assert_eq!(log.ready_below(), 0, "nothing is ready before a record");
        let mut promised = 0;
        // Sizes that cross populate steps and segment ends at odd places,
        // through both of `reserve`'s paths, with idle moments between.
        for seq in 1..=3000u64 {
            let len = (seq as usize * 7919) % 5000;
            let below = log.ready_below();
            if below > 0 {
                assert!(record_span(below - 1) <= log.ready);
                assert!(record_span(below) > log.ready);
            }
            let before = (log.current, log.segment_count(), log.ready);
            log.reserve(len).unwrap();
            if len < below {
                // Promised by `ready_below`: no work, nothing moved.
                assert_eq!((log.current, log.segment_count(), log.ready), before);
                promised += 1;
            }
            log.append(hdr(1, seq), &vec![seq as u8; len]).unwrap();
            if seq % 7 == 0 {
                log.warm_up(4096);
            }
            let seg = &log.segments[&log.current.unwrap()];
            assert!(
                seg.used + RECORD_HEADER <= seg.populated,
                "record {seq} ends at {} past taken memory {}",
                seg.used,
                seg.populated
            );
            assert!(log.ready <= seg.ready());
        }
        assert!(promised > 1000, "only {promised} appends took the promise");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn memory_already_taken_is_reused_before_more_is_taken() {
        use std::os::unix::fs::MetadataExt;
        let dir = tmp("retake");
        let taken = |f: &Path| std::fs::metadata(f).unwrap().blocks() * 512;
        let mut log = SenderLog::create(&dir, 0, 1 << 20).unwrap();
        // Fill segment 0 (all of it taken), start segment 1, then free
        // segment 0's records: it becomes a spare with its memory.
        let mut seq = 0u64;
        while log.segment_count() < 2 {
            seq += 1;
            log.append(hdr(1, seq), &[7u8; 1000]).unwrap();
        }
        let first_of_segment_1 = seq;
        log.free_up_to(1, first_of_segment_1 - 1).unwrap();
        assert_eq!(log.segment_count(), 1);
        let segment_1 = segment_path(&dir, 1);
        let before = taken(&segment_1);
        assert!(before < 1 << 20, "segment 1 took {before} bytes at once");
        // Log on past segment 1's taken memory: the spare's is used
        // instead, and segment 1 takes no more.
        let (_, reused_before) = log.segments_started();
        while log.segments_started().1 == reused_before {
            seq += 1;
            log.append(hdr(1, seq), &[8u8; 1000]).unwrap();
            assert!(seq < first_of_segment_1 + 2000, "the spare was never used");
        }
        assert_eq!(taken(&segment_1), before, "segment 1 took more memory");
        // Every record reads back, across the switch.
        for s in first_of_segment_1..=seq {
            let r = log.get(1, s).unwrap();
            assert_eq!(r.payload.len(), 1000);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_reserved_record_goes_where_the_reservation_said() {
        let dir = tmp("reserve");
        let mut log = SenderLog::create(&dir, 0, 4096).unwrap();
        let mut starts = Vec::new();
        for seq in 1..=40u64 {
            let seg = log.reserve(1000).unwrap();
            let (loc, _) = log.append_stored(hdr(1, seq), &[seq as u8; 1000]).unwrap();
            assert_eq!(loc.segment, seg);
            starts.push(seg);
        }
        assert!(
            starts.windows(2).any(|w| w[0] != w[1]),
            "segments must roll over"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn records_come_back_by_destination_and_sequence() {
        let dir = tmp("basic");
        let mut log = SenderLog::create(&dir, 3, 4096).unwrap();
        for seq in 1..=50u64 {
            for dest in 0..3u32 {
                let payload = vec![(seq as u8).wrapping_add(dest as u8); (seq as usize * 13) % 300];
                log.append(hdr(dest, seq), &payload).unwrap();
            }
        }
        assert!(log.segment_count() > 1, "small segments must roll over");
        let r = log.get(1, 17).unwrap();
        assert_eq!(r.header, hdr(1, 17));
        assert_eq!(r.payload, vec![18u8; 17 * 13].as_slice());
        let seqs: Vec<u64> = log.iter_from(2, 45).map(|r| r.header.seq).collect();
        assert_eq!(seqs, vec![45, 46, 47, 48, 49, 50]);
        assert!(log.get(7, 1).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn freeing_every_destination_reclaims_whole_segments() {
        let dir = tmp("free");
        let mut log = SenderLog::create(&dir, 0, 4096).unwrap();
        for seq in 1..=100u64 {
            log.append(hdr(1, seq), &[1u8; 200]).unwrap();
            log.append(hdr(2, seq), &[2u8; 200]).unwrap();
        }
        let before = log.segment_count();
        assert_eq!(
            log.free_up_to(1, 100).unwrap(),
            0,
            "dest 2 still needs every segment"
        );
        let freed = log.free_up_to(2, 60).unwrap();
        assert!(freed > 0 && log.segment_count() == before - freed);
        assert!(log.get(2, 60).is_none() && log.get(2, 61).is_some());
        let names = |dir: &Path| -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        let in_log = names(&dir).iter().filter(|n| n.starts_with("seg-")).count();
        assert_eq!(in_log, log.segment_count());
        let spares = |dir: &Path| {
            names(dir)
                .iter()
                .filter(|n| n.starts_with(".seg-spare-"))
                .count()
        };
        // Freed segments are set aside for reuse: all of them, as live and
        // spare segments together stay within the log's peak.
        assert_eq!(spares(&dir), freed);
        // Never more: a log that shrinks for good gives memory back.
        log.free_up_to(2, 100).unwrap();
        assert!(spares(&dir) > freed);
        assert!(spares(&dir) + log.segment_count() <= before.max(SPARE_SEGMENTS));
        drop(log);
        assert!(
            names(&dir).iter().all(|n| n.starts_with("seg-")),
            "spares are deleted with the log: {:?}",
            names(&dir)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_reader_sees_what_was_written_and_ignores_a_torn_tail() {
        let dir = tmp("reader");
        let mut log = SenderLog::create(&dir, 5, 1 << 16).unwrap();
        for seq in 1..=20u64 {
            log.append(hdr(0, seq), &vec![seq as u8; 1000]).unwrap();
        }
        // Simulate a crash after a payload but before its header.
        let last = log.append(hdr(0, 21), &[9u8; 64]).unwrap();
        let seg = segment_path(&dir, last.segment);
        drop(log);
        let mut bytes = std::fs::read(&seg).unwrap();
        let hdr_at = last.offset as usize - RECORD_HEADER;
        bytes[hdr_at..hdr_at + RECORD_HEADER].fill(0);
        std::fs::write(&seg, &bytes).unwrap();
        let r = SenderLog::open_read_only(&dir).unwrap();
        assert_eq!(r.rank(), 5);
        assert_eq!(r.iter_from(0, 1).count(), 20);
        assert_eq!(r.get(0, 20).unwrap().payload, vec![20u8; 1000].as_slice());
        // Damage in the middle is an error naming the file and offset.
        bytes[SEGMENT_HEADER + RECORD_HEADER + 10] ^= 0xff;
        std::fs::write(&seg, &bytes).unwrap();
        let err = SenderLog::open_read_only(&dir).err().unwrap().to_string();
        let name = seg.file_name().unwrap().to_string_lossy().into_owned();
        assert!(err.contains(&name) && err.contains("offset 64"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_reused_segment_never_shows_its_old_records() {
        let dir = tmp("reuse");
        let mut log = SenderLog::create(&dir, 2, 4096).unwrap();
        for seq in 1..=100u64 {
            log.append(hdr(0, seq), &[seq as u8; 300]).unwrap();
        }
        let current = log.get(0, 100).unwrap().location.segment;
        let mut want: Vec<u64> = (1..=100)
            .filter(|&s| log.get(0, s).unwrap().location.segment == current)
            .collect();
        assert!(log.free_up_to(0, 100).unwrap() >= SPARE_SEGMENTS);
        // Shorter records: the reused segments keep whole old records
        // after the new ones.
        let mut reused = false;
        for seq in 101..=120u64 {
            let at = log.append(hdr(0, seq), &[!(seq as u8); 10]).unwrap();
            reused |= at.segment > current;
        }
        assert!(reused, "later records go to a reused segment");
        want.extend(101..=120);
        let seqs = |dir: &Path| -> Vec<u64> {
            let r = SenderLog::open_read_only(dir).unwrap();
            let mut v: Vec<u64> = r.iter_from(0, 0).map(|r| r.header.seq).collect();
            v.sort();
            v
        };
        assert_eq!(seqs(&dir), want);
        let r = SenderLog::open_read_only(&dir).unwrap();
        assert_eq!(r.get(0, 120).unwrap().payload, &[!120u8; 10]);
        // A crash between payload and header of the last record: the
        // chain ends before it, not at the old bytes behind it.
        let last = log.get(0, 120).unwrap().location;
        let hdr_at = last.offset as usize - RECORD_HEADER;
        let seg = segment_path(&dir, last.segment);
        drop(r);
        drop(log);
        let mut bytes = std::fs::read(&seg).unwrap();
        bytes[hdr_at..hdr_at + RECORD_HEADER].fill(0);
        std::fs::write(&seg, &bytes).unwrap();
        want.pop();
        assert_eq!(seqs(&dir), want);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_memory_log_spills_to_a_file_and_a_new_log_restores_what_it_keeps() {
        let dir = tmp("spill");
        std::fs::create_dir_all(&dir).unwrap();
        let mut log = SenderLog::create_in_memory(3, 8192);
        let body = |d: u32, seq: u64| vec![(d as u8) ^ (seq as u8); (seq as usize * 131) % 3000];
        for seq in 1..=20u64 {
            for d in [0u32, 1] {
                let h = RecordHeader {
                    dest: d,
                    context: 5,
                    tag: seq as i32,
                    seq,
                };
                log.append(h, &body(d, seq)).unwrap();
            }
        }
        // Freed records are neither spilled nor restored; freed segments
        // are reused without new memory.
        log.free_up_to(0, 6).unwrap();
        let spill = dir.join("log-1.vlog");
        assert_eq!(log.spill(&spill).unwrap(), 14 + 20);
        let back =
            SenderLog::restore(&spill, None, 3, 8192, |d| if d == 0 { 15 } else { 20 }).unwrap();
        let zero: Vec<u64> = back.iter_from(0, 0).map(|r| r.header.seq).collect();
        assert_eq!(zero, (7..=15).collect::<Vec<_>>());
        assert_eq!(back.records_to(1), 20);
        for r in back.iter_from(1, 0) {
            assert_eq!(r.payload, body(1, r.header.seq).as_slice());
            assert_eq!((r.header.context, r.header.tag), (5, r.header.seq as i32));
        }
        // A restored log keeps growing after the spilled records.
        let mut back = back;
        let h = RecordHeader {
            dest: 0,
            context: 5,
            tag: 0,
            seq: 16,
        };
        back.append(h, b"after").unwrap();
        assert_eq!(back.get(0, 16).unwrap().payload, b"after");
        // A damaged spill file is refused with its name.
        let mut bytes = std::fs::read(&spill).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0x55;
        std::fs::write(&spill, &bytes).unwrap();
        let err = SenderLog::restore(&spill, None, 3, 8192, |_| u64::MAX)
            .err()
            .expect("damage detected")
            .to_string();
        assert!(err.contains("log-1.vlog"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_record_larger_than_a_segment_gets_its_own() {
        let dir = tmp("big");
        let mut log = SenderLog::create(&dir, 0, 4096).unwrap();
        let big = vec![7u8; 100_000];
        log.append(hdr(0, 1), &[1, 2, 3]).unwrap();
        log.append(hdr(0, 2), &big).unwrap();
        log.append(hdr(0, 3), &[4]).unwrap();
        assert_eq!(log.get(0, 2).unwrap().payload, big.as_slice());
        assert_eq!(log.get(0, 3).unwrap().payload, &[4]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn random_appends_and_frees_match_a_model(ops in prop::collection::vec((0u32..3, 0usize..700, any::<bool>()), 1..120)) {
            let dir = tmp(&format!("prop-{}", ops.len()));
            let mut log = SenderLog::create(&dir, 1, 4096).unwrap();
            let mut model: Vec<(u32, u64, Vec<u8>)> = Vec::new();
            // Segment of each kept record, and of the last append (the
            // current segment, never freed).
            let mut segment_of: BTreeMap<(u32, u64), u64> = BTreeMap::new();
            let mut current = None;
            let mut next = [0u64; 3];
            for (dest, len, free) in ops {
                if free && next[dest as usize] > 1 {
                    let upto = next[dest as usize] / 2;
                    log.free_up_to(dest, upto).unwrap();
                    model.retain(|(d, s, _)| *d != dest || *s > upto);
                    segment_of.retain(|&(d, s), _| d != dest || s > upto);
                    // Exactly the segments with a kept record remain.
                    prop_assert_eq!(log.segment_count(), distinct(segment_of.values().copied().chain(current)));
                } else {
                    next[dest as usize] += 1;
                    let seq = next[dest as usize];
                    let payload: Vec<u8> = (0..len).map(|i| (i as u64 * 31 + seq) as u8).collect();
                    let at = log.append(hdr(dest, seq), &payload).unwrap();
                    segment_of.insert((dest, seq), at.segment);
                    current = Some(at.segment);
                    model.push((dest, seq, payload));
                }
            }
            for dest in 0..3 {
                let got: Vec<(u64, Vec<u8>)> = log.iter_from(dest, 0).map(|r| (r.header.seq, r.payload.to_vec())).collect();
                let want: Vec<(u64, Vec<u8>)> = model.iter().filter(|(d, _, _)| *d == dest).map(|(_, s, p)| (*s, p.clone())).collect();
                prop_assert_eq!(got, want);
            }
            let reread = SenderLog::open_read_only(&dir).unwrap();
            for (dest, seq, payload) in &model {
                prop_assert_eq!(reread.get(*dest, *seq).map(|r| r.payload.to_vec()), Some(payload.clone()));
            }
            // Freed records stay in segments that still hold kept ones:
            // a restarted writer indexes them again.
            let mut on_file: BTreeMap<(u32, u64), u64> = BTreeMap::new();
            for dest in 0..3 {
                for r in reread.iter_from(dest, 0) {
                    on_file.insert((dest, r.header.seq), r.location.segment);
                }
            }
            drop((reread, log));
            // A restarted writer's index (rebuilt from the files) frees
            // the same way: three quarters of each destination, then the
            // rest.
            let mut again = SenderLog::reopen(&dir, 1, 4096, |_| u64::MAX).unwrap();
            for dest in 0..3 {
                let upto = next[dest as usize] * 3 / 4;
                again.free_up_to(dest, upto).unwrap();
                model.retain(|(d, s, _)| *d != dest || *s > upto);
                on_file.retain(|&(d, s), _| d != dest || s > upto);
                prop_assert_eq!(again.segment_count(), distinct(on_file.values().copied()));
            }
            for (dest, seq, payload) in &model {
                prop_assert_eq!(again.get(*dest, *seq).map(|r| r.payload.to_vec()), Some(payload.clone()));
            }
            for dest in 0..3 {
                again.free_up_to(dest, u64::MAX).unwrap();
            }
            prop_assert_eq!(again.segment_count(), 0);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
