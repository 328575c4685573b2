//! Handling one frame that arrived from a peer.

use super::link::{Partial, PartialDest, Peer};
use super::requests::{Core, ReqId, SlotKind, Unexpected, read_remote};
use crate::error::{Error, Result};
use crate::matching::{Envelope, Posted};
use crate::shm::ring::{FrameHeader, flags, kind};

impl Core {
    /// Handle one frame from peer `p`.
    pub(super) fn handle_frame(
        &mut self,
        p: usize,
        peer: &mut Peer,
        hdr: &FrameHeader,
    ) -> Result<()> {
        let corrupt = |reason: String| Error::CorruptFrame { peer: p, reason };
        let env = Envelope {
            source: p,
            tag: hdr.tag,
            context: hdr.context,
            seq: hdr.seq,
            len: usize::try_from(hdr.msg_len).map_err(|_| corrupt("length overflow".into()))?,
        };
        match hdr.kind {
            kind::EAGER => {
                self.accept_seq(p, hdr.context, hdr.seq)?;
                let data = peer.link.payload(hdr, env.len).map_err(corrupt)?;
                let sync = (hdr.flags & flags::SYNC != 0).then_some(hdr.aux0);
                self.deliver_eager(&env, data, sync)?;
            }
            kind::RTS => {
                self.check_seq(p, hdr.context, hdr.seq)?;
                let (addr, token) = (hdr.aux0, hdr.aux1);
                if let Some(posted) = self.matching.match_arrival_entry(&env) {
                    match self.pull(posted.item, &env, addr, token) {
                        Ok(()) => *self.recv_seq[p].entry(hdr.context) = hdr.seq,
                        Err(e) if self.restartable && sender_died(&e) => {
                            self.matching.repost(posted);
                            self.gone = Some(p);
                        }
                        Err(e) => return Err(e),
                    }
                } else if self.restartable {
                    // Read it now: nothing queued may point into a process
                    // that can die (and a checkpoint saves the bytes).
                    let mut data = Vec::new();
                    data.try_reserve_exact(env.len).map_err(|_| {
                        corrupt(format!("cannot allocate {} bytes for a message", env.len))
                    })?;
                    data.resize(env.len, 0);
                    match read_remote(self.pids[p], addr, &mut data) {
                        Ok(()) => {
                            *self.recv_seq[p].entry(hdr.context) = hdr.seq;
                            let sync = (token != 0).then_some(token);
                            if token == 0 {
                                self.ack(p, kind::FIN, 0, hdr.context, hdr.seq);
                            }
                            self.deliver_owned(env, data, sync);
                        }
                        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => self.gone = Some(p),
                        Err(source) => {
                            return Err(Error::RemoteRead {
                                peer: p,
                                len: env.len,
                                source,
                            });
                        }
                    }
                } else {
                    *self.recv_seq[p].entry(hdr.context) = hdr.seq;
                    self.matching
                        .push_unexpected(env, Unexpected::Rendezvous { addr, token });
                }
            }
            kind::FIN | kind::SYNC_ACK => {
                let key = (hdr.context, hdr.seq);
                let waiting = peer.sync_waiting.remove(&key);
                let waiting = peer.fin_waiting.remove(&key).or(waiting);
                let id = match waiting {
                    // Restartable: by sequence number, which stays; the
                    // token in the frame may name a request of a dead
                    // process of ours.
                    Some(token) if self.restartable => ReqId::from_token(token),
                    None if self.restartable => {
                        // A send of an earlier process of ours, or one not
                        // re-executed yet: remember that it has matched.
                        if let Some(unmatched) = peer.sync_unmatched.as_mut() {
                            unmatched.remove(&key);
                        }
                        return Ok(());
                    }
                    _ => ReqId::from_token(hdr.aux1),
                };
                match self.slot(id) {
                    Some(s) if s.kind == SlotKind::Send && !s.done => self.complete(id),
                    // A restarted receiver may acknowledge a message again.
                    _ if self.restartable => {}
                    _ => return Err(corrupt(format!("acknowledgement for unknown send {id:?}"))),
                }
            }
            kind::GC => self.gc_notices.push((p, hdr.context, hdr.seq)),
            kind::COORD_PROPOSE
            | kind::COORD_BOOKMARK
            | kind::COORD_BOOKMARKS_END
            | kind::COORD_WRITTEN
            | kind::COORD_DONE => self.coordination_in.push((p, *hdr)),
            kind::SYNC_UNMATCHED => {
                peer.sync_unmatched_incoming.insert((hdr.context, hdr.seq));
            }
            kind::SYNC_RECEIVED => {
                *peer.sync_received_incoming.entry(hdr.context) = hdr.seq;
            }
            kind::SYNC_STATE_END => {
                let unmatched = std::mem::take(&mut peer.sync_unmatched_incoming);
                let received = std::mem::take(&mut peer.sync_received_incoming);
                // Re-executed synchronous sends waiting for this answer:
                // those the peer matched already are complete.
                let had =
                    |key: &(u32, u64)| key.1 <= received.get(key.0) && !unmatched.contains(key);
                let matched: Vec<u64> = peer
                    .sync_waiting
                    .iter()
                    .filter(|(key, _)| had(key))
                    .map(|(_, token)| *token)
                    .collect();
                peer.sync_waiting.retain(|key, _| !had(key));
                peer.sync_unmatched = Some(unmatched);
                for token in matched {
                    self.complete(ReqId::from_token(token));
                }
            }
            kind::FRAG => {
                let chunk = usize::try_from(hdr.aux0).map_err(|_| corrupt("bad chunk".into()))?;
                let bytes = peer.link.payload(hdr, chunk).map_err(corrupt)?;
                if hdr.flags & flags::FIRST != 0 {
                    if peer.partial.is_some() {
                        return Err(corrupt(
                            "new fragmented message before the last ended".into(),
                        ));
                    }
                    // Channel order makes matching at the first fragment
                    // safe: nothing from this peer can come in between.
                    // The match is reported now, in matching order (a
                    // later receive may match, and be logged, before this
                    // message's last fragment: replay must see this match
                    // first).
                    let dest = match self.matching.match_arrival_entry(&env) {
                        Some(mut posted) => {
                            self.note_match(posted.item, env.source);
                            posted.pin_source(env.source);
                            if let Some(s) = self.slot_mut(posted.item)
                                && s.any_source
                            {
                                s.pinned = true;
                            }
                            PartialDest::Posted(posted)
                        }
                        None => {
                            let mut data = Vec::new();
                            data.try_reserve_exact(env.len).map_err(|_| {
                                corrupt(format!("cannot allocate {} bytes for a message", env.len))
                            })?;
                            PartialDest::Buffered(data)
                        }
                    };
                    let sync = (hdr.flags & flags::SYNC != 0).then_some(hdr.aux1);
                    peer.partial = Some(Partial {
                        env,
                        dest,
                        got: 0,
                        sync,
                    });
                }
                let Some(part) = peer.partial.as_mut() else {
                    return Err(corrupt("fragment without a first fragment".into()));
                };
                if (hdr.context, hdr.seq) != (part.env.context, part.env.seq) {
                    return Err(corrupt(format!(
                        "fragment of message {} on context {} amid message {} on context {}",
                        hdr.seq, hdr.context, part.env.seq, part.env.context
                    )));
                }
                if part.got + bytes.len() > part.env.len {
                    return Err(corrupt("fragments exceed the message length".into()));
                }
                match &mut part.dest {
                    PartialDest::Posted(posted) => self.write_at(posted.item, part.got, bytes),
                    PartialDest::Buffered(data) => data.extend_from_slice(bytes),
                }
                part.got += bytes.len();
                self.finish_partial(p, peer)?;
            }
            other => return Err(corrupt(format!("unknown frame kind {other}"))),
        }
        Ok(())
    }
}

