//! The origin side: `MPI_Put`, `MPI_Get`, `MPI_Accumulate`,
//! `MPI_Get_accumulate`, `MPI_Fetch_and_op`, `MPI_Compare_and_swap` and
//! their request-based forms. Each packs its origin data into a request
//! naming the target's byte runs (computed here from the target datatype,
//! which the target need not know), and then posts the receive of the
//! reply into the program's buffer (replies from one target match in the
//! order they were asked for).

use std::borrow::Cow;
use std::ffi::{c_int, c_void};

use smallvec::SmallVec;

use super::direct::{self, Locks};
use super::wire::{self, Header, Kind, TAG_DATA, TAG_REPLY, TAG_REQUEST};
use super::{check, win_error, with_win};
use crate::consts::*;
use crate::state::{DerivedType, STATE};

/// Sends in flight past which an operation first forgets completed ones.
const SENDS_KEPT: usize = 256;

/// Most bytes one operation moves (its request and reply are one message,
/// whose count is a C int).
const MAX_BYTES: u64 = (i32::MAX as u64) / 2;

/// Where an operation acts on its target.
#[derive(Clone, Copy)]
struct Target {
    rank: c_int,
    disp: Aint,
    count: c_int,
    dt: Datatype,
}

/// A prepared operation: the window's communicator, the target's rank,
/// the request header (`at` and `base` set), and the target runs.
struct Prepared {
    comm: Comm,
    rank: usize,
    header: Header,
    runs: Runs,
    bytes: u64,
    /// On a direct window ([`super::direct`]): the address of the
    /// target's byte `at`, and the target's locks.
    direct: Option<(*mut u8, Locks)>,
}

/// The layout of `dt`, or the error.
fn layout_of(h: Win, func: &str, dt: Datatype) -> Result<DerivedType, c_int> {
    crate::types::layout(dt).ok_or_else(|| win_error(h, func, MPI_ERR_TYPE, "invalid datatype"))
}

/// A count argument, checked.
fn count_of(h: Win, func: &str, count: c_int) -> Result<usize, c_int> {
    usize::try_from(count)
        .map_err(|_| win_error(h, func, MPI_ERR_COUNT, &format!("negative count {count}")))
}

/// Byte runs (offset, length) of one side of an operation: most are one.
pub(super) type Runs = SmallVec<[(i64, u64); 2]>;

/// The byte runs of `count` elements of layout `l`, adjacent ones merged;
/// `None` if their offsets overflow.
fn runs_of(count: usize, l: &DerivedType) -> Option<Runs> {
    let mut runs = Runs::new();
    for i in 0..i64::try_from(count).ok()? {
        for &(off, len) in &l.blocks {
            let start = i.checked_mul(l.extent as i64)?.checked_add(off as i64)?;
            let len = len as u64;
            match runs.last_mut() {
                Some(last) if last.0.checked_add(last.1 as i64) == Some(start) => last.1 += len,
                _ if len > 0 => runs.push((start, len)),
                _ => {}
            }
        }
    }
    Some(runs)
}

/// One run of `count` elements of `size` bytes back to back (none if
/// empty); `None` if it spans more than memory.
fn one_run(count: usize, size: usize) -> Option<Runs> {
    let bytes = size.checked_mul(count)?;
    let bytes = i64::try_from(bytes).ok()? as u64;
    Some(if bytes > 0 {
        smallvec::smallvec![(0, bytes)]
    } else {
        Runs::new()
    })
}

/// The byte runs of `count` elements of `dt`, and the predefined type
/// every byte belongs to (if one does), or the error.
fn runs_of_type(
    h: Win,
    func: &str,
    count: c_int,
    dt: Datatype,
) -> Result<(Runs, Option<Datatype>), c_int> {
    let n = count_of(h, func, count)?;
    let (runs, base) = match crate::types::predefined_size(dt) {
        // A predefined type (the pairs with padding have none): elements
        // back to back, without building the layout.
        Some(size) => (one_run(n, size), Some(dt)),
        None => {
            let l = layout_of(h, func, dt)?;
            match l.blocks[..] {
                [(0, len)] if len as isize == l.extent => (one_run(n, len), l.base),
                _ => (runs_of(n, &l), l.base),
            }
        }
    };
    let runs = runs.ok_or_else(|| {
        let why = format!("{count} elements of this datatype span more than memory");
        win_error(h, func, MPI_ERR_COUNT, &why)
    })?;
    Ok((runs, base))
}

