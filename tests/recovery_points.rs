//! Crash points, not just crash times: a process dies at each named fault
//! point of the protocol (`vpml-fault-points`), in turn, and the job's
//! output must be the failure-free one, byte for byte.
//!
//! Three programs, each at every point it reaches: `tests/c/nondet.c`
//! (every non-deterministic MPI call, checkpoints; reaches them all),
//! `heat3d` (deterministic, checkpoints) and `request-mix` (every
//! completion style, ANY_SOURCE, no checkpoints). A point a program is
//! listed as reaching but that never fires fails the test: each run must
//! print the fault point's line and restart what died.
//!
//! Ranks die at points in the send and receive paths, while
//! checkpointing, and — killed once already — at each stage of their
//! recovery; a running rank dies while it re-sends to a restarted peer
//! (two failures at once); event loggers die between receiving events and
//! storing them, and between storing and acknowledging them (with one
//! replica and with two).

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{HEAT, example, mpicc, serial, vpml};

/// What kills one run: `--inject-failure` specs and extra launcher options.
struct Crash {
    point: &'static str,
    specs: Vec<String>,
    launcher: Vec<&'static str>,
    envs: Vec<(&'static str, &'static str)>,
}

/// The crashes that exercise `point`: the process and the hit it dies at
/// (`mid`: about the middle of the run, counted in one rank's sends).
fn crashes_at(point: &'static str, mid: u64) -> Vec<Crash> {
    let one = |spec: String| Crash {
        point,
        specs: vec![spec],
        launcher: Vec::new(),
        envs: Vec::new(),
    };
    // A first crash mid-run, after which rank 1 recovers.
    let first = format!("1@point:send.after_log_append#{mid}");
    match point.split('.').next() {
        Some("logger") => vec![
            one(format!("logger:0@point:{point}#{}", mid / 4)),
            Crash {
                point,
                specs: vec![format!("logger:1@point:{point}#{}", mid / 4)],
                launcher: vec!["--event-loggers", "2", "--replicas", "2"],
                envs: Vec::new(),
            },
        ],
        Some("recovery") if point == "recovery.resending" => vec![Crash {
            point,
            // Rank 0 dies while it re-sends to the restarted rank 1.
            specs: vec![first, format!("0@point:{point}")],
            launcher: Vec::new(),
            envs: Vec::new(),
        }],
        Some("recovery") if point == "recovery.restoring_copy" => vec![Crash {
            point,
            // Rank 1 dies with its files, as with its host, and dies again
            // while it fetches its checkpoint back from the loggers.
            specs: vec![
                format!("{first}:lose-files"),
                format!("1@restart+point:{point}"),
            ],
            launcher: Vec::new(),
            envs: vec![("VPML_CHECKPOINT_COPIES", "loggers")],
        }],
        Some("recovery") => {
            let hit = if point == "recovery.replaying" { 3 } else { 1 };
            vec![Crash {
                point,
                specs: vec![first, format!("1@restart+point:{point}#{hit}")],
                launcher: Vec::new(),
                envs: Vec::new(),
            }]
        }
        Some("checkpoint") => vec![one(format!("2@point:{point}#2"))],
        // Segments of 64 KiB: each rank moves dozens to disk.
        Some("log") => vec![Crash {
            point,
            specs: vec![format!("2@point:{point}#5")],
            launcher: vec!["--sender-log-limit", "256K"],
            envs: vec![("VPML_LOG_SEGMENT_SIZE", "65536")],
        }],
        _ => {
            // (Few sends wait for events: most find them durable.)
            let hit = match point {
                "recv.after_match" => 10,
                "send.before_events_durable" | "send.after_events_durable" => 3,
                "event.after_put" => mid / 4,
                _ => mid,
            };
            vec![one(format!("2@point:{point}#{hit}"))]
        }
    }
}

fn run(program: &Path, args: &[&str], launcher: &[&str], specs: &[String]) -> Output {
    run_with(program, args, launcher, specs, &[])
}

