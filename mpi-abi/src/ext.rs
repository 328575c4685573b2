//! vpml's extensions for C programs (`vpml_ext.h`): application
//! checkpoints, so a restarted rank resumes from its last checkpoint
//! instead of re-executing from the start.

use std::ffi::{c_int, c_void};

use crate::consts::*;
use crate::state::{STATE, error};

/// `VPMLX_Checkpoint(state, len)`: save `len` bytes at `state` as this
/// rank's checkpoint (with vpml's own state). Call it where no request is
/// in flight and, under a protocol, no one-sided window is alive. Returns
/// `MPI_SUCCESS` (also without a protocol, where it saves nothing).
///
/// # Safety
/// `state` points to `len` readable bytes (or `len` is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn VPMLX_Checkpoint(state: *const c_void, len: usize) -> c_int {
    let _call = crate::threads::enter();
    let logging = STATE.with(|s| {
        s.borrow()
            .world
            .as_ref()
            .is_some_and(|w| w.comm().protocol() != "none")
    });
    if logging && crate::rma::live() {
        // A window's state (its memory, locks, epochs, the receive its
        // requests arrive in) is not in a checkpoint, and a restarted rank
        // could not make it again alone.
        return error(
            MPI_COMM_WORLD,
            "VPMLX_Checkpoint",
            MPI_ERR_OTHER,
            "a one-sided window is alive: free every window before taking a checkpoint",
        );
    }
    if logging && crate::p2p::partitioned_made() {
        // Which request of each channel a partitioned message belongs to
        // is counted from the first one made: a rank restarted from here
        // would count from 0 again, out of step with its peers.
        return error(
            MPI_COMM_WORLD,
            "VPMLX_Checkpoint",
            MPI_ERR_OTHER,
            "partitioned requests were made: their matching order is in no checkpoint",
        );
    }
    let bytes: &[u8] = if len == 0 || state.is_null() {
        &[]
    } else {
        // SAFETY: caller contract.
        unsafe { std::slice::from_raw_parts(state as *const u8, len) }
    };
    let r = STATE.with(|s| {
        let s = s.borrow();
        s.world.as_ref().map(|w| w.checkpoint(bytes))
    });
    match r {
        None => error(
            MPI_COMM_WORLD,
            "VPMLX_Checkpoint",
            MPI_ERR_OTHER,
            "called outside MPI_Init/MPI_Finalize",
        ),
        Some(Ok(_)) => MPI_SUCCESS,
        Some(Err(e)) => crate::state::vpml_error(MPI_COMM_WORLD, "VPMLX_Checkpoint", &e),
    }
}

/// `VPMLX_Restarted(buf, len)`: 1 if this process is a restarted rank
/// resuming from a checkpoint, else 0. On 1, `*len` becomes the state's
/// length and, if `buf` is not null and `*len` was at least that (the
/// capacity of `buf`), the state is copied into `buf`.
///
/// # Safety
/// `len` is a valid pointer; `buf` holds `*len` writable bytes or is null.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn VPMLX_Restarted(buf: *mut c_void, len: *mut usize) -> c_int {
    let _call = crate::threads::enter();
    let state = STATE.with(|s| s.borrow().world.as_ref().and_then(|w| w.restart_state()));
    let Some(state) = state else {
        return 0;
    };
    if len.is_null() {
        return 1;
    }
    // SAFETY: caller contract.
    let capacity = unsafe { *len };
    if !buf.is_null() && capacity >= state.len() {
        // SAFETY: `buf` holds `capacity` ≥ state.len() bytes (caller contract).
        unsafe { std::ptr::copy_nonoverlapping(state.as_ptr(), buf as *mut u8, state.len()) };
    }
    // SAFETY: caller contract.
    unsafe { *len = state.len() };
    1
}
