//! # vpml-sender-log — the sender-based message log
//!
//! Under pessimistic sender-based message logging every message a rank sends
//! stays in the sender's memory until the receiver no longer needs it, so a
//! crashed receiver can be sent its messages again. This crate keeps that
//! log in files of the rank's log directory, mapped `MAP_SHARED`
//! ([`SenderLog::create`], vpml's default: they survive the process and
//! can be kept after the job for replay) or in anonymous memory
//! ([`SenderLog::create_in_memory`], huge pages where the kernel gives
//! them). Either way freed segments are reused, so a log that checkpoints
//! garbage-collect stops costing page faults and kernel zeroing once it
//! has reached its working size. A memory log dies with its process; [`SenderLog::save_kept`] writes its
//! kept records to one file (at a checkpoint: peers may need them after a
//! restart) and [`SenderLog::restore`] starts a new log from such a file.
//!
//! A log that never checkpoints only grows. [`SenderLog::bound`] caps the
//! memory it holds: every full segment is copied to a file of a spill
//! directory (on a disk) by a thread of its own, and once the copy is
//! complete the segment's memory takes new records — warm memory, reused,
//! instead of fresh memory the kernel must zero for every byte. The
//! records on disk are read back (mapped) only to re-send them to a
//! restarted peer, indexed by one run per destination and segment. Memory
//! grows past the few segments in use only while sends outpace the disk,
//! up to the limit; then a new segment waits for a copy, and when nothing
//! can move (a full disk) the append fails with [`Error::Full`], naming
//! the limit and the directory. Memory the engine still sends from
//! ([`SenderLog::lend`]) is not reused until it is returned.
//!
//! For a file log:
//!
//! * appending a record is a memory copy into the current segment (a send
//!   completes once its payload is in the log), and the bytes survive the
//!   process (they are in the page cache and the file);
//! * a segment is a sparse file whose memory is taken as records reach it
//!   ([`SenderLog::reserve`] populates pages a step ahead, and
//!   [`SenderLog::warm_up`] further ahead in idle moments), so no append
//!   waits for a whole segment to be zeroed, and a full file system is an
//!   error before the message leaves, never a `SIGBUS` during the copy;
//! * another process can map the same files: the replay debugger reads a
//!   finished job's logs, and a restarted rank reopens its own;
//! * records are indexed by (destination, channel sequence number),
//!   iterated from a sequence number for re-sending, and freed per
//!   destination up to a sequence number; a segment whose records are all
//!   freed is set aside (renamed out of the log) and reused as the next
//!   segment, so a log that is garbage-collected by checkpoints stops
//!   costing page faults once it has reached its working size. Memory
//!   already taken is used before more is: a record that would reach past
//!   the current segment's taken memory starts a spare segment that has
//!   memory for it, leaving the rest of the current one untouched.
//!
//! ## On-disk format (version 1)
//!
//! A log is the files `seg-<index>.vlog` of one directory. Each segment starts
//! with a 64-byte header: magic `VPMLSLOG`, version (u32), rank (u32), segment
//! index (u64), capacity in bytes (u64), CRC-32C of the first 60 bytes at
//! offset 60. Records follow at 64-byte boundaries: a 48-byte header — magic
//! `0x564C5243` (u32), destination (u32), context (u32), tag (i32), channel
//! sequence (u64), payload length (u64), payload CRC-32C (u32), CRC-32C of
//! the header's first 40 bytes (u32) — then the payload. All integers are
//! little-endian. A zero magic ends a segment. An append first zeroes the
//! magic after its record, then writes the payload, then the header, so a
//! crash mid-append leaves at most a torn last record, which readers
//! ignore, and never exposes the old bytes of a reused segment. Memory for a
//! record is taken before it is written, so a full disk is an error from
//! [`SenderLog::reserve`], never a fault while copying.

mod append;
mod checksum;
mod error;
mod format;
mod gc;
mod index;
mod log;
mod memory;
mod pool;
mod read;
mod save;
mod segment;
mod spill;
#[cfg(test)]
mod spill_tests;
mod spill_writer;
#[cfg(test)]
mod tests;

pub use checksum::crc32c;
pub use error::{Error, Result};
pub use format::{Location, RECORD_HEADER, Record, RecordHeader, segment_path};
pub use index::MAX_DESTINATIONS;
pub use log::SenderLog;
pub use memory::POPULATE_AHEAD;
pub use pool::SPILL_DIR;
pub use segment::DEFAULT_SEGMENT_SIZE;
