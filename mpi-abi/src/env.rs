//! Environment: initialization, finalization, versions, errors, timers,
//! memory, and the handle-less datatype and operation calls.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::Ordering;

use crate::consts::*;
use crate::state::{
    CommEntry, DerivedType, FINALIZED, INITIALIZED, More, STATE, THREAD_LEVEL, UserFn, error,
    handle_of, insert, put, release, slot_of,
};
use crate::types::Builder;

/// MPI's text for error class `code`.
pub(crate) fn error_text(code: c_int) -> &'static str {
    match code {
        MPI_SUCCESS => "no error",
        MPI_ERR_BUFFER => "invalid buffer pointer",
        MPI_ERR_COUNT => "invalid count argument",
        MPI_ERR_TYPE => "invalid datatype",
        MPI_ERR_TAG => "invalid tag",
        MPI_ERR_COMM => "invalid communicator",
        MPI_ERR_RANK => "invalid rank",
        MPI_ERR_ROOT => "invalid root",
        MPI_ERR_GROUP => "invalid group",
        MPI_ERR_OP => "invalid reduce operation",
        MPI_ERR_TOPOLOGY => "invalid topology",
        MPI_ERR_DIMS => "invalid dimension argument",
        MPI_ERR_ARG => "invalid argument",
        MPI_ERR_TRUNCATE => "message truncated",
        MPI_ERR_IN_STATUS => "error code is in status",
        MPI_ERR_PENDING => "pending request",
        MPI_ERR_REQUEST => "invalid request",
        MPI_ERR_CONVERSION => "error in data conversion",
        MPI_ERR_INFO => "invalid info object",
        MPI_ERR_INFO_KEY => "invalid info key",
        MPI_ERR_INFO_VALUE => "invalid info value",
        MPI_ERR_INFO_NOKEY => "no such info key",
        MPI_ERR_NO_MEM => "out of memory",
        MPI_ERR_INTERN => "internal error",
        MPI_ERR_UNSUPPORTED_OPERATION => "unsupported operation",
        MPI_ERR_OTHER => "other error",
        MPI_ERR_WIN => "invalid window",
        MPI_ERR_BASE => "invalid base address",
        MPI_ERR_LOCKTYPE => "invalid lock type",
        MPI_ERR_RMA_CONFLICT => "conflicting accesses to a window",
        MPI_ERR_RMA_SYNC => "wrong synchronization of RMA calls",
        MPI_ERR_SIZE => "invalid size argument",
        MPI_ERR_DISP => "invalid displacement argument",
        MPI_ERR_ASSERT => "invalid assert argument",
        MPI_ERR_RMA_RANGE => "target memory is not part of the window",
        MPI_ERR_RMA_ATTACH => "memory cannot be attached",
        MPI_ERR_RMA_SHARED => "memory cannot be shared",
        MPI_ERR_RMA_FLAVOR => "wrong window flavor",
        _ => "unknown error",
    }
}

/// The thread that initialized MPI (`MPI_Is_thread_main`).
static MAIN_THREAD: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();

/// `MPI_Init` and `MPI_Init_thread`, granting thread support `level`.
fn init(func: &str, level: c_int) -> c_int {
    if INITIALIZED.load(Ordering::Acquire) {
        return error(MPI_COMM_WORLD, func, MPI_ERR_OTHER, "called twice");
    }
    // A session may have started vpml already.
    if STATE.with(|s| s.borrow().world.is_none()) {
        let rc = start(func, level);
        if rc != MPI_SUCCESS {
            return rc;
        }
    }
    INITIALIZED.store(true, Ordering::Release);
    MPI_SUCCESS
}

/// Join the job (for `MPI_Init` or the first `MPI_Session_init`),
/// granting thread support `level`.
pub(crate) fn start(func: &str, level: c_int) -> c_int {
    if crate::session::ended() {
        return error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_OTHER,
            "vpml cannot start MPI again once it ended (after MPI_Finalize or the last session's MPI_Session_finalize)",
        );
    }
    let _ = MAIN_THREAD.set(std::thread::current().id());
    let world = match vpml::init() {
        Ok(w) => w,
        Err(e) => return error(MPI_COMM_WORLD, func, MPI_ERR_OTHER, &e.to_string()),
    };
    // Made locally: a restarted rank that resumes from a checkpoint runs
    // MPI_Init again, where a collective would meet nobody.
    let selfc = world.self_comm();
    let worldc: vpml::Comm = (*world).clone();
    let waker = worldc.waker_raw();
    let reexecuting = worldc.reexecuting();
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        s.comms = vec![
            Some(CommEntry {
                comm: std::rc::Rc::new(worldc),
                errhandler: MPI_ERRORS_ARE_FATAL,
                topology: None,
                name: None,
                persistent_collectives: 0,
                attrs: Vec::new(),
            }),
            Some(CommEntry {
                comm: std::rc::Rc::new(selfc),
                errhandler: MPI_ERRORS_ARE_FATAL,
                topology: None,
                name: None,
                persistent_collectives: 0,
                attrs: Vec::new(),
            }),
        ];
        s.world = Some(world);
    });
    // The thread level (and from now on, under SERIALIZED or MULTIPLE, the
    // call lock) before another thread can see MPI initialized.
    THREAD_LEVEL.store(level, Ordering::Release);
    crate::threads::init(
        level == MPI_THREAD_SERIALIZED,
        level == MPI_THREAD_MULTIPLE,
        waker,
        reexecuting,
    );
    MPI_SUCCESS
}

