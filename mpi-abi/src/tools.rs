//! `MPI_T`, the tool information interface: its life cycle and the counts
//! of its variables. vpml exposes no control or performance variable and
//! no category yet (MPI allows none), so a tool that enumerates them finds
//! none, and a lookup by name finds nothing; the calls that take a
//! variable's index are not reached by such a tool and stay unsupported.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::consts::*;
use crate::state::put;

/// `MPI_T_ERR_NOT_INITIALIZED`.
const MPI_T_ERR_NOT_INITIALIZED: c_int = 60;
/// `MPI_T_ERR_INVALID_INDEX`.
const MPI_T_ERR_INVALID_INDEX: c_int = 62;
/// `MPI_T_ERR_INVALID_NAME`.
const MPI_T_ERR_INVALID_NAME: c_int = 73;
/// `MPI_T_ERR_INVALID_SESSION`.
const MPI_T_ERR_INVALID_SESSION: c_int = 67;

/// `MPI_T_init_thread` calls not yet matched by `MPI_T_finalize`.
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// What a performance-variable session handle points to (the handle is
/// opaque to the program; vpml's sessions hold nothing).
static SESSION: u8 = 0;

/// Is the interface initialized?
fn open() -> bool {
    OPEN.load(Ordering::Acquire) > 0
}

/// Write a zero count, if the interface is initialized.
///
/// # Safety
/// `n` is an int pointer.
unsafe fn none(n: *mut c_int) -> c_int {
    if !open() {
        return MPI_T_ERR_NOT_INITIALIZED;
    }
    // SAFETY: caller contract.
    unsafe { put(n, 0) };
    MPI_SUCCESS
}

export! {
    any_thread:

    fn MPI_T_init_thread / PMPI_T_init_thread(required: c_int, provided: *mut c_int) -> c_int {
        OPEN.fetch_add(1, Ordering::AcqRel);
        // Its calls touch nothing shared but atomics: any level.
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
        unsafe { none(n) }
    }

    fn MPI_T_pvar_get_num / PMPI_T_pvar_get_num(n: *mut c_int) -> c_int {
        // SAFETY: an int pointer (caller contract).
        unsafe { none(n) }
    }

    fn MPI_T_category_get_num / PMPI_T_category_get_num(n: *mut c_int) -> c_int {
        // SAFETY: an int pointer (caller contract).
        unsafe { none(n) }
    }

    fn MPI_T_event_get_num / PMPI_T_event_get_num(n: *mut c_int) -> c_int {
        // SAFETY: an int pointer (caller contract).
        unsafe { none(n) }
    }

    fn MPI_T_source_get_num / PMPI_T_source_get_num(n: *mut c_int) -> c_int {
        // SAFETY: an int pointer (caller contract).
        unsafe { none(n) }
    }

    fn MPI_T_cvar_get_index / PMPI_T_cvar_get_index(_name: *const c_char, _index: *mut c_int) -> c_int {
        if open() { MPI_T_ERR_INVALID_NAME } else { MPI_T_ERR_NOT_INITIALIZED }
    }

    fn MPI_T_pvar_get_index / PMPI_T_pvar_get_index(_name: *const c_char, _class: c_int, _index: *mut c_int) -> c_int {
        if open() { MPI_T_ERR_INVALID_NAME } else { MPI_T_ERR_NOT_INITIALIZED }
    }

    fn MPI_T_category_get_index / PMPI_T_category_get_index(_name: *const c_char, _index: *mut c_int) -> c_int {
        if open() { MPI_T_ERR_INVALID_NAME } else { MPI_T_ERR_NOT_INITIALIZED }
    }

    fn MPI_T_category_get_num_events / PMPI_T_category_get_num_events(_category: c_int, _n: *mut c_int) -> c_int {
        if open() { MPI_T_ERR_INVALID_INDEX } else { MPI_T_ERR_NOT_INITIALIZED }
    }

    fn MPI_T_pvar_session_create / PMPI_T_pvar_session_create(session: *mut *const c_void) -> c_int {
        if !open() {
            return MPI_T_ERR_NOT_INITIALIZED;
        }
        // SAFETY: a handle pointer (caller contract).
        unsafe { put(session, (&raw const SESSION).cast::<c_void>()) };
        MPI_SUCCESS
    }

    fn MPI_T_pvar_session_free / PMPI_T_pvar_session_free(session: *mut *const c_void) -> c_int {
        if !open() {
            return MPI_T_ERR_NOT_INITIALIZED;
        }
        // SAFETY: a handle pointer (caller contract).
        match unsafe { session.as_ref().copied() } {
            Some(p) if p == (&raw const SESSION).cast::<c_void>() => {
                // SAFETY: as above.
                unsafe { put(session, std::ptr::null()) };
                MPI_SUCCESS
            }
            _ => MPI_T_ERR_INVALID_SESSION,
        }
    }
}
