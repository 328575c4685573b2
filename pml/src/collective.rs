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
//! reduce-scatter/allgather allreduce for large vectors) uses that shape,
//! so results are bitwise identical across runs, across algorithms and
//! between `reduce` and `allreduce`, and user operations need only be
//! associative.
//!
//! Algorithms by size: barrier — dissemination; bcast — binomial tree, or a
//! pipelined chain of 128 KiB segments above 64 KiB; allreduce — recursive
//! doubling, or reduce-scatter + allgather above 64 KiB; allgather(v) —
//! recursive doubling for small power-of-two groups, ring otherwise;
//! alltoall(v) — all at once when small, pairwise exchange when large;
//! gather(v)/scatter(v) — direct to/from the root; scan/exscan — recursive
//! doubling.

use crate::buffer::Pod;
use crate::comm::{Comm, Mode};
use crate::engine::ReqId;
use crate::error::{Error, Result};
use crate::matching::RecvSpec;
use crate::op::{Op, fold_left, fold_right};

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
}

/// Above this many bytes, the bandwidth-oriented algorithms are used.
const LARGE: usize = 64 * 1024;
/// Segment size of the pipelined broadcast.
const BCAST_SEGMENT: usize = 128 * 1024;

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
    if a.end > buf.len() || b.end > buf.len() || a.start > a.end || b.start > b.end {
        return Err(mismatch(format!(
            "blocks {a:?} and {b:?} exceed the {}-byte buffer",
            buf.len()
        )));
    }
    if a.is_empty() {
        return Ok((&[], &mut buf[b]));
    }
    if b.is_empty() {
        return Ok((&buf[a], &mut []));
    }
    if a.start < b.end && b.start < a.end {
        return Err(mismatch(format!("blocks {a:?} and {b:?} overlap")));
    }
    if a.start < b.start {
        let (lo, hi) = buf.split_at_mut(b.start);
        Ok((&lo[a], &mut hi[..b.end - b.start]))
    } else {
        let (lo, hi) = buf.split_at_mut(a.start);
        let a_len = a.end - a.start;
        Ok((&hi[..a_len], &mut lo[b]))
    }
}

/// How the reduction tree renumbers ranks (see the module docs).
struct Fold {
    /// Largest power of two ≤ n.
    p2: usize,
    /// n − p2: ranks below 2·rem are folded pairwise.
    rem: usize,
}

impl Fold {
    fn new(n: usize) -> Fold {
        let p2 = if n.is_power_of_two() {
            n
        } else {
            n.next_power_of_two() / 2
        };
        Fold { p2, rem: n - p2 }
    }
    /// Participant number of rank `r`, or `None` for ranks folded away.
    fn participant(&self, r: usize) -> Option<usize> {
        if r < 2 * self.rem {
            (r % 2 == 1).then_some(r / 2)
        } else {
            Some(r - self.rem)
        }
    }
    /// Rank of participant `p`.
    fn rank(&self, p: usize) -> usize {
        if p < self.rem {
            2 * p + 1
        } else {
            p + self.rem
        }
    }
}

impl Comm {
    fn coll_spec(&self, from: usize, tag: i32) -> RecvSpec {
        RecvSpec {
            source: Some(self.world_rank(from)),
            tag: Some(tag),
            context: self.collective_context(),
        }
    }

    fn check_len(&self, from: usize, got: usize, want: usize) -> Result<()> {
        if got == want {
            Ok(())
        } else {
            Err(mismatch(format!(
                "rank {from} sent {got} bytes where {want} were expected"
            )))
        }
    }

    fn coll_result(&self, from: usize, want: usize, r: Result<crate::Status>) -> Result<()> {
        match r {
            Ok(st) => self.check_len(from, st.len(), want),
            Err(Error::Truncated { message_len, .. }) => self.check_len(from, message_len, want),
            Err(e) => Err(e),
        }
    }

    fn c_send(&self, to: usize, tag: i32, data: &[u8]) -> Result<()> {
        self.raw_send(
            self.world_rank(to),
            tag,
            self.collective_context(),
            data,
            Mode::Standard,
        )
    }

    fn c_recv(&self, from: usize, tag: i32, buf: &mut [u8]) -> Result<()> {
        let want = buf.len();
        let r = self.raw_recv(self.coll_spec(from, tag), buf);
        self.coll_result(from, want, r)
    }

