//! The sends a crashed process logged after its checkpoint, kept by a
//! restarted process to check its re-execution against.
//!
//! By the commit rule every record in a sender log follows only durable
//! events, so a correct re-execution produces each of them again, byte for
//! byte — except one its destination never took: lost with the crashed
//! process, it binds nothing, and past the last logged event the
//! re-execution may choose otherwise, as the engine lets it once every
//! send its peers hold was made again. (The previous process may have
//! chosen on what no event records: the one-sided layer of the C library
//! serves a window's requests once the engine has matched them, and
//! whether it had is timing.) So the records to a peer beyond what it
//! holds are dropped when the link to it comes up, if the peer's process
//! is past any re-execution of its own
//! ([`vpml_pml::protocol::Protocol::peer_holds`],
//! [`PreviousSends::forget_unheld`]); a peer still re-executing may hold
//! fewer than its dead process took and logged events on, and its records
//! all stay checked. The restarted process reads their envelopes and payload checksums
//! from the log files its previous process left (before it forgets those
//! records to log them anew) and compares every re-executed send with the
//! one of the same destination, context and sequence number (messages are
//! numbered per destination and context, so that threads on separate
//! communicators may interleave differently). A difference means the
//! re-execution diverged — the peer may already hold the old message — and
//! is reported as [`vpml_pml::Error::Diverged`].
//!
//! Where the old log is gone (a lost host, `--sender-log memory`), there is
//! nothing to compare with, and only the logged events are checked.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

use vpml_pml::protocol::OutgoingMessage;
use vpml_sender_log::SenderLog;

/// Envelope and checksum of one logged message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Summary {
    seq: u64,
    tag: i32,
    len: usize,
    crc: u32,
}

/// What the previous process sent after the checkpoint, per destination
/// and context, in sequence order.
#[derive(Debug, Default)]
pub(crate) struct PreviousSends {
    by_stream: BTreeMap<(usize, u32), VecDeque<Summary>>,
    /// Records still to be met by re-executed sends.
    left: usize,
}

impl PreviousSends {
    /// Read the records the previous process logged in `dir` to each
    /// destination `d` on each context `c` with a sequence number above
    /// `after(d, c)`. An absent directory gives an empty set.
    pub(crate) fn read(
        dir: &Path,
        after: impl Fn(u32, u32) -> u64,
    ) -> Result<PreviousSends, vpml_sender_log::Error> {
        let mut prev = PreviousSends::default();
        if !has_segments(dir) {
            return Ok(prev);
        }
        let log = SenderLog::open_read_only(dir)?;
        for dest in log.destinations() {
            for ctx in log.contexts_to(dest) {
                let q: VecDeque<Summary> = log
                    .iter_from(dest, ctx, after(dest, ctx) + 1)
                    .map(|r| {
                        r.map(|r| Summary {
                            seq: r.header.seq,
                            tag: r.header.tag,
                            len: r.payload.len(),
                            crc: vpml_sender_log::crc32c(r.payload),
                        })
                    })
                    .collect::<Result<_, _>>()?;
                if !q.is_empty() {
                    prev.left += q.len();
                    prev.by_stream.insert((dest as usize, ctx), q);
                }
            }
        }
        Ok(prev)
    }

    /// Peer `dest`'s running process, past any re-execution of its own,
    /// holds `held` of this process's messages on each context: forget the
    /// records to it beyond those, which no process of it took an event
    /// on and a re-execution need not make again. (Called once per peer,
    /// when this process links to it; see
    /// [`vpml_pml::protocol::Protocol::peer_holds`].)
    pub(crate) fn forget_unheld(&mut self, dest: usize, held: impl Fn(u32) -> u64) {
        let mut forgotten = 0;
        self.by_stream.retain(|&(d, ctx), q| {
            if d == dest {
                let before = q.len();
                q.retain(|s| s.seq <= held(ctx));
                forgotten += before - q.len();
            }
            !q.is_empty()
        });
        self.left -= forgotten;
    }

    /// True once every previous record was met (or none existed).
    pub(crate) fn is_done(&self) -> bool {
        self.left == 0
    }

    /// The first previous record no re-executed send has met, if any
    /// (its destination and sequence number, in words).
    pub(crate) fn first_unmet(&self) -> Option<String> {
        self.by_stream
            .iter()
            .find_map(|(&(d, c), q)| q.front().map(|s| (d, c, s)))
            .map(|(d, c, s)| {
                format!(
                    "message #{} to rank {d} on context {c} (tag {}, {} bytes, and {} more)",
                    s.seq,
                    s.tag,
                    s.len,
                    self.left - 1
                )
            })
    }

