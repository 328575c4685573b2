//! Windows in memory the members share (`MPI_Win_allocate_shared`,
//! `MPI_Win_shared_query`): one file in `/dev/shm`, made by the first
//! member and mapped by every member, each one's part right after the one
//! before it (MPI's default, contiguous layout; the info key
//! `alloc_shared_noncontig` changes nothing), so that members load and
//! store into each other's parts directly. One-sided operations on such a
//! window travel as on any other.
//!
//! Those loads and stores reach another process's memory without a
//! message, so no log holds them. Under a logging protocol the window is
//! made all the same, but a process that re-executes a rank (restarted
//! after a crash, or replayed alone) cannot make it again: exact or loud,
//! the job stops there with one line, as for a divergence.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Memory, win_error, window_or_error, with_win};
use crate::consts::*;
use crate::state::{error, put};

/// Windows this process made a file for (their names differ by it).
static MADE: AtomicU64 = AtomicU64::new(0);

/// A shared window's mapping and where each member's part lies in it:
/// (offset, bytes, displacement unit). The members' control blocks
/// ([`super::direct::Control`]) follow the parts.
pub(crate) struct Segment {
    map: memmap2::MmapMut,
    parts: Vec<(usize, usize, usize)>,
}

/// A window's memory in one file every member maps.
pub(super) struct Mapped {
    pub segment: Segment,
    /// The address of this member's part.
    pub base: usize,
    /// How to reach the other members' parts, for a direct window.
    pub direct: Option<super::direct::Direct>,
}

/// Why the members of a window could not share one file.
pub(super) enum NotShared {
    /// They are not all on one host.
    OtherHosts,
    /// The file could not be made or mapped somewhere: why.
    Unmapped(String),
}

/// Alignment of the parts of a window allocated by `MPI_Win_allocate`
/// in shared memory, and of the control blocks.
const PART_ALIGN: usize = 64;

/// Map one file for the members of `h`, each with `len` bytes of
/// displacement unit `unit` — back to back (`MPI_Win_allocate_shared`'s
/// layout) or each part on its own cache lines (`aligned`) — and make it
/// a direct window if `direct` ([`super::direct`]). Collective: every
/// member gets the same answer.
pub(super) fn map_shared(
    func: &str,
    h: Comm,
    len: usize,
    unit: usize,
    aligned: bool,
    direct: bool,
) -> Result<Result<Mapped, NotShared>, c_int> {
    let all = exchange(func, h, len, unit)?;
    if all.iter().any(|m| m[2] != all[0][2]) {
        return Ok(Err(NotShared::OtherHosts));
    }
    let too_big = || {
        error(
            h,
            func,
            MPI_ERR_SIZE,
            "the parts add up to more than memory",
        )
    };
    let mut parts = Vec::with_capacity(all.len());
    let mut at = 0usize;
    for m in &all {
        let bytes = usize::try_from(m[0]).unwrap_or(usize::MAX);
        parts.push((at, bytes, m[1] as usize));
        at = at.checked_add(bytes).ok_or_else(too_big)?;
        if aligned {
            at = at
                .checked_next_multiple_of(PART_ALIGN)
                .ok_or_else(too_big)?;
        }
    }
    let control = at
        .checked_next_multiple_of(PART_ALIGN)
        .ok_or_else(too_big)?;
    let total = control
        .checked_add(super::direct::control_bytes(all.len()))
        .ok_or_else(too_big)?;
    let c = crate::state::intra_comm(func, h)?;
    let mut map = match map_segment(h, c.rank(), total, &c.job_id())? {
        Ok(m) => m,
        Err(why) => return Ok(Err(NotShared::Unmapped(why))),
    };
    let start = map.as_mut_ptr() as usize;
    let direct = direct.then(|| {
        let bases = parts.iter().map(|p| start + p.0).collect();
        // SAFETY: the file holds a zeroed control block per member at
        // `control`, aligned to a cache line (the mapping is page
        // aligned); the mapping lives in the window's `Segment` as long
        // as the `Direct` in the window; `bases` are the parts' addresses.
        unsafe { super::direct::Direct::new(bases, (start + control) as *const _) }
    });
    Ok(Ok(Mapped {
        base: start + parts[c.rank()].0,
        segment: Segment { map, parts },
        direct,
    }))
}

/// Every member's (bytes, displacement unit, host), in rank order.
fn exchange(func: &str, h: Comm, len: usize, unit: usize) -> Result<Vec<[u64; 3]>, c_int> {
    let host = crate::comm::fnv1a(crate::env::hostname().as_bytes());
    let mine = [len as u64, unit as u64, host];
    let c = crate::state::intra_comm(func, h)?;
    let mut all = vec![[0u64; 3]; c.size()];
    // SAFETY: `mine` holds 3 words, `all` 3 per member.
    let rc = unsafe {
        crate::coll::MPI_Allgather(
            mine.as_ptr().cast(),
            3,
            MPI_UINT64_T,
            all.as_mut_ptr().cast(),
            3,
            MPI_UINT64_T,
            h,
        )
    };
    if rc != MPI_SUCCESS {
        return Err(rc);
    }
    Ok(all)
}