export! {
    fn MPI_Init / PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
        init("MPI_Init", MPI_THREAD_FUNNELED)
    }

    fn MPI_Init_thread / PMPI_Init_thread(_argc: *mut c_int, _argv: *mut *mut *mut c_char, required: c_int, provided: *mut c_int) -> c_int {
        let level = required.clamp(MPI_THREAD_SINGLE, MPI_THREAD_MULTIPLE);
        let r = init("MPI_Init_thread", level);
        // The level granted: a session that started MPI first set it.
        // SAFETY: an int pointer (caller contract).
        unsafe { put(provided, THREAD_LEVEL.load(Ordering::Acquire)) };
        r
    }
}

export! {
    any_thread:

    fn MPI_Query_thread / PMPI_Query_thread(provided: *mut c_int) -> c_int {
        let level = THREAD_LEVEL.load(Ordering::Acquire);
        // SAFETY: an int pointer (caller contract).
        unsafe { put(provided, level) };
        MPI_SUCCESS
    }

    fn MPI_Initialized / PMPI_Initialized(flag: *mut c_int) -> c_int {
        let v = INITIALIZED.load(Ordering::Acquire);
        // SAFETY: an int pointer (caller contract).
        unsafe { put(flag, c_int::from(v)) };
        MPI_SUCCESS
    }

    fn MPI_Is_thread_main / PMPI_Is_thread_main(flag: *mut c_int) -> c_int {
        let main = MAIN_THREAD.get() == Some(&std::thread::current().id());
        // SAFETY: an int pointer (caller contract).
        unsafe { put(flag, c_int::from(main)) };
        MPI_SUCCESS
    }

    fn MPI_Finalized / PMPI_Finalized(flag: *mut c_int) -> c_int {
        let v = FINALIZED.load(Ordering::Acquire);
        // SAFETY: an int pointer (caller contract).
        unsafe { put(flag, c_int::from(v)) };
        MPI_SUCCESS
    }
}

