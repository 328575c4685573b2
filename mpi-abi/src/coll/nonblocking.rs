//! Nonblocking collectives (`MPI_Ibarrier` … `MPI_Ialltoallw`, and
//! `MPI_Alltoallw`, which waits for its nonblocking twin), on vpml's
//! nonblocking collectives: each call lays the collective out as the
//! transfers this rank makes — every block straight between the two
//! ranks it moves between, all started at once — and a last step that
//! runs when the request completes (folding reductions in rank order,
//! unpacking non-contiguous datatypes). The request owns the memory the
//! transfers use until then. On an intercommunicator the transfers name
//! the remote group, and reductions fold its contributions.
//!
//! Direct transfers cost a message per pair of ranks where the blocking
//! collectives use trees; in exchange a collective needs nothing more
//! from this rank once started, so it completes while the rank waits for
//! anything, and a re-execution after a crash repeats it exactly.
//! `MPI_Comm_idup` duplicates at once, without communication, from
//! contexts its parent reserved (see `vpml::Comm::idup`), and returns a
//! completed request.

use std::ffi::{c_int, c_void};

use vpml::raw::Transfer;

use super::{VBlocks, checked, user_bytes, user_bytes_ref};
use crate::consts::*;
use crate::state::{
    Active, AfterCollective, ReqEntry, STATE, comm, error, put, request_handle, vpml_error,
};
use crate::types::{CombineOp, Message, fold_packed, info, private_copy, release_copy};

type Res<T = ()> = Result<T, (c_int, String)>;

/// A nonblocking collective laid out: this rank's transfers, and its last
/// step, which owns whatever memory they use besides the caller's buffers.
pub(crate) struct Laid {
    pub(super) sends: Vec<Transfer>,
    pub(super) recvs: Vec<Transfer>,
    pub(super) after: AfterCollective,
}

impl Laid {
    /// The same collective, whose request ends with `error` (if any): an
    /// error only this rank sees still starts its transfers, so that its
    /// peers' messages are not left for the next collective to match.
    fn ending_with(self, error: Option<(c_int, String)>) -> Laid {
        let Some(e) = error else {
            return self;
        };
        let after = self.after;
        Laid {
            after: Box::new(move || {
                // (The memory `after` owns is released either way.)
                let _ = after();
                Err(e)
            }),
            ..self
        }
    }

    /// Nothing to do (a bystander of an intercommunicator's root group).
    fn nothing() -> Laid {
        Laid {
            sends: Vec::new(),
            recvs: Vec::new(),
            after: Box::new(|| Ok(())),
        }
    }
}

/// A transfer of `len` bytes at `ptr` to or from `peer`.
pub(super) fn transfer(peer: usize, ptr: *const u8, len: usize) -> Transfer {
    Transfer {
        peer,
        ptr: ptr as *mut u8,
        len,
    }
}

/// Start `laid` on `c` and give the program its request.
pub(super) fn launch(
    func: &str,
    h: Comm,
    c: &vpml::Comm,
    laid: Res<Laid>,
    req: *mut Request,
) -> c_int {
    let laid = match laid {
        Ok(l) => l,
        Err((code, why)) => return error(h, func, code, &why),
    };
    if req.is_null() {
        return error(h, func, MPI_ERR_REQUEST, "null request pointer");
    }
    match start_laid(c, laid, 0) {
        Ok((active, after)) => {
            let entry = ReqEntry {
                comm: h,
                active: Some(active),
                proc_null: false,
                persistent: None,
                staging: None,
                after: Some(after),
                ready: None,
            };
            let i = STATE.with(|s| s.borrow_mut().requests.insert(entry));
            // SAFETY: a request handle pointer (caller contract).
            unsafe { put(req, request_handle(i)) };
            MPI_SUCCESS
        }
        Err(e) => vpml_error(h, func, &e),
    }
}

