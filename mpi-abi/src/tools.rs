//! `MPI_T`, the tool information interface.
//!
//! vpml exposes its engine's and protocol's counters as performance
//! variables — messages and bytes sent, messages received, sleeps on the
//! doorbell, non-deterministic events logged — all of class
//! `MPI_T_PVAR_CLASS_COUNTER`, `MPI_UNSIGNED_LONG_LONG`, bound to no
//! object, read-only and continuous (always counting: they cannot be
//! started, stopped, written or reset), in one category, `vpml`. They
//! count since the process started (0 before `MPI_Init`). There are no
//! control variables, enumerations, events or event sources: calls that
//! name one get `MPI_T_ERR_INVALID_INDEX` or `MPI_T_ERR_INVALID_HANDLE`,
//! as for an index past the counts.
//!
//! Sessions and handles are boxes whose addresses the program holds;
//! each is checked against the live ones before use, so a stale or forged
//! handle is an error, not a dereference.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::consts::*;
use crate::state::put;

/// `MPI_T_ERR_*` (MPICH's values).
const MPI_T_ERR_NOT_INITIALIZED: c_int = 60;
const MPI_T_ERR_INVALID_INDEX: c_int = 62;
const MPI_T_ERR_INVALID_HANDLE: c_int = 64;
const MPI_T_ERR_INVALID_SESSION: c_int = 67;
const MPI_T_ERR_PVAR_NO_STARTSTOP: c_int = 70;
const MPI_T_ERR_PVAR_NO_WRITE: c_int = 71;
const MPI_T_ERR_INVALID_NAME: c_int = 73;
const MPI_T_ERR_INVALID: c_int = 74;
/// `MPI_T_VERBOSITY_USER_BASIC`, `MPI_T_BIND_NO_OBJECT`,
/// `MPI_T_PVAR_CLASS_COUNTER` (MPICH's values).
const MPI_T_VERBOSITY_USER_BASIC: c_int = 221;
const MPI_T_BIND_NO_OBJECT: c_int = 9700;
const MPI_T_PVAR_CLASS_COUNTER: c_int = 246;

/// `MPI_T_init_thread` calls not yet matched by `MPI_T_finalize`.
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// Is the interface initialized?
fn open() -> bool {
    OPEN.load(Ordering::Acquire) > 0
}

/// A performance variable.
struct Pvar {
    name: &'static str,
    desc: &'static str,
    read: fn(&vpml::Comm) -> u64,
}

/// vpml's performance variables, by index.
const PVARS: [Pvar; 6] = [
    Pvar {
        name: "vpml_messages_sent",
        desc: "Application messages this process sent",
        read: |c| c.stats().messages_sent,
    },
    Pvar {
        name: "vpml_bytes_sent",
        desc: "Application payload bytes this process sent",
        read: |c| c.stats().bytes_sent,
    },
    Pvar {
        name: "vpml_messages_received",
        desc: "Application messages this process received",
        read: |c| c.stats().messages_received,
    },
    Pvar {
        name: "vpml_receives_complete_at_start",
        desc: "Receives that took their message straight off the ring when they started (it already waited), complete at once",
        read: |c| c.stats().received_at_start,
    },
    Pvar {
        name: "vpml_doorbell_sleeps",
        desc: "Times this process slept waiting for a message",
        read: |c| c.stats().sleeps,
    },
    Pvar {
        name: "vpml_events_logged",
        desc: "Non-deterministic events the fault-tolerance protocol logged (0 without one)",
        read: |c| c.events_logged(),
    },
];

/// The one category, holding every performance variable.
const CATEGORY: (&str, &str) = ("vpml", "vpml's engine and protocol counters");

/// The address `MPI_T_PVAR_ALL_HANDLES` holds.
static ALL_HANDLES_TARGET: u8 = 0;

/// A handle that points at a static (for the data symbols of MPICH's ABI).
#[repr(transparent)]
pub struct HandleSentinel(*const u8);
// SAFETY: an address that is never written through.
unsafe impl Sync for HandleSentinel {}

/// MPICH's `MPI_T_PVAR_ALL_HANDLES`: every handle of a session.
#[unsafe(no_mangle)]
pub static MPI_T_PVAR_ALL_HANDLES: HandleSentinel = HandleSentinel(&ALL_HANDLES_TARGET);

