//! What the engine needs to survive the crash of a rank (with a protocol
//! such as `pessimist`): the job page shared with the launcher, the
//! engine's own part of a checkpoint, and the handshake of the connections
//! a restarted rank makes.
//!
//! * **Job page.** A small shared-memory file (memfd) the launcher creates
//!   and every rank maps: per rank its current incarnation and the *start
//!   epoch* of that incarnation (a counter the launcher bumps at every
//!   restart), plus the epoch itself, an "every rank finalized" flag, and,
//!   for coordinated checkpointing, the count of checkpoints asked for
//!   from outside, how many of them were taken, and the newest complete
//!   global checkpoint.
//!   A rank notices a restart with one load of the epoch per progress pass.
//! * **Who connects to whom.** Between two processes, the one started later
//!   (larger start epoch) connects to the other; the earlier one accepts.
//!   So a restarted rank connects to everybody, and a rank restarted later
//!   still connects to it: no two connections ever cross.
//! * **Handshake.** A hello line (`hello_line`: token, rank, incarnation,
//!   single copy, host) and a line of counts, answered by `OK
//!   <incarnation> <single-copy> <host> <settled>` and a line of counts
//!   (`settled`: the answering process is past any re-execution of its
//!   own and no receive of it is bound to the connecting rank by its log,
//!   `Engine::settled_for`; the restarted one may then forget what its
//!   previous process sent that the answering one does not hold).
//!   Each side tells how many messages of the other it has *fully*
//!   received, and each side then re-sends from its sender log everything
//!   after that, in order. A restarted rank may run on another host than
//!   its predecessor (a spare): the hosts in the handshake decide the
//!   channel. Between ranks of one host the link then goes
//!   back onto the pair's shared-memory rings: the accepting side clears
//!   both rings before its reply (its own link to the restarted rank is
//!   down, and the new process touches them only after the reply), and
//!   large messages use single-copy reads if both sides allow them.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::error::Result;
use crate::lanes::LaneMap;

const HEADER: usize = 64;
const PER_RANK: usize = 16;

/// Size in bytes of the job page of a `size`-rank job.
fn page_len(size: usize) -> usize {
    (HEADER + size * PER_RANK).next_multiple_of(4096)
}

/// The job page (see the module docs), mapped read-write.
pub struct JobPage {
    base: *mut u8,
    len: usize,
    size: usize,
}

// SAFETY: the page holds only atomics; the mapping lives as long as the value.
unsafe impl Send for JobPage {}
// SAFETY: as above — every access goes through an atomic.
unsafe impl Sync for JobPage {}

impl JobPage {
    /// Create a zeroed job page for `size` ranks as an inheritable memfd
    /// (the launcher's side).
    pub fn create(size: usize) -> std::io::Result<(OwnedFd, JobPage)> {
        // No CLOEXEC, so exec'd ranks inherit it.
        let fd = rustix::fs::memfd_create(c"vpml-job-page", rustix::fs::MemfdFlags::empty())?;
        rustix::fs::ftruncate(&fd, page_len(size) as u64)?;
        let page = JobPage::map_fd(fd.as_fd(), size).map_err(std::io::Error::other)?;
        Ok((fd, page))
    }

    /// Map the job page behind `fd` (a rank's side: inherited from the
    /// launcher, open while this runs).
    pub fn map(fd: RawFd, size: usize) -> Result<JobPage> {
        // SAFETY: the launcher passed `fd` open for this mapping and the
        // caller keeps it open during the call.
        let fd = unsafe { crate::shm::mailbox::borrow_inherited(fd, "job page") }?;
        JobPage::map_fd(fd, size)
    }

    fn map_fd(fd: BorrowedFd<'_>, size: usize) -> Result<JobPage> {
        let len = page_len(size);
        let p = crate::shm::mailbox::map_shared(fd, len, "job page")?;
        Ok(JobPage { base: p, len, size })
    }