/// Start the transfers of `laid` on `c`: the operation in flight and the
/// last step its request keeps.
pub(super) fn start_laid(
    c: &vpml::Comm,
    laid: Laid,
    lane: u32,
) -> vpml::Result<(Active, AfterCollective)> {
    // SAFETY: every transfer is in the caller's buffers, which MPI's
    // contract keeps valid and untouched until the request completes, or
    // in memory `laid.after` owns, which the request keeps as long.
    let id = unsafe { c.start_collective_raw(&laid.sends, &laid.recvs, lane) }?;
    Ok((Active::new(id, c, 0, 0, 0), laid.after))
}

/// What this rank does in a rooted collective.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    /// The root: it exchanges with every other rank (every remote rank
    /// on an intercommunicator).
    Root,
    /// It exchanges with the root, this peer.
    Leaf(usize),
    /// A member of an intercommunicator's root group other than the root.
    Idle,
}

fn role(c: &vpml::Comm, root: c_int) -> Res<Role> {
    let bad = || (MPI_ERR_ROOT, format!("invalid root {root}"));
    if c.is_inter() {
        return match root {
            MPI_ROOT => Ok(Role::Root),
            MPI_PROC_NULL => Ok(Role::Idle),
            r => usize::try_from(r)
                .ok()
                .filter(|&r| r < c.remote_size())
                .map(Role::Leaf)
                .ok_or_else(bad),
        };
    }
    let r = usize::try_from(root)
        .ok()
        .filter(|&r| r < c.size())
        .ok_or_else(bad)?;
    Ok(if r == c.rank() {
        Role::Root
    } else {
        Role::Leaf(r)
    })
}

/// How many ranks the transfers may name, and this rank among them
/// (`None` on an intercommunicator, whose transfers name the remote group).
fn peers(c: &vpml::Comm) -> (usize, Option<usize>) {
    if c.is_inter() {
        (c.remote_size(), None)
    } else {
        (c.size(), Some(c.rank()))
    }
}

/// Every peer but this rank.
fn others(c: &vpml::Comm) -> impl Iterator<Item = usize> {
    let (n, me) = peers(c);
    (0..n).filter(move |&i| Some(i) != me)
}

fn intra_only(c: &vpml::Comm) -> Res {
    if c.is_inter() {
        return Err((MPI_ERR_COMM, "not defined on an intercommunicator".into()));
    }
    Ok(())
}

fn no_in_place_on_inter(c: &vpml::Comm, send: *const c_void) -> Res {
    super::no_in_place_on_inter(c, send)
}

/// The packed bytes of `count` elements of `dt` at `buf`, owned.
///
/// # Safety
/// `buf` holds them (the C caller's contract).
pub(super) unsafe fn owned(buf: *const c_void, count: c_int, dt: Datatype) -> Res<Vec<u8>> {
    // SAFETY: caller contract.
    let mut m = checked(unsafe { Message::new(buf, count, dt, true) })?;
    Ok(m.read_only().to_vec())
}

/// Bytes per element of `dt`.
fn element_size(dt: Datatype) -> Res<usize> {
    info(dt)
        .map(|t| t.size)
        .ok_or_else(|| (MPI_ERR_TYPE, "invalid datatype".to_string()))
}

// ---------------------------------------------------------------- layouts

pub(super) fn barrier(c: &vpml::Comm) -> Laid {
    let none = std::ptr::NonNull::<u8>::dangling().as_ptr();
    Laid {
        sends: others(c).map(|i| transfer(i, none, 0)).collect(),
        recvs: others(c).map(|i| transfer(i, none, 0)).collect(),
        after: Box::new(|| Ok(())),
    }
}

/// # Safety
/// `buf` holds `count` elements of `dt` (the C caller's contract).
pub(super) unsafe fn bcast(
    c: &vpml::Comm,
    buf: *mut c_void,
    count: c_int,
    dt: Datatype,
    root: c_int,
) -> Res<Laid> {
    let role = role(c, root)?;
    if role == Role::Idle {
        return Ok(Laid::nothing());
    }
    // SAFETY: caller contract.
    let mut m = checked(unsafe { Message::new(buf, count, dt, role == Role::Root) })?;
    let (ptr, len) = m.target();
    Ok(match role {
        Role::Leaf(r) => Laid {
            sends: Vec::new(),
            recvs: vec![transfer(r, ptr, len)],
            after: Box::new(move || {
                m.finish(None);
                Ok(())
            }),
        },
        _ => Laid {
            sends: others(c).map(|i| transfer(i, ptr, len)).collect(),
            recvs: Vec::new(),
            after: Box::new(move || {
                drop(m);
                Ok(())
            }),
        },
    })
}

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
) -> Res<(Option<Message>, Vec<u8>)> {
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
        (Some(o), true) => o.bytes().to_vec(),
        // SAFETY: caller contract.
        _ => unsafe { owned(send, count, dt) }?,
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
    let r = fold_packed(op, kept.unwrap_or(dt), shown, count, parts, out.bytes());
    // The private copy of a derived datatype goes with the last step.
    if let Some(k) = kept {
        release_copy(k);
    }
    r?;
    out.finish(None);
    Ok(())
}

