//! A rank's mailbox: control page plus one inbound ring per sender.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU32;

use super::ring::RING_CONTROL;
use crate::error::{Error, Result};

/// Bytes of frame data in each ring.
pub(crate) const RING_CAPACITY: usize = 256 * 1024;
const _: () = assert!(RING_CAPACITY.is_power_of_two());
const CONTROL_PAGE: usize = 4096;
const SLOT: usize = RING_CONTROL + RING_CAPACITY;
const DOORBELL_OFFSET: usize = 0;
/// Beside the doorbell: a writer reads it with the doorbell's line.
const MEMBARRIER_SLEEPER_OFFSET: usize = 4;
const PID_OFFSET: usize = 64;

/// Size in bytes of the mailbox of one rank in a job of `size` ranks.
pub fn mailbox_len(size: usize) -> usize {
    CONTROL_PAGE + size * SLOT
}

/// Create a zero-filled mailbox for one rank of a `size`-rank job as an
/// anonymous shared-memory file (memfd) that child processes inherit.
pub fn create_mailbox(name: &str, size: usize) -> std::io::Result<OwnedFd> {
    let cname = std::ffi::CString::new(name)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in name"))?;
    // No CLOEXEC, so exec'd ranks inherit it.
    let fd = rustix::fs::memfd_create(cname.as_c_str(), rustix::fs::MemfdFlags::empty())?;
    // At most i64::MAX: the kernel's file offsets are signed.
    let len = i64::try_from(mailbox_len(size))
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "job too large"))?;
    rustix::fs::ftruncate(&fd, len as u64)?;
    Ok(fd)
}

/// The doorbells of every rank, for the launcher: ringing them wakes the
/// ranks sleeping on them (e.g. to notice a restart on the job page).
pub struct Doorbells {
    mailboxes: Vec<Mailbox>,
}

impl Doorbells {
    /// Map the mailboxes behind `fds` (one per rank of a `size`-rank job).
    pub fn map(fds: &[impl AsFd], size: usize) -> Result<Doorbells> {
        Ok(Doorbells {
            mailboxes: fds
                .iter()
                .map(|fd| Mailbox::map_fd(fd.as_fd(), size))
                .collect::<Result<_>>()?,
        })
    }

    /// Wake every rank.
    pub fn ring_all(&self) {
        for m in &self.mailboxes {
            let bell = m.doorbell();
            bell.store(0, std::sync::atomic::Ordering::SeqCst);
            super::futex::wake(bell);
        }
    }
}

/// Map `len` bytes of the shared file behind `fd` read-write, after
/// checking that the file is that large; `what` names it in errors. The
/// caller unmaps it.
pub(crate) fn map_shared(fd: BorrowedFd<'_>, len: usize, what: &str) -> Result<*mut u8> {
    let raw = fd.as_raw_fd();
    let st = rustix::fs::fstat(fd)
        .map_err(|e| Error::shm(format!("{what} descriptor {raw}"), e.into()))?;
    if (st.st_size as u64) < len as u64 {
        return Err(Error::Bootstrap(format!(
            "{what} descriptor {raw} holds {} bytes, expected {len}",
            st.st_size
        )));
    }
    use rustix::mm::{MapFlags, ProtFlags};
    // SAFETY: a new shared mapping at an address the kernel picks (so no
    // existing memory is replaced) of a file we hold open and checked the
    // size of; failure is an error, not a pointer.
    let p = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            fd,
            0,
        )
    }
    .map_err(|e| Error::shm(format!("mapping {what} descriptor {raw}"), e.into()))?;
    Ok(p.cast())
}

/// Borrow descriptor `fd`, inherited from the launcher, to map it; a
/// negative number is an error as fstat would give it (EBADF).
///
/// # Safety
///
/// A non-negative `fd` must be open, or name no descriptor at all (the
/// calls on it then fail with EBADF), for as long as the result is used.
pub(crate) unsafe fn borrow_inherited<'a>(fd: RawFd, what: &str) -> Result<BorrowedFd<'a>> {
    if fd < 0 {
        return Err(Error::shm(
            format!("{what} descriptor {fd}"),
            rustix::io::Errno::BADF.into(),
        ));
    }
    // SAFETY: not -1 (checked above); open as the caller promises.
    Ok(unsafe { BorrowedFd::borrow_raw(fd) })
}

/// A shared mapping of one mailbox, unmapped on drop.
pub(crate) struct Mailbox {
    base: *mut u8,
    len: usize,
}

// SAFETY: a `Mailbox` is the address of a shared mapping that lives until
// it drops. Through `&Mailbox` safe code only reaches atomics (`doorbell`,
// `sleeps_with_membarrier`, `pid`); the rings are raw pointers, which only
// unsafe code following the ring protocol dereferences. Sharing or moving it between threads
// therefore allows no data race (the engine's outside sleepers wait on its
// doorbell from other threads).
unsafe impl Send for Mailbox {}
// SAFETY: as above.
unsafe impl Sync for Mailbox {}

impl Mailbox {
    /// Map the mailbox behind `fd` (inherited from the launcher) for a job of
    /// `size` ranks, checking that the file is large enough.
    pub(crate) fn map(fd: RawFd, size: usize) -> Result<Mailbox> {
        // SAFETY: the launcher passed `fd` open for this mapping, and it is
        // closed only after every mailbox is mapped.
        let fd = unsafe { borrow_inherited(fd, "mailbox") }?;
        Mailbox::map_fd(fd, size)
    }

    /// Map the mailbox behind `fd` for a job of `size` ranks, checking that
    /// the file is large enough.
    pub(crate) fn map_fd(fd: BorrowedFd<'_>, size: usize) -> Result<Mailbox> {
        let len = mailbox_len(size);
        let p = map_shared(fd, len, "mailbox")?;
        Ok(Mailbox { base: p, len })
    }

    /// The owner's doorbell (futex word: 1 while the owner sleeps).
    pub(crate) fn doorbell(&self) -> &AtomicU32 {
        // SAFETY: offset inside the control page of a live mapping; aligned.
        unsafe { &*(self.base.add(DOORBELL_OFFSET) as *const AtomicU32) }
    }

    /// 1 if the owner sleeps with membarrier, so that able writers may ring
    /// it with a compiler fence only (see `super::doorbell_fence`); set by
    /// the owner when it joins (0 in a new mailbox; a restarted owner
    /// overwrites its previous incarnation's word before its links come up).
    pub(crate) fn sleeps_with_membarrier(&self) -> &AtomicU32 {
        // SAFETY: as for `doorbell`.
        unsafe { &*(self.base.add(MEMBARRIER_SLEEPER_OFFSET) as *const AtomicU32) }
    }

    /// The owner's process id, published at start-up.
    pub(crate) fn pid(&self) -> &AtomicU32 {
        // SAFETY: as for `doorbell`.
        unsafe { &*(self.base.add(PID_OFFSET) as *const AtomicU32) }
    }

    /// Base address of the ring that `sender` writes into this mailbox.
    pub(crate) fn ring(&self, sender: usize) -> *mut u8 {
        debug_assert!(CONTROL_PAGE + (sender + 1) * SLOT <= self.len);
        // SAFETY: in bounds for every sender < size (checked at map time).
        unsafe { self.base.add(CONTROL_PAGE + sender * SLOT) }
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `map` mapped; no references into the
        // mapping outlive the engine that owns this value. A failure would
        // only leave the mapping in place.
        let _ = unsafe { rustix::mm::munmap(self.base.cast(), self.len) };
    }
}