fn run_with(
    program: &Path,
    args: &[&str],
    launcher: &[&str],
    specs: &[String],
    envs: &[(&str, &str)],
) -> Output {
    let mut cmd = Command::new(vpml());
    cmd.envs(envs.iter().copied());
    cmd.args([
        "run",
        "-n",
        "4",
        "--timeout",
        "240",
        "--protocol",
        "pessimist",
    ])
    .args(launcher);
    for s in specs {
        cmd.args(["--inject-failure", s]);
    }
    cmd.arg(program).args(args).output().expect("run vpml")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Kill at every point of `vpml_fault_points::ALL` but `unreached`, and
/// compare each run's output with the failure-free one. `sends`: about
/// how many messages one rank sends in the run.
fn sweep(program: &Path, args: &[&str], unreached: &[&str], sends: u64) {
    let _g = serial();
    let reference = run(program, args, &[], &[]);
    assert!(
        reference.status.success(),
        "failure-free run failed: {}",
        text(&reference.stderr)
    );
    for unknown in unreached {
        assert!(vpml_fault_points::is_known(unknown), "{unknown}");
    }
    let mut ran = 0;
    for (point, _) in vpml_fault_points::ALL {
        // (A rank that dies in start-up ends the job: recovery_exact.rs.
        // Coordinated checkpointing's points: coordinated.rs.)
        if unreached.contains(point)
            || point.starts_with("start.")
            || point.starts_with("coordinated.")
        {
            continue;
        }
        for crash in crashes_at(point, sends * 2 / 5) {
            let out = run_with(program, args, &crash.launcher, &crash.specs, &crash.envs);
            let err = text(&out.stderr);
            let what = format!(
                "{} {:?} {:?}",
                program.display(),
                crash.launcher,
                crash.specs
            );
            assert!(out.status.success(), "{what}: the job failed:\n{err}");
            assert!(
                err.contains(&format!("killed at fault point {}", crash.point)),
                "{what}: the point was never reached:\n{err}"
            );
            assert!(
                err.contains("restarted it as incarnation")
                    || err.contains("started it again from"),
                "{what}: nothing was restarted:\n{err}"
            );
            assert_eq!(
                text(&out.stdout),
                text(&reference.stdout),
                "{what}: the output differs from the failure-free run:\n{err}"
            );
            ran += 1;
        }
    }
    eprintln!("{}: {ran} crashes, every output exact", program.display());
}

#[test]
fn recovery_at_every_fault_point_of_the_nondeterministic_c_program_is_exact() {
    let prog = mpicc("nondet");
    sweep(&prog, &["200", "20"], &[], 1500);
}

#[test]
fn recovery_at_every_fault_point_of_heat3d_is_exact() {
    // No non-deterministic call: no events to log, wait for or replay.
    let unreached = [
        "recv.after_match",
        "event.after_put",
        "send.before_events_durable",
        "send.after_events_durable",
        "recovery.replaying",
        "logger.received",
        "logger.before_ack",
    ];
    sweep(&example("heat3d"), HEAT, &unreached, 12000);
}

#[test]
fn recovery_at_every_fault_point_of_request_mix_is_exact() {
    // No checkpoints: recovery starts from the beginning.
    let unreached = [
        "checkpoint.mid_write",
        "checkpoint.after_write",
        "checkpoint.before_gc",
        "recovery.loaded_checkpoint",
        "recovery.restoring_copy",
    ];
    sweep(
        &example("request-mix"),
        &["--rounds", "120"],
        &unreached,
        600,
    );
}

#[test]
fn recovery_at_every_checkpoint_point_keeps_c_output_exact() {
    // `ckpt lines`: rank 2 prints with plain printf into the launcher's
    // pipe, so C's stdio holds lines across checkpoints. A rank that dies
    // after its checkpoint is saved must not take lines printed before
    // it along, nor may its successor print any twice.
    let _g = serial();
    let prog = mpicc("ckpt");
    let reference = run(&prog, &["lines"], &[], &[]);
    assert!(reference.status.success(), "{}", text(&reference.stderr));
    for point in [
        "checkpoint.mid_write",
        "checkpoint.after_write",
        "checkpoint.before_gc",
    ] {
        for hit in [1, 2, 41] {
            let spec = format!("2@point:{point}#{hit}");
            let out = run(&prog, &["lines"], &[], std::slice::from_ref(&spec));
            let err = text(&out.stderr);
            assert!(out.status.success(), "{spec}: {err}");
            assert!(
                err.contains("restarted it as incarnation 1"),
                "{spec}: {err}"
            );
            assert_eq!(text(&out.stdout), text(&reference.stdout), "{spec}: {err}");
        }
    }
}

#[test]
fn recovery_points_name_a_known_point_or_the_job_does_not_start() {
    let out = Command::new(vpml())
        .args(["run", "-n", "2", "--protocol", "pessimist"])
        .args(["--inject-failure", "1@point:send.after_everything"])
        .arg(example("heat3d"))
        .output()
        .expect("run vpml");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no fault point named \"send.after_everything\"") && err.contains("known:"),
        "{err}"
    );
}

