//! Collectives: barrier, broadcast, reductions, gathers, scatters and
//! all-to-all, each on vpml's collective of the same name. Data moves as
//! bytes; non-contiguous datatypes are packed around the call (the `v`
//! variants pack each block, `VBlocks`); reductions go through
//! `types::reduce`.

use std::ffi::{c_int, c_void};

use crate::consts::*;
use crate::state::{DerivedType, comm, error, vpml_error};
use crate::types::{
    CombineOp, Message, Reduction, info, is_padded_pair, layout, pack, predefined_size, reduce,
    reduce_predefined, unpack,
};

/// What the collectives' steps return: the error class and a message.
type Res<T = ()> = Result<T, (c_int, String)>;

/// The communicator of `h`, or the error code (for the calls in the
/// modules below).
macro_rules! comm_or_return {
    ($func:expr, $h:expr) => {
        match crate::state::comm($func, $h) {
            Ok(c) => c,
            Err(code) => return code,
        }
    };
}

/// Under `MPI_THREAD_MULTIPLE`, return what the blocking collective gives
/// as its nonblocking form and a wait that lets the other threads call MPI
/// (a thread blocked inside a collective would keep them from the calls
/// that other ranks' collectives wait for). Also on a communicator whose
/// members all share a live window: the wait serves one-sided requests
/// (see [`crate::rma::covers`]). The communicator is `h`.
macro_rules! threaded_as {
    ($func:literal, $h:ident, $start:ident ($($arg:expr),*)) => {
        if crate::threads::multiple() || crate::rma::covers($h) {
            let start = |req| {
                // SAFETY: the blocking call's arguments, under the same
                // contract, and a request of its own.
                unsafe { nonblocking::calls::$start($($arg,)* req) }
            };
            // SAFETY: null is MPI_STATUS_IGNORE.
            return unsafe { crate::p2p::start_and_wait($func, start, std::ptr::null_mut()) };
        }
    };
}

mod inter;
mod neighbor;
mod nonblocking;
mod persistent;
mod plain;

use plain::{allgather_blocks, alltoall_blocks, equal_lists, gather_blocks, scatter_blocks};

pub(crate) use nonblocking::Laid;
pub(crate) use nonblocking::calls::{MPI_Iallgather, MPI_Iallreduce, MPI_Ibcast};
pub(crate) use persistent::start_persistent;

/// How many blocks a collective's per-rank buffers hold: one per member,
/// or on an intercommunicator one per member of the remote group.
fn peer_count(c: &vpml::Comm) -> usize {
    if c.is_inter() {
        c.remote_size()
    } else {
        c.size()
    }
}

/// MPI defines no `MPI_IN_PLACE` on intercommunicators.
fn no_in_place_on_inter(c: &vpml::Comm, send: *const c_void) -> Result<(), (c_int, String)> {
    if c.is_inter() && in_place(send) {
        return Err((MPI_ERR_ARG, "MPI_IN_PLACE on an intercommunicator".into()));
    }
    Ok(())
}

/// Shorthand: run `f` or report its error on `h` as `func`.
fn report(h: Comm, func: &str, r: Result<(), (c_int, String)>) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err((code, why)) => error(h, func, code, &why),
    }
}

/// The caller's `len` bytes at `buf`.
///
/// # Safety
/// `buf` holds `len` bytes, writable, not otherwise borrowed during the
/// call (the C caller's contract).
unsafe fn user_bytes<'a>(buf: *mut c_void, len: usize) -> Result<&'a mut [u8], (c_int, String)> {
    if len == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err((MPI_ERR_BUFFER, "null buffer".into()));
    }
    // SAFETY: caller contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, len) })
}

/// MPI forbids the input and the result in one buffer other than by
/// `MPI_IN_PLACE`: say so rather than compute from a half-overwritten
/// input.
fn not_aliased(send: *const c_void, recv: *const c_void) -> Result<(), (c_int, String)> {
    if !in_place(send) && !send.is_null() && std::ptr::eq(send, recv) {
        return Err((
            MPI_ERR_BUFFER,
            "the send and receive buffers are the same (use MPI_IN_PLACE)".into(),
        ));
    }
    Ok(())
}

/// The caller's `len` bytes at `buf`, to read.
///
/// # Safety
/// `buf` holds `len` bytes that stay unchanged during the call (the C
/// caller's contract).
unsafe fn user_bytes_ref<'a>(buf: *const c_void, len: usize) -> Result<&'a [u8], (c_int, String)> {
    if len == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err((MPI_ERR_BUFFER, "null buffer".into()));
    }
    // SAFETY: caller contract.
    Ok(unsafe { std::slice::from_raw_parts(buf as *const u8, len) })
}

fn from_vpml(r: vpml::Result<()>) -> Result<(), (c_int, String)> {
    r.map_err(|e| (crate::state::class_of(&e), e.to_string()))
}