    fn word(&self, offset: usize) -> &AtomicU32 {
        assert!(offset + 4 <= self.len && offset.is_multiple_of(4));
        // SAFETY: in bounds (asserted) and aligned, inside a live shared
        // mapping that only ever holds atomics.
        unsafe { &*(self.base.add(offset) as *const AtomicU32) }
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The restart counter: changes whenever some rank is restarted.
    pub fn epoch(&self) -> u32 {
        self.word(0).load(Ordering::Acquire)
    }

    /// True once every rank has finalized (ranks then may exit: nobody can
    /// need a resend any more).
    pub fn all_finalized(&self) -> bool {
        self.word(4).load(Ordering::Acquire) != 0
    }

    /// Current incarnation of `rank` (0 at first start).
    pub fn incarnation(&self, rank: usize) -> u32 {
        self.word(HEADER + rank * PER_RANK).load(Ordering::Acquire)
    }

    /// Epoch at which the current incarnation of `rank` was started.
    pub fn start_epoch(&self, rank: usize) -> u32 {
        self.word(HEADER + rank * PER_RANK + 4)
            .load(Ordering::Acquire)
    }

    /// The launcher restarts `rank`: the next incarnation, started now.
    /// Returns the new incarnation.
    pub fn restart(&self, rank: usize) -> u32 {
        let epoch = self.word(0).load(Ordering::Relaxed) + 1;
        let inc = self.word(HEADER + rank * PER_RANK).load(Ordering::Relaxed) + 1;
        self.word(HEADER + rank * PER_RANK)
            .store(inc, Ordering::Release);
        self.word(HEADER + rank * PER_RANK + 4)
            .store(epoch, Ordering::Release);
        // Last, so a rank that sees the new epoch sees the rank's entry.
        self.word(0).store(epoch, Ordering::Release);
        inc
    }

    /// The launcher saw every rank finalize.
    pub fn set_all_finalized(&self) {
        self.word(4).store(1, Ordering::Release);
    }

    /// Global checkpoints asked for from outside the program so far
    /// (coordinated checkpointing: `vpml checkpoint`, SIGUSR1 to the
    /// launcher, `--checkpoint-interval`).
    pub fn checkpoint_requests(&self) -> u32 {
        self.word(8).load(Ordering::Acquire)
    }

    /// The launcher asks for one more global checkpoint: the count with
    /// it.
    pub fn request_checkpoint(&self) -> u32 {
        self.word(8).fetch_add(1, Ordering::AcqRel).wrapping_add(1)
    }

    /// At least `n` requests were made (a job across hosts: each host's
    /// page follows the launcher's count).
    pub fn raise_checkpoint_requests(&self, n: u32) {
        self.word(8).fetch_max(n, Ordering::AcqRel);
    }

    /// How many of the [`JobPage::checkpoint_requests`] a complete
    /// global checkpoint answered: more requests than this are waiting.
    pub fn checkpoint_requests_taken(&self) -> u32 {
        self.word(16).load(Ordering::Acquire)
    }

    /// A complete global checkpoint answered the first `n` requests.
    pub fn set_checkpoint_requests_taken(&self, n: u32) {
        self.word(16).fetch_max(n, Ordering::AcqRel);
    }

    /// The newest complete global checkpoint (0: none yet).
    pub fn global_checkpoint(&self) -> u32 {
        self.word(12).load(Ordering::Acquire)
    }

    /// Global checkpoint `index` is complete (every rank wrote its part).
    pub fn set_global_checkpoint(&self, index: u32) {
        self.word(12).fetch_max(index, Ordering::AcqRel);
    }

    /// The launcher restarts every rank from global checkpoint `index`:
    /// the newer ones are gone, and their numbers will be taken again.
    pub fn reset_global_checkpoint(&self, index: u32) {
        self.word(12).store(index, Ordering::Release);
    }
}

impl Drop for JobPage {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `map` mapped (a failure would only
        // leave the mapping in place).
        let _ = unsafe { rustix::mm::munmap(self.base.cast(), self.len) };
    }
}

/// The engine's part of a checkpoint: everything a restarted process needs
/// to continue as if it had never stopped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineSnapshot {
    /// Number of the last call of each lane that has had one, by lane.
    pub last_calls: Vec<(u32, u64)>,
    /// Next communicator context id.
    pub next_context: u32,
    /// Duplicates of the world made without agreement so far (see
    /// `Comm::idup`).
    pub world_idups: u32,
    /// Messages sent to each rank, per context.
    pub send_seq: Vec<LaneMap<u64>>,
    /// Messages fully received from each rank, per context.
    pub recv_seq: Vec<LaneMap<u64>>,
    /// Messages received but not yet matched, in arrival order.
    pub unexpected: Vec<SavedMessage>,
    /// Checkpoint calls the program made before the one this checkpoint
    /// was taken at (coordinated checkpointing: a restarted process's
    /// next call is this plus one).
    pub checkpoint_call: u64,
    /// The job-wide number of this checkpoint under coordinated
    /// checkpointing (1 for the first); 0 otherwise.
    pub global_index: u64,
}

