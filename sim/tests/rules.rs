//! The simulator's own tests: the rules hold over many seeds, a broken rule
//! is caught, and a seed is an execution.

use vpml_sim::{Acknowledge, Options, Protocol, run};

/// Run `seed`, which must break no rule (else: how to run it again).
fn passing_run(seed: u64, opts: &Options) -> vpml_sim::Outcome {
    let out = run(seed, opts);
    assert_eq!(
        out.failure,
        None,
        "seed {seed} (crashes {:?}): run it again with `{}`",
        out.crashes,
        vpml_sim::replay_command(seed, opts)
    );
    out
}

/// Seeds every `cargo test` sweeps (the CLI sweeps more: `vpml-sim --minutes 10`).
const SEEDS: u64 = 1500;

#[test]
fn every_rule_holds_over_many_seeded_jobs_with_crashes() {
    let opts = Options::default();
    let (mut crashed, mut twice, mut lost) = (0, 0, 0);
    for seed in 1..=SEEDS {
        let out = passing_run(seed, &opts);
        assert!(
            out.outputs.iter().all(Option::is_some),
            "seed {seed}: {out:?}"
        );
        crashed += usize::from(!out.crashes.is_empty());
        twice += usize::from(matches!(&out.crashes[..], [(a, _), (b, _)] if a == b));
        lost += usize::from(!out.files_lost.is_empty());
    }
    // The sweep does exercise recovery: many jobs lose a rank, and some
    // lose the same rank twice (its second process crashes too).
    assert!(crashed > SEEDS as usize / 2, "only {crashed} jobs crashed");
    assert!(twice > 10, "only {twice} jobs crashed one rank twice");
    // And some lose a host: the rank restarts from its copy on the loggers.
    assert!(lost > 10, "only {lost} jobs lost a rank's files");
}

#[test]
fn bounded_sender_logs_move_records_to_disk_and_recover_from_there() {
    // Longer jobs: a bounded log fills its two one-page segments many
    // times over, so that re-sends after a crash come from disk.
    let opts = Options {
        rounds: 24,
        ..Options::default()
    };
    let (mut bounded_crashed, mut on_disk) = (0, 0);
    for seed in 1..=150 {
        let out = passing_run(seed, &opts);
        if out.bounded {
            bounded_crashed += usize::from(!out.crashes.is_empty());
            on_disk += out.disk_segments;
        }
    }
    assert!(
        bounded_crashed > 30,
        "only {bounded_crashed} bounded jobs crashed"
    );
    assert!(on_disk > 300, "only {on_disk} segments reached disk");
}

#[test]
fn the_bare_engine_runs_the_same_programs() {
    let opts = Options {
        protocol: Protocol::None,
        ..Options::default()
    };
    for seed in 1..=200 {
        let out = run(seed, &opts);
        assert_eq!(out.failure, None, "seed {seed}");
    }
}

#[test]
fn a_client_that_acknowledges_too_early_breaks_the_commit_rule_and_is_caught() {
    let opts = Options {
        acknowledge: Acknowledge::AtOnce,
        ..Options::default()
    };
    let caught = (1..=100).find_map(|seed| run(seed, &opts).failure);
    let why = caught.expect("no seed of 100 caught a client that never waits for the loggers");
    assert!(why.starts_with("commit rule broken"), "{why}");
}

#[test]
fn a_seed_is_one_execution() {
    let opts = Options {
        ranks: 4,
        rounds: 8,
        ..Options::default()
    };
    for seed in [3, 0xdead_beef, u64::MAX] {
        let first = run(seed, &opts);
        assert_eq!(first.failure, None);
        assert_eq!(run(seed, &opts), first, "seed {seed} ran differently twice");
    }
    // And different seeds do explore different executions.
    let outputs: std::collections::BTreeSet<_> = (1..=20).map(|s| run(s, &opts).outputs).collect();
    assert!(
        outputs.len() > 15,
        "20 seeds gave only {} executions",
        outputs.len()
    );
}

#[test]
fn the_launchers_supervisor_decides_and_a_job_past_max_restarts_ends_loudly() {
    // `vpml run`'s own Supervisor hears of each crash: with one restart
    // allowed, a job whose ranks crash twice ends with its one line.
    let opts = Options {
        max_crashes: 2,
        max_restarts: 1,
        ..Options::default()
    };
    let mut ended = 0;
    for seed in 1..=300 {
        let out = run(seed, &opts);
        match out.crashes.len() {
            0 | 1 => assert_eq!(out.failure, None, "seed {seed}: {out:?}"),
            _ => {
                // Unless the second crash came when its rank's work was
                // done (it had finalized, and so had every other rank).
                if let Some(why) = &out.failure {
                    assert!(
                        why.contains("no restarts left (--max-restarts 1)"),
                        "seed {seed}: {why}"
                    );
                    ended += 1;
                }
            }
        }
    }
    assert!(ended > 10, "only {ended} jobs ended for want of restarts");
}
