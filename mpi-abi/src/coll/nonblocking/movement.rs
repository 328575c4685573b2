//! Layouts of the collectives that move data: barrier, broadcast,
//! gathers, scatters, allgathers and all-to-alls.

use std::ffi::{c_int, c_void};

use super::super::{VBlocks, checked, user_bytes, user_bytes_ref};
use super::*;
use crate::coll::Res;
use crate::consts::*;
use crate::types::Message;

pub(in crate::coll) fn barrier(c: &vpml::Comm) -> Laid {
    let none = std::ptr::NonNull::<u8>::dangling().as_ptr();
    Laid {
        sends: others(c).map(|i| transfer(i, none, 0)).collect(),
        recvs: others(c).map(|i| transfer(i, none, 0)).collect(),
        own: None,
        after: None,
    }
}

/// # Safety
/// `buf` holds `count` elements of `dt` (the C caller's contract).
pub(in crate::coll) unsafe fn bcast(
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
            sends: Transfers::new(),
            recvs: smallvec::smallvec![transfer(r, ptr, len)],
            own: None,
            after: finishing(m),
        },
        _ => Laid {
            sends: others(c).map(|i| transfer(i, ptr, len)).collect(),
            recvs: Transfers::new(),
            own: None,
            after: keeping(m),
        },
    })
}