/// A performance-variable handle: its session and variable.
struct Handle {
    session: usize,
    index: usize,
}

/// Live sessions and handles, by the address the program holds.
struct Live {
    sessions: Vec<usize>,
    handles: Vec<usize>,
}

static LIVE: Mutex<Live> = Mutex::new(Live {
    sessions: Vec::new(),
    handles: Vec::new(),
});

fn live() -> std::sync::MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The handle at `h` of session `session`, if it is a live one.
fn handle(session: *const c_void, h: *const c_void) -> Result<&'static Handle, c_int> {
    let l = live();
    if !l.sessions.contains(&(session as usize)) {
        return Err(MPI_T_ERR_INVALID_SESSION);
    }
    if !l.handles.contains(&(h as usize)) {
        return Err(MPI_T_ERR_INVALID_HANDLE);
    }
    // SAFETY: a live handle is a leaked `Box<Handle>` (freed only by
    // `MPI_T_pvar_handle_free`/`session_free`, which drop it from LIVE).
    let h = unsafe { &*(h as *const Handle) };
    if h.session != session as usize {
        return Err(MPI_T_ERR_INVALID_HANDLE);
    }
    Ok(h)
}

/// `MPI_T_PVAR_ALL_HANDLES`?
fn all_handles(h: *const c_void) -> bool {
    h == (&raw const ALL_HANDLES_TARGET).cast()
}

/// Write `text` as MPI_T returns strings: `*len` is the buffer's size on
/// input (0, or a null buffer: only the length is asked) and the length
/// written, its NUL included, on output.
///
/// # Safety
/// `buf` holds `*len` bytes, or is null; `len` is null or an int pointer.
unsafe fn put_text(text: &str, buf: *mut c_char, len: *mut c_int) {
    // SAFETY: caller contract.
    let Some(cap) = (unsafe { len.as_ref().copied() }) else {
        return;
    };
    let whole = c_int::try_from(text.len() + 1).unwrap_or(c_int::MAX);
    if buf.is_null() || cap <= 0 {
        // SAFETY: caller contract.
        unsafe { put(len, whole) };
        return;
    }
    let n = text.len().min(cap as usize - 1);
    // SAFETY: `buf` holds `cap` > n bytes (caller contract).
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
        put(len, n as c_int + 1);
    }
}

/// Write `v` if `p` is not null.
///
/// # Safety
/// `p` is null or a valid pointer.
unsafe fn put_opt<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: caller contract.
        unsafe { put(p, v) };
    }
}

/// A count of zero or `n`, once initialized.
///
/// # Safety
/// `out` is an int pointer.
unsafe fn count(out: *mut c_int, n: usize) -> c_int {
    if !open() {
        return MPI_T_ERR_NOT_INITIALIZED;
    }
    // SAFETY: caller contract.
    unsafe { put(out, n as c_int) };
    MPI_SUCCESS
}

/// The name `name` points to.
///
/// # Safety
/// `name` is null or a C string.
unsafe fn name_of<'a>(name: *const c_char) -> Option<&'a str> {
    // SAFETY: caller contract.
    (!name.is_null())
        .then(|| unsafe { CStr::from_ptr(name) }.to_str().ok())
        .flatten()
}

/// The error of a call that names a control variable, an enumeration, an
/// event or a source (there are none): `code` once initialized.
fn none_such(code: c_int) -> c_int {
    if open() {
        code
    } else {
        MPI_T_ERR_NOT_INITIALIZED
    }
}