export! {

    fn MPI_Finalize / PMPI_Finalize() -> c_int {
        if !INITIALIZED.load(Ordering::Acquire) || FINALIZED.load(Ordering::Acquire) {
            // (A session alone ends with MPI_Session_finalize.)
            return error(MPI_COMM_WORLD, "MPI_Finalize", MPI_ERR_OTHER, "called before MPI_Init or twice");
        }
        // MPI_COMM_SELF's attributes are deleted first (libraries hook
        // their cleanup there), then the world's.
        if STATE.with(|s| s.borrow().world.is_some()) {
            for h in [MPI_COMM_SELF, MPI_COMM_WORLD] {
                let rc = crate::attr::delete_all(crate::attr::Object::Comm, h);
                if rc != MPI_SUCCESS {
                    return error(MPI_COMM_WORLD, "MPI_Finalize", rc, "an attribute's delete function failed");
                }
            }
        }
        let (world, staging) = STATE.with(|s| {
            let mut s = s.borrow_mut();
            let world = s.world.take();
            // Requests and communicators die before the world does; the
            // staging buffers of requests still in flight after it.
            let mut staging = std::mem::take(&mut s.orphans);
            let mut collectives = Vec::new();
            for more in s.requests.drain().filter_map(|e| e.more) {
                let More {
                    staging: copy,
                    after,
                    ..
                } = *more;
                staging.extend(copy);
                collectives.extend(after);
            }
            s.comms.clear();
            (world, (staging, collectives))
        });
        let Some(world) = world else {
            return error(MPI_COMM_WORLD, "MPI_Finalize", MPI_ERR_OTHER, "called before MPI_Init");
        };
        let r = world.finalize();
        // MPI_Finalized: MPI_Finalize has completed.
        FINALIZED.store(true, Ordering::Release);
        crate::session::end();
        drop(staging);
        match r {
            Ok(()) => MPI_SUCCESS,
            Err(e) => error(MPI_COMM_WORLD, "MPI_Finalize", MPI_ERR_OTHER, &e.to_string()),
        }
    }

    fn MPI_Abort / PMPI_Abort(_comm: Comm, code: c_int) -> c_int {
        let code = if code == 0 { 1 } else { code };
        STATE.with(|s| {
            if let Ok(s) = s.try_borrow()
                && let Some(world) = s.world.as_ref()
            {
                world.abort(code);
            }
        });
        std::process::exit(code)
    }

    fn MPI_Get_version / PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
        // MPI 4.0, as MPICH 4.0.2's header (whose ABI this library has)
        // and vpml's say: programs compare it with MPI_VERSION.
        // SAFETY: int pointers (caller contract).
        unsafe {
            put(version, 4);
            put(subversion, 0);
        }
        MPI_SUCCESS
    }

    fn MPI_Get_library_version / PMPI_Get_library_version(version: *mut c_char, len: *mut c_int) -> c_int {
        let text = format!("vpml {} (MPICH ABI)", env!("CARGO_PKG_VERSION"));
        // SAFETY: `version` holds MPI_MAX_LIBRARY_VERSION_STRING chars.
        unsafe { copy_string(&text, version, len, MPI_MAX_LIBRARY_VERSION_STRING) };
        MPI_SUCCESS
    }

    fn MPI_Get_processor_name / PMPI_Get_processor_name(name: *mut c_char, len: *mut c_int) -> c_int {
        let text = hostname();
        // SAFETY: `name` holds MPI_MAX_PROCESSOR_NAME chars (caller contract).
        unsafe { copy_string(&text, name, len, MPI_MAX_PROCESSOR_NAME) };
        MPI_SUCCESS
    }

    fn MPI_Error_string / PMPI_Error_string(code: c_int, text: *mut c_char, len: *mut c_int) -> c_int {
        let t = crate::errhan::user_string(code).unwrap_or_else(|| error_text(code).to_string());
        // SAFETY: `text` holds MPI_MAX_ERROR_STRING chars (caller contract).
        unsafe { copy_string(&t, text, len, MPI_MAX_ERROR_STRING) };
        MPI_SUCCESS
    }

    fn MPI_Error_class / PMPI_Error_class(code: c_int, class: *mut c_int) -> c_int {
        // Every code this library returns is a class; user codes have theirs.
        let c = crate::errhan::user_class(code)
            .unwrap_or(if (0..=MPI_ERR_LASTCODE).contains(&code) { code } else { MPI_ERR_UNKNOWN });
        // SAFETY: an int pointer (caller contract).
        unsafe { put(class, c) };
        MPI_SUCCESS
    }

    fn MPI_Errhandler_free / PMPI_Errhandler_free(handler: *mut Errhandler) -> c_int {
        // SAFETY: a handle pointer (caller contract).
        let h = unsafe { handler.as_ref().copied() }.unwrap_or(MPI_ERRHANDLER_NULL);
        if !crate::errhan::is_handler(h) {
            return error(MPI_COMM_WORLD, "MPI_Errhandler_free", MPI_ERR_ARG, "invalid error handler");
        }
        // A user handler stays (communicators that use it keep it); the
        // caller's handle is cleared.
        // SAFETY: as above.
        unsafe { put(handler, MPI_ERRHANDLER_NULL) };
        MPI_SUCCESS
    }

    fn MPI_Alloc_mem / PMPI_Alloc_mem(size: Aint, _info: c_int, base: *mut c_void) -> c_int {
        let Ok(n) = usize::try_from(size) else {
            return error(MPI_COMM_WORLD, "MPI_Alloc_mem", MPI_ERR_ARG, "negative size");
        };
        // SAFETY: plain allocation; freed by MPI_Free_mem.
        let p = unsafe { libc::malloc(n.max(1)) };
        if p.is_null() {
            return error(MPI_COMM_WORLD, "MPI_Alloc_mem", MPI_ERR_NO_MEM, "out of memory");
        }
        // SAFETY: `base` is a `void **` (the standard's contract).
        unsafe { put(base as *mut *mut c_void, p) };
        MPI_SUCCESS
    }

    fn MPI_Free_mem / PMPI_Free_mem(base: *mut c_void) -> c_int {
        // SAFETY: memory from MPI_Alloc_mem (caller contract).
        unsafe { libc::free(base) };
        MPI_SUCCESS
    }

    fn MPI_Get_address / PMPI_Get_address(location: *const c_void, address: *mut Aint) -> c_int {
        // SAFETY: an MPI_Aint pointer (caller contract).
        unsafe { put(address, location as Aint) };
        MPI_SUCCESS
    }

    fn MPI_Type_size / PMPI_Type_size(dt: Datatype, size: *mut c_int) -> c_int {
        match crate::types::info(dt) {
            Some(t) => {
                // SAFETY: an int pointer (caller contract).
                unsafe { put(size, t.size as c_int) };
                MPI_SUCCESS
            }
            None => error(MPI_COMM_WORLD, "MPI_Type_size", MPI_ERR_TYPE, "invalid datatype"),
        }
    }

    fn MPI_Type_get_extent / PMPI_Type_get_extent(dt: Datatype, lb: *mut Aint, extent: *mut Aint) -> c_int {
        match crate::types::layout(dt) {
            Some(t) => {
                // SAFETY: MPI_Aint pointers (caller contract).
                unsafe {
                    put(lb, t.lb as Aint);
                    put(extent, t.extent as Aint);
                }
                MPI_SUCCESS
            }
            None => error(MPI_COMM_WORLD, "MPI_Type_get_extent", MPI_ERR_TYPE, "invalid datatype"),
        }
    }

    fn MPI_Type_get_extent_x / PMPI_Type_get_extent_x(dt: Datatype, lb: *mut Count, extent: *mut Count) -> c_int {
        match crate::types::layout(dt) {
            Some(t) => {
                // SAFETY: MPI_Count pointers (caller contract).
                unsafe {
                    put(lb, t.lb as Count);
                    put(extent, t.extent as Count);
                }
                MPI_SUCCESS
            }
            None => error(MPI_COMM_WORLD, "MPI_Type_get_extent_x", MPI_ERR_TYPE, "invalid datatype"),
        }
    }

    fn MPI_Type_get_true_extent / PMPI_Type_get_true_extent(dt: Datatype, lb: *mut Aint, extent: *mut Aint) -> c_int {
        match true_extent(dt) {
            Some((l, e)) => {
                // SAFETY: MPI_Aint pointers (caller contract).
                unsafe {
                    put(lb, l as Aint);
                    put(extent, e as Aint);
                }
                MPI_SUCCESS
            }
            None => error(MPI_COMM_WORLD, "MPI_Type_get_true_extent", MPI_ERR_TYPE, "invalid datatype"),
        }
    }

    fn MPI_Type_get_true_extent_x / PMPI_Type_get_true_extent_x(dt: Datatype, lb: *mut Count, extent: *mut Count) -> c_int {
        match true_extent(dt) {
            Some((l, e)) => {
                // SAFETY: MPI_Count pointers (caller contract).
                unsafe {
                    put(lb, l as Count);
                    put(extent, e as Count);
                }
                MPI_SUCCESS
            }
            None => error(MPI_COMM_WORLD, "MPI_Type_get_true_extent_x", MPI_ERR_TYPE, "invalid datatype"),
        }
    }

    fn MPI_Type_size_x / PMPI_Type_size_x(dt: Datatype, size: *mut Count) -> c_int {
        match crate::types::info(dt) {
            Some(t) => {
                // SAFETY: an MPI_Count pointer (caller contract).
                unsafe { put(size, t.size as Count) };
                MPI_SUCCESS
            }
            None => error(MPI_COMM_WORLD, "MPI_Type_size_x", MPI_ERR_TYPE, "invalid datatype"),
        }
    }

    fn MPI_Type_contiguous / PMPI_Type_contiguous(count: c_int, old: Datatype, new: *mut Datatype) -> c_int {
        let rc = make_type("MPI_Type_contiguous", new, || {
            let o = old_type(old)?;
            blocks(&o, std::iter::once((Count::from(count), 0)))
        });
        crate::recipes::record(rc, new, || crate::recipes::Recipe { combiner: crate::recipes::MPI_COMBINER_CONTIGUOUS, ints: vec![count], addrs: vec![], types: vec![old] })
    }

    fn MPI_Type_vector / PMPI_Type_vector(count: c_int, blocklen: c_int, stride: c_int, old: Datatype, new: *mut Datatype) -> c_int {
        let rc = make_type("MPI_Type_vector", new, || {
            let o = old_type(old)?;
            strided(&o, count.into(), blocklen.into(), stride as isize * o.extent)
        });
        crate::recipes::record(rc, new, || crate::recipes::Recipe { combiner: crate::recipes::MPI_COMBINER_VECTOR, ints: vec![count, blocklen, stride], addrs: vec![], types: vec![old] })
    }

    fn MPI_Type_create_hvector / PMPI_Type_create_hvector(count: c_int, blocklen: c_int, stride: Aint, old: Datatype, new: *mut Datatype) -> c_int {
        let rc = make_type("MPI_Type_create_hvector", new, || {
            let o = old_type(old)?;
            strided(&o, count.into(), blocklen.into(), stride)
        });
        crate::recipes::record(rc, new, || crate::recipes::Recipe { combiner: crate::recipes::MPI_COMBINER_HVECTOR, ints: vec![count, blocklen], addrs: vec![stride], types: vec![old] })
    }

    fn MPI_Type_indexed / PMPI_Type_indexed(count: c_int, blocklens: *const c_int, displs: *const c_int, old: Datatype, new: *mut Datatype) -> c_int {
        let rc = make_type("MPI_Type_indexed", new, || {
            let o = old_type(old)?;
            let n = counted(count)?;
            // SAFETY: the arrays hold `count` ints (caller contract).
            let (lens, offs) = unsafe { (ints(blocklens, n)?, ints(displs, n)?) };
            blocks(&o, lens.iter().zip(offs).map(|(&l, &d)| (l.into(), d as isize * o.extent)))
        });
        crate::recipes::record(rc, new, || { let n = count as usize; let mut ints = vec![count]; ints.extend(copied(blocklens, n)); ints.extend(copied(displs, n)); crate::recipes::Recipe { combiner: crate::recipes::MPI_COMBINER_INDEXED, ints, addrs: vec![], types: vec![old] } })
    }

    fn MPI_Type_create_indexed_block / PMPI_Type_create_indexed_block(count: c_int, blocklen: c_int, displs: *const c_int, old: Datatype, new: *mut Datatype) -> c_int {
        let rc = make_type("MPI_Type_create_indexed_block", new, || {
            let o = old_type(old)?;
            // SAFETY: `displs` holds `count` ints (caller contract).
            let offs = unsafe { ints(displs, counted(count)?)? };
            blocks(&o, offs.iter().map(|&d| (blocklen.into(), d as isize * o.extent)))
        });
        crate::recipes::record(rc, new, || { let mut ints = vec![count, blocklen]; ints.extend(copied(displs, count as usize)); crate::recipes::Recipe { combiner: crate::recipes::MPI_COMBINER_INDEXED_BLOCK, ints, addrs: vec![], types: vec![old] } })
    }

    fn MPI_Type_create_hindexed / PMPI_Type_create_hindexed(count: c_int, blocklens: *const c_int, displs: *const Aint, old: Datatype, new: *mut Datatype) -> c_int {
        let rc = make_type("MPI_Type_create_hindexed", new, || {
            let o = old_type(old)?;
            let n = counted(count)?;
            // SAFETY: the arrays hold `count` entries (caller contract).
            let (lens, offs) = unsafe { (ints(blocklens, n)?, array(displs, n)?) };
            blocks(&o, lens.iter().zip(offs).map(|(&l, &d)| (l.into(), d)))
        });
        crate::recipes::record(rc, new, || { let n = count as usize; let mut ints = vec![count]; ints.extend(copied(blocklens, n)); crate::recipes::Recipe { combiner: crate::recipes::MPI_COMBINER_HINDEXED, ints, addrs: copied(displs, n), types: vec![old] } })
    }

    fn MPI_Type_create_hindexed_block / PMPI_Type_create_hindexed_block(count: c_int, blocklen: c_int, displs: *const Aint, old: Datatype, new: *mut Datatype) -> c_int {
        let rc = make_type("MPI_Type_create_hindexed_block", new, || {
            let o = old_type(old)?;
            // SAFETY: `displs` holds `count` entries (caller contract).
            let offs = unsafe { array(displs, counted(count)?)? };
            blocks(&o, offs.iter().map(|&d| (blocklen.into(), d)))
        });
        crate::recipes::record(rc, new, || crate::recipes::Recipe { combiner: crate::recipes::MPI_COMBINER_HINDEXED_BLOCK, ints: vec![count, blocklen], addrs: copied(displs, count as usize), types: vec![old] })
    }

    fn MPI_Type_dup / PMPI_Type_dup(old: Datatype, new: *mut Datatype) -> c_int {
        // A copy of the layout (a predefined type becomes a derived one
        // with the same layout), and of the attributes the keyvals' copy
        // functions copy.
        let rc = make_type("MPI_Type_dup", new, || old_type(old));
        let rc = crate::recipes::record(rc, new, || crate::recipes::Recipe { combiner: crate::recipes::MPI_COMBINER_DUP, ints: vec![], addrs: vec![], types: vec![old] });
        if rc != MPI_SUCCESS {
            return rc;
        }
        // SAFETY: written just above (caller contract).
        let nh = unsafe { *new };
        match crate::attr::copy_all(crate::attr::Object::Type, old, nh) {
            MPI_SUCCESS => MPI_SUCCESS,
            rc => error(MPI_COMM_WORLD, "MPI_Type_dup", rc, "an attribute's copy function failed"),
        }
    }

    fn MPI_Type_create_struct / PMPI_Type_create_struct(count: c_int, blocklens: *const c_int, displs: *const Aint, types: *const Datatype, new: *mut Datatype) -> c_int {
        let rc = make_type("MPI_Type_create_struct", new, || {
            let n = counted(count)?;
            // SAFETY: the arrays hold `count` entries (caller contract).
            let (lens, offs, tys) = unsafe { (ints(blocklens, n)?, array(displs, n)?, ints(types, n)?) };
            structure(lens.iter().zip(offs).zip(tys).map(|((&l, &d), &t)| (l.into(), d, t)))
        });
        crate::recipes::record(rc, new, || { let n = count as usize; let mut ints = vec![count]; ints.extend(copied(blocklens, n)); crate::recipes::Recipe { combiner: crate::recipes::MPI_COMBINER_STRUCT, ints, addrs: copied(displs, n), types: copied(types, n) } })
    }

    fn MPI_Type_create_resized / PMPI_Type_create_resized(old: Datatype, lb: Aint, extent: Aint, new: *mut Datatype) -> c_int {
        let rc = make_type("MPI_Type_create_resized", new, || {
            let mut o = old_type(old)?;
            o.lb = lb;
            o.extent = extent;
            o.bounds = (crate::state::Bound::Marker, crate::state::Bound::Marker);
            Ok(o)
        });
        crate::recipes::record(rc, new, || crate::recipes::Recipe { combiner: crate::recipes::MPI_COMBINER_RESIZED, ints: vec![], addrs: vec![lb, extent], types: vec![old] })
    }

    fn MPI_Type_commit / PMPI_Type_commit(dt: *mut Datatype) -> c_int {
        // SAFETY: a handle pointer (caller contract).
        let h = unsafe { dt.as_ref().copied() }.unwrap_or(MPI_DATATYPE_NULL);
        match crate::types::info(h) {
            Some(_) => MPI_SUCCESS,
            None => error(MPI_COMM_WORLD, "MPI_Type_commit", MPI_ERR_TYPE, "invalid datatype"),
        }
    }

    fn MPI_Type_free / PMPI_Type_free(dt: *mut Datatype) -> c_int {
        // SAFETY: a handle pointer (caller contract).
        let h = unsafe { dt.as_ref().copied() }.unwrap_or(MPI_DATATYPE_NULL);
        // The attributes go when the program frees the type, even if a
        // recipe still refers to it (a get_contents result is the same
        // handle: freeing it deletes them too).
        if slot_of(h, USER_TYPE_KIND).is_some() {
            let rc = crate::attr::delete_all(crate::attr::Object::Type, h);
            if rc != MPI_SUCCESS {
                return error(MPI_COMM_WORLD, "MPI_Type_free", rc, "an attribute's delete function failed");
            }
        }
        // (A type another type's recipe or MPI_Type_get_contents still
        // refers to lives on until its last reference goes.)
        let freed = STATE.with(|s| crate::recipes::unref(&mut s.borrow_mut(), h));
        if !freed {
            return error(MPI_COMM_WORLD, "MPI_Type_free", MPI_ERR_TYPE, "not a derived datatype");
        }
        // SAFETY: as above.
        unsafe { put(dt, MPI_DATATYPE_NULL) };
        MPI_SUCCESS
    }

    fn MPI_Op_create / PMPI_Op_create(f: Option<UserFn>, commute: c_int, op: *mut Op) -> c_int {
        let Some(f) = f else {
            return error(MPI_COMM_WORLD, "MPI_Op_create", MPI_ERR_ARG, "null function");
        };
        let i = STATE.with(|s| insert(&mut s.borrow_mut().ops, 0, (crate::state::UserFunction::Int(f), commute != 0)));
        // SAFETY: a handle pointer (caller contract).
        unsafe { put(op, handle_of(USER_OP_KIND, i)) };
        MPI_SUCCESS
    }

    fn MPI_Op_commutative / PMPI_Op_commutative(op: Op, commute: *mut c_int) -> c_int {
        // Every predefined operation commutes.
        let c = match slot_of(op, USER_OP_KIND) {
            Some(i) => match STATE.with(|s| s.borrow().ops.get(i).copied().flatten()) {
                Some((_, c)) => c,
                None => return error(MPI_COMM_WORLD, "MPI_Op_commutative", MPI_ERR_OP, "invalid operation"),
            },
            None if (MPI_MAX..=MPI_NO_OP).contains(&op) => true,
            None => return error(MPI_COMM_WORLD, "MPI_Op_commutative", MPI_ERR_OP, "invalid operation"),
        };
        // SAFETY: an int pointer (caller contract).
        unsafe { put(commute, c_int::from(c)) };
        MPI_SUCCESS
    }

    fn MPI_Reduce_local / PMPI_Reduce_local(inbuf: *const c_void, inoutbuf: *mut c_void, count: c_int, dt: Datatype, op: Op) -> c_int {
        let func = "MPI_Reduce_local";
        let r = (|| {
            let op = crate::types::CombineOp::new(op, dt).map_err(|(c, w)| (c, w.to_string()))?;
            // SAFETY: both buffers hold `count` elements of `dt` (caller contract).
            let (mut a, mut b) = unsafe {
                (
                    crate::types::Message::new(inbuf, count, dt, true).map_err(|(c, w)| (c, w.to_string()))?,
                    crate::types::Message::new(inoutbuf, count, dt, true).map_err(|(c, w)| (c, w.to_string()))?,
                )
            };
            let input = a.read_only().to_vec();
            let inout = b.bytes().to_vec();
            let n = usize::try_from(count).unwrap_or(0);
            crate::types::fold_packed(op, dt, dt, n, &[&input, &inout], b.bytes())?;
            b.finish(None);
            Ok(())
        })();
        match r {
            Ok(()) => MPI_SUCCESS,
            Err((code, why)) => error(MPI_COMM_WORLD, func, code, &why),
        }
    }

    fn MPI_Op_free / PMPI_Op_free(op: *mut Op) -> c_int {
        // SAFETY: a handle pointer (caller contract).
        let h = unsafe { op.as_ref().copied() }.unwrap_or(MPI_OP_NULL);
        if !STATE.with(|s| release(&mut s.borrow_mut().ops, h, USER_OP_KIND)) {
            return error(MPI_COMM_WORLD, "MPI_Op_free", MPI_ERR_OP, "not a user operation");
        }
        // SAFETY: as above.
        unsafe { put(op, MPI_OP_NULL) };
        MPI_SUCCESS
    }
}

