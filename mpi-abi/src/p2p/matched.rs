//! Matched probes: `MPI_Mprobe`/`MPI_Improbe` find a message and take it
//! (no other receive can match it any more), `MPI_Mrecv`/`MPI_Imrecv`
//! deliver it. The probe is vpml's (under message logging, an
//! `MPI_ANY_SOURCE` probe's answer is logged), and the message is then
//! received at once from the rank and with the tag the probe saw — the
//! earliest such message, so the one probed — into a buffer the message
//! handle owns until its receive.

use std::ffi::{c_int, c_void};

use super::{completed_request, source_of, tag_of, write_status};
use crate::consts::*;
use crate::state::{STATE, comm, error, handle_of, insert, put, slot_of, vpml_error};
use crate::types::Message;

/// `MPI_MESSAGE_NULL`, `MPI_MESSAGE_NO_PROC` (MPICH's values).
const MPI_MESSAGE_NULL: c_int = 0x2c00_0000;
const MPI_MESSAGE_NO_PROC: c_int = 0x6c00_0000;

/// A message taken by a matched probe.
pub(crate) struct Matched {
    data: Vec<u8>,
    source: usize,
    tag: c_int,
}

/// Take the message `st` describes on `c`.
fn take(c: &vpml::Comm, st: &vpml::Status) -> vpml::Result<Matched> {
    let mut data = vec![0u8; st.len()];
    // SAFETY: `data` outlives the receive, which completes below.
    let id = unsafe { c.irecv_raw(st.source(), st.tag(), data.as_mut_ptr(), data.len())? };
    // (It matched the probed message: under MPI_THREAD_MULTIPLE the rest
    // of a large one is waited for without the call lock.)
    crate::threads::block_until(c, &[Some(id)], true)?;
    c.wait_all_raw(&[Some(id)])?;
    let got = c.finish_raw(id)?.into_result()?;
    Ok(Matched {
        data,
        source: got.source(),
        tag: got.tag(),
    })
}

/// Probe (`blocking` or not) and take what matches: the message's handle,
/// or `None` if nothing matched yet.
fn probe_and_take(
    func: &str,
    source: c_int,
    tag: c_int,
    h: Comm,
    blocking: bool,
    status: *mut MpiStatus,
) -> Result<Option<c_int>, c_int> {
    let c = comm(func, h)?;
    if source == MPI_PROC_NULL {
        // SAFETY: a status pointer or MPI_STATUS_IGNORE (caller contract).
        unsafe { write_status(status, None, true) };
        return Ok(Some(MPI_MESSAGE_NO_PROC));
    }
    // (Under MPI_THREAD_MULTIPLE, the probe that finds the message holds
    // the call lock until it is taken: no other thread can receive it.)
    let found = if blocking && crate::threads::waits_in_library() {
        super::probe::probe_threaded(&c, source, tag).map(Some)
    } else if blocking {
        c.probe(source_of(source), tag_of(tag)).map(Some)
    } else {
        c.iprobe(source_of(source), tag_of(tag))
    };
    let st = match found {
        Ok(Some(st)) => st,
        Ok(None) => return Ok(None),
        Err(e) => return Err(vpml_error(h, func, &e)),
    };
    let m = take(&c, &st).map_err(|e| vpml_error(h, func, &e))?;
    // SAFETY: as above.
    unsafe { write_status(status, Some(&st), false) };
    let i = STATE.with(|s| insert(&mut s.borrow_mut().messages, 0, m));
    Ok(Some(handle_of(MESSAGE_KIND, i)))
}

