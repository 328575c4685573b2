//! Neighbourhood collectives (`MPI_Neighbor_allgather(v)`,
//! `MPI_Neighbor_alltoall(v,w)`, their nonblocking and persistent forms)
//! over a communicator's virtual topology: a block to each destination,
//! a block from each source, as the topology orders them
//! ([`crate::topo::neighbors`]); `MPI_PROC_NULL` neighbours (the edges of
//! a non-periodic grid) exchange nothing and leave their block alone.
//! They are laid out as the nonblocking collectives are, and the blocking
//! forms wait for their nonblocking twin.

use std::ffi::{c_int, c_void};

use super::VBlocks;
use super::nonblocking::{Laid, launch_or_wait, owned, transfer};
use crate::coll::Res;
use crate::consts::*;
use crate::topo::{Neighbors, neighbors};
use crate::types::Message;

/// The neighbours of this rank in `h`'s topology.
pub(super) fn of(c: &vpml::Comm, h: Comm) -> Res<Neighbors> {
    if c.is_inter() {
        return Err((MPI_ERR_COMM, "an intercommunicator has no topology".into()));
    }
    neighbors(h, c.rank())
}

/// `n` blocks of `count` elements of `dt`, one after the other.
pub(super) fn equal(n: usize, count: c_int, dt: Datatype) -> Res<VBlocks<'static>> {
    let counts = smallvec::smallvec![count; n];
    let displs: super::OwnedInts = (0..n)
        .map(|i| c_int::try_from(i).ok().and_then(|i| i.checked_mul(count)))
        .collect::<Option<_>>()
        .ok_or_else(|| {
            (
                MPI_ERR_COUNT,
                "count times the number of neighbours is too large".to_string(),
            )
        })?;
    VBlocks::owned(counts, displs, dt)
}

/// `n` blocks the caller's arrays describe.
///
/// # Safety
/// `counts` and `displs` hold `n` ints each.
pub(super) unsafe fn given(
    counts: *const c_int,
    displs: *const c_int,
    n: usize,
    dt: Datatype,
) -> Res<VBlocks<'static>> {
    // SAFETY: caller contract.
    Ok(unsafe { VBlocks::new(counts, displs, n, dt) }?.into_owned())
}

/// Receive block `i` of `recv` (as `rb` says) from source `i`: the
/// transfers, and the last step (unpacking, for a non-contiguous type).
///
/// # Safety
/// `recv` holds the blocks (the C caller's contract).
unsafe fn receive(
    sources: &[Option<usize>],
    recv: *mut c_void,
    rb: VBlocks<'static>,
) -> Res<(Vec<crate::state::AfterCollective>, Vec<vpml::raw::Transfer>)> {
    if let Some((lens, offs, span)) = rb.in_buffer() {
        // SAFETY: caller contract.
        let all = unsafe { super::user_bytes(recv, span) }?;
        let base = all.as_mut_ptr();
        let recvs = sources
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some(transfer((*s)?, base.wrapping_add(offs[i]), lens[i])))
            .collect();
        return Ok((Vec::new(), recvs));
    }
    let (lens, offs) = (rb.lens(), rb.offs());
    // Blocks no source fills keep what the buffer held.
    // SAFETY: caller contract.
    let mut all = unsafe { rb.pack(recv) };
    let base = all.as_mut_ptr();
    let recvs = sources
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some(transfer((*s)?, base.wrapping_add(offs[i]), lens[i])))
        .collect();
    let recv_addr = recv as usize;
    let after: crate::state::AfterCollective = Box::new(move || {
        // SAFETY: the caller's buffer holds the blocks until the request
        // completes (MPI's contract).
        unsafe { rb.unpack(&all, recv_addr as *mut c_void) };
        Ok(())
    });
    Ok((vec![after], recvs))
}

/// Send block `i` of `input` (packed, at `offs`/`lens`) to destination
/// `i`, in the topology's send order.
fn send_blocks(
    nb: &Neighbors,
    input: &[u8],
    offs: &[usize],
    lens: &[usize],
) -> Vec<vpml::raw::Transfer> {
    nb.send_order
        .iter()
        .filter_map(|&i| {
            Some(transfer(
                nb.destinations[i]?,
                input.as_ptr().wrapping_add(offs[i]),
                lens[i],
            ))
        })
        .collect()
}

