//! The bodies of gather, scatter, allgather and alltoall on equal
//! blocks, shared by the plain calls and by their `v` twins when the
//! lists describe equal blocks one after another ([`equal_lists`]).

use std::ffi::{c_int, c_void};

use super::{
    Contribution, Message, checked, from_vpml, in_place, no_in_place_on_inter, not_aliased,
    peer_count, root_of,
};
use crate::consts::{Datatype, MPI_ERR_COUNT};

/// The count of every block when `counts` and `displs` (`n` ints each)
/// lay out equal blocks one after another, the layout of the collective
/// without `v`, which then runs instead (a `v` collective's own lists
/// cost more than its messages when they are small). MPI defines the two
/// alike for such a layout, and vpml's algorithms for both send the same
/// messages (each plain collective in `pml/src/collective/` runs its `v`
/// twin's algorithm without the lists), so ranks that decide differently
/// (each sees its own lists) still meet.
///
/// # Safety
/// Non-null arrays hold `n` ints each (the C caller's contract).
pub(super) unsafe fn equal_lists(
    counts: *const c_int,
    displs: *const c_int,
    n: usize,
) -> Option<c_int> {
    if n == 0 || counts.is_null() || displs.is_null() {
        return None;
    }
    // SAFETY: caller contract.
    let (counts, displs) = unsafe {
        (
            std::slice::from_raw_parts(counts, n),
            std::slice::from_raw_parts(displs, n),
        )
    };
    let k = counts[0];
    // (Zero counts keep the `v` path and its checks: its lists may then
    // name any displacement and datatype. All blocks together must be
    // countable in an int, as the plain call's are.)
    let countable = i64::from(k) * n as i64 <= i64::from(c_int::MAX);
    let equal = k > 0
        && countable
        && counts
            .iter()
            .zip(displs)
            .enumerate()
            .all(|(i, (&c, &d))| c == k && i64::from(d) == i as i64 * i64::from(k));
    equal.then_some(k)
}

/// The elements of `n` blocks of `count`: an error, not a wrong count,
/// when they are more than an int holds (one message describes them).
fn all_blocks(count: c_int, n: usize) -> Result<c_int, (c_int, String)> {
    c_int::try_from(n)
        .ok()
        .and_then(|n| count.checked_mul(n))
        .ok_or_else(|| {
            (
                MPI_ERR_COUNT,
                format!("{n} blocks of {count} elements are more than 2^31 - 1 elements in all"),
            )
        })
}

/// `MPI_Gather` on an intra-communicator (and `MPI_Gatherv` with
/// [`equal_lists`]).
///
/// # Safety
/// The caller's buffers are as MPI says.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gather_blocks(
    c: &vpml::Comm,
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    recv: *mut c_void,
    rcount: c_int,
    rtype: Datatype,
    root: c_int,
) -> Result<(), (c_int, String)> {
    let root = root_of(c, root)?;
    let n = c.size();
    if c.rank() != root {
        // SAFETY: the caller's buffer holds `scount` elements.
        let mut m = checked(unsafe { Message::new(send, scount, stype, true) })?;
        return from_vpml(c.gather(m.bytes(), &mut [], root));
    }
    not_aliased(send, recv)?;
    // SAFETY: at the root `recv` holds n·rcount elements.
    let mut out =
        checked(unsafe { Message::new(recv, all_blocks(rcount, n)?, rtype, in_place(send)) })?;
    let all = out.bytes();
    let block = all.len() / n.max(1);
    // SAFETY: the caller's buffer holds `scount` elements.
    let mut mine = unsafe {
        Contribution::new(send, scount, stype, || {
            all[root * block..(root + 1) * block].to_vec()
        })
    }?;
    from_vpml(c.gather(mine.bytes(), all, root))?;
    out.finish(None);
    Ok(())
}

/// `MPI_Scatter` on an intra-communicator (and `MPI_Scatterv` with
/// [`equal_lists`]).
///
/// # Safety
/// The caller's buffers are as MPI says.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn scatter_blocks(
    c: &vpml::Comm,
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    recv: *mut c_void,
    rcount: c_int,
    rtype: Datatype,
    root: c_int,
) -> Result<(), (c_int, String)> {
    let root = root_of(c, root)?;
    let n = c.size();
    if c.rank() != root {
        // SAFETY: the caller's buffer holds `rcount` elements.
        let mut out = checked(unsafe { Message::new(recv, rcount, rtype, false) })?;
        from_vpml(c.scatter(&[], out.bytes(), root))?;
        out.finish(None);
        return Ok(());
    }
    not_aliased(recv, send)?;
    // SAFETY: at the root `send` holds n·scount elements.
    let mut m = checked(unsafe { Message::new(send, all_blocks(scount, n)?, stype, true) })?;
    let data = m.bytes();
    let block = data.len() / n.max(1);
    if in_place(recv) {
        let mut mine = data[root * block..(root + 1) * block].to_vec();
        return from_vpml(c.scatter(data, &mut mine, root));
    }
    // SAFETY: the caller's buffer holds `rcount` elements.
    let mut out = checked(unsafe { Message::new(recv, rcount, rtype, false) })?;
    from_vpml(c.scatter(data, out.bytes(), root))?;
    out.finish(None);
    Ok(())
}

/// `MPI_Allgather` (and `MPI_Allgatherv` with [`equal_lists`] on an
/// intra-communicator).
///
/// # Safety
/// The caller's buffers are as MPI says.
pub(super) unsafe fn allgather_blocks(
    c: &vpml::Comm,
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    recv: *mut c_void,
    rcount: c_int,
    rtype: Datatype,
) -> Result<(), (c_int, String)> {
    no_in_place_on_inter(c, send)?;
    let n = peer_count(c);
    not_aliased(send, recv)?;
    // SAFETY: `recv` holds n·rcount elements.
    let mut out =
        checked(unsafe { Message::new(recv, all_blocks(rcount, n)?, rtype, in_place(send)) })?;
    let all = out.bytes();
    let block = all.len() / n.max(1);
    let me = c.rank();
    // SAFETY: the caller's buffer holds `scount` elements.
    let mut mine = unsafe {
        Contribution::new(send, scount, stype, || {
            all[me * block..(me + 1) * block].to_vec()
        })
    }?;
    from_vpml(c.allgather(mine.bytes(), all))?;
    out.finish(None);
    Ok(())
}

/// `MPI_Alltoall` (and `MPI_Alltoallv` with [`equal_lists`] on both
/// sides, on an intra-communicator).
///
/// # Safety
/// The caller's buffers are as MPI says.
pub(super) unsafe fn alltoall_blocks(
    c: &vpml::Comm,
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    recv: *mut c_void,
    rcount: c_int,
    rtype: Datatype,
) -> Result<(), (c_int, String)> {
    no_in_place_on_inter(c, send)?;
    let n = peer_count(c);
    not_aliased(send, recv)?;
    // SAFETY: `recv` holds n·rcount elements.
    let mut out =
        checked(unsafe { Message::new(recv, all_blocks(rcount, n)?, rtype, in_place(send)) })?;
    let (own, mut sm);
    let input: &[u8] = if in_place(send) {
        own = out.bytes().to_vec();
        &own
    } else {
        // SAFETY: `send` holds n·scount elements.
        sm = checked(unsafe { Message::new(send, all_blocks(scount, n)?, stype, true) })?;
        sm.bytes()
    };
    from_vpml(c.alltoall(input, out.bytes()))?;
    out.finish(None);
    Ok(())
}