fn checked<T>(r: Result<T, (c_int, &'static str)>) -> Result<T, (c_int, String)> {
    r.map_err(|(c, w)| (c, w.to_string()))
}

fn root_of(c: &vpml::Comm, root: c_int) -> Result<usize, (c_int, String)> {
    usize::try_from(root)
        .ok()
        .filter(|&r| r < c.size())
        .ok_or_else(|| (MPI_ERR_ROOT, format!("invalid root {root}")))
}

/// The blocks of a `v` collective's buffer: `counts[i]` elements of the
/// datatype at element displacement `displs[i]` (in extents). They travel
/// packed one after the other, so any datatype works; for a contiguous
/// datatype they stay where they are (`in_buffer`). The caller's arrays are
/// read in place: a small `v` collective allocates little besides what
/// the collective needs.
struct VBlocks<'a> {
    /// Bytes of data per element.
    size: usize,
    /// The layout of a datatype that is not contiguous (elements are
    /// packed); `None` for a contiguous one, whose extent is `size`.
    layout: Option<DerivedType>,
    counts: Ints<'a>,
    displs: Ints<'a>,
}

/// A per-rank list of ints: the C caller's, or one of our own (on the
/// stack for small jobs, so that a small collective allocates nothing).
enum Ints<'a> {
    Borrowed(&'a [c_int]),
    Owned(OwnedInts),
}

/// See [`Ints`].
type OwnedInts = smallvec::SmallVec<[c_int; 8]>;

impl Ints<'_> {
    /// The same list, owned.
    fn into_owned(self) -> Ints<'static> {
        match self {
            Ints::Borrowed(s) => Ints::Owned(OwnedInts::from_slice(s)),
            Ints::Owned(v) => Ints::Owned(v),
        }
    }
}

impl std::ops::Deref for Ints<'_> {
    type Target = [c_int];

    fn deref(&self) -> &[c_int] {
        match self {
            Ints::Borrowed(s) => s,
            Ints::Owned(v) => v,
        }
    }
}

/// A per-rank table of a `v` collective: on the stack for small jobs.
type PerRank = smallvec::SmallVec<[usize; 8]>;

