//! The index of kept records: per stream — a destination and a
//! communicator context, whose messages are numbered on their own — in
//! sequence order.
//!
//! Records in memory are indexed one by one ([`Entry`]). Once a segment
//! has moved to disk its records are rarely read again (only to re-send
//! them to a restarted peer), so each stream keeps just a
//! [`DiskRun`] per segment for them — the index of a log that never
//! checkpoints grows by a few words per segment moved out, not per message.

use std::collections::VecDeque;

/// A kept record: its sequence number, and where its header lies.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) seq: u64,
    pub(crate) segment: u64,
    /// Offset of the record header.
    pub(crate) offset: usize,
}

/// The kept records of one stream in one segment on disk: sequence
/// numbers `first..=last`, consecutive (a stream's records are appended
/// in sequence order, so those of one segment are a run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DiskRun {
    pub(crate) segment: u64,
    pub(crate) first: u64,
    pub(crate) last: u64,
}

impl DiskRun {
    pub(crate) fn count(&self) -> usize {
        (self.last - self.first + 1) as usize
    }
}

/// The largest destination rank a log takes, plus one. The index is an
/// array by destination, so a rank number read from a damaged file must not
/// make it allocate without bound (at most 64 MiB of empty queues here).
pub const MAX_DESTINATIONS: u32 = 1 << 20;

/// The records of each stream, in sequence order: an array by
/// destination rank (ranks are small and dense, and an append looks its
/// queue up without hashing), each holding its contexts' queues sorted by
/// context (a destination takes messages on a few contexts at a time).
#[derive(Default)]
pub(crate) struct Index {
    by_dest: Vec<Vec<(u32, StreamQueue)>>,
}

impl Index {
    /// The queue of (`dest`, `context`), made if new. `dest` <
    /// [`MAX_DESTINATIONS`] (checked by callers: `append_stored` and
    /// `decode_record`).
    #[inline]
    pub(crate) fn queue(&mut self, dest: u32, context: u32) -> &mut StreamQueue {
        let d = dest as usize;
        if d >= self.by_dest.len() {
            self.by_dest.resize_with(d + 1, Vec::new);
        }
        let streams = &mut self.by_dest[d];
        let i = match streams.binary_search_by_key(&context, |(c, _)| *c) {
            Ok(i) => i,
            Err(i) => {
                streams.insert(i, (context, StreamQueue::default()));
                i
            }
        };
        &mut streams[i].1
    }

    pub(crate) fn get(&self, dest: u32, context: u32) -> Option<&StreamQueue> {
        let streams = self.by_dest.get(dest as usize)?;
        let i = streams.binary_search_by_key(&context, |(c, _)| *c).ok()?;
        Some(&streams[i].1)
    }

    pub(crate) fn get_mut(&mut self, dest: u32, context: u32) -> Option<&mut StreamQueue> {
        let streams = self.by_dest.get_mut(dest as usize)?;
        let i = streams.binary_search_by_key(&context, |(c, _)| *c).ok()?;
        Some(&mut streams[i].1)
    }

    /// The streams to `dest`, by context.
    pub(crate) fn streams_to(&self, dest: u32) -> impl Iterator<Item = (u32, &StreamQueue)> {
        self.by_dest
            .get(dest as usize)
            .into_iter()
            .flatten()
            .map(|(c, q)| (*c, q))
    }

    /// Every stream's records (empty ones included): (destination,
    /// context, queue), by destination and context.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, u32, &StreamQueue)> {
        (0u32..)
            .zip(self.by_dest.iter())
            .flat_map(|(d, streams)| streams.iter().map(move |(c, q)| (d, *c, q)))
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (u32, u32, &mut StreamQueue)> {
        (0u32..)
            .zip(&mut self.by_dest)
            .flat_map(|(d, streams)| streams.iter_mut().map(move |(c, q)| (d, *c, q)))
    }
}

/// One stream's records in sequence order: the oldest as runs of
/// segments on disk, the rest one by one, with those as runs by segment
/// too (consecutive records mostly share one), so that freeing a
/// checkpoint interval's records costs a step per segment, not per record.
#[derive(Default)]
pub(crate) struct StreamQueue {
    /// Records of segments on disk, oldest first; all precede `entries`.
    pub(crate) on_disk: VecDeque<DiskRun>,
    pub(crate) entries: VecDeque<Entry>,
    /// (segment, how many consecutive entries lie in it), front to back.
    runs: VecDeque<(u64, usize)>,
}

