//! A rank's mailbox: control page plus one inbound ring per sender.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU32;

use super::ring::RING_CONTROL;
use crate::error::{Error, Result};

/// Bytes of frame data in each ring.
pub(crate) const RING_CAPACITY: usize = 256 * 1024;
const CONTROL_PAGE: usize = 4096;
const SLOT: usize = RING_CONTROL + RING_CAPACITY;
const DOORBELL_OFFSET: usize = 0;
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
    // SAFETY: valid C string; flags 0 = no CLOEXEC, so exec'd ranks inherit it.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: memfd_create returned a fresh descriptor that we now own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = libc::off_t::try_from(mailbox_len(size))
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "job too large"))?;
    // SAFETY: plain syscall on a descriptor we own.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

/// The doorbells of every rank, for the launcher: ringing them wakes the
/// ranks sleeping on them (e.g. to notice a restart on the job page).
pub struct Doorbells {
    mailboxes: Vec<Mailbox>,
}

// SAFETY: only atomics of the shared mappings are touched.
unsafe impl Send for Doorbells {}

impl Doorbells {
    /// Map the mailboxes behind `fds` (one per rank of a `size`-rank job).
    pub fn map(fds: &[RawFd], size: usize) -> Result<Doorbells> {
        Ok(Doorbells {
            mailboxes: fds
                .iter()
                .map(|&fd| Mailbox::map(fd, size))
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

/// Map `len` bytes of the shared file behind `fd` (inherited from the
/// launcher) read-write, after checking that the file is that large;
/// `what` names it in errors. The caller unmaps it.
pub(crate) fn map_shared(fd: RawFd, len: usize, what: &str) -> Result<*mut u8> {
    // SAFETY: fstat fills a plain struct; an invalid fd gives an error.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid out-pointer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(Error::shm(
            format!("{what} descriptor {fd}"),
            std::io::Error::last_os_error(),
        ));
    }
    if (st.st_size as u64) < len as u64 {
        return Err(Error::Bootstrap(format!(
            "{what} descriptor {fd} holds {} bytes, expected {len}",
            st.st_size
        )));
    }
    // SAFETY: shared mapping of a file we hold open and checked the size
    // of; the result is checked below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(Error::shm(
            format!("mapping {what} descriptor {fd}"),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(p as *mut u8)
}

/// A shared mapping of one mailbox, unmapped on drop.
pub(crate) struct Mailbox {
    base: *mut u8,
    len: usize,
}

impl Mailbox {
    /// Map the mailbox behind `fd` (inherited from the launcher) for a job of
    /// `size` ranks, checking that the file is large enough.
    pub(crate) fn map(fd: RawFd, size: usize) -> Result<Mailbox> {
        let len = mailbox_len(size);
        let p = map_shared(fd, len, "mailbox")?;
        Ok(Mailbox { base: p, len })
    }

    /// The owner's doorbell (futex word: 1 while the owner sleeps).
    pub(crate) fn doorbell(&self) -> &AtomicU32 {
        // SAFETY: offset inside the control page of a live mapping; aligned.
        unsafe { &*(self.base.add(DOORBELL_OFFSET) as *const AtomicU32) }
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
        // mapping outlive the engine that owns this value.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}
