//! Model-based property test: the indexed matching queues behave exactly
//! like a flat, obviously-correct reference model under random sequences of
//! arrivals, posts, probes and cancels.

use proptest::prelude::*;
use vpml_pml::matching::{Envelope, MatchQueues, RecvSpec};

#[derive(Clone, Debug)]
enum Op {
    Arrive {
        source: usize,
        tag: i32,
        context: u32,
    },
    Post(RecvSpec),
    Probe(RecvSpec),
    Cancel(usize),
}

fn spec() -> impl Strategy<Value = RecvSpec> {
    (
        prop::option::weighted(0.7, 0usize..4),
        prop::option::weighted(0.7, 0i32..3),
        0u32..2,
    )
        .prop_map(|(source, tag, context)| RecvSpec {
            source,
            tag,
            context,
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..4, 0i32..3, 0u32..2).prop_map(|(source, tag, context)| Op::Arrive { source, tag, context }),
        4 => spec().prop_map(Op::Post),
        1 => spec().prop_map(Op::Probe),
        1 => (0usize..64).prop_map(Op::Cancel),
    ]
}

/// The reference: two flat lists searched front to back.
#[derive(Default)]
struct Model {
    posted: Vec<(RecvSpec, u32)>,
    unexpected: Vec<(Envelope, u64)>,
}

/// What one operation produced, in a form both sides can report.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// (receive id, message id) matched.
    Matched(u32, u64),
    Queued,
    Probed(Option<u64>),
    Cancelled(bool),
}

impl Model {
    fn arrive(&mut self, env: Envelope, msg: u64) -> Outcome {
        match self.posted.iter().position(|(s, _)| s.accepts(&env)) {
            Some(i) => Outcome::Matched(self.posted.remove(i).1, msg),
            None => {
                self.unexpected.push((env, msg));
                Outcome::Queued
            }
        }
    }
    fn post(&mut self, spec: RecvSpec, id: u32) -> Outcome {
        match self.unexpected.iter().position(|(e, _)| spec.accepts(e)) {
            Some(i) => Outcome::Matched(id, self.unexpected.remove(i).1),
            None => {
                self.posted.push((spec, id));
                Outcome::Queued
            }
        }
    }
    fn probe(&self, spec: &RecvSpec) -> Outcome {
        Outcome::Probed(
            self.unexpected
                .iter()
                .find(|(e, _)| spec.accepts(e))
                .map(|(_, m)| *m),
        )
    }
    fn cancel(&mut self, id: u32) -> Outcome {
        match self.posted.iter().position(|(_, p)| *p == id) {
            Some(i) => {
                self.posted.remove(i);
                Outcome::Cancelled(true)
            }
            None => Outcome::Cancelled(false),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn indexed_queues_match_the_reference_model(ops in prop::collection::vec(op(), 1..200)) {
        let mut real: MatchQueues<u32, u64> = MatchQueues::new();
        let mut model = Model::default();
        let mut seq = [0u64; 4];
        let (mut next_msg, mut next_recv) = (0u64, 0u32);
        for op in ops {
            let (got, want) = match op {
                Op::Arrive { source, tag, context } => {
                    seq[source] += 1;
                    let env = Envelope { source, tag, context, seq: seq[source], len: 0 };
                    next_msg += 1;
                    let got = match real.match_arrival(&env) {
                        Some(id) => Outcome::Matched(id, next_msg),
                        None => {
                            real.push_unexpected(env, next_msg);
                            Outcome::Queued
                        }
                    };
                    (got, model.arrive(env, next_msg))
                }
                Op::Post(spec) => {
                    next_recv += 1;
                    let got = match real.take_unexpected(&spec) {
                        Some((env, msg)) => {
                            prop_assert!(spec.accepts(&env));
                            Outcome::Matched(next_recv, msg)
                        }
                        None => {
                            real.post(spec, next_recv);
                            Outcome::Queued
                        }
                    };
                    (got, model.post(spec, next_recv))
                }
                Op::Probe(spec) => (
                    Outcome::Probed(real.peek_unexpected(&spec).map(|(_, m)| *m)),
                    model.probe(&spec),
                ),
                Op::Cancel(k) => {
                    let id = k as u32 % (next_recv + 1);
                    (Outcome::Cancelled(real.remove_posted(&id)), model.cancel(id))
                }
            };
            prop_assert_eq!(got, want);
            prop_assert_eq!(real.posted_len(), model.posted.len());
            prop_assert_eq!(real.unexpected_len(), model.unexpected.len());
        }
    }
}
