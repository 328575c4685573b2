//! The outcome of a completed operation.

use crate::error::Error;

/// What a completed receive (or send) reports: source, tag, byte count and
/// an optional error (truncation, cancellation).
#[derive(Debug)]
pub struct Status {
    pub(crate) source: usize,
    pub(crate) tag: i32,
    pub(crate) len: usize,
    /// Boxed: a status is moved around on every completion, an error is
    /// rare.
    pub(crate) error: Option<Box<Error>>,
    pub(crate) cancelled: bool,
    pub(crate) seq: u64,
}

impl Status {
    pub(crate) fn new(source: usize, tag: i32, len: usize, seq: u64) -> Self {
        Status {
            source,
            tag,
            len,
            error: None,
            cancelled: false,
            seq,
        }
    }

    /// What a send of `len` bytes with `tag` to rank `dest` reports
    /// (sequence number 0): the status of a raw send that completed when it
    /// started (`crate::raw::RawRequest::is_complete_send`), which the
    /// engine does not keep. (A binding keeping the status of a raw
    /// receive complete at start makes it again the same way, from the
    /// source.)
    pub fn of_send(dest: usize, tag: i32, len: usize) -> Self {
        Status::new(dest, tag, len, 0)
    }

    /// Rank the message came from (for a send: the rank it went to).
    pub fn source(&self) -> usize {
        self.source
    }
    /// Tag of the message.
    pub fn tag(&self) -> i32 {
        self.tag
    }
    /// The same status under the tag the program gave (for bindings that
    /// carry a message under another tag, as partitioned communication
    /// does).
    pub fn with_tag(mut self, tag: i32) -> Self {
        self.tag = tag;
        self
    }
    /// Number of bytes received (for a truncated message, the bytes stored).
    pub fn len(&self) -> usize {
        self.len
    }
    /// True if no bytes were received.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Number of whole elements of `T` received, or an error if the byte
    /// count is not a multiple of `size_of::<T>()`.
    pub fn count<T>(&self) -> Result<usize, Error> {
        let size = std::mem::size_of::<T>().max(1);
        if self.len.is_multiple_of(size) {
            Ok(self.len / size)
        } else {
            Err(Error::PartialElement {
                bytes: self.len,
                elem_size: size,
            })
        }
    }
    /// The error of this operation, if it failed (e.g. truncation).
    pub fn error(&self) -> Option<&Error> {
        self.error.as_deref()
    }
    /// True if the operation was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }
    /// The sequence number of the message (1, 2, 3, … per ordered pair of
    /// ranks and communicator context; 0 for self-messages, cancelled requests and the
    /// statuses made by [`Status::of_send`]). Message
    /// logging protocols use it to name messages.
    pub fn sequence(&self) -> u64 {
        self.seq
    }
    /// `Ok(self)` if the operation succeeded, otherwise its error.
    pub fn into_result(mut self) -> Result<Status, Error> {
        match self.error.take() {
            Some(e) => Err(*e),
            None => Ok(self),
        }
    }
}
