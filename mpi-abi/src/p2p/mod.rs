//! Point-to-point: blocking, buffered, nonblocking and persistent sends
//! and receives, the wait/test family, probes, cancel, status queries.
//!
//! Requests live in the state's table; a handle is its slot. The wait and
//! test calls take the active requests out, run vpml's call of the same
//! name over them (so a logging protocol sees exactly that call), and put
//! back what did not complete.
//!
//! The bindings are split by job, and re-exported here: blocking sends
//! and receives (`blocking`), nonblocking ones (`nonblocking`), persistent
//! requests (`persistent`), partitioned ones (`partitioned`), the wait/test family (`wait_test`, on the
//! request bookkeeping of `completion`), cancel and free (`cancel`), probes
//! and status queries (`probe`). This module holds what they share:
//! argument conversions, status writing, starting an operation, request
//! handles.

use std::ffi::{c_int, c_void};

use crate::consts::*;
use crate::state::{
    Active, ReqEntry, STATE, class_of, error, request_handle, request_slot, vpml_error,
};
use crate::types::Message;

mod blocking;
mod cancel;
mod completion;
mod greq;
mod matched;
mod nonblocking;
mod partitioned;
mod persistent;
mod probe;
mod wait_test;

pub use blocking::*;
pub use cancel::*;
pub use greq::*;
pub use matched::*;
pub use nonblocking::*;
pub(crate) use partitioned::any_made as partitioned_made;
pub use partitioned::*;
pub use persistent::*;
pub(crate) use probe::get_count_large;
pub use probe::*;
pub use wait_test::*;

fn source_of(source: c_int) -> vpml::Source {
    if source == MPI_ANY_SOURCE {
        vpml::ANY_SOURCE
    } else {
        usize::try_from(source).unwrap_or(usize::MAX).into()
    }
}

fn tag_of(tag: c_int) -> i32 {
    if tag == MPI_ANY_TAG {
        vpml::ANY_TAG
    } else {
        tag
    }
}

fn rank_of(r: c_int) -> usize {
    usize::try_from(r).unwrap_or(usize::MAX)
}

/// Write `st` to a C status (unless ignored).
///
/// # Safety
/// `out` is `MPI_STATUS_IGNORE` or a valid status pointer.
unsafe fn write_status(out: *mut MpiStatus, st: Option<&vpml::Status>, proc_null: bool) {
    // SAFETY: caller contract.
    unsafe { put_single_status(out, &status_of(st, proc_null)) };
}

/// Write `st` to `out` as a call that completes one request does: all but
/// `MPI_ERROR`, which MPI's single-completion calls leave as it was (the
/// call's return value says it), unless `out` is `MPI_STATUS_IGNORE`.
///
/// # Safety
/// `out` is `MPI_STATUS_IGNORE` (or null) or a valid status pointer.
unsafe fn put_single_status(out: *mut MpiStatus, st: &MpiStatus) {
    if !ignored(out) {
        // SAFETY: caller contract.
        unsafe {
            let kept = (*out).error;
            *out = *st;
            (*out).error = kept;
        }
    }
}

/// MPI's status for a completed operation (`None`: an empty one, whose
/// source is `MPI_PROC_NULL` if `proc_null`).
fn status_of(st: Option<&vpml::Status>, proc_null: bool) -> MpiStatus {
    let err = st.and_then(|s| s.error()).map_or(MPI_SUCCESS, class_of);
    let (source, tag, len, cancelled) = match st {
        Some(s) => (
            s.source() as c_int,
            s.tag(),
            s.len() as u64,
            s.is_cancelled(),
        ),
        None if proc_null => (MPI_PROC_NULL, MPI_ANY_TAG, 0, false),
        None => (MPI_ANY_SOURCE, MPI_ANY_TAG, 0, false),
    };
    status_fields(source, tag, len, cancelled, err)
}

/// MPI's status of a receive that `truncated` (the error a receive
/// returned): the source, the tag and what arrived, as a wait reports it.
fn truncated_status(truncated: &vpml::Error) -> Option<MpiStatus> {
    match truncated {
        vpml::Error::Truncated {
            source_rank,
            tag,
            buffer_len,
            ..
        } => Some(status_fields(
            *source_rank as c_int,
            *tag,
            *buffer_len as u64,
            false,
            MPI_ERR_TRUNCATE,
        )),
        _ => None,
    }
}