/// Check an operation's target and lay out its runs; `None` for
/// `MPI_PROC_NULL` (nothing to do).
fn prepare(h: Win, func: &str, t: Target) -> Result<Option<Prepared>, c_int> {
    let Some((comm, size, dynamic)) =
        with_win(h, |w| (w.comm, w.size, w.flavor == MPI_WIN_FLAVOR_DYNAMIC))
    else {
        return Err(crate::state::error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_WIN,
            "invalid window",
        ));
    };
    if t.rank == MPI_PROC_NULL {
        return Ok(None);
    }
    let rank = usize::try_from(t.rank)
        .ok()
        .filter(|&r| r < size)
        .ok_or_else(|| {
            win_error(
                h,
                func,
                MPI_ERR_RANK,
                &format!("invalid target rank {}", t.rank),
            )
        })?;
    let (runs, base) = runs_of_type(h, func, t.count, t.dt)?;
    let (peer, direct) = with_win(h, |w| {
        let direct = w.direct.as_ref().map(|d| (d.at(rank, 0), d.locks(rank)));
        (w.peers[rank], direct)
    })
    .unwrap_or_default();
    let at = if dynamic {
        t.disp as i64
    } else {
        (t.disp as i64).saturating_mul(peer.disp_unit as i64)
    };
    if !dynamic {
        let outside = runs.iter().find(|&&(off, len)| {
            let start = at.saturating_add(off);
            start < 0 || start.saturating_add(len as i64) > peer.len as i64
        });
        if outside.is_some() {
            return Err(win_error(
                h,
                func,
                MPI_ERR_RMA_RANGE,
                &format!(
                    "displacement {} and {} elements reach past the {} bytes of rank {rank}'s window",
                    t.disp, t.count, peer.len
                ),
            ));
        }
    }
    let bytes: u64 = runs.iter().map(|r| r.1).sum();
    if bytes == 0 {
        // Nothing moves (zero counts, or zero-size datatypes at the
        // target): nothing to check or do.
        return Ok(None);
    }
    if bytes > MAX_BYTES {
        return Err(win_error(
            h,
            func,
            MPI_ERR_COUNT,
            &format!("{bytes} bytes in one operation (at most {MAX_BYTES})"),
        ));
    }
    let header = Header {
        at,
        base: base.unwrap_or(MPI_DATATYPE_NULL),
        ..Header::default()
    };
    Ok(Some(Prepared {
        comm,
        rank,
        header,
        runs,
        bytes,
        // The window's bytes lie inside the target's part (checked above).
        direct: direct.map(|(part, locks)| (part.wrapping_offset(at as isize), locks)),
    }))
}

/// `count` elements of `dt` at `addr`, packed (where they lie, if they
/// are back to back); they must be `want` bytes (the target's side of the
/// operation).
fn pack<'a>(
    h: Win,
    func: &str,
    addr: *const c_void,
    count: c_int,
    dt: Datatype,
    want: u64,
) -> Result<Cow<'a, [u8]>, c_int> {
    let n = count_of(h, func, count)?;
    let data = match crate::types::predefined_size(dt) {
        // No bytes (the buffer may be null).
        Some(size) if n.saturating_mul(size) == 0 => Cow::Borrowed(&[][..]),
        // SAFETY: `addr` holds `count` elements of `dt`, back to back,
        // which stay put until the operation returns (caller contract).
        Some(size) => Cow::Borrowed(unsafe {
            std::slice::from_raw_parts(addr.cast::<u8>(), n.saturating_mul(size))
        }),
        None => {
            let l = layout_of(h, func, dt)?;
            // SAFETY: `addr` holds `count` elements of `dt` (caller
            // contract).
            Cow::Owned(unsafe { crate::types::pack(addr.cast(), n, &l) })
        }
    };
    if data.len() as u64 != want {
        return Err(win_error(
            h,
            func,
            MPI_ERR_TYPE,
            &format!(
                "{} bytes at the origin for {want} at the target",
                data.len()
            ),
        ));
    }
    Ok(data)
}

