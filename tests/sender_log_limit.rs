//! The sender log within its memory limit (`--sender-log-limit`): real
//! jobs through the real launcher, with real event loggers, whose sender
//! logs move nearly every record to disk (`VPML_LOG_SEGMENT_SIZE` makes
//! segments small, the limit holds two to four of them).
//!
//! * A rank killed mid-run recovers from messages its peers re-send from
//!   disk: `tests/c/nondet.c` (every non-deterministic MPI call, later
//!   sends depending on each outcome, a conservation check at the end)
//!   gives the failure-free answer, and `--stats` shows the logs did move
//!   to disk and stayed within their memory.
//! * When the disk the log moves to is full too, the job stops with one
//!   line naming the limit and the directory. That test mounts a small
//!   tmpfs in a mount namespace of its own (`unshare -m`, as root); where
//!   that is not allowed it says it is skipped.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{mpicc, seed, serial, vpml};

/// Segments of 64 KiB: a rank of `nondet 200` logs about 2 MiB, so about
/// thirty of them move to disk.
const SEGMENT: &str = "65536";

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `vpml run -n 4 --protocol pessimist --stats <launcher> program <args>`
/// with small sender-log segments.
fn job(launcher: &[&str], program: &Path, args: &[&str]) -> Output {
    Command::new(vpml())
        .env("VPML_LOG_SEGMENT_SIZE", SEGMENT)
        .args(["run", "-n", "4", "--timeout", "240"])
        .args(["--protocol", "pessimist", "--stats"])
        .args(launcher)
        .arg(program)
        .args(args)
        .output()
        .expect("run vpml")
}

/// Every value of counter `key` in the `--stats` lines of `stderr`, by rank.
fn stat(stderr: &str, key: &str) -> Vec<u64> {
    let prefix = format!("{key}=");
    stderr
        .lines()
        .filter(|l| l.starts_with("vpml stats: rank "))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix(prefix.as_str()))
                .and_then(|v| v.parse().ok())
        })
        .collect()
}

#[test]
fn recovery_from_records_moved_to_disk_is_exact() {
    let _g = serial();
    let prog = mpicc("nondet");
    let want = "nondet: 200 iterations on 4 ranks, conservation ok\n";
    let limit: u64 = 256 << 10;
    let s = seed();
    eprintln!("kill seed {s} (VPML_TEST_SEED={s} replays it)");
    // (transport, checkpoint every N iterations (0: never), kills)
    let plans = [
        ("shm", "0", 0),
        ("shm", "0", 2),
        ("tcp", "0", 1),
        ("shm", "20", 2),
    ];
    for (i, (transport, every, kills)) in plans.into_iter().enumerate() {
        let inject = format!("random:{kills}@1.0");
        let seed = s.wrapping_add(i as u64).to_string();
        let mut launcher = vec!["--transport", transport, "--sender-log-limit", "256K"];
        if kills > 0 {
            launcher.extend(["--inject-failure", &inject, "--inject-seed", &seed]);
        }
        let out = job(&launcher, &prog, &["200", every]);
        let stderr = text(&out.stderr);
        let what = format!("{transport}, checkpoint every {every}, {kills} kill(s)");
        assert!(
            out.status.success() && text(&out.stdout) == want,
            "{what}: {} (stdout {:?})\n{stderr}",
            out.status,
            text(&out.stdout)
        );
        // Every rank that finished moved segments to disk and never held
        // more memory than its limit, but for a segment each time the
        // transport still sent from all the others (over TCP).
        let moved = stat(&stderr, "sender_log_segments_to_disk");
        let peak = stat(&stderr, "sender_log_memory_peak_bytes");
        let over = stat(&stderr, "sender_log_over_limit");
        assert_eq!(moved.len(), 4, "{what}: no stats line per rank\n{stderr}");
        assert!(moved.iter().all(|&m| m >= 5), "{what}: moved {moved:?}");
        for (p, o) in peak.iter().zip(&over) {
            let allowed = limit + o * SEGMENT.parse::<u64>().unwrap_or(0);
            assert!(
                *p > 0 && *p <= allowed,
                "{what}: memory peaks {peak:?} over {limit} (over the limit {over:?} times)"
            );
        }
        eprintln!(
            "{what}: {} restart(s), segments moved {moved:?}, consistent",
            stderr.matches("restarted it as incarnation").count()
        );
    }
}

#[test]
fn a_full_disk_beyond_the_memory_limit_stops_the_job_with_one_line() {
    let _g = serial();
    let prog = mpicc("nondet");
    let dir = tempfile::tempdir().expect("temporary directory");
    let small = dir.path().join("small-disk");
    std::fs::create_dir(&small).expect("mount point");
    // A 1 MiB file system for the moved segments: four ranks logging
    // about 2 MiB each fill it.
    let script = format!(
        "mount -t tmpfs -o size=1m vpml-test {0} || exit 99; exec {1} run -n 4 --timeout 240 \
         --protocol pessimist --sender-log-limit 128K --spill-dir {0} {2} 200 0",
        small.display(),
        vpml().display(),
        prog.display()
    );
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .env("VPML_LOG_SEGMENT_SIZE", SEGMENT)
        .output();
    let out = match out {
        Ok(o) if o.status.code() != Some(99) && !text(&o.stderr).contains("unshare failed") => o,
        Ok(o) => {
            eprintln!(
                "skipped: cannot mount a small file system here: {}",
                text(&o.stderr).trim()
            );
            return;
        }
        Err(e) => {
            eprintln!("skipped: cannot run unshare: {e}");
            return;
        }
    };
    let stderr = text(&out.stderr);
    assert!(
        !out.status.success(),
        "the job should have stopped\n{stderr}"
    );
    assert!(
        !text(&out.stdout).contains("conservation ok"),
        "the job must not finish: {stderr}"
    );
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("the sender log is full"))
        .collect();
    assert!(!lines.is_empty(), "no line says the log is full:\n{stderr}");
    let line = lines[0];
    for part in [
        "128 KiB in memory",
        "--sender-log-limit",
        &small.display().to_string(),
        "No space left on device",
    ] {
        assert!(line.contains(part), "{part:?} missing from {line}");
    }
}
