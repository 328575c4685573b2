//! Inclusive and exclusive prefix reductions (scan, exscan) by recursive
//! doubling.

use super::scratch::with_scratch;
use super::{bytes, bytes_mut, mismatch, tag};
use crate::buffer::Pod;
use crate::comm::Comm;
use crate::error::Result;
use crate::op::{Op, fold_left, fold_right};

/// Up to this many ranks, prefix reductions run along a chain: its
/// latency grows with the ranks, but consecutive scans overlap along it,
/// and with more ranks than cores a rank waits for one neighbour only.
const CHAIN_MAX: usize = 16;

impl Comm {
    /// Inclusive prefix reduction: rank r gets `x0 ⊕ … ⊕ xr`.
    pub fn scan<T: Pod, O: Op<T>>(&self, send: &[T], recv: &mut [T], op: &O) -> Result<()> {
        self.intra_only("scan")?;
        self.prefix(send, recv, op, true)
    }

    /// Exclusive prefix reduction: rank r > 0 gets `x0 ⊕ … ⊕ x(r−1)`;
    /// rank 0's `recv` is left untouched.
    pub fn exscan<T: Pod, O: Op<T>>(&self, send: &[T], recv: &mut [T], op: &O) -> Result<()> {
        self.intra_only("exscan")?;
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
        let len = send.len();
        if self.size() <= CHAIN_MAX {
            return self.prefix_chain(send, recv, op, inclusive);
        }
        with_scratch(len, |partial: &mut [T]| {
            partial.copy_from_slice(send);
            with_scratch(len, |tmp| {
                self.prefix_with(partial, tmp, recv, op, inclusive)
            })
        })
    }

    /// A few ranks: along the chain 0 → 1 → … (rank r folds what r − 1
    /// sends with its own contribution and passes it on). Each rank waits
    /// only for its left neighbour and never for its right one, so
    /// consecutive scans overlap; recursive doubling makes every rank wait
    /// for a partner at every step.
    fn prefix_chain<T: Pod, O: Op<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: &O,
        inclusive: bool,
    ) -> Result<()> {
        let (r, n) = (self.rank(), self.size());
        if r == 0 {
            if inclusive {
                recv.copy_from_slice(send);
            }
            if n > 1 {
                self.c_send(1, tag::SCAN, bytes(send))?;
            }
            return Ok(());
        }
        // x0 ⊕ … ⊕ x(r−1) lands in `recv`: the exclusive result as it is,
        // the inclusive one once ⊕ xr.
        self.c_recv(r - 1, tag::SCAN, bytes_mut(recv))?;
        if inclusive {
            fold_right(op, recv, send);
            if r + 1 < n {
                self.c_send(r + 1, tag::SCAN, bytes(recv))?;
            }
            return Ok(());
        }
        if r + 1 < n {
            return with_scratch(send.len(), |ahead: &mut [T]| {
                ahead.copy_from_slice(recv);
                fold_right(op, ahead, send);
                self.c_send(r + 1, tag::SCAN, bytes(ahead))
            });
        }
        Ok(())
    }

    /// The recursive doubling of [`Comm::scan`]: `partial` starts as this
    /// rank's contribution, `tmp` takes what partners send.
    fn prefix_with<T: Pod, O: Op<T>>(
        &self,
        partial: &mut [T],
        tmp: &mut [T],
        recv: &mut [T],
        op: &O,
        inclusive: bool,
    ) -> Result<()> {
        let (r, n) = (self.rank(), self.size());
        // `partial` covers this rank's aligned block so far; `recv` the
        // ranks of that block up to this one (exclusive: strictly before).
        let mut have = inclusive;
        if inclusive {
            recv.copy_from_slice(partial);
        }
        let mut mask = 1;
        while mask < n {
            let partner = r ^ mask;
            if partner < n {
                self.c_sendrecv(partner, bytes(partial), partner, bytes_mut(tmp), tag::SCAN)?;
                if partner < r {
                    fold_left(op, tmp, partial);
                    if have {
                        fold_left(op, tmp, recv);
                    } else {
                        recv.copy_from_slice(tmp);
                        have = true;
                    }
                } else {
                    fold_right(op, partial, tmp);
                }
            }
            mask <<= 1;
        }
        Ok(())
    }
}
