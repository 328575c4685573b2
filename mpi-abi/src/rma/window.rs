//! Windows: creation (`MPI_Win_create`, `_allocate`, `_create_dynamic`),
//! attached memory, `MPI_Win_free`, and what a program may ask of a window
//! (group, name, info, attributes, error handler).

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::Ordering;

use super::{
    Allocation, LIVE, Memory, Peer, Shown, TargetLock, Window, check, win_error, window_or_error,
    with_win,
};
use crate::consts::*;
use crate::state::{STATE, handle_of, insert, put, slot_of};

/// Alignment of the memory `MPI_Win_allocate` and `MPI_Alloc_mem` give.
const ALIGN: usize = 64;

/// The attributes MPI predefines on windows (MPICH's keyvals).
const MPI_WIN_BASE: c_int = 0x6600_0001;
const MPI_WIN_SIZE: c_int = 0x6600_0003;
const MPI_WIN_DISP_UNIT: c_int = 0x6600_0005;
const MPI_WIN_CREATE_FLAVOR: c_int = 0x6600_0007;
const MPI_WIN_MODEL: c_int = 0x6600_0009;

impl Allocation {
    /// `len` zeroed bytes; `None` if there is no memory for them.
    fn new(len: usize) -> Option<Allocation> {
        let layout = std::alloc::Layout::from_size_align(len.max(1), ALIGN).ok()?;
        // SAFETY: the layout's size is not zero.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        (!ptr.is_null()).then_some(Allocation { ptr, layout })
    }
}

impl Window {
    /// Where `len` bytes at `at` lie — a byte offset into the window, or
    /// an address in a dynamic window's attached memory — if they are all
    /// the window's.
    pub(super) fn locate(&self, at: i64, len: u64) -> Option<*mut u8> {
        let len = usize::try_from(len).ok()?;
        if self.flavor == MPI_WIN_FLAVOR_DYNAMIC {
            let addr = usize::try_from(at).ok()?;
            let end = addr.checked_add(len)?;
            // Regions attached side by side cover what spans them; they
            // are kept in address order.
            let mut covered = addr;
            for &(a, l) in &self.attached {
                if a <= covered {
                    covered = covered.max(a.saturating_add(l));
                }
            }
            return (covered >= end).then_some(addr as *mut u8);
        }
        let off = usize::try_from(at).ok()?;
        (off.checked_add(len)? <= self.len).then(|| (self.base + off) as *mut u8)
    }
}

/// A window's memory, as its creation call gives it.
pub(super) struct Given {
    /// Address and bytes (0 and 0 for a dynamic window).
    pub base: usize,
    pub len: usize,
    pub disp_unit: usize,
    pub flavor: c_int,
    /// What the window allocated, freed with it.
    pub owned: Option<Memory>,
    /// Set for a direct window ([`super::direct`]), whose memory `owned`
    /// maps.
    pub direct: Option<super::direct::Direct>,
}