export! {
    any_thread:

    fn MPI_T_init_thread / PMPI_T_init_thread(required: c_int, provided: *mut c_int) -> c_int {
        OPEN.fetch_add(1, Ordering::AcqRel);
        // SAFETY: an int pointer (caller contract).
        unsafe { put(provided, required.clamp(MPI_THREAD_SINGLE, MPI_THREAD_MULTIPLE)) };
        MPI_SUCCESS
    }

    fn MPI_T_finalize / PMPI_T_finalize() -> c_int {
        match OPEN.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)) {
            Ok(_) => MPI_SUCCESS,
            Err(_) => MPI_T_ERR_NOT_INITIALIZED,
        }
    }

    fn MPI_T_cvar_get_num / PMPI_T_cvar_get_num(n: *mut c_int) -> c_int {
        // SAFETY: an int pointer (caller contract).
        unsafe { count(n, 0) }
    }

    fn MPI_T_pvar_get_num / PMPI_T_pvar_get_num(n: *mut c_int) -> c_int {
        // SAFETY: an int pointer (caller contract).
        unsafe { count(n, PVARS.len()) }
    }

    fn MPI_T_category_get_num / PMPI_T_category_get_num(n: *mut c_int) -> c_int {
        // SAFETY: an int pointer (caller contract).
        unsafe { count(n, 1) }
    }

    fn MPI_T_event_get_num / PMPI_T_event_get_num(n: *mut c_int) -> c_int {
        // SAFETY: an int pointer (caller contract).
        unsafe { count(n, 0) }
    }

    fn MPI_T_source_get_num / PMPI_T_source_get_num(n: *mut c_int) -> c_int {
        // SAFETY: an int pointer (caller contract).
        unsafe { count(n, 0) }
    }

    fn MPI_T_pvar_get_info / PMPI_T_pvar_get_info(index: c_int, name: *mut c_char, name_len: *mut c_int, verbosity: *mut c_int, class: *mut c_int, datatype: *mut Datatype, enumtype: *mut *const c_void, desc: *mut c_char, desc_len: *mut c_int, bind: *mut c_int, readonly: *mut c_int, continuous: *mut c_int, atomic: *mut c_int) -> c_int {
        if !open() {
            return MPI_T_ERR_NOT_INITIALIZED;
        }
        let Some(v) = usize::try_from(index).ok().and_then(|i| PVARS.get(i)) else {
            return MPI_T_ERR_INVALID_INDEX;
        };
        // SAFETY: the caller's buffers and pointers (each may be null).
        unsafe {
            put_text(v.name, name, name_len);
            put_text(v.desc, desc, desc_len);
            put_opt(verbosity, MPI_T_VERBOSITY_USER_BASIC);
            put_opt(class, MPI_T_PVAR_CLASS_COUNTER);
            put_opt(datatype, MPI_UNSIGNED_LONG_LONG);
            put_opt(enumtype, std::ptr::null());
            put_opt(bind, MPI_T_BIND_NO_OBJECT);
            put_opt(readonly, 1);
            put_opt(continuous, 1);
            put_opt(atomic, 0);
        }
        MPI_SUCCESS
    }

    fn MPI_T_pvar_get_index / PMPI_T_pvar_get_index(name: *const c_char, class: c_int, index: *mut c_int) -> c_int {
        if !open() {
            return MPI_T_ERR_NOT_INITIALIZED;
        }
        // SAFETY: a C string (caller contract).
        let found = unsafe { name_of(name) }.and_then(|n| PVARS.iter().position(|v| v.name == n));
        match found {
            Some(i) if class == MPI_T_PVAR_CLASS_COUNTER => {
                // SAFETY: an int pointer (caller contract).
                unsafe { put(index, i as c_int) };
                MPI_SUCCESS
            }
            _ => MPI_T_ERR_INVALID_NAME,
        }
    }

    fn MPI_T_category_get_info / PMPI_T_category_get_info(index: c_int, name: *mut c_char, name_len: *mut c_int, desc: *mut c_char, desc_len: *mut c_int, num_cvars: *mut c_int, num_pvars: *mut c_int, num_categories: *mut c_int) -> c_int {
        if !open() {
            return MPI_T_ERR_NOT_INITIALIZED;
        }
        if index != 0 {
            return MPI_T_ERR_INVALID_INDEX;
        }
        // SAFETY: the caller's buffers and pointers (each may be null).
        unsafe {
            put_text(CATEGORY.0, name, name_len);
            put_text(CATEGORY.1, desc, desc_len);
            put_opt(num_cvars, 0);
            put_opt(num_pvars, PVARS.len() as c_int);
            put_opt(num_categories, 0);
        }
        MPI_SUCCESS
    }

    fn MPI_T_category_get_index / PMPI_T_category_get_index(name: *const c_char, index: *mut c_int) -> c_int {
        if !open() {
            return MPI_T_ERR_NOT_INITIALIZED;
        }
        // SAFETY: a C string (caller contract).
        if unsafe { name_of(name) } != Some(CATEGORY.0) {
            return MPI_T_ERR_INVALID_NAME;
        }
        // SAFETY: an int pointer (caller contract).
        unsafe { put(index, 0) };
        MPI_SUCCESS
    }

    fn MPI_T_category_get_pvars / PMPI_T_category_get_pvars(index: c_int, len: c_int, indices: *mut c_int) -> c_int {
        if !open() {
            return MPI_T_ERR_NOT_INITIALIZED;
        }
        if index != 0 {
            return MPI_T_ERR_INVALID_INDEX;
        }
        let n = usize::try_from(len).unwrap_or(0).min(PVARS.len());
        for i in 0..n {
            // SAFETY: `indices` holds `len` ints (caller contract).
            unsafe { put(indices.add(i), i as c_int) };
        }
        MPI_SUCCESS
    }

    fn MPI_T_category_get_cvars / PMPI_T_category_get_cvars(index: c_int, _len: c_int, _indices: *mut c_int) -> c_int {
        // The category holds none (nothing written).
        if !open() { MPI_T_ERR_NOT_INITIALIZED } else if index == 0 { MPI_SUCCESS } else { MPI_T_ERR_INVALID_INDEX }
    }

    fn MPI_T_category_get_categories / PMPI_T_category_get_categories(index: c_int, _len: c_int, _indices: *mut c_int) -> c_int {
        if !open() { MPI_T_ERR_NOT_INITIALIZED } else if index == 0 { MPI_SUCCESS } else { MPI_T_ERR_INVALID_INDEX }
    }

    fn MPI_T_category_get_events / PMPI_T_category_get_events(index: c_int, _len: c_int, _indices: *mut c_int) -> c_int {
        if !open() { MPI_T_ERR_NOT_INITIALIZED } else if index == 0 { MPI_SUCCESS } else { MPI_T_ERR_INVALID_INDEX }
    }

    fn MPI_T_category_get_num_events / PMPI_T_category_get_num_events(index: c_int, n: *mut c_int) -> c_int {
        if !open() {
            return MPI_T_ERR_NOT_INITIALIZED;
        }
        if index != 0 {
            return MPI_T_ERR_INVALID_INDEX;
        }
        // SAFETY: an int pointer (caller contract).
        unsafe { put(n, 0) };
        MPI_SUCCESS
    }

    fn MPI_T_category_changed / PMPI_T_category_changed(stamp: *mut c_int) -> c_int {
        // SAFETY: an int pointer (caller contract). The categories never
        // change.
        unsafe { count(stamp, 0) }
    }

    fn MPI_T_pvar_session_create / PMPI_T_pvar_session_create(session: *mut *const c_void) -> c_int {
        if !open() {
            return MPI_T_ERR_NOT_INITIALIZED;
        }
        let s = Box::into_raw(Box::new(0u8)) as usize;
        live().sessions.push(s);
        // SAFETY: a handle pointer (caller contract).
        unsafe { put(session, s as *const c_void) };
        MPI_SUCCESS
    }

    fn MPI_T_pvar_session_free / PMPI_T_pvar_session_free(session: *mut *const c_void) -> c_int {
        if !open() {
            return MPI_T_ERR_NOT_INITIALIZED;
        }
        // SAFETY: a handle pointer (caller contract).
        let Some(s) = (unsafe { session.as_ref().copied() }) else {
            return MPI_T_ERR_INVALID_SESSION;
        };
        let mut l = live();
        let Some(at) = l.sessions.iter().position(|&x| x == s as usize) else {
            return MPI_T_ERR_INVALID_SESSION;
        };
        l.sessions.swap_remove(at);
        // Its handles go with it.
        l.handles.retain(|&h| {
            // SAFETY: a live handle is a leaked `Box<Handle>`.
            let mine = unsafe { &*(h as *const Handle) }.session == s as usize;
            if mine {
                // SAFETY: as above; dropped from LIVE here, never used again.
                drop(unsafe { Box::from_raw(h as *mut Handle) });
            }
            !mine
        });
        // SAFETY: a live session is a leaked `Box<u8>`, now dropped from LIVE.
        drop(unsafe { Box::from_raw(s as *mut u8) });
        // SAFETY: as above.
        unsafe { put(session, std::ptr::null()) };
        MPI_SUCCESS
    }

    fn MPI_T_pvar_handle_alloc / PMPI_T_pvar_handle_alloc(session: *const c_void, index: c_int, _object: *mut c_void, handle: *mut *const c_void, count: *mut c_int) -> c_int {
        if !open() {
            return MPI_T_ERR_NOT_INITIALIZED;
        }
        let Some(index) = usize::try_from(index).ok().filter(|&i| i < PVARS.len()) else {
            return MPI_T_ERR_INVALID_INDEX;
        };
        let mut l = live();
        if !l.sessions.contains(&(session as usize)) {
            return MPI_T_ERR_INVALID_SESSION;
        }
        let h = Box::into_raw(Box::new(Handle { session: session as usize, index })) as usize;
        l.handles.push(h);
        // SAFETY: a handle pointer and an int pointer (caller contract).
        unsafe {
            put(handle, h as *const c_void);
            put(count, 1);
        }
        MPI_SUCCESS
    }

    fn MPI_T_pvar_handle_free / PMPI_T_pvar_handle_free(session: *const c_void, handle: *mut *const c_void) -> c_int {
        if !open() {
            return MPI_T_ERR_NOT_INITIALIZED;
        }
        // SAFETY: a handle pointer (caller contract).
        let Some(h) = (unsafe { handle.as_ref().copied() }) else {
            return MPI_T_ERR_INVALID_HANDLE;
        };
        if let Err(code) = self::handle(session, h) {
            return code;
        }
        live().handles.retain(|&x| x != h as usize);
        // SAFETY: a live handle is a leaked `Box<Handle>`, now dropped
        // from LIVE.
        drop(unsafe { Box::from_raw(h as *mut Handle) });
        // SAFETY: as above.
        unsafe { put(handle, std::ptr::null()) };
        MPI_SUCCESS
    }

    fn MPI_T_pvar_start / PMPI_T_pvar_start(session: *const c_void, handle: *const c_void) -> c_int {
        // Continuous variables: nothing to start (every handle is one).
        match () {
            _ if !open() => MPI_T_ERR_NOT_INITIALIZED,
            _ if all_handles(handle) => MPI_SUCCESS,
            _ => self::handle(session, handle).map_or_else(|code| code, |_| MPI_T_ERR_PVAR_NO_STARTSTOP),
        }
    }

    fn MPI_T_pvar_stop / PMPI_T_pvar_stop(session: *const c_void, handle: *const c_void) -> c_int {
        match () {
            _ if !open() => MPI_T_ERR_NOT_INITIALIZED,
            _ if all_handles(handle) => MPI_SUCCESS,
            _ => self::handle(session, handle).map_or_else(|code| code, |_| MPI_T_ERR_PVAR_NO_STARTSTOP),
        }
    }

    fn MPI_T_pvar_reset / PMPI_T_pvar_reset(session: *const c_void, handle: *const c_void) -> c_int {
        // Read-only variables: nothing to reset.
        match () {
            _ if !open() => MPI_T_ERR_NOT_INITIALIZED,
            _ if all_handles(handle) => MPI_SUCCESS,
            _ => self::handle(session, handle).map_or_else(|code| code, |_| MPI_T_ERR_PVAR_NO_WRITE),
        }
    }

    fn MPI_T_pvar_write / PMPI_T_pvar_write(session: *const c_void, handle: *const c_void, _buf: *const c_void) -> c_int {
        match () {
            _ if !open() => MPI_T_ERR_NOT_INITIALIZED,
            _ => self::handle(session, handle).map_or_else(|code| code, |_| MPI_T_ERR_PVAR_NO_WRITE),
        }
    }

    fn MPI_T_pvar_readreset / PMPI_T_pvar_readreset(session: *const c_void, handle: *const c_void, _buf: *mut c_void) -> c_int {
        match () {
            _ if !open() => MPI_T_ERR_NOT_INITIALIZED,
            _ => self::handle(session, handle).map_or_else(|code| code, |_| MPI_T_ERR_PVAR_NO_WRITE),
        }
    }

    fn MPI_T_cvar_get_index / PMPI_T_cvar_get_index(_name: *const c_char, _index: *mut c_int) -> c_int {
        none_such(MPI_T_ERR_INVALID_NAME)
    }

    fn MPI_T_cvar_get_info / PMPI_T_cvar_get_info(_index: c_int, _name: *mut c_char, _name_len: *mut c_int, _verbosity: *mut c_int, _datatype: *mut Datatype, _enumtype: *mut *const c_void, _desc: *mut c_char, _desc_len: *mut c_int, _bind: *mut c_int, _scope: *mut c_int) -> c_int {
        none_such(MPI_T_ERR_INVALID_INDEX)
    }

    fn MPI_T_cvar_handle_alloc / PMPI_T_cvar_handle_alloc(_index: c_int, _object: *mut c_void, _handle: *mut *const c_void, _count: *mut c_int) -> c_int {
        none_such(MPI_T_ERR_INVALID_INDEX)
    }

    fn MPI_T_cvar_handle_free / PMPI_T_cvar_handle_free(_handle: *mut *const c_void) -> c_int {
        none_such(MPI_T_ERR_INVALID_HANDLE)
    }

    fn MPI_T_cvar_read / PMPI_T_cvar_read(_handle: *const c_void, _buf: *mut c_void) -> c_int {
        none_such(MPI_T_ERR_INVALID_HANDLE)
    }

    fn MPI_T_cvar_write / PMPI_T_cvar_write(_handle: *const c_void, _buf: *const c_void) -> c_int {
        none_such(MPI_T_ERR_INVALID_HANDLE)
    }

    fn MPI_T_enum_get_info / PMPI_T_enum_get_info(_enumtype: *const c_void, _num: *mut c_int, _name: *mut c_char, _name_len: *mut c_int) -> c_int {
        none_such(MPI_T_ERR_INVALID_HANDLE)
    }

    fn MPI_T_enum_get_item / PMPI_T_enum_get_item(_enumtype: *const c_void, _index: c_int, _value: *mut c_int, _name: *mut c_char, _name_len: *mut c_int) -> c_int {
        none_such(MPI_T_ERR_INVALID_HANDLE)
    }

    fn MPI_T_event_get_index / PMPI_T_event_get_index(_name: *const c_char, _index: *mut c_int) -> c_int {
        none_such(MPI_T_ERR_INVALID_NAME)
    }

    fn MPI_T_event_get_info / PMPI_T_event_get_info(_index: c_int, _name: *mut c_char, _name_len: *mut c_int, _verbosity: *mut c_int, _types: *mut Datatype, _displs: *mut Aint, _num: *mut c_int, _enumtype: *mut *const c_void, _info: *mut Info, _desc: *mut c_char, _desc_len: *mut c_int, _bind: *mut c_int) -> c_int {
        none_such(MPI_T_ERR_INVALID_INDEX)
    }

    fn MPI_T_event_handle_alloc / PMPI_T_event_handle_alloc(_index: c_int, _object: *mut c_void, _info: Info, _registration: *mut *const c_void) -> c_int {
        none_such(MPI_T_ERR_INVALID_INDEX)
    }

    fn MPI_T_event_handle_free / PMPI_T_event_handle_free(_registration: *const c_void, _user: *mut c_void, _free_cb: *const c_void) -> c_int {
        none_such(MPI_T_ERR_INVALID_HANDLE)
    }

    fn MPI_T_event_handle_get_info / PMPI_T_event_handle_get_info(_registration: *const c_void, _info: *mut Info) -> c_int {
        none_such(MPI_T_ERR_INVALID_HANDLE)
    }

    fn MPI_T_event_handle_set_info / PMPI_T_event_handle_set_info(_registration: *const c_void, _info: Info) -> c_int {
        none_such(MPI_T_ERR_INVALID_HANDLE)
    }

    fn MPI_T_event_callback_get_info / PMPI_T_event_callback_get_info(_registration: *const c_void, _safety: c_int, _info: *mut Info) -> c_int {
        none_such(MPI_T_ERR_INVALID_HANDLE)
    }

    fn MPI_T_event_callback_set_info / PMPI_T_event_callback_set_info(_registration: *const c_void, _safety: c_int, _info: Info) -> c_int {
        none_such(MPI_T_ERR_INVALID_HANDLE)
    }

    fn MPI_T_event_register_callback / PMPI_T_event_register_callback(_registration: *const c_void, _safety: c_int, _info: Info, _user: *mut c_void, _cb: *const c_void) -> c_int {
        none_such(MPI_T_ERR_INVALID_HANDLE)
    }

    fn MPI_T_event_set_dropped_handler / PMPI_T_event_set_dropped_handler(_registration: *const c_void, _cb: *const c_void) -> c_int {
        none_such(MPI_T_ERR_INVALID_HANDLE)
    }

    fn MPI_T_event_read / PMPI_T_event_read(_instance: *const c_void, _element: c_int, _buf: *mut c_void) -> c_int {
        none_such(MPI_T_ERR_INVALID_HANDLE)
    }

    fn MPI_T_event_copy / PMPI_T_event_copy(_instance: *const c_void, _buf: *mut c_void) -> c_int {
        none_such(MPI_T_ERR_INVALID_HANDLE)
    }

    fn MPI_T_event_get_timestamp / PMPI_T_event_get_timestamp(_instance: *const c_void, _stamp: *mut Count) -> c_int {
        none_such(MPI_T_ERR_INVALID_HANDLE)
    }

    fn MPI_T_event_get_source / PMPI_T_event_get_source(_instance: *const c_void, _source: *mut c_int) -> c_int {
        none_such(MPI_T_ERR_INVALID_HANDLE)
    }

    fn MPI_T_source_get_info / PMPI_T_source_get_info(_index: c_int, _name: *mut c_char, _name_len: *mut c_int, _desc: *mut c_char, _desc_len: *mut c_int, _ordering: *mut c_int, _ticks: *mut Count, _max: *mut Count, _info: *mut Info) -> c_int {
        none_such(MPI_T_ERR_INVALID_INDEX)
    }

    fn MPI_T_source_get_timestamp / PMPI_T_source_get_timestamp(_index: c_int, _stamp: *mut Count) -> c_int {
        none_such(MPI_T_ERR_INVALID_INDEX)
    }
}