    fn c_sendrecv(
        &self,
        to: usize,
        out: &[u8],
        from: usize,
        inp: &mut [u8],
        tag: i32,
    ) -> Result<()> {
        let want = inp.len();
        let r = self.raw_sendrecv(
            out,
            self.world_rank(to),
            tag,
            self.collective_context(),
            inp,
            self.coll_spec(from, tag),
        );
        self.coll_result(from, want, r)
    }

    /// Post many sends and receives at once and wait for all of them. The
    /// buffers stay borrowed until every operation completed (or the engine
    /// failed, in which case it forgets them).
    fn c_exchange(
        &self,
        tag: i32,
        sends: &[(usize, &[u8])],
        recvs: &mut [(usize, &mut [u8])],
    ) -> Result<()> {
        let mut eng = self.engine.borrow_mut();
        let ctx = self.collective_context();
        let mut ids: Vec<(ReqId, Option<(usize, usize)>)> =
            Vec::with_capacity(sends.len() + recvs.len());
        for (from, buf) in recvs.iter_mut() {
            // SAFETY: `buf` is borrowed for this whole function, which waits
            // for the receive below (or the engine failed and dropped it).
            let id =
                unsafe { eng.start_recv(self.coll_spec(*from, tag), buf.as_mut_ptr(), buf.len())? };
            ids.push((id, Some((*from, buf.len()))));
        }
        for (to, data) in sends {
            // SAFETY: as above, for the send buffers.
            let id = unsafe {
                eng.start_send(
                    self.world_rank(*to),
                    tag,
                    ctx,
                    data.as_ptr(),
                    data.len(),
                    false,
                )?
            };
            ids.push((id, None));
        }
        eng.wait_until(|e| ids.iter().all(|(id, _)| e.is_done(*id)))?;
        let mut result = Ok(());
        for (id, recv) in ids {
            let st = eng.take_status(id)?;
            if let Some((from, want)) = recv {
                let got = match st.error() {
                    Some(Error::Truncated { message_len, .. }) => *message_len,
                    _ => st.len(),
                };
                if result.is_ok() {
                    result = self.check_len(from, got, want);
                }
            }
        }
        result
    }

    /// Block until every member has called `barrier`.
    pub fn barrier(&self) -> Result<()> {
        let (r, n) = (self.rank(), self.size());
        let mut k = 1;
        while k < n {
            self.c_sendrecv((r + k) % n, &[], (r + n - k) % n, &mut [], tag::BARRIER)?;
            k *= 2;
        }
        Ok(())
    }

    /// Copy `buf` of rank `root` into `buf` of every member.
    ///
    /// ```
    /// # use vpml_pml as vpml;
    /// let world = vpml::init()?;
    /// let mut x = if world.rank() == 0 { [1.0f64, 2.0] } else { [0.0; 2] };
    /// world.bcast(&mut x, 0)?;
    /// assert_eq!(x, [1.0, 2.0]);
    /// # Ok::<(), vpml_pml::Error>(())
    /// ```
    pub fn bcast<T: Pod>(&self, buf: &mut [T], root: usize) -> Result<()> {
        self.check_rank(root)?;
        let buf = bytes_mut(buf);
        let n = self.size();
        if n == 1 {
            return Ok(());
        }
        let vr = (self.rank() + n - root) % n;
        let real = |v: usize| (v + root) % n;
        if buf.len() <= LARGE || n == 2 {
            // Binomial tree.
            let mut mask = 1;
            while mask < n {
                if vr & mask != 0 {
                    self.c_recv(real(vr - mask), tag::BCAST, buf)?;
                    break;
                }
                mask <<= 1;
            }
            mask >>= 1;
            while mask > 0 {
                if vr + mask < n {
                    self.c_send(real(vr + mask), tag::BCAST, buf)?;
                }
                mask >>= 1;
            }
        } else {
            // Pipelined chain root -> root+1 -> … in segments.
            for seg in buf.chunks_mut(BCAST_SEGMENT) {
                if vr > 0 {
                    self.c_recv(real(vr - 1), tag::BCAST, seg)?;
                }
                if vr + 1 < n {
                    self.c_send(real(vr + 1), tag::BCAST, seg)?;
                }
            }
        }
        Ok(())
    }