/// Make a window over `memory` on communicator `h` (collective): the
/// private communicator, every member's length and displacement unit, the
/// window's info (`info`'s keys it knows). Its handle.
pub(super) fn create(func: &str, h: Comm, memory: Given, info: Info) -> Result<Win, c_int> {
    let Given {
        base,
        len,
        disp_unit,
        flavor,
        owned,
        direct,
    } = memory;
    let c = crate::state::intra_comm(func, h)?;
    crate::threads::making_a_window();
    let private = crate::agreement::dup(func, h, &c)?;
    // Requests are applied to the window's memory at progress points that
    // a re-execution must find among all of the process's calls.
    private.use_process_lane();
    let (rank, size) = (private.rank(), private.size());
    let mut members = private.world_ranks();
    members.sort_unstable();
    let comm = crate::comm::register_with(h, private, None);
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if let Some(e) = crate::state::comm_slot(comm).and_then(|i| s.comms.get_mut(i)?.as_mut()) {
            e.errhandler = MPI_ERRORS_RETURN;
        }
    });
    let mine = Peer {
        len: len as u64,
        disp_unit: disp_unit as u64,
    };
    let mut peers = vec![Peer::default(); size];
    let n = size_of::<Peer>() as c_int;
    // SAFETY: `mine` and `peers` hold one and `size` peers.
    let rc = unsafe {
        crate::coll::MPI_Allgather(
            (&mine as *const Peer).cast(),
            n,
            MPI_BYTE,
            peers.as_mut_ptr().cast(),
            n,
            MPI_BYTE,
            comm,
        )
    };
    if rc != MPI_SUCCESS {
        return Err(crate::state::error(
            h,
            func,
            rc,
            "exchanging the window's sizes",
        ));
    }
    let is_direct = direct.is_some();
    let w = Window {
        comm,
        rank,
        size,
        base,
        len,
        flavor,
        shown: Box::new(Shown {
            size: len as Aint,
            disp_unit: disp_unit as c_int,
            flavor,
        }),
        owned,
        members,
        peers,
        attached: Vec::new(),
        name: String::new(),
        info: known_info(info),
        errhandler: MPI_ERRORS_ARE_FATAL,
        issued: vec![0; size],
        replies: Vec::new(),
        given: Vec::new(),
        sends: Vec::new(),
        access: None,
        locks: Default::default(),
        inbox: MPI_REQUEST_NULL,
        inbox_buf: vec![0; super::target::INBOX_BYTES],
        served: 0,
        exposure: None,
        completed: vec![0; size],
        lock: TargetLock::default(),
        direct,
    };
    let i = STATE.with(|s| insert(&mut s.borrow_mut().windows, 0, w));
    let win = handle_of(USER_WIN_KIND, i);
    if !is_direct {
        // Requests come to this rank: progress points serve them.
        LIVE.fetch_add(1, Ordering::Relaxed);
        super::target::post_inbox(win)?;
    }
    Ok(win)
}

/// The window info keys MPI defines, which a window keeps (others are
/// ignored, as MPICH does).
const INFO_KEYS: &[&str] = &[
    "no_locks",
    "accumulate_ordering",
    "accumulate_ops",
    "same_size",
    "same_disp_unit",
    "alloc_shared_noncontig",
    "mpi_accumulate_granularity",
];

/// The pairs of `info` a window keeps.
fn known_info(info: Info) -> Vec<(String, String)> {
    let mut pairs = crate::info::pairs(info).unwrap_or_default();
    pairs.retain(|(k, _)| INFO_KEYS.contains(&k.as_str()));
    pairs
}

/// A size argument, checked.
fn non_negative(func: &str, v: isize, what: &str, code: c_int) -> Result<usize, c_int> {
    usize::try_from(v).map_err(|_| {
        crate::state::error(MPI_COMM_WORLD, func, code, &format!("negative {what} {v}"))
    })
}

/// A displacement unit argument, checked (positive).
pub(super) fn disp_unit_of(func: &str, v: c_int) -> Result<usize, c_int> {
    usize::try_from(v).ok().filter(|&u| u > 0).ok_or_else(|| {
        crate::state::error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_DISP,
            &format!("displacement unit {v} is not positive"),
        )
    })
}

