//! The index of kept records: per destination, in sequence order.

use std::collections::VecDeque;

/// A kept record: its sequence number, and where its header lies.
#[derive(Clone, Copy, Default)]
pub(crate) struct Entry {
    pub(crate) seq: u64,
    pub(crate) segment: u64,
    /// Offset of the record header.
    pub(crate) offset: usize,
}

/// The largest destination rank a log takes, plus one. The index is an
/// array by destination, so a rank number read from a damaged file must not
/// make it allocate without bound (at most 64 MiB of empty queues here).
pub const MAX_DESTINATIONS: u32 = 1 << 20;

/// The records of each destination, in sequence order: an array by
/// destination rank (ranks are small and dense, and an append looks its
/// queue up without hashing).
#[derive(Default)]
pub(crate) struct Index {
    by_dest: Vec<DestQueue>,
}

impl Index {
    /// The queue of `dest`, made if new. `dest` < [`MAX_DESTINATIONS`]
    /// (checked by callers: `append_stored` and `decode_record`).
    pub(crate) fn queue(&mut self, dest: u32) -> &mut DestQueue {
        let d = dest as usize;
        if d >= self.by_dest.len() {
            self.by_dest.resize_with(d + 1, DestQueue::default);
        }
        &mut self.by_dest[d]
    }

    pub(crate) fn get(&self, dest: u32) -> Option<&VecDeque<Entry>> {
        self.by_dest.get(dest as usize).map(|q| &q.entries)
    }

    pub(crate) fn get_mut(&mut self, dest: u32) -> Option<&mut DestQueue> {
        self.by_dest.get_mut(dest as usize)
    }

    /// Every destination's records (empty ones included), by rank.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &VecDeque<Entry>)> {
        (0u32..).zip(self.by_dest.iter().map(|q| &q.entries))
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut DestQueue)> {
        (0u32..).zip(&mut self.by_dest)
    }
}

/// One destination's records in sequence order, and the same records as
/// runs by segment (consecutive records mostly share one), so that
/// freeing a checkpoint interval's records costs a step per segment, not
/// per record.
#[derive(Default)]
pub(crate) struct DestQueue {
    pub(crate) entries: VecDeque<Entry>,
    /// (segment, how many consecutive entries lie in it), front to back.
    runs: VecDeque<(u64, usize)>,
}

impl DestQueue {
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

    /// Forget the first `n` records, telling `freed` how many went from
    /// each segment.
    pub(crate) fn pop_front(&mut self, mut n: usize, mut freed: impl FnMut(u64, usize)) {
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
