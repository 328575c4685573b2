//! A segment of the log (in memory — a mapped file of the log directory
//! or anonymous memory — or moved to disk) and a freed one kept for reuse.

use std::cell::OnceCell;
use std::path::PathBuf;
use std::sync::Arc;

use memmap2::{Mmap, MmapMut};

use crate::format::RECORD_HEADER;

/// Default capacity of a segment. Memory is reused a segment at a time
/// (once all its records are freed, or once it has been copied to disk),
/// so its size sets how soon a log stops taking fresh memory and how much
/// one holds. Fresh memory is costly: ~0.4 µs per KiB on tmpfs, which is
/// 10 % of a small message's latency. 16 MiB still holds three 4 MiB
/// records; a record larger than a segment gets one of its own.
pub const DEFAULT_SEGMENT_SIZE: usize = 16 << 20;

/// A segment's bytes.
pub(crate) enum Map {
    /// Memory of the log (the current segment, or a full one), written by
    /// this process only.
    Writable(MmapMut),
    /// A full segment's memory, shared with the writer copying it to disk
    /// (nobody writes it any more).
    Sealed(Arc<MmapMut>),
    /// A file mapped read-only: a segment of a log opened for reading, or a
    /// restored copy.
    ReadOnly(Mmap),
    /// A segment moved to disk: its file, mapped read-only the first time
    /// a record of it is read (a log that never checkpoints has thousands,
    /// and each mapping is one of the process's limited map areas).
    OnDisk(OnceCell<Mmap>),
}

impl Map {
    /// The segment's bytes; for a segment on disk, empty if its file
    /// cannot be mapped (see [`Segment::bytes`]).
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Map::Writable(m) => m,
            Map::Sealed(m) => m,
            Map::ReadOnly(m) => m,
            Map::OnDisk(m) => m.get().map_or(&[], |m| &m[..]),
        }
    }

    /// Is this the log's memory (as opposed to a file only read)?
    pub(crate) fn is_memory(&self) -> bool {
        matches!(self, Map::Writable(_) | Map::Sealed(_))
    }
}

/// Where a segment in memory stands with its copy on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DiskCopy {
    /// None (yet).
    None,
    /// Being written by the spill writer.
    Writing,
    /// Complete, at this path: the memory may be reused.
    Done(PathBuf),
}

/// One segment of a log: its bytes, and how far it is used, live and
/// backed by memory.
pub(crate) struct Segment {
    /// Its file: in the log directory (memory), in the spill directory
    /// (moved to disk), or a name for anonymous memory.
    pub(crate) path: PathBuf,
    /// Its memory is a file of the log directory (not anonymous memory).
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
    /// Cloned into every loan of this segment's memory to the engine
    /// ([`SenderLog::lend`](crate::SenderLog::lend)): while a clone lives,
    /// the memory is not reused for other records.
    pub(crate) lease: Arc<()>,
    pub(crate) disk: DiskCopy,
}

impl Segment {
    /// A segment of `map`, used up to `used`, with `live` records.
    pub(crate) fn new(path: PathBuf, on_disk: bool, map: Map, used: usize, live: usize) -> Segment {
        Segment {
            path,
            on_disk,
            map,
            used,
            live,
            warm_until: 0,
            populated: 0,
            lease: Arc::new(()),
            disk: DiskCopy::None,
        }
    }

    /// Room for records on memory already taken: a record spanning at most
    /// this many bytes fits, with the zero magic after it.
    pub(crate) fn ready(&self) -> usize {
        self.populated.saturating_sub(self.used + RECORD_HEADER)
    }

    /// Its bytes, mapping its file first if it is on disk and not mapped
    /// yet. An error names the file.
    pub(crate) fn bytes(&self) -> std::io::Result<&[u8]> {
        if let Map::OnDisk(cell) = &self.map
            && cell.get().is_none()
        {
            let file = std::fs::File::open(&self.path)?;
            // SAFETY: a finished file of this log that nobody writes (the
            // spill writer renamed it into place once complete); it is
            // deleted only when its records are freed, after which they
            // are never read.
            let map = unsafe { Mmap::map(&file) }?;
            let _ = cell.set(map);
        }
        Ok(self.map.bytes())
    }

    /// Bytes of memory this segment holds in the log's memory (0 for a
    /// file only read).
    pub(crate) fn memory(&self) -> usize {
        if self.map.is_memory() {
            self.map.bytes().len()
        } else {
            0
        }
    }

    /// Is the engine reading this segment's memory (a loan is out)?
    pub(crate) fn lent(&self) -> bool {
        Arc::strong_count(&self.lease) > 1
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

/// The segments of a log by index: a dense table from the oldest kept
/// index on, so that an append finds the current segment in constant
/// time however many older ones a log that never checkpoints keeps on
/// disk (indices only grow; a freed prefix is dropped).
#[derive(Default)]
pub(crate) struct SegmentTable {
    /// Index of `slots[0]`.
    base: u64,
    slots: std::collections::VecDeque<Option<Segment>>,
    len: usize,
}

impl SegmentTable {
    fn slot(&self, idx: u64) -> Option<usize> {
        idx.checked_sub(self.base)
            .and_then(|i| usize::try_from(i).ok())
    }

    pub(crate) fn get(&self, idx: &u64) -> Option<&Segment> {
        self.slots.get(self.slot(*idx)?)?.as_ref()
    }

    pub(crate) fn get_mut(&mut self, idx: &u64) -> Option<&mut Segment> {
        let i = self.slot(*idx)?;
        self.slots.get_mut(i)?.as_mut()
    }

    /// Add segment `idx` (a new index, or one a reader found on disk).
    pub(crate) fn insert(&mut self, idx: u64, seg: Segment) {
        if self.slots.is_empty() {
            self.base = idx;
        }
        while idx < self.base {
            self.slots.push_front(None);
            self.base -= 1;
        }
        let i = (idx - self.base) as usize;
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, || None);
        }
        if self.slots[i].replace(seg).is_none() {
            self.len += 1;
        }
    }

    pub(crate) fn remove(&mut self, idx: &u64) -> Option<Segment> {
        let i = self.slot(*idx)?;
        let seg = self.slots.get_mut(i)?.take()?;
        self.len -= 1;
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.base += 1;
        }
        Some(seg)
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The segments in index order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &Segment)> {
        (self.base..)
            .zip(&self.slots)
            .filter_map(|(i, s)| Some((i, s.as_ref()?)))
    }
}