/// The laid-out collective: sends, receives, and the memory and last
/// steps they need.
fn laid(
    sends: Vec<vpml::raw::Transfer>,
    recvs: Vec<vpml::raw::Transfer>,
    keep: Vec<u8>,
    afters: Vec<crate::state::AfterCollective>,
) -> Laid {
    Laid {
        sends: sends.into(),
        recvs: recvs.into(),
        own: None,
        after: Some(Box::new(move || {
            drop(keep);
            afters.into_iter().try_for_each(|a| a())
        })),
    }
}

/// Allgather: this rank's block to every destination.
///
/// # Safety
/// The caller's buffers hold what MPI says.
pub(super) unsafe fn allgather(
    nb: &Neighbors,
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    recv: *mut c_void,
    rb: VBlocks<'static>,
) -> Res<Laid> {
    // SAFETY: caller contract.
    let mine = unsafe { owned(send, scount, stype) }?;
    let n = nb.destinations.len();
    let sends = send_blocks(nb, &mine, &vec![0; n], &vec![mine.len(); n]);
    // SAFETY: caller contract.
    let (afters, recvs) = unsafe { receive(&nb.sources, recv, rb) }?;
    Ok(laid(sends, recvs, mine, afters))
}

/// Alltoall: block `i` of `send` (as `sb` says) to destination `i`.
///
/// # Safety
/// The caller's buffers hold what MPI says.
pub(super) unsafe fn alltoall(
    nb: &Neighbors,
    send: *const c_void,
    sb: VBlocks<'static>,
    recv: *mut c_void,
    rb: VBlocks<'static>,
) -> Res<Laid> {
    // SAFETY: caller contract.
    let input = unsafe { sb.pack(send) };
    let sends = send_blocks(nb, &input, &sb.offs(), &sb.lens());
    // SAFETY: caller contract.
    let (afters, recvs) = unsafe { receive(&nb.sources, recv, rb) }?;
    Ok(laid(sends, recvs, input, afters))
}

/// Alltoallw: to destination `i`, `scounts[i]` elements of `stypes[i]` at
/// byte `sdispls[i]` of `send`; from source `i`, likewise into `recv`.
///
/// # Safety
/// The arrays hold one entry per neighbour, the buffers what they say.
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(super) unsafe fn alltoallw(
    nb: &Neighbors,
    send: *const c_void,
    scounts: *const c_int,
    sdispls: *const Aint,
    stypes: *const Datatype,
    recv: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const Aint,
    rtypes: *const Datatype,
) -> Res<Laid> {
    let (ns, nd) = (nb.sources.len(), nb.destinations.len());
    let null = |p: bool, n: usize| -> Res {
        if p && n > 0 {
            return Err((MPI_ERR_ARG, "null count, displacement or type array".into()));
        }
        Ok(())
    };
    null(
        scounts.is_null() || sdispls.is_null() || stypes.is_null(),
        nd,
    )?;
    null(
        rcounts.is_null() || rdispls.is_null() || rtypes.is_null(),
        ns,
    )?;
    // SAFETY: one entry per neighbour (caller contract).
    let (sc, sd, st) = unsafe {
        (
            crate::state::c_array(scounts, nd as c_int),
            crate::state::c_array(sdispls, nd as c_int),
            crate::state::c_array(stypes, nd as c_int),
        )
    };
    // SAFETY: as above.
    let (rc, rd, rt) = unsafe {
        (
            crate::state::c_array(rcounts, ns as c_int),
            crate::state::c_array(rdispls, ns as c_int),
            crate::state::c_array(rtypes, ns as c_int),
        )
    };
    let at = |base: *const c_void, d: Aint| (base as *const u8).wrapping_offset(d) as *mut c_void;
    // Outgoing blocks packed and copied, one after the other.
    let mut input = Vec::new();
    let (mut offs, mut lens) = (Vec::with_capacity(nd), Vec::with_capacity(nd));
    for i in 0..nd {
        let block = match sc[i] {
            0 => Vec::new(),
            // SAFETY: caller contract.
            _ => unsafe { owned(at(send, sd[i]), sc[i], st[i]) }?,
        };
        offs.push(input.len());
        lens.push(block.len());
        input.extend_from_slice(&block);
    }
    let sends = send_blocks(nb, &input, &offs, &lens);
    let mut msgs = Vec::with_capacity(ns);
    for i in 0..ns {
        msgs.push(match rc[i] {
            0 => Message::Direct {
                ptr: std::ptr::NonNull::dangling().as_ptr(),
                len: 0,
            },
            // SAFETY: caller contract.
            _ => super::checked(unsafe { Message::new(at(recv, rd[i]), rc[i], rt[i], false) })?,
        });
    }
    let recvs = nb
        .sources
        .iter()
        .zip(msgs.iter_mut())
        .filter_map(|(s, m)| {
            let (ptr, len) = m.target();
            Some(transfer((*s)?, ptr, len))
        })
        .collect();
    let after: crate::state::AfterCollective = Box::new(move || {
        for m in &msgs {
            m.finish(None);
        }
        Ok(())
    });
    Ok(laid(sends, recvs, input, vec![after]))
}

