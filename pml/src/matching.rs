//! MPI matching: posted receives against arriving messages.
//!
//! A receive matches the earliest arrived message that satisfies its
//! (source, tag, context); an arriving message goes to the earliest posted
//! receive it satisfies, otherwise it waits in the unexpected queue. Because
//! each channel delivers in order and both queues are kept in order,
//! messages from one source on one context never overtake each other.
//!
//! Unexpected messages are indexed by (context, source) so that named-source
//! receives only look at their own channel; `ANY_SOURCE` receives compare the
//! first candidate of each source by arrival number. This module is pure
//! data structure: it is checked against a flat reference model by a
//! property test (`tests/matching_model.rs` in this crate).

use std::collections::{BTreeMap, VecDeque};

/// Who may have sent a message: one rank or any.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// Any rank (`ANY_SOURCE`).
    Any,
    /// This rank of the communicator.
    Rank(usize),
}

/// Wildcard source for receives and probes.
pub const ANY_SOURCE: Source = Source::Any;
/// Wildcard tag for receives and probes.
pub const ANY_TAG: i32 = -1;

impl From<usize> for Source {
    fn from(r: usize) -> Self {
        Source::Rank(r)
    }
}

impl From<i32> for Source {
    /// Negative values other than -1 are kept as invalid ranks and rejected
    /// by the call that receives them; -1 is `ANY_SOURCE`.
    fn from(r: i32) -> Self {
        if r == -1 {
            Source::Any
        } else {
            Source::Rank(usize::try_from(r).unwrap_or(usize::MAX))
        }
    }
}

/// The matching-relevant header of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// Sending rank (world rank).
    pub source: usize,
    /// Message tag (non-negative).
    pub tag: i32,
    /// Communicator context id.
    pub context: u32,
    /// Sequence number of the message on its context (per ordered pair).
    pub seq: u64,
    /// Payload length in bytes.
    pub len: usize,
}

/// What a receive or probe asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvSpec {
    /// `None` for any source.
    pub source: Option<usize>,
    /// `None` for any tag.
    pub tag: Option<i32>,
    /// Communicator context id.
    pub context: u32,
}

impl RecvSpec {
    /// Does a message with this envelope satisfy the spec?
    pub fn accepts(&self, env: &Envelope) -> bool {
        self.context == env.context
            && self.source.is_none_or(|s| s == env.source)
            && self.tag.is_none_or(|t| t == env.tag)
    }
}

/// Unexpected messages of one (context, source), each with its arrival number.
type SourceQueue<U> = VecDeque<(u64, Envelope, U)>;

/// Posted receives (payload `P`, e.g. a request id) and unexpected messages
/// (payload `U`, e.g. the message bytes).
#[derive(Debug)]
pub struct MatchQueues<P, U> {
    /// Posted receives with their posting number, in posting order.
    posted: VecDeque<(u64, RecvSpec, P)>,
    unexpected: BTreeMap<(u32, usize), SourceQueue<U>>,
    arrivals: u64,
    posts: u64,
    unexpected_len: usize,
}

/// A posted receive taken out of the queue by a match that may still be
/// undone (its message's sender died before the data arrived).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posted<P> {
    order: u64,
    spec: RecvSpec,
    /// The receive.
    pub item: P,
}

impl<P> Posted<P> {
    /// The receive matched a message of world rank `source` whose bytes
    /// have not all arrived: if it is put back ([`MatchQueues::repost`],
    /// its sender died mid-message), it may match only that sender's
    /// messages — the same message, sent again — as it was matched (and
    /// perhaps logged) the first time.
    pub fn pin_source(&mut self, source: usize) {
        self.spec.source = Some(source);
    }
}

impl<P, U> Default for MatchQueues<P, U> {
    fn default() -> Self {
        MatchQueues {
            posted: VecDeque::new(),
            unexpected: BTreeMap::new(),
            arrivals: 0,
            posts: 0,
            unexpected_len: 0,
        }
    }
}

impl<P: PartialEq, U> MatchQueues<P, U> {
    /// An empty set of queues.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of posted receives waiting for a message.
    pub fn posted_len(&self) -> usize {
        self.posted.len()
    }

    /// Would the oldest posted receive take a message with this envelope
    /// (so that [`MatchQueues::match_arrival`] surely finds a receive)?
    pub fn oldest_accepts(&self, env: &Envelope) -> bool {
        self.posted.front().is_some_and(|(_, s, _)| s.accepts(env))
    }

    /// Number of messages waiting for a receive.
    pub fn unexpected_len(&self) -> usize {
        self.unexpected_len
    }

    /// An arriving message: returns the posted receive it matches (removed
    /// from the posted queue), or `None` if the caller must add it to the
    /// unexpected queue with [`MatchQueues::push_unexpected`].
    pub fn match_arrival(&mut self, env: &Envelope) -> Option<P> {
        self.match_arrival_entry(env).map(|p| p.item)
    }