    /// Check a re-executed send against the previous process's record of
    /// the same destination, context and sequence number, if there is
    /// one. `Err` says what differs.
    pub(crate) fn check(&mut self, msg: &OutgoingMessage<'_>) -> Result<(), String> {
        let Some(q) = self.by_stream.get_mut(&(msg.dest, msg.context)) else {
            return Ok(());
        };
        // Records below this number were freed or never re-sent: nothing
        // to compare.
        while q.front().is_some_and(|s| s.seq < msg.seq) {
            q.pop_front();
            self.left -= 1;
        }
        let Some(&then) = q.front().filter(|s| s.seq == msg.seq) else {
            return Ok(());
        };
        q.pop_front();
        self.left -= 1;
        if then.tag == msg.tag
            && then.len == msg.payload.len()
            && then.crc == vpml_sender_log::crc32c(msg.payload)
        {
            return Ok(());
        }
        Err(format!(
            "re-executed send #{} to rank {} on context {} (call {}): logged tag {}, {} bytes, checksum {:08x}; now tag {}, {} bytes, checksum {:08x}",
            msg.seq,
            msg.dest,
            msg.context,
            msg.call,
            then.tag,
            then.len,
            then.crc,
            msg.tag,
            msg.payload.len(),
            vpml_sender_log::crc32c(msg.payload)
        ))
    }
}

fn has_segments(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("seg-"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vpml_pml::protocol::CallId;
    use vpml_sender_log::RecordHeader;

    fn msg(dest: usize, seq: u64, tag: i32, payload: &[u8]) -> OutgoingMessage<'_> {
        OutgoingMessage {
            call: CallId::new(0, 9),
            dest,
            context: 0,
            tag,
            seq,
            payload,
            synchronous: false,
            from_copy: false,
        }
    }

    /// A sender log in a fresh directory holding, for each (destination,
    /// sequence number), a message of tag 7 on context 0 of `len` bytes
    /// that are all the sequence number.
    fn log_of(records: &[(u32, u64)], len: usize) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let mut log = SenderLog::create(dir.path(), 0, 1 << 16).unwrap();
        for &(dest, seq) in records {
            let h = RecordHeader {
                dest,
                context: 0,
                tag: 7,
                seq,
            };
            log.append(h, &vec![seq as u8; len]).unwrap();
        }
        dir
    }

    #[test]
    fn re_executed_sends_are_compared_with_the_previous_records() {
        let dir = log_of(&[(1, 1), (1, 2), (1, 3), (1, 4)], 10);
        // Records after the checkpoint's send #2.
        let mut prev = PreviousSends::read(dir.path(), |_, _| 2).unwrap();
        assert!(!prev.is_done());
        assert!(prev.first_unmet().unwrap().contains("#3 to rank 1"));
        assert!(prev.check(&msg(1, 3, 7, &[3; 10])).is_ok());
        let err = prev.check(&msg(1, 4, 7, &[5; 10])).unwrap_err();
        assert!(err.contains("send #4 to rank 1"), "{err}");
        assert!(prev.is_done());
        assert_eq!(prev.first_unmet(), None);
        // Past the previous records, and to other ranks: nothing to compare.
        assert!(prev.check(&msg(1, 5, 1, &[])).is_ok());
        assert!(prev.check(&msg(3, 1, 1, &[])).is_ok());
        let none = PreviousSends::read(&dir.path().join("absent"), |_, _| 0).unwrap();
        assert!(none.is_done());
    }

    #[test]
    fn records_no_running_process_holds_bind_nothing() {
        let dir = log_of(&[(1, 1), (1, 2), (1, 3), (2, 1), (2, 2)], 4);
        let mut prev = PreviousSends::read(dir.path(), |_, _| 0).unwrap();
        // Rank 1 holds the first message only; rank 2 holds none.
        prev.forget_unheld(1, |_| 1);
        prev.forget_unheld(2, |_| 0);
        assert!(!prev.is_done());
        let unmet = prev.first_unmet().unwrap();
        assert!(
            unmet.contains("#1 to rank 1") && unmet.ends_with("and 0 more)"),
            "{unmet}"
        );
        // What rank 1 holds stays checked ...
        assert!(prev.check(&msg(1, 1, 8, &[1; 4])).is_err());
        assert!(prev.is_done());
        // ... what nobody holds may differ.
        assert!(prev.check(&msg(1, 2, 9, &[])).is_ok());
        assert!(prev.check(&msg(2, 1, 9, &[])).is_ok());
        assert_eq!(prev.first_unmet(), None);
    }
}