/// An unmatched message kept in a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedMessage {
    /// Sender.
    pub source: usize,
    /// Tag.
    pub tag: i32,
    /// Communicator context.
    pub context: u32,
    /// Sequence number of the message on its context (per ordered pair).
    pub seq: u64,
    /// Token of a synchronous sender waiting for the match (0: none).
    pub sync_token: u64,
    /// The bytes.
    pub data: Vec<u8>,
}

impl EngineSnapshot {
    /// Serialise (vpml's codec: little-endian, counts before lists).
    pub fn encode(&self) -> Vec<u8> {
        use vpml_codec::{put_bytes, put_i32, put_u32, put_u64};
        let mut b = Vec::new();
        put_u64(&mut b, self.last_calls.len() as u64);
        for &(lane, n) in &self.last_calls {
            put_u32(&mut b, lane);
            put_u64(&mut b, n);
        }
        put_u32(&mut b, self.next_context);
        put_u32(&mut b, self.world_idups);
        put_u64(&mut b, self.send_seq.len() as u64);
        for (s, r) in self.send_seq.iter().zip(&self.recv_seq) {
            put_counts(&mut b, s);
            put_counts(&mut b, r);
        }
        put_u64(&mut b, self.unexpected.len() as u64);
        for m in &self.unexpected {
            put_u64(&mut b, m.source as u64);
            put_i32(&mut b, m.tag);
            put_u32(&mut b, m.context);
            put_u64(&mut b, m.seq);
            put_u64(&mut b, m.sync_token);
            put_bytes(&mut b, &m.data);
        }
        put_u64(&mut b, self.checkpoint_call);
        put_u64(&mut b, self.global_index);
        b
    }

    /// Parse what [`EngineSnapshot::encode`] wrote; returns the snapshot
    /// and the bytes that follow it.
    pub fn decode(b: &[u8]) -> std::result::Result<(EngineSnapshot, &[u8]), String> {
        Self::read(&mut vpml_codec::Reader::new(b, "engine snapshot")).map_err(|e| e.to_string())
    }

    fn read<'a>(
        r: &mut vpml_codec::Reader<'a>,
    ) -> std::result::Result<(EngineSnapshot, &'a [u8]), vpml_codec::Error> {
        let lanes = r.count(12)?;
        let mut last_calls = Vec::with_capacity(lanes);
        for _ in 0..lanes {
            let lane = r.u32()?;
            last_calls.push((lane, r.u64()?));
        }
        let next_context = r.u32()?;
        let world_idups = r.u32()?;
        let n = r.count(16)?;
        let mut send_seq = Vec::with_capacity(n);
        let mut recv_seq = Vec::with_capacity(n);
        for _ in 0..n {
            send_seq.push(read_counts(r)?);
            recv_seq.push(read_counts(r)?);
        }
        let m = r.count(40)?;
        let mut unexpected = Vec::with_capacity(m);
        for _ in 0..m {
            let source = r.u64()?;
            let source = usize::try_from(source)
                .map_err(|_| r.malformed(format!("source {source} out of range")))?;
            let tag = r.i32()?;
            let context = r.u32()?;
            let seq = r.u64()?;
            let sync_token = r.u64()?;
            let len = r.count(1)?;
            let data = r.bytes(len)?.to_vec();
            unexpected.push(SavedMessage {
                source,
                tag,
                context,
                seq,
                sync_token,
                data,
            });
        }
        let checkpoint_call = r.u64()?;
        let global_index = r.u64()?;
        Ok((
            EngineSnapshot {
                last_calls,
                next_context,
                world_idups,
                send_seq,
                recv_seq,
                unexpected,
                checkpoint_call,
                global_index,
            },
            r.rest(),
        ))
    }
}