/// A C status from its fields (`len` in bytes).
fn status_fields(source: c_int, tag: c_int, len: u64, cancelled: bool, error: c_int) -> MpiStatus {
    MpiStatus {
        count_lo: len as u32 as c_int,
        count_hi_and_cancelled: (((len >> 32) as c_int) << 1) | c_int::from(cancelled),
        source,
        tag,
        error,
    }
}

/// Write `st` to `out`, `MPI_ERROR` included (as the calls that complete
/// several requests do), unless it is `MPI_STATUS_IGNORE`.
///
/// # Safety
/// `out` is `MPI_STATUS_IGNORE` (or null) or a valid status pointer.
unsafe fn put_status(out: *mut MpiStatus, st: &MpiStatus) {
    if !ignored(out) {
        // SAFETY: caller contract.
        unsafe { *out = *st };
    }
}

/// The `i`-th status of a C array (or ignore).
fn nth(statuses: *mut MpiStatus, i: usize) -> *mut MpiStatus {
    if ignored(statuses) {
        statuses
    } else {
        statuses.wrapping_add(i)
    }
}

/// What `start` gives back: the request (`None` for an operation on
/// `MPI_PROC_NULL`) and the staging buffer it uses, if any.
type Started = (Option<Active>, Option<Message>);

/// Start an operation on `count` elements of `dt` at `buf`.
#[allow(clippy::too_many_arguments)] // MPI's own argument list
fn start(
    func: &str,
    h: Comm,
    c: &crate::state::SharedComm,
    send: bool,
    sync: bool,
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    peer: c_int,
    tag: c_int,
) -> Result<Started, c_int> {
    if peer == MPI_PROC_NULL {
        return Ok((None, None));
    }
    // SAFETY: the caller's buffer holds `count` elements of `dt`.
    let mut msg = unsafe { Message::new(buf, count, dt, send) }
        .map_err(|(code, why)| error(h, func, code, why))?;
    let (ptr, len) = msg.target();
    // SAFETY: MPI's contract keeps the C buffer valid until completion; a
    // staging buffer lives in the request's entry as long (and among the
    // orphans if the request is freed while active).
    let r = unsafe {
        if send {
            c.isend_raw(rank_of(peer), tag, ptr, len, sync)
        } else {
            c.irecv_raw(source_of(peer), tag_of(tag), ptr, len)
        }
    };
    let staging = matches!(msg, Message::Staged(_)).then_some(msg);
    r.map(|id| (Some(Active::new(id, c, peer, tag, len)), staging))
        .map_err(|e| vpml_error(h, func, &e))
}

/// A request that is complete from the start (its status empty), in
/// `*req`.
pub(crate) fn completed_request(h: Comm, req: *mut Request) -> c_int {
    if req.is_null() {
        return error(h, "MPI_Request", MPI_ERR_REQUEST, "null request pointer");
    }
    let entry = ReqEntry::new(h, None);
    // SAFETY: a request handle pointer (caller contract, checked non-null).
    unsafe { crate::state::put(req, new_request(entry)) };
    MPI_SUCCESS
}

fn new_request(entry: ReqEntry) -> Request {
    request_handle(STATE.with(|s| s.borrow_mut().requests.insert(entry)))
}

/// The communicator whose error handler applies to request `h`.
fn comm_of(h: Request) -> Comm {
    STATE.with(|s| {
        let s = s.borrow();
        request_slot(h)
            .and_then(|i| s.requests.get(i))
            .map_or(MPI_COMM_WORLD, |e| e.comm)
    })
}

/// The C array `reqs[0..count]`.
///
/// # Safety
/// `reqs` holds `count` handles.
unsafe fn handles<'a>(reqs: *mut Request, count: c_int) -> &'a mut [Request] {
    match usize::try_from(count) {
        // SAFETY: caller contract.
        Ok(n) if n > 0 && !reqs.is_null() => unsafe { std::slice::from_raw_parts_mut(reqs, n) },
        _ => &mut [],
    }
}
