//! Layouts of the reductions: reduce, allreduce, scans and
//! reduce-scatter, folded in rank order once every contribution arrived.

use std::ffi::{c_int, c_void};

use super::super::checked;
use super::*;
use crate::coll::Res;
use crate::consts::*;
use crate::types::{CombineOp, Message, fold_packed, private_copy, release_copy};

/// A reduction's result buffer and this rank's contribution: `recv`
/// holds the result (and, in place, the input).
///
/// # Safety
/// The buffers hold `count` elements of `dt` where MPI says they matter.
unsafe fn reduction_buffers(
    c: &vpml::Comm,
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: Datatype,
    with_result: bool,
) -> Res<(Option<Message>, Outgoing)> {
    no_in_place_on_inter(c, send)?;
    let inplace = in_place(send);
    if inplace && !with_result {
        return Err((MPI_ERR_BUFFER, "MPI_IN_PLACE is for the root only".into()));
    }
    let mut out = if with_result {
        // SAFETY: caller contract.
        Some(checked(unsafe { Message::new(recv, count, dt, inplace) })?)
    } else {
        None
    };
    let mine = match (&mut out, inplace) {
        (Some(o), true) => Outgoing::copy(o.bytes().to_vec()),
        // SAFETY: caller contract.
        _ => unsafe { Outgoing::of(send, count, dt) }?,
    };
    Ok((out, mine))
}

/// The last step of a reduction: fold `parts` (a contribution per rank, in
/// rank order) into `out`, with datatype `dt` as its private copy `kept`
/// lays it out (released here) and as the program's handle `shown` names
/// it to a user operation. (If the request fails first, the copy is not
/// released: a slot of the type table, no more.)
fn fold_into(
    op: CombineOp,
    (dt, kept, shown): (Datatype, Option<Datatype>, Datatype),
    count: usize,
    parts: &[&[u8]],
    out: &mut Message,
) -> Res {
    let t = kept.unwrap_or(dt);
    let base = crate::types::info(t).and_then(|i| i.base);
    let acc = out.bytes();
    let r = match (parts.split_first(), base) {
        // A predefined operation over elements of one predefined type:
        // folded in place, left to right (rank order), with no copy of the
        // result and the operation fixed at compile time.
        (Some((first, rest)), Some(base))
            if op.is_predefined() && parts.iter().all(|p| p.len() == acc.len()) =>
        {
            acc.copy_from_slice(first);
            rest.iter()
                .try_for_each(|p| crate::types::fold_into(op, base, acc, p))
        }
        _ => fold_packed(op, t, shown, count, parts, acc),
    };
    // The private copy of a derived datatype goes with the last step.
    if let Some(k) = kept {
        release_copy(k);
    }
    r?;
    out.finish(None);
    Ok(())
}

/// Receive slots of `len` bytes each, one per peer of a list, in one
/// allocation.
struct Slots {
    bytes: Vec<u8>,
    len: usize,
    count: usize,
}

/// Contributions in rank order: on the stack for small jobs.
type Parts<'a> = smallvec::SmallVec<[&'a [u8]; 8]>;

impl Slots {
    /// A slot for each peer of `from`.
    fn new(from: &[usize], len: usize) -> Slots {
        Slots {
            bytes: vec![0u8; len * from.len()],
            len,
            count: from.len(),
        }
    }

    /// Receive slot `k` from peer `from[k]`. (The pointers stay valid
    /// when the slots move: they point into the heap.)
    fn receives(&mut self, from: &[usize]) -> Transfers {
        let base = self.bytes.as_mut_ptr();
        from.iter()
            .enumerate()
            .map(|(k, &i)| transfer(i, base.wrapping_add(k * self.len), self.len))
            .collect()
    }

    /// What each slot received, in order.
    fn parts(&self) -> Parts<'_> {
        (0..self.count)
            .map(|k| &self.bytes[k * self.len..(k + 1) * self.len])
            .collect()
    }
}

