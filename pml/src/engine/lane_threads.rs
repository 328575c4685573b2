//! While a process re-executes: which thread calls on each lane.
//!
//! Calls are replayed in their order within each lane, whatever the order
//! of the threads, which holds only if no two threads share a lane. The
//! first thread to call on a lane since the restart owns it for as long
//! as the process re-executes; a call by another thread is refused. (Not
//! even once the owner has exited: without a join, its exit says nothing
//! of how the logged execution interleaved the two threads' calls.)

use std::thread::ThreadId;

/// The owner of each lane that has had a call since the restart.
#[derive(Default)]
pub(super) struct LaneThreads {
    owners: Vec<(u32, ThreadId)>,
}

impl LaneThreads {
    /// The calling thread calls on `lane`: whether it may (it owns the
    /// lane, or becomes its owner because it has none).
    pub(super) fn claim(&mut self, lane: u32) -> bool {
        let me = std::thread::current().id();
        match self.owners.iter().find(|(l, _)| *l == lane) {
            Some((_, owner)) => *owner == me,
            None => {
                self.owners.push((lane, me));
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_belongs_to_the_first_thread_that_calls_on_it() {
        let mut lanes = LaneThreads::default();
        assert!(lanes.claim(5));
        assert!(lanes.claim(5));
        let lanes = std::sync::Arc::new(std::sync::Mutex::new(lanes));
        let theirs = std::sync::Arc::clone(&lanes);
        // Another thread may not take lane 5, but may take lane 6 ...
        std::thread::spawn(move || {
            let mut l = theirs.lock().unwrap();
            assert!(!l.claim(5));
            assert!(l.claim(6));
        })
        .join()
        .unwrap();
        // ... which stays its own after it exited.
        let mut lanes = lanes.lock().unwrap();
        assert!(!lanes.claim(6));
        assert!(lanes.claim(5));
    }
}