/// The byte runs of `count` elements of `dt` at the origin, which must
/// hold `want` bytes (the target's side of the operation).
fn origin_runs(h: Win, func: &str, count: c_int, dt: Datatype, want: u64) -> Result<Runs, c_int> {
    let (runs, _) = runs_of_type(h, func, count, dt)?;
    same_size(h, func, runs.iter().map(|r| r.1).sum(), want)?;
    Ok(runs)
}

/// The origin's buffer holds `have` bytes where the target's holds `want`:
/// the one size rule of every operation.
fn same_size(h: Win, func: &str, have: u64, want: u64) -> Result<(), c_int> {
    if have == want {
        return Ok(());
    }
    let why = format!("{have} bytes at the origin for {want} at the target");
    Err(win_error(h, func, MPI_ERR_TYPE, &why))
}

/// The operation must combine with a predefined operation over the
/// target's predefined type, and the origin's must be the same.
fn check_accumulate(
    h: Win,
    func: &str,
    p: &Prepared,
    op: Op,
    origin_dt: Datatype,
) -> Result<(), c_int> {
    if slot_of_user_op(op) {
        return Err(win_error(
            h,
            func,
            MPI_ERR_OP,
            "one-sided accumulates take predefined operations only",
        ));
    }
    let origin_base = crate::types::info(origin_dt).and_then(|t| t.base);
    if op != MPI_NO_OP && origin_base.is_some_and(|b| b != p.header.base) {
        return Err(win_error(
            h,
            func,
            MPI_ERR_TYPE,
            "the origin and target datatypes hold different predefined types",
        ));
    }
    crate::types::CombineOp::new(op, p.header.base)
        .map(|_| ())
        .map_err(|(code, why)| win_error(h, func, code, why))
}

fn slot_of_user_op(op: Op) -> bool {
    crate::state::slot_of(op, USER_OP_KIND).is_some()
}

/// `count` elements of `dt` must hold the `want` bytes the target sends
/// back.
fn check_room(h: Win, func: &str, count: c_int, dt: Datatype, want: u64) -> Result<(), c_int> {
    let l = layout_of(h, func, dt)?;
    let each: u64 = l.blocks.iter().map(|b| b.1 as u64).sum();
    same_size(
        h,
        func,
        each.saturating_mul(count_of(h, func, count)? as u64),
        want,
    )
}

/// Post the receive of the target's reply (after the request was sent:
/// replies from one target are matched in the order they were asked for,
/// and one that came first waits among the unexpected messages) into `count` elements of `dt`
/// at `addr`; its request.
fn expect_reply(
    h: Win,
    func: &str,
    p: &Prepared,
    addr: *mut c_void,
    count: c_int,
    dt: Datatype,
) -> Result<Request, c_int> {
    let mut req: Request = MPI_REQUEST_NULL;
    // SAFETY: `addr` holds `count` elements of `dt` until the request
    // completes (MPI's rule for one-sided operations).
    let rc = unsafe {
        crate::p2p::MPI_Irecv(
            addr,
            count,
            dt,
            p.rank as c_int,
            TAG_REPLY,
            p.comm,
            &mut req,
        )
    };
    check(h, func, rc, "receiving a reply").map(|()| req)
}

/// Send request `bytes` to the target (an access of its memory, counted
/// for the fence, unless `control`).
pub(super) fn send_request(
    h: Win,
    func: &str,
    comm: Comm,
    rank: usize,
    bytes: Vec<u8>,
    access: bool,
) -> Result<(), c_int> {
    if with_win(h, |w| w.sends.len()).unwrap_or(0) >= SENDS_KEPT {
        super::target::reap(h);
    }
    if bytes.len() > super::target::INBOX_BYTES {
        // Too long for the target's inbox: announced there, then whole.
        send_tagged(
            h,
            func,
            comm,
            rank,
            wire::follows_of(bytes.len()),
            TAG_REQUEST,
        )?;
        send_tagged(h, func, comm, rank, bytes, TAG_DATA)?;
    } else {
        send_tagged(h, func, comm, rank, bytes, TAG_REQUEST)?;
    }
    if access {
        with_win(h, |w| w.issued[rank] += 1);
    }
    Ok(())
}