impl VBlocks<'_> {
    /// # Safety
    /// `counts` and `displs` hold `n` ints each (the C caller's contract)
    /// and are left alone while the blocks are used.
    unsafe fn new<'a>(
        counts: *const c_int,
        displs: *const c_int,
        n: usize,
        dt: Datatype,
    ) -> Result<VBlocks<'a>, (c_int, String)> {
        let t = info(dt).ok_or_else(|| (MPI_ERR_TYPE, "invalid datatype".to_string()))?;
        if n > 0 && (counts.is_null() || displs.is_null()) {
            return Err((MPI_ERR_ARG, "null count or displacement array".into()));
        }
        let (counts, displs): (&[c_int], &[c_int]) = if n == 0 {
            (&[], &[])
        } else {
            // SAFETY: caller contract.
            unsafe {
                (
                    std::slice::from_raw_parts(counts, n),
                    std::slice::from_raw_parts(displs, n),
                )
            }
        };
        if counts.iter().any(|&c| c < 0) {
            return Err((MPI_ERR_COUNT, "negative count".to_string()));
        }
        let layout = if t.contiguous && t.size > 0 {
            None
        } else {
            Some(layout(dt).ok_or_else(|| (MPI_ERR_TYPE, "invalid datatype".to_string()))?)
        };
        Ok(VBlocks {
            size: t.size,
            layout,
            counts: Ints::Borrowed(counts),
            displs: Ints::Borrowed(displs),
        })
    }

    /// Blocks from arrays made here (checked as [`VBlocks::new`] checks
    /// the caller's), kept without a copy.
    fn owned(
        counts: OwnedInts,
        displs: OwnedInts,
        dt: Datatype,
    ) -> Result<VBlocks<'static>, (c_int, String)> {
        assert_eq!(counts.len(), displs.len(), "one displacement per count");
        // SAFETY: both arrays hold `counts.len()` ints, borrowed only for
        // the checks; the blocks then take the arrays themselves.
        let checked = unsafe { VBlocks::new(counts.as_ptr(), displs.as_ptr(), counts.len(), dt) }?;
        Ok(VBlocks {
            size: checked.size,
            layout: checked.layout,
            counts: Ints::Owned(counts),
            displs: Ints::Owned(displs),
        })
    }

    /// The same blocks, with copies of the caller's arrays (for a
    /// nonblocking collective's last step).
    fn into_owned(self) -> VBlocks<'static> {
        VBlocks {
            size: self.size,
            layout: self.layout,
            counts: self.counts.into_owned(),
            displs: self.displs.into_owned(),
        }
    }

    /// Bytes of each block, packed.
    fn lens(&self) -> PerRank {
        self.counts
            .iter()
            .map(|&c| c as usize * self.size)
            .collect()
    }

    /// Where each block starts in the packed run.
    fn offs(&self) -> PerRank {
        self.counts
            .iter()
            .scan(0, |at, &c| {
                let o = *at;
                *at += c as usize * self.size;
                Some(o)
            })
            .collect()
    }

    fn total(&self) -> usize {
        self.counts.iter().map(|&c| c as usize * self.size).sum()
    }

    /// Where the blocks lie in the caller's buffer, when the collective
    /// can use them there (a contiguous datatype, no negative
    /// displacement): each block's bytes and byte offset, and how many
    /// bytes the buffer spans.
    fn in_buffer(&self) -> Option<(PerRank, PerRank, usize)> {
        if self.layout.is_some() {
            return None;
        }
        // One pass (this runs on every call of a small `v` collective).
        let n = self.counts.len();
        let (mut lens, mut offs) = (PerRank::with_capacity(n), PerRank::with_capacity(n));
        let mut span = 0usize;
        for (&c, &d) in self.counts.iter().zip(self.displs.iter()) {
            let len = (c as usize).checked_mul(self.size)?;
            // A block of no bytes may name any displacement: it is never
            // touched, so it is placed at 0 and does not count in the span.
            let off = match len {
                0 => 0,
                _ => usize::try_from(d).ok()?.checked_mul(self.size)?,
            };
            span = span.max(len.checked_add(off)?);
            lens.push(len);
            offs.push(off);
        }
        if isize::try_from(span).is_err() {
            return None;
        }
        Some((lens, offs, span))
    }

    /// The layout elements are packed with, and the stride between them.
    fn element(&self) -> (std::borrow::Cow<'_, DerivedType>, isize) {
        match &self.layout {
            Some(t) => (std::borrow::Cow::Borrowed(t), t.extent),
            None => {
                let t = DerivedType {
                    blocks: vec![(0, self.size)],
                    lb: 0,
                    extent: self.size as isize,
                    base: None,
                    per: 1,
                    align: 1,
                    bounds: (crate::state::Bound::Data, crate::state::Bound::Data),
                };
                (std::borrow::Cow::Owned(t), self.size as isize)
            }
        }
    }

    /// The blocks of `buf`, packed.
    ///
    /// # Safety
    /// `buf` holds the blocks.
    unsafe fn pack(&self, buf: *const c_void) -> Vec<u8> {
        let (t, extent) = self.element();
        let mut out = Vec::with_capacity(self.total());
        for (&c, &d) in self.counts.iter().zip(self.displs.iter()) {
            let at = (buf as *const u8).wrapping_offset(d as isize * extent);
            // SAFETY: caller contract.
            out.extend(unsafe { pack(at, c as usize, &t) });
        }
        out
    }

    /// Spread packed blocks back into `buf`.
    ///
    /// # Safety
    /// `buf` holds the blocks, writable.
    unsafe fn unpack(&self, data: &[u8], buf: *mut c_void) {
        let (t, extent) = self.element();
        for ((l, o), &d) in self.lens().iter().zip(self.offs()).zip(self.displs.iter()) {
            let at = (buf as *mut u8).wrapping_offset(d as isize * extent);
            // SAFETY: caller contract.
            unsafe { unpack(&data[o..o + l], at, &t) };
        }
    }
}

/// This rank's contribution to a gather: the caller's `send` (packed for
/// a non-contiguous datatype), or in place a copy of its block of the
/// result buffer (which the collective writes).
enum Contribution {
    Send(Message),
    Copy(Vec<u8>),
}

impl Contribution {
    /// # Safety
    /// Unless in place, `send` holds `scount` elements of `stype` (the C
    /// caller's contract).
    unsafe fn new(
        send: *const c_void,
        scount: c_int,
        stype: Datatype,
        own: impl FnOnce() -> Vec<u8>,
    ) -> Result<Contribution, (c_int, String)> {
        if in_place(send) {
            return Ok(Contribution::Copy(own()));
        }
        // SAFETY: caller contract.
        let m = checked(unsafe { Message::new(send, scount, stype, true) })?;
        Ok(Contribution::Send(m))
    }

    fn bytes(&mut self) -> &[u8] {
        match self {
            Contribution::Send(m) => m.bytes(),
            Contribution::Copy(v) => v,
        }
    }
}

