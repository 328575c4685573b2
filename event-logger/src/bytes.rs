//! Bytes and numbers: vpml's one codec (`vpml-codec`: a bounds-checked
//! reader, the one place where untrusted bytes are turned into numbers,
//! and its writers), and the CRC-32C of frames and records.

pub(crate) use vpml_codec::{Reader, put_i32, put_string, put_u16, put_u32, put_u64};

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
