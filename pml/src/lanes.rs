//! A small map from lanes (communicator contexts) to counters, for the
//! numbers the engine keeps per lane: call ids and, per peer, channel
//! sequence numbers.
//!
//! A process uses a handful of lanes at a time, and one of them for a
//! run of calls: the map remembers the entry it used last, and looks the
//! others up by binary search in entries kept sorted by lane (which is
//! also the order checkpoints write them in).

/// Values of type `T` by lane, `T::default()` for a lane never used.
#[derive(Clone, Debug, Default)]
pub struct LaneMap<T> {
    /// Sorted by lane, one entry per lane.
    entries: Vec<(u32, T)>,
    /// Index of the entry used last (any index when `entries` is empty).
    recent: usize,
}

/// Equal when they hold the same values (whichever entry each used last).
impl<T: PartialEq> PartialEq for LaneMap<T> {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
    }
}

impl<T: Eq> Eq for LaneMap<T> {}

impl<T: Copy + Default> LaneMap<T> {
    /// An empty map.
    pub const fn new() -> Self {
        LaneMap {
            entries: Vec::new(),
            recent: 0,
        }
    }

    /// A map of `pairs` (lane, value), in any order; a lane given twice
    /// keeps its last value.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (u32, T)>) -> Self {
        let mut given: Vec<(u32, T)> = pairs.into_iter().collect();
        // Stable: of a lane given twice, the later pair stays after.
        given.sort_by_key(|&(lane, _)| lane);
        let mut entries: Vec<(u32, T)> = Vec::with_capacity(given.len());
        for (lane, v) in given {
            match entries.last_mut() {
                Some(last) if last.0 == lane => last.1 = v,
                _ => entries.push((lane, v)),
            }
        }
        LaneMap { entries, recent: 0 }
    }

    #[inline]
    fn find(&self, lane: u32) -> Result<usize, usize> {
        match self.entries.get(self.recent) {
            Some(&(l, _)) if l == lane => Ok(self.recent),
            _ => self.entries.binary_search_by_key(&lane, |&(l, _)| l),
        }
    }

    /// The value of `lane` (the default if it has none).
    #[inline]
    pub fn get(&self, lane: u32) -> T {
        self.find(lane)
            .map_or_else(|_| T::default(), |i| self.entries[i].1)
    }

    /// Whether `lane` has an entry.
    pub fn contains(&self, lane: u32) -> bool {
        self.find(lane).is_ok()
    }

    /// The value of `lane`, made (as the default) if it has none.
    #[inline]
    pub fn entry(&mut self, lane: u32) -> &mut T {
        let i = match self.find(lane) {
            Ok(i) => i,
            Err(i) => {
                self.entries.insert(i, (lane, T::default()));
                i
            }
        };
        self.recent = i;
        &mut self.entries[i].1
    }

    /// Every (lane, value), by lane.
    pub fn iter(&self) -> impl Iterator<Item = (u32, T)> + '_ {
        self.entries.iter().copied()
    }

    /// No lane has an entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn it_behaves_like_a_btree_map(ops in proptest::collection::vec((0u32..40, any::<u8>()), 0..200)) {
            let mut m = LaneMap::<u64>::new();
            let mut model = std::collections::BTreeMap::new();
            for (lane, add) in ops {
                *m.entry(lane) += u64::from(add);
                *model.entry(lane).or_insert(0) += u64::from(add);
                prop_assert_eq!(m.get(lane), model[&lane]);
                prop_assert_eq!(m.get(lane + 1000), 0);
            }
            let pairs: Vec<_> = m.iter().collect();
            let expected: Vec<_> = model.into_iter().collect();
            prop_assert_eq!(&pairs, &expected);
            prop_assert_eq!(LaneMap::from_pairs(pairs.iter().rev().copied()), m);
        }
    }
}