impl StreamQueue {
    /// Append a record (in sequence order).
    #[inline]
    pub(crate) fn push(&mut self, e: Entry) {
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

    /// How many records are kept.
    pub(crate) fn len(&self) -> usize {
        self.on_disk.iter().map(DiskRun::count).sum::<usize>() + self.entries.len()
    }

    /// No record kept.
    pub(crate) fn is_empty(&self) -> bool {
        self.on_disk.is_empty() && self.entries.is_empty()
    }

    /// Sort the entries (read back from files in segment order) and make
    /// the runs that match them.
    pub(crate) fn sort(&mut self) {
        self.entries
            .make_contiguous()
            .sort_by_key(|e| (e.seq, e.segment));
        self.runs.clear();
        for i in 0..self.entries.len() {
            self.count_in_runs(self.entries[i].segment);
        }
    }

    /// `segment` moved to disk: if its records are the oldest entries and
    /// have consecutive sequence numbers, keep them as one [`DiskRun`]
    /// instead (otherwise they stay entries, which is as correct and only
    /// larger). Returns whether they did.
    pub(crate) fn compact(&mut self, segment: u64) -> bool {
        let Some(&(s, n)) = self.runs.front() else {
            return false;
        };
        if s != segment {
            return false;
        }
        let first = self.entries[0].seq;
        let last = self.entries[n - 1].seq;
        if last - first + 1 != n as u64 {
            return false;
        }
        self.entries.drain(..n);
        self.runs.pop_front();
        self.on_disk.push_back(DiskRun {
            segment,
            first,
            last,
        });
        true
    }

    /// [`StreamQueue::compact`] the oldest entries' segments, for as long
    /// as `on_disk` says they are.
    pub(crate) fn compact_on_disk(&mut self, on_disk: impl Fn(u64) -> bool) {
        while let Some(&(segment, _)) = self.runs.front() {
            if !on_disk(segment) || !self.compact(segment) {
                return;
            }
        }
    }

    /// Forget every record with a sequence number up to `seq`, telling
    /// `freed` how many went from each segment.
    pub(crate) fn free_up_to(&mut self, seq: u64, mut freed: impl FnMut(u64, usize)) {
        while let Some(run) = self.on_disk.front_mut() {
            if run.first > seq {
                return;
            }
            if run.last <= seq {
                freed(run.segment, run.count());
                self.on_disk.pop_front();
            } else {
                freed(run.segment, (seq - run.first + 1) as usize);
                run.first = seq + 1;
                return;
            }
        }
        let n = self.entries.partition_point(|e| e.seq <= seq);
        self.pop_front(n, freed);
    }

    /// Forget the first `n` entries, telling `freed` how many went from
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

    /// The disk run holding `seq`, if any.
    pub(crate) fn disk_run_of(&self, seq: u64) -> Option<&DiskRun> {
        let i = self.on_disk.partition_point(|r| r.last < seq);
        self.on_disk.get(i).filter(|r| r.first <= seq)
    }

    /// The entry of `seq`, if it is indexed one by one.
    pub(crate) fn entry_of(&self, seq: u64) -> Option<&Entry> {
        let i = self.entries.binary_search_by_key(&seq, |e| e.seq).ok()?;
        self.entries.get(i)
    }
}

/// Append `e` to a stream's index. When the queue is full it
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

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(records: &[(u64, u64)]) -> StreamQueue {
        let mut q = StreamQueue::default();
        for &(seq, segment) in records {
            q.push(Entry {
                seq,
                segment,
                offset: 64,
            });
        }
        q
    }

    #[test]
    fn a_segment_on_disk_becomes_one_run_and_frees_like_its_entries() {
        let mut q = queue(&[(1, 0), (2, 0), (3, 0), (4, 1), (5, 1), (6, 2)]);
        // Not the oldest: stays as entries.
        assert!(!q.compact(1));
        assert!(q.compact(0));
        assert!(q.compact(1));
        assert_eq!(q.on_disk.len(), 2);
        assert_eq!(q.entries.len(), 1);
        assert_eq!(q.len(), 6);
        assert_eq!(q.disk_run_of(5).map(|r| r.segment), Some(1));
        assert_eq!(q.disk_run_of(6), None);
        assert_eq!(q.entry_of(6).map(|e| e.segment), Some(2));
        let mut freed = Vec::new();
        q.free_up_to(4, |s, n| freed.push((s, n)));
        assert_eq!(freed, vec![(0, 3), (1, 1)]);
        assert_eq!(
            q.on_disk.front(),
            Some(&DiskRun {
                segment: 1,
                first: 5,
                last: 5
            })
        );
        freed.clear();
        q.free_up_to(6, |s, n| freed.push((s, n)));
        assert_eq!(freed, vec![(1, 1), (2, 1)]);
        assert!(q.is_empty());
    }

    #[test]
    fn records_with_a_gap_stay_entries() {
        let mut q = queue(&[(1, 0), (3, 0), (4, 1)]);
        assert!(!q.compact(0));
        assert_eq!(q.entries.len(), 3);
    }
}
