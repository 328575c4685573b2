//! Persistent collectives (MPI 4.0's `MPI_Bcast_init` … `MPI_Barrier_init`):
//! each keeps its arguments and, at every `MPI_Start`, is laid out and
//! started as its nonblocking twin. Derived datatypes are copied when the
//! request is made (the program may free its own), and released with it.

use std::ffi::{c_int, c_void};

use super::neighbor;
use super::nonblocking::{
    Laid, allgather, alltoall, alltoallw, barrier, bcast, equal_blocks, gather, reduce,
    reduce_scatter, scan, scatter, start_laid, v_blocks,
};
use crate::coll::Res;
use crate::consts::*;
use crate::state::{
    Persistent, PersistentCollective, ReqEntry, STATE, comm, error, put, request_handle,
    request_slot, vpml_error,
};
use crate::types::private_copy;

/// `MPI_Start` of persistent collective `req`, made on communicator `h`
/// (`on`) with lane `lane`, laid out by `lay`.
pub(crate) fn start_persistent(
    req: Request,
    h: Comm,
    on: &crate::state::SharedComm,
    lane: u32,
    lay: &dyn Fn() -> Res<Laid>,
) -> c_int {
    let laid = match lay() {
        Ok(l) => l,
        Err((code, why)) => return error(h, "MPI_Start", code, &why),
    };
    match start_laid(on, laid, lane) {
        Ok((active, after)) => {
            STATE.with(|s| {
                let mut s = s.borrow_mut();
                if let Some(e) = request_slot(req).and_then(|i| s.requests.get_mut(i)) {
                    e.active = Some(active);
                    e.collective = true;
                    e.more_mut().after = after;
                }
            });
            MPI_SUCCESS
        }
        Err(e) => vpml_error(h, "MPI_Start", &e),
    }
}

/// Make persistent collective `lay` on `h`, keeping `types` (private
/// copies, released with the request); its handle goes to `req`.
fn make(
    func: &str,
    h: Comm,
    req: *mut Request,
    types: Vec<Datatype>,
    lay: impl Fn(&vpml::Comm, &[Datatype]) -> Res<Laid> + 'static,
) -> c_int {
    let c = match comm(func, h) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if req.is_null() {
        return error(h, func, MPI_ERR_REQUEST, "null request pointer");
    }
    let kept: Vec<Datatype> = types
        .iter()
        .map(|&t| private_copy(t).unwrap_or(t))
        .collect();
    let copies: Vec<Datatype> = kept
        .iter()
        .zip(&types)
        .filter(|(k, t)| k != t)
        .map(|(&k, _)| k)
        .collect();
    let on = c.clone();
    // Its lane: the next on the communicator, alike at every member (MPI
    // has them make their persistent collectives in the same order).
    let lane = STATE.with(|s| {
        let mut s = s.borrow_mut();
        let e = crate::state::comm_slot(h).and_then(|i| s.comms.get_mut(i)?.as_mut())?;
        e.persistent_collectives = e.persistent_collectives.wrapping_add(1);
        Some(e.persistent_collectives)
    });
    let Some(lane) = lane else {
        return error(h, func, MPI_ERR_COMM, "invalid communicator");
    };
    let entry = ReqEntry::persistent_op(
        h,
        Persistent::Collective(PersistentCollective {
            on: c,
            lay: std::rc::Rc::new(move || lay(&on, &kept)),
            types: copies,
            lane,
            keep: Vec::new(),
        }),
    );
    let i = STATE.with(|s| s.borrow_mut().requests.insert(entry));
    // SAFETY: a request handle pointer (caller contract, checked non-null).
    unsafe { put(req, request_handle(i)) };
    MPI_SUCCESS
}

/// The `n` datatypes of an `MPI_Alltoallw` (`None`: a null array).
///
/// # Safety
/// `types` holds `n` (the C caller's contract).
unsafe fn type_array(types: *const Datatype, n: usize) -> Option<Vec<Datatype>> {
    if types.is_null() && n > 0 {
        return None;
    }
    // SAFETY: caller contract.
    Some(unsafe { crate::state::c_array(types, n as c_int) }.to_vec())
}