#[allow(clippy::too_many_arguments)] // MPI's own argument list
fn run_reduction(
    func: &str,
    kind: impl FnOnce(&vpml::Comm) -> Result<Reduction, (c_int, String)>,
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    recv_count: c_int,
    dt: Datatype,
    op: Op,
    h: Comm,
) -> c_int {
    let c = match comm(func, h) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let r = (|| {
        no_in_place_on_inter(&c, send)?;
        let kind = kind(&c)?;
        let op = checked(CombineOp::new(op, dt))?;
        // SAFETY: the caller's buffers hold `count` and `recv_count`
        // elements of `dt`.
        let fast = unsafe { predefined_buffers(&c, &kind, &op, send, recv, count, recv_count, dt) };
        if let Some((input, out)) = fast {
            return reduce_predefined(&c, kind, input, out, op, dt);
        }
        let n = usize::try_from(count).unwrap_or(0);
        let inplace = in_place(send);
        // The result, in the caller's buffer (or packed, for a
        // non-contiguous datatype); in place it holds the input too.
        let mut out = match kind {
            Reduction::To(root) if c.rank() != root => None,
            // SAFETY: the caller's `recv` holds `recv_count` elements.
            _ => Some(checked(unsafe {
                Message::new(recv, recv_count, dt, inplace)
            })?),
        };
        if out.is_some() {
            not_aliased(send, recv)?;
        }
        // The input where it is not in `out`: the caller's `send`, or in
        // place a copy of `recv` where only part of it is the result.
        let mut input = None;
        let mut copied = None;
        if !inplace || out.is_none() {
            let from = if inplace { recv as *const c_void } else { send };
            // SAFETY: the caller's buffer holds `count` elements of `dt`.
            input = Some(checked(unsafe { Message::new(from, count, dt, true) })?);
        } else if matches!(kind, Reduction::Scatter { .. }) {
            // SAFETY: in place, `recv` holds the `count` input elements.
            let mut m = checked(unsafe { Message::new(recv, count, dt, true) })?;
            copied = Some(m.bytes().to_vec());
        }
        let input: Option<&[u8]> = match (&mut input, &copied) {
            (Some(m), _) => Some(m.bytes()),
            (None, Some(v)) => Some(v),
            (None, None) => None,
        };
        match &mut out {
            Some(m) => {
                reduce(&c, kind, input, m.bytes(), op, dt, n)?;
                m.finish(None);
                Ok(())
            }
            None => reduce(&c, kind, input, &mut [], op, dt, n),
        }
    })();
    report(h, func, r)
}

/// The common case of a reduction, as the C buffers themselves: separate
/// buffers of a predefined datatype (not a padded pair) with a predefined
/// operation, on an intracommunicator, one count for both sides (`None`:
/// the general path, which also reports every error).
///
/// # Safety
/// `send` holds `count` and `recv` `recv_count` elements of `dt`, the
/// latter writable (the C caller's contract).
#[allow(clippy::too_many_arguments)] // MPI's own argument list, checked
unsafe fn predefined_buffers<'a>(
    c: &vpml::Comm,
    kind: &Reduction,
    op: &CombineOp,
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    recv_count: c_int,
    dt: Datatype,
) -> Option<(&'a [u8], &'a mut [u8])> {
    if !op.is_predefined()
        || c.is_inter()
        || in_place(send)
        || send.is_null()
        || std::ptr::eq(send, recv)
        || count != recv_count
        || matches!(kind, Reduction::Scatter { .. } | Reduction::Inter(_))
        || is_padded_pair(dt)
    {
        return None;
    }
    let size = predefined_size(dt).filter(|&s| s > 0)?;
    let len = usize::try_from(count).ok()?.checked_mul(size)?;
    let out_len = match kind {
        Reduction::To(root) if c.rank() != *root => 0,
        _ => len,
    };
    if out_len > 0 && recv.is_null() {
        return None;
    }
    // SAFETY: the caller's contract; the buffers are distinct (checked
    // above, MPI forbids partial overlap), and empty ones are not read.
    unsafe {
        let input = std::slice::from_raw_parts(send as *const u8, len);
        let out: &mut [u8] = if out_len == 0 {
            &mut []
        } else {
            std::slice::from_raw_parts_mut(recv as *mut u8, out_len)
        };
        Some((input, out))
    }
}

/// A barrier that serves one-sided requests while it waits (a rank that
/// waits in a barrier for another which waits for a lock this one grants
/// would otherwise never see it): the blocking barrier's rounds, each
/// waited for in the library.
fn serving_barrier(c: &vpml::Comm) -> vpml::Result<()> {
    let mut k = 1;
    while k < c.size() {
        let round = c.start_barrier_round_raw(k)?;
        crate::threads::wait_for(c, || c.poll_raw(&[Some(round)], true))?;
        c.wait_all_raw(&[Some(round)])?;
        c.finish_raw(round)?;
        k *= 2;
    }
    Ok(())
}