/// The segment of the members of `h`, in job `job`: made by member 0
/// (its `total` bytes reserved in `/dev/shm`, so that a full one is an
/// error here rather than a bus error at the first store), opened by the
/// others once it told them which file it made (its pid and number: each
/// member builds the path). Collective: every member gets the mapping,
/// or every member gets why it failed somewhere.
fn map_segment(
    h: Comm,
    rank: usize,
    total: usize,
    job: &str,
) -> Result<Result<memmap2::MmapMut, String>, c_int> {
    // Member 0's file: [made, pid, number].
    let mut which = [0u64; 3];
    let mut made = Err(String::new());
    if rank == 0 {
        let (n, path, file) = make_file(job);
        made = file.and_then(|f| match reserve(&f, total.max(1)) {
            Ok(()) => Ok(f),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(format!("{}: reserving {total} bytes: {e}", path.display()))
            }
        });
        if made.is_ok() {
            which = [1, u64::from(std::process::id()), n];
        }
    }
    // SAFETY: `which` holds 3 words at every member.
    let rc = unsafe { crate::coll::MPI_Bcast(which.as_mut_ptr().cast(), 3, MPI_UINT64_T, 0, h) };
    if rc != MPI_SUCCESS {
        return Err(rc);
    }
    if which[0] == 0 {
        return Ok(Err(match made {
            Err(why) if rank == 0 => why,
            _ => "the first member could not make the shared memory file".into(),
        }));
    }
    let pid = u32::try_from(which[1]).unwrap_or(u32::MAX);
    let path = vpml::shm::window_files::window_file_path(job, pid, which[2]);
    let file = match made {
        Ok(f) => Ok(f),
        Err(_) => std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path),
    };
    // SAFETY: the file is this window's alone (made with `create_new`,
    // under a name no other window uses, and unlinked once every member
    // mapped it); its length is fixed before anyone maps it; the members'
    // concurrent loads and stores through their mappings are the
    // program's, as MPI defines shared windows.
    let map = file
        .and_then(|f| unsafe { memmap2::MmapMut::map_mut(&f) })
        .map_err(|e| format!("{}: {e}", path.display()));
    // Every member mapped it, or some failed: all learn which, and the
    // name can go.
    let mut failed = c_int::from(map.is_err());
    // SAFETY: one int in and out.
    let rc = unsafe {
        crate::coll::MPI_Allreduce(
            -1isize as *const c_void,
            (&mut failed as *mut c_int).cast(),
            1,
            MPI_INT,
            MPI_MAX,
            h,
        )
    };
    if rank == 0 {
        let _ = std::fs::remove_file(&path);
    }
    if rc != MPI_SUCCESS {
        return Err(rc);
    }
    Ok(match map {
        Ok(m) if failed == 0 => Ok(m),
        Ok(_) => Err("another member could not map the shared memory file".into()),
        Err(why) => Err(why),
    })
}

/// Make a new window file of job `job`, under the first number whose
/// name no file has: a killed process of this job may have left the name
/// a new process with its pid would take (the launcher removes them when
/// the job ends). Its number, its path, and the file or why there is none.
fn make_file(job: &str) -> (u64, std::path::PathBuf, Result<std::fs::File, String>) {
    const TRIES: usize = 64;
    let pid = std::process::id();
    let mut last = (0, std::path::PathBuf::new());
    for _ in 0..TRIES {
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let path = vpml::shm::window_files::window_file_path(job, pid, n);
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => return (n, path, Ok(f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = (n, path),
            Err(e) => {
                let why = format!("{}: {e}", path.display());
                return (n, path, Err(why));
            }
        }
    }
    let why = format!("{}: {TRIES} names in a row taken", last.1.display());
    (last.0, last.1, Err(why))
}

/// Give file `f` `len` bytes of storage now (tmpfs pages), not at the
/// first store.
fn reserve(f: &std::fs::File, len: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let len =
        libc::off_t::try_from(len).map_err(|_| std::io::Error::from_raw_os_error(libc::EFBIG))?;
    // SAFETY: a file descriptor this function's caller owns.
    match unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, len) } {
        0 => Ok(()),
        e => Err(std::io::Error::from_raw_os_error(e)),
    }
}

