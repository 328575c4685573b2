//! Events (determinants) and batches of numbered events, in the explicit
//! little-endian layout shared by the wire and the segment files.

use crate::bytes::{Reader, put_i32, put_u32, put_u64};
use crate::wire::WireError;
pub use vpml_codec::CallId;
use vpml_codec::put_call_id;

/// Number of an event in its rank's stream: 1, 2, 3, … without gaps,
/// assigned by the [`crate::Client`]; 0 means "no event".
pub type EventId = u64;

/// A non-deterministic event of a rank, as DESIGN.md's table lists them.
/// Call ids are the engine's ([`CallId`]: a lane and a number in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A receive posted with `ANY_SOURCE` matched a message from `source`.
    Match {
        /// Id of the receive call.
        recv: CallId,
        /// The rank the message came from.
        source: u32,
    },
    /// An `iprobe` (or a `probe` with `ANY_SOURCE`) and its answer.
    Probe {
        /// Id of the probe call.
        call: CallId,
        /// Whether a message was found; the other fields are 0 otherwise.
        found: bool,
        /// Source of the message found.
        source: u32,
        /// Tag of the message found.
        tag: i32,
        /// Length in bytes of the message found.
        length: u64,
    },
    /// A test / test_any / test_some / test_all / wait_any / wait_some call
    /// and the requests it completed.
    Delivery {
        /// Id of the delivery call.
        call: CallId,
        /// Ids of the calls whose requests it completed, in the order
        /// reported.
        completed: Vec<CallId>,
    },
    /// A run of consecutive unsuccessful tests or iprobes of one lane
    /// (lazy logging).
    NoneRun {
        /// The lane of the calls.
        lane: u32,
        /// Number of the first call of the run in its lane.
        first: u64,
        /// Number of the last call of the run (≥ `first`).
        last: u64,
    },
    /// A `cancel` of a receive and whether it took effect.
    Cancel {
        /// Id of the cancel call.
        call: CallId,
        /// Id of the receive call it cancelled (a re-executed rank must
        /// keep that receive from matching anything before the cancel).
        request: CallId,
        /// Whether the receive was cancelled.
        cancelled: bool,
    },
}

const KIND_MATCH: u8 = 1;
const KIND_PROBE: u8 = 2;
const KIND_DELIVERY: u8 = 3;
const KIND_NONE_RUN: u8 = 4;
const KIND_CANCEL: u8 = 5;

/// Size of an event's id and kind byte, before its body.
const EVENT_PREFIX: usize = 9;
/// Size of an encoded call id.
const CALL: usize = CallId::ENCODED_LEN;

impl Event {
    /// Appends `id` and this event in the wire layout.
    pub fn encode(&self, id: EventId, out: &mut Vec<u8>) {
        put_u64(out, id);
        match self {
            Event::Match { recv, source } => {
                out.push(KIND_MATCH);
                put_call_id(out, *recv);
                put_u32(out, *source);
            }
            Event::Probe {
                call,
                found,
                source,
                tag,
                length,
            } => {
                out.push(KIND_PROBE);
                put_call_id(out, *call);
                out.push(u8::from(*found));
                put_u32(out, *source);
                put_i32(out, *tag);
                put_u64(out, *length);
            }
            Event::Delivery { call, completed } => {
                out.push(KIND_DELIVERY);
                put_call_id(out, *call);
                // A batch is capped far below 2^32 requests by the frame size.
                put_u32(out, u32::try_from(completed.len()).unwrap_or(u32::MAX));
                for id in completed {
                    put_call_id(out, *id);
                }
            }
            Event::NoneRun { lane, first, last } => {
                out.push(KIND_NONE_RUN);
                put_u32(out, *lane);
                put_u64(out, *first);
                put_u64(out, *last);
            }
            Event::Cancel {
                call,
                request,
                cancelled,
            } => {
                out.push(KIND_CANCEL);
                put_call_id(out, *call);
                put_call_id(out, *request);
                out.push(u8::from(*cancelled));
            }
        }
    }