/// Gather: `vb` (at the root) describes the blocks of `recv`, one per
/// peer.
///
/// # Safety
/// The caller's buffers hold what MPI says they hold.
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(in crate::coll) unsafe fn gather(
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
            let mine = unsafe { Outgoing::of(send, scount, stype) }?;
            Ok(Laid {
                sends: smallvec::smallvec![transfer(r, mine.as_ptr(), mine.len())],
                recvs: Transfers::new(),
                own: None,
                after: mine.held(),
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
    let from: Ranks = others(c).collect();
    if let Some((lens, offs, span)) = vb.in_buffer() {
        // The blocks land in the caller's buffer.
        // SAFETY: caller contract.
        let all = unsafe { user_bytes(recv, span) }?;
        // SAFETY: caller contract.
        let (recvs, mismatch) =
            unsafe { own_and_others(me, &from, send, scount, stype, all, &lens, &offs) }?;
        return Ok(Laid {
            sends: Transfers::new(),
            recvs,
            own: None,
            after: None,
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
    // SAFETY: caller contract.
    let (recvs, mismatch) =
        unsafe { own_and_others(me, &from, send, scount, stype, &mut all, &lens, &offs) }?;
    let recv_addr = recv as usize;
    Ok(Laid {
        sends: Transfers::new(),
        recvs,
        own: None,
        after: Some(Box::new(move || {
            // SAFETY: the caller's buffer holds the blocks until the
            // request completes (MPI's contract).
            unsafe { vb.unpack(&all, recv_addr as *mut c_void) };
            Ok(())
        })),
    }
    .ending_with(mismatch))
}

/// This rank's own block, copied into the result: the lengths must agree.
/// A block whose size is not what the collective says: class and why.
type Mismatch = (c_int, String);

/// A gather's root: its own block (`send`, unless in place) copied into
/// `all` at its place, and a receive of each other rank's block (`from`)
/// into its place; with the size mismatch of the own block, if any.
///
/// # Safety
/// Unless in place, `send` holds `scount` elements of `stype`; `all`
/// outlives the receives.
#[allow(clippy::too_many_arguments)] // a gather's own list
unsafe fn own_and_others(
    me: Option<usize>,
    from: &[usize],
    send: *const c_void,
    scount: c_int,
    stype: Datatype,
    all: &mut [u8],
    lens: &[usize],
    offs: &[usize],
) -> Res<(Transfers, Option<Mismatch>)> {
    let mut mismatch = None;
    if let Some(me) = me
        && !in_place(send)
    {
        // SAFETY: caller contract.
        let mine = unsafe { Outgoing::of(send, scount, stype) }?;
        mismatch = copy_block(mine.as_slice(), &mut all[offs[me]..offs[me] + lens[me]]).err();
    }
    let base = all.as_mut_ptr();
    let recvs = from
        .iter()
        .map(|&i| transfer(i, base.wrapping_add(offs[i]), lens[i]))
        .collect();
    Ok((recvs, mismatch))
}

pub(super) fn copy_block(mine: &[u8], into: &mut [u8]) -> Res {
    if mine.len() != into.len() {
        return Err(size_mismatch(mine.len(), into.len()));
    }
    into.copy_from_slice(mine);
    Ok(())
}

/// This rank's own block has `mine` bytes where the result's has `block`.
pub(super) fn size_mismatch(mine: usize, block: usize) -> Mismatch {
    (
        MPI_ERR_TRUNCATE,
        format!("a {mine}-byte contribution for a {block}-byte block"),
    )
}

/// Equal blocks of `count` elements of `dt`, one per peer.
pub(in crate::coll) fn equal_blocks(
    c: &vpml::Comm,
    count: c_int,
    dt: Datatype,
) -> Res<VBlocks<'static>> {
    crate::coll::neighbor::equal(peers(c).0, count, dt)
}

/// # Safety
/// `counts` and `displs` hold one int per peer.
pub(in crate::coll) unsafe fn v_blocks(
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
pub(in crate::coll) unsafe fn scatter(
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
                sends: Transfers::new(),
                recvs: smallvec::smallvec![transfer(r, ptr, len)],
                own: None,
                after: finishing(out),
            })
        }
        Role::Root => {
            let vb = vb()?;
            let (_, me) = peers(c);
            // The root's own block, unless in place.
            let mut out = match me {
                // SAFETY: caller contract.
                Some(_) if !in_place(recv) => Some(checked(unsafe {
                    Message::new(recv, rcount, rtype, false)
                })?),
                _ => None,
            };
            // Blocks that lie in the caller's buffer go from there (MPI
            // keeps the program from touching it until the request
            // completes); others are packed into bytes of our own, held
            // until then, as are all of them when the root's block
            // overlaps them (an erroneous program, which must not make
            // the copy below read what it writes). (Copying the whole
            // buffer made a 2-rank `MPI_Iscatter` of 4 MiB blocks 3.3x
            // Open MPI's time.)
            let own = out.as_mut().map(Message::target);
            let apart = |span: usize| {
                own.is_none_or(|(at, len)| !crate::rma::overlap(at, len, send.cast(), span))
            };
            let (lens, offs, data, packed) = match vb.in_buffer() {
                Some((lens, offs, span)) if apart(span) => {
                    // SAFETY: caller contract (read only).
                    let bytes = unsafe { user_bytes_ref(send, span) }?;
                    (lens, offs, bytes.as_ptr(), Vec::new())
                }
                _ => {
                    // SAFETY: caller contract.
                    let packed = unsafe { vb.pack(send) };
                    (vb.lens(), vb.offs(), packed.as_ptr(), packed)
                }
            };
            let (mut mismatch, mut own) = (None, None);
            if let (Some(me), Some(mut out)) = (me, out) {
                match out {
                    // The program's buffer: copied once the sends started
                    // (a large block then overlaps with the peers reading
                    // theirs).
                    Message::Direct { ptr, len } if len == lens[me] => {
                        // SAFETY: block `me` lies in `data` (the caller's
                        // span, or the packed bytes, which the last step
                        // keeps), apart from `out`'s bytes (checked above);
                        // `out` is the program's buffer.
                        own = Some(unsafe { OwnCopy::new(data.add(offs[me]), ptr, len) });
                    }
                    _ => {
                        // SAFETY: as above.
                        let mine =
                            unsafe { std::slice::from_raw_parts(data.add(offs[me]), lens[me]) };
                        mismatch = copy_block(mine, out.bytes()).err();
                        out.finish(None);
                    }
                }
            }
            let sends = others(c)
                .map(|i| transfer(i, data.wrapping_add(offs[i]), lens[i]))
                .collect();
            Ok(Laid {
                sends,
                recvs: Transfers::new(),
                own,
                after: (!packed.is_empty()).then(|| -> AfterCollective {
                    Box::new(move || {
                        drop(packed);
                        Ok(())
                    })
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
pub(in crate::coll) unsafe fn allgather(
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
            Outgoing::copy(packed[offs[me]..offs[me] + lens[me]].to_vec())
        }
        // SAFETY: caller contract.
        _ => unsafe { Outgoing::of(send, scount, stype) }?,
    };
    // SAFETY: caller contract.
    let mut laid = unsafe { gather_at_root(c, send, scount, stype, recv, vb) }?;
    laid.sends = others(c)
        .map(|i| transfer(i, mine.as_ptr(), mine.len()))
        .collect();
    Ok(laid.holding(mine.held()))
}

/// Alltoall(v): block `i` of `send` (as `sb` says; in place, of `recv`)
/// to peer `i`, block `i` of `recv` (as `rb` says) from it.
///
/// # Safety
/// The caller's buffers hold what MPI says they hold.
pub(in crate::coll) unsafe fn alltoall(
    c: &vpml::Comm,
    send: *const c_void,
    sb: Option<VBlocks<'static>>,
    recv: *mut c_void,
    rb: VBlocks<'static>,
) -> Res<Laid> {
    no_in_place_on_inter(c, send)?;
    let (_, me) = peers(c);
    if sb.is_some() {
        // (Erroneous, and reported: the copy below would read what it
        // writes.)
        super::super::not_aliased(send, recv)?;
    }
    if let Some(sb) = &sb
        && let (Some((slens, soffs, sspan)), Some((rlens, roffs, rspan))) =
            (sb.in_buffer(), rb.in_buffer())
        // (Buffers apart: one that overlaps the other takes the copies.)
        && ((send as usize).saturating_add(sspan) <= recv as usize
            || (recv as usize).saturating_add(rspan) <= send as usize)
    {
        // Contiguous datatypes, not in place: every block straight from
        // the send buffer into the result buffer, no copy in between.
        // SAFETY: caller contract.
        let (input, all) = unsafe { (user_bytes_ref(send, sspan)?, user_bytes(recv, rspan)?) };
        let mismatch = me.and_then(|me| {
            let mine = &input[soffs[me]..soffs[me] + slens[me]];
            copy_block(mine, &mut all[roffs[me]..roffs[me] + rlens[me]]).err()
        });
        let (inp, out) = (input.as_ptr(), all.as_mut_ptr());
        return Ok(Laid {
            sends: others(c)
                .map(|i| transfer(i, inp.wrapping_add(soffs[i]), slens[i]))
                .collect(),
            recvs: others(c)
                .map(|i| transfer(i, out.wrapping_add(roffs[i]), rlens[i]))
                .collect(),
            own: None,
            after: None,
        }
        .ending_with(mismatch));
    }
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
        own: None,
        after: Some(Box::new(move || {
            drop(input);
            // SAFETY: the caller's buffer holds the blocks until the
            // request completes (MPI's contract).
            unsafe { rb.unpack(&all, recv_addr as *mut c_void) };
            Ok(())
        })),
    }
    .ending_with(mismatch))
}

/// Alltoallw: to peer `i`, `scounts[i]` elements of `stypes[i]` at byte
/// `sdispls[i]` of `send`; from it, likewise into `recv`.
///
/// # Safety
/// The arrays hold one entry per peer, the buffers what they describe.
#[allow(clippy::too_many_arguments)] // MPI's own argument list
pub(in crate::coll) unsafe fn alltoallw(
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
    let inplace = in_place(send);
    // (On the stack for small jobs, as the transfers are.)
    let mut out_blocks: smallvec::SmallVec<[Outgoing; 8]> = smallvec::SmallVec::with_capacity(n);
    for i in 0..n {
        out_blocks.push(match sc[i] {
            0 => Outgoing::copy(Vec::new()),
            // SAFETY: caller contract.
            _ if inplace => Outgoing::copy(unsafe { owned(at(sbase, sd[i]), sc[i], st[i]) }?),
            // SAFETY: caller contract.
            _ => unsafe { Outgoing::of(at(sbase, sd[i]), sc[i], st[i]) }?,
        });
    }
    let mut in_msgs: smallvec::SmallVec<[Message; 8]> = smallvec::SmallVec::with_capacity(n);
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
        Some(me) => copy_block(out_blocks[me].as_slice(), in_msgs[me].bytes()).err(),
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
    // Every block in the program's buffers (predefined or contiguous
    // datatypes): nothing to do at the end.
    let direct = out_blocks.iter().all(Outgoing::owns_nothing)
        && in_msgs.iter().all(|m| matches!(m, Message::Direct { .. }));
    if direct {
        return Ok(Laid {
            sends,
            recvs,
            own: None,
            after: None,
        }
        .ending_with(mismatch));
    }
    Ok(Laid {
        sends,
        recvs,
        own: None,
        after: Some(Box::new(move || {
            drop(out_blocks);
            for m in &in_msgs {
                m.finish(None);
            }
            Ok(())
        })),
    }
    .ending_with(mismatch))
}