/// Receive slots, one per peer of `from`, each `len` bytes.
fn slots(from: &[usize], len: usize) -> Vec<Vec<u8>> {
    from.iter().map(|_| vec![0u8; len]).collect()
}

/// # Safety
/// As [`reduction_buffers`].
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(super) unsafe fn reduce(
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
            Vec::new(),
        )
    };
    if let Role::Leaf(r) = role {
        return Ok(Laid {
            sends: vec![transfer(r, mine.as_ptr(), mine.len())],
            recvs: Vec::new(),
            after: Box::new(move || {
                drop(mine);
                Ok(())
            }),
        });
    }
    let Some(mut out) = out else {
        return Ok(Laid::nothing());
    };
    let from: Vec<usize> = others(c).collect();
    let len = out.bytes().len();
    let mut got = slots(&from, len);
    let recvs = from
        .iter()
        .zip(got.iter_mut())
        .map(|(&i, g)| transfer(i, g.as_mut_ptr(), len))
        .collect();
    let sends = if all {
        others(c)
            .map(|i| transfer(i, mine.as_ptr(), mine.len()))
            .collect()
    } else {
        Vec::new()
    };
    let (_, me) = peers(c);
    // The program may free the datatype before the request completes.
    let kept = private_copy(dt);
    Ok(Laid {
        sends,
        recvs,
        after: Box::new(move || {
            let mut parts: Vec<&[u8]> = got.iter().map(Vec::as_slice).collect();
            if let Some(me) = me {
                parts.insert(me, &mine);
            }
            fold_into(op, (dt, kept, shown), n, &parts, &mut out)
        }),
    })
}

