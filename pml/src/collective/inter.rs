//! Collectives on an intercommunicator, as MPI defines them: data flows
//! between the two groups. A rooted collective's root is in one group
//! ([`InterRoot::Here`] at the root, [`InterRoot::Elsewhere`] at its
//! group's other members) and the other group names it
//! ([`InterRoot::Remote`]); an all-to-all collective gives each group what
//! the other contributed (`allreduce`: the reduction of the remote group's
//! contributions).
//!
//! Reductions, broadcasts and barriers run a phase inside each group on
//! the local group's own communicator (a binomial reduce to, or broadcast
//! from, the group's rank 0) and one exchange between the two leaders;
//! gathers, scatters, allgathers and all-to-alls move each block directly
//! between its two processes. Every receive names its source, so none is
//! a non-deterministic event.

use super::{PerRank, bytes, bytes_mut, carve, layout, mismatch, tag};
use crate::buffer::Pod;
use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::op::Op;

/// A process's part in a rooted collective on an intercommunicator
/// (MPI's `MPI_ROOT`, `MPI_PROC_NULL`, or a rank of the remote group).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterRoot {
    /// This process is the root.
    Here,
    /// Another process of this group is the root: nothing to do.
    Elsewhere,
    /// The root is this rank of the remote group.
    Remote(usize),
}

/// Tag of the leaders' exchanges when groups make communicators.
const LEADERS: i32 = 11;

impl Comm {
    /// The remote group's size, or an error naming `what` on an
    /// intracommunicator.
    fn remote_count(&self, what: &str) -> Result<usize> {
        if !self.is_inter() {
            return Err(Error::CommKind(format!(
                "{what} needs an intercommunicator"
            )));
        }
        Ok(self.remote_size())
    }

    /// The remote rank a [`InterRoot::Remote`] names, checked.
    fn remote_root(&self, r: usize) -> Result<usize> {
        if r < self.remote_size() {
            Ok(r)
        } else {
            Err(Error::InvalidRank {
                rank: i64::try_from(r).unwrap_or(-1),
                size: self.remote_size(),
            })
        }
    }

    /// Give the remote group `table` (the same at every local member) and
    /// get its own: the two leaders exchange them, each broadcasts what it
    /// got in its group. Tables hold at most 1 + 4 words per world rank.
    pub(crate) fn swap_with_remote(&self, table: &[u64]) -> Result<Vec<u64>> {
        let local = self.local();
        // The leader's failure reaches its group as a table of no words,
        // so no member waits for a table that never comes.
        let mut theirs = Vec::new();
        let mut failed = None;
        if local.rank() == 0
            && let Err(e) = self.leaders_swap(table, &mut theirs)
        {
            theirs.clear();
            failed = Some(e);
        }
        let mut len = [theirs.len() as u64];
        local.bcast(&mut len, 0)?;
        if let Some(e) = failed {
            return Err(e);
        }
        theirs.resize(self.table_len(len[0])?, 0);
        local.bcast(&mut theirs, 0)?;
        Ok(theirs)
    }

    /// The leader's side of [`Comm::swap_with_remote`].
    fn leaders_swap(&self, table: &[u64], theirs: &mut Vec<u64>) -> Result<()> {
        let mut len = [0u64];
        let n = [table.len() as u64];
        self.c_sendrecv(0, bytes(&n), 0, bytes_mut(&mut len), LEADERS)?;
        *theirs = vec![0u64; self.table_len(len[0])?];
        self.c_sendrecv(0, bytes(table), 0, bytes_mut(theirs), LEADERS)
    }

    /// Barrier over both groups: each group's members have all entered
    /// before its leader tells the other leader, who then releases its group.
    pub(super) fn inter_barrier(&self) -> Result<()> {
        let local = self.local();
        local.barrier()?;
        let mut token = [0u8];
        if local.rank() == 0 {
            self.c_sendrecv(0, &[0], 0, &mut token, tag::BARRIER)?;
        }
        local.bcast(&mut token, 0)
    }

    /// Broadcast `buf` from the root to every member of the remote group.
    pub fn inter_bcast<T: Pod>(&self, buf: &mut [T], root: InterRoot) -> Result<()> {
        self.remote_count("inter_bcast")?;
        match root {
            InterRoot::Here => self.c_send(0, tag::BCAST, bytes(buf)),
            InterRoot::Elsewhere => Ok(()),
            InterRoot::Remote(r) => {
                let r = self.remote_root(r)?;
                let local = self.local();
                if local.rank() == 0 {
                    self.c_recv(r, tag::BCAST, bytes_mut(buf))?;
                }
                local.bcast(buf, 0)
            }
        }
    }

