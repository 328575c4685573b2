//! Collective operations, built on point-to-point with fixed partners.
//!
//! Every collective uses the communicator's collective context (so it never
//! matches the application's own messages) and receives only from named
//! sources, in an order fixed by the algorithm: under message logging a
//! collective therefore produces no non-deterministic event, and replaying
//! it is replaying its messages.
//!
//! Reductions combine contributions in rank order with one tree shape that
//! depends only on the number of ranks: ranks `2i` and `2i+1` below
//! `2·(n − p2)` are folded first (`p2` the largest power of two ≤ n), then
//! aligned blocks of doubling size are combined lower-half-first. Every
//! algorithm (binomial reduce, recursive-doubling allreduce, the
//! reduce-scatter/allgather allreduce for large vectors, the recursive
//! halving of reduce-scatter) uses that shape,
//! so results are bitwise identical across runs, across algorithms and
//! between `reduce` and `allreduce`, and user operations need only be
//! associative. Prefix reductions (`scan`, `exscan`) group as their
//! algorithm does — a left fold along the chain up to 16 ranks, the
//! recursive-doubling blocks beyond — which also depends only on the
//! number of ranks.
//!
//! Algorithms by size: barrier — dissemination; bcast — from 16 KiB on 3
//! to 8 ranks flat (the root posts a send to every rank at once), else a
//! binomial tree, or a pipelined chain of 128 KiB segments above 64 KiB;
//! allreduce — recursive
//! doubling, or reduce-scatter + allgather above 64 KiB; reduce — binomial
//! tree gathered at the root's side, at every size (a rank's contribution
//! goes out from the caller's buffer and its first partner's is combined
//! in place, so no vector is copied; measured on 2-8 ranks it beat the
//! reduce-scatter + gather it replaced by 1.3-2.5× from 256 KiB on);
//! reduce-scatter — the allreduce, each rank keeping its block, or from
//! blocks of 2 KiB on average recursive halving by rank blocks;
//! allgather(v) — flat on few ranks (see [`flat`]), else recursive
//! doubling for small power-of-two groups, ring otherwise; alltoall(v) —
//! all at once when small or flat, pairwise exchange otherwise;
//! gather(v)/scatter(v) — direct
//! to/from the root; scan/exscan — a chain up to 16 ranks, recursive
//! doubling beyond. The equal-block collectives (allgather, alltoall,
//! gather, scatter) run the same algorithms as their `v` variants on
//! blocks found by arithmetic, without building block lists.
//!
//! A reduction's scratch vector (what a partner sends) is kept between
//! calls (`scratch`): fresh memory costs more than the collective.
//!
//! One module per algorithm family (`barrier`, `bcast`, `reduce` with
//! allreduce, `reduce_scatter`, `scan`, `gather` with scatter,
//! `allgather`, `alltoall`), on the point-to-point helpers of
//! `transport`. This module holds the tags,
//! the size thresholds and the buffer helpers they share.

use crate::buffer::Pod;
use crate::error::{Error, Result};

mod allgather;
mod alltoall;
mod barrier;
mod bcast;
mod gather;
mod inter;
mod nonblocking;
mod reduce;
mod reduce_scatter;
mod scan;
mod scratch;
mod transport;

pub use inter::InterRoot;
pub use nonblocking::Transfer;

/// Tags of the collectives inside the collective context.
mod tag {
    pub const BARRIER: i32 = 1;
    pub const BCAST: i32 = 2;
    pub const REDUCE: i32 = 3;
    pub const ALLREDUCE: i32 = 4;
    pub const GATHER: i32 = 5;
    pub const SCATTER: i32 = 6;
    pub const ALLGATHER: i32 = 7;
    pub const ALLTOALL: i32 = 8;
    pub const SCAN: i32 = 9;
    pub const REDUCE_SCATTER: i32 = 10;
    /// Every nonblocking collective (see `nonblocking`).
    pub const NONBLOCKING: i32 = 12;
}

/// Above this many bytes, the bandwidth-oriented algorithms are used.
const LARGE: usize = 64 * 1024;
/// Segment size of the pipelined broadcast.
const BCAST_SEGMENT: usize = 128 * 1024;

/// From 3 up to this many ranks, a broadcast of at least [`FLAT_MIN`]
/// bytes is flat; allgather (from 3 ranks) and alltoall (from 2, where
/// both of its algorithms are one exchange) are flat on up to 4 ranks, and
/// from 5 ranks for blocks from [`FLAT_MIN`] to [`FLAT_MAX`] (see
/// [`flat`]).
const FLAT_RANKS: usize = 8;
/// See [`FLAT_RANKS`].
const FLAT_MIN: usize = 16 * 1024;
/// See [`FLAT_RANKS`].
const FLAT_MAX: usize = 1024 * 1024;

/// Whether an allgather or alltoall among `n` ranks, of blocks of
/// `block` bytes (on average), posts every transfer at once instead of
/// running in steps (ring, recursive doubling, pairwise exchange).
///
/// On a few ranks a flat exchange has no step that waits for the slowest
/// pair: a receiver takes each block as soon as its sender posted it
/// (large ones read straight from the sender's buffer by single copy),
/// and ranks that share cores do not wake each other once per step.
/// Measured on 4 and 8 ranks over 2 cores (alternated runs against the
/// stepwise algorithms, 1 KiB-4 MiB): 0.4-0.86× their time on 4 ranks at
/// every size, 0.4-0.96× on 8 ranks from 16 KiB to 1 MiB blocks, and
/// slower there below 16 KiB (1.2-1.4×) and at 4 MiB (1.04-1.09×). Beyond 8 ranks,
/// where incast and the number of requests in flight grow, the stepwise
/// algorithms stay. The choice depends on the rank count and sizes that
/// every rank sees alike (alltoallv's average block may differ between
/// ranks: both of its algorithms exchange one message per ordered pair,
/// so ranks may choose differently).
fn flat(n: usize, block: usize) -> bool {
    n <= 4 || (n <= FLAT_RANKS && (FLAT_MIN..=FLAT_MAX).contains(&block))
}

