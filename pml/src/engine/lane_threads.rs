//! While a process re-executes: which thread calls on each lane.
//!
//! Calls are replayed in their order within each lane, whatever the order
//! of the threads, which holds only if no two threads share a lane. The
//! first thread to call on a lane since the restart owns it; a call by
//! another thread is refused — unless the owner has exited, which is how
//! a communicator passes from a worker to the thread that joined it.

use std::cell::Cell;
use std::sync::{Mutex, PoisonError};
use std::thread::ThreadId;

/// Threads that owned a lane and have exited since.
static EXITED: Mutex<Vec<ThreadId>> = Mutex::new(Vec::new());

/// Set on a thread once it owns a lane; tells [`EXITED`] when the thread
/// ends (thread-local destructors run for threads made by C programs too).
struct ExitWatch(Cell<Option<ThreadId>>);

impl Drop for ExitWatch {
    fn drop(&mut self) {
        if let Some(id) = self.0.get() {
            EXITED
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(id);
        }
    }
}

thread_local! {
    static WATCH: ExitWatch = const { ExitWatch(Cell::new(None)) };
}

/// The owner of each lane that has had a call since the restart.
#[derive(Default)]
pub(super) struct LaneThreads {
    owners: Vec<(u32, ThreadId)>,
}

impl LaneThreads {
    /// The calling thread calls on `lane`: whether it may (it owns the
    /// lane, or becomes its owner because it has none or its owner
    /// exited).
    pub(super) fn claim(&mut self, lane: u32) -> bool {
        let me = std::thread::current().id();
        let owner = self.owners.iter_mut().find(|(l, _)| *l == lane);
        match owner {
            Some((_, t)) if *t == me => return true,
            Some((_, t)) => {
                let exited = EXITED
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .contains(t);
                if !exited {
                    return false;
                }
                *t = me;
            }
            None => self.owners.push((lane, me)),
        }
        // (A thread whose local data is being destroyed keeps no watch:
        // its lanes then stay its own.)
        let _ = WATCH.try_with(|w| w.0.set(Some(me)));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_passes_to_another_thread_only_once_its_owner_exited() {
        let mut lanes = LaneThreads::default();
        assert!(lanes.claim(5));
        assert!(lanes.claim(5));
        let lanes = std::sync::Arc::new(std::sync::Mutex::new(lanes));
        let theirs = std::sync::Arc::clone(&lanes);
        // A live thread may not take lane 5, but may take lane 6 ...
        std::thread::spawn(move || {
            let mut l = theirs.lock().unwrap();
            assert!(!l.claim(5));
            assert!(l.claim(6));
        })
        .join()
        .unwrap();
        // ... which this thread may take once that thread has exited (a
        // join returns once its thread-local destructors have run).
        let mut lanes = lanes.lock().unwrap();
        assert!(lanes.claim(6));
        assert!(lanes.claim(5));
    }
}
