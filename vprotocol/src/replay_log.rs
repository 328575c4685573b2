//! The logged events a re-executing rank answers from, and the checks that
//! make a divergence loud instead of a wrong answer.
//!
//! A rank re-executes its calls in the same order within each lane (each
//! communicator context) and gives them the same call ids. Each call asks this log what it answered the first time:
//! ANY_SOURCE receives take their logged source, completion calls and
//! probes their logged answers (or "nothing yet" inside the logged range
//! when they have no event), cancels their logged outcome. Every logged
//! outcome is *consumed* by the call it belongs to, and checked against
//! what the call is now:
//!
//! * an event of one kind met by a call of another kind (a logged `Match`
//!   at what is now a send, a `Delivery` at a probe, …), or a call inside a
//!   logged run of failed tests that is not a test;
//! * an ANY_SOURCE match logged for what is now a named receive;
//! * a delivery of requests the completion call was not given;
//! * a probe answer the probe cannot have given (other source or tag), or
//!   a blocking ANY_SOURCE probe without an answer;
//! * a cancel of another receive than the logged one, or without a logged
//!   outcome;
//! * an event that was never consumed because re-execution went past its
//!   call in its lane.
//!
//! Lanes are independent: how the calls of two lanes interleave (two
//! threads, each on its own communicator) is neither logged nor checked.
//!
//! Each is a [`Divergence`] naming the call and the event. Nothing here is
//! on the failure-free path: a first start has an empty log and answers
//! [`Replay::Free`] at once.
//!
//! Two protocols answer from it: the pessimist protocol, replaying its own
//! logged events after a restart, and the replay debugger (`vpml replay`,
//! in the `vpml-replay` crate), re-running one rank of a recording. What
//! the second needs is public — [`ReplayLog`] with its per-call questions,
//! [`RecvAnswer`], [`Divergence`] and [`describe_send`]; the rest stays
//! inside this crate.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::ops::RangeInclusive;

use vpml_event_logger::Event;
use vpml_pml::protocol::{CallId, Replay};

/// A logged outcome, waiting for its call.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// An ANY_SOURCE receive matched a message from this rank.
    Match(usize),
    /// A probe found (source, tag), or nothing.
    Probe(Option<(usize, i32)>),
    /// A completion call completed the requests of these calls.
    Delivery(Vec<CallId>),
    /// A cancel of the receive of call `request`.
    Cancel { request: CallId, cancelled: bool },
}

impl Outcome {
    fn describe(&self) -> String {
        match self {
            Outcome::Match(s) => format!("an ANY_SOURCE receive that matched rank {s}"),
            Outcome::Probe(Some((s, t))) => format!("a probe that found rank {s}, tag {t}"),
            Outcome::Probe(None) => "a probe that found nothing".into(),
            Outcome::Delivery(set) => format!("a completion call that completed calls {set:?}"),
            Outcome::Cancel { request, cancelled } => {
                format!("a cancel of the receive of call {request} (cancelled: {cancelled})")
            }
        }
    }
}

/// How a divergence report names a send.
pub fn describe_send(msg: &vpml_pml::protocol::OutgoingMessage<'_>) -> String {
    format!(
        "a send to rank {} (tag {}, #{}, {} bytes)",
        msg.dest,
        msg.tag,
        msg.seq,
        msg.payload.len()
    )
}

/// A re-executed call that does not fit the logged execution.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Divergence {
    /// The call where it showed.
    pub call: CallId,
    /// The logged event involved, if any (its id in the rank's stream).
    pub event: Option<u64>,
    /// Expected and found, in words.
    pub what: String,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.event {
            Some(e) => write!(f, "call {} (event {e}): {}", self.call, self.what),
            None => write!(f, "call {}: {}", self.call, self.what),
        }
    }
}

/// What a re-executed receive does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RecvAnswer {
    /// The logged source of an ANY_SOURCE match.
    pub source: Option<usize>,
    /// A logged cancel withdrew this receive the first time: it must not
    /// match anything before that cancel.
    pub cancelled_later: bool,
}

