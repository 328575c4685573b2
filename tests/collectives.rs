//! Communicators and collectives against sequential references, through
//! real jobs (checks in `tests/programs/collective_checks.rs`).

mod common;

use std::process::Command;

use common::{example, serial, vpml};

fn run(n: usize, mode: &str) -> String {
    let _g = serial();
    let out = Command::new(vpml())
        .args(["run", "-n", &n.to_string(), "--timeout", "300"])
        .arg(example("collective-checks"))
        .arg(mode)
        .output()
        .expect("run vpml");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{n} ranks, {mode}: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn every_collective_matches_the_reference_on_1_to_9_ranks() {
    for n in 1..=9 {
        let out = run(n, "all");
        assert!(out.lines().any(|l| l == "ok all"), "{n} ranks:\n{out}");
    }
}

#[test]
fn collectives_work_over_tcp() {
    let _g = serial();
    let out = Command::new(vpml())
        .args(["run", "-n", "5", "--transport", "tcp", "--timeout", "300"])
        .arg(example("collective-checks"))
        .arg("all")
        .output()
        .expect("run vpml");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.lines().any(|l| l == "ok all"),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn floating_point_allreduce_is_bitwise_identical_across_20_runs() {
    for n in [6, 8] {
        let hashes: Vec<String> = (0..20)
            .map(|_| {
                let out = run(n, "fp-hash");
                out.lines()
                    .find_map(|l| l.strip_prefix("hash ").map(str::to_string))
                    .expect("a hash line")
            })
            .collect();
        assert!(
            hashes.iter().all(|h| *h == hashes[0]),
            "{n} ranks: results differ between runs: {hashes:?}"
        );
    }
}