    /// Reduce the remote group's `send` (in its rank order) into the
    /// root's `recv`; `recv` is ignored except at the root, `send` at the
    /// root's group.
    pub fn inter_reduce<T: Pod, O: Op<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: &O,
        root: InterRoot,
    ) -> Result<()> {
        self.remote_count("inter_reduce")?;
        match root {
            InterRoot::Here => self.c_recv(0, tag::REDUCE, bytes_mut(recv)),
            InterRoot::Elsewhere => Ok(()),
            InterRoot::Remote(r) => {
                let r = self.remote_root(r)?;
                let local = self.local();
                if local.rank() != 0 {
                    return local.reduce(send, &mut [], op, 0);
                }
                let mut acc = send.to_vec();
                local.reduce(send, &mut acc, op, 0)?;
                self.c_send(r, tag::REDUCE, bytes(&acc))
            }
        }
    }

    /// Every member gets in `recv` the reduction of the remote group's
    /// `send` (in its rank order).
    pub(super) fn inter_allreduce<T: Pod, O: Op<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: &O,
    ) -> Result<()> {
        if recv.len() != send.len() {
            return Err(mismatch(format!(
                "allreduce result buffer holds {} elements, contribution {}",
                recv.len(),
                send.len()
            )));
        }
        let local = self.local();
        if local.rank() == 0 {
            let mut acc = send.to_vec();
            local.reduce(send, &mut acc, op, 0)?;
            self.c_sendrecv(0, bytes(&acc), 0, bytes_mut(recv), tag::ALLREDUCE)?;
        } else {
            local.reduce(send, &mut [], op, 0)?;
        }
        local.bcast(recv, 0)
    }

    /// Gather the remote group's `send` blocks into the root's `recv`, the
    /// block of remote rank `i` at elements `displs[i]..displs[i] +
    /// counts[i]`.
    pub fn inter_gatherv<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
        root: InterRoot,
    ) -> Result<()> {
        let n = self.remote_count("inter_gatherv")?;
        match root {
            InterRoot::Here => {
                let ranges = layout(n, counts, displs, recv.len(), "gatherv")?;
                let mut slots = carve(bytes_mut(recv), &ranges, size_of::<T>(), usize::MAX)?;
                self.c_exchange(tag::GATHER, &[], &mut slots)
            }
            InterRoot::Elsewhere => Ok(()),
            InterRoot::Remote(r) => self.c_send(self.remote_root(r)?, tag::GATHER, bytes(send)),
        }
    }

    /// [`Comm::inter_gatherv`] with one block per remote rank, in rank
    /// order (`recv` holds the remote group's size blocks of equal length).
    pub fn inter_gather<T: Pod>(&self, send: &[T], recv: &mut [T], root: InterRoot) -> Result<()> {
        let n = self.remote_count("inter_gather")?;
        if root == InterRoot::Here && !recv.len().is_multiple_of(n) {
            return Err(mismatch(format!(
                "gather root buffer of {} elements does not split into {n} blocks",
                recv.len()
            )));
        }
        let b = recv.len() / n;
        let displs: PerRank<usize> = (0..n).map(|i| i * b).collect();
        let counts: PerRank<usize> = (0..n).map(|_| b).collect();
        self.inter_gatherv(send, recv, &counts, &displs, root)
    }

    /// Scatter the root's `send` blocks to the remote group: remote rank
    /// `i` gets elements `displs[i]..displs[i] + counts[i]` in `recv`.
    pub fn inter_scatterv<T: Pod>(
        &self,
        send: &[T],
        counts: &[usize],
        displs: &[usize],
        recv: &mut [T],
        root: InterRoot,
    ) -> Result<()> {
        let n = self.remote_count("inter_scatterv")?;
        match root {
            InterRoot::Here => {
                let ranges = layout(n, counts, displs, send.len(), "scatterv")?;
                let sends: PerRank<(usize, &[u8])> = ranges
                    .iter()
                    .enumerate()
                    .map(|(i, rg)| (i, bytes(&send[rg.clone()])))
                    .collect();
                self.c_exchange(tag::SCATTER, &sends, &mut [])
            }
            InterRoot::Elsewhere => Ok(()),
            InterRoot::Remote(r) => {
                self.c_recv(self.remote_root(r)?, tag::SCATTER, bytes_mut(recv))
            }
        }
    }

    /// [`Comm::inter_scatterv`] with equal blocks in rank order.
    pub fn inter_scatter<T: Pod>(&self, send: &[T], recv: &mut [T], root: InterRoot) -> Result<()> {
        let n = self.remote_count("inter_scatter")?;
        if root == InterRoot::Here && !send.len().is_multiple_of(n) {
            return Err(mismatch(format!(
                "scatter root buffer of {} elements does not split into {n} blocks",
                send.len()
            )));
        }
        let b = send.len() / n;
        let displs: PerRank<usize> = (0..n).map(|i| i * b).collect();
        let counts: PerRank<usize> = (0..n).map(|_| b).collect();
        self.inter_scatterv(send, &counts, &displs, recv, root)
    }

    /// Every member sends `send` to each remote member and gets the remote
    /// members' blocks in `recv` (at `ranges`, in remote rank order).
    fn inter_allgather_ranges<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        ranges: &[std::ops::Range<usize>],
    ) -> Result<()> {
        let sends: PerRank<(usize, &[u8])> = (0..ranges.len()).map(|i| (i, bytes(send))).collect();
        let mut slots = carve(bytes_mut(recv), ranges, size_of::<T>(), usize::MAX)?;
        self.c_exchange(tag::ALLGATHER, &sends, &mut slots)
    }

    pub(super) fn inter_allgather<T: Pod>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        let n = self.remote_size();
        if !recv.len().is_multiple_of(n) {
            return Err(mismatch(format!(
                "allgather result buffer of {} elements does not split into {n} blocks",
                recv.len()
            )));
        }
        let b = recv.len() / n;
        let ranges: PerRank<_> = (0..n).map(|i| i * b..(i + 1) * b).collect();
        self.inter_allgather_ranges(send, recv, &ranges)
    }

    pub(super) fn inter_allgatherv<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<()> {
        let n = self.remote_size();
        let ranges = layout(n, counts, displs, recv.len(), "allgatherv")?;
        self.inter_allgather_ranges(send, recv, &ranges)
    }

    pub(super) fn inter_alltoallv<T: Pod>(
        &self,
        send: &[T],
        send_counts: &[usize],
        send_displs: &[usize],
        recv: &mut [T],
        recv_counts: &[usize],
        recv_displs: &[usize],
    ) -> Result<()> {
        let n = self.remote_size();
        let sr = layout(n, send_counts, send_displs, send.len(), "alltoallv send")?;
        let rr = layout(n, recv_counts, recv_displs, recv.len(), "alltoallv receive")?;
        let sends: PerRank<(usize, &[u8])> = sr
            .iter()
            .enumerate()
            .map(|(i, rg)| (i, bytes(&send[rg.clone()])))
            .collect();
        let mut slots = carve(bytes_mut(recv), &rr, size_of::<T>(), usize::MAX)?;
        self.c_exchange(tag::ALLTOALL, &sends, &mut slots)
    }

    pub(super) fn inter_alltoall<T: Pod>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        let n = self.remote_size();
        if !send.len().is_multiple_of(n) || !recv.len().is_multiple_of(n) {
            return Err(mismatch(format!(
                "alltoall buffers of {} and {} elements do not split into {n} blocks",
                send.len(),
                recv.len()
            )));
        }
        let (sb, rb) = (send.len() / n, recv.len() / n);
        let blocks = |b: usize| -> (PerRank<usize>, PerRank<usize>) {
            ((0..n).map(|_| b).collect(), (0..n).map(|i| i * b).collect())
        };
        let ((sc, sd), (rc, rd)) = (blocks(sb), blocks(rb));
        self.inter_alltoallv(send, &sc, &sd, recv, &rc, &rd)
    }

    /// Reduce-scatter: the reduction of the remote group's `send` is cut
    /// at `bounds` (one entry per local rank and the total) among this
    /// group.
    pub(super) fn inter_reduce_scatter<T: Pod, O: Op<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        bounds: &[usize],
        op: &O,
    ) -> Result<()> {
        let local = self.local();
        let (r, n) = (local.rank(), local.size());
        if bounds.len() != n + 1
            || bounds[0] != 0
            || bounds[n] != send.len()
            || bounds.windows(2).any(|w| w[0] > w[1])
            || recv.len() != bounds[r + 1] - bounds[r]
        {
            return Err(mismatch(
                "reduce_scatter: the block bounds do not fit the buffers".into(),
            ));
        }
        let mut theirs = Vec::new();
        if r == 0 {
            let mut acc = send.to_vec();
            local.reduce(send, &mut acc, op, 0)?;
            theirs = acc.clone();
            self.c_sendrecv(
                0,
                bytes(&acc),
                0,
                bytes_mut(&mut theirs),
                tag::REDUCE_SCATTER,
            )?;
        } else {
            local.reduce(send, &mut [], op, 0)?;
        }
        let counts: PerRank<usize> = bounds.windows(2).map(|w| w[1] - w[0]).collect();
        local.scatterv(&theirs, &counts, &bounds[..n], recv, 0)
    }
}