/// The true lower bound and extent of `dt`: where its bytes start and how
/// far they reach, whatever its bounds say.
fn true_extent(dt: Datatype) -> Option<(isize, isize)> {
    let t = crate::types::layout(dt)?;
    let lo = t.blocks.iter().map(|b| b.0).min().unwrap_or(0);
    let hi = t
        .blocks
        .iter()
        .map(|b| b.0 + b.1 as isize)
        .max()
        .unwrap_or(0);
    Some((lo, hi - lo))
}

/// Register the datatype `f` builds and store its handle in `*new`.
pub(crate) fn make_type(
    func: &str,
    new: *mut Datatype,
    f: impl FnOnce() -> Result<DerivedType, &'static str>,
) -> c_int {
    match f() {
        Ok(d) => {
            let i = STATE.with(|s| insert(&mut s.borrow_mut().types, 0, d));
            // SAFETY: a handle pointer (caller contract).
            unsafe { put(new, handle_of(USER_TYPE_KIND, i)) };
            MPI_SUCCESS
        }
        Err(why) => error(MPI_COMM_WORLD, func, MPI_ERR_TYPE, why),
    }
}

/// A copy of the `n` entries at `p` (nothing if `p` is null): a
/// constructor's arguments, read again for its recipe once it succeeded.
pub(crate) fn copied<T: Copy>(p: *const T, n: usize) -> Vec<T> {
    if p.is_null() || n == 0 {
        return Vec::new();
    }
    // SAFETY: the constructor read the same `n` entries (caller contract).
    unsafe { std::slice::from_raw_parts(p, n) }.to_vec()
}

