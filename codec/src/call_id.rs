//! The identifier of an API call, which logged events, checkpoints and the
//! engine share.

use std::fmt;

/// An API call: its *lane* — the communicator context it works on — and
/// its number among the calls of that lane (1, 2, …).
///
/// Numbering calls per lane rather than per process is what lets a
/// process whose threads each use their own communicator be re-executed
/// exactly: each thread's calls get the same ids whatever the
/// interleaving of the threads.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct CallId {
    /// The communicator context (or [`CallId::PROCESS_LANE`]).
    pub lane: u32,
    /// Number of the call in its lane, from 1.
    pub n: u64,
}

impl CallId {
    /// The lane of calls numbered among all calls of the process, in the
    /// order they come (one-sided windows' traffic). No communicator
    /// context takes this value or [`CallId::GENERALIZED_LANE`].
    pub const PROCESS_LANE: u32 = u32::MAX;

    /// The lane of generalized requests (calls on no communicator).
    pub const GENERALIZED_LANE: u32 = u32::MAX - 3;

    /// Call `n` of `lane`.
    pub const fn new(lane: u32, n: u64) -> CallId {
        CallId { lane, n }
    }

    /// Bytes [`put_call_id`] appends.
    pub const ENCODED_LEN: usize = 12;
}

/// `lane:n`, as every report names a call.
impl fmt::Display for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.lane, self.n)
    }
}

impl fmt::Debug for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Append a call id: its lane (u32), then its number (u64).
pub fn put_call_id(out: &mut Vec<u8>, c: CallId) {
    crate::put_u32(out, c.lane);
    crate::put_u64(out, c.n);
}

impl crate::Reader<'_> {
    /// A call id written by [`put_call_id`].
    pub fn call_id(&mut self) -> Result<CallId, crate::Error> {
        let lane = self.u32()?;
        let n = self.u64()?;
        Ok(CallId { lane, n })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_id_reads_back_and_orders_by_lane_then_number() {
        let mut b = Vec::new();
        put_call_id(&mut b, CallId::new(7, 42));
        assert_eq!(b.len(), CallId::ENCODED_LEN);
        assert_eq!(
            crate::Reader::new(&b, "c").call_id(),
            Ok(CallId::new(7, 42))
        );
        assert!(CallId::new(1, 9) < CallId::new(2, 1));
        assert_eq!(CallId::new(3, 4).to_string(), "3:4");
    }
}
