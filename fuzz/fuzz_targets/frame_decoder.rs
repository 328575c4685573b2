//! Feeds arbitrary bytes to the event-logger frame decoder, as a logger
//! reading a hostile connection would, in two ways:
//!
//! 1. as a raw byte stream: decode frame after frame until an error or an
//!    incomplete frame;
//! 2. as the kind byte and payload of a frame given a valid header and
//!    checksum, so the message and event parsers behind the checksum are
//!    reached too.
//!
//! Nothing may panic, the decoder may never claim more bytes than it was
//! given, and whatever decodes must re-encode to a frame that decodes to the
//! same message.

#![no_main]

use libfuzzer_sys::fuzz_target;
use vpml_event_logger::wire::{
    Decoded, FRAME_MAGIC, HEADER_LEN, MAX_FRAME, PROTOCOL_VERSION, decode_frame, encode_frame,
};

fn check_stream(data: &[u8]) {
    let mut at = 0;
    while at < data.len() {
        match decode_frame(&data[at..], MAX_FRAME) {
            Ok(Decoded::Frame(msg, used)) => {
                assert!(used >= HEADER_LEN && at + used <= data.len());
                at += used;
                let mut again = Vec::new();
                encode_frame(&msg, &mut again);
                match decode_frame(&again, MAX_FRAME) {
                    Ok(Decoded::Frame(back, n)) => {
                        assert_eq!(n, again.len());
                        assert_eq!(back, msg);
                    }
                    other => panic!("re-encoded frame does not decode: {other:?}"),
                }
            }
            Ok(Decoded::NeedMore(need)) => {
                assert!(need > data.len() - at);
                break;
            }
            Err(_) => break,
        }
    }
}

/// `data[0]` is the message kind, the rest the payload; header and checksum
/// are made valid.
fn framed(data: &[u8]) -> Vec<u8> {
    let Some((&kind, payload)) = data.split_first() else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&FRAME_MAGIC);
    out.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    out.push(kind);
    out.push(0);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[..12]), payload);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

fuzz_target!(|data: &[u8]| {
    check_stream(data);
    check_stream(&framed(data));
});