    /// Combine `send` of every member with `op` (in rank order) into `recv`
    /// of `root`; `recv` is ignored elsewhere (pass `&mut []`).
    pub fn reduce<T: Pod, O: Op<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: &O,
        root: usize,
    ) -> Result<()> {
        self.check_rank(root)?;
        let (r, n) = (self.rank(), self.size());
        if r == root && recv.len() != send.len() {
            return Err(mismatch(format!(
                "reduce root buffer holds {} elements, contributions {}",
                recv.len(),
                send.len()
            )));
        }
        let mut acc = send.to_vec();
        let fold = Fold::new(n);
        let mut tmp = vec![T::zeroed(); send.len()];
        if r < 2 * fold.rem {
            if r % 2 == 0 {
                self.c_send(r + 1, tag::REDUCE, bytes(&acc))?;
            } else {
                self.c_recv(r - 1, tag::REDUCE, bytes_mut(&mut tmp))?;
                fold_left(op, &tmp, &mut acc);
            }
        }
        let holder = fold.rank(0);
        if let Some(p) = fold.participant(r) {
            let mut mask = 1;
            while mask < fold.p2 {
                if p & mask != 0 {
                    self.c_send(fold.rank(p - mask), tag::REDUCE, bytes(&acc))?;
                    break;
                }
                self.c_recv(fold.rank(p + mask), tag::REDUCE, bytes_mut(&mut tmp))?;
                fold_right(op, &mut acc, &tmp);
                mask <<= 1;
            }
        }
        if holder == root {
            if r == root {
                recv.copy_from_slice(&acc);
            }
        } else if r == holder {
            self.c_send(root, tag::REDUCE, bytes(&acc))?;
        } else if r == root {
            self.c_recv(holder, tag::REDUCE, bytes_mut(recv))?;
        }
        Ok(())
    }

    /// Combine `send` of every member with `op` (in rank order) into `recv`
    /// of every member; all members get bitwise identical results.
    ///
    /// ```
    /// # use vpml_pml as vpml;
    /// let world = vpml::init()?;
    /// let mut total = [0u64];
    /// world.allreduce(&[world.rank() as u64 + 1], &mut total, &vpml::Sum)?;
    /// let n = world.size() as u64;
    /// assert_eq!(total[0], n * (n + 1) / 2);
    /// # Ok::<(), vpml_pml::Error>(())
    /// ```
    pub fn allreduce<T: Pod, O: Op<T>>(&self, send: &[T], recv: &mut [T], op: &O) -> Result<()> {
        if recv.len() != send.len() {
            return Err(mismatch(format!(
                "allreduce result buffer holds {} elements, contribution {}",
                recv.len(),
                send.len()
            )));
        }
        recv.copy_from_slice(send);
        self.allreduce_in_place(recv, op)
    }

    /// [`Comm::allreduce`] with the contribution and the result in one buffer.
    pub fn allreduce_in_place<T: Pod, O: Op<T>>(&self, acc: &mut [T], op: &O) -> Result<()> {
        let (r, n) = (self.rank(), self.size());
        if n == 1 {
            return Ok(());
        }
        let fold = Fold::new(n);
        let mut tmp = vec![T::zeroed(); acc.len()];
        if r < 2 * fold.rem {
            if r % 2 == 0 {
                self.c_send(r + 1, tag::ALLREDUCE, bytes(acc))?;
                // Wait for the result of the participants.
                return self.c_recv(r + 1, tag::ALLREDUCE, bytes_mut(acc));
            }
            self.c_recv(r - 1, tag::ALLREDUCE, bytes_mut(&mut tmp))?;
            fold_left(op, &tmp, acc);
        }
        let Some(p) = fold.participant(r) else {
            return Err(mismatch("rank outside the reduction tree".into()));
        };
        if std::mem::size_of_val(acc) <= LARGE || acc.len() < fold.p2 {
            let mut mask = 1;
            while mask < fold.p2 {
                let partner = p ^ mask;
                self.c_sendrecv(
                    fold.rank(partner),
                    bytes(acc),
                    fold.rank(partner),
                    bytes_mut(&mut tmp),
                    tag::ALLREDUCE,
                )?;
                if partner < p {
                    fold_left(op, &tmp, acc);
                } else {
                    fold_right(op, acc, &tmp);
                }
                mask <<= 1;
            }
        } else {
            self.reduce_scatter_allgather(p, &fold, acc, &mut tmp, op)?;
        }
        if r < 2 * fold.rem {
            self.c_send(r - 1, tag::ALLREDUCE, bytes(acc))?;
        }
        Ok(())
    }

    /// Large-vector allreduce among the `fold.p2` participants: recursive
    /// halving with doubling distance (each step combines aligned blocks of
    /// ranks lower half first), then the mirror-image allgather.
    fn reduce_scatter_allgather<T: Pod, O: Op<T>>(
        &self,
        p: usize,
        fold: &Fold,
        acc: &mut [T],
        tmp: &mut [T],
        op: &O,
    ) -> Result<()> {
        let (mut lo, mut hi) = (0, acc.len());
        let mut steps = Vec::new();
        let mut mask = 1;
        while mask < fold.p2 {
            let partner = fold.rank(p ^ mask);
            let mid = lo + (hi - lo) / 2;
            let lower = p & mask == 0;
            let (keep, give) = if lower {
                (lo..mid, mid..hi)
            } else {
                (mid..hi, lo..mid)
            };
            self.c_sendrecv(
                partner,
                bytes(&acc[give.clone()]),
                partner,
                bytes_mut(&mut tmp[keep.clone()]),
                tag::ALLREDUCE,
            )?;
            if lower {
                fold_right(op, &mut acc[keep.clone()], &tmp[keep.clone()]);
            } else {
                fold_left(op, &tmp[keep.clone()], &mut acc[keep.clone()]);
            }
            steps.push((partner, keep.clone(), give));
            (lo, hi) = (keep.start, keep.end);
            mask <<= 1;
        }
        for (partner, keep, give) in steps.into_iter().rev() {
            let elem = std::mem::size_of::<T>();
            let whole = bytes_mut(acc);
            let (out, inp) = disjoint(
                whole,
                keep.start * elem..keep.end * elem,
                give.start * elem..give.end * elem,
            )?;
            self.c_sendrecv(partner, out, partner, inp, tag::ALLREDUCE)?;
        }
        Ok(())
    }

    /// Inclusive prefix reduction: rank r gets `x0 ⊕ … ⊕ xr`.
    pub fn scan<T: Pod, O: Op<T>>(&self, send: &[T], recv: &mut [T], op: &O) -> Result<()> {
        self.prefix(send, recv, op, true)
    }

    /// Exclusive prefix reduction: rank r > 0 gets `x0 ⊕ … ⊕ x(r−1)`;
    /// rank 0's `recv` is left untouched.
    pub fn exscan<T: Pod, O: Op<T>>(&self, send: &[T], recv: &mut [T], op: &O) -> Result<()> {
        self.prefix(send, recv, op, false)
    }

    fn prefix<T: Pod, O: Op<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: &O,
        inclusive: bool,
    ) -> Result<()> {
        if recv.len() != send.len() {
            return Err(mismatch(format!(
                "scan result buffer holds {} elements, contribution {}",
                recv.len(),
                send.len()
            )));
        }
        let (r, n) = (self.rank(), self.size());
        // `partial` covers this rank's aligned block so far; `recv` the
        // ranks of that block up to this one (exclusive: strictly before).
        let mut partial = send.to_vec();
        let mut have = inclusive;
        if inclusive {
            recv.copy_from_slice(send);
        }
        let mut tmp = vec![T::zeroed(); send.len()];
        let mut mask = 1;
        while mask < n {
            let partner = r ^ mask;
            if partner < n {
                self.c_sendrecv(
                    partner,
                    bytes(&partial),
                    partner,
                    bytes_mut(&mut tmp),
                    tag::SCAN,
                )?;
                if partner < r {
                    fold_left(op, &tmp, &mut partial);
                    if have {
                        fold_left(op, &tmp, recv);
                    } else {
                        recv.copy_from_slice(&tmp);
                        have = true;
                    }
                } else {
                    fold_right(op, &mut partial, &tmp);
                }
            }
            mask <<= 1;
        }
        Ok(())
    }

    /// Collect `send` of every member, in rank order, into `recv` of
    /// `root` (`recv.len() == size · send.len()` there; ignored elsewhere).
    pub fn gather<T: Pod>(&self, send: &[T], recv: &mut [T], root: usize) -> Result<()> {
        let n = self.size();
        let counts = vec![send.len(); n];
        let displs: Vec<usize> = (0..n).map(|i| i * send.len()).collect();
        self.gatherv(send, recv, &counts, &displs, root)
    }

    /// Like [`Comm::gather`] with `counts[i]` elements from rank i placed at
    /// element offset `displs[i]` of the root's `recv`.
    pub fn gatherv<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
        root: usize,
    ) -> Result<()> {
        self.check_rank(root)?;
        let (r, n) = (self.rank(), self.size());
        if r != root {
            return self.c_send(root, tag::GATHER, bytes(send));
        }
        let ranges = layout(n, counts, displs, recv.len(), "gatherv")?;
        if counts[r] != send.len() {
            return Err(mismatch(format!(
                "root contributes {} elements but counts says {}",
                send.len(),
                counts[r]
            )));
        }
        recv[ranges[r].clone()].copy_from_slice(send);
        let mut slots = carve(bytes_mut(recv), &ranges, std::mem::size_of::<T>(), r)?;
        self.c_exchange(tag::GATHER, &[], &mut slots)
    }

    /// Give block i of the root's `send` (`size · recv.len()` elements) to
    /// rank i's `recv`.
    pub fn scatter<T: Pod>(&self, send: &[T], recv: &mut [T], root: usize) -> Result<()> {
        let n = self.size();
        let counts = vec![recv.len(); n];
        let displs: Vec<usize> = (0..n).map(|i| i * recv.len()).collect();
        self.scatterv(send, &counts, &displs, recv, root)
    }

    /// Like [`Comm::scatter`] with `counts[i]` elements at offset `displs[i]`
    /// of the root's `send` going to rank i.
    pub fn scatterv<T: Pod>(
        &self,
        send: &[T],
        counts: &[usize],
        displs: &[usize],
        recv: &mut [T],
        root: usize,
    ) -> Result<()> {
        self.check_rank(root)?;
        let (r, n) = (self.rank(), self.size());
        if r != root {
            return self.c_recv(root, tag::SCATTER, bytes_mut(recv));
        }
        let ranges = layout(n, counts, displs, send.len(), "scatterv")?;
        if counts[r] != recv.len() {
            return Err(mismatch(format!(
                "root receives {} elements but counts says {}",
                recv.len(),
                counts[r]
            )));
        }
        recv.copy_from_slice(&send[ranges[r].clone()]);
        let sends: Vec<(usize, &[u8])> = (0..n)
            .filter(|&i| i != r)
            .map(|i| (i, bytes(&send[ranges[i].clone()])))
            .collect();
        self.c_exchange(tag::SCATTER, &sends, &mut [])
    }

    /// Every member gets every member's `send`, in rank order
    /// (`recv.len() == size · send.len()`).
    pub fn allgather<T: Pod>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        let n = self.size();
        let counts = vec![send.len(); n];
        let displs: Vec<usize> = (0..n).map(|i| i * send.len()).collect();
        self.allgatherv(send, recv, &counts, &displs)
    }

    /// Like [`Comm::allgather`] with `counts[i]` elements of rank i placed at
    /// element offset `displs[i]`.
    pub fn allgatherv<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<()> {
        let (r, n) = (self.rank(), self.size());
        let ranges = layout(n, counts, displs, recv.len(), "allgatherv")?;
        if counts[r] != send.len() {
            return Err(mismatch(format!(
                "rank {r} contributes {} elements but counts says {}",
                send.len(),
                counts[r]
            )));
        }
        recv[ranges[r].clone()].copy_from_slice(send);
        let elem = std::mem::size_of::<T>();
        let byte_ranges: Vec<std::ops::Range<usize>> = ranges
            .iter()
            .map(|rg| rg.start * elem..rg.end * elem)
            .collect();
        let total: usize = counts.iter().sum::<usize>() * elem;
        let buf = bytes_mut(recv);
        if n.is_power_of_two() && total <= LARGE {
            // Recursive doubling: exchange ever larger aligned blocks of ranks.
            let mut mask = 1;
            while mask < n {
                let partner = r ^ mask;
                let mine = r & !(mask - 1);
                let theirs = partner & !(mask - 1);
                let (out_parts, in_parts): (Vec<_>, Vec<_>) = (
                    (mine..mine + mask)
                        .map(|i| byte_ranges[i].clone())
                        .collect(),
                    (theirs..theirs + mask)
                        .map(|i| byte_ranges[i].clone())
                        .collect(),
                );
                let out_len: usize = out_parts.iter().map(|x| x.len()).sum();
                let in_len: usize = in_parts.iter().map(|x| x.len()).sum();
                let mut out = Vec::with_capacity(out_len);
                for rg in &out_parts {
                    out.extend_from_slice(&buf[rg.clone()]);
                }
                let mut inp = vec![0u8; in_len];
                self.c_sendrecv(partner, &out, partner, &mut inp, tag::ALLGATHER)?;
                let mut at = 0;
                for rg in in_parts {
                    let len = rg.len();
                    buf[rg].copy_from_slice(&inp[at..at + len]);
                    at += len;
                }
                mask <<= 1;
            }
        } else {
            // Ring: in step k, pass block (r − k) right and take (r − k − 1) from the left.
            let (right, left) = ((r + 1) % n, (r + n - 1) % n);
            for k in 0..n - 1 {
                let out = (r + n - k) % n;
                let inp = (r + 2 * n - k - 1) % n;
                let (o, i) = disjoint(buf, byte_ranges[out].clone(), byte_ranges[inp].clone())?;
                self.c_sendrecv(right, o, left, i, tag::ALLGATHER)?;
            }
        }
        Ok(())
    }

    /// Block i of every member's `send` goes to rank i, where it lands in
    /// block (sender) of `recv`. Both hold `size` equal blocks.
    pub fn alltoall<T: Pod>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        let n = self.size();
        if !send.len().is_multiple_of(n) || send.len() != recv.len() {
            return Err(mismatch(format!(
                "alltoall buffers of {} and {} elements do not split into {n} equal blocks",
                send.len(),
                recv.len()
            )));
        }
        let b = send.len() / n;
        let counts = vec![b; n];
        let displs: Vec<usize> = (0..n).map(|i| i * b).collect();
        self.alltoallv(send, &counts, &displs, recv, &counts, &displs)
    }

    /// Like [`Comm::alltoall`] with per-rank counts and element offsets for
    /// both buffers.
    pub fn alltoallv<T: Pod>(
        &self,
        send: &[T],
        send_counts: &[usize],
        send_displs: &[usize],
        recv: &mut [T],
        recv_counts: &[usize],
        recv_displs: &[usize],
    ) -> Result<()> {
        let (r, n) = (self.rank(), self.size());
        let sr = layout(n, send_counts, send_displs, send.len(), "alltoallv send")?;
        let rr = layout(n, recv_counts, recv_displs, recv.len(), "alltoallv receive")?;
        if sr[r].len() != rr[r].len() {
            return Err(mismatch(format!(
                "rank {r} sends itself {} elements but expects {}",
                sr[r].len(),
                rr[r].len()
            )));
        }
        recv[rr[r].clone()].copy_from_slice(&send[sr[r].clone()]);
        let total = std::mem::size_of_val(send);
        if total <= LARGE {
            let sends: Vec<(usize, &[u8])> = (0..n)
                .filter(|&i| i != r)
                .map(|i| (i, bytes(&send[sr[i].clone()])))
                .collect();
            let mut slots = carve(bytes_mut(recv), &rr, std::mem::size_of::<T>(), r)?;
            return self.c_exchange(tag::ALLTOALL, &sends, &mut slots);
        }
        for k in 1..n {
            let to = (r + k) % n;
            let from = (r + n - k) % n;
            self.c_sendrecv(
                to,
                bytes(&send[sr[to].clone()]),
                from,
                bytes_mut(&mut recv[rr[from].clone()]),
                tag::ALLTOALL,
            )?;
        }
        Ok(())
    }
}