    /// [`MatchQueues::match_arrival`], keeping what [`MatchQueues::repost`]
    /// needs to undo the match.
    pub fn match_arrival_entry(&mut self, env: &Envelope) -> Option<Posted<P>> {
        // Most often the oldest receive matches (a window of receives of
        // one kind).
        let entry = if self.posted.front().is_some_and(|(_, s, _)| s.accepts(env)) {
            self.posted.pop_front()
        } else {
            let i = self.posted.iter().position(|(_, s, _)| s.accepts(env))?;
            self.posted.remove(i)
        };
        entry.map(|(order, spec, item)| Posted { order, spec, item })
    }

    /// The posted receives restricted to world rank `source`.
    pub fn posted_from(&self, source: usize) -> impl Iterator<Item = &P> {
        self.posted
            .iter()
            .filter(move |(_, spec, _)| spec.source == Some(source))
            .map(|(_, _, p)| p)
    }

    /// Put a receive taken by [`MatchQueues::match_arrival_entry`] back at
    /// its place in posting order (with its source pinned, if
    /// [`Posted::pin_source`] pinned it).
    pub fn repost(&mut self, p: Posted<P>) {
        let i = self.posted.partition_point(|(o, _, _)| *o < p.order);
        self.posted.insert(i, (p.order, p.spec, p.item));
    }

    /// Every unexpected message in arrival order.
    pub fn unexpected_in_order(&self) -> Vec<(&Envelope, &U)> {
        let mut all: Vec<(u64, &Envelope, &U)> = self
            .unexpected
            .values()
            .flat_map(|q| q.iter().map(|(a, e, u)| (*a, e, u)))
            .collect();
        all.sort_by_key(|(a, _, _)| *a);
        all.into_iter().map(|(_, e, u)| (e, u)).collect()
    }

    /// Queue a message that matched no posted receive.
    pub fn push_unexpected(&mut self, env: Envelope, payload: U) {
        self.arrivals += 1;
        self.unexpected_len += 1;
        self.unexpected
            .entry((env.context, env.source))
            .or_default()
            .push_back((self.arrivals, env, payload));
    }

    fn find_unexpected(&self, spec: &RecvSpec) -> Option<((u32, usize), usize)> {
        if self.unexpected_len == 0 {
            // Most receives are posted before their message arrives.
            return None;
        }
        let first_in = |q: &SourceQueue<U>| {
            q.iter()
                .enumerate()
                .find(|(_, (_, e, _))| spec.tag.is_none_or(|t| t == e.tag))
                .map(|(i, (arrival, _, _))| (i, *arrival))
        };
        match spec.source {
            Some(src) => {
                let key = (spec.context, src);
                let q = self.unexpected.get(&key)?;
                first_in(q).map(|(i, _)| (key, i))
            }
            None => self
                .unexpected
                .range((spec.context, 0)..=(spec.context, usize::MAX))
                .filter_map(|(k, q)| first_in(q).map(|(i, a)| (a, *k, i)))
                .min_by_key(|(a, _, _)| *a)
                .map(|(_, k, i)| (k, i)),
        }
    }

    /// Remove and return the earliest unexpected message the spec accepts.
    pub fn take_unexpected(&mut self, spec: &RecvSpec) -> Option<(Envelope, U)> {
        let (key, i) = self.find_unexpected(spec)?;
        let q = self.unexpected.get_mut(&key)?;
        let (_, env, u) = q.remove(i)?;
        self.unexpected_len -= 1;
        Some((env, u))
    }

    /// The earliest unexpected message the spec accepts, left in place (probe).
    pub fn peek_unexpected(&self, spec: &RecvSpec) -> Option<(&Envelope, &U)> {
        let (key, i) = self.find_unexpected(spec)?;
        let (_, env, u) = self.unexpected.get(&key)?.get(i)?;
        Some((env, u))
    }

    /// Append a receive to the posted queue (call only after
    /// [`MatchQueues::take_unexpected`] found nothing).
    pub fn post(&mut self, spec: RecvSpec, p: P) {
        self.posts += 1;
        self.posted.push_back((self.posts, spec, p));
    }

    /// Remove and return every posted receive (the engine failed).
    pub fn drain_posted(&mut self) -> Vec<P> {
        self.posted.drain(..).map(|(_, _, p)| p).collect()
    }

    /// Remove a posted receive (cancel). Returns false if it was not posted
    /// (already matched).
    pub fn remove_posted(&mut self, p: &P) -> bool {
        match self.posted.iter().position(|(_, _, q)| q == p) {
            Some(i) => {
                self.posted.remove(i);
                true
            }
            None => false,
        }
    }
}