/// The five collectives, each for a blocking call (`req`: `None`) or a
/// nonblocking one.
///
/// # Safety
/// The caller's buffers and arrays are as MPI says.
#[allow(clippy::too_many_arguments)] // MPI's own argument list
unsafe fn neighbor_allgather(
    func: &str,
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    recv: *mut c_void,
    rcount: c_int,
    rtype: Datatype,
    h: Comm,
    req: Option<*mut Request>,
) -> c_int {
    let c = comm_or_return!(func, h);
    let laid = (|| {
        let nb = of(&c, h)?;
        let rb = equal(nb.sources.len(), rcount, rtype)?;
        // SAFETY: caller contract.
        unsafe { allgather(&nb, send, scount, stype, recv, rb) }
    })();
    launch_or_wait(func, h, &c, laid, req)
}

/// # Safety
/// As [`neighbor_allgather`].
#[allow(clippy::too_many_arguments)] // MPI's own argument list
unsafe fn neighbor_allgatherv(
    func: &str,
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    recv: *mut c_void,
    rcounts: *const c_int,
    displs: *const c_int,
    rtype: Datatype,
    h: Comm,
    req: Option<*mut Request>,
) -> c_int {
    let c = comm_or_return!(func, h);
    let laid = (|| {
        let nb = of(&c, h)?;
        // SAFETY: caller contract.
        let rb = unsafe { given(rcounts, displs, nb.sources.len(), rtype) }?;
        // SAFETY: caller contract.
        unsafe { allgather(&nb, send, scount, stype, recv, rb) }
    })();
    launch_or_wait(func, h, &c, laid, req)
}

/// # Safety
/// As [`neighbor_allgather`].
#[allow(clippy::too_many_arguments)] // MPI's own argument list
unsafe fn neighbor_alltoall(
    func: &str,
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    recv: *mut c_void,
    rcount: c_int,
    rtype: Datatype,
    h: Comm,
    req: Option<*mut Request>,
) -> c_int {
    let c = comm_or_return!(func, h);
    let laid = (|| {
        let nb = of(&c, h)?;
        let sb = equal(nb.destinations.len(), scount, stype)?;
        let rb = equal(nb.sources.len(), rcount, rtype)?;
        // SAFETY: caller contract.
        unsafe { alltoall(&nb, send, sb, recv, rb) }
    })();
    launch_or_wait(func, h, &c, laid, req)
}

/// # Safety
/// As [`neighbor_allgather`].
#[allow(clippy::too_many_arguments)] // MPI's own argument list
unsafe fn neighbor_alltoallv(
    func: &str,
    send: *const c_void,
    scounts: *const c_int,
    sdispls: *const c_int,
    stype: Datatype,
    recv: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rtype: Datatype,
    h: Comm,
    req: Option<*mut Request>,
) -> c_int {
    let c = comm_or_return!(func, h);
    let laid = (|| {
        let nb = of(&c, h)?;
        // SAFETY: caller contract.
        let sb = unsafe { given(scounts, sdispls, nb.destinations.len(), stype) }?;
        // SAFETY: caller contract.
        let rb = unsafe { given(rcounts, rdispls, nb.sources.len(), rtype) }?;
        // SAFETY: caller contract.
        unsafe { alltoall(&nb, send, sb, recv, rb) }
    })();
    launch_or_wait(func, h, &c, laid, req)
}

/// # Safety
/// As [`neighbor_allgather`].
#[allow(clippy::too_many_arguments)] // MPI's own argument list
unsafe fn neighbor_alltoallw(
    func: &str,
    send: *const c_void,
    scounts: *const c_int,
    sdispls: *const Aint,
    stypes: *const Datatype,
    recv: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const Aint,
    rtypes: *const Datatype,
    h: Comm,
    req: Option<*mut Request>,
) -> c_int {
    let c = comm_or_return!(func, h);
    let laid = (|| {
        let nb = of(&c, h)?;
        // SAFETY: caller contract.
        unsafe {
            alltoallw(
                &nb, send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes,
            )
        }
    })();
    launch_or_wait(func, h, &c, laid, req)
}