/// Append per-context counts: how many, then (context, count) pairs.
fn put_counts(b: &mut Vec<u8>, counts: &LaneMap<u64>) {
    let pairs: Vec<(u32, u64)> = counts.iter().collect();
    vpml_codec::put_u64(b, pairs.len() as u64);
    for (c, n) in pairs {
        vpml_codec::put_u32(b, c);
        vpml_codec::put_u64(b, n);
    }
}

/// Read what [`put_counts`] wrote.
fn read_counts(
    r: &mut vpml_codec::Reader<'_>,
) -> std::result::Result<LaneMap<u64>, vpml_codec::Error> {
    let n = r.count(12)?;
    let mut pairs = Vec::with_capacity(n);
    for _ in 0..n {
        let c = r.u32()?;
        pairs.push((c, r.u64()?));
    }
    Ok(LaneMap::from_pairs(pairs))
}

/// Per-context message counts as a handshake writes them: `-` for none,
/// else `context:count` pairs joined by commas.
pub(crate) fn format_counts(counts: &LaneMap<u64>) -> String {
    let pairs: Vec<String> = counts
        .iter()
        .filter(|&(_, n)| n > 0)
        .map(|(c, n)| format!("{c}:{n}"))
        .collect();
    if pairs.is_empty() {
        "-".into()
    } else {
        pairs.join(",")
    }
}

/// Read what [`format_counts`] wrote.
pub(crate) fn parse_counts(s: &str) -> std::result::Result<LaneMap<u64>, String> {
    if s == "-" {
        return Ok(LaneMap::new());
    }
    let mut pairs = Vec::new();
    for pair in s.split(',') {
        let (c, n) = pair.split_once(':').ok_or("bad count")?;
        let c: u32 = c.parse().map_err(|_| "bad context")?;
        let n: u64 = n.parse().map_err(|_| "bad count")?;
        pairs.push((c, n));
    }
    Ok(LaneMap::from_pairs(pairs))
}

/// The connecting side's greeting (followed by a line of
/// [`format_counts`]: the messages of the other side it has received).
pub(crate) fn hello_line(
    token: &str,
    rank: usize,
    incarnation: u32,
    single_copy: bool,
    host: usize,
) -> String {
    format!(
        "VPMLREC2 {token} {rank} {incarnation} {} {host}\n",
        u8::from(single_copy)
    )
}

/// The greeting of a restarted process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hello {
    pub rank: usize,
    pub incarnation: u32,
    /// It can read our memory (single copy).
    pub single_copy: bool,
    /// The host it runs on.
    pub host: usize,
}

/// Parse and check a greeting.
pub(crate) fn parse_hello(
    line: &str,
    token: &str,
    size: usize,
) -> std::result::Result<Hello, String> {
    let mut parts = line.split(' ');
    if parts.next() != Some("VPMLREC2") {
        return Err("not a vpml recovery connection".into());
    }
    if parts.next() != Some(token) {
        return Err("wrong job token".into());
    }
    let rank: usize = parts
        .next()
        .and_then(|r| r.parse().ok())
        .filter(|&r| r < size)
        .ok_or("bad rank")?;
    let incarnation: u32 = parts
        .next()
        .and_then(|r| r.parse().ok())
        .ok_or("bad incarnation")?;
    let single_copy = match parts.next() {
        Some("1") => true,
        Some("0") => false,
        _ => return Err("bad single-copy flag".into()),
    };
    let host: usize = parts
        .next()
        .and_then(|r| r.parse().ok())
        .ok_or("bad host")?;
    Ok(Hello {
        rank,
        incarnation,
        single_copy,
        host,
    })
}

/// Longest greeting line, read before the job's token is checked.
pub(crate) const MAX_HELLO: usize = 256;

/// Longest line of counts, read once the other side showed the job's
/// token: room for the counts of a million contexts.
pub(crate) const MAX_COUNTS: usize = 16 << 20;

