//! Shared-memory transport between ranks on one host.
//!
//! Every rank owns a *mailbox*: one anonymous shared-memory file (memfd)
//! created by the launcher and inherited by every rank of the host. A
//! mailbox holds a control page (the rank's doorbell, whether it sleeps
//! with membarrier, and its pid) and one
//! single-producer/single-consumer ring per sender. Rank `s` writes frames
//! into ring `s` of rank `d`'s mailbox; only `d` reads them.
//!
//! Small messages travel inside the ring (eager). Large ones are announced
//! by a ready-to-send frame and copied by the receiver straight out of the
//! sender's memory with one `process_vm_readv` call (single copy); where
//! the kernel forbids that, they travel as a pipelined sequence of fragments
//! through the ring. An idle rank spins briefly, then sleeps on its doorbell
//! (a futex in its control page) that writers ring after publishing.
//!
//! Because mailboxes are memfds, nothing is ever created under `/dev/shm`:
//! the memory disappears with the last process that maps it, however the
//! job ends.

pub(crate) mod doorbell_fence;
pub(crate) mod futex;
pub(crate) mod mailbox;
pub(crate) mod ring;
pub mod window_files;

pub use mailbox::{Doorbells, create_mailbox, mailbox_len};