pub(crate) fn old_type(dt: Datatype) -> Result<DerivedType, &'static str> {
    crate::types::layout(dt).ok_or("invalid datatype")
}

pub(crate) fn counted(n: c_int) -> Result<usize, &'static str> {
    usize::try_from(n).map_err(|_| "negative count")
}

/// Blocks of elements of `o`: (how many, at which byte offset), in
/// type-map order.
pub(crate) fn blocks(
    o: &DerivedType,
    runs: impl Iterator<Item = (Count, isize)>,
) -> Result<DerivedType, &'static str> {
    let mut b = Builder::default();
    for (n, at) in runs {
        b.place_run(o, at, usize::try_from(n).map_err(|_| "negative count")?);
    }
    Ok(b.build(false))
}

/// `count` blocks of `blocklen` elements of `o`, `stride` bytes apart.
pub(crate) fn strided(
    o: &DerivedType,
    count: Count,
    blocklen: Count,
    stride: isize,
) -> Result<DerivedType, &'static str> {
    let count = usize::try_from(count).map_err(|_| "negative count")?;
    blocks(o, (0..count).map(|i| (blocklen, i as isize * stride)))
}

/// A struct: (how many, at which byte offset, of which type) per block,
/// its extent padded as C pads a struct.
pub(crate) fn structure(
    parts: impl Iterator<Item = (Count, isize, Datatype)>,
) -> Result<DerivedType, &'static str> {
    let mut b = Builder::default();
    for (n, at, t) in parts {
        let o = old_type(t)?;
        b.place_run(&o, at, usize::try_from(n).map_err(|_| "negative count")?);
    }
    Ok(b.build(true))
}

