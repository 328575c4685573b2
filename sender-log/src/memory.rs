//! Taking memory for segments ahead of the records that need it, and
//! bringing it into the cache.

use std::fs::File;

use memmap2::{Advice, MmapMut};

/// Memory page size assumed for rounding (the kernel rounds to its own).
pub(crate) const PAGE: usize = 4096;
/// How much memory `reserve` takes at a time beyond what a record needs.
pub(crate) const POPULATE_STEP: usize = 64 * 1024;
/// How far ahead of the last record
/// [`SenderLog::warm_up`](crate::SenderLog::warm_up) keeps memory taken.
pub const POPULATE_AHEAD: usize = 512 * 1024;

/// Back bytes `from..to` of `map` (rounded out to pages, clipped to the
/// map) with memory, mapped writable (`MADV_POPULATE_WRITE`): later writes
/// there neither fault nor fail. Taking pages as records reach them, rather
/// than a whole segment at once, spreads the kernel's zeroing over the
/// appends instead of stalling one of them for milliseconds; and a full
/// file system shows up here as an error, not as a `SIGBUS` on a write.
/// Returns where the backed bytes now end (`to` rounded to pages).
pub(crate) fn populate(map: &MmapMut, from: usize, to: usize) -> std::io::Result<usize> {
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
pub(crate) fn warm_lines(
    map: &[u8],
    used: usize,
    warm_until: usize,
    end: usize,
    populated: usize,
) -> usize {
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

/// Reserve `len` bytes of real disk space, so writing through the mapping
/// can never hit a full disk (which would be SIGBUS, not an error).
pub(crate) fn preallocate(file: &File, len: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let len = libc::off_t::try_from(len).map_err(|_| std::io::Error::other("segment too large"))?;
    // SAFETY: a C library call on a descriptor we own (borrowed from `file`
    // for the call), no pointers. Raw libc on purpose: rustix's `fallocate`
    // is the bare system call, while the C library's posix_fallocate also
    // reserves the blocks by writing them where the file system has no
    // fallocate.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
    if rc == 0 {
        Ok(())
    } else if rc == libc::EOPNOTSUPP {
        file.set_len(len as u64)
    } else {
        Err(std::io::Error::from_raw_os_error(rc))
    }
}