/// Give the handle of a window made by `made` to `*out`.
fn give(made: Result<Win, c_int>, out: *mut Win) -> c_int {
    match made {
        Ok(w) => {
            // SAFETY: a handle pointer (caller contract).
            unsafe { put(out, w) };
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}

/// `MPI_Win_allocate`: `len` bytes of the window's own.
fn allocate(
    func: &str,
    len: isize,
    disp_unit: c_int,
    info: Info,
    h: Comm,
    baseptr: *mut c_void,
    out: *mut Win,
) -> c_int {
    let made = (|| {
        let len = non_negative(func, len, "size", MPI_ERR_SIZE)?;
        let unit = disp_unit_of(func, disp_unit)?;
        // Direct when it can be; otherwise (other hosts, no room in
        // /dev/shm, a member that cannot map the file — every member
        // learns alike) the window's memory is this process's own.
        if super::direct::unlogged()
            && let Ok(mapped) = super::shared::map_shared(func, h, len, unit, true, true)?
        {
            // SAFETY: `baseptr` is a `void **` (caller contract).
            unsafe { put(baseptr.cast::<*mut c_void>(), mapped.base as *mut c_void) };
            let given = Given {
                base: mapped.base,
                len,
                disp_unit: unit,
                flavor: MPI_WIN_FLAVOR_ALLOCATE,
                owned: Some(Memory::Shared(mapped.segment)),
                direct: mapped.direct,
            };
            return create(func, h, given, info);
        }
        let Some(memory) = Allocation::new(len) else {
            return Err(crate::state::error(
                h,
                func,
                MPI_ERR_NO_MEM,
                &format!("no memory for {len} bytes"),
            ));
        };
        let base = memory.ptr;
        // SAFETY: `baseptr` is a `void **` (caller contract).
        unsafe { put(baseptr.cast::<*mut c_void>(), base.cast()) };
        let given = Given {
            base: base as usize,
            len,
            disp_unit: unit,
            flavor: MPI_WIN_FLAVOR_ALLOCATE,
            owned: Some(Memory::Allocated(memory)),
            direct: None,
        };
        create(func, h, given, info)
    })();
    give(made, out)
}

/// Wait for every request of `reqs` (on window `h`'s communicator).
pub(super) fn wait_all(h: Win, func: &str, reqs: &mut Vec<Request>) -> Result<(), c_int> {
    if reqs.is_empty() {
        return Ok(());
    }
    // SAFETY: `reqs` holds `len` request handles; statuses are ignored.
    let rc = unsafe {
        crate::p2p::MPI_Waitall(reqs.len() as c_int, reqs.as_mut_ptr(), std::ptr::null_mut())
    };
    reqs.clear();
    check(h, func, rc, "completing one-sided transfers")
}

/// Wait until the reply receives given to the program (`MPI_Rget` …) that
/// are still in flight have their data, without completing them (the
/// program does).
pub(super) fn await_given(h: Win, func: &str) -> Result<(), c_int> {
    let given = with_win(h, |w| std::mem::take(&mut w.given)).unwrap_or_default();
    let ids: Vec<_> = given
        .into_iter()
        .filter(|&(req, id)| super::origin::raw_id(req) == Some(id))
        .map(|(_, id)| Some(id))
        .collect();
    let Some(engine) = crate::state::world_comm() else {
        return Ok(());
    };
    if ids.is_empty() {
        return Ok(());
    }
    crate::threads::block_until(&engine, &ids, true)
        .map_err(|e| win_error(h, func, crate::state::class_of(&e), &e.to_string()))
}

/// Wait for the sends of window `h` in flight, and its replies to come.
/// Always a progress point (whether anything is left to wait for depends
/// on timing; whether requests are served here must not).
pub(super) fn drain(h: Win, func: &str) -> Result<(), c_int> {
    super::progress();
    await_given(h, func)?;
    let (mut replies, sends) = with_win(h, |w| {
        (std::mem::take(&mut w.replies), std::mem::take(&mut w.sends))
    })
    .unwrap_or_default();
    let (mut reqs, bufs): (Vec<Request>, Vec<Vec<u8>>) = sends.into_iter().unzip();
    reqs.append(&mut replies);
    let r = wait_all(h, func, &mut reqs);
    drop(bufs);
    r
}

/// No request can come to window `h` any more: its inbox goes. An error
/// if one came all the same.
fn withdraw_inbox(h: Win, func: &str) -> c_int {
    // (Taken out of the window first: the wait below serves, and must
    // not take the cancelled receive for a request.)
    let mut inbox = with_win(h, |w| std::mem::replace(&mut w.inbox, MPI_REQUEST_NULL))
        .unwrap_or(MPI_REQUEST_NULL);
    let mut st = MpiStatus::default();
    let mut cancelled: c_int = 1;
    // SAFETY: the window's own request, cancelled and completed here;
    // out-pointers to locals.
    let waited = unsafe {
        crate::p2p::MPI_Cancel(&mut inbox);
        crate::p2p::MPI_Wait(&mut inbox, &mut st)
    };
    if waited == MPI_SUCCESS {
        // SAFETY: a status written by the wait.
        unsafe { crate::p2p::MPI_Test_cancelled(&st, &mut cancelled) };
    }
    if waited != MPI_SUCCESS {
        win_error(h, func, waited, "withdrawing the receive of requests")
    } else if cancelled == 0 {
        // A request nobody will answer: its origin broke MPI's rules
        // (an operation after the epochs were closed).
        let why = format!(
            "a request from rank {} came after every epoch on the window was closed",
            st.source
        );
        win_error(h, func, MPI_ERR_RMA_SYNC, &why)
    } else {
        MPI_SUCCESS
    }
}

export! {
    fn MPI_Win_create / PMPI_Win_create(base: *mut c_void, size: Aint, disp_unit: c_int, info: Info, h: Comm, out: *mut Win) -> c_int {
        let func = "MPI_Win_create";
        let made = (|| {
            let len = non_negative(func, size, "size", MPI_ERR_SIZE)?;
            let unit = disp_unit_of(func, disp_unit)?;
            let given = Given { base: base as usize, len, disp_unit: unit, flavor: MPI_WIN_FLAVOR_CREATE, owned: None, direct: None };
            create(func, h, given, info)
        })();
        give(made, out)
    }

    fn MPI_Win_allocate / PMPI_Win_allocate(size: Aint, disp_unit: c_int, info: Info, h: Comm, baseptr: *mut c_void, out: *mut Win) -> c_int {
        allocate("MPI_Win_allocate", size, disp_unit, info, h, baseptr, out)
    }

    fn MPI_Win_create_dynamic / PMPI_Win_create_dynamic(info: Info, h: Comm, out: *mut Win) -> c_int {
        let given = Given { base: 0, len: 0, disp_unit: 1, flavor: MPI_WIN_FLAVOR_DYNAMIC, owned: None, direct: None };
        give(create("MPI_Win_create_dynamic", h, given, info), out)
    }

    fn MPI_Win_attach / PMPI_Win_attach(h: Win, base: *mut c_void, size: Aint) -> c_int {
        let func = "MPI_Win_attach";
        if let Err(code) = window_or_error(func, h) {
            return code;
        }
        let Ok(len) = usize::try_from(size) else {
            return win_error(h, func, MPI_ERR_SIZE, &format!("negative size {size}"));
        };
        match with_win(h, |w| {
            (w.flavor == MPI_WIN_FLAVOR_DYNAMIC).then(|| {
                let at = w.attached.partition_point(|&(a, _)| a < base as usize);
                w.attached.insert(at, (base as usize, len));
            })
        }) {
            Some(Some(())) => MPI_SUCCESS,
            _ => win_error(h, func, MPI_ERR_RMA_FLAVOR, "the window is not a dynamic one"),
        }
    }

    fn MPI_Win_detach / PMPI_Win_detach(h: Win, base: *const c_void) -> c_int {
        let func = "MPI_Win_detach";
        if let Err(code) = window_or_error(func, h) {
            return code;
        }
        let found = with_win(h, |w| {
            let i = w.attached.iter().position(|&(a, _)| a == base as usize)?;
            w.attached.remove(i);
            Some(())
        });
        match found {
            Some(Some(())) => MPI_SUCCESS,
            _ => win_error(h, func, MPI_ERR_RMA_ATTACH, "no memory attached at this address"),
        }
    }

    fn MPI_Win_free / PMPI_Win_free(win: *mut Win) -> c_int {
        let func = "MPI_Win_free";
        // SAFETY: a handle pointer (caller contract).
        let h = unsafe { win.as_ref().copied() }.unwrap_or(MPI_WIN_NULL);
        if let Err(code) = window_or_error(func, h) {
            return code;
        }
        if let Err(code) = drain(h, func) {
            return code;
        }
        // Others may still lock this rank until they reach the barrier:
        // it serves meanwhile, and its replies are sent before the window
        // goes (every member's requests to it were acknowledged or
        // answered before that member reached the barrier).
        let comm = with_win(h, |w| w.comm).unwrap_or(MPI_COMM_NULL);
        // SAFETY: a valid communicator.
        let rc = unsafe { crate::coll::MPI_Barrier(comm) };
        if let Err(code) = check(h, func, rc, "meeting the other members") {
            return code;
        }
        if let Err(code) = drain(h, func) {
            return code;
        }
        let direct = with_win(h, |w| w.direct.is_some()).unwrap_or(false);
        // The window goes whatever happened; the first error is returned.
        let mut rc = if direct {
            // Every member is past its last access (the barrier).
            MPI_SUCCESS
        } else {
            withdraw_inbox(h, func)
        };
        let deleted = crate::attr::delete_all(crate::attr::Object::Win, h);
        if rc == MPI_SUCCESS {
            rc = deleted;
        }
        let w = STATE.with(|s| {
            let mut s = s.borrow_mut();
            s.windows.get_mut(slot_of(h, USER_WIN_KIND)?)?.take()
        });
        if !direct {
            LIVE.fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(mut w) = w {
            if let Some(d) = &mut w.direct {
                // An exposure epoch never waited for (an erroneous
                // program): its receives go with the window.
                for req in &mut d.completions {
                    // SAFETY: the window's own receives, cancelled and
                    // completed here; the status is ignored.
                    unsafe {
                        crate::p2p::MPI_Cancel(req);
                        crate::p2p::MPI_Wait(req, std::ptr::null_mut());
                    }
                }
            }
            let mut comm = w.comm;
            // SAFETY: the window's private communicator, freed once.
            unsafe { crate::comm::MPI_Comm_free(&mut comm) };
            drop(w.owned.take());
        }
        // SAFETY: as above.
        unsafe { put(win, MPI_WIN_NULL) };
        rc
    }

    fn MPI_Win_get_group / PMPI_Win_get_group(h: Win, out: *mut Group) -> c_int {
        let func = "MPI_Win_get_group";
        match with_win(h, |w| w.comm) {
            // SAFETY: a valid communicator; the caller's group pointer.
            Some(comm) => unsafe { crate::group::MPI_Comm_group(comm, out) },
            None => win_error(h, func, MPI_ERR_WIN, "invalid window"),
        }
    }

    fn MPI_Win_set_name / PMPI_Win_set_name(h: Win, name: *const c_char) -> c_int {
        // SAFETY: null or a NUL-terminated string (caller contract).
        let Some(name) = (unsafe { crate::env::object_name(name) }) else {
            return win_error(h, "MPI_Win_set_name", MPI_ERR_ARG, "null name");
        };
        match with_win(h, |w| w.name = name) {
            Some(()) => MPI_SUCCESS,
            None => win_error(h, "MPI_Win_set_name", MPI_ERR_WIN, "invalid window"),
        }
    }

    fn MPI_Win_get_name / PMPI_Win_get_name(h: Win, name: *mut c_char, len: *mut c_int) -> c_int {
        let Some(text) = with_win(h, |w| w.name.clone()) else {
            return win_error(h, "MPI_Win_get_name", MPI_ERR_WIN, "invalid window");
        };
        // SAFETY: `name` holds MPI_MAX_OBJECT_NAME chars, `len` is an int
        // pointer (caller contract).
        unsafe { crate::env::copy_string(&text, name, len, MPI_MAX_OBJECT_NAME) };
        MPI_SUCCESS
    }

    fn MPI_Win_set_info / PMPI_Win_set_info(h: Win, info: Info) -> c_int {
        let pairs = known_info(info);
        match with_win(h, |w| {
            for (k, v) in pairs {
                w.info.retain(|(key, _)| *key != k);
                w.info.push((k, v));
            }
        }) {
            Some(()) => MPI_SUCCESS,
            None => win_error(h, "MPI_Win_set_info", MPI_ERR_WIN, "invalid window"),
        }
    }

    fn MPI_Win_get_info / PMPI_Win_get_info(h: Win, out: *mut Info) -> c_int {
        let Some((mut pairs, direct)) = with_win(h, |w| (w.info.clone(), w.direct.is_some())) else {
            return win_error(h, "MPI_Win_get_info", MPI_ERR_WIN, "invalid window");
        };
        // vpml's own: do origins load and store into this window's memory
        // directly (see `super::direct`), or send it requests?
        pairs.push(("vpml_direct".into(), direct.to_string()));
        if !pairs.iter().any(|(k, _)| k == "no_locks") {
            pairs.push(("no_locks".into(), "false".into()));
        }
        if !pairs.iter().any(|(k, _)| k == "accumulate_ordering") {
            pairs.push(("accumulate_ordering".into(), "rar,raw,war,waw".into()));
        }
        if !pairs.iter().any(|(k, _)| k == "accumulate_ops") {
            pairs.push(("accumulate_ops".into(), "same_op_no_op".into()));
        }
        // SAFETY: the caller's handle pointer.
        unsafe { put(out, crate::info::new_info(pairs)) };
        MPI_SUCCESS
    }

    fn MPI_Win_create_errhandler / PMPI_Win_create_errhandler(f: Option<crate::errhan::CommErrhandlerFn>, out: *mut Errhandler) -> c_int {
        // SAFETY: the same contract (window handlers take the same
        // arguments, a window handle where a communicator's would be).
        unsafe { crate::errhan::MPI_Comm_create_errhandler(f, out) }
    }

    fn MPI_Win_set_errhandler / PMPI_Win_set_errhandler(h: Win, handler: Errhandler) -> c_int {
        if !crate::errhan::is_handler(handler) {
            return win_error(h, "MPI_Win_set_errhandler", MPI_ERR_ARG, "unknown error handler");
        }
        match with_win(h, |w| w.errhandler = handler) {
            Some(()) => MPI_SUCCESS,
            None => win_error(h, "MPI_Win_set_errhandler", MPI_ERR_WIN, "invalid window"),
        }
    }

    fn MPI_Win_get_errhandler / PMPI_Win_get_errhandler(h: Win, out: *mut Errhandler) -> c_int {
        match with_win(h, |w| w.errhandler) {
            Some(e) => {
                // SAFETY: the caller's handle pointer.
                unsafe { put(out, e) };
                MPI_SUCCESS
            }
            None => win_error(h, "MPI_Win_get_errhandler", MPI_ERR_WIN, "invalid window"),
        }
    }

    fn MPI_Win_call_errhandler / PMPI_Win_call_errhandler(h: Win, code: c_int) -> c_int {
        if let Err(rc) = window_or_error("MPI_Win_call_errhandler", h) {
            return rc;
        }
        win_error(h, "MPI_Win_call_errhandler", code, "called by the program");
        MPI_SUCCESS
    }

    fn MPI_Win_create_keyval / PMPI_Win_create_keyval(copy: Option<crate::attr::CopyFn>, delete: Option<crate::attr::DeleteFn>, keyval: *mut c_int, extra: *mut c_void) -> c_int {
        crate::attr::create("MPI_Win_create_keyval", crate::attr::Object::Win, copy, delete, keyval, extra)
    }

    fn MPI_Win_free_keyval / PMPI_Win_free_keyval(keyval: *mut c_int) -> c_int {
        crate::attr::free("MPI_Win_free_keyval", crate::attr::Object::Win, keyval)
    }

    fn MPI_Win_set_attr / PMPI_Win_set_attr(h: Win, keyval: c_int, val: *mut c_void) -> c_int {
        if let Err(code) = window_or_error("MPI_Win_set_attr", h) {
            return code;
        }
        crate::attr::set("MPI_Win_set_attr", crate::attr::Object::Win, h, keyval, val)
    }

    fn MPI_Win_get_attr / PMPI_Win_get_attr(h: Win, keyval: c_int, val: *mut c_void, flag: *mut c_int) -> c_int {
        let func = "MPI_Win_get_attr";
        let Some(predefined) = with_win(h, |w| match keyval {
            MPI_WIN_BASE => Some(w.base),
            MPI_WIN_SIZE => Some(std::ptr::addr_of!(w.shown.size) as usize),
            MPI_WIN_DISP_UNIT => Some(std::ptr::addr_of!(w.shown.disp_unit) as usize),
            MPI_WIN_CREATE_FLAVOR => Some(std::ptr::addr_of!(w.shown.flavor) as usize),
            MPI_WIN_MODEL => Some(&WIN_MODEL as *const c_int as usize),
            _ => None,
        }) else {
            return win_error(h, func, MPI_ERR_WIN, "invalid window");
        };
        match predefined {
            Some(v) => {
                // SAFETY: `val` is a `void **`, `flag` an int pointer
                // (caller contract). The size, unit and flavor point into
                // the window's entry, which stays put until it is freed
                // (the table holds it boxed in place: see `Window`).
                unsafe {
                    put(val.cast::<*mut c_void>(), v as *mut c_void);
                    put(flag, 1);
                }
                MPI_SUCCESS
            }
            None => crate::attr::get(func, crate::attr::Object::Win, h, keyval, val, flag),
        }
    }

    fn MPI_Win_delete_attr / PMPI_Win_delete_attr(h: Win, keyval: c_int) -> c_int {
        if let Err(code) = window_or_error("MPI_Win_delete_attr", h) {
            return code;
        }
        crate::attr::delete("MPI_Win_delete_attr", crate::attr::Object::Win, h, keyval)
    }
}

/// What `MPI_WIN_MODEL` points to: one copy of memory, which operations
/// and local loads and stores both see.
static WIN_MODEL: c_int = MPI_WIN_UNIFIED;
