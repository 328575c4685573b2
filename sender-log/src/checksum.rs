//! CRC-32C, and the one-pass copy of a payload into the log that sums it.

use crate::format::bytes_at;

/// CRC-32C (Castagnoli) of `bytes`, as the log sums payloads (with the
/// workspace's one CRC crate, `crc-fast`, which the event logger's frames
/// and records use too, in parts). `crc-fast` folds with carry-less
/// multiplies where the CPU has them: about twice as fast as the plain
/// `crc32` instruction on a payload of 1 KiB or more. Below
/// `SMALL_CRC` bytes (every record header, small payloads) its ~18 ns
/// of setup is most of the cost, and the instruction itself, inline, is
/// 3-4x faster.
pub fn crc32c(bytes: &[u8]) -> u32 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if bytes.len() < SMALL_CRC && std::arch::is_x86_feature_detected!("sse4.2") {
        let (whole, tail) = bytes.split_at(bytes.len() / 8 * 8);
        let words = whole
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(bytes_at(w, 0)));
        // SAFETY: the CPU has SSE4.2 (checked just above).
        return unsafe { crc32c_sse42(words, tail) };
    }
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
}

/// CRC-32C of `words` as their little-endian bytes (a record header).
pub(crate) fn crc32c_words(words: &[u64]) -> u32 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU has SSE4.2 (checked just above).
        return unsafe { crc32c_sse42(words.iter().copied(), &[]) };
    }
    let mut crc = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    for w in words {
        crc.update(&w.to_le_bytes());
    }
    crc.finalize() as u32
}

/// Below this many bytes, [`crc32c`] runs the `crc32` instruction inline:
/// `crc_fast` folds faster only from here (measured on this machine:
/// 8 ns against 13 ns at 128 B, 24 ns against 35 ns at 384 B, 29 ns
/// against 23 ns at 448 B).
const SMALL_CRC: usize = 448;

/// CRC-32C of `words` (as little-endian bytes) followed by `tail`, with
/// the SSE4.2 `crc32` instruction.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[target_feature(enable = "sse4.2")]
fn crc32c_sse42(words: impl Iterator<Item = u64>, tail: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u8, _mm_crc32_u64};
    let mut crc = u64::from(u32::MAX);
    for w in words {
        crc = _mm_crc32_u64(crc, w);
    }
    let mut crc = crc as u32;
    for &b in tail {
        crc = _mm_crc32_u8(crc, b);
    }
    !crc
}

/// Payloads at least this long are written to the log with streaming
/// (non-temporal) stores: nothing reads a record soon after it is written
/// (on shared memory the receiver reads the sender's buffer, not the log),
/// and writing around the cache skips reading each destination line
/// first. From a cached source into the log's uncached memory that copies
/// 1.6-2x faster here (16 KiB-4 MiB).
pub(crate) const STREAM_FROM: usize = 16 * 1024;

/// Copy `src` into `dst` (same length) and return the crc32c of the bytes,
/// in one pass: each chunk is summed, then copied while it is still in the
/// core's cache, so a large payload is read from memory once. Summing
/// first keeps the sum from waiting on the (uncached) destination; the two
/// agree because a send's buffer does not change until the send completes.
/// Once it returns, every byte is in place for the stores that follow
/// (the record header is written after the payload).
pub(crate) fn copy_with_checksum(dst: &mut [u8], src: &[u8]) -> u32 {
    /// Small enough to stay in L1/L2 between the sum and the copy.
    const CHUNK: usize = 16 * 1024;
    if src.len() < SMALL_CRC {
        let crc = crc32c(src);
        dst.copy_from_slice(src);
        return crc;
    }
    let stream = src.len() >= STREAM_FROM;
    let copy = |d: &mut [u8], s: &[u8]| {
        if stream {
            copy_streaming(d, s);
        } else {
            d.copy_from_slice(s);
        }
    };
    let crc = if src.len() <= CHUNK {
        // One piece: the plain call, without a digest's state.
        let crc = crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, src);
        copy(dst, src);
        crc
    } else {
        let mut digest = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
        for (d, s) in dst.chunks_mut(CHUNK).zip(src.chunks(CHUNK)) {
            digest.update(s);
            copy(d, s);
        }
        digest.finalize()
    };
    if stream {
        store_fence();
    }
    crc as u32
}

