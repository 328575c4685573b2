//! A small map from lanes (communicator contexts) to counters, for the
//! numbers the engine keeps per lane: call ids and, per peer, message
//! sequence numbers.
//!
//! It is on the path of every message, so the world's two contexts (0,
//! its point-to-point one, and 1, its collectives') are array slots. A
//! process uses a handful of other lanes at a time, and one of them for a
//! run of calls: the map remembers the entry it used last, and looks the
//! others up by binary search in entries kept sorted by lane (which is
//! also the order checkpoints write them in).

/// Lanes kept in array slots: the world's contexts.
const DIRECT: usize = 2;

/// Values of type `T` by lane, `T::default()` for a lane never used (a
/// lane whose value is the default counts as unused).
#[derive(Clone, Debug, Default)]
pub struct LaneMap<T> {
    /// Lanes `0..DIRECT`.
    direct: [T; DIRECT],
    /// The other lanes, sorted, one entry each.
    entries: Vec<(u32, T)>,
    /// Index of the entry used last (any index when `entries` is empty).
    recent: usize,
}

/// Equal when they hold the same values (whichever entry each used last).
impl<T: Copy + Default + PartialEq> PartialEq for LaneMap<T> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl<T: Copy + Default + PartialEq> Eq for LaneMap<T> {}

impl<T: Copy + Default + PartialEq> LaneMap<T> {
    /// An empty map.
    pub fn new() -> Self {
        LaneMap {
            direct: [T::default(); DIRECT],
            entries: Vec::new(),
            recent: 0,
        }
    }

    /// A map of `pairs` (lane, value), in any order; a lane given twice
    /// keeps its last value.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (u32, T)>) -> Self {
        let mut m = LaneMap::new();
        let mut given: Vec<(u32, T)> = Vec::new();
        for (lane, v) in pairs {
            match m.direct.get_mut(lane as usize) {
                Some(slot) => *slot = v,
                None => given.push((lane, v)),
            }
        }
        // Stable: of a lane given twice, the later pair stays after.
        given.sort_by_key(|&(lane, _)| lane);
        for (lane, v) in given {
            match m.entries.last_mut() {
                Some(last) if last.0 == lane => last.1 = v,
                _ => m.entries.push((lane, v)),
            }
        }
        m
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
        if let Some(v) = self.direct.get(lane as usize) {
            return *v;
        }
        self.find(lane)
            .map_or_else(|_| T::default(), |i| self.entries[i].1)
    }

    /// The value of `lane`, made (as the default) if it has none.
    #[inline]
    pub fn entry(&mut self, lane: u32) -> &mut T {
        if (lane as usize) < DIRECT {
            return &mut self.direct[lane as usize];
        }
        if self
            .entries
            .get(self.recent)
            .is_some_and(|&(l, _)| l == lane)
        {
            return &mut self.entries[self.recent].1;
        }
        self.entry_elsewhere(lane)
    }

    /// [`LaneMap::entry`] for a lane other than the direct ones and the
    /// one used last (kept out of line: the common calls stay small).
    #[inline(never)]
    fn entry_elsewhere(&mut self, lane: u32) -> &mut T {
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

    /// Every (lane, value) whose value is not the default, by lane.
    pub fn iter(&self) -> impl Iterator<Item = (u32, T)> + '_ {
        (0u32..)
            .zip(self.direct.iter().copied())
            .chain(self.entries.iter().copied())
            .filter(|(_, v)| *v != T::default())
    }

    /// No lane has a value other than the default.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn it_behaves_like_a_btree_map(ops in proptest::collection::vec((0u32..40, 1u8..), 0..200)) {
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

    #[test]
    fn default_values_count_as_unused() {
        let mut m = LaneMap::<u64>::new();
        assert!(m.is_empty());
        *m.entry(0) = 0;
        *m.entry(900) = 0;
        assert!(m.is_empty());
        *m.entry(1) = 3;
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![(1, 3)]);
        assert_eq!(LaneMap::from_pairs([(900, 0), (1, 3)]), m);
    }
}