/// Read one `\n`-terminated line of at most `max` bytes. `alive` is
/// asked every 100 ms whether to keep waiting (the other side may be busy
/// computing; it answers on its next vpml call).
pub(crate) fn read_line(
    s: &mut TcpStream,
    max: usize,
    mut alive: impl FnMut() -> bool,
) -> std::result::Result<String, String> {
    s.set_nonblocking(false).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| e.to_string())?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match s.read(&mut byte) {
            Ok(1) if byte[0] == b'\n' => break,
            Ok(1) => {
                line.push(byte[0]);
                if line.len() > max {
                    return Err("handshake line too long".into());
                }
            }
            Ok(_) => return Err("closed during the handshake".into()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if !alive() {
                    return Err("gave up waiting for the handshake".into());
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("handshake: {e}")),
        }
    }
    s.set_read_timeout(None).map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&line).into_owned())
}

/// Write a whole handshake line.
pub(crate) fn write_line(s: &mut TcpStream, line: &str) -> std::result::Result<(), String> {
    s.set_nonblocking(false).map_err(|e| e.to_string())?;
    s.write_all(line.as_bytes())
        .map_err(|e| format!("handshake: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_round_trip_and_corrupt_ones_are_refused() {
        let s = EngineSnapshot {
            last_calls: vec![(0, 77), (547, 3)],
            next_context: 6,
            world_idups: 3,
            send_seq: vec![
                LaneMap::from_pairs([(0, 1)]),
                LaneMap::new(),
                LaneMap::from_pairs([(0, 3), (547, 9)]),
            ],
            recv_seq: vec![
                LaneMap::from_pairs([(1, 4)]),
                LaneMap::from_pairs([(0, 5)]),
                LaneMap::new(),
            ],
            unexpected: vec![SavedMessage {
                source: 2,
                tag: -1,
                context: 1,
                seq: 6,
                sync_token: 9,
                data: vec![1, 2, 3],
            }],
            checkpoint_call: 12,
            global_index: 4,
        };
        let mut b = s.encode();
        b.extend_from_slice(b"app");
        let (back, rest) = EngineSnapshot::decode(&b).unwrap();
        assert_eq!(back, s);
        assert_eq!(rest, b"app");
        for cut in 0..b.len() - 3 {
            assert!(EngineSnapshot::decode(&b[..cut]).is_err(), "cut at {cut}");
        }
        let mut huge = b.clone();
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(EngineSnapshot::decode(&huge).is_err());
    }

    #[test]
    fn restarts_bump_the_epoch_and_the_incarnation() {
        let (_fd, page) = JobPage::create(3).unwrap();
        assert_eq!((page.epoch(), page.incarnation(1)), (0, 0));
        assert_eq!(page.restart(1), 1);
        assert_eq!(page.restart(2), 1);
        assert_eq!(page.restart(1), 2);
        assert_eq!(page.epoch(), 3);
        assert_eq!(page.start_epoch(1), 3);
        assert_eq!(page.start_epoch(2), 2);
        assert_eq!(page.start_epoch(0), 0);
        assert!(!page.all_finalized());
        page.set_all_finalized();
        assert!(page.all_finalized());
    }

    #[test]
    fn greetings_are_checked() {
        let l = hello_line("tok", 2, 3, true, 1);
        assert_eq!(
            parse_hello(l.trim_end(), "tok", 4),
            Ok(Hello {
                rank: 2,
                incarnation: 3,
                single_copy: true,
                host: 1,
            })
        );
        assert!(parse_hello(l.trim_end(), "other", 4).is_err());
        assert!(parse_hello(l.trim_end(), "tok", 2).is_err());
        assert!(parse_hello("VPMLREC2 tok 1 x 0 0", "tok", 4).is_err());
        assert!(parse_hello("VPMLREC2 tok 1 2 0", "tok", 4).is_err());
        assert!(parse_hello("VPMLREC1 tok 1 2 3 0 0", "tok", 4).is_err());
        let counts = LaneMap::from_pairs([(0, 17), (547, 2)]);
        assert_eq!(parse_counts(&format_counts(&counts)), Ok(counts));
        assert_eq!(parse_counts("-"), Ok(LaneMap::new()));
        for bad in ["", "0:", ":3", "0:x", "0:3,", "99999999999:1", "0:3;1:2"] {
            assert!(parse_counts(bad).is_err(), "{bad:?}");
        }
    }
}
