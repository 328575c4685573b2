//! The common case of the all-to-alls and allgathers (`MPI_Ialltoall(v,w)`,
//! `MPI_Iallgather(v)`, `MPI_Alltoallw`, and the blocking ones under
//! `MPI_THREAD_MULTIPLE`): blocks of predefined datatypes in the caller's
//! buffers, on an intracommunicator, not in place. Each block's bytes are
//! then found by arithmetic, so the layout is a loop over the peers, with
//! no block list built and no datatype looked up (on 2 ranks that list was
//! half of what a small `MPI_Ialltoall` cost). Every other case returns
//! `None` and takes the general layouts in `movement`, which also name
//! the errors.

use std::ffi::{c_int, c_void};

use super::super::{user_bytes, user_bytes_ref};
use super::movement::size_mismatch;
use super::*;
use crate::coll::Res;
use crate::rma::overlap;

/// Bytes of one block of `count` elements of predefined datatype `dt`,
/// when `n` such blocks are countable in an int (as the general path
/// requires); `None` for any other datatype or count.
fn block_len(count: c_int, dt: Datatype, n: usize) -> Option<usize> {
    let size = crate::types::predefined_size(dt).filter(|&s| s > 0)?;
    let count = usize::try_from(count).ok()?;
    if count.checked_mul(n)? > c_int::MAX as usize {
        return None;
    }
    count.checked_mul(size)
}

/// [`alltoall`]'s common case: block `i` of `send` straight to peer `i`,
/// block `i` of `recv` straight from it, this rank's own block copied.
///
/// # Safety
/// The caller's buffers hold what MPI says they hold.
pub(in crate::coll) unsafe fn alltoall_equal(
    c: &vpml::Comm,
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    recv: *mut c_void,
    rcount: c_int,
    rtype: Datatype,
) -> Option<Res<Laid>> {
    // (The same buffer twice is an error the general path names.)
    if c.is_inter() || in_place(send) || std::ptr::eq(send, recv) {
        return None;
    }
    let (n, me) = (c.size(), c.rank());
    let (slen, rlen) = (block_len(scount, stype, n)?, block_len(rcount, rtype, n)?);
    let (sspan, rspan) = (slen * n, rlen * n);
    if overlap(send.cast(), sspan, recv.cast(), rspan) {
        return None;
    }
    Some((|| {
        // SAFETY: caller contract.
        let (input, all) = unsafe { (user_bytes_ref(send, sspan)?, user_bytes(recv, rspan)?) };
        let (inp, out) = (input.as_ptr(), all.as_mut_ptr());
        // SAFETY: blocks of the program's buffers, which are apart.
        let (own, mismatch) =
            unsafe { own_block(inp.add(me * slen), slen, out.add(me * rlen), rlen) };
        Ok(Laid {
            sends: others(c)
                .map(|i| transfer(i, inp.wrapping_add(i * slen), slen))
                .collect(),
            recvs: others(c)
                .map(|i| transfer(i, out.wrapping_add(i * rlen), rlen))
                .collect(),
            own,
            after: None,
        }
        .ending_with(mismatch))
    })())
}

/// [`allgather`]'s common case: `send` straight to every peer, block `i`
/// of `recv` straight from peer `i`, this rank's own block copied.
///
/// # Safety
/// The caller's buffers hold what MPI says they hold.
pub(in crate::coll) unsafe fn allgather_equal(
    c: &vpml::Comm,
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    recv: *mut c_void,
    rcount: c_int,
    rtype: Datatype,
) -> Option<Res<Laid>> {
    if c.is_inter() || in_place(send) {
        return None;
    }
    let (n, me) = (c.size(), c.rank());
    let (slen, rlen) = (block_len(scount, stype, 1)?, block_len(rcount, rtype, n)?);
    let rspan = rlen * n;
    if overlap(send.cast(), slen, recv.cast(), rspan) {
        return None;
    }
    Some((|| {
        // SAFETY: caller contract.
        let (mine, all) = unsafe { (user_bytes_ref(send, slen)?, user_bytes(recv, rspan)?) };
        let (inp, out) = (mine.as_ptr(), all.as_mut_ptr());
        // SAFETY: blocks of the program's buffers, which are apart.
        let (own, mismatch) = unsafe { own_block(inp, slen, out.add(me * rlen), rlen) };
        Ok(Laid {
            sends: others(c).map(|i| transfer(i, inp, slen)).collect(),
            recvs: others(c)
                .map(|i| transfer(i, out.wrapping_add(i * rlen), rlen))
                .collect(),
            own,
            after: None,
        }
        .ending_with(mismatch))
    })())
}