    /// Bytes [`Event::encode`] appends.
    pub fn encoded_len(&self) -> usize {
        EVENT_PREFIX
            + match self {
                Event::Match { .. } => CALL + 4,
                Event::Probe { .. } => CALL + 17,
                Event::Delivery { completed, .. } => CALL + 4 + CALL * completed.len(),
                Event::NoneRun { .. } => 20,
                Event::Cancel { .. } => 2 * CALL + 1,
            }
    }

    /// Reads one numbered event, validating every field.
    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<(EventId, Event), WireError> {
        let id = r.u64()?;
        let event = match r.u8()? {
            KIND_MATCH => Event::Match {
                recv: r.call_id()?,
                source: r.u32()?,
            },
            KIND_PROBE => {
                let call = r.call_id()?;
                let found = r.bool()?;
                Event::Probe {
                    call,
                    found,
                    source: r.u32()?,
                    tag: r.i32()?,
                    length: r.u64()?,
                }
            }
            KIND_DELIVERY => {
                let call = r.call_id()?;
                let n = r.u32()? as usize;
                // Check before allocating: a hostile count must not reserve memory.
                if n > r.remaining() / CALL {
                    return Err(WireError::Truncated {
                        what: "delivery event",
                        need: n * CALL - r.remaining(),
                    });
                }
                let mut completed = Vec::with_capacity(n);
                for _ in 0..n {
                    completed.push(r.call_id()?);
                }
                Event::Delivery { call, completed }
            }
            KIND_NONE_RUN => {
                let lane = r.u32()?;
                let first = r.u64()?;
                let last = r.u64()?;
                if last < first {
                    return Err(WireError::malformed(
                        "none-run event",
                        format!("last call {last} precedes first call {first}"),
                    ));
                }
                Event::NoneRun { lane, first, last }
            }
            KIND_CANCEL => Event::Cancel {
                call: r.call_id()?,
                request: r.call_id()?,
                cancelled: r.bool()?,
            },
            k => {
                return Err(WireError::malformed(
                    "event",
                    format!("unknown event kind {k}"),
                ));
            }
        };
        Ok((id, event))
    }
}

/// Consecutively numbered events in their encoded form, as carried by `Put`
/// and `Events` frames and stored in segment records. A batch is always
/// valid: constructors check every event and that ids increase by one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventBatch {
    count: u32,
    first: EventId,
    bytes: Vec<u8>,
}

