//! Little-endian reading and writing with bounds checks: the one place where
//! untrusted bytes are turned into numbers.

use crate::wire::WireError;

/// A cursor over untrusted bytes. Every read checks the remaining length and
/// fails with [`WireError::Truncated`] instead of panicking.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// Reads `buf`; `what` names the structure in error messages.
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader { buf, pos: 0, what }
    }

    /// Bytes not yet read.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Current offset from the start.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// The next `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if n > self.remaining() {
            return Err(WireError::Truncated {
                what: self.what,
                need: n - self.remaining(),
            });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.array::<1>()?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, WireError> {
        Ok(i32::from_le_bytes(self.array()?))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A byte that must be 0 or 1.
    pub(crate) fn bool(&mut self) -> Result<bool, WireError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(WireError::malformed(
                self.what,
                format!("boolean byte is {b}, not 0 or 1"),
            )),
        }
    }

    /// A string of at most `max` bytes prefixed by its u16 length.
    pub(crate) fn string(&mut self, max: usize) -> Result<String, WireError> {
        let len = usize::from(self.u16()?);
        if len > max {
            return Err(WireError::malformed(
                self.what,
                format!("string of {len} bytes exceeds {max}"),
            ));
        }
        let raw = self.bytes(len)?;
        String::from_utf8(raw.to_vec())
            .map_err(|_| WireError::malformed(self.what, "string is not UTF-8"))
    }

    /// Fails unless every byte was consumed.
    pub(crate) fn finish(&self) -> Result<(), WireError> {
        if self.remaining() != 0 {
            return Err(WireError::malformed(
                self.what,
                format!("{} trailing bytes", self.remaining()),
            ));
        }
        Ok(())
    }
}

pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A string with a u16 length prefix; callers keep strings under 64 KiB
/// (longer ones are cut at a character boundary so the frame stays valid).
pub(crate) fn put_string(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(usize::from(u16::MAX));
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    // `end` ≤ u16::MAX by construction.
    put_u16(out, end as u16);
    out.extend_from_slice(&s.as_bytes()[..end]);
}

/// CRC-32C (Castagnoli) of `parts` one after the other (the workspace's
/// one CRC crate, `crc-fast`).
pub(crate) fn crc32c(parts: &[&[u8]]) -> u32 {
    let mut digest = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    for p in parts {
        digest.update(p);
    }
    digest.finalize() as u32
}

#[cfg(test)]
mod crc_tests {
    #[test]
    fn crc32c_is_castagnoli_over_the_parts_in_order() {
        // The standard check value of CRC-32C: stored logs and frames of
        // earlier versions keep verifying.
        assert_eq!(super::crc32c(&[b"123456789"]), 0xE306_9283);
        assert_eq!(super::crc32c(&[b"1234", b"", b"56789"]), 0xE306_9283);
    }
}