/// Deliver message `*msg` into `count` elements of `dt` at `buf`: its
/// (source, tag, bytes), or the error code.
///
/// # Safety
/// `buf` holds `count` elements of `dt`, `msg` is a message handle
/// pointer (the C caller's contract).
unsafe fn deliver(
    func: &str,
    buf: *mut c_void,
    count: c_int,
    dt: Datatype,
    msg: *mut c_int,
) -> Result<Option<(usize, c_int, usize)>, c_int> {
    // SAFETY: caller contract.
    let h = unsafe { msg.as_ref().copied() }.unwrap_or(MPI_MESSAGE_NULL);
    if h == MPI_MESSAGE_NO_PROC {
        // SAFETY: as above.
        unsafe { put(msg, MPI_MESSAGE_NULL) };
        return Ok(None);
    }
    // The buffer first: a bad count or datatype leaves the message.
    // SAFETY: caller contract.
    let mut out = unsafe { Message::new(buf, count, dt, false) }
        .map_err(|(code, why)| error(MPI_COMM_WORLD, func, code, why))?;
    let taken = slot_of(h, MESSAGE_KIND)
        .and_then(|i| STATE.with(|s| s.borrow_mut().messages.get_mut(i)?.take()));
    let Some(m) = taken else {
        return Err(error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_REQUEST,
            "invalid message handle",
        ));
    };
    // SAFETY: as above.
    unsafe { put(msg, MPI_MESSAGE_NULL) };
    let room = out.bytes();
    let n = m.data.len().min(room.len());
    room[..n].copy_from_slice(&m.data[..n]);
    out.finish(Some(n));
    if m.data.len() > n {
        return Err(error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_TRUNCATE,
            &format!(
                "message of {} bytes from rank {} truncated to {n}",
                m.data.len(),
                m.source
            ),
        ));
    }
    Ok(Some((m.source, m.tag, n)))
}

export! {
    fn MPI_Mprobe / PMPI_Mprobe(source: c_int, tag: c_int, h: Comm, msg: *mut c_int, status: *mut MpiStatus) -> c_int {
        match probe_and_take("MPI_Mprobe", source, tag, h, true, status) {
            Ok(m) => {
                // SAFETY: a message handle pointer (caller contract).
                unsafe { put(msg, m.unwrap_or(MPI_MESSAGE_NULL)) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Improbe / PMPI_Improbe(source: c_int, tag: c_int, h: Comm, flag: *mut c_int, msg: *mut c_int, status: *mut MpiStatus) -> c_int {
        // A polling loop is a progress point for one-sided requests.
        crate::rma::progress();
        match probe_and_take("MPI_Improbe", source, tag, h, false, status) {
            Ok(m) => {
                // SAFETY: int and message handle pointers (caller contract).
                unsafe {
                    put(flag, c_int::from(m.is_some()));
                    if let Some(m) = m {
                        put(msg, m);
                    }
                }
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Mrecv / PMPI_Mrecv(buf: *mut c_void, count: c_int, dt: Datatype, msg: *mut c_int, status: *mut MpiStatus) -> c_int {
        // SAFETY: the caller's buffer and handle (caller contract).
        match unsafe { deliver("MPI_Mrecv", buf, count, dt, msg) } {
            Ok(got) => {
                let st = got.map(|(s, t, n)| vpml::Status::of_send(s, t, n));
                // SAFETY: a status pointer or MPI_STATUS_IGNORE.
                unsafe { write_status(status, st.as_ref(), st.is_none()) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Imrecv / PMPI_Imrecv(buf: *mut c_void, count: c_int, dt: Datatype, msg: *mut c_int, req: *mut Request) -> c_int {
        // The message is here: delivered now, a completed request.
        // SAFETY: the caller's buffer and handle (caller contract).
        let got = match unsafe { deliver("MPI_Imrecv", buf, count, dt, msg) } {
            Ok(got) => got,
            Err(code) => return code,
        };
        let r = completed_request(MPI_COMM_WORLD, req);
        if r == MPI_SUCCESS && got.is_some() {
            // SAFETY: written just above.
            let h = unsafe { *req };
            STATE.with(|s| {
                let mut s = s.borrow_mut();
                if let Some(e) = crate::state::request_slot(h).and_then(|i| s.requests.get_mut(i)) {
                    e.more_mut().ready = got;
                }
            });
        }
        r
    }
}