/// The logged events of a restarted (or replayed) process, by call id.
#[derive(Default, Debug)]
pub struct ReplayLog {
    /// For each lane, the number of the highest call any event names:
    /// the lane's replay ends after it.
    end: BTreeMap<u32, u64>,
    /// Logged outcomes not yet consumed: call → (event id, outcome).
    outcomes: BTreeMap<CallId, (u64, Outcome)>,
    /// Logged runs of failed tests and iprobes: first call → (last call
    /// of the same lane, event id).
    none_runs: BTreeMap<CallId, (CallId, u64)>,
    /// Receives (by call id) that a logged cancel withdrew.
    cancelled: HashSet<CallId>,
    /// Event id of each call's event, for reports and `vpml replay --until`.
    event_of: BTreeMap<CallId, u64>,
    /// Events loaded.
    total: usize,
    /// For each lane, the number of the highest call re-executed so far.
    reached: BTreeMap<u32, u64>,
}

/// The calls of `lane` up to `call`'s number, `call` excluded or not.
fn lane_up_to(call: CallId) -> RangeInclusive<CallId> {
    CallId::new(call.lane, 0)..=call
}

impl ReplayLog {
    /// The events (with their ids) of a process that restarts from the
    /// checkpoint taken after call number `after[lane]` of each lane
    /// (lanes not listed: from their start).
    pub fn new(events: Vec<(u64, Event)>, after: &[(u32, u64)]) -> ReplayLog {
        let after: BTreeMap<u32, u64> = after.iter().copied().collect();
        let after_in = |lane: u32| after.get(&lane).copied().unwrap_or(0);
        let mut r = ReplayLog::default();
        for (id, ev) in events {
            let (call, outcome) = match ev {
                Event::Match { recv, source } => (recv, Outcome::Match(source as usize)),
                Event::Probe {
                    call,
                    found,
                    source,
                    tag,
                    ..
                } => (
                    call,
                    Outcome::Probe(found.then_some((source as usize, tag))),
                ),
                Event::Delivery { call, completed } => (call, Outcome::Delivery(completed)),
                Event::Cancel {
                    call,
                    request,
                    cancelled,
                } => (call, Outcome::Cancel { request, cancelled }),
                Event::NoneRun { lane, first, last } => {
                    let skip = after_in(lane);
                    if last > skip {
                        let end = r.end.entry(lane).or_default();
                        *end = (*end).max(last);
                        let first = CallId::new(lane, first.max(skip + 1));
                        let last = CallId::new(lane, last);
                        r.none_runs.insert(first, (last, id));
                        r.event_of.insert(last, id);
                        r.total += 1;
                    }
                    continue;
                }
            };
            if call.n <= after_in(call.lane) {
                continue;
            }
            if let Outcome::Cancel {
                request,
                cancelled: true,
            } = outcome
            {
                r.cancelled.insert(request);
            }
            let end = r.end.entry(call.lane).or_default();
            *end = (*end).max(call.n);
            r.event_of.insert(call, id);
            // A rank restarted twice may have logged a match again for a
            // call whose first match was never durable: the later counts.
            if r.outcomes.insert(call, (id, outcome)).is_none() {
                r.total += 1;
            }
        }
        r
    }

    /// Number of events loaded.
    pub fn len(&self) -> usize {
        self.total
    }

    /// No event was loaded.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// For each lane with events, the number of its highest call with one.
    pub fn ends(&self) -> Vec<(u32, u64)> {
        self.end.iter().map(|(&l, &n)| (l, n)).collect()
    }

    /// Calls up to the last logged event of their lane are replayed, not
    /// logged again.
    pub(crate) fn covers(&self, call: CallId) -> bool {
        self.end.get(&call.lane).is_some_and(|&end| call.n <= end)
    }

    /// Every lane has been re-executed up to its last logged event, and
    /// every logged outcome consumed.
    pub fn done(&self) -> bool {
        self.outcomes.is_empty()
            && self
                .end
                .iter()
                .all(|(lane, &end)| self.reached.get(lane).is_some_and(|&r| r >= end))
    }

