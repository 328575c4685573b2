//! The doorbell: a futex word in shared memory.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

use rustix::thread::futex;

/// Sleep while `*word == expected`, at most `timeout`. Spurious returns are fine.
pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = futex::Timespec {
        tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: timeout.subsec_nanos().into(),
    };
    // Shared (no `Flags::PRIVATE`): the word lives in a mapping of a file
    // that other processes map too. Every outcome (woken, timed out, word
    // already changed, interrupted) is a return to the caller's loop.
    let _ = futex::wait(word, futex::Flags::empty(), expected, Some(&ts));
}

/// Wake every sleeper on `word`.
pub(crate) fn wake(word: &AtomicU32) {
    // Shared, as in `wait`; the count of woken sleepers is not needed.
    let _ = futex::wake(word, futex::Flags::empty(), i32::MAX as u32);
}