export! {
    fn MPI_Barrier_init / PMPI_Barrier_init(h: Comm, _info: Info, req: *mut Request) -> c_int {
        make("MPI_Barrier_init", h, req, Vec::new(), |c, _| Ok(barrier(c)))
    }

    fn MPI_Bcast_init / PMPI_Bcast_init(buf: *mut c_void, count: c_int, dt: Datatype, root: c_int, h: Comm, _info: Info, req: *mut Request) -> c_int {
        // SAFETY (every closure below): the caller's buffers and arrays
        // stay as MPI says until the request is freed.
        make("MPI_Bcast_init", h, req, vec![dt], move |c, t| {
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe { bcast(c, buf, count, t[0], root) }
        })
    }

    fn MPI_Reduce_init / PMPI_Reduce_init(send: *const c_void, recv: *mut c_void, count: c_int, dt: Datatype, op: Op, root: c_int, h: Comm, _info: Info, req: *mut Request) -> c_int {
        make("MPI_Reduce_init", h, req, vec![dt], move |c, t| {
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe { reduce(c, send, recv, count, t[0], op, dt, root, false) }
        })
    }

    fn MPI_Allreduce_init / PMPI_Allreduce_init(send: *const c_void, recv: *mut c_void, count: c_int, dt: Datatype, op: Op, h: Comm, _info: Info, req: *mut Request) -> c_int {
        make("MPI_Allreduce_init", h, req, vec![dt], move |c, t| {
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe { reduce(c, send, recv, count, t[0], op, dt, 0, true) }
        })
    }

    fn MPI_Scan_init / PMPI_Scan_init(send: *const c_void, recv: *mut c_void, count: c_int, dt: Datatype, op: Op, h: Comm, _info: Info, req: *mut Request) -> c_int {
        make("MPI_Scan_init", h, req, vec![dt], move |c, t| {
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe { scan(c, send, recv, count, t[0], op, dt, true) }
        })
    }

    fn MPI_Exscan_init / PMPI_Exscan_init(send: *const c_void, recv: *mut c_void, count: c_int, dt: Datatype, op: Op, h: Comm, _info: Info, req: *mut Request) -> c_int {
        make("MPI_Exscan_init", h, req, vec![dt], move |c, t| {
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe { scan(c, send, recv, count, t[0], op, dt, false) }
        })
    }

    fn MPI_Reduce_scatter_block_init / PMPI_Reduce_scatter_block_init(send: *const c_void, recv: *mut c_void, count: c_int, dt: Datatype, op: Op, h: Comm, _info: Info, req: *mut Request) -> c_int {
        make("MPI_Reduce_scatter_block_init", h, req, vec![dt], move |c, t| {
            let n = usize::try_from(count).map_err(|_| (MPI_ERR_COUNT, "negative count".to_string()))?;
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe { reduce_scatter(c, send, recv, vec![n; c.size()], t[0], op, dt, true) }
        })
    }

    fn MPI_Reduce_scatter_init / PMPI_Reduce_scatter_init(send: *const c_void, recv: *mut c_void, counts: *const c_int, dt: Datatype, op: Op, h: Comm, _info: Info, req: *mut Request) -> c_int {
        make("MPI_Reduce_scatter_init", h, req, vec![dt], move |c, t| {
            if counts.is_null() {
                return Err((MPI_ERR_ARG, "null count array".to_string()));
            }
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            let counts: Vec<usize> = unsafe { crate::state::c_array(counts, c.size() as c_int) }
                .iter()
                .map(|&n| usize::try_from(n))
                .collect::<Result<_, _>>()
                .map_err(|_| (MPI_ERR_COUNT, "negative count".to_string()))?;
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe { reduce_scatter(c, send, recv, counts, t[0], op, dt, false) }
        })
    }

    fn MPI_Gather_init / PMPI_Gather_init(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, root: c_int, h: Comm, _info: Info, req: *mut Request) -> c_int {
        make("MPI_Gather_init", h, req, vec![stype, rtype], move |c, t| {
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe {
                gather(c, send, scount, t[0], recv, || equal_blocks(c, rcount, t[1]), root)
            }
        })
    }

    fn MPI_Gatherv_init / PMPI_Gatherv_init(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcounts: *const c_int, displs: *const c_int, rtype: Datatype, root: c_int, h: Comm, _info: Info, req: *mut Request) -> c_int {
        make("MPI_Gatherv_init", h, req, vec![stype, rtype], move |c, t| {
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe {
                gather(c, send, scount, t[0], recv, || v_blocks(rcounts, displs, c, t[1]), root)
            }
        })
    }

    fn MPI_Scatter_init / PMPI_Scatter_init(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, root: c_int, h: Comm, _info: Info, req: *mut Request) -> c_int {
        make("MPI_Scatter_init", h, req, vec![stype, rtype], move |c, t| {
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe {
                scatter(c, send, || equal_blocks(c, scount, t[0]), recv, rcount, t[1], root)
            }
        })
    }

    fn MPI_Scatterv_init / PMPI_Scatterv_init(send: *const c_void, scounts: *const c_int, displs: *const c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, root: c_int, h: Comm, _info: Info, req: *mut Request) -> c_int {
        make("MPI_Scatterv_init", h, req, vec![stype, rtype], move |c, t| {
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe {
                scatter(c, send, || v_blocks(scounts, displs, c, t[0]), recv, rcount, t[1], root)
            }
        })
    }

    fn MPI_Allgather_init / PMPI_Allgather_init(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, h: Comm, _info: Info, req: *mut Request) -> c_int {
        make("MPI_Allgather_init", h, req, vec![stype, rtype], move |c, t| {
            let vb = equal_blocks(c, rcount, t[1])?;
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe { allgather(c, send, scount, t[0], recv, vb) }
        })
    }

    fn MPI_Allgatherv_init / PMPI_Allgatherv_init(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcounts: *const c_int, displs: *const c_int, rtype: Datatype, h: Comm, _info: Info, req: *mut Request) -> c_int {
        make("MPI_Allgatherv_init", h, req, vec![stype, rtype], move |c, t| {
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            let vb = unsafe { v_blocks(rcounts, displs, c, t[1]) }?;
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe { allgather(c, send, scount, t[0], recv, vb) }
        })
    }

    fn MPI_Alltoall_init / PMPI_Alltoall_init(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, h: Comm, _info: Info, req: *mut Request) -> c_int {
        make("MPI_Alltoall_init", h, req, vec![stype, rtype], move |c, t| {
            let sb = if in_place(send) { None } else { Some(equal_blocks(c, scount, t[0])?) };
            let rb = equal_blocks(c, rcount, t[1])?;
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe { alltoall(c, send, sb, recv, rb) }
        })
    }

    fn MPI_Alltoallv_init / PMPI_Alltoallv_init(send: *const c_void, scounts: *const c_int, sdispls: *const c_int, stype: Datatype, recv: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rtype: Datatype, h: Comm, _info: Info, req: *mut Request) -> c_int {
        make("MPI_Alltoallv_init", h, req, vec![stype, rtype], move |c, t| {
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            let sb = if in_place(send) { None } else { Some(unsafe { v_blocks(scounts, sdispls, c, t[0]) }?) };
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            let rb = unsafe { v_blocks(rcounts, rdispls, c, t[1]) }?;
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe { alltoall(c, send, sb, recv, rb) }
        })
    }

    fn MPI_Alltoallw_init / PMPI_Alltoallw_init(send: *const c_void, scounts: *const c_int, sdispls: *const c_int, stypes: *const Datatype, recv: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rtypes: *const Datatype, h: Comm, _info: Info, req: *mut Request) -> c_int {
        // The types, copied now: the first half sent, the second received.
        let n = match comm("MPI_Alltoallw_init", h) {
            Ok(c) if c.is_inter() => c.remote_size(),
            Ok(c) => c.size(),
            Err(code) => return code,
        };
        // SAFETY: one type per peer in each array (caller contract).
        let (st, rt) = unsafe { (type_array(stypes, n), type_array(rtypes, n)) };
        let all: Vec<Datatype> = match (in_place(send), st, rt) {
            (true, _, Some(rt)) => rt.iter().chain(&rt).copied().collect(),
            (false, Some(st), Some(rt)) => st.into_iter().chain(rt).collect(),
            _ => return error(h, "MPI_Alltoallw_init", MPI_ERR_ARG, "null datatype array"),
        };
        make("MPI_Alltoallw_init", h, req, all, move |c, t| {
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe {
                alltoallw(c, send, scounts, sdispls, t[..n].as_ptr(), recv, rcounts, rdispls, t[n..].as_ptr())
            }
        })
    }

    fn MPI_Neighbor_allgather_init / PMPI_Neighbor_allgather_init(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, h: Comm, _info: Info, req: *mut Request) -> c_int {
        let nb = match neighbors_of("MPI_Neighbor_allgather_init", h) { Ok(nb) => nb, Err(code) => return code };
        make("MPI_Neighbor_allgather_init", h, req, vec![stype, rtype], move |_, t| {
            let rb = neighbor::equal(nb.sources.len(), rcount, t[1])?;
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe { neighbor::allgather(&nb, send, scount, t[0], recv, rb) }
        })
    }

    fn MPI_Neighbor_allgatherv_init / PMPI_Neighbor_allgatherv_init(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcounts: *const c_int, displs: *const c_int, rtype: Datatype, h: Comm, _info: Info, req: *mut Request) -> c_int {
        let nb = match neighbors_of("MPI_Neighbor_allgatherv_init", h) { Ok(nb) => nb, Err(code) => return code };
        make("MPI_Neighbor_allgatherv_init", h, req, vec![stype, rtype], move |_, t| {
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            let rb = unsafe { neighbor::given(rcounts, displs, nb.sources.len(), t[1]) }?;
            // SAFETY: as above.
            unsafe { neighbor::allgather(&nb, send, scount, t[0], recv, rb) }
        })
    }

    fn MPI_Neighbor_alltoall_init / PMPI_Neighbor_alltoall_init(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, h: Comm, _info: Info, req: *mut Request) -> c_int {
        let nb = match neighbors_of("MPI_Neighbor_alltoall_init", h) { Ok(nb) => nb, Err(code) => return code };
        make("MPI_Neighbor_alltoall_init", h, req, vec![stype, rtype], move |_, t| {
            let sb = neighbor::equal(nb.destinations.len(), scount, t[0])?;
            let rb = neighbor::equal(nb.sources.len(), rcount, t[1])?;
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe { neighbor::alltoall(&nb, send, sb, recv, rb) }
        })
    }

    fn MPI_Neighbor_alltoallv_init / PMPI_Neighbor_alltoallv_init(send: *const c_void, scounts: *const c_int, sdispls: *const c_int, stype: Datatype, recv: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rtype: Datatype, h: Comm, _info: Info, req: *mut Request) -> c_int {
        let nb = match neighbors_of("MPI_Neighbor_alltoallv_init", h) { Ok(nb) => nb, Err(code) => return code };
        make("MPI_Neighbor_alltoallv_init", h, req, vec![stype, rtype], move |_, t| {
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            let sb = unsafe { neighbor::given(scounts, sdispls, nb.destinations.len(), t[0]) }?;
            // SAFETY: as above.
            let rb = unsafe { neighbor::given(rcounts, rdispls, nb.sources.len(), t[1]) }?;
            // SAFETY: as above.
            unsafe { neighbor::alltoall(&nb, send, sb, recv, rb) }
        })
    }

    fn MPI_Neighbor_alltoallw_init / PMPI_Neighbor_alltoallw_init(send: *const c_void, scounts: *const c_int, sdispls: *const Aint, stypes: *const Datatype, recv: *mut c_void, rcounts: *const c_int, rdispls: *const Aint, rtypes: *const Datatype, h: Comm, _info: Info, req: *mut Request) -> c_int {
        let nb = match neighbors_of("MPI_Neighbor_alltoallw_init", h) { Ok(nb) => nb, Err(code) => return code };
        let (nd, ns) = (nb.destinations.len(), nb.sources.len());
        // The types, copied now: the destinations', then the sources'.
        // SAFETY: one type per neighbour in each array (caller contract).
        let all: Vec<Datatype> = match unsafe { (type_array(stypes, nd), type_array(rtypes, ns)) } {
            (Some(st), Some(rt)) => st.into_iter().chain(rt).collect(),
            _ => return error(h, "MPI_Neighbor_alltoallw_init", MPI_ERR_ARG, "null datatype array"),
        };
        make("MPI_Neighbor_alltoallw_init", h, req, all, move |_, t| {
            // SAFETY: the caller's buffers and arrays stay as MPI says until the request is freed.
            unsafe { neighbor::alltoallw(&nb, send, scounts, sdispls, t[..nd].as_ptr(), recv, rcounts, rdispls, t[nd..].as_ptr()) }
        })
    }
}

/// The neighbours of this rank in `h`'s topology, or `func`'s error.
fn neighbors_of(func: &str, h: Comm) -> Result<crate::topo::Neighbors, c_int> {
    let c = comm(func, h)?;
    neighbor::of(&c, h).map_err(|(code, why)| error(h, func, code, &why))
}
