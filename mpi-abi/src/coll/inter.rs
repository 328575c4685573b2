//! The rooted collectives on an intercommunicator (broadcast, reduce,
//! gather(v), scatter(v)): the root passes `MPI_ROOT`, the other members
//! of its group `MPI_PROC_NULL`, and the remote group the root's rank.
//! The all-to-all collectives need no code of their own here: vpml's run
//! the intercommunicator's versions, and the callers in `coll` size their
//! buffers by the remote group ([`super::peer_count`]).

use std::ffi::{c_int, c_void};

use vpml::InterRoot;

use super::Res as Outcome;
use super::{VBlocks, checked, from_vpml, user_bytes, user_bytes_ref};
use crate::consts::*;
use crate::types::{CombineOp, Message, Reduction, reduce};

/// What `root` says this process does.
fn inter_root(c: &vpml::Comm, root: c_int) -> Result<InterRoot, (c_int, String)> {
    match root {
        MPI_ROOT => Ok(InterRoot::Here),
        MPI_PROC_NULL => Ok(InterRoot::Elsewhere),
        r => usize::try_from(r)
            .ok()
            .filter(|&r| r < c.remote_size())
            .map(InterRoot::Remote)
            .ok_or_else(|| (MPI_ERR_ROOT, format!("invalid root {root}"))),
    }
}

/// `MPI_Bcast` on an intercommunicator.
///
/// # Safety
/// `buf` holds `count` elements of `dt` (the C caller's contract).
pub(super) unsafe fn bcast(
    c: &vpml::Comm,
    buf: *mut c_void,
    count: c_int,
    dt: Datatype,
    root: c_int,
) -> Outcome {
    let root = inter_root(c, root)?;
    if root == InterRoot::Elsewhere {
        return Ok(());
    }
    let here = root == InterRoot::Here;
    // SAFETY: caller contract.
    let mut m = checked(unsafe { Message::new(buf, count, dt, here) })?;
    from_vpml(c.inter_bcast(m.bytes(), root))?;
    if !here {
        m.finish(None);
    }
    Ok(())
}

/// `MPI_Reduce` on an intercommunicator.
///
/// # Safety
/// At the root `recv`, in the remote group `send`, holds `count`
/// elements of `dt` (the C caller's contract).
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(super) unsafe fn reduce_to(
    c: &vpml::Comm,
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: Datatype,
    op: Op,
    root: c_int,
) -> Outcome {
    let root = inter_root(c, root)?;
    let op = checked(CombineOp::new(op, dt))?;
    let n = usize::try_from(count).unwrap_or(0);
    match root {
        InterRoot::Elsewhere => Ok(()),
        InterRoot::Here => {
            // SAFETY: caller contract.
            let mut out = checked(unsafe { Message::new(recv, count, dt, false) })?;
            reduce(c, Reduction::Inter(root), None, out.bytes(), op, dt, n)?;
            out.finish(None);
            Ok(())
        }
        InterRoot::Remote(_) => {
            // SAFETY: caller contract.
            let mut m = checked(unsafe { Message::new(send, count, dt, true) })?;
            reduce(
                c,
                Reduction::Inter(root),
                Some(m.bytes()),
                &mut [],
                op,
                dt,
                n,
            )
        }
    }
}

/// `MPI_Gather` on an intercommunicator.
///
/// # Safety
/// At the root `recv` holds `rcount` elements of `rtype` per remote
/// rank; in the remote group `send` holds `scount` of `stype`.
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(super) unsafe fn gather(
    c: &vpml::Comm,
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    recv: *mut c_void,
    rcount: c_int,
    rtype: Datatype,
    root: c_int,
) -> Outcome {
    let root = inter_root(c, root)?;
    match root {
        InterRoot::Elsewhere => Ok(()),
        InterRoot::Here => {
            let n = c.remote_size() as c_int;
            // SAFETY: caller contract.
            let mut out =
                checked(unsafe { Message::new(recv, rcount.saturating_mul(n), rtype, false) })?;
            from_vpml(c.inter_gather(&[], out.bytes(), root))?;
            out.finish(None);
            Ok(())
        }
        InterRoot::Remote(_) => {
            // SAFETY: caller contract.
            let mut m = checked(unsafe { Message::new(send, scount, stype, true) })?;
            from_vpml(c.inter_gather(m.bytes(), &mut [], root))
        }
    }
}

