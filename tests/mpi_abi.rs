//! Unmodified MPI C programs on vpml: a program compiled with MPICH's
//! `mpicc.mpich` runs on vpml's MPICH-ABI library (picked automatically by
//! `vpml run`), and recovers from a killed rank under `--protocol
//! pessimist` with the same output. Skipped (with a message) where MPICH's
//! compiler wrapper is not installed (`apt-get install -y mpich
//! libmpich-dev`).

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{serial, vpml};

/// `tests/c/ring.c` built with `mpicc.mpich`, or `None` if it cannot be.
fn ring() -> Option<PathBuf> {
    let out = std::env::temp_dir().join(format!("vpml-ring-mpich-{}", std::process::id()));
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/ring.c");
    match Command::new("mpicc.mpich")
        .args(["-O2", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
    {
        Ok(s) if s.success() => Some(out),
        _ => {
            eprintln!(
                "SKIPPED: mpicc.mpich is not installed (apt-get install -y mpich libmpich-dev)"
            );
            None
        }
    }
}

fn run(extra: &[&str], program: &PathBuf) -> (String, String, bool) {
    let out = Command::new(vpml())
        .args(["run", "-n", "4", "--timeout", "120"])
        .args(extra)
        .arg(program)
        .output()
        .expect("run vpml");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

#[test]
fn an_mpich_program_runs_unchanged_and_recovers_from_a_kill() {
    let _g = serial();
    let Some(prog) = ring() else { return };
    // The ring's result, computed as the program does.
    let (size, rounds) = (4i64, 200i64);
    let mut want = 0i64;
    for r in 0..rounds {
        let mut token = r;
        for rank in 1..size {
            token = token * 3 + rank;
        }
        want += token;
        let total: f64 = (0..size).map(|k| k as f64 + r as f64 * 0.5).sum();
        want += total as i64;
    }
    let (stdout, stderr, ok) = run(&[], &prog);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("runs on vpml's MPI library"), "{stderr}");
    assert_eq!(stdout, format!("ring checksum {want}\n"), "{stderr}");
    let (after_kill, stderr, ok) = run(
        &[
            "--protocol",
            "pessimist",
            "--inject-failure",
            "2@0.01",
            "--inject-failure",
            "2@restart+0.002",
        ],
        &prog,
    );
    assert!(ok, "{stderr}");
    assert_eq!(after_kill, stdout, "{stderr}");
    let _ = std::fs::remove_file(&prog);
}