export! {
    fn MPI_Neighbor_allgather / PMPI_Neighbor_allgather(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, h: Comm) -> c_int {
        // SAFETY: the C caller's buffers and arrays (here and below).
        unsafe { neighbor_allgather("MPI_Neighbor_allgather", send, scount, stype, recv, rcount, rtype, h, None) }
    }

    fn MPI_Ineighbor_allgather / PMPI_Ineighbor_allgather(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, h: Comm, req: *mut Request) -> c_int {
        // SAFETY: as above.
        unsafe { neighbor_allgather("MPI_Ineighbor_allgather", send, scount, stype, recv, rcount, rtype, h, Some(req)) }
    }

    fn MPI_Neighbor_allgatherv / PMPI_Neighbor_allgatherv(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcounts: *const c_int, displs: *const c_int, rtype: Datatype, h: Comm) -> c_int {
        // SAFETY: as above.
        unsafe { neighbor_allgatherv("MPI_Neighbor_allgatherv", send, scount, stype, recv, rcounts, displs, rtype, h, None) }
    }

    fn MPI_Ineighbor_allgatherv / PMPI_Ineighbor_allgatherv(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcounts: *const c_int, displs: *const c_int, rtype: Datatype, h: Comm, req: *mut Request) -> c_int {
        // SAFETY: as above.
        unsafe { neighbor_allgatherv("MPI_Ineighbor_allgatherv", send, scount, stype, recv, rcounts, displs, rtype, h, Some(req)) }
    }

    fn MPI_Neighbor_alltoall / PMPI_Neighbor_alltoall(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, h: Comm) -> c_int {
        // SAFETY: as above.
        unsafe { neighbor_alltoall("MPI_Neighbor_alltoall", send, scount, stype, recv, rcount, rtype, h, None) }
    }

    fn MPI_Ineighbor_alltoall / PMPI_Ineighbor_alltoall(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, h: Comm, req: *mut Request) -> c_int {
        // SAFETY: as above.
        unsafe { neighbor_alltoall("MPI_Ineighbor_alltoall", send, scount, stype, recv, rcount, rtype, h, Some(req)) }
    }

    fn MPI_Neighbor_alltoallv / PMPI_Neighbor_alltoallv(send: *const c_void, scounts: *const c_int, sdispls: *const c_int, stype: Datatype, recv: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rtype: Datatype, h: Comm) -> c_int {
        // SAFETY: as above.
        unsafe { neighbor_alltoallv("MPI_Neighbor_alltoallv", send, scounts, sdispls, stype, recv, rcounts, rdispls, rtype, h, None) }
    }

    fn MPI_Ineighbor_alltoallv / PMPI_Ineighbor_alltoallv(send: *const c_void, scounts: *const c_int, sdispls: *const c_int, stype: Datatype, recv: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rtype: Datatype, h: Comm, req: *mut Request) -> c_int {
        // SAFETY: as above.
        unsafe { neighbor_alltoallv("MPI_Ineighbor_alltoallv", send, scounts, sdispls, stype, recv, rcounts, rdispls, rtype, h, Some(req)) }
    }

    fn MPI_Neighbor_alltoallw / PMPI_Neighbor_alltoallw(send: *const c_void, scounts: *const c_int, sdispls: *const Aint, stypes: *const Datatype, recv: *mut c_void, rcounts: *const c_int, rdispls: *const Aint, rtypes: *const Datatype, h: Comm) -> c_int {
        // SAFETY: as above.
        unsafe { neighbor_alltoallw("MPI_Neighbor_alltoallw", send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes, h, None) }
    }

    fn MPI_Ineighbor_alltoallw / PMPI_Ineighbor_alltoallw(send: *const c_void, scounts: *const c_int, sdispls: *const Aint, stypes: *const Datatype, recv: *mut c_void, rcounts: *const c_int, rdispls: *const Aint, rtypes: *const Datatype, h: Comm, req: *mut Request) -> c_int {
        // SAFETY: as above.
        unsafe { neighbor_alltoallw("MPI_Ineighbor_alltoallw", send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes, h, Some(req)) }
    }
}