/// `MPI_Gatherv` on an intercommunicator.
///
/// # Safety
/// At the root the arrays hold one int per remote rank and `recv` the
/// blocks they describe; in the remote group `send` holds `scount`
/// elements of `stype`.
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(super) unsafe fn gatherv(
    c: &vpml::Comm,
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    recv: *mut c_void,
    rcounts: *const c_int,
    displs: *const c_int,
    rtype: Datatype,
    root: c_int,
) -> Outcome {
    let root = inter_root(c, root)?;
    match root {
        InterRoot::Elsewhere => Ok(()),
        InterRoot::Here => {
            // SAFETY: caller contract.
            let vb = unsafe { VBlocks::new(rcounts, displs, c.remote_size(), rtype) }?;
            if let Some((lens, offs, span)) = vb.in_buffer() {
                // SAFETY: caller contract.
                let all = unsafe { user_bytes(recv, span) }?;
                return from_vpml(c.inter_gatherv(&[], all, &lens, &offs, root));
            }
            let mut all = vec![0; vb.total()];
            from_vpml(c.inter_gatherv(&[], &mut all, &vb.lens(), &vb.offs(), root))?;
            // SAFETY: caller contract.
            unsafe { vb.unpack(&all, recv) };
            Ok(())
        }
        InterRoot::Remote(_) => {
            // SAFETY: caller contract.
            let mut m = checked(unsafe { Message::new(send, scount, stype, true) })?;
            from_vpml(c.inter_gatherv(m.bytes(), &mut [], &[], &[], root))
        }
    }
}

/// `MPI_Scatter` on an intercommunicator.
///
/// # Safety
/// At the root `send` holds `scount` elements of `stype` per remote
/// rank; in the remote group `recv` holds `rcount` of `rtype`.
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(super) unsafe fn scatter(
    c: &vpml::Comm,
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    recv: *mut c_void,
    rcount: c_int,
    rtype: Datatype,
    root: c_int,
) -> Outcome {
    let root = inter_root(c, root)?;
    match root {
        InterRoot::Elsewhere => Ok(()),
        InterRoot::Here => {
            let n = c.remote_size() as c_int;
            // SAFETY: caller contract.
            let mut m =
                checked(unsafe { Message::new(send, scount.saturating_mul(n), stype, true) })?;
            from_vpml(c.inter_scatter(m.bytes(), &mut [], root))
        }
        InterRoot::Remote(_) => {
            // SAFETY: caller contract.
            let mut out = checked(unsafe { Message::new(recv, rcount, rtype, false) })?;
            from_vpml(c.inter_scatter(&[], out.bytes(), root))?;
            out.finish(None);
            Ok(())
        }
    }
}

/// `MPI_Scatterv` on an intercommunicator.
///
/// # Safety
/// At the root the arrays hold one int per remote rank and `send` the
/// blocks they describe; in the remote group `recv` holds `rcount`
/// elements of `rtype`.
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(super) unsafe fn scatterv(
    c: &vpml::Comm,
    send: *const c_void,
    scounts: *const c_int,
    displs: *const c_int,
    stype: Datatype,
    recv: *mut c_void,
    rcount: c_int,
    rtype: Datatype,
    root: c_int,
) -> Outcome {
    let root = inter_root(c, root)?;
    match root {
        InterRoot::Elsewhere => Ok(()),
        InterRoot::Here => {
            // SAFETY: caller contract.
            let vb = unsafe { VBlocks::new(scounts, displs, c.remote_size(), stype) }?;
            if let Some((lens, offs, span)) = vb.in_buffer() {
                // SAFETY: caller contract (read only).
                let data = unsafe { user_bytes_ref(send, span) }?;
                return from_vpml(c.inter_scatterv(data, &lens, &offs, &mut [], root));
            }
            // SAFETY: caller contract.
            let packed = unsafe { vb.pack(send) };
            from_vpml(c.inter_scatterv(&packed, &vb.lens(), &vb.offs(), &mut [], root))
        }
        InterRoot::Remote(_) => {
            // SAFETY: caller contract.
            let mut out = checked(unsafe { Message::new(recv, rcount, rtype, false) })?;
            from_vpml(c.inter_scatterv(&[], &[], &[], out.bytes(), root))?;
            out.finish(None);
            Ok(())
        }
    }
}