/// `n` ints of a C array.
///
/// # Safety
/// `p` holds `n` ints, or `n` is 0.
pub(crate) unsafe fn ints<'a>(p: *const c_int, n: usize) -> Result<&'a [c_int], &'static str> {
    // SAFETY: caller contract.
    unsafe { array(p, n) }
}

/// `n` entries of a C array.
///
/// # Safety
/// `p` holds `n` entries, or `n` is 0.
unsafe fn array<'a, T>(p: *const T, n: usize) -> Result<&'a [T], &'static str> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err("null array");
    }
    // SAFETY: caller contract.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// This host's name.
pub(crate) fn hostname() -> String {
    let mut buf = [0u8; MPI_MAX_PROCESSOR_NAME];
    // SAFETY: gethostname writes at most buf.len() - 1 bytes.
    unsafe { libc::gethostname(buf.as_mut_ptr() as *mut c_char, buf.len() - 1) };
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len() - 1);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The name a program gives an object (`MPI_Comm_set_name`,
/// `MPI_Type_set_name`, `MPI_Win_set_name`), cut to
/// `MPI_MAX_OBJECT_NAME - 1` bytes at a character boundary, as MPICH cuts
/// names; `None` for a null pointer.
///
/// # Safety
/// `p` is null or a NUL-terminated string.
pub(crate) unsafe fn object_name(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: caller contract.
    let mut name = unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned();
    let mut end = name.len().min(MPI_MAX_OBJECT_NAME - 1);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name.truncate(end);
    Some(name)
}

/// Copy `text` into a C string of at most `max` chars (with its NUL) and
/// its length into `len`.
///
/// # Safety
/// `out` holds `max` chars; `len` is an int pointer.
pub(crate) unsafe fn copy_string(text: &str, out: *mut c_char, len: *mut c_int, max: usize) {
    let n = text.len().min(max - 1);
    if !out.is_null() {
        // SAFETY: caller contract.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr() as *const c_char, out, n);
            *out.add(n) = 0;
        }
    }
    // SAFETY: caller contract.
    unsafe { put(len, n as c_int) };
}

