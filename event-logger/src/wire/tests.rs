//! Unit tests of the wire format: every message round-trips, a prefix asks
//! for more, damage is detected, random bytes never panic, the size limit
//! is checked from the header, and the raw `Put` encoder matches.

use super::*;
use crate::event::{CallId, Event};
use proptest::prelude::*;

fn any_batch() -> impl Strategy<Value = EventBatch> {
    (
        proptest::collection::vec(crate::event::tests::any_event(), 0..20),
        1u64..1 << 40,
    )
        .prop_map(|(events, first)| {
            let mut b = EventBatch::new();
            for (i, e) in events.iter().enumerate() {
                b.push(first + i as u64, e).unwrap();
            }
            b
        })
}

fn any_message() -> impl Strategy<Value = Message> {
    let name = "[A-Za-z0-9_.-]{1,64}";
    prop_oneof![
        (name, any::<u32>(), any::<u32>(), "[ -~]{0,64}").prop_map(
            |(job, rank, incarnation, token)| Message::Hello(Hello {
                job,
                rank,
                incarnation,
                token
            })
        ),
        (any::<u32>(), any_batch()).prop_map(|(rank, batch)| Message::Put { rank, batch }),
        (any::<u64>(), any::<u32>(), any::<u64>()).prop_map(|(req, rank, from)| Message::Get {
            req,
            rank,
            from
        }),
        (any::<u64>(), any::<u32>(), any::<u64>())
            .prop_map(|(req, rank, up_to)| Message::Truncate { req, rank, up_to }),
        any::<u64>().prop_map(|req| Message::Stats { req }),
        Just(Message::Bye),
        (
            any::<[u64; 3]>(),
            any::<bool>(),
            proptest::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(|([req, index, offset], last, bytes)| Message::SaveCopy {
                req,
                index,
                offset,
                last,
                bytes
            }),
        (any::<u64>(), any::<u32>(), any::<[u64; 2]>()).prop_map(|(req, rank, [index, offset])| {
            Message::LoadCopy {
                req,
                rank,
                index,
                offset,
            }
        }),
        any::<[u64; 2]>().prop_map(|[req, above]| Message::DropCopies { req, above }),
        any::<u64>().prop_map(|req| Message::CopySaved { req }),
        (
            any::<[u64; 4]>(),
            proptest::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(|([req, index, total, offset], bytes)| Message::CopyData {
                req,
                index,
                total,
                offset,
                bytes
            }),
        (any::<u64>(), any::<u64>()).prop_map(|(highest, first_kept)| Message::Welcome {
            highest,
            first_kept
        }),
        any::<u64>().prop_map(|highest| Message::Ack { highest }),
        (any::<u64>(), any::<bool>(), any_batch()).prop_map(|(req, last, batch)| Message::Events {
            req,
            last,
            batch
        }),
        (any::<u64>(), any::<u32>(), any::<u64>()).prop_map(|(req, segments, bytes)| {
            Message::Truncated {
                req,
                segments,
                bytes,
            }
        }),
        (any::<u64>(), proptest::array::uniform11(any::<u64>())).prop_map(|(req, v)| {
            Message::StatsReply {
                req,
                stats: Stats {
                    connections_open: v[0],
                    connections_total: v[1],
                    connections_refused: v[2],
                    puts: v[3],
                    events_stored: v[4],
                    bytes_written: v[5],
                    fsyncs: v[6],
                    rank_highest: v[7],
                    rank_first_kept: v[8],
                    rank_segments: v[9],
                    rank_bytes: v[10],
                },
            }
        }),
        (any::<u64>(), 1u16..10, "\\PC{0,100}").prop_map(|(req, c, message)| {
            Message::Error {
                req,
                code: ErrorCode::from_u16(c),
                message,
            }
        }),
        Just(Message::Goodbye),
    ]
}

proptest! {
    #[test]
    fn every_message_round_trips(msg in any_message(), junk in proptest::collection::vec(any::<u8>(), 0..8)) {
        let mut buf = Vec::new();
        encode_frame(&msg, &mut buf);
        let len = buf.len();
        buf.extend_from_slice(&junk);
        match decode_frame(&buf, MAX_FRAME).unwrap() {
            Decoded::Frame(got, used) => {
                prop_assert_eq!(used, len);
                prop_assert_eq!(got, msg);
            }
            Decoded::NeedMore(n) => prop_assert!(false, "needs {} bytes", n),
        }
    }

    #[test]
    fn every_prefix_asks_for_more(msg in any_message()) {
        let mut buf = Vec::new();
        encode_frame(&msg, &mut buf);
        for cut in 0..buf.len() {
            match decode_frame(&buf[..cut], MAX_FRAME).unwrap() {
                Decoded::NeedMore(n) => prop_assert!(n > cut),
                Decoded::Frame(..) => prop_assert!(false, "decoded from {} bytes", cut),
            }
        }
    }

    #[test]
    fn any_flipped_bit_is_detected(msg in any_message(), bit in any::<prop::sample::Index>()) {
        let mut buf = Vec::new();
        encode_frame(&msg, &mut buf);
        let i = bit.index(buf.len() * 8);
        buf[i / 8] ^= 1 << (i % 8);
        // Either an error or a request for more bytes (flipped length);
        // never the original message decoded from damaged bytes.
        if let Ok(Decoded::Frame(got, _)) = decode_frame(&buf, MAX_FRAME) {
            prop_assert_ne!(got, msg);
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_frame(&bytes, MAX_FRAME);
    }
}

#[test]
fn oversized_frames_are_refused_from_the_header() {
    let mut buf = Vec::new();
    encode_frame(&Message::Bye, &mut buf);
    buf[8..12].copy_from_slice(&(MAX_FRAME + 1).to_le_bytes());
    assert_eq!(
        decode_frame(&buf, MAX_FRAME).unwrap_err(),
        WireError::TooLarge {
            len: MAX_FRAME + 1,
            max: MAX_FRAME
        }
    );
    let mut buf = Vec::new();
    encode_frame(&Message::Ack { highest: 1 }, &mut buf);
    assert!(matches!(
        decode_frame(&buf, 4),
        Err(WireError::TooLarge { len: 8, max: 4 })
    ));
}

#[test]
fn put_raw_matches_put() {
    let mut batch = EventBatch::new();
    batch
        .push(
            5,
            &Event::Match {
                recv: CallId::new(0, 1),
                source: 2,
            },
        )
        .unwrap();
    batch
        .push(
            6,
            &Event::NoneRun {
                lane: 0,
                first: 3,
                last: 4,
            },
        )
        .unwrap();
    let mut a = Vec::new();
    encode_frame(
        &Message::Put {
            rank: 3,
            batch: batch.clone(),
        },
        &mut a,
    );
    let mut b = Vec::new();
    encode_put_raw(3, 2, &[batch.as_bytes()], &mut b);
    assert_eq!(a, b);
}