/// `MPI_Win_allocate_shared`.
fn allocate_shared(
    func: &str,
    len: Aint,
    disp_unit: c_int,
    info: Info,
    h: Comm,
    baseptr: *mut c_void,
    out: *mut Win,
) -> Result<(), c_int> {
    let c = crate::state::intra_comm(func, h)?;
    if c.reexecuting() {
        crate::threads::stop_reexecution(
            &c,
            "it re-executes MPI_Win_allocate_shared: loads and stores into shared memory pass no message, so no log holds them to replay",
        );
    }
    let len = usize::try_from(len)
        .map_err(|_| error(h, func, MPI_ERR_SIZE, &format!("negative size {len}")))?;
    let unit = super::window::disp_unit_of(func, disp_unit)?;
    let mapped = match map_shared(func, h, len, unit, false, super::direct::unlogged())? {
        Ok(m) => m,
        Err(NotShared::OtherHosts) => {
            let why = "the members are not all on one host";
            return Err(error(h, func, MPI_ERR_RMA_SHARED, why));
        }
        Err(NotShared::Unmapped(why)) => return Err(error(h, func, MPI_ERR_RMA_SHARED, &why)),
    };
    let base = mapped.base;
    let given = super::window::Given {
        base,
        len,
        disp_unit: unit,
        flavor: MPI_WIN_FLAVOR_SHARED,
        owned: Some(Memory::Shared(mapped.segment)),
        direct: mapped.direct,
    };
    let win = super::window::create(func, h, given, info)?;
    // SAFETY: `baseptr` is a `void **`, `out` a handle pointer (caller
    // contract).
    unsafe {
        put(baseptr.cast::<*mut c_void>(), base as *mut c_void);
        put(out, win);
    }
    Ok(())
}

export! {
    fn MPI_Win_allocate_shared / PMPI_Win_allocate_shared(size: Aint, disp_unit: c_int, info: Info, h: Comm, baseptr: *mut c_void, out: *mut Win) -> c_int {
        allocate_shared("MPI_Win_allocate_shared", size, disp_unit, info, h, baseptr, out).err().unwrap_or(MPI_SUCCESS)
    }

    fn MPI_Win_shared_query / PMPI_Win_shared_query(h: Win, rank: c_int, size: *mut Aint, disp_unit: *mut c_int, baseptr: *mut c_void) -> c_int {
        let func = "MPI_Win_shared_query";
        if let Err(code) = window_or_error(func, h) {
            return code;
        }
        let found = with_win(h, |w| {
            let (Some(Memory::Shared(seg)), MPI_WIN_FLAVOR_SHARED) = (&w.owned, w.flavor) else {
                return Err((MPI_ERR_RMA_FLAVOR, "the window is not a shared one".to_string()));
            };
            let part = if rank == MPI_PROC_NULL {
                // The first part with memory (or the first, if none has).
                seg.parts.iter().find(|p| p.1 > 0).or(seg.parts.first())
            } else {
                usize::try_from(rank).ok().and_then(|r| seg.parts.get(r))
            };
            let &(off, bytes, unit) = part.ok_or((MPI_ERR_RANK, format!("invalid rank {rank}")))?;
            // A part of no bytes has no address (MPI 4.0).
            let base = if bytes == 0 { 0 } else { seg.map.as_ptr() as usize + off };
            Ok((base, bytes, unit))
        });
        match found {
            Some(Ok((base, bytes, unit))) => {
                // SAFETY: the caller's out-pointers (`baseptr` a `void **`).
                unsafe {
                    put(size, bytes as Aint);
                    put(disp_unit, unit as c_int);
                    put(baseptr.cast::<*mut c_void>(), base as *mut c_void);
                }
                MPI_SUCCESS
            }
            Some(Err((code, why))) => win_error(h, func, code, &why),
            None => win_error(h, func, MPI_ERR_WIN, "invalid window"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name a killed process of the same job left taken (its pid came
    /// back) is skipped, not an error.
    #[test]
    fn a_window_file_name_left_taken_is_skipped() {
        let job = format!("test-{}", std::process::id());
        let next = MADE.load(Ordering::Relaxed);
        let taken: Vec<_> = (next..next + 3)
            .map(|n| vpml::shm::window_files::window_file_path(&job, std::process::id(), n))
            .collect();
        // Removes this test's files however it ends.
        struct Sweep(String);
        impl Drop for Sweep {
            fn drop(&mut self) {
                vpml::shm::window_files::remove_window_files(&self.0);
            }
        }
        let _sweep = Sweep(job.clone());
        for p in &taken {
            std::fs::write(p, b"left behind").expect("make a stale window file");
        }
        let (_, path, file) = make_file(&job);
        let made = file.is_ok();
        let _ = std::fs::remove_file(&path);
        let removed = vpml::shm::window_files::remove_window_files(&job);
        assert!(made, "no window file made past the taken names");
        assert!(
            !taken.contains(&path),
            "took a name in use: {}",
            path.display()
        );
        assert_eq!(removed, 3, "the stale files");
    }
}
