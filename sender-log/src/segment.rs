//! A segment of the log (a mapped file, or memory) and a freed one kept
//! for reuse.

use std::path::PathBuf;

use memmap2::{Mmap, MmapMut};

use crate::format::RECORD_HEADER;

/// Default capacity of a segment. A segment is reused only once all its
/// records are freed, so its size sets how soon a checkpointing job stops
/// taking fresh memory (about two segments, plus what two checkpoint
/// intervals log) and how much it holds. Fresh memory is costly: ~0.4 µs
/// per KiB on tmpfs, which is 10 % of a small message's latency. 16 MiB
/// still holds three 4 MiB records; a record larger than a segment gets
/// one of its own.
pub const DEFAULT_SEGMENT_SIZE: usize = 16 << 20;

/// A segment's mapping: writable in a log being written, read-only in a
/// log opened for reading (and for a restored spill file).
pub(crate) enum Map {
    Writable(MmapMut),
    ReadOnly(Mmap),
}

impl Map {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Map::Writable(m) => m,
            Map::ReadOnly(m) => m,
        }
    }
}

/// One segment of a log: its mapping, and how far it is used, live and
/// backed by memory.
pub(crate) struct Segment {
    pub(crate) path: PathBuf,
    /// The segment is a file (deleted once freed); otherwise memory.
    pub(crate) on_disk: bool,
    pub(crate) map: Map,
    pub(crate) used: usize,
    pub(crate) live: usize,
    /// Up to where [`SenderLog::warm_up`](crate::SenderLog::warm_up)
    /// already fetched.
    pub(crate) warm_until: usize,
    /// Bytes from the start backed by memory and mapped writable (see
    /// [`populate`](crate::memory::populate)): appends below it neither
    /// fault nor fail.
    pub(crate) populated: usize,
}

impl Segment {
    /// Room for records on memory already taken: a record spanning at most
    /// this many bytes fits, with the zero magic after it.
    pub(crate) fn ready(&self) -> usize {
        self.populated.saturating_sub(self.used + RECORD_HEADER)
    }
}

/// A freed segment kept for reuse.
pub(crate) struct Spare {
    pub(crate) map: MmapMut,
    /// Its `populated` bytes when it was freed.
    pub(crate) populated: usize,
    /// For a file log, the file backing `map`, renamed out of the log
    /// (`.seg-spare-*.tmp`: readers and restarts ignore it).
    pub(crate) file: Option<PathBuf>,
}

/// Freed segments are kept for reuse while live and spare segments
/// together stay within the most the log ever had live (its working size:
/// a log garbage-collected by checkpoints needs it again at the next
/// burst), or within this many.
pub(crate) const SPARE_SEGMENTS: usize = 4;

/// The spare segment (a file, or memory) of at least `capacity` bytes
/// with the most memory already taken, if any.
pub(crate) fn best_spare(spare: &[Spare], capacity: usize, file: bool) -> Option<usize> {
    (0..spare.len())
        .filter(|&i| spare[i].file.is_some() == file && spare[i].map.len() >= capacity)
        .max_by_key(|&i| spare[i].populated)
}