/// Send `bytes` to `rank` with `tag`, kept until the send completes.
fn send_tagged(
    h: Win,
    func: &str,
    comm: Comm,
    rank: usize,
    bytes: Vec<u8>,
    tag: c_int,
) -> Result<(), c_int> {
    let Ok(len) = c_int::try_from(bytes.len()) else {
        let why = format!("a request of {} bytes (its runs and data)", bytes.len());
        return Err(win_error(h, func, MPI_ERR_COUNT, &why));
    };
    let mut req: Request = MPI_REQUEST_NULL;
    // SAFETY: `bytes` stays in the window's list until the send completes.
    let rc = unsafe {
        crate::p2p::MPI_Isend(
            bytes.as_ptr().cast(),
            len,
            MPI_BYTE,
            rank as c_int,
            tag,
            comm,
            &mut req,
        )
    };
    check(h, func, rc, "sending a request")?;
    with_win(h, |w| w.sends.push((req, bytes)));
    Ok(())
}

/// Keep the reply's request for the window's next synchronization, or
/// give it to the program (`MPI_Rget` …).
fn keep_or_give(h: Win, req: Request, out: Option<*mut Request>) {
    match out {
        Some(out) => {
            // The window's synchronizations wait for it too.
            if let Some(id) = raw_id(req) {
                with_win(h, |w| w.given.push((req, id)));
            }
            // SAFETY: a request pointer (caller contract).
            unsafe { crate::state::put(out, req) }
        }
        None => {
            with_win(h, |w| w.replies.push(req));
        }
    }
}

/// The engine's id of request `req`, if it is in flight.
pub(super) fn raw_id(req: Request) -> Option<vpml::raw::RawRequest> {
    let i = crate::state::request_slot(req)?;
    STATE.with(|s| Some(s.borrow().requests.get(i)?.active.as_ref()?.id()))
}

/// A request-based operation that is complete once started (its data was
/// copied), or on `MPI_PROC_NULL`.
fn completed(h: Win, out: Option<*mut Request>) -> c_int {
    match out {
        Some(out) => {
            crate::p2p::completed_request(with_win(h, |w| w.comm).unwrap_or(MPI_COMM_WORLD), out)
        }
        None => MPI_SUCCESS,
    }
}

/// The return of an operation that gave `r`: the receive of its reply
/// (kept, or given to the program), none (complete at once: its data was
/// copied, or nothing moves), or an error code.
fn finish(h: Win, r: Result<Option<Request>, c_int>, out: Option<*mut Request>) -> c_int {
    match r {
        Ok(Some(req)) => {
            keep_or_give(h, req, out);
            MPI_SUCCESS
        }
        Ok(None) => completed(h, out),
        Err(code) => code,
    }
}

/// Where an operation of `bytes` bytes of predefined type `tdt` elements
/// lands in a direct window: the address in the target's part and its
/// locks. `None` unless the window is direct, both sides are predefined
/// types of as many bytes, and every argument is valid — the general path
/// takes the rest, and reports the errors. (`bytes` may be 0: the address
/// is then not to be touched, and the program's may be null.)
#[inline]
fn direct_span(h: Win, count: c_int, dt: Datatype, t: Target) -> Option<(*mut u8, usize, Locks)> {
    let size = crate::types::predefined_size(dt)?;
    let tsize = crate::types::predefined_size(t.dt)?;
    let bytes = usize::try_from(count).ok()?.checked_mul(size)?;
    let tbytes = usize::try_from(t.count).ok()?.checked_mul(tsize)?;
    if bytes != tbytes || bytes as u64 > MAX_BYTES {
        return None;
    }
    let rank = usize::try_from(t.rank).ok()?;
    with_win(h, |w| {
        let d = w.direct.as_ref()?;
        let peer = w.peers.get(rank)?;
        let off = usize::try_from(t.disp)
            .ok()?
            .checked_mul(peer.disp_unit as usize)?;
        (off.checked_add(bytes)? <= peer.len as usize)
            .then(|| (d.at(rank, off as i64), bytes, d.locks(rank)))
    })
    .flatten()
}