/// `MPI_Aint_add`: `base + disp` as an address.
#[unsafe(no_mangle)]
pub extern "C" fn MPI_Aint_add(base: Aint, disp: Aint) -> Aint {
    base.wrapping_add(disp)
}

/// Profiling entry point of `MPI_Aint_add`.
#[unsafe(no_mangle)]
pub extern "C" fn PMPI_Aint_add(base: Aint, disp: Aint) -> Aint {
    MPI_Aint_add(base, disp)
}

/// `MPI_Aint_diff`: `a - b` between two addresses.
#[unsafe(no_mangle)]
pub extern "C" fn MPI_Aint_diff(a: Aint, b: Aint) -> Aint {
    a.wrapping_sub(b)
}

/// Profiling entry point of `MPI_Aint_diff`.
#[unsafe(no_mangle)]
pub extern "C" fn PMPI_Aint_diff(a: Aint, b: Aint) -> Aint {
    MPI_Aint_diff(a, b)
}

/// `MPI_Wtime`: seconds since an arbitrary point.
#[unsafe(no_mangle)]
pub extern "C" fn MPI_Wtime() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Profiling entry point of `MPI_Wtime`.
#[unsafe(no_mangle)]
pub extern "C" fn PMPI_Wtime() -> f64 {
    MPI_Wtime()
}

/// `MPI_Wtick`: resolution of `MPI_Wtime`.
#[unsafe(no_mangle)]
pub extern "C" fn MPI_Wtick() -> f64 {
    1e-9
}

/// Profiling entry point of `MPI_Wtick`.
#[unsafe(no_mangle)]
pub extern "C" fn PMPI_Wtick() -> f64 {
    MPI_Wtick()
}