impl Core {
    /// Where the payload of fragment `hdr` (not a first one) from `peer`
    /// goes, if it can be read straight there: into the posted receive its
    /// message matched, which has room for it. `None`: the usual path
    /// (copied from the connection's buffer, checked by `handle_frame`).
    pub(super) fn direct_destination(&self, peer: &Peer, hdr: &FrameHeader) -> Option<*mut u8> {
        let part = peer.partial.as_ref()?;
        let PartialDest::Posted(posted) = &part.dest else {
            return None;
        };
        let chunk = usize::try_from(hdr.aux0).ok()?;
        let fits = hdr.flags & flags::FIRST == 0
            && hdr.seq == part.env.seq
            && hdr.context == part.env.context
            && hdr.msg_len == part.env.len as u64
            && part.got + chunk <= part.env.len;
        let slot = self.slot(posted.item)?;
        if !fits || part.got + chunk > slot.buf.len {
            return None;
        }
        // SAFETY: got + chunk <= the buffer's length: the offset stays
        // inside the receive's buffer.
        let dst = unsafe { slot.buf.ptr.add(part.got) };
        Some(dst)
    }

    /// The payload of fragment `hdr` from peer `p` was read straight into
    /// [`Core::direct_destination`]: account for it as `handle_frame` does.
    pub(super) fn fragment_placed(
        &mut self,
        p: usize,
        peer: &mut Peer,
        hdr: &FrameHeader,
    ) -> Result<()> {
        let Some(part) = peer.partial.as_mut() else {
            return Err(Error::CorruptFrame {
                peer: p,
                reason: "fragment without a first fragment".into(),
            });
        };
        part.got += hdr.aux0 as usize;
        self.finish_partial(p, peer)
    }

    /// Deliver the fragmented message from `p` if all of it arrived.
    fn finish_partial(&mut self, p: usize, peer: &mut Peer) -> Result<()> {
        if peer
            .partial
            .as_ref()
            .is_none_or(|part| part.got < part.env.len)
        {
            return Ok(());
        }
        let Some(part) = peer.partial.take() else {
            return Ok(());
        };
        self.accept_seq(p, part.env.context, part.env.seq)?;
        match part.dest {
            PartialDest::Buffered(data) => self.deliver_owned(part.env, data, part.sync),
            PartialDest::Posted(Posted { item: id, .. }) => {
                // (Its match was reported at the first fragment.)
                let buf_len = self.slot(id).map_or(0, |s| s.buf.len);
                let st = self.recv_status(&part.env, buf_len);
                self.set_status(id, st);
                self.complete(id);
                if let Some(token) = part.sync {
                    self.ack(
                        part.env.source,
                        kind::SYNC_ACK,
                        token,
                        part.env.context,
                        part.env.seq,
                    );
                }
            }
        }
        Ok(())
    }
}

/// Did a remote read fail because the sender's process is gone?
fn sender_died(e: &Error) -> bool {
    matches!(e, Error::RemoteRead { source, .. } if source.raw_os_error() == Some(libc::ESRCH))
}