/// An accumulate on a direct window, with `result` (address, count,
/// type) receiving the target's bytes first for a fetching one: one pass
/// over the target's memory under its accumulate lock. `None` unless
/// [`direct_span`] applies, the origin and target types are the same, the
/// result's type is predefined and as long, and `op` is a predefined
/// operation over the type — the general path takes the rest.
#[inline]
fn direct_accumulate(
    h: Win,
    func: &str,
    (addr, count, dt): (*const c_void, c_int, Datatype),
    result: Option<(*mut c_void, c_int, Datatype)>,
    t: Target,
    op: Op,
) -> Option<c_int> {
    let (at, bytes, locks) = direct_span(h, count, dt, t)?;
    if dt != t.dt || slot_of_user_op(op) || bytes == 0 {
        return None;
    }
    if let Some((_, rcount, rdt)) = result {
        let rsize = crate::types::predefined_size(rdt)?;
        if usize::try_from(rcount).ok()?.checked_mul(rsize)? != bytes {
            return None;
        }
    }
    let combine = crate::types::CombineOp::new(op, dt).ok()?;
    let folds = direct::writes_only(op).is_none();
    // The origin's bytes inside the target's (a rank accumulating from its
    // own window into itself): the general path copies them first.
    if folds && direct::overlap(addr.cast(), bytes, at, bytes) {
        return None;
    }
    let held = locks.accumulating();
    if let Some((r, ..)) = result {
        // SAFETY: `direct_span` found the bytes inside the target's part;
        // `r` holds as many (checked above; caller contract).
        unsafe { std::ptr::copy(at, r.cast::<u8>(), bytes) };
    }
    let folded = match direct::writes_only(op) {
        Some(true) => {
            // SAFETY: as above; `addr` holds the origin's bytes (caller
            // contract; not read for `MPI_NO_OP`, where it may be null).
            unsafe { std::ptr::copy(addr.cast::<u8>(), at, bytes) };
            Ok(())
        }
        Some(false) => Ok(()),
        None => {
            // SAFETY: as above; the two do not overlap (checked above).
            let data = unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), bytes) };
            // SAFETY: as above; the target's bytes are the program's to
            // change under the accumulate lock (MPI forbids other accesses
            // to them meanwhile).
            let target = unsafe { std::slice::from_raw_parts_mut(at, bytes) };
            crate::types::fold_into(combine, dt, target, data)
        }
    };
    // Reported with the lock let go (an error handler may call MPI).
    drop(held);
    Some(match folded {
        Ok(()) => MPI_SUCCESS,
        Err((code, why)) => win_error(h, func, code, &why),
    })
}

/// A compare-and-swap of one element on a direct window: the target's
/// element read, replaced if it equals `compare`'s bytes, and handed to
/// `f.result`, under the target's accumulate lock. `None` unless
/// [`direct_span`] applies to one element of a predefined type (of at most
/// 32 bytes) on both sides — the general path takes the rest. (That path
/// builds its lists of runs and copies for one element: twice Open MPI's
/// time for `MPI_Compare_and_swap` of an `MPI_INT64_T`.)
#[inline]
fn direct_compare_and_swap(h: Win, f: &Fetch, compare: *const c_void, t: Target) -> Option<c_int> {
    if f.count != 1 || f.result_count != 1 || f.result_dt != f.dt || t.dt != f.dt {
        return None;
    }
    // A predefined type, as the general path requires (it names the error).
    crate::types::info(f.dt).and_then(|i| i.base)?;
    let (at, bytes, locks) = direct_span(h, 1, f.dt, t)?;
    let mut old = [0u8; 32];
    let old = old.get_mut(..bytes)?;
    let held = locks.accumulating();
    // SAFETY: `direct_span` found the element inside the target's part;
    // `f.addr`, `compare` and `f.result` each hold one element of the type
    // (caller contract). `old` is ours, so any of them may overlap the
    // target's bytes: the old value is taken before anything is written.
    unsafe {
        std::ptr::copy(at, old.as_mut_ptr(), bytes);
        if std::slice::from_raw_parts(compare.cast::<u8>(), bytes) == old {
            std::ptr::copy(f.addr.cast::<u8>(), at, bytes);
        }
        std::ptr::copy(old.as_ptr(), f.result.cast::<u8>(), bytes);
    }
    drop(held);
    Some(MPI_SUCCESS)
}

