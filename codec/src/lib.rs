//! # vpml-codec — the one way vpml turns bytes into numbers and back
//!
//! The binary formats of vpml's protocol layers — the event loggers'
//! frames and stored records, the engine's checkpoint state, the
//! pessimist's checkpoint files and their off-host copies — are written
//! with the `put_*` functions here and read with one [`Reader`]: a cursor over untrusted bytes whose
//! every read checks what is left and fails with an [`enum@Error`] naming the
//! structure, never a panic, and whose counts are checked against the
//! bytes that remain before anything is allocated for them. All integers
//! are little-endian.
//!
//! [`CallId`], the identifier of an API call, lives here because the
//! engine, the protocols and the event loggers all write it.
//!
//! (The sender log's record and segment headers and the shared-memory
//! frames are fixed layouts read in place, on the hot path; the
//! launcher's agent protocol has its own length-prefixed frames.)
//!
//! Why not rkyv, which the design named: these formats are small headers
//! and length-prefixed arrays, read from sockets and files that a crash or
//! an attacker may have cut or changed, at arbitrary alignments (socket
//! buffers, mapped segments). rkyv's zero-copy access needs aligned
//! buffers and a validation pass (bytecheck) before any field is touched,
//! its archived layout follows its own version and features rather than a
//! format we document and version ourselves, and none of these formats is
//! on a path where decoding costs: a reader is a few bounds checks per
//! field.

use thiserror::Error;

mod call_id;

pub use call_id::{CallId, put_call_id};

/// Why bytes could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// The bytes end before the structure does.
    #[error("{what} is truncated: {need} more bytes needed")]
    Truncated {
        /// The structure being read.
        what: &'static str,
        /// How many more bytes it needed.
        need: usize,
    },
    /// The bytes are there but do not make sense.
    #[error("malformed {what}: {why}")]
    Malformed {
        /// The structure being read.
        what: &'static str,
        /// What is wrong.
        why: String,
    },
}

/// A cursor over untrusted bytes (see the crate docs).
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// Reads `buf`; `what` names the structure in error messages.
    pub fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, pos: 0, what }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Current offset from the start.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The bytes not yet read (the reader is then done with them).
    pub fn rest(&mut self) -> &'a [u8] {
        let out = &self.buf[self.pos..];
        self.pos = self.buf.len();
        out
    }

    /// An error about the structure being read.
    pub fn malformed(&self, why: impl Into<String>) -> Error {
        Error::Malformed {
            what: self.what,
            why: why.into(),
        }
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if n > self.remaining() {
            return Err(Error::Truncated {
                what: self.what,
                need: n - self.remaining(),
            });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// The next `N` bytes, as an array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    /// A byte.
    pub fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.array::<1>()?[0])
    }

    /// A little-endian u16.
    pub fn u16(&mut self) -> Result<u16, Error> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    /// A little-endian u32.
    pub fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A little-endian i32.
    pub fn i32(&mut self) -> Result<i32, Error> {
        Ok(i32::from_le_bytes(self.array()?))
    }

    /// A little-endian u64.
    pub fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A byte that must be 0 or 1.
    pub fn bool(&mut self) -> Result<bool, Error> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(self.malformed(format!("boolean byte is {b}, not 0 or 1"))),
        }
    }

    /// A u64 count of items of at least `min_item` bytes each (0 counts
    /// as 1), checked against what is left, so that a damaged count cannot
    /// make the caller allocate wildly.
    pub fn count(&mut self, min_item: usize) -> Result<usize, Error> {
        let n = self.u64()?;
        if n.saturating_mul(min_item.max(1) as u64) > self.remaining() as u64 {
            return Err(self.malformed(format!(
                "a count of {n} exceeds the {} bytes left",
                self.remaining()
            )));
        }
        usize::try_from(n).map_err(|_| self.malformed(format!("a count of {n}")))
    }

    /// A string of at most `max` bytes prefixed by its u16 length.
    pub fn string(&mut self, max: usize) -> Result<String, Error> {
        let len = usize::from(self.u16()?);
        if len > max {
            return Err(self.malformed(format!("string of {len} bytes exceeds {max}")));
        }
        let raw = self.bytes(len)?;
        String::from_utf8(raw.to_vec()).map_err(|_| self.malformed("string is not UTF-8"))
    }

    /// Fails unless every byte was consumed.
    pub fn finish(&self) -> Result<(), Error> {
        if self.remaining() != 0 {
            return Err(self.malformed(format!("{} trailing bytes", self.remaining())));
        }
        Ok(())
    }
}

/// Append a little-endian u16.
pub fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Append a little-endian u32.
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Append a little-endian i32.
pub fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Append a little-endian u64.
pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Append a string with a u16 length prefix; a longer string is cut at a
/// character boundary below 64 KiB, so what is written always reads back.
pub fn put_string(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(usize::from(u16::MAX));
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    // `end` ≤ u16::MAX by construction.
    put_u16(out, end as u16);
    out.extend_from_slice(&s.as_bytes()[..end]);
}

/// Append bytes with a u64 length prefix (read back with
/// [`Reader::count`] and [`Reader::bytes`]).
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back() {
        let mut b = Vec::new();
        put_u16(&mut b, 7);
        put_u32(&mut b, 0xdead_beef);
        put_i32(&mut b, -5);
        put_u64(&mut b, u64::MAX);
        put_string(&mut b, "héllo");
        put_bytes(&mut b, &[1, 2, 3]);
        b.push(1);
        let mut r = Reader::new(&b, "test");
        assert_eq!(r.u16(), Ok(7));
        assert_eq!(r.u32(), Ok(0xdead_beef));
        assert_eq!(r.i32(), Ok(-5));
        assert_eq!(r.u64(), Ok(u64::MAX));
        assert_eq!(r.string(16).as_deref(), Ok("héllo"));
        let n = r.count(1).unwrap();
        assert_eq!(r.bytes(n), Ok(&[1u8, 2, 3][..]));
        assert_eq!(r.bool(), Ok(true));
        assert_eq!(r.finish(), Ok(()));
    }

    #[test]
    fn short_or_damaged_bytes_are_errors_naming_the_structure() {
        let mut r = Reader::new(&[1, 2, 3], "header");
        assert_eq!(
            r.u32(),
            Err(Error::Truncated {
                what: "header",
                need: 1
            })
        );
        assert_eq!(
            r.u32().unwrap_err().to_string(),
            "header is truncated: 1 more bytes needed"
        );
        let mut huge = Vec::new();
        put_u64(&mut huge, u64::MAX / 2);
        let err = Reader::new(&huge, "list").count(8).unwrap_err();
        assert!(
            err.to_string().starts_with("malformed list: a count of"),
            "{err}"
        );
        assert!(Reader::new(&[2], "flag").bool().is_err());
        assert!(Reader::new(&[0, 0], "rest").finish().is_err());
    }

    #[test]
    fn a_long_string_is_cut_at_a_character_boundary_and_reads_back() {
        let s = "é".repeat(40_000);
        let mut b = Vec::new();
        put_string(&mut b, &s);
        let back = Reader::new(&b, "s").string(usize::MAX).unwrap();
        assert!(back.len() <= usize::from(u16::MAX) && s.starts_with(&back));
    }
}