    /// Id of the event of `call`, if it has one.
    pub fn event_of(&self, call: CallId) -> Option<u64> {
        self.event_of.get(&call).copied()
    }

    /// Events of the calls of each lane up to `reached[lane]`.
    pub fn events_up_to(&self, reached: &BTreeMap<u32, u64>) -> usize {
        reached
            .iter()
            .map(|(&lane, &n)| {
                self.event_of
                    .range(lane_up_to(CallId::new(lane, n)))
                    .count()
            })
            .sum()
    }

    fn none_run_at(&self, call: CallId) -> Option<(CallId, CallId, u64)> {
        let (&first, &(last, id)) = self.none_runs.range(lane_up_to(call)).next_back()?;
        (last >= call).then_some((first, last, id))
    }

    /// Call `call` begins: every logged outcome of an earlier call of its
    /// lane must have been consumed by now.
    fn begin(&mut self, call: CallId) -> Result<(), Divergence> {
        let reached = self.reached.entry(call.lane).or_default();
        *reached = (*reached).max(call.n);
        let earlier = CallId::new(call.lane, 0)..call;
        match self.outcomes.range(earlier).next() {
            Some((&at, (id, outcome))) => Err(Divergence {
                call: at,
                event: Some(*id),
                what: format!(
                    "logged {}, but re-execution went past this call (now at call {call}) without making it",
                    outcome.describe()
                ),
            }),
            _ => Ok(()),
        }
    }

    /// The smallest id among the events of calls after `last[lane]` in
    /// each lane (lanes not listed: after none), if any: a checkpoint
    /// taken there while re-executing must keep them (a later restart
    /// from it replays them), so it names the event before.
    pub(crate) fn first_event_after(&self, last: &[(u32, u64)]) -> Option<u64> {
        let last: BTreeMap<u32, u64> = last.iter().copied().collect();
        let after = |c: &CallId| c.n > last.get(&c.lane).copied().unwrap_or(0);
        let outcomes = self
            .outcomes
            .iter()
            .filter(|(c, _)| after(c))
            .map(|(_, (id, _))| *id);
        let runs = self
            .none_runs
            .values()
            .filter(|(l, _)| after(l))
            .map(|(_, id)| *id);
        outcomes.chain(runs).min()
    }

    /// The process finishes: every logged outcome must have been consumed.
    pub fn finish(&self) -> Result<(), Divergence> {
        if let Some((&at, (id, outcome))) = self.outcomes.first_key_value() {
            return Err(Divergence {
                call: at,
                event: Some(*id),
                what: format!(
                    "logged {}, but re-execution finished (at call {}) without making it",
                    outcome.describe(),
                    self.reached_in(at.lane)
                ),
            });
        }
        for (&lane, &end) in &self.end {
            let reached = self.reached_in(lane);
            if reached.n < end {
                let call = CallId::new(lane, end);
                return Err(Divergence {
                    call,
                    event: self.event_of(call),
                    what: format!(
                        "re-execution finished at call {reached}, before this call of the logged execution"
                    ),
                });
            }
        }
        Ok(())
    }

    /// The highest call of `lane` re-executed so far.
    fn reached_in(&self, lane: u32) -> CallId {
        CallId::new(lane, self.reached.get(&lane).copied().unwrap_or(0))
    }

    /// A call without an outcome of its own (a receive from a named
    /// source, say): check that none is logged.
    fn no_outcome(&mut self, call: CallId, now: &str) -> Result<(), Divergence> {
        self.begin(call)?;
        match self.outcomes.get(&call) {
            Some((id, outcome)) => Err(Divergence {
                call,
                event: Some(*id),
                what: format!("logged {}; now {now}", outcome.describe()),
            }),
            None => Ok(()),
        }
    }