/// Copy `src` into `dst` (same length), whole 16-byte blocks with
/// non-temporal stores; call [`store_fence`] before stores that must be
/// seen after these.
fn copy_streaming(dst: &mut [u8], src: &[u8]) {
    let len = dst.len().min(src.len());
    // Plain stores up to `dst`'s first 16-byte boundary, then whole
    // blocks from there (each 16-byte aligned), then plain stores again.
    let head = dst.as_ptr().align_offset(16).min(len);
    dst[..head].copy_from_slice(&src[..head]);
    let mut at = head;
    while at + 16 <= len {
        stream_block(&mut dst[at..at + 16], &src[at..at + 16]);
        at += 16;
    }
    dst[at..len].copy_from_slice(&src[at..len]);
}

/// Write the 16 bytes of `src` to `dst` (16 bytes, 16-byte aligned) with a
/// non-temporal store (a plain copy where there is none, and under Miri,
/// which cannot run it).
#[inline(always)]
fn stream_block(dst: &mut [u8], src: &[u8]) {
    debug_assert!(dst.len() == 16 && src.len() == 16 && dst.as_ptr().addr().is_multiple_of(16));
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: both slices hold 16 bytes (the caller slices them so), and
    // `dst` is 16-byte aligned, as `_mm_stream_si128` requires (the
    // caller starts at an aligned address and steps by 16); the load may
    // be unaligned.
    unsafe {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let v = _mm_loadu_si128(src.as_ptr().cast::<__m128i>());
        _mm_stream_si128(dst.as_mut_ptr().cast::<__m128i>(), v);
    }
    #[cfg(any(not(target_arch = "x86_64"), miri))]
    dst.copy_from_slice(src);
}

/// Order the non-temporal stores before this after every store after it.
fn store_fence() {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: `sfence` only orders stores (SSE, present on every x86_64).
    unsafe {
        std::arch::x86_64::_mm_sfence();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_pass_copy_sums_like_crc32c() {
        let src: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let lens = [
            0,
            1,
            40,
            63,
            SMALL_CRC - 1,
            SMALL_CRC,
            SMALL_CRC + 1,
            STREAM_FROM - 1,
            STREAM_FROM,
            STREAM_FROM + 1,
            100_000 - 48,
        ];
        for (len, at) in lens.into_iter().flat_map(|l| [0, 1, 48].map(|a| (l, a))) {
            // Misaligned by `at`, as a payload after a record header is:
            // the streaming copy's head and tail take plain stores.
            let mut dst = vec![0u8; len + at + 1];
            let crc = copy_with_checksum(&mut dst[at..at + len], &src[..len]);
            assert_eq!(&dst[at..at + len], &src[..len], "length {len} at {at}");
            assert!(dst[..at].iter().all(|&b| b == 0), "wrote before {at}");
            assert_eq!(dst[at + len], 0, "wrote past {len} at {at}");
            assert_eq!(crc, crc32c::crc32c(&src[..len]), "length {len}");
            assert_eq!(super::crc32c(&src[..len]), crc, "length {len}");
        }
    }

    #[test]
    fn small_sums_agree_with_crc32c_at_every_length_and_offset() {
        let src: Vec<u8> = (0..2 * SMALL_CRC as u32)
            .map(|i| (i * 131 + 7) as u8)
            .collect();
        for at in 0..8 {
            for len in 0..=SMALL_CRC + 8 {
                let bytes = &src[at..at + len];
                assert_eq!(crc32c(bytes), crc32c::crc32c(bytes), "length {len} at {at}");
            }
        }
    }
}
