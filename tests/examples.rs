//! The example applications run under `vpml run` and are piecewise
//! deterministic: the same inputs and rank count give the same output bits.

mod common;

use std::process::Command;

use common::{example, serial, vpml};

/// Run an example; return its stdout lines that are reproducible (all of
/// them: the examples print timing only when asked).
fn run(n: usize, name: &str, args: &[&str]) -> String {
    let _g = serial();
    let out = Command::new(vpml())
        .args(["run", "-n", &n.to_string(), "--timeout", "300"])
        .arg(example(name))
        .args(args)
        .output()
        .expect("run vpml");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name} on {n} ranks: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn value<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {key:?} line in:\n{out}"))
}

#[test]
fn heat3d_gives_the_same_checksum_in_three_runs() {
    let args = ["--points", "6x6x12", "--steps", "20"];
    let first = run(4, "heat3d", &args);
    for _ in 0..2 {
        assert_eq!(run(4, "heat3d", &args), first);
    }
    let err: f64 = value(&first, "l2_error").parse().unwrap();
    assert!(err < 1e-3, "heat3d error {err} is implausibly large");
}

#[test]
fn heat3d_error_is_second_order() {
    // Same final time; h halves (8 -> 16 intervals) and dt = h², so the
    // error should drop by about 4.
    let coarse = run(
        1,
        "heat3d",
        &["--points", "7x7x7", "--dt", "0.015625", "--steps", "8"],
    );
    let fine = run(
        8,
        "heat3d",
        &[
            "--points",
            "8x8x8",
            "--dt",
            "0.00346020761",
            "--steps",
            "36",
        ],
    );
    let (e1, e2): (f64, f64) = (
        value(&coarse, "l2_error").parse().unwrap(),
        value(&fine, "l2_error").parse().unwrap(),
    );
    let ratio = e1 / e2;
    assert!(
        (3.0..5.5).contains(&ratio),
        "error ratio {ratio} ({e1} / {e2}) is not second order"
    );
}

#[test]
fn pattern_programs_run_and_are_deterministic() {
    for (name, n, args) in [
        ("cg-pattern", 4, vec!["--iterations", "50"]),
        ("cg-pattern", 6, vec!["--iterations", "50"]),
        ("mg-pattern", 8, vec!["--cycles", "5"]),
        ("lu-pattern", 6, vec!["--iterations", "5"]),
        ("request-mix", 5, vec!["--rounds", "60", "--seed", "7"]),
    ] {
        let a = run(n, name, &args);
        let b = run(n, name, &args);
        assert_eq!(a, b, "{name} on {n} ranks printed different results");
        value(&a, "checksum");
    }
    let mg = run(4, "mg-pattern", &["--cycles", "3"]);
    assert!(
        value(&mg, "any_source_receives").contains("(33.3 %)"),
        "{mg}"
    );
    let lu = run(4, "lu-pattern", &["--iterations", "3"]);
    assert!(
        value(&lu, "any_source_receives").contains("(1.0 %)"),
        "{lu}"
    );
}

#[test]
fn anysource_pingpong_and_pingpong_run() {
    let out = run(2, "anysource-pingpong", &["--max", "65536", "--json"]);
    assert_eq!(
        out.lines().filter(|l| l.contains("latency_us")).count(),
        10,
        "{out}"
    );
    let out = run(3, "pingpong", &["--max", "1024", "--json"]);
    assert_eq!(
        out.lines().filter(|l| l.contains("bandwidth_mbs")).count(),
        12,
        "{out}"
    );
}
