//! Barrier: dissemination (in step k every rank signals rank + 2^k and
//! hears from rank − 2^k).

use super::tag;
use crate::comm::Comm;
use crate::error::Result;

impl Comm {
    /// Block until every member has called `barrier`.
    pub fn barrier(&self) -> Result<()> {
        if self.is_inter() {
            return self.inter_barrier();
        }
        let (r, n) = (self.rank(), self.size());
        let mut k = 1;
        while k < n {
            self.c_sendrecv((r + k) % n, &[], (r + n - k) % n, &mut [], tag::BARRIER)?;
            k *= 2;
        }
        Ok(())
    }
}