/// `MPI_Put` and `MPI_Rput`.
#[allow(clippy::too_many_arguments)] // MPI's own argument list
fn put(
    func: &str,
    addr: *const c_void,
    count: c_int,
    dt: Datatype,
    t: Target,
    h: Win,
    out: Option<*mut Request>,
) -> c_int {
    if let Some((at, bytes, _)) = direct_span(h, count, dt, t) {
        if bytes > 0 {
            // SAFETY: `direct_span` found the bytes inside the target's
            // part; `addr` holds them (caller contract; they may overlap if
            // a rank puts from its own window into itself).
            unsafe { std::ptr::copy(addr.cast::<u8>(), at, bytes) };
        }
        return completed(h, out);
    }
    let r = (|| {
        let Some(p) = prepare(h, func, t)? else {
            return Ok(());
        };
        if let Some((at, _)) = p.direct {
            let from = origin_runs(h, func, count, dt, p.bytes)?;
            // SAFETY: `prepare` found the target's runs inside its part;
            // `addr` holds `count` elements of `dt` (caller contract).
            unsafe { direct::copy_runs(at, &p.runs, addr.cast(), &from) };
            return Ok(());
        }
        let data = pack(h, func, addr, count, dt, p.bytes)?;
        let bytes = wire::encode(Kind::Put, p.header, &p.runs, &data, &[]);
        send_request(h, func, p.comm, p.rank, bytes, true)
    })();
    finish(h, r.map(|()| None), out)
}

/// `MPI_Get` and `MPI_Rget`.
fn get(
    func: &str,
    addr: *mut c_void,
    count: c_int,
    dt: Datatype,
    t: Target,
    h: Win,
    out: Option<*mut Request>,
) -> c_int {
    if let Some((at, bytes, _)) = direct_span(h, count, dt, t) {
        if bytes > 0 {
            // SAFETY: as for a put, the other way.
            unsafe { std::ptr::copy(at, addr.cast::<u8>(), bytes) };
        }
        return completed(h, out);
    }
    let r = (|| {
        let Some(p) = prepare(h, func, t)? else {
            return Ok(None);
        };
        if let Some((at, _)) = p.direct {
            let into = origin_runs(h, func, count, dt, p.bytes)?;
            // SAFETY: as for a put, the other way.
            unsafe { direct::copy_runs(addr.cast(), &into, at, &p.runs) };
            return Ok(None);
        }
        check_room(h, func, count, dt, p.bytes)?;
        let bytes = wire::encode(Kind::Get, p.header, &p.runs, &[], &[]);
        send_request(h, func, p.comm, p.rank, bytes, true)?;
        expect_reply(h, func, &p, addr, count, dt).map(Some)
    })();
    finish(h, r, out)
}

/// `MPI_Accumulate` and `MPI_Raccumulate`.
#[allow(clippy::too_many_arguments)] // MPI's own argument list
fn accumulate(
    func: &str,
    addr: *const c_void,
    count: c_int,
    dt: Datatype,
    t: Target,
    op: Op,
    h: Win,
    out: Option<*mut Request>,
) -> c_int {
    if let Some(rc) = direct_accumulate(h, func, (addr, count, dt), None, t, op) {
        return if rc == MPI_SUCCESS {
            completed(h, out)
        } else {
            rc
        };
    }
    let r = (|| {
        let Some(mut p) = prepare(h, func, t)? else {
            return Ok(());
        };
        check_accumulate(h, func, &p, op, dt)?;
        let data = pack(h, func, addr, count, dt, p.bytes)?;
        if let Some((at, locks)) = p.direct {
            let held = locks.accumulating();
            let applied = apply_direct(&p, at, op, &data);
            drop(held);
            return applied.map_err(|(code, why)| win_error(h, func, code, &why));
        }
        p.header.arg = op;
        let bytes = wire::encode(Kind::Accumulate, p.header, &p.runs, &data, &[]);
        send_request(h, func, p.comm, p.rank, bytes, true)
    })();
    finish(h, r.map(|()| None), out)
}

/// The origin's data and the result buffer of `MPI_Get_accumulate`.
struct Fetch {
    addr: *const c_void,
    count: c_int,
    dt: Datatype,
    result: *mut c_void,
    result_count: c_int,
    result_dt: Datatype,
}

