//! Alltoall(v): every exchange at once when small or on a few ranks (see
//! `flat`), pairwise exchange otherwise.

use super::{LARGE, PerRank, bytes, bytes_mut, carve, equal_blocks, flat, layout, mismatch, tag};
use crate::buffer::Pod;
use crate::comm::Comm;
use crate::error::Result;

impl Comm {
    /// Block i of every member's `send` goes to rank i, where it lands in
    /// block (sender) of `recv`. Both hold `size` equal blocks.
    pub fn alltoall<T: Pod>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        if self.is_inter() {
            return self.inter_alltoall(send, recv);
        }
        let n = self.size();
        if !send.len().is_multiple_of(n) || send.len() != recv.len() {
            return Err(mismatch(format!(
                "alltoall buffers of {} and {} elements do not split into {n} equal blocks",
                send.len(),
                recv.len()
            )));
        }
        let b = send.len() / n;
        let r = self.rank();
        recv[r * b..(r + 1) * b].copy_from_slice(&send[r * b..(r + 1) * b]);
        if n == 1 {
            return Ok(());
        }
        // Equal blocks: the same algorithms as `alltoallv`, without its
        // block lists.
        let bb = b * std::mem::size_of::<T>();
        let (out, inp) = (bytes(send), bytes_mut(recv));
        if std::mem::size_of_val(send) <= LARGE || flat(n, bb) {
            let mut sends: PerRank<(usize, &[u8])> = PerRank::new();
            sends.extend(
                (0..n)
                    .filter(|&i| i != r)
                    .map(|i| (i, &out[i * bb..(i + 1) * bb])),
            );
            let mut slots = equal_blocks(&mut inp[..n * bb], n, r);
            return self.c_exchange(tag::ALLTOALL, &sends, &mut slots);
        }
        self.pairwise(out, |i| i * bb..(i + 1) * bb, inp, |i| i * bb..(i + 1) * bb)
    }

    /// The pairwise exchange of large all-to-alls: in step k, send the
    /// block `sent(r + k)` of `out` to rank r + k and receive the block
    /// `received(r − k)` of `inp` from rank r − k (byte ranges).
    fn pairwise(
        &self,
        out: &[u8],
        sent: impl Fn(usize) -> std::ops::Range<usize>,
        inp: &mut [u8],
        received: impl Fn(usize) -> std::ops::Range<usize>,
    ) -> Result<()> {
        let (r, n) = (self.rank(), self.size());
        for k in 1..n {
            let to = (r + k) % n;
            let from = (r + n - k) % n;
            self.c_sendrecv(
                to,
                &out[sent(to)],
                from,
                &mut inp[received(from)],
                tag::ALLTOALL,
            )?;
        }
        Ok(())
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
        if self.is_inter() {
            return self.inter_alltoallv(
                send,
                send_counts,
                send_displs,
                recv,
                recv_counts,
                recv_displs,
            );
        }
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
        if total <= LARGE || flat(n, total / n) {
            let mut sends: PerRank<(usize, &[u8])> = PerRank::new();
            sends.extend(
                (0..n)
                    .filter(|&i| i != r)
                    .map(|i| (i, bytes(&send[sr[i].clone()]))),
            );
            let mut slots = carve(bytes_mut(recv), &rr, std::mem::size_of::<T>(), r)?;
            return self.c_exchange(tag::ALLTOALL, &sends, &mut slots);
        }
        let elem = std::mem::size_of::<T>();
        self.pairwise(
            bytes(send),
            |i| sr[i].start * elem..sr[i].end * elem,
            bytes_mut(recv),
            |i| rr[i].start * elem..rr[i].end * elem,
        )
    }
}
