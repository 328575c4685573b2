//! Broadcast: flat on a few ranks from 16 KiB on, else a binomial tree,
//! or a pipelined chain of segments for large buffers.

use super::{BCAST_SEGMENT, FLAT_MIN, FLAT_RANKS, LARGE, PerRank, bytes_mut, tag};
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
        if n > 2 && n <= FLAT_RANKS && buf.len() >= FLAT_MIN {
            // Flat: the root's sends all at once, so that the others take
            // the message together (by single copy from the root's buffer
            // above the eager limit), none waiting for another to pass it
            // on: 0.41-0.81× the tree's and chain's time on 4 ranks and
            // 0.64-0.97× on 8 over 2 cores, from 16 KiB to 4 MiB
            // (alternated runs). Up to the eager limit (16 KiB) the root
            // copies the message into each receiver's ring; below 16 KiB
            // that made it slower than the tree on 8 ranks.
            if vr != 0 {
                return self.c_recv(root, tag::BCAST, buf);
            }
            let mut sends: PerRank<(usize, &[u8])> = PerRank::new();
            sends.extend((1..n).map(|v| (real(v), &buf[..])));
            return self.c_exchange(tag::BCAST, &sends, &mut []);
        }
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
