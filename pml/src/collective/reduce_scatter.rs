//! Reduce-scatter: the reduction of [`Comm::allreduce`], of which each
//! rank keeps one block.
//!
//! Small blocks take the allreduce and keep their part. Larger ones take
//! recursive halving over the fixed tree (so the same bits as the
//! allreduce): in the step that pairs participants differing in bit `m`
//! (`m` = 1, 2, 4, …), a participant keeps the blocks of the participants
//! that agree with it on bit `m` and hands the partner the others, one
//! message per block, so that after the last step it holds its own block,
//! combined over every rank. With blocks of about equal size each rank
//! sends about `(n−1)/n` of the vector instead of the allreduce's twice as
//! much (a rank with most of the vector combines it at every step), and
//! its first step sends from the caller's buffer.

use super::reduce::{Fold, combine};
use super::scratch::with_scratch;
use super::{PerRank, bytes, bytes_mut, mismatch, tag};
use crate::buffer::Pod;
use crate::comm::Comm;
use crate::error::Result;
use crate::op::Op;

/// Blocks of this many bytes on average and more take recursive halving;
/// smaller ones the allreduce, which sends fewer messages (measured, on
/// 2, 4 and 8 ranks: halving is 1.3-4× faster from 4 KiB blocks on, and
/// level or up to 1.2× slower below 2 KiB).
const HALVING_BLOCKS: usize = 2 * 1024;

impl Comm {
    /// Combine `send` of every member with `op` (in rank order, the bits of
    /// [`Comm::allreduce`]) and leave in `recv` this rank's block of the
    /// result: elements `bounds[rank]..bounds[rank + 1]`. `bounds` starts
    /// at 0, has one entry per rank and a last one, `send.len()`, and
    /// never decreases.
    pub fn reduce_scatter<T: Pod, O: Op<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        bounds: &[usize],
        op: &O,
    ) -> Result<()> {
        if self.is_inter() {
            return self.inter_reduce_scatter(send, recv, bounds, op);
        }
        let (r, n) = (self.rank(), self.size());
        if bounds.len() != n + 1
            || bounds[0] != 0
            || bounds[n] != send.len()
            || bounds.windows(2).any(|w| w[0] > w[1])
        {
            return Err(mismatch(format!(
                "reduce-scatter: {} block bounds for {n} ranks and {} elements",
                bounds.len(),
                send.len()
            )));
        }
        let mine = bounds[r]..bounds[r + 1];
        if recv.len() != mine.len() {
            return Err(mismatch(format!(
                "reduce-scatter result buffer holds {} elements, the block {}",
                recv.len(),
                mine.len()
            )));
        }
        let fold = Fold::new(n);
        if std::mem::size_of_val(send) < HALVING_BLOCKS * n || n == 1 {
            return with_scratch(send.len(), |acc: &mut [T]| {
                acc.copy_from_slice(send);
                self.allreduce_in_place(acc, op)?;
                recv.copy_from_slice(&acc[mine]);
                Ok(())
            });
        }
        if r < 2 * fold.rem && r.is_multiple_of(2) {
            // Folded away: the partner combines for both.
            self.c_send(r + 1, tag::REDUCE_SCATTER, bytes(send))?;
            return self.c_recv(r + 1, tag::REDUCE_SCATTER, bytes_mut(recv));
        }
        with_scratch(send.len(), |acc: &mut [T]| {
            with_scratch(send.len(), |tmp: &mut [T]| {
                self.halve(&fold, send, acc, tmp, bounds, op)?;
                if r < 2 * fold.rem {
                    let theirs = bounds[r - 1]..bounds[r];
                    self.c_send(r - 1, tag::REDUCE_SCATTER, bytes(&acc[theirs]))?;
                }
                recv.copy_from_slice(&acc[mine]);
                Ok(())
            })
        })
    }

    /// The folding and recursive halving of [`Comm::reduce_scatter`] on a
    /// participant (not a rank folded away) of at least two: it ends with
    /// its blocks combined in `acc`.
    fn halve<T: Pod, O: Op<T>>(
        &self,
        fold: &Fold,
        send: &[T],
        acc: &mut [T],
        tmp: &mut [T],
        bounds: &[usize],
        op: &O,
    ) -> Result<()> {
        let r = self.rank();
        // `acc` holds this rank's partial result (else it is `send`).
        let mut started = false;
        if r < 2 * fold.rem {
            self.c_recv(r - 1, tag::REDUCE_SCATTER, bytes_mut(acc))?;
            combine(op, false, true, send, acc, tmp);
            started = true;
        }
        let Some(p) = fold.participant(r) else {
            return Err(mismatch("rank outside the reduction tree".into()));
        };
        // The elements of participant q's block: its ranks' blocks.
        let block = |q: usize| {
            let first = if q < fold.rem { 2 * q } else { q + fold.rem };
            bounds[first]..bounds[fold.rank(q) + 1]
        };
        let mut mask = 1;
        while mask < fold.p2 {
            let partner = p ^ mask;
            // Still held: participants agreeing with p below bit `mask`.
            let held = (0..fold.p2).filter(|q| (q ^ p) & (mask - 1) == 0);
            let keep: PerRank<_> = held.clone().filter(|q| q & mask == p & mask).collect();
            let give: PerRank<_> = held.filter(|q| q & mask != p & mask).collect();
            let to = fold.rank(partner);
            if started {
                self.exchange_blocks(to, acc, tmp, &give, &keep, block)?;
            } else {
                self.exchange_blocks(to, send, acc, &give, &keep, block)?;
            }
            // Lower participants' partial results first.
            for &q in &keep {
                let b = block(q);
                let (mine, tmp) = (&send[b.clone()], &tmp[b.clone()]);
                combine(op, started, partner < p, mine, &mut acc[b], tmp);
            }
            started = true;
            mask <<= 1;
        }
        Ok(())
    }

    /// One step of [`Comm::halve`]: send participant blocks `give` of
    /// `from` to rank `to` and receive blocks `keep` into `into` (each
    /// list ascending, one message per block).
    fn exchange_blocks<T: Pod>(
        &self,
        to: usize,
        from: &[T],
        into: &mut [T],
        give: &[usize],
        keep: &[usize],
        block: impl Fn(usize) -> std::ops::Range<usize>,
    ) -> Result<()> {
        let sends: PerRank<(usize, &[u8])> =
            give.iter().map(|&q| (to, bytes(&from[block(q)]))).collect();
        let mut recvs: PerRank<(usize, &mut [u8])> = PerRank::new();
        let (mut rest, mut at) = (into, 0);
        for &q in keep {
            let b = block(q);
            let (_, tail) = rest.split_at_mut(b.start - at);
            let (this, tail) = tail.split_at_mut(b.len());
            recvs.push((to, bytes_mut(this)));
            (rest, at) = (tail, b.end);
        }
        self.c_exchange(tag::REDUCE_SCATTER, &sends, &mut recvs)
    }
}