/// Check counts/displacements against a buffer of `len` elements and
/// return each rank's element range.
fn layout(
    n: usize,
    counts: &[usize],
    displs: &[usize],
    len: usize,
    what: &str,
) -> Result<Vec<std::ops::Range<usize>>> {
    if counts.len() != n || displs.len() != n {
        return Err(mismatch(format!(
            "{what}: {} counts and {} displacements for {n} ranks",
            counts.len(),
            displs.len()
        )));
    }
    counts
        .iter()
        .zip(displs)
        .map(|(&c, &d)| {
            let end = d.checked_add(c).filter(|&e| e <= len);
            end.map(|e| d..e).ok_or_else(|| {
                mismatch(format!(
                    "{what}: block at {d} of {c} elements exceeds the {len}-element buffer"
                ))
            })
        })
        .collect()
}

/// Cut `buf` into the byte blocks of every rank but `skip`, as receive slots.
/// The blocks must not overlap.
fn carve<'a>(
    buf: &'a mut [u8],
    ranges: &[std::ops::Range<usize>],
    elem: usize,
    skip: usize,
) -> Result<Vec<(usize, &'a mut [u8])>> {
    let mut order: Vec<usize> = (0..ranges.len()).filter(|&i| i != skip).collect();
    order.sort_by_key(|&i| ranges[i].start);
    let mut slots = Vec::with_capacity(order.len());
    let mut rest = buf;
    let mut consumed = 0;
    for i in order {
        let (s, e) = (ranges[i].start * elem, ranges[i].end * elem);
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