/// `MPI_Get_accumulate`, `MPI_Rget_accumulate`, `MPI_Fetch_and_op`, and
/// with `compare`, `MPI_Compare_and_swap`.
fn fetch(
    func: &str,
    f: Fetch,
    compare: Option<*const c_void>,
    t: Target,
    op: Op,
    h: Win,
    out: Option<*mut Request>,
) -> c_int {
    let direct = match compare {
        None => {
            let result = Some((f.result, f.result_count, f.result_dt));
            direct_accumulate(h, func, (f.addr, f.count, f.dt), result, t, op)
        }
        Some(compare) => direct_compare_and_swap(h, &f, compare, t),
    };
    if let Some(rc) = direct {
        return if rc == MPI_SUCCESS {
            completed(h, out)
        } else {
            rc
        };
    }
    let r = (|| {
        let Some(mut p) = prepare(h, func, t)? else {
            return Ok(None);
        };
        let kind = match compare {
            Some(_) => {
                let base = crate::types::info(t.dt).and_then(|i| i.base);
                if crate::types::predefined_size(t.dt).is_none() || base.is_none() {
                    return Err(win_error(
                        h,
                        func,
                        MPI_ERR_TYPE,
                        "compare-and-swap takes a predefined datatype",
                    ));
                }
                Kind::CompareAndSwap
            }
            None => {
                check_accumulate(h, func, &p, op, f.dt)?;
                Kind::GetAccumulate
            }
        };
        let data = if op == MPI_NO_OP && compare.is_none() {
            Cow::Borrowed(&[][..])
        } else {
            pack(h, func, f.addr, f.count, f.dt, p.bytes)?
        };
        let compare = match compare {
            Some(c) => pack(h, func, c, f.count, f.dt, p.bytes)?,
            None => Cow::Borrowed(&[][..]),
        };
        p.header.arg = op;
        if let Some((at, locks)) = p.direct {
            let into = origin_runs(h, func, f.result_count, f.result_dt, p.bytes)?;
            let held = locks.accumulating();
            let mut applied = Ok(());
            if kind == Kind::CompareAndSwap {
                // SAFETY: `prepare` found the target's runs inside its part.
                let old = unsafe { direct::read_runs(at, &p.runs, p.bytes) };
                if old == *compare {
                    // SAFETY: as above; `data` holds the runs' bytes.
                    unsafe { direct::write_runs(at, &p.runs, &data) };
                }
                // SAFETY: `result` holds the runs `into` (caller contract).
                unsafe { direct::copy_runs(f.result.cast(), &into, old.as_ptr(), &[(0, p.bytes)]) };
            } else {
                // SAFETY: as above.
                unsafe { direct::copy_runs(f.result.cast(), &into, at, &p.runs) };
                applied = apply_direct(&p, at, op, &data);
            }
            drop(held);
            return applied
                .map(|()| None)
                .map_err(|(code, why)| win_error(h, func, code, &why));
        }
        check_room(h, func, f.result_count, f.result_dt, p.bytes)?;
        let bytes = wire::encode(kind, p.header, &p.runs, &data, &compare);
        send_request(h, func, p.comm, p.rank, bytes, true)?;
        expect_reply(h, func, &p, f.result, f.result_count, f.result_dt).map(Some)
    })();
    finish(h, r, out)
}

/// Combine `data` into the target's runs at `at` of a direct window by
/// `op`, in place, under the target's accumulate lock (which the caller
/// holds, and lets go before it reports an error).
fn apply_direct(p: &Prepared, at: *mut u8, op: Op, data: &[u8]) -> Result<(), (c_int, String)> {
    match direct::writes_only(op) {
        // SAFETY: `prepare` found the target's runs inside its part;
        // `data` holds the runs' bytes (and may overlap them).
        Some(true) => unsafe { direct::write_runs(at, &p.runs, data) },
        Some(false) => {}
        None => {
            let base = p.header.base;
            let c = crate::types::CombineOp::new(op, base).map_err(|(c, w)| (c, w.to_string()))?;
            let mut pos = 0usize;
            for &(off, len) in &p.runs {
                let len = len as usize;
                let run = at.wrapping_offset(off as isize);
                let mut part = Cow::Borrowed(&data[pos..pos + len]);
                if direct::overlap(part.as_ptr(), len, run, len) {
                    // The origin's bytes inside the target's: a copy.
                    part = Cow::Owned(part.to_vec());
                }
                // SAFETY: as above; the target's bytes are the program's
                // to change under the accumulate lock (MPI forbids other
                // accesses to them meanwhile); `part` is apart from them.
                let target = unsafe { std::slice::from_raw_parts_mut(run, len) };
                crate::types::fold_into(c, base, target, &part)?;
                pos += len;
            }
        }
    }
    Ok(())
}