/// Logger availability: a logger dies mid-run (at an instant, not a
/// point), is started again, and later a rank dies and recovers from the
/// events the loggers hold — with one replica (the new logger reads its
/// files) and with two (the survivor acknowledges meanwhile).
#[test]
fn recovery_after_a_logger_dies_and_then_a_rank_is_exact() {
    let _g = serial();
    let prog = mpicc("nondet");
    let args = ["300", "25"];
    let reference = run(&prog, &args, &[], &[]);
    assert!(reference.status.success(), "{}", text(&reference.stderr));
    for launcher in [
        vec!["--event-loggers", "1"],
        vec!["--event-loggers", "2", "--replicas", "2"],
        vec![
            "--event-loggers",
            "3",
            "--replicas",
            "2",
            "--transport",
            "tcp",
        ],
    ] {
        let specs = [
            // Early, while every rank logs: the job runs well past it.
            "logger:0@0.3".to_string(),
            // The rank's kill comes after many more sends.
            "1@point:send.after_frame#1500".to_string(),
        ];
        let out = run(&prog, &args, &launcher, &specs);
        let err = text(&out.stderr);
        assert!(out.status.success(), "{launcher:?}: {err}");
        assert!(
            err.contains("SIGKILL to event logger 0")
                && err.contains("warning: event logger 0 at")
                && err.contains("started it again from"),
            "{launcher:?}: the logger was not killed and started again:\n{err}"
        );
        assert!(
            err.contains("killed at fault point send.after_frame")
                && err.contains("restarted it as incarnation 1"),
            "{launcher:?}: rank 1 was not killed and restarted:\n{err}"
        );
        assert!(
            err.find("SIGKILL to event logger 0") < err.find("killed at fault point"),
            "{launcher:?}: the rank died before the logger:\n{err}"
        );
        assert_eq!(
            text(&out.stdout),
            text(&reference.stdout),
            "{launcher:?}: {err}"
        );
    }
}

/// A rank loses its files (as with its host) and restarts from its
/// checkpoint copy; later it crashes again (an ordinary crash: its log is
/// reopened from its files, the records the copy brought back included),
/// and then a peer crashes and needs what that rank sent it.
#[test]
fn recovery_after_lost_files_then_two_more_crashes_is_exact() {
    let _g = serial();
    let copies = [("VPML_CHECKPOINT_COPIES", "loggers")];
    let heat = example("heat3d");
    let reference = run_with(&heat, HEAT, &[], &[], &copies);
    assert!(reference.status.success(), "{}", text(&reference.stderr));
    let specs = [
        "1@point:send.after_log_append#3000:lose-files".to_string(),
        "1@restart+point:send.after_frame#2500".to_string(),
        "0@point:send.after_frame#9000".to_string(),
    ];
    let out = run_with(&heat, HEAT, &[], &specs, &copies);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("(its host was lost): restarting from the copy of checkpoint"),
        "{err}"
    );
    assert_eq!(
        err.matches("restarted it as incarnation").count(),
        3,
        "{err}"
    );
    assert_eq!(text(&out.stdout), text(&reference.stdout), "{err}");
}
