//! Point-to-point with fixed partners inside the collective context: the
//! sends, receives and exchanges every collective is built on, checking
//! that each contribution has the expected length.

use super::{PerRank, mismatch};
use crate::comm::{Comm, Mode};
use crate::engine::ReqId;
use crate::error::{Error, Result};
use crate::matching::RecvSpec;

impl Comm {
    fn coll_spec(&self, from: usize, tag: i32) -> RecvSpec {
        RecvSpec {
            source: Some(self.peer_world_rank(from)),
            tag: Some(tag),
            context: self.collective_context(),
        }
    }

    fn check_len(&self, from: usize, got: usize, want: usize) -> Result<()> {
        if got == want {
            Ok(())
        } else {
            Err(mismatch(format!(
                "rank {from} sent {got} bytes where {want} were expected"
            )))
        }
    }

    fn coll_result(&self, from: usize, want: usize, r: Result<crate::Status>) -> Result<()> {
        match r {
            Ok(st) => self.check_len(from, st.len(), want),
            Err(Error::Truncated { message_len, .. }) => self.check_len(from, message_len, want),
            Err(e) => Err(e),
        }
    }

    pub(super) fn c_send(&self, to: usize, tag: i32, data: &[u8]) -> Result<()> {
        self.raw_send(
            self.peer_world_rank(to),
            tag,
            self.collective_context(),
            data,
            Mode::Standard,
        )
    }

    pub(super) fn c_recv(&self, from: usize, tag: i32, buf: &mut [u8]) -> Result<()> {
        let want = buf.len();
        let r = self.raw_recv(self.coll_spec(from, tag), buf);
        self.coll_result(from, want, r)
    }

    pub(super) fn c_sendrecv(
        &self,
        to: usize,
        out: &[u8],
        from: usize,
        inp: &mut [u8],
        tag: i32,
    ) -> Result<()> {
        self.c_sendrecv_while(to, out, from, inp, tag, || {})
    }

    /// [`Comm::c_sendrecv`], running `meanwhile` while the transfer goes
    /// on (once both operations started; it must not touch `out` or
    /// `inp`).
    pub(super) fn c_sendrecv_while(
        &self,
        to: usize,
        out: &[u8],
        from: usize,
        inp: &mut [u8],
        tag: i32,
        meanwhile: impl FnOnce(),
    ) -> Result<()> {
        let want = inp.len();
        let r = self.raw_sendrecv(
            out,
            self.peer_world_rank(to),
            tag,
            self.collective_context(),
            inp,
            self.coll_spec(from, tag),
            meanwhile,
        );
        self.coll_result(from, want, r)
    }

    /// Post many sends and receives at once and wait for all of them. The
    /// buffers stay borrowed until every operation completed (or the engine
    /// failed, in which case it forgets them).
    pub(super) fn c_exchange(
        &self,
        tag: i32,
        sends: &[(usize, &[u8])],
        recvs: &mut [(usize, &mut [u8])],
    ) -> Result<()> {
        // One transfer or one pair (two ranks, a root and one other): the
        // blocking forms, which skip the request table when they can.
        match (sends, &mut *recvs) {
            ([(to, out)], [(from, inp)]) => return self.c_sendrecv(*to, out, *from, inp, tag),
            ([], [(from, inp)]) => return self.c_recv(*from, tag, inp),
            ([(to, out)], []) => return self.c_send(*to, tag, out),
            _ => {}
        }
        self.c_exchange_while(tag, sends, recvs, || {})
    }

    /// [`Comm::c_exchange`] that runs `meanwhile` once every transfer has
    /// started, before waiting: work of this rank's own (copying its own
    /// block of a large collective) overlaps with the peers' reading what
    /// it sends.
    pub(super) fn c_exchange_while(
        &self,
        tag: i32,
        sends: &[(usize, &[u8])],
        recvs: &mut [(usize, &mut [u8])],
        meanwhile: impl FnOnce(),
    ) -> Result<()> {
        let mut eng = self.engine.borrow_mut();
        let ctx = self.collective_context();
        // Each request, and for a receive its source and room.
        let mut ids: PerRank<(ReqId, Option<(usize, usize)>)> =
            PerRank::with_capacity(sends.len() + recvs.len());
        for (from, buf) in recvs.iter_mut() {
            // SAFETY: `buf` is borrowed for this whole function, which waits
            // for the receive below (or the engine failed and dropped it).
            let id =
                unsafe { eng.start_recv(self.coll_spec(*from, tag), buf.as_mut_ptr(), buf.len())? };
            ids.push((id, Some((*from, buf.len()))));
        }
        for (to, data) in sends {
            // SAFETY: as above, for the send buffers.
            let id = unsafe {
                eng.start_send_lean(
                    self.peer_world_rank(*to),
                    tag,
                    ctx,
                    data.as_ptr(),
                    data.len(),
                    false,
                )?
            };
            ids.push((id, None));
        }
        meanwhile();
        eng.wait_until(|e| ids.iter().all(|(id, _)| e.is_done(*id)))?;
        let mut result = Ok(());
        for (id, recv) in ids {
            // A send complete at start left nothing to take.
            if id.is_complete_send() {
                continue;
            }
            let st = eng.take_status(id)?;
            if let Some((from, want)) = recv {
                let got = match st.error() {
                    Some(Error::Truncated { message_len, .. }) => *message_len,
                    _ => st.len(),
                };
                if result.is_ok() {
                    result = self.check_len(from, got, want);
                }
            }
        }
        result
    }
}