/// The target of an operation, from MPI's arguments.
fn target(rank: c_int, disp: Aint, count: c_int, dt: Datatype) -> Target {
    Target {
        rank,
        disp,
        count,
        dt,
    }
}

export! {
    fn MPI_Put / PMPI_Put(addr: *const c_void, count: c_int, dt: Datatype, rank: c_int, disp: Aint, tcount: c_int, tdt: Datatype, h: Win) -> c_int {
        put("MPI_Put", addr, count, dt, target(rank, disp, tcount, tdt), h, None)
    }

    fn MPI_Rput / PMPI_Rput(addr: *const c_void, count: c_int, dt: Datatype, rank: c_int, disp: Aint, tcount: c_int, tdt: Datatype, h: Win, req: *mut Request) -> c_int {
        put("MPI_Rput", addr, count, dt, target(rank, disp, tcount, tdt), h, Some(req))
    }

    fn MPI_Get / PMPI_Get(addr: *mut c_void, count: c_int, dt: Datatype, rank: c_int, disp: Aint, tcount: c_int, tdt: Datatype, h: Win) -> c_int {
        get("MPI_Get", addr, count, dt, target(rank, disp, tcount, tdt), h, None)
    }

    fn MPI_Rget / PMPI_Rget(addr: *mut c_void, count: c_int, dt: Datatype, rank: c_int, disp: Aint, tcount: c_int, tdt: Datatype, h: Win, req: *mut Request) -> c_int {
        get("MPI_Rget", addr, count, dt, target(rank, disp, tcount, tdt), h, Some(req))
    }

    fn MPI_Accumulate / PMPI_Accumulate(addr: *const c_void, count: c_int, dt: Datatype, rank: c_int, disp: Aint, tcount: c_int, tdt: Datatype, op: Op, h: Win) -> c_int {
        accumulate("MPI_Accumulate", addr, count, dt, target(rank, disp, tcount, tdt), op, h, None)
    }

    fn MPI_Raccumulate / PMPI_Raccumulate(addr: *const c_void, count: c_int, dt: Datatype, rank: c_int, disp: Aint, tcount: c_int, tdt: Datatype, op: Op, h: Win, req: *mut Request) -> c_int {
        accumulate("MPI_Raccumulate", addr, count, dt, target(rank, disp, tcount, tdt), op, h, Some(req))
    }

    fn MPI_Get_accumulate / PMPI_Get_accumulate(addr: *const c_void, count: c_int, dt: Datatype, result: *mut c_void, rcount: c_int, rdt: Datatype, rank: c_int, disp: Aint, tcount: c_int, tdt: Datatype, op: Op, h: Win) -> c_int {
        let f = Fetch { addr, count, dt, result, result_count: rcount, result_dt: rdt };
        fetch("MPI_Get_accumulate", f, None, target(rank, disp, tcount, tdt), op, h, None)
    }

    fn MPI_Rget_accumulate / PMPI_Rget_accumulate(addr: *const c_void, count: c_int, dt: Datatype, result: *mut c_void, rcount: c_int, rdt: Datatype, rank: c_int, disp: Aint, tcount: c_int, tdt: Datatype, op: Op, h: Win, req: *mut Request) -> c_int {
        let f = Fetch { addr, count, dt, result, result_count: rcount, result_dt: rdt };
        fetch("MPI_Rget_accumulate", f, None, target(rank, disp, tcount, tdt), op, h, Some(req))
    }

    fn MPI_Fetch_and_op / PMPI_Fetch_and_op(addr: *const c_void, result: *mut c_void, dt: Datatype, rank: c_int, disp: Aint, op: Op, h: Win) -> c_int {
        let f = Fetch { addr, count: 1, dt, result, result_count: 1, result_dt: dt };
        fetch("MPI_Fetch_and_op", f, None, target(rank, disp, 1, dt), op, h, None)
    }

    fn MPI_Compare_and_swap / PMPI_Compare_and_swap(addr: *const c_void, compare: *const c_void, result: *mut c_void, dt: Datatype, rank: c_int, disp: Aint, h: Win) -> c_int {
        let f = Fetch { addr, count: 1, dt, result, result_count: 1, result_dt: dt };
        fetch("MPI_Compare_and_swap", f, Some(compare), target(rank, disp, 1, dt), MPI_REPLACE, h, None)
    }
}