/// Prefix reductions: `inclusive` for `MPI_Iscan`, else `MPI_Iexscan`.
///
/// # Safety
/// As [`reduction_buffers`].
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(super) unsafe fn scan(
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
    let mut got = slots(&lower, len);
    let recvs = lower
        .iter()
        .zip(got.iter_mut())
        .map(|(&i, g)| transfer(i, g.as_mut_ptr(), len))
        .collect();
    let sends = (r + 1..size)
        .map(|i| transfer(i, mine.as_ptr(), len))
        .collect();
    // The program may free the datatype before the request completes.
    let kept = private_copy(dt);
    Ok(Laid {
        sends,
        recvs,
        after: Box::new(move || {
            let mut parts: Vec<&[u8]> = got.iter().map(Vec::as_slice).collect();
            if inclusive {
                parts.push(&mine);
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
        }),
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
pub(super) unsafe fn reduce_scatter(
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
    let cut: Vec<usize> = if c.is_inter() {
        if !equal {
            return Err((
                MPI_ERR_COMM,
                "MPI_Ireduce_scatter on an intercommunicator is not supported (MPI_Ireduce_scatter_block is)".into(),
            ));
        }
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
    let from = if in_place(send) {
        recv as *const c_void
    } else {
        send
    };
    // SAFETY: caller contract.
    let input = unsafe { owned(from, total_c, dt) }?;
    let n = counts[r];
    // SAFETY: caller contract.
    let mut out = checked(unsafe { Message::new(recv, n as c_int, dt, false) })?;
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(cut.iter().scan(0, |at, &k| {
            *at += k * esize;
            Some(*at)
        }))
        .collect();
    let block = |i: usize| bounds[i]..bounds[i + 1];
    let len = n * esize;
    let from: Vec<usize> = others(c).collect();
    let mut got = slots(&from, len);
    let recvs = from
        .iter()
        .zip(got.iter_mut())
        .map(|(&i, g)| transfer(i, g.as_mut_ptr(), len))
        .collect();
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
        after: Box::new(move || {
            let mut parts: Vec<&[u8]> = got.iter().map(Vec::as_slice).collect();
            if let (Some(me), Some(own)) = (me, own) {
                parts.insert(me, &input[own]);
            }
            fold_into(op, (dt, kept, shown), n, &parts, &mut out)
        }),
    })
}

/// Gather: `vb` (at the root) describes the blocks of `recv`, one per
/// peer.
///
/// # Safety
/// The caller's buffers hold what MPI says they hold.
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(super) unsafe fn gather(
    c: &vpml::Comm,
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    recv: *mut c_void,
    vb: impl FnOnce() -> Res<VBlocks<'static>>,
    root: c_int,
) -> Res<Laid> {
    no_in_place_on_inter(c, send)?;
    let role = role(c, root)?;
    match role {
        Role::Idle => Ok(Laid::nothing()),
        Role::Leaf(_) if in_place(send) => {
            Err((MPI_ERR_BUFFER, "MPI_IN_PLACE is for the root only".into()))
        }
        Role::Leaf(r) => {
            // SAFETY: caller contract.
            let mine = unsafe { owned(send, scount, stype) }?;
            Ok(Laid {
                sends: vec![transfer(r, mine.as_ptr(), mine.len())],
                recvs: Vec::new(),
                after: Box::new(move || {
                    drop(mine);
                    Ok(())
                }),
            })
        }
        // SAFETY: caller contract.
        Role::Root => unsafe { gather_at_root(c, send, scount, stype, recv, vb()?) },
    }
}

/// The root's side of [`gather`], and every rank's of an allgather
/// (`sends`: its block to every other peer).
///
/// # Safety
/// As [`gather`].
unsafe fn gather_at_root(
    c: &vpml::Comm,
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    recv: *mut c_void,
    vb: VBlocks<'static>,
) -> Res<Laid> {
    let (_, me) = peers(c);
    let from: Vec<usize> = others(c).collect();
    if let Some((lens, offs, span)) = vb.in_buffer() {
        // The blocks land in the caller's buffer.
        // SAFETY: caller contract.
        let all = unsafe { user_bytes(recv, span) }?;
        let mut mismatch = None;
        if let Some(me) = me
            && !in_place(send)
        {
            // SAFETY: caller contract.
            let mine = unsafe { owned(send, scount, stype) }?;
            mismatch = copy_block(&mine, &mut all[offs[me]..offs[me] + lens[me]]).err();
        }
        let base = all.as_mut_ptr();
        let recvs = from
            .iter()
            .map(|&i| transfer(i, base.wrapping_add(offs[i]), lens[i]))
            .collect();
        return Ok(Laid {
            sends: Vec::new(),
            recvs,
            after: Box::new(|| Ok(())),
        }
        .ending_with(mismatch));
    }
    let (lens, offs) = (vb.lens(), vb.offs());
    let mut all = if in_place(send) {
        // SAFETY: caller contract.
        unsafe { vb.pack(recv) }
    } else {
        vec![0; vb.total()]
    };
    let mut mismatch = None;
    if let Some(me) = me
        && !in_place(send)
    {
        // SAFETY: caller contract.
        let mine = unsafe { owned(send, scount, stype) }?;
        mismatch = copy_block(&mine, &mut all[offs[me]..offs[me] + lens[me]]).err();
    }
    let base = all.as_mut_ptr();
    let recvs = from
        .iter()
        .map(|&i| transfer(i, base.wrapping_add(offs[i]), lens[i]))
        .collect();
    let recv_addr = recv as usize;
    Ok(Laid {
        sends: Vec::new(),
        recvs,
        after: Box::new(move || {
            // SAFETY: the caller's buffer holds the blocks until the
            // request completes (MPI's contract).
            unsafe { vb.unpack(&all, recv_addr as *mut c_void) };
            Ok(())
        }),
    }
    .ending_with(mismatch))
}

/// This rank's own block, copied into the result: the lengths must agree.
fn copy_block(mine: &[u8], into: &mut [u8]) -> Res {
    if mine.len() != into.len() {
        return Err((
            MPI_ERR_TRUNCATE,
            format!(
                "a {}-byte contribution for a {}-byte block",
                mine.len(),
                into.len()
            ),
        ));
    }
    into.copy_from_slice(mine);
    Ok(())
}

/// Equal blocks of `count` elements of `dt`, one per peer.
pub(super) fn equal_blocks(c: &vpml::Comm, count: c_int, dt: Datatype) -> Res<VBlocks<'static>> {
    super::neighbor::equal(peers(c).0, count, dt)
}

/// # Safety
/// `counts` and `displs` hold one int per peer.
pub(super) unsafe fn v_blocks(
    counts: *const c_int,
    displs: *const c_int,
    c: &vpml::Comm,
    dt: Datatype,
) -> Res<VBlocks<'static>> {
    let (n, _) = peers(c);
    // SAFETY: caller contract.
    Ok(unsafe { VBlocks::new(counts, displs, n, dt) }?.into_owned())
}

/// Scatter: `vb` (at the root) describes the blocks of `send`.
///
/// # Safety
/// The caller's buffers hold what MPI says they hold.
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(super) unsafe fn scatter(
    c: &vpml::Comm,
    send: *const c_void,
    vb: impl FnOnce() -> Res<VBlocks<'static>>,
    recv: *mut c_void,
    rcount: c_int,
    rtype: Datatype,
    root: c_int,
) -> Res<Laid> {
    no_in_place_on_inter(c, recv)?;
    let role = role(c, root)?;
    match role {
        Role::Idle => Ok(Laid::nothing()),
        Role::Leaf(_) if in_place(recv) => {
            Err((MPI_ERR_BUFFER, "MPI_IN_PLACE is for the root only".into()))
        }
        Role::Leaf(r) => {
            // SAFETY: caller contract.
            let mut out = checked(unsafe { Message::new(recv, rcount, rtype, false) })?;
            let (ptr, len) = out.target();
            Ok(Laid {
                sends: Vec::new(),
                recvs: vec![transfer(r, ptr, len)],
                after: Box::new(move || {
                    out.finish(None);
                    Ok(())
                }),
            })
        }
        Role::Root => {
            let vb = vb()?;
            let (_, me) = peers(c);
            let (lens, offs) = match vb.in_buffer() {
                Some((lens, offs, _)) => (lens, offs),
                None => (vb.lens(), vb.offs()),
            };
            // The blocks, packed (a copy: the caller's buffer may be the
            // result too, and the sends read it until they complete).
            let data: Vec<u8> = match vb.in_buffer() {
                // SAFETY: caller contract (read only).
                Some((_, _, span)) => unsafe { user_bytes_ref(send, span) }?.to_vec(),
                // SAFETY: caller contract.
                None => unsafe { vb.pack(send) },
            };
            let mut mismatch = None;
            if let Some(me) = me
                && !in_place(recv)
            {
                // SAFETY: caller contract.
                let mut out = checked(unsafe { Message::new(recv, rcount, rtype, false) })?;
                mismatch = copy_block(&data[offs[me]..offs[me] + lens[me]], out.bytes()).err();
                out.finish(None);
            }
            let sends = others(c)
                .map(|i| transfer(i, data.as_ptr().wrapping_add(offs[i]), lens[i]))
                .collect();
            Ok(Laid {
                sends,
                recvs: Vec::new(),
                after: Box::new(move || {
                    drop(data);
                    Ok(())
                }),
            }
            .ending_with(mismatch))
        }
    }
}

/// Allgather: every rank's block to every other, the blocks of `recv`
/// as `vb` says.
///
/// # Safety
/// The caller's buffers hold what MPI says they hold.
pub(super) unsafe fn allgather(
    c: &vpml::Comm,
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    recv: *mut c_void,
    vb: VBlocks<'static>,
) -> Res<Laid> {
    no_in_place_on_inter(c, send)?;
    let (_, me) = peers(c);
    // This rank's block: from `send`, or in place from its block of `recv`.
    let mine = match me {
        Some(me) if in_place(send) => {
            let (lens, offs) = (vb.lens(), vb.offs());
            // SAFETY: caller contract.
            let packed = unsafe { vb.pack(recv) };
            packed[offs[me]..offs[me] + lens[me]].to_vec()
        }
        // SAFETY: caller contract.
        _ => unsafe { owned(send, scount, stype) }?,
    };
    // SAFETY: caller contract.
    let mut laid = unsafe { gather_at_root(c, send, scount, stype, recv, vb) }?;
    laid.sends = others(c)
        .map(|i| transfer(i, mine.as_ptr(), mine.len()))
        .collect();
    let after = laid.after;
    laid.after = Box::new(move || {
        let r = after();
        drop(mine);
        r
    });
    Ok(laid)
}

/// Alltoall(v): block `i` of `send` (as `sb` says; in place, of `recv`)
/// to peer `i`, block `i` of `recv` (as `rb` says) from it.
///
/// # Safety
/// The caller's buffers hold what MPI says they hold.
pub(super) unsafe fn alltoall(
    c: &vpml::Comm,
    send: *const c_void,
    sb: Option<VBlocks<'static>>,
    recv: *mut c_void,
    rb: VBlocks<'static>,
) -> Res<Laid> {
    no_in_place_on_inter(c, send)?;
    let (_, me) = peers(c);
    // The input, packed and copied (in place it is the result buffer).
    let (input, slens, soffs) = match &sb {
        // SAFETY: caller contract.
        Some(sb) => (unsafe { sb.pack(send) }, sb.lens(), sb.offs()),
        // SAFETY: caller contract.
        None => (unsafe { rb.pack(recv) }, rb.lens(), rb.offs()),
    };
    let (rlens, roffs) = (rb.lens(), rb.offs());
    let mut all = vec![0u8; rb.total()];
    let mut mismatch = None;
    if let Some(me) = me {
        mismatch = copy_block(
            &input[soffs[me]..soffs[me] + slens[me]],
            &mut all[roffs[me]..roffs[me] + rlens[me]],
        )
        .err();
    }
    let base = all.as_mut_ptr();
    let recvs = others(c)
        .map(|i| transfer(i, base.wrapping_add(roffs[i]), rlens[i]))
        .collect();
    let sends = others(c)
        .map(|i| transfer(i, input.as_ptr().wrapping_add(soffs[i]), slens[i]))
        .collect();
    let recv_addr = recv as usize;
    Ok(Laid {
        sends,
        recvs,
        after: Box::new(move || {
            drop(input);
            // SAFETY: the caller's buffer holds the blocks until the
            // request completes (MPI's contract).
            unsafe { rb.unpack(&all, recv_addr as *mut c_void) };
            Ok(())
        }),
    }
    .ending_with(mismatch))
}

/// Alltoallw: to peer `i`, `scounts[i]` elements of `stypes[i]` at byte
/// `sdispls[i]` of `send`; from it, likewise into `recv`.
///
/// # Safety
/// The arrays hold one entry per peer, the buffers what they describe.
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(super) unsafe fn alltoallw(
    c: &vpml::Comm,
    send: *const c_void,
    scounts: *const c_int,
    sdispls: *const c_int,
    stypes: *const Datatype,
    recv: *mut c_void,
    rcounts: *const c_int,
    rdispls: *const c_int,
    rtypes: *const Datatype,
) -> Res<Laid> {
    no_in_place_on_inter(c, send)?;
    let (n, me) = peers(c);
    let array = |p: *const c_int| -> Res<&[c_int]> {
        if n > 0 && p.is_null() {
            return Err((MPI_ERR_ARG, "null count, displacement or type array".into()));
        }
        // SAFETY: one entry per peer (caller contract).
        Ok(unsafe { crate::state::c_array(p, n as c_int) })
    };
    let (rc, rd, rt) = (array(rcounts)?, array(rdispls)?, array(rtypes)?);
    let at = |base: *const c_void, d: c_int| {
        (base as *const u8).wrapping_offset(d as isize) as *mut c_void
    };
    // Where each peer's block comes from: in place, the result buffer.
    let (sc, sd, st, sbase) = if in_place(send) {
        (rc, rd, rt, recv as *const c_void)
    } else {
        (array(scounts)?, array(sdispls)?, array(stypes)?, send)
    };
    // Every outgoing block packed and copied (the result buffer may be
    // the input); every incoming one into its own message.
    // A block of no elements may name any datatype (even none).
    let mut out_blocks = Vec::with_capacity(n);
    for i in 0..n {
        out_blocks.push(match sc[i] {
            0 => Vec::new(),
            // SAFETY: caller contract.
            _ => unsafe { owned(at(sbase, sd[i]), sc[i], st[i]) }?,
        });
    }
    let mut in_msgs = Vec::with_capacity(n);
    for i in 0..n {
        in_msgs.push(match rc[i] {
            0 => Message::Direct {
                ptr: std::ptr::NonNull::dangling().as_ptr(),
                len: 0,
            },
            // SAFETY: caller contract.
            _ => checked(unsafe { Message::new(at(recv, rd[i]), rc[i], rt[i], false) })?,
        });
    }
    let mismatch = match me {
        Some(me) => copy_block(&out_blocks[me], in_msgs[me].bytes()).err(),
        None => None,
    };
    let sends = others(c)
        .map(|i| transfer(i, out_blocks[i].as_ptr(), out_blocks[i].len()))
        .collect();
    let recvs = others(c)
        .map(|i| {
            let (ptr, len) = in_msgs[i].target();
            transfer(i, ptr, len)
        })
        .collect();
    Ok(Laid {
        sends,
        recvs,
        after: Box::new(move || {
            drop(out_blocks);
            for m in &in_msgs {
                m.finish(None);
            }
            Ok(())
        }),
    }
    .ending_with(mismatch))
}

/// The communicator of `h`, or the error code.
macro_rules! comm_or_return {
    ($func:expr, $h:expr) => {
        match comm($func, $h) {
            Ok(c) => c,
            Err(code) => return code,
        }
    };
}

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
        let laid = equal_blocks(&c, rcount, rtype).and_then(|vb| unsafe { allgather(&c, send, scount, stype, recv, vb) });
        launch("MPI_Iallgather", h, &c, laid, req)
    }

    fn MPI_Iallgatherv / PMPI_Iallgatherv(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcounts: *const c_int, displs: *const c_int, rtype: Datatype, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Iallgatherv", h);
        // SAFETY: the caller's buffers and arrays are as MPI says.
        let laid = unsafe { v_blocks(rcounts, displs, &c, rtype) }.and_then(|vb| unsafe { allgather(&c, send, scount, stype, recv, vb) });
        launch("MPI_Iallgatherv", h, &c, laid, req)
    }

    fn MPI_Ialltoall / PMPI_Ialltoall(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, h: Comm, req: *mut Request) -> c_int {
        let c = comm_or_return!("MPI_Ialltoall", h);
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
        let laid = unsafe { alltoallw(&c, send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes) };
        launch("MPI_Ialltoallw", h, &c, laid, req)
    }

    fn MPI_Alltoallw / PMPI_Alltoallw(send: *const c_void, scounts: *const c_int, sdispls: *const c_int, stypes: *const Datatype, recv: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rtypes: *const Datatype, h: Comm) -> c_int {
        let c = comm_or_return!("MPI_Alltoallw", h);
        // SAFETY: the caller's buffers and arrays are as MPI says.
        let laid = unsafe { alltoallw(&c, send, scounts, sdispls, stypes, recv, rcounts, rdispls, rtypes) };
        let mut req = MPI_REQUEST_NULL;
        let r = launch("MPI_Alltoallw", h, &c, laid, &mut req);
        if r != MPI_SUCCESS {
            return r;
        }
        // SAFETY: a request this call made; null is MPI_STATUS_IGNORE too.
        unsafe { crate::p2p::MPI_Wait(&mut req, std::ptr::null_mut()) }
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
    let d = match c.idup() {
        Ok(d) => d,
        Err(e) => return vpml_error(h, func, &e),
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