fn bytes<T: Pod>(v: &[T]) -> &[u8] {
    bytemuck::cast_slice(v)
}

fn bytes_mut<T: Pod>(v: &mut [T]) -> &mut [u8] {
    bytemuck::cast_slice_mut(v)
}

fn mismatch(what: String) -> Error {
    Error::Collective(what)
}

/// Split `buf` into a shared view of `a` and a mutable view of `b`, which
/// must not overlap.
fn disjoint(
    buf: &mut [u8],
    a: std::ops::Range<usize>,
    b: std::ops::Range<usize>,
) -> Result<(&[u8], &mut [u8])> {
    let (a, b) = disjoint_mut(buf, a, b)?;
    Ok((a, b))
}

/// Split `buf` into mutable views of `a` and `b`, which must not overlap.
fn disjoint_mut(
    buf: &mut [u8],
    a: std::ops::Range<usize>,
    b: std::ops::Range<usize>,
) -> Result<(&mut [u8], &mut [u8])> {
    if a.end > buf.len() || b.end > buf.len() || a.start > a.end || b.start > b.end {
        return Err(mismatch(format!(
            "blocks {a:?} and {b:?} exceed the {}-byte buffer",
            buf.len()
        )));
    }
    if a.is_empty() {
        return Ok((&mut [], &mut buf[b]));
    }
    if b.is_empty() {
        return Ok((&mut buf[a], &mut []));
    }
    if a.start < b.end && b.start < a.end {
        return Err(mismatch(format!("blocks {a:?} and {b:?} overlap")));
    }
    if a.start < b.start {
        let (lo, hi) = buf.split_at_mut(b.start);
        Ok((&mut lo[a], &mut hi[..b.end - b.start]))
    } else {
        let (lo, hi) = buf.split_at_mut(a.start);
        Ok((&mut hi[..a.end - a.start], &mut lo[b]))
    }
}

/// Per-rank lists of a collective: on the stack up to this many ranks.
const INLINE_RANKS: usize = 8;

/// A per-rank list (see [`INLINE_RANKS`]).
///
/// The lists of sends are built in place (`new`, then `extend`): `collect`
/// builds the list aside and moves it, and the move's wide stores were
/// read back with a narrower load that cannot be forwarded from them
/// (half of `Comm::scatter`'s own time at a 2-rank root, in `perf`).
type PerRank<T> = smallvec::SmallVec<[T; INLINE_RANKS]>;

/// Check counts/displacements against a buffer of `len` elements and
/// return each rank's element range.
fn layout(
    n: usize,
    counts: &[usize],
    displs: &[usize],
    len: usize,
    what: &str,
) -> Result<PerRank<std::ops::Range<usize>>> {
    if counts.len() != n || displs.len() != n {
        return Err(mismatch(format!(
            "{what}: {} counts and {} displacements for {n} ranks",
            counts.len(),
            displs.len()
        )));
    }
    let mut ranges = PerRank::with_capacity(n);
    for (&c, &d) in counts.iter().zip(displs) {
        let Some(end) = d.checked_add(c).filter(|&e| e <= len) else {
            return Err(mismatch(format!(
                "{what}: block at {d} of {c} elements exceeds the {len}-element buffer"
            )));
        };
        ranges.push(d..end);
    }
    Ok(ranges)
}

/// Cut `buf` into the byte blocks of every rank but `skip`, as receive slots.
/// The blocks must not overlap (empty ones may lie anywhere).
fn carve<'a>(
    buf: &'a mut [u8],
    ranges: &[std::ops::Range<usize>],
    elem: usize,
    skip: usize,
) -> Result<PerRank<(usize, &'a mut [u8])>> {
    let mut order: PerRank<usize> = (0..ranges.len()).filter(|&i| i != skip).collect();
    order.sort_by_key(|&i| ranges[i].start);
    let mut slots = PerRank::with_capacity(order.len());
    let mut rest = buf;
    let mut consumed = 0;
    for i in order {
        let (s, e) = (ranges[i].start * elem, ranges[i].end * elem);
        if s == e {
            // An empty block may name any displacement: it is never touched.
            slots.push((i, &mut [][..]));
            continue;
        }
        if s < consumed {
            return Err(mismatch(format!("block of rank {i} overlaps another")));
        }
        let (_, tail) = rest.split_at_mut(s - consumed);
        let (block, tail) = tail.split_at_mut(e - s);
        slots.push((i, block));
        rest = tail;
        consumed = e;
    }
    Ok(slots)
}

/// `buf` cut into `n` equal blocks, as receive slots of every rank but
/// `skip`.
fn equal_blocks(buf: &mut [u8], n: usize, skip: usize) -> PerRank<(usize, &mut [u8])> {
    let bb = buf.len() / n.max(1);
    if bb == 0 {
        return (0..n)
            .filter(|&i| i != skip)
            .map(|i| (i, &mut [][..]))
            .collect();
    }
    buf.chunks_exact_mut(bb)
        .enumerate()
        .filter(|&(i, _)| i != skip)
        .collect()
}