    /// A send: no outcome is logged at its call, and it is not inside a
    /// logged run of failed tests (a send ends such a run: it flushes it).
    /// Receives may lie inside one.
    pub fn plain(&mut self, call: CallId, now: &str) -> Result<(), Divergence> {
        self.no_outcome(call, now)?;
        if !self.covers(call) {
            return Ok(());
        }
        if let Some((first, last, id)) = self.none_run_at(call) {
            return Err(Divergence {
                call,
                event: Some(id),
                what: format!(
                    "logged as one of the failed tests of calls {first}..={last}; now {now}"
                ),
            });
        }
        Ok(())
    }

    /// A receive is posted at `call`; `named` is its source, `None` for
    /// ANY_SOURCE.
    pub fn post_recv(
        &mut self,
        call: CallId,
        named: Option<usize>,
    ) -> Result<RecvAnswer, Divergence> {
        if !self.covers(call) {
            self.begin(call)?;
            return Ok(RecvAnswer::default());
        }
        let now = match named {
            Some(s) => format!("a receive from rank {s}"),
            None => "an ANY_SOURCE receive".to_string(),
        };
        let cancelled_later = self.cancelled.contains(&call);
        match self.outcomes.get(&call) {
            Some((_, Outcome::Match(source))) if named.is_none() => {
                let source = *source;
                self.outcomes.remove(&call);
                self.begin(call)?;
                Ok(RecvAnswer {
                    source: Some(source),
                    cancelled_later,
                })
            }
            Some(_) => self.no_outcome(call, &now).map(|_| RecvAnswer::default()),
            None => {
                self.no_outcome(call, &now)?;
                Ok(RecvAnswer {
                    source: None,
                    cancelled_later,
                })
            }
        }
    }

    /// The answer of completion call `call`, given the calls that created
    /// the requests it was passed.
    pub fn completion(
        &mut self,
        call: CallId,
        passed: &[CallId],
    ) -> Result<Replay<Vec<CallId>>, Divergence> {
        self.begin(call)?;
        if !self.covers(call) {
            return Ok(Replay::Free);
        }
        match self.outcomes.get(&call) {
            Some((id, Outcome::Delivery(set))) => {
                if let Some(missing) = set.iter().find(|c| !passed.contains(c)) {
                    return Err(Divergence {
                        call,
                        event: Some(*id),
                        what: format!(
                            "logged a completion of the requests of calls {set:?}; now the call was not given the request of call {missing} (given: {passed:?})"
                        ),
                    });
                }
                let set = set.clone();
                self.outcomes.remove(&call);
                Ok(Replay::Logged(set))
            }
            Some(_) => Err(self.wrong_kind(call, "a completion call")),
            None => Ok(Replay::NotYet),
        }
    }

    /// The requests whose completion is logged for call `call`, if its
    /// logged outcome is a completion (the log is left as it is).
    pub fn logged_completion(&self, call: CallId) -> Option<Vec<CallId>> {
        match self.outcomes.get(&call) {
            Some((_, Outcome::Delivery(set))) => Some(set.clone()),
            _ => None,
        }
    }

    /// The answer of probe call `call` for a probe of (`source`, `tag`)
    /// (`None`: any).
    pub fn probe(
        &mut self,
        call: CallId,
        source: Option<usize>,
        tag: Option<i32>,
        blocking: bool,
    ) -> Result<Replay<Option<(usize, i32)>>, Divergence> {
        self.begin(call)?;
        if !self.covers(call) {
            return Ok(Replay::Free);
        }
        let now = format!(
            "a {} of source {} and tag {}",
            if blocking { "probe" } else { "iprobe" },
            source.map_or("any".into(), |s| s.to_string()),
            tag.map_or("any".into(), |t| t.to_string())
        );
        match self.outcomes.get(&call) {
            Some((id, Outcome::Probe(found))) => {
                let fits = match found {
                    Some((s, t)) => source.is_none_or(|x| x == *s) && tag.is_none_or(|x| x == *t),
                    None => !blocking,
                };
                if !fits {
                    return Err(Divergence {
                        call,
                        event: Some(*id),
                        what: format!(
                            "logged {}; now {now}, which cannot give that answer",
                            Outcome::Probe(*found).describe()
                        ),
                    });
                }
                let found = *found;
                self.outcomes.remove(&call);
                Ok(Replay::Logged(found))
            }
            Some(_) => Err(self.wrong_kind(call, &now)),
            None if blocking && source.is_none() => Err(Divergence {
                call,
                event: None,
                what: format!(
                    "no answer was logged for this call, but it is now {now} (always logged)"
                ),
            }),
            None => Ok(Replay::NotYet),
        }
    }

