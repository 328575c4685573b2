//! Gather(v) and scatter(v): direct to and from the root.

use super::{PerRank, bytes, bytes_mut, carve, equal_blocks, layout, mismatch, tag};
use crate::buffer::Pod;
use crate::comm::Comm;
use crate::error::Result;

/// From how many bytes a root's own block is copied while its transfers
/// run rather than before them (below, the blocking send of a 2-rank
/// scatter, which skips the request table, is worth more).
const OVERLAPPED_COPY: usize = 64 * 1024;

impl Comm {
    /// Collect `send` of every member, in rank order, into `recv` of
    /// `root` (`recv.len() == size · send.len()` there; ignored elsewhere).
    pub fn gather<T: Pod>(&self, send: &[T], recv: &mut [T], root: usize) -> Result<()> {
        self.intra_only("gather (use inter_gather)")?;
        self.check_rank(root)?;
        let (r, n) = (self.rank(), self.size());
        if r != root {
            return self.c_send(root, tag::GATHER, bytes(send));
        }
        let b = send.len();
        if recv.len() != n * b {
            return Err(mismatch(format!(
                "gather root buffer holds {} elements, not {n} blocks of {b}",
                recv.len()
            )));
        }
        recv[r * b..(r + 1) * b].copy_from_slice(send);
        let mut slots = equal_blocks(bytes_mut(recv), n, r);
        self.c_exchange(tag::GATHER, &[], &mut slots)
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
        self.intra_only("gatherv (use inter_gatherv)")?;
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
        self.intra_only("scatter (use inter_scatter)")?;
        self.check_rank(root)?;
        let (r, n) = (self.rank(), self.size());
        if r != root {
            return self.c_recv(root, tag::SCATTER, bytes_mut(recv));
        }
        let b = recv.len();
        if send.len() != n * b {
            return Err(mismatch(format!(
                "scatter root buffer holds {} elements, not {n} blocks of {b}",
                send.len()
            )));
        }
        let bb = std::mem::size_of_val(recv);
        let data = bytes(send);
        let mut sends: PerRank<(usize, &[u8])> = PerRank::new();
        sends.extend(
            (0..n)
                .filter(|&i| i != r)
                .map(|i| (i, &data[i * bb..(i + 1) * bb])),
        );
        self.scatter_from_root(&sends, &send[r * b..(r + 1) * b], recv)
    }

    /// The root's side of a scatter: `sends` to the other ranks, and its
    /// own block `mine` into `recv` — after the sends started when the
    /// block is large, so that the copy overlaps with the peers reading
    /// theirs (2 ranks, 4 MiB: the copy and the transfer took one after
    /// the other 1.24x Open MPI's time).
    fn scatter_from_root<T: Pod>(
        &self,
        sends: &[(usize, &[u8])],
        mine: &[T],
        recv: &mut [T],
    ) -> Result<()> {
        if std::mem::size_of_val(mine) < OVERLAPPED_COPY && sends.len() <= 1 {
            recv.copy_from_slice(mine);
            return self.c_exchange(tag::SCATTER, sends, &mut []);
        }
        self.c_exchange_while(tag::SCATTER, sends, &mut [], || recv.copy_from_slice(mine))
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
        self.intra_only("scatterv (use inter_scatterv)")?;
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
        let mut sends: PerRank<(usize, &[u8])> = PerRank::new();
        sends.extend(
            (0..n)
                .filter(|&i| i != r)
                .map(|i| (i, bytes(&send[ranges[i].clone()]))),
        );
        self.scatter_from_root(&sends, &send[ranges[r].clone()], recv)
    }
}