export! {
    fn MPI_Barrier / PMPI_Barrier(h: Comm) -> c_int {
        threaded_as!("MPI_Barrier", h, MPI_Ibarrier(h));
        match comm("MPI_Barrier", h) {
            Ok(c) if crate::rma::live() && !c.is_inter() => match serving_barrier(&c) {
                Ok(()) => MPI_SUCCESS,
                Err(e) => vpml_error(h, "MPI_Barrier", &e),
            },
            Ok(c) => match c.barrier() {
                Ok(()) => MPI_SUCCESS,
                Err(e) => vpml_error(h, "MPI_Barrier", &e),
            },
            Err(code) => code,
        }
    }

    fn MPI_Bcast / PMPI_Bcast(buf: *mut c_void, count: c_int, dt: Datatype, root: c_int, h: Comm) -> c_int {
        threaded_as!("MPI_Bcast", h, MPI_Ibcast(buf, count, dt, root, h));
        let c = match comm("MPI_Bcast", h) { Ok(c) => c, Err(code) => return code };
        if c.is_inter() {
            // SAFETY: the caller's buffer holds `count` elements of `dt`.
            return report(h, "MPI_Bcast", unsafe { inter::bcast(&c, buf, count, dt, root) });
        }
        let r = (|| {
            let root = root_of(&c, root)?;
            // SAFETY: the caller's buffer holds `count` elements of `dt`.
            let mut m = checked(unsafe { Message::new(buf, count, dt, c.rank() == root) })?;
            from_vpml(c.bcast(m.bytes(), root))?;
            m.finish(None);
            Ok(())
        })();
        report(h, "MPI_Bcast", r)
    }

    fn MPI_Reduce / PMPI_Reduce(send: *const c_void, recv: *mut c_void, count: c_int, dt: Datatype, op: Op, root: c_int, h: Comm) -> c_int {
        threaded_as!("MPI_Reduce", h, MPI_Ireduce(send, recv, count, dt, op, root, h));
        if let Ok(c) = comm("MPI_Reduce", h)
            && c.is_inter()
        {
            // SAFETY: the caller's buffers hold `count` elements of `dt`.
            return report(h, "MPI_Reduce", unsafe { inter::reduce_to(&c, send, recv, count, dt, op, root) });
        }
        run_reduction("MPI_Reduce", |c| Ok(Reduction::To(root_of(c, root)?)), send, recv, count, count, dt, op, h)
    }

    fn MPI_Allreduce / PMPI_Allreduce(send: *const c_void, recv: *mut c_void, count: c_int, dt: Datatype, op: Op, h: Comm) -> c_int {
        threaded_as!("MPI_Allreduce", h, MPI_Iallreduce(send, recv, count, dt, op, h));
        run_reduction("MPI_Allreduce", |_| Ok(Reduction::All), send, recv, count, count, dt, op, h)
    }

    fn MPI_Scan / PMPI_Scan(send: *const c_void, recv: *mut c_void, count: c_int, dt: Datatype, op: Op, h: Comm) -> c_int {
        threaded_as!("MPI_Scan", h, MPI_Iscan(send, recv, count, dt, op, h));
        run_reduction("MPI_Scan", |_| Ok(Reduction::Scan), send, recv, count, count, dt, op, h)
    }

    fn MPI_Exscan / PMPI_Exscan(send: *const c_void, recv: *mut c_void, count: c_int, dt: Datatype, op: Op, h: Comm) -> c_int {
        threaded_as!("MPI_Exscan", h, MPI_Iexscan(send, recv, count, dt, op, h));
        run_reduction("MPI_Exscan", |_| Ok(Reduction::Exscan), send, recv, count, count, dt, op, h)
    }

    fn MPI_Reduce_scatter_block / PMPI_Reduce_scatter_block(send: *const c_void, recv: *mut c_void, count: c_int, dt: Datatype, op: Op, h: Comm) -> c_int {
        threaded_as!("MPI_Reduce_scatter_block", h, MPI_Ireduce_scatter_block(send, recv, count, dt, op, h));
        // In place, the input is the whole of `recv` (n blocks).
        let n = match comm("MPI_Reduce_scatter_block", h) { Ok(c) => c.size() as c_int, Err(code) => return code };
        if count.checked_mul(n).is_none() {
            return error(h, "MPI_Reduce_scatter_block", MPI_ERR_COUNT, "count times the number of ranks is too large");
        }
        run_reduction("MPI_Reduce_scatter_block", |c| Ok(Reduction::scatter(std::iter::repeat_n(usize::try_from(count).unwrap_or(0), c.size()))), send, recv, count.saturating_mul(n), count, dt, op, h)
    }

    fn MPI_Reduce_scatter / PMPI_Reduce_scatter(send: *const c_void, recv: *mut c_void, counts: *const c_int, dt: Datatype, op: Op, h: Comm) -> c_int {
        let c = match comm("MPI_Reduce_scatter", h) { Ok(c) => c, Err(code) => return code };
        // (Its nonblocking form has no intercommunicator layout yet: there
        // it stays blocking, the call lock held.)
        if !c.is_inter() {
            threaded_as!("MPI_Reduce_scatter", h, MPI_Ireduce_scatter(send, recv, counts, dt, op, h));
        }
        if counts.is_null() {
            return error(h, "MPI_Reduce_scatter", MPI_ERR_ARG, "null count array");
        }
        // SAFETY: one count per rank (the C caller's contract).
        let counts = unsafe { std::slice::from_raw_parts(counts, c.size()) };
        if counts.iter().any(|&n| n < 0) {
            return error(h, "MPI_Reduce_scatter", MPI_ERR_COUNT, "negative count");
        }
        let total = counts.iter().map(|&n| i64::from(n)).sum::<i64>();
        let Ok(total) = c_int::try_from(total) else {
            return error(h, "MPI_Reduce_scatter", MPI_ERR_COUNT, "counts too large");
        };
        run_reduction("MPI_Reduce_scatter", |_| Ok(Reduction::scatter(counts.iter().map(|&n| n as usize))), send, recv, total, counts[c.rank()], dt, op, h)
    }

    fn MPI_Gather / PMPI_Gather(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, root: c_int, h: Comm) -> c_int {
        threaded_as!("MPI_Gather", h, MPI_Igather(send, scount, stype, recv, rcount, rtype, root, h));
        let c = match comm("MPI_Gather", h) { Ok(c) => c, Err(code) => return code };
        if c.is_inter() {
            // SAFETY: the caller's buffers and arrays are as MPI says.
            return report(h, "MPI_Gather", unsafe { inter::gather(&c, send, scount, stype, recv, rcount, rtype, root) });
        }
        // SAFETY: the caller's buffers are as MPI says.
        let r = unsafe { gather_blocks(&c, send, scount, stype, recv, rcount, rtype, root) };
        report(h, "MPI_Gather", r)
    }

    fn MPI_Gatherv / PMPI_Gatherv(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcounts: *const c_int, displs: *const c_int, rtype: Datatype, root: c_int, h: Comm) -> c_int {
        threaded_as!("MPI_Gatherv", h, MPI_Igatherv(send, scount, stype, recv, rcounts, displs, rtype, root, h));
        let c = match comm("MPI_Gatherv", h) { Ok(c) => c, Err(code) => return code };
        if c.is_inter() {
            // SAFETY: the caller's buffers and arrays are as MPI says.
            return report(h, "MPI_Gatherv", unsafe { inter::gatherv(&c, send, scount, stype, recv, rcounts, displs, rtype, root) });
        }
        let r = (|| {
            let root = root_of(&c, root)?;
            if c.rank() != root {
                // SAFETY: the caller's buffer holds `scount` elements.
                let mut m = checked(unsafe { Message::new(send, scount, stype, true) })?;
                return from_vpml(c.gatherv(m.bytes(), &mut [], &[], &[], root));
            }
            // SAFETY: at the root the arrays hold one int per rank.
            if let Some(k) = unsafe { equal_lists(rcounts, displs, c.size()) } {
                // SAFETY: the caller's buffers are as MPI says.
                return unsafe { gather_blocks(&c, send, scount, stype, recv, k, rtype, root as c_int) };
            }
            not_aliased(send, recv)?;
            // SAFETY: at the root the arrays hold one int per rank.
            let vb = unsafe { VBlocks::new(rcounts, displs, c.size(), rtype) }?;
            if let Some((lens, offs, span)) = vb.in_buffer() {
                // SAFETY: `recv` holds the blocks (caller contract).
                let all = unsafe { user_bytes(recv, span) }?;
                // SAFETY: the caller's buffer holds `scount` elements.
                let mut mine = unsafe { Contribution::new(send, scount, stype, || all[offs[root]..offs[root] + lens[root]].to_vec()) }?;
                return from_vpml(c.gatherv(mine.bytes(), all, &lens, &offs, root));
            }
            let (lens, offs) = (vb.lens(), vb.offs());
            // SAFETY: `recv` holds the blocks (caller contract).
            let mut all = if in_place(send) { unsafe { vb.pack(recv) } } else { vec![0; vb.total()] };
            // SAFETY: the caller's buffer holds `scount` elements.
            let mut mine = unsafe { Contribution::new(send, scount, stype, || all[offs[root]..offs[root] + lens[root]].to_vec()) }?;
            from_vpml(c.gatherv(mine.bytes(), &mut all, &lens, &offs, root))?;
            // SAFETY: as above.
            unsafe { vb.unpack(&all, recv) };
            Ok(())
        })();
        report(h, "MPI_Gatherv", r)
    }

    fn MPI_Scatter / PMPI_Scatter(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, root: c_int, h: Comm) -> c_int {
        threaded_as!("MPI_Scatter", h, MPI_Iscatter(send, scount, stype, recv, rcount, rtype, root, h));
        let c = match comm("MPI_Scatter", h) { Ok(c) => c, Err(code) => return code };
        if c.is_inter() {
            // SAFETY: the caller's buffers and arrays are as MPI says.
            return report(h, "MPI_Scatter", unsafe { inter::scatter(&c, send, scount, stype, recv, rcount, rtype, root) });
        }
        // SAFETY: the caller's buffers are as MPI says.
        let r = unsafe { scatter_blocks(&c, send, scount, stype, recv, rcount, rtype, root) };
        report(h, "MPI_Scatter", r)
    }

    fn MPI_Scatterv / PMPI_Scatterv(send: *const c_void, scounts: *const c_int, displs: *const c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, root: c_int, h: Comm) -> c_int {
        threaded_as!("MPI_Scatterv", h, MPI_Iscatterv(send, scounts, displs, stype, recv, rcount, rtype, root, h));
        let c = match comm("MPI_Scatterv", h) { Ok(c) => c, Err(code) => return code };
        if c.is_inter() {
            // SAFETY: the caller's buffers and arrays are as MPI says.
            return report(h, "MPI_Scatterv", unsafe { inter::scatterv(&c, send, scounts, displs, stype, recv, rcount, rtype, root) });
        }
        let r = (|| {
            let root = root_of(&c, root)?;
            if c.rank() != root {
                // SAFETY: the caller's buffer holds `rcount` elements.
                let mut out = checked(unsafe { Message::new(recv, rcount, rtype, false) })?;
                from_vpml(c.scatterv(&[], &[], &[], out.bytes(), root))?;
                out.finish(None);
                return Ok(());
            }
            // SAFETY: at the root the arrays hold one int per rank.
            if let Some(k) = unsafe { equal_lists(scounts, displs, c.size()) } {
                // SAFETY: the caller's buffers are as MPI says.
                return unsafe { scatter_blocks(&c, send, k, stype, recv, rcount, rtype, root as c_int) };
            }
            not_aliased(recv, send)?;
            // SAFETY: at the root the arrays hold one int per rank, and
            // `send` holds the blocks (caller contract).
            let vb = unsafe { VBlocks::new(scounts, displs, c.size(), stype) }?;
            let packed;
            let (data, lens, offs): (&[u8], _, _) = match vb.in_buffer() {
                Some((lens, offs, span)) => {
                    // SAFETY: as above (read only).
                    (unsafe { user_bytes_ref(send, span) }?, lens, offs)
                }
                None => {
                    // SAFETY: as above.
                    packed = unsafe { vb.pack(send) };
                    (&packed, vb.lens(), vb.offs())
                }
            };
            if in_place(recv) {
                let mut mine = data[offs[root]..offs[root] + lens[root]].to_vec();
                return from_vpml(c.scatterv(data, &lens, &offs, &mut mine, root));
            }
            // SAFETY: the caller's buffer holds `rcount` elements.
            let mut out = checked(unsafe { Message::new(recv, rcount, rtype, false) })?;
            from_vpml(c.scatterv(data, &lens, &offs, out.bytes(), root))?;
            out.finish(None);
            Ok(())
        })();
        report(h, "MPI_Scatterv", r)
    }

    fn MPI_Allgather / PMPI_Allgather(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, h: Comm) -> c_int {
        threaded_as!("MPI_Allgather", h, MPI_Iallgather(send, scount, stype, recv, rcount, rtype, h));
        let c = match comm("MPI_Allgather", h) { Ok(c) => c, Err(code) => return code };
        // SAFETY: the caller's buffers are as MPI says.
        let r = unsafe { allgather_blocks(&c, send, scount, stype, recv, rcount, rtype) };
        report(h, "MPI_Allgather", r)
    }

    fn MPI_Allgatherv / PMPI_Allgatherv(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcounts: *const c_int, displs: *const c_int, rtype: Datatype, h: Comm) -> c_int {
        threaded_as!("MPI_Allgatherv", h, MPI_Iallgatherv(send, scount, stype, recv, rcounts, displs, rtype, h));
        let c = match comm("MPI_Allgatherv", h) { Ok(c) => c, Err(code) => return code };
        let r = (|| {
            // SAFETY: the arrays hold one int per rank.
            if !c.is_inter() && let Some(k) = unsafe { equal_lists(rcounts, displs, c.size()) } {
                // SAFETY: the caller's buffers are as MPI says.
                return unsafe { allgather_blocks(&c, send, scount, stype, recv, k, rtype) };
            }
            not_aliased(send, recv)?;
            no_in_place_on_inter(&c, send)?;
            // SAFETY: the arrays hold one int per rank.
            let vb = unsafe { VBlocks::new(rcounts, displs, peer_count(&c), rtype) }?;
            let me = c.rank();
            if let Some((lens, offs, span)) = vb.in_buffer() {
                // SAFETY: `recv` holds the blocks (caller contract).
                let all = unsafe { user_bytes(recv, span) }?;
                // SAFETY: the caller's buffer holds `scount` elements.
                let mut mine = unsafe { Contribution::new(send, scount, stype, || all[offs[me]..offs[me] + lens[me]].to_vec()) }?;
                return from_vpml(c.allgatherv(mine.bytes(), all, &lens, &offs));
            }
            let (lens, offs) = (vb.lens(), vb.offs());
            // SAFETY: `recv` holds the blocks (caller contract).
            let mut all = if in_place(send) { unsafe { vb.pack(recv) } } else { vec![0; vb.total()] };
            // SAFETY: the caller's buffer holds `scount` elements.
            let mut mine = unsafe { Contribution::new(send, scount, stype, || all[offs[me]..offs[me] + lens[me]].to_vec()) }?;
            from_vpml(c.allgatherv(mine.bytes(), &mut all, &lens, &offs))?;
            // SAFETY: as above.
            unsafe { vb.unpack(&all, recv) };
            Ok(())
        })();
        report(h, "MPI_Allgatherv", r)
    }

    fn MPI_Alltoall / PMPI_Alltoall(send: *const c_void, scount: c_int, stype: Datatype, recv: *mut c_void, rcount: c_int, rtype: Datatype, h: Comm) -> c_int {
        threaded_as!("MPI_Alltoall", h, MPI_Ialltoall(send, scount, stype, recv, rcount, rtype, h));
        let c = match comm("MPI_Alltoall", h) { Ok(c) => c, Err(code) => return code };
        // SAFETY: the caller's buffers are as MPI says.
        let r = unsafe { alltoall_blocks(&c, send, scount, stype, recv, rcount, rtype) };
        report(h, "MPI_Alltoall", r)
    }

    fn MPI_Alltoallv / PMPI_Alltoallv(send: *const c_void, scounts: *const c_int, sdispls: *const c_int, stype: Datatype, recv: *mut c_void, rcounts: *const c_int, rdispls: *const c_int, rtype: Datatype, h: Comm) -> c_int {
        threaded_as!("MPI_Alltoallv", h, MPI_Ialltoallv(send, scounts, sdispls, stype, recv, rcounts, rdispls, rtype, h));
        let c = match comm("MPI_Alltoallv", h) { Ok(c) => c, Err(code) => return code };
        let r = (|| {
            // SAFETY: the arrays hold one int per rank.
            if !c.is_inter() && let Some(rk) = unsafe { equal_lists(rcounts, rdispls, c.size()) } {
                // In place, the send lists are not read.
                let sk = if in_place(send) {
                    Some(rk)
                } else {
                    // SAFETY: as above.
                    unsafe { equal_lists(scounts, sdispls, c.size()) }
                };
                if let Some(sk) = sk {
                    // SAFETY: the caller's buffers are as MPI says.
                    return unsafe { alltoall_blocks(&c, send, sk, stype, recv, rk, rtype) };
                }
            }
            no_in_place_on_inter(&c, send)?;
            let n = peer_count(&c);
            not_aliased(send, recv)?;
            // SAFETY: the arrays hold one int per rank; the buffers hold
            // their blocks (caller contract).
            let rb = unsafe { VBlocks::new(rcounts, rdispls, n, rtype) }?;
            // In place, the input is the result buffer's blocks.
            let sb = if in_place(send) {
                None
            } else {
                // SAFETY: as above.
                Some(unsafe { VBlocks::new(scounts, sdispls, n, stype) }?)
            };
            if let Some(sb) = &sb
                && let (Some((slens, soffs, sspan)), Some((rlens, roffs, rspan))) = (sb.in_buffer(), rb.in_buffer())
            {
                // SAFETY: as above; MPI forbids the two to overlap.
                let (input, out) = unsafe { (user_bytes_ref(send, sspan)?, user_bytes(recv, rspan)?) };
                return from_vpml(c.alltoallv(input, &slens, &soffs, out, &rlens, &roffs));
            }
            let (input, slens, soffs) = match &sb {
                // SAFETY: as above.
                Some(sb) => (unsafe { sb.pack(send) }, sb.lens(), sb.offs()),
                // SAFETY: as above.
                None => (unsafe { rb.pack(recv) }, rb.lens(), rb.offs()),
            };
            let mut out = vec![0; rb.total()];
            from_vpml(c.alltoallv(&input, &slens, &soffs, &mut out, &rb.lens(), &rb.offs()))?;
            // SAFETY: as above.
            unsafe { rb.unpack(&out, recv) };
            Ok(())
        })();
        report(h, "MPI_Alltoallv", r)
    }
}