/// [`alltoallw`]'s common case: every block of a predefined datatype (or
/// empty), straight between the program's buffers and the peers, this
/// rank's own block copied.
///
/// # Safety
/// The arrays hold one entry per rank, the buffers what they describe
/// (the C caller's contract).
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(in crate::coll) unsafe fn alltoallw_predefined(
    c: &vpml::Comm,
    send: *const c_void,
    scounts: *const c_int,
    sdispls: *const c_int,
    stypes: *const Datatype,
    recv: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rtypes: *const Datatype,
) -> Option<Res<Laid>> {
    let arrays = [scounts, sdispls, stypes, rcounts, rdispls, rtypes];
    if c.is_inter() || in_place(send) || arrays.iter().any(|a| a.is_null()) {
        return None;
    }
    let (n, me) = (c.size(), c.rank());
    // SAFETY: one entry per rank each (caller contract).
    let [sc, sd, st, rc, rd, rt] = arrays.map(|a| unsafe { crate::state::c_array(a, n as c_int) });
    // Block `i` of `base` as `count`, `displ` and `ty` say: its address
    // and bytes, if of a predefined datatype (or empty).
    let block = |base: *const c_void, (count, displ, ty): (&[c_int], &[c_int], &[c_int]), i| {
        let len = match count[i] {
            0 => 0,
            k => block_len(k, ty[i], 1)?,
        };
        if len > 0 && base.is_null() {
            return None;
        }
        Some(((base as *const u8).wrapping_offset(displ[i] as isize), len))
    };
    let (outgoing, incoming) = ((sc, sd, st), (rc, rd, rt));
    let mut sends = Transfers::new();
    let mut recvs = Transfers::new();
    let mut own = None;
    for i in 0..n {
        let (from, slen) = block(send, outgoing, i)?;
        let (into, rlen) = block(recv, incoming, i)?;
        if i == me {
            own = Some((from, slen, into, rlen));
        } else {
            sends.push(transfer(i, from, slen));
            recvs.push(transfer(i, into, rlen));
        }
    }
    let (from, slen, into, rlen) = own?;
    // (Overlapping own blocks are erroneous: left to the general path.)
    if overlap(from, slen, into, rlen) {
        return None;
    }
    // SAFETY: both blocks lie in the program's buffers (caller contract),
    // apart (checked above).
    let (own, mismatch) = unsafe { own_block(from, slen, into as *mut u8, rlen) };
    Some(Ok(Laid {
        sends,
        recvs,
        own,
        after: None,
    }
    .ending_with(mismatch)))
}

/// This rank's own block, `slen` bytes at `from` into `rlen` bytes at
/// `to`: copied once the transfers have started, or (sizes that differ)
/// the error the request ends with.
///
/// # Safety
/// As [`OwnCopy::new`], for `slen` bytes.
unsafe fn own_block(
    from: *const u8,
    slen: usize,
    to: *mut u8,
    rlen: usize,
) -> (Option<OwnCopy>, Option<(c_int, String)>) {
    if slen != rlen {
        return (None, Some(size_mismatch(slen, rlen)));
    }
    // SAFETY: the caller's contract.
    (Some(unsafe { OwnCopy::new(from, to, slen) }), None)
}