impl EventBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends an event; `id` must be one more than the last id (any id ≥ 1
    /// for the first event).
    pub fn push(&mut self, id: EventId, event: &Event) -> Result<(), WireError> {
        if id == 0 || (self.count > 0 && Some(id) != self.last().checked_add(1)) {
            return Err(WireError::malformed(
                "event batch",
                format!("event id {id} does not follow {}", self.last()),
            ));
        }
        if self.count == u32::MAX {
            return Err(WireError::malformed("event batch", "too many events"));
        }
        if self.count == 0 {
            self.first = id;
        }
        self.count += 1;
        event.encode(id, &mut self.bytes);
        Ok(())
    }

    /// Validates `count` encoded events (untrusted input) and copies them.
    pub fn parse(count: u32, bytes: &[u8]) -> Result<Self, WireError> {
        let first = validate(count, bytes)?;
        Ok(EventBatch {
            count,
            first,
            bytes: bytes.to_vec(),
        })
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether the batch holds no event.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Id of the first event (0 when empty).
    pub fn first(&self) -> EventId {
        self.first
    }

    /// Id of the last event (0 when empty).
    pub fn last(&self) -> EventId {
        if self.count == 0 {
            0
        } else {
            self.first + u64::from(self.count) - 1
        }
    }

    /// The encoded events.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Decodes the events with their ids.
    pub fn events(&self) -> Vec<(EventId, Event)> {
        let mut r = Reader::new(&self.bytes, "event batch");
        let mut out = Vec::with_capacity(self.len());
        // The bytes were validated (or encoded by us) when the batch was
        // built, so decoding cannot fail; stop quietly if it ever did.
        while r.remaining() > 0 {
            match Event::decode(&mut r) {
                Ok(e) => out.push(e),
                Err(_) => break,
            }
        }
        out
    }

    /// Appends another batch whose first id follows this one's last.
    pub fn extend(&mut self, other: &EventBatch) -> Result<(), WireError> {
        if other.is_empty() {
            return Ok(());
        }
        if self.is_empty() {
            *self = other.clone();
            return Ok(());
        }
        if Some(other.first) != self.last().checked_add(1) {
            return Err(WireError::malformed(
                "event batch",
                format!(
                    "batch starting at {} does not follow {}",
                    other.first,
                    self.last()
                ),
            ));
        }
        self.count = self
            .count
            .checked_add(other.count)
            .ok_or_else(|| WireError::malformed("event batch", "too many events"))?;
        self.bytes.extend_from_slice(&other.bytes);
        Ok(())
    }

    /// The events with ids ≥ `from`, as (count, encoded bytes).
    pub fn suffix_from(&self, from: EventId) -> (u32, &[u8]) {
        if self.count == 0 || from > self.last() {
            return (0, &[]);
        }
        if from <= self.first {
            return (self.count, &self.bytes);
        }
        let skip = from - self.first;
        let offset = offset_after(&self.bytes, skip).unwrap_or(self.bytes.len());
        // skip < count here, so the difference fits in u32.
        (self.count - skip as u32, &self.bytes[offset..])
    }
}

/// Validates `count` encoded events with consecutive ids; returns the first
/// id (0 when `count` is 0).
pub(crate) fn validate(count: u32, bytes: &[u8]) -> Result<EventId, WireError> {
    let mut r = Reader::new(bytes, "event batch");
    let mut first = 0;
    let mut prev = 0u64;
    // Every event takes at least 18 bytes; a larger count cannot fit.
    if u64::from(count) > bytes.len() as u64 / 18 {
        return Err(WireError::malformed(
            "event batch",
            format!("{count} events cannot fit in {} bytes", bytes.len()),
        ));
    }
    for i in 0..count {
        let (id, _) = Event::decode(&mut r)?;
        if i == 0 {
            if id == 0 {
                return Err(WireError::malformed("event batch", "event id 0"));
            }
            first = id;
        } else if Some(id) != prev.checked_add(1) {
            return Err(WireError::malformed(
                "event batch",
                format!("event id {id} does not follow {prev}"),
            ));
        }
        prev = id;
    }
    r.finish()?;
    Ok(first)
}

/// Byte offset of the event after the first `skip` events of valid bytes.
fn offset_after(bytes: &[u8], skip: u64) -> Option<usize> {
    let mut r = Reader::new(bytes, "event batch");
    for _ in 0..skip {
        Event::decode(&mut r).ok()?;
    }
    Some(r.position())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_call() -> impl Strategy<Value = CallId> {
        (any::<u32>(), any::<u64>()).prop_map(|(lane, n)| CallId::new(lane, n))
    }

    pub(crate) fn any_event() -> impl Strategy<Value = Event> {
        prop_oneof![
            (any_call(), any::<u32>()).prop_map(|(recv, source)| Event::Match { recv, source }),
            (
                any_call(),
                any::<bool>(),
                any::<u32>(),
                any::<i32>(),
                any::<u64>()
            )
                .prop_map(|(call, found, source, tag, length)| Event::Probe {
                    call,
                    found,
                    source,
                    tag,
                    length
                }),
            (any_call(), proptest::collection::vec(any_call(), 0..40))
                .prop_map(|(call, completed)| Event::Delivery { call, completed }),
            (any::<u32>(), any::<u64>(), any::<u64>()).prop_map(|(lane, a, b)| Event::NoneRun {
                lane,
                first: a.min(b),
                last: a.max(b)
            }),
            (any_call(), any_call(), any::<bool>()).prop_map(|(call, request, cancelled)| {
                Event::Cancel {
                    call,
                    request,
                    cancelled,
                }
            }),
        ]
    }

    proptest! {
        #[test]
        fn every_event_kind_round_trips(event in any_event(), id in 1u64..u64::MAX) {
            let mut buf = Vec::new();
            event.encode(id, &mut buf);
            prop_assert_eq!(buf.len(), event.encoded_len());
            let mut r = Reader::new(&buf, "test");
            let (got_id, got) = Event::decode(&mut r).unwrap();
            prop_assert_eq!(r.remaining(), 0);
            prop_assert_eq!(got_id, id);
            prop_assert_eq!(got, event);
        }

        #[test]
        fn batches_round_trip_and_slice(events in proptest::collection::vec(any_event(), 0..30),
                                        first in 1u64..1_000_000, cut in 0u64..40) {
            let mut batch = EventBatch::new();
            for (i, e) in events.iter().enumerate() {
                batch.push(first + i as u64, e).unwrap();
            }
            let parsed = EventBatch::parse(batch.len() as u32, batch.as_bytes()).unwrap();
            prop_assert_eq!(&parsed, &batch);
            let decoded = parsed.events();
            prop_assert_eq!(decoded.len(), events.len());
            for (i, (id, e)) in decoded.iter().enumerate() {
                prop_assert_eq!(*id, first + i as u64);
                prop_assert_eq!(e, &events[i]);
            }
            let from = first + cut;
            let (n, bytes) = batch.suffix_from(from);
            let suffix = EventBatch::parse(n, bytes).unwrap();
            let expected: Vec<_> = decoded.into_iter().filter(|(id, _)| *id >= from).collect();
            prop_assert_eq!(suffix.events(), expected);
        }

        #[test]
        fn truncated_events_are_rejected(event in any_event(), cut in 0usize..200) {
            let mut buf = Vec::new();
            event.encode(7, &mut buf);
            prop_assume!(cut < buf.len());
            prop_assert!(validate(1, &buf[..cut]).is_err());
        }
    }

    #[test]
    fn hostile_delivery_count_does_not_allocate() {
        let mut buf = Vec::new();
        put_u64(&mut buf, 1);
        buf.push(KIND_DELIVERY);
        put_u64(&mut buf, 9);
        put_u32(&mut buf, u32::MAX);
        let err = validate(1, &buf).unwrap_err();
        assert!(matches!(err, WireError::Truncated { .. }), "{err}");
    }

    #[test]
    fn gaps_and_bad_booleans_are_rejected() {
        let mut buf = Vec::new();
        let c = |n| CallId::new(0, n);
        Event::Cancel {
            call: c(1),
            request: c(1),
            cancelled: true,
        }
        .encode(1, &mut buf);
        Event::Cancel {
            call: c(2),
            request: c(1),
            cancelled: true,
        }
        .encode(3, &mut buf);
        assert!(
            validate(2, &buf)
                .unwrap_err()
                .to_string()
                .contains("does not follow")
        );
        let mut buf = Vec::new();
        Event::Cancel {
            call: c(1),
            request: c(1),
            cancelled: true,
        }
        .encode(1, &mut buf);
        *buf.last_mut().unwrap() = 2;
        assert!(
            validate(1, &buf)
                .unwrap_err()
                .to_string()
                .contains("boolean")
        );
        let mut buf = Vec::new();
        Event::NoneRun {
            lane: 0,
            first: 1,
            last: 1,
        }
        .encode(1, &mut buf);
        buf.push(0);
        assert!(
            validate(1, &buf)
                .unwrap_err()
                .to_string()
                .contains("trailing")
        );
    }
}
