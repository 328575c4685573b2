//! Persistent requests: `MPI_Send_init`, `MPI_Ssend_init`,
//! `MPI_Rsend_init`, `MPI_Bsend_init`, `MPI_Recv_init`, `MPI_Start`,
//! `MPI_Startall`.

use std::ffi::{c_int, c_void};

use super::{handles, new_request, start};
use crate::consts::*;
use crate::state::{
    Persistent, PersistentOp, ReqEntry, STATE, comm, error, put, request_slot, vpml_error,
};

#[allow(clippy::too_many_arguments)] // MPI's own argument list
fn persistent(
    func: &str,
    send: bool,
    (sync, buffered): (bool, bool),
    buf: *const c_void,
    count: c_int,
    dt: Datatype,
    peer: c_int,
    tag: c_int,
    h: Comm,
    req: *mut Request,
) -> c_int {
    if let Err((code, why)) = crate::types::span(count, dt) {
        return error(h, func, code, why);
    }
    let c = match comm(func, h) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if peer != MPI_PROC_NULL {
        let source = (peer != MPI_ANY_SOURCE).then_some(peer as usize);
        if let Err(e) = c.persistent_made(send, source, tag) {
            return vpml_error(h, func, &e);
        }
    }
    // A derived datatype is copied: the request keeps its layout even if
    // the program frees the type (MPI allows it).
    let dt = crate::types::private_copy(dt).unwrap_or(dt);
    let op = PersistentOp {
        send,
        sync,
        buffered,
        buf,
        count,
        dt,
        peer,
        tag,
        on: c,
    };
    let entry = ReqEntry::persistent_op(h, Persistent::P2p(op));
    // SAFETY: a handle pointer (caller contract).
    unsafe { put(req, new_request(entry)) };
    MPI_SUCCESS
}

export! {
    fn MPI_Send_init / PMPI_Send_init(buf: *const c_void, count: c_int, dt: Datatype, dest: c_int, tag: c_int, h: Comm, req: *mut Request) -> c_int {
        persistent("MPI_Send_init", true, (false, false), buf, count, dt, dest, tag, h, req)
    }

    fn MPI_Ssend_init / PMPI_Ssend_init(buf: *const c_void, count: c_int, dt: Datatype, dest: c_int, tag: c_int, h: Comm, req: *mut Request) -> c_int {
        persistent("MPI_Ssend_init", true, (true, false), buf, count, dt, dest, tag, h, req)
    }

    fn MPI_Rsend_init / PMPI_Rsend_init(buf: *const c_void, count: c_int, dt: Datatype, dest: c_int, tag: c_int, h: Comm, req: *mut Request) -> c_int {
        // A ready send is a standard one here (the receive being posted
        // is the program's promise; nothing is gained by checking it).
        persistent("MPI_Rsend_init", true, (false, false), buf, count, dt, dest, tag, h, req)
    }

    fn MPI_Bsend_init / PMPI_Bsend_init(buf: *const c_void, count: c_int, dt: Datatype, dest: c_int, tag: c_int, h: Comm, req: *mut Request) -> c_int {
        persistent("MPI_Bsend_init", true, (false, true), buf, count, dt, dest, tag, h, req)
    }

    fn MPI_Recv_init / PMPI_Recv_init(buf: *mut c_void, count: c_int, dt: Datatype, source: c_int, tag: c_int, h: Comm, req: *mut Request) -> c_int {
        persistent("MPI_Recv_init", false, (false, false), buf, count, dt, source, tag, h, req)
    }

    fn MPI_Start / PMPI_Start(req: *mut Request) -> c_int {
        // SAFETY: a request handle pointer (caller contract).
        let h = unsafe { req.as_ref().copied() }.unwrap_or(MPI_REQUEST_NULL);
        // What to start: the operation of a point-to-point request, the
        // layout of a collective.
        enum What {
            P2p(PersistentOp),
            Collective(crate::state::SharedComm, u32, std::rc::Rc<dyn Fn() -> Result<crate::coll::Laid, (c_int, String)>>),
            Partitioned,
        }
        let found = STATE.with(|s| {
            let s = s.borrow();
            let e = request_slot(h).and_then(|i| s.requests.get(i))?;
            let what = match e.persistent()? {
                Persistent::P2p(op) => What::P2p(op.clone()),
                Persistent::Collective(pc) => What::Collective(pc.on.clone(), pc.lane, pc.lay.clone()),
                Persistent::Partitioned(_) => What::Partitioned,
            };
            let unready = matches!(e.persistent(), Some(Persistent::Partitioned(p)) if p.unready());
            Some((e.comm, what, e.active.is_some() || e.proc_null || unready))
        });
        let Some((c, what, busy)) = found else {
            return error(MPI_COMM_WORLD, "MPI_Start", MPI_ERR_REQUEST, "not a persistent request");
        };
        if busy {
            return error(c, "MPI_Start", MPI_ERR_REQUEST, "the request is already active");
        }
        let op = match what {
            What::P2p(op) => op,
            What::Collective(on, lane, lay) => return crate::coll::start_persistent(h, c, &on, lane, &*lay),
            What::Partitioned => return super::partitioned::start(h).unwrap_or(MPI_ERR_REQUEST),
        };
        if op.buffered {
            // As MPI_Bsend: the message is copied and sent in the
            // background; the request is complete (with an empty status).
            // On the request's own communicator (the program may have
            // freed its handle); the buffer the request was made with.
            let r = super::blocking::send_on("MPI_Start", super::blocking::Blocking::Buffered, &op.on, c, op.buf, op.count, op.dt, op.peer, op.tag);
            if r == MPI_SUCCESS {
                STATE.with(|s| {
                    let mut s = s.borrow_mut();
                    if let Some(e) = request_slot(h).and_then(|i| s.requests.get_mut(i)) {
                        e.proc_null = true;
                    }
                });
            }
            return r;
        }
        match start("MPI_Start", c, &op.on, op.send, op.sync, op.buf, op.count, op.dt, op.peer, op.tag) {
            Ok((active, staging)) => {
                STATE.with(|s| {
                    let mut s = s.borrow_mut();
                    if let Some(e) = request_slot(h).and_then(|i| s.requests.get_mut(i)) {
                        e.proc_null = active.is_none();
                        e.active = active;
                        e.more_mut().staging = staging;
                    }
                });
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Startall / PMPI_Startall(count: c_int, reqs: *mut Request) -> c_int {
        // SAFETY: `reqs` holds `count` handles (caller contract).
        for h in unsafe { handles(reqs, count) } {
            // SAFETY: one of the caller's handles.
            let r = unsafe { MPI_Start(h) };
            if r != MPI_SUCCESS {
                return r;
            }
        }
        MPI_SUCCESS
    }
}
