//! Gather(v) and scatter(v): direct to and from the root.

use super::{bytes, bytes_mut, carve, layout, mismatch, tag};
use crate::buffer::Pod;
use crate::comm::Comm;
use crate::error::Result;

impl Comm {
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
}
