//! Inclusive and exclusive prefix reductions (scan, exscan) by recursive
//! doubling.

use super::{bytes, bytes_mut, mismatch, tag};
use crate::buffer::Pod;
use crate::comm::Comm;
use crate::error::Result;
use crate::op::{Op, fold_left, fold_right};

impl Comm {
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
}
