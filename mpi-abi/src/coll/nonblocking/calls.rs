//! The MPI calls: `MPI_I*` collectives, `MPI_Alltoallw` and
//! `MPI_Comm_idup`.

use std::ffi::{c_int, c_void};

use super::*;
use crate::coll::plain::equal_lists;
use crate::consts::*;
use crate::state::{error, put, vpml_error};

export! {
    fn MPI_Ibarrier / PMPI_Ibarrier(h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Ibarrier", h);
        launch("MPI_Ibarrier", h, &c, Ok(barrier(&c)), req)
    }

    fn MPI_Ibcast / PMPI_Ibcast(buf: *mut c_void, count: c_int, dt: Datatype, root: c_int, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Ibcast", h);
        // SAFETY: the caller's buffer holds `count` elements of `dt`.
        launch("MPI_Ibcast", h, &c, unsafe { bcast(&c, buf, count, dt, root) }, req)
    }

    fn MPI_Ireduce / PMPI_Ireduce(send: *const c_void, recv: *mut c_void, count: c_int, dt: Datatype, op: Op, root: c_int, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Ireduce", h);
        // SAFETY: the caller's buffers hold `count` elements of `dt`.
        launch("MPI_Ireduce", h, &c, unsafe { reduce(&c, send, recv, count, dt, op, dt, root, false) }, req)
    }

    fn MPI_Iallreduce / PMPI_Iallreduce(send: *const c_void, recv: *mut c_void, count: c_int, dt: Datatype, op: Op, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Iallreduce", h);
        // SAFETY: the caller's buffers hold `count` elements of `dt`.
        launch("MPI_Iallreduce", h, &c, unsafe { reduce(&c, send, recv, count, dt, op, dt, 0, true) }, req)
    }

    fn MPI_Iscan / PMPI_Iscan(send: *const c_void, recv: *mut c_void, count: c_int, dt: Datatype, op: Op, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Iscan", h);
        // SAFETY: the caller's buffers hold `count` elements of `dt`.
        launch("MPI_Iscan", h, &c, unsafe { scan(&c, send, recv, count, dt, op, dt, true) }, req)
    }

    fn MPI_Iexscan / PMPI_Iexscan(send: *const c_void, recv: *mut c_void, count: c_int, dt: Datatype, op: Op, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Iexscan", h);
        // SAFETY: the caller's buffers hold `count` elements of `dt`.
        launch("MPI_Iexscan", h, &c, unsafe { scan(&c, send, recv, count, dt, op, dt, false) }, req)
    }

    fn MPI_Ireduce_scatter_block / PMPI_Ireduce_scatter_block(send: *const c_void, recv: *mut c_void, count: c_int, dt: Datatype, op: Op, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Ireduce_scatter_block", h);
        let laid = match usize::try_from(count) {
            // SAFETY: the caller's buffers hold the blocks.
            Ok(n) => unsafe { reduce_scatter(&c, send, recv, vec![n; c.size()], dt, op, dt, true) },
            Err(_) => Err((MPI_ERR_COUNT, "negative count".into())),
        };
        launch("MPI_Ireduce_scatter_block", h, &c, laid, req)
    }

    fn MPI_Ireduce_scatter / PMPI_Ireduce_scatter(send: *const c_void, recv: *mut c_void, counts: *const c_int, dt: Datatype, op: Op, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Ireduce_scatter", h);
        let laid = (|| {
            if counts.is_null() {
                return Err((MPI_ERR_ARG, "null count array".to_string()));
            }
            // SAFETY: one count per rank (the C caller's contract).
            let counts = unsafe { crate::state::c_array(counts, c.size() as c_int) };
            let counts: Vec<usize> = counts
                .iter()
                .map(|&n| usize::try_from(n))
                .collect::<Result<_, _>>()
                .map_err(|_| (MPI_ERR_COUNT, "negative count".to_string()))?;
            // SAFETY: the caller's buffers hold the blocks.
            unsafe { reduce_scatter(&c, send, recv, counts, dt, op, dt, false) }
        })();
        launch("MPI_Ireduce_scatter", h, &c, laid, req)
    }

    fn MPI_Igather / PMPI_Igather(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, root: c_int, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Igather", h);
        // SAFETY: the caller's buffers are as MPI says.
        let laid = unsafe { gather(&c, send, scount, stype, recv, || equal_blocks(&c, rcount, rtype), root) };
        launch("MPI_Igather", h, &c, laid, req)
    }

    fn MPI_Igatherv / PMPI_Igatherv(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcounts: *const c_int, displs: *const c_int, rtype: Datatype, root: c_int, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Igatherv", h);
        // SAFETY: the caller's buffers and arrays are as MPI says.
        let laid = unsafe { gather(&c, send, scount, stype, recv, || v_blocks(rcounts, displs, &c, rtype), root) };
        launch("MPI_Igatherv", h, &c, laid, req)
    }

    fn MPI_Iscatter / PMPI_Iscatter(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, root: c_int, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Iscatter", h);
        // SAFETY: the caller's buffers are as MPI says.
        let laid = unsafe { scatter(&c, send, || equal_blocks(&c, scount, stype), recv, rcount, rtype, root) };
        launch("MPI_Iscatter", h, &c, laid, req)
    }

    fn MPI_Iscatterv / PMPI_Iscatterv(send: *const c_void, scounts: *const c_int, displs: *const c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, root: c_int, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Iscatterv", h);
        // SAFETY: the caller's buffers and arrays are as MPI says.
        let laid = unsafe { scatter(&c, send, || v_blocks(scounts, displs, &c, stype), recv, rcount, rtype, root) };
        launch("MPI_Iscatterv", h, &c, laid, req)
    }

    fn MPI_Iallgather / PMPI_Iallgather(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Iallgather", h);
        // SAFETY: the caller's buffers are as MPI says.
        if let Some(laid) = unsafe { allgather_equal(&c, send, scount, stype, recv, rcount, rtype) } {
            return launch("MPI_Iallgather", h, &c, laid, req);
        }
        // SAFETY: the caller's buffers are as MPI says.
        let laid = equal_blocks(&c, rcount, rtype).and_then(|vb| unsafe { allgather(&c, send, scount, stype, recv, vb) });
        launch("MPI_Iallgather", h, &c, laid, req)
    }

    fn MPI_Iallgatherv / PMPI_Iallgatherv(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcounts: *const c_int, displs: *const c_int, rtype: Datatype, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Iallgatherv", h);
        // As in MPI_Ialltoallv.
        if !c.is_inter()
            // SAFETY: the caller's arrays hold one int per rank.
            && let Some(rk) = unsafe { equal_lists(rcounts, displs, c.size()) }
            // SAFETY: the caller's buffers are as MPI says.
            && let Some(laid) = unsafe { allgather_equal(&c, send, scount, stype, recv, rk, rtype) }
        {
            return launch("MPI_Iallgatherv", h, &c, laid, req);
        }
        // SAFETY: the caller's buffers and arrays are as MPI says.
        let laid = unsafe { v_blocks(rcounts, displs, &c, rtype) }.and_then(|vb| unsafe { allgather(&c, send, scount, stype, recv, vb) });
        launch("MPI_Iallgatherv", h, &c, laid, req)
    }

    fn MPI_Ialltoall / PMPI_Ialltoall(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Ialltoall", h);
        // SAFETY: the caller's buffers are as MPI says.
        if let Some(laid) = unsafe { alltoall_equal(&c, send, scount, stype, recv, rcount, rtype) } {
            return launch("MPI_Ialltoall", h, &c, laid, req);
        }
        let laid = (|| {
            let sb = if in_place(send) { None } else { Some(equal_blocks(&c, scount, stype)?) };
            let rb = equal_blocks(&c, rcount, rtype)?;
            // SAFETY: the caller's buffers are as MPI says.
            unsafe { alltoall(&c, send, sb, recv, rb) }
        })();
        launch("MPI_Ialltoall", h, &c, laid, req)
    }

    fn MPI_Ialltoallv / PMPI_Ialltoallv(send: *const c_void, scounts: *const c_int, sdispls: *const c_int, stype: Datatype, recv: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rtype: Datatype, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Ialltoallv", h);
        // Lists of equal blocks one after another: the plain call's layout
        // (the same transfers).
        if !c.is_inter() && !in_place(send)
            // SAFETY: the caller's arrays hold one int per rank.
            && let (Some(sk), Some(rk)) = unsafe { (equal_lists(scounts, sdispls, c.size()), equal_lists(rcounts, rdispls, c.size())) }
            // SAFETY: the caller's buffers are as MPI says.
            && let Some(laid) = unsafe { alltoall_equal(&c, send, sk, stype, recv, rk, rtype) }
        {
            return launch("MPI_Ialltoallv", h, &c, laid, req);
        }
        let laid = (|| {
            // SAFETY: the caller's arrays hold one int per peer.
            let sb = if in_place(send) { None } else { Some(unsafe { v_blocks(scounts, sdispls, &c, stype) }?) };
            // SAFETY: as above.
            let rb = unsafe { v_blocks(rcounts, rdispls, &c, rtype) }?;
            // SAFETY: the caller's buffers are as MPI says.
            unsafe { alltoall(&c, send, sb, recv, rb) }
        })();
        launch("MPI_Ialltoallv", h, &c, laid, req)
    }

    fn MPI_Ialltoallw / PMPI_Ialltoallw(send: *const c_void, scounts: *const c_int, sdispls: *const c_int, stypes: *const Datatype, recv: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rtypes: *const Datatype, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Ialltoallw", h);
        // SAFETY: the caller's buffers and arrays are as MPI says.
        if let Some(laid) = unsafe { alltoallw_predefined(&c, send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes) } {
            return launch("MPI_Ialltoallw", h, &c, laid, req);
        }
        // SAFETY: the caller's buffers and arrays are as MPI says.
        let laid = unsafe { alltoallw(&c, send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes) };
        launch("MPI_Ialltoallw", h, &c, laid, req)
    }

    fn MPI_Alltoallw / PMPI_Alltoallw(send: *const c_void, scounts: *const c_int, sdispls: *const c_int, stypes: *const Datatype, recv: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rtypes: *const Datatype, h: Comm) -> c_int {
        let c = comm_or_return!("MPI_Alltoallw", h);
        // SAFETY: the caller's buffers and arrays are as MPI says.
        if let Some(laid) = unsafe { alltoallw_predefined(&c, send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes) } {
            return launch_or_wait("MPI_Alltoallw", h, &c, laid, None);
        }
        // SAFETY: the caller's buffers and arrays are as MPI says.
        let laid = unsafe { alltoallw(&c, send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes) };
        launch_or_wait("MPI_Alltoallw", h, &c, laid, None)
    }

    fn MPI_Comm_idup / PMPI_Comm_idup(h: Comm, new: *mut Comm, req: *mut Request) -> c_int {
        idup("MPI_Comm_idup", h, new, req)
    }

    fn MPI_Comm_idup_with_info / PMPI_Comm_idup_with_info(h: Comm, _info: Info, new: *mut Comm, req: *mut Request) -> c_int {
        idup("MPI_Comm_idup_with_info", h, new, req)
    }
}

/// `MPI_Comm_idup`: the duplicate, made without communication from the
/// contexts its parent reserved (see `vpml::Comm::idup`), and a
/// completed request.
fn idup(func: &str, h: Comm, new: *mut Comm, req: *mut Request) -> c_int {
    if req.is_null() || new.is_null() {
        return error(h, func, MPI_ERR_ARG, "null argument");
    }
    let c = comm_or_return!(func, h);
    // Past the reserve, the members agree (under MPI_THREAD_MULTIPLE
    // without stopping the other threads).
    let d = match c.idup_reserved() {
        Some(Ok(d)) => d,
        Some(Err(e)) => return vpml_error(h, func, &e),
        None => match crate::agreement::dup(func, h, &c) {
            Ok(d) => d,
            Err(code) => return code,
        },
    };
    // A duplicate keeps the topology.
    let handle = crate::comm::register_with(h, d, crate::topo::topology_of(h));
    // SAFETY: a handle pointer (caller contract, checked non-null).
    unsafe { put(new, handle) };
    let rc = crate::comm::copied_attributes(h, handle, new, func);
    if rc != MPI_SUCCESS {
        return rc;
    }
    crate::p2p::completed_request(h, req)
}