    /// The outcome of cancel call `call` of the receive of call `request`.
    pub fn cancel(&mut self, call: CallId, request: CallId) -> Result<Replay<bool>, Divergence> {
        self.begin(call)?;
        if !self.covers(call) {
            return Ok(Replay::Free);
        }
        let now = format!("a cancel of the receive of call {request}");
        match self.outcomes.get(&call) {
            Some((
                _,
                Outcome::Cancel {
                    request: logged,
                    cancelled,
                },
            )) if *logged == request => {
                let cancelled = *cancelled;
                self.outcomes.remove(&call);
                Ok(Replay::Logged(cancelled))
            }
            Some(_) => Err(self.wrong_kind(call, &now)),
            None => Err(Divergence {
                call,
                event: None,
                what: format!(
                    "no outcome was logged for this call, but it is now {now} (always logged)"
                ),
            }),
        }
    }

    fn wrong_kind(&self, call: CallId, now: &str) -> Divergence {
        let (id, outcome) = self
            .outcomes
            .get(&call)
            .map_or((None, "nothing".to_string()), |(id, o)| {
                (Some(*id), o.describe())
            });
        Divergence {
            call,
            event: id,
            what: format!("logged {outcome}; now {now}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(n: u64) -> CallId {
        CallId::new(0, n)
    }

    fn log(events: Vec<Event>) -> ReplayLog {
        ReplayLog::new(
            events
                .into_iter()
                .enumerate()
                .map(|(i, e)| (i as u64 + 1, e))
                .collect(),
            &[],
        )
    }

    #[test]
    fn a_logged_completion_is_shown_without_being_answered() {
        let mut r = log(vec![
            Event::NoneRun {
                lane: 0,
                first: 3,
                last: 4,
            },
            Event::Delivery {
                call: c(5),
                completed: vec![c(2)],
            },
        ]);
        assert_eq!(r.logged_completion(c(4)), None);
        assert_eq!(r.logged_completion(c(5)), Some(vec![c(2)]));
        // Still there for the call itself, and gone once answered.
        assert_eq!(
            r.completion(c(5), &[c(2)]).unwrap(),
            Replay::Logged(vec![c(2)])
        );
        assert_eq!(r.logged_completion(c(5)), None);
    }

    #[test]
    fn logged_outcomes_are_answered_once_and_in_their_calls() {
        let mut r = log(vec![
            Event::Match {
                recv: c(2),
                source: 3,
            },
            Event::NoneRun {
                lane: 0,
                first: 3,
                last: 4,
            },
            Event::Delivery {
                call: c(5),
                completed: vec![c(2)],
            },
            Event::Probe {
                call: c(6),
                found: true,
                source: 1,
                tag: 9,
                length: 4,
            },
            Event::Cancel {
                call: c(8),
                request: c(7),
                cancelled: true,
            },
        ]);
        assert_eq!(r.ends(), vec![(0, 8)]);
        r.plain(c(1), "a send").unwrap();
        let a = r.post_recv(c(2), None).unwrap();
        assert_eq!(a.source, Some(3));
        assert_eq!(r.completion(c(3), &[c(2)]).unwrap(), Replay::NotYet);
        assert_eq!(r.probe(c(4), None, None, false).unwrap(), Replay::NotYet);
        assert_eq!(
            r.completion(c(5), &[c(2)]).unwrap(),
            Replay::Logged(vec![c(2)])
        );
        assert_eq!(
            r.probe(c(6), Some(1), None, false).unwrap(),
            Replay::Logged(Some((1, 9)))
        );
        assert!(r.post_recv(c(7), Some(1)).unwrap().cancelled_later);
        assert_eq!(r.cancel(c(8), c(7)).unwrap(), Replay::Logged(true));
        assert_eq!(r.completion(c(9), &[]).unwrap(), Replay::Free);
    }

    #[test]
    fn every_mismatch_is_a_divergence_naming_call_and_event() {
        let events = || {
            vec![
                Event::Match {
                    recv: c(2),
                    source: 3,
                },
                Event::NoneRun {
                    lane: 0,
                    first: 3,
                    last: 4,
                },
                Event::Delivery {
                    call: c(5),
                    completed: vec![c(2)],
                },
                Event::Cancel {
                    call: c(6),
                    request: c(1),
                    cancelled: false,
                },
            ]
        };
        // A logged match at what is now a send.
        let e = log(events()).plain(c(2), "a send").unwrap_err();
        assert_eq!((e.call, e.event), (c(2), Some(1)));
        assert!(e.what.contains("now a send"), "{e}");
        // A logged ANY_SOURCE match at a named receive.
        assert!(log(events()).post_recv(c(2), Some(3)).is_err());
        // A send inside a logged run of failed tests; a receive may be.
        let mut r = log(events());
        r.post_recv(c(2), None).unwrap();
        assert_eq!(r.plain(c(3), "a send").unwrap_err().event, Some(2));
        assert_eq!(r.post_recv(c(3), Some(1)).unwrap(), RecvAnswer::default());
        // A delivery of a request the call was not given.
        let mut r = log(events());
        r.post_recv(c(2), None).unwrap();
        let e = r.completion(c(5), &[c(7)]).unwrap_err();
        assert!(e.what.contains("call 0:2"), "{e}");
        // Re-execution passes a logged outcome without making its call.
        let mut r = log(events());
        r.post_recv(c(2), None).unwrap();
        let e = r.plain(c(6), "a send").unwrap_err();
        assert_eq!((e.call, e.event), (c(5), Some(3)));
        // A cancel of another receive.
        let mut r = log(events());
        r.post_recv(c(2), None).unwrap();
        r.completion(c(5), &[c(2)]).unwrap();
        assert!(r.cancel(c(6), c(4)).is_err());
        // A probe that cannot give its logged answer.
        let mut r = log(vec![Event::Probe {
            call: c(1),
            found: true,
            source: 2,
            tag: 5,
            length: 0,
        }]);
        assert!(r.probe(c(1), Some(3), None, false).is_err());
        // A blocking ANY_SOURCE probe is always logged.
        let mut r = log(vec![Event::NoneRun {
            lane: 0,
            first: 2,
            last: 2,
        }]);
        assert!(r.probe(c(1), None, None, true).is_err());
        // So is a cancel.
        let mut r = log(vec![Event::NoneRun {
            lane: 0,
            first: 2,
            last: 2,
        }]);
        assert!(r.cancel(c(1), c(0)).is_err());
    }

    #[test]
    fn finishing_before_the_last_logged_event_is_a_divergence() {
        let mut r = log(vec![
            Event::Match {
                recv: c(1),
                source: 0,
            },
            Event::NoneRun {
                lane: 0,
                first: 2,
                last: 4,
            },
        ]);
        r.post_recv(c(1), None).unwrap();
        assert_eq!(r.completion(c(2), &[]).unwrap(), Replay::NotYet);
        let e = r.finish().unwrap_err();
        assert_eq!((e.call, e.event), (c(4), Some(2)));
        assert_eq!(r.completion(c(4), &[]).unwrap(), Replay::NotYet);
        r.finish().unwrap();
        let e = log(vec![Event::Match {
            recv: c(1),
            source: 0,
        }])
        .finish()
        .unwrap_err();
        assert!(e.what.contains("without making it"), "{e}");
    }

    #[test]
    fn a_checkpoint_while_replaying_keeps_the_events_after_it() {
        let mut r = log(vec![
            Event::Match {
                recv: c(5),
                source: 1,
            },
            Event::NoneRun {
                lane: 0,
                first: 2,
                last: 3,
            },
            Event::Delivery {
                call: c(4),
                completed: vec![],
            },
        ]);
        assert_eq!(r.first_event_after(&[(0, 1)]), Some(1));
        assert_eq!(r.first_event_after(&[(0, 3)]), Some(1));
        r.completion(c(4), &[]).unwrap();
        assert_eq!(r.first_event_after(&[(0, 4)]), Some(1));
        r.post_recv(c(5), None).unwrap();
        assert_eq!(r.first_event_after(&[(0, 5)]), None);
    }

    #[test]
    fn a_checkpoint_hides_the_events_before_it() {
        let r = ReplayLog::new(
            vec![
                (
                    1,
                    Event::Match {
                        recv: c(2),
                        source: 1,
                    },
                ),
                (
                    2,
                    Event::NoneRun {
                        lane: 0,
                        first: 3,
                        last: 9,
                    },
                ),
            ],
            &[(0, 5)],
        );
        assert_eq!(r.len(), 1);
        assert_eq!(r.ends(), vec![(0, 9)]);
        assert!(r.none_run_at(c(6)).is_some());
        assert!(r.none_run_at(c(5)).is_none());
    }

    #[test]
    fn lanes_replay_on_their_own_in_any_interleaving() {
        let a = |n| CallId::new(5, n);
        let b = |n| CallId::new(9, n);
        let events = || {
            ReplayLog::new(
                vec![
                    (
                        1,
                        Event::Match {
                            recv: a(1),
                            source: 3,
                        },
                    ),
                    (
                        2,
                        Event::NoneRun {
                            lane: 9,
                            first: 1,
                            last: 2,
                        },
                    ),
                    (
                        3,
                        Event::Delivery {
                            call: b(3),
                            completed: vec![b(1)],
                        },
                    ),
                ],
                &[],
            )
        };
        assert_eq!(events().ends(), vec![(5, 1), (9, 3)]);
        // Lane 9 first, then lane 5; and the other way round.
        for nine_first in [true, false] {
            let mut r = events();
            let lane5 = |r: &mut ReplayLog| {
                assert_eq!(r.post_recv(a(1), None).unwrap().source, Some(3));
                // Past lane 5's end while lane 9 still replays: free.
                assert_eq!(r.completion(a(2), &[a(1)]).unwrap(), Replay::Free);
            };
            if !nine_first {
                lane5(&mut r);
                assert!(!r.done());
            }
            assert_eq!(r.completion(b(2), &[b(1)]).unwrap(), Replay::NotYet);
            assert_eq!(
                r.completion(b(3), &[b(1)]).unwrap(),
                Replay::Logged(vec![b(1)])
            );
            if nine_first {
                assert!(!r.done());
                lane5(&mut r);
            }
            assert!(r.done());
            r.finish().unwrap();
        }
        // Going past a lane's logged outcome is that lane's divergence only.
        let mut r = events();
        r.plain(b(4), "a send").unwrap_err();
        let mut r = events();
        r.plain(a(2), "a send").unwrap_err();
        assert_eq!(
            r.completion(b(3), &[b(1)]).unwrap(),
            Replay::Logged(vec![b(1)])
        );
        // A checkpoint keeps the events after it in each lane.
        let r = events();
        assert_eq!(r.first_event_after(&[(5, 1)]), Some(2));
        assert_eq!(r.first_event_after(&[(5, 1), (9, 2)]), Some(3));
        assert_eq!(r.first_event_after(&[(5, 1), (9, 3)]), None);
        // ... and a restart from it skips the events before it in each lane.
        let r = ReplayLog::new(
            vec![
                (
                    1,
                    Event::Match {
                        recv: a(1),
                        source: 3,
                    },
                ),
                (
                    3,
                    Event::Delivery {
                        call: b(3),
                        completed: vec![b(1)],
                    },
                ),
            ],
            &[(5, 1), (9, 2)],
        );
        assert_eq!(r.ends(), vec![(9, 3)]);
        assert_eq!(r.len(), 1);
    }
}