/// # Safety
/// As [`reduction_buffers`].
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(in crate::coll) unsafe fn reduce(
    c: &vpml::Comm,
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: Datatype,
    op: Op,
    shown: Datatype,
    root: c_int,
    all: bool,
) -> Res<Laid> {
    let op = checked(CombineOp::new(op, dt))?;
    let role = if all { Role::Root } else { role(c, root)? };
    if role == Role::Idle {
        return Ok(Laid::nothing());
    }
    let n = usize::try_from(count).unwrap_or(0);
    // On an intercommunicator the root's group contributes nothing.
    let contributes = !c.is_inter() || role != Role::Root || all;
    let (out, mine) = if contributes {
        // SAFETY: caller contract.
        unsafe { reduction_buffers(c, send, recv, count, dt, role == Role::Root) }?
    } else {
        // SAFETY: caller contract.
        (
            Some(checked(unsafe { Message::new(recv, count, dt, false) })?),
            Outgoing::copy(Vec::new()),
        )
    };
    if let Role::Leaf(r) = role {
        return Ok(Laid {
            sends: smallvec::smallvec![transfer(r, mine.as_ptr(), mine.len())],
            recvs: Transfers::new(),
            own: None,
            after: mine.held(),
        });
    }
    let Some(mut out) = out else {
        return Ok(Laid::nothing());
    };
    let from: Ranks = others(c).collect();
    let len = out.bytes().len();
    let mut got = Slots::new(&from, len);
    let recvs = got.receives(&from);
    let sends = if all {
        others(c)
            .map(|i| transfer(i, mine.as_ptr(), mine.len()))
            .collect()
    } else {
        Transfers::new()
    };
    let (_, me) = peers(c);
    // The program may free the datatype before the request completes.
    let kept = private_copy(dt);
    Ok(Laid {
        sends,
        recvs,
        own: None,
        after: Some(Box::new(move || {
            let mut parts = got.parts();
            if let Some(me) = me {
                parts.insert(me, mine.as_slice());
            }
            fold_into(op, (dt, kept, shown), n, &parts, &mut out)
        })),
    })
}

/// Prefix reductions: `inclusive` for `MPI_Iscan`, else `MPI_Iexscan`.
///
/// # Safety
/// As [`reduction_buffers`].
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(in crate::coll) unsafe fn scan(
    c: &vpml::Comm,
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: Datatype,
    op: Op,
    shown: Datatype,
    inclusive: bool,
) -> Res<Laid> {
    intra_only(c)?;
    let op = checked(CombineOp::new(op, dt))?;
    let n = usize::try_from(count).unwrap_or(0);
    let (r, size) = (c.rank(), c.size());
    // SAFETY: caller contract.
    let (out, mine) = unsafe { reduction_buffers(c, send, recv, count, dt, true) }?;
    let Some(mut out) = out else {
        return Ok(Laid::nothing());
    };
    let len = mine.len();
    let lower: Vec<usize> = (0..r).collect();
    let mut got = Slots::new(&lower, len);
    let recvs = got.receives(&lower);
    let sends = (r + 1..size)
        .map(|i| transfer(i, mine.as_ptr(), len))
        .collect();
    // The program may free the datatype before the request completes.
    let kept = private_copy(dt);
    Ok(Laid {
        sends,
        recvs,
        own: None,
        after: Some(Box::new(move || {
            let mut parts = got.parts();
            if inclusive {
                parts.push(mine.as_slice());
            }
            if parts.is_empty() {
                // Rank 0's exclusive scan: the result is undefined; the
                // buffer is left alone.
                if let Some(k) = kept {
                    release_copy(k);
                }
                return Ok(());
            }
            fold_into(op, (dt, kept, shown), n, &parts, &mut out)
        })),
    })
}

