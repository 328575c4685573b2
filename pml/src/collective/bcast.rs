//! Broadcast: binomial tree, or a pipelined chain of segments for large
//! buffers.

use super::{BCAST_SEGMENT, LARGE, bytes_mut, tag};
use crate::buffer::Pod;
use crate::comm::Comm;
use crate::error::Result;

impl Comm {
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
        self.intra_only("bcast (use inter_bcast)")?;
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
}