export! {
    // Reading a counter asks the engine: under the call lock.
    fn MPI_T_pvar_read / PMPI_T_pvar_read(session: *const c_void, handle: *const c_void, buf: *mut c_void) -> c_int {
        if !open() {
            return MPI_T_ERR_NOT_INITIALIZED;
        }
        if all_handles(handle) || buf.is_null() {
            return MPI_T_ERR_INVALID;
        }
        let index = match self::handle(session, handle) {
            Ok(h) => h.index,
            Err(code) => return code,
        };
        let value = crate::state::world_comm().map_or(0, |c| (PVARS[index].read)(&c));
        // SAFETY: `buf` holds one unsigned long long (the variable's
        // datatype; caller contract).
        unsafe { put(buf.cast::<u64>(), value) };
        MPI_SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_to_the_buffer_and_its_length_given_when_asked() {
        let mut len: c_int = 0;
        // SAFETY: a null buffer asks for the length only.
        unsafe { put_text("vpml", std::ptr::null_mut(), &mut len) };
        assert_eq!(len, 5);
        let mut buf = [1 as c_char; 3];
        let mut len: c_int = 3;
        // SAFETY: `buf` holds 3 bytes.
        unsafe { put_text("vpml", buf.as_mut_ptr(), &mut len) };
        assert_eq!((len, buf), (3, [b'v' as c_char, b'p' as c_char, 0]));
    }

    #[test]
    fn a_forged_handle_is_refused_not_followed() {
        OPEN.fetch_add(1, Ordering::AcqRel);
        let mut s: *const c_void = std::ptr::null();
        // SAFETY: a session pointer.
        assert_eq!(unsafe { MPI_T_pvar_session_create(&mut s) }, MPI_SUCCESS);
        let forged = 0x1000 as *const c_void;
        let mut v = 0u64;
        // SAFETY: the handle is checked before any use.
        let rc = unsafe { MPI_T_pvar_read(s, forged, (&raw mut v).cast()) };
        assert_eq!(rc, MPI_T_ERR_INVALID_HANDLE);
        // SAFETY: as above.
        assert_eq!(unsafe { MPI_T_pvar_session_free(&mut s) }, MPI_SUCCESS);
        OPEN.fetch_sub(1, Ordering::AcqRel);
    }
}
