//! Allgather(v): flat on a few ranks (every block sent to every rank at
//! once, see `flat`), else recursive doubling for small power-of-two
//! groups and a ring otherwise.

use super::{
    LARGE, PerRank, bytes, bytes_mut, carve, disjoint, disjoint_mut, equal_blocks, flat, layout,
    mismatch, tag,
};
use crate::buffer::Pod;
use crate::comm::Comm;
use crate::error::Result;

impl Comm {
    /// Every member gets every member's `send`, in rank order
    /// (`recv.len() == size · send.len()`).
    pub fn allgather<T: Pod>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        if self.is_inter() {
            return self.inter_allgather(send, recv);
        }
        let (r, n) = (self.rank(), self.size());
        let b = send.len();
        if recv.len() != n * b {
            return Err(mismatch(format!(
                "allgather result buffer holds {} elements, not {n} blocks of {b}",
                recv.len()
            )));
        }
        // Equal blocks: the blocks of consecutive ranks are adjacent, so
        // every step moves one contiguous run, in place (the same
        // algorithms as `allgatherv`, without its block lists).
        let bb = std::mem::size_of_val(send);
        if n > 2 && flat(n, bb) {
            recv[r * b..(r + 1) * b].copy_from_slice(send);
            let mut slots = equal_blocks(bytes_mut(recv), n, r);
            return self.flat_allgather(bytes(send), &mut slots);
        }
        if n == 1 || !(n.is_power_of_two() && n * bb <= LARGE) {
            // The ring's first step sends this rank's block straight from
            // `send`, and copies it into place while the transfer goes on.
            let block = |i: usize| i * bb..(i + 1) * bb;
            return self.ring_allgather_from(bytes(send), bytes_mut(recv), block);
        }
        recv[r * b..(r + 1) * b].copy_from_slice(send);
        // Recursive doubling: exchange ever larger aligned blocks of ranks.
        let buf = bytes_mut(recv);
        let mut mask = 1;
        while mask < n {
            let partner = r ^ mask;
            let (mine, theirs) = (r & !(mask - 1), partner & !(mask - 1));
            let (o, i) = disjoint(
                buf,
                mine * bb..(mine + mask) * bb,
                theirs * bb..(theirs + mask) * bb,
            )?;
            self.c_sendrecv(partner, o, partner, i, tag::ALLGATHER)?;
            mask <<= 1;
        }
        Ok(())
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
        if self.is_inter() {
            return self.inter_allgatherv(send, recv, counts, displs);
        }
        let (r, n) = (self.rank(), self.size());
        let ranges = layout(n, counts, displs, recv.len(), "allgatherv")?;
        if counts[r] != send.len() {
            return Err(mismatch(format!(
                "rank {r} contributes {} elements but counts says {}",
                send.len(),
                counts[r]
            )));
        }
        let elem = std::mem::size_of::<T>();
        let total: usize = counts.iter().sum::<usize>() * elem;
        if n > 2 && flat(n, total / n) {
            recv[ranges[r].clone()].copy_from_slice(send);
            let mut slots = carve(bytes_mut(recv), &ranges, elem, r)?;
            return self.flat_allgather(bytes(send), &mut slots);
        }
        let byte_ranges: Vec<std::ops::Range<usize>> = ranges
            .iter()
            .map(|rg| rg.start * elem..rg.end * elem)
            .collect();
        if !(n.is_power_of_two() && total <= LARGE) {
            return self
                .ring_allgather_from(bytes(send), bytes_mut(recv), |i| byte_ranges[i].clone());
        }
        recv[ranges[r].clone()].copy_from_slice(send);
        let buf = bytes_mut(recv);
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
        Ok(())
    }

    /// The flat allgather: `send` to every other rank at once, and each
    /// other rank's block into its slot of `slots`.
    fn flat_allgather(&self, send: &[u8], slots: &mut [(usize, &mut [u8])]) -> Result<()> {
        let r = self.rank();
        let mut sends: PerRank<(usize, &[u8])> = PerRank::new();
        sends.extend((0..self.size()).filter(|&i| i != r).map(|i| (i, send)));
        self.c_exchange(tag::ALLGATHER, &sends, slots)
    }

    /// The ring allgather of `send` into the byte blocks of `buf`
    /// (`block(i)`: rank i's). The first step sends this rank's block
    /// straight from `send` and copies it into place while the transfer
    /// goes on; in step k, block (r − k) goes right and (r − k − 1) comes
    /// from the left.
    fn ring_allgather_from(
        &self,
        send: &[u8],
        buf: &mut [u8],
        block: impl Fn(usize) -> std::ops::Range<usize>,
    ) -> Result<()> {
        let (r, n) = (self.rank(), self.size());
        let (right, left) = ((r + 1) % n, (r + n - 1) % n);
        if n == 1 {
            buf[block(r)].copy_from_slice(send);
            return Ok(());
        }
        let (own, inp) = disjoint_mut(buf, block(r), block(left))?;
        self.c_sendrecv_while(right, send, left, inp, tag::ALLGATHER, || {
            own.copy_from_slice(send)
        })?;
        for k in 1..n - 1 {
            let out = (r + n - k) % n;
            let inp = (r + 2 * n - k - 1) % n;
            let (o, i) = disjoint(buf, block(out), block(inp))?;
            self.c_sendrecv(right, o, left, i, tag::ALLGATHER)?;
        }
        Ok(())
    }
}