/// Reduce-scatter with `counts[i]` elements to rank `i` (`equal`: the
/// block form, the one MPI defines on an intercommunicator too, where each
/// group's input is cut in equal blocks among the other group).
///
/// # Safety
/// `send` holds the sum of `counts` elements of `dt` (in place: `recv`
/// does), `recv` `counts[rank]`.
#[allow(clippy::too_many_arguments)] // MPI's own argument list, and the handle shown
pub(in crate::coll) unsafe fn reduce_scatter(
    c: &vpml::Comm,
    send: *const c_void,
    recv: *mut c_void,
    counts: Vec<usize>,
    dt: Datatype,
    op: Op,
    shown: Datatype,
    equal: bool,
) -> Res<Laid> {
    no_in_place_on_inter(c, send)?;
    let op = checked(CombineOp::new(op, dt))?;
    let (np, me) = peers(c);
    let r = c.rank();
    let esize = element_size(dt)?;
    let total: usize = counts.iter().sum();
    // How this rank's input is cut among its peers, in elements.
    if c.is_inter() && !equal {
        // SAFETY: caller contract.
        return unsafe { reduce_scatter_inter(c, send, recv, &counts, dt, op, shown) };
    }
    let cut: Vec<usize> = if c.is_inter() {
        if np == 0 || !total.is_multiple_of(np) {
            return Err((
                MPI_ERR_COUNT,
                "the input does not split into equal blocks for the remote group".into(),
            ));
        }
        vec![total / np; np]
    } else {
        counts.clone()
    };
    let total_c =
        c_int::try_from(total).map_err(|_| (MPI_ERR_COUNT, "counts too large".to_string()))?;
    let n = counts[r];
    // SAFETY: caller contract.
    let mut out = checked(unsafe { Message::new(recv, n as c_int, dt, false) })?;
    // In place, the input is the result buffer, which the fold overwrites
    // while it reads the input: a copy; so it is when the two overlap (an
    // erroneous program, which must not make the fold read what it
    // writes). Otherwise the sends read the program's buffer itself,
    // which MPI keeps untouched until the end.
    // SAFETY: caller contract.
    let mut input = unsafe { Outgoing::of(if in_place(send) { recv } else { send }, total_c, dt) }?;
    let (at, len) = out.target();
    if in_place(send) || crate::rma::overlap(at, len, input.as_ptr(), input.len()) {
        input = Outgoing::copy(input.as_slice().to_vec());
    }
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(cut.iter().scan(0, |at, &k| {
            *at += k * esize;
            Some(*at)
        }))
        .collect();
    let block = |i: usize| bounds[i]..bounds[i + 1];
    let len = n * esize;
    let from: Ranks = others(c).collect();
    let mut got = Slots::new(&from, len);
    let recvs = got.receives(&from);
    let sends = from
        .iter()
        .map(|&i| transfer(i, input.as_ptr().wrapping_add(bounds[i]), block(i).len()))
        .collect();
    let own = me.map(block);
    // The program may free the datatype before the request completes.
    let kept = private_copy(dt);
    Ok(Laid {
        sends,
        recvs,
        own: None,
        after: Some(Box::new(move || {
            let mut parts = got.parts();
            if let (Some(me), Some(own)) = (me, own) {
                parts.insert(me, &input.as_slice()[own]);
            }
            fold_into(op, (dt, kept, shown), n, &parts, &mut out)
        })),
    })
}

/// `MPI_Ireduce_scatter` on an intercommunicator: the reduction of the
/// other group's inputs, cut as this group's `counts` say. A rank does not
/// know how the other group cuts its result, so it sends its whole input
/// to every rank there; each folds what it gets and keeps its own block
/// (the remote group's totals equal this group's, as MPI requires).
///
/// # Safety
/// As [`reduce_scatter`].
#[allow(clippy::too_many_arguments)] // MPI's own argument list, and the handle shown
unsafe fn reduce_scatter_inter(
    c: &vpml::Comm,
    send: *const c_void,
    recv: *mut c_void,
    counts: &[usize],
    dt: Datatype,
    op: CombineOp,
    shown: Datatype,
) -> Res<Laid> {
    let esize = element_size(dt)?;
    let total: usize = counts.iter().sum();
    let total_c =
        c_int::try_from(total).map_err(|_| (MPI_ERR_COUNT, "counts too large".to_string()))?;
    // SAFETY: caller contract (no MPI_IN_PLACE on an intercommunicator).
    let input = unsafe { owned(send, total_c, dt) }?;
    let r = c.rank();
    let n = counts[r];
    let at = counts[..r].iter().sum::<usize>() * esize;
    // SAFETY: caller contract.
    let mut out = checked(unsafe { Message::new(recv, n as c_int, dt, false) })?;
    let len = total * esize;
    let from: Ranks = others(c).collect();
    let mut got = Slots::new(&from, len);
    let recvs = got.receives(&from);
    let sends = from
        .iter()
        .map(|&i| transfer(i, input.as_ptr(), len))
        .collect();
    let kept = private_copy(dt);
    Ok(Laid {
        sends,
        recvs,
        own: None,
        after: Some(Box::new(move || {
            drop(input);
            let parts = got.parts();
            let mut whole = vec![0u8; len];
            let folded = fold_packed(op, kept.unwrap_or(dt), shown, total, &parts, &mut whole);
            if let Some(k) = kept {
                release_copy(k);
            }
            folded?;
            let mine = out.bytes();
            let end = (at + mine.len()).min(whole.len());
            mine[..end - at.min(end)].copy_from_slice(&whole[at.min(end)..end]);
            out.finish(None);
            Ok(())
        })),
    })
}
