//! Coordinated checkpoint/restart (`--protocol coordinated`), end to end:
//! real jobs through the real launcher, a rank killed at each step of the
//! protocol — during work, before the first global checkpoint, with its
//! bookmarks sent (channels not yet drained), with its part written (the
//! others' maybe not), after the commit — every rank restarted from the
//! newest global checkpoint every rank wrote, and the job's output
//! compared byte for byte with a run without any protocol.

mod common;

use std::process::{Command, Output};

use common::{HEAT, example, serial, vpml};

fn run(protocol: &str, extra: &[&str], program: &str, args: &[&str]) -> Output {
    Command::new(vpml())
        .args(["run", "-n", "4", "--timeout", "120", "--protocol", protocol])
        .args(extra)
        .arg(example(program))
        .args(args)
        .output()
        .expect("run vpml")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Kill a rank at each of `specs` (one job each): every job ends with the
/// output of a run without protocol, after restarting all four ranks
/// from the global checkpoint `from` says (None: any).
fn same_output_after_kills(program: &str, args: &[&str], specs: &[(&str, Option<&str>)]) {
    same_output_after_kills_with(&[], program, args, specs);
}

/// [`same_output_after_kills`] with `launcher` options for the
/// coordinated runs.
fn same_output_after_kills_with(
    launcher: &[&str],
    program: &str,
    args: &[&str],
    specs: &[(&str, Option<&str>)],
) {
    let _guard = serial();
    let clean = run("none", &[], program, args);
    assert!(clean.status.success(), "{}", text(&clean.stderr));
    let coordinated = run("coordinated", launcher, program, args);
    assert!(
        coordinated.status.success(),
        "{}",
        text(&coordinated.stderr)
    );
    assert_eq!(
        text(&coordinated.stdout),
        text(&clean.stdout),
        "without failures"
    );
    for &(spec, from) in specs {
        let mut extra = launcher.to_vec();
        extra.extend(["--inject-failure", spec]);
        let out = run("coordinated", &extra, program, args);
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{spec}: {stderr}");
        assert_eq!(
            text(&out.stdout),
            text(&clean.stdout),
            "{spec}: output differs\n{stderr}"
        );
        let restarted = stderr
            .lines()
            .find_map(|l| l.split_once("restarted all 4 ranks from "))
            .map(|(_, rest)| rest)
            .unwrap_or_else(|| panic!("{spec}: no rollback:\n{stderr}"));
        if let Some(from) = from {
            assert!(
                restarted.starts_with(from),
                "{spec}: restarted from {restarted:?}, expected {from:?}\n{stderr}"
            );
        }
    }
}

#[test]
fn heat3d_restarts_from_the_last_global_checkpoint_after_a_kill_at_each_step() {
    let checkpoint_every_5: Vec<&str> = HEAT.to_vec();
    same_output_after_kills(
        "heat3d",
        &checkpoint_every_5,
        &[
            // Before the first checkpoint: from the beginning.
            ("2@point:send.after_frame#100", Some("the beginning")),
            // During work, between checkpoints.
            ("1@point:send.after_frame#2500", None),
            // Bookmarks sent, channels not drained: nobody wrote 3.
            (
                "3@point:coordinated.bookmarks_sent#3",
                Some("global checkpoint 2 "),
            ),
            // Its part written: the others' may be.
            ("0@point:coordinated.written#4", None),
            // After the commit: every rank wrote 5.
            (
                "2@point:coordinated.committed#5",
                Some("global checkpoint 5 "),
            ),
        ],
    );
}

#[test]
fn messages_in_flight_at_a_checkpoint_are_delivered_after_a_restart() {
    // Every checkpoint of `checkpoint-ring` has a message in flight on
    // every channel of the ring, and an ANY_SOURCE turn per step.
    same_output_after_kills(
        "scenarios",
        &["checkpoint-ring"],
        &[
            (
                "1@point:coordinated.bookmarks_sent#5",
                Some("global checkpoint 4 "),
            ),
            ("3@point:coordinated.written#7", None),
            (
                "0@point:coordinated.committed#9",
                Some("global checkpoint 9 "),
            ),
            ("2@point:send.after_frame#100", None),
        ],
    );
}

#[test]
fn the_lu_and_mg_patterns_restart_exactly_from_global_checkpoints() {
    // The head-to-head's other two programs (benches/suite/tradeoff.rs),
    // with the state they save: LU's wavefront (ANY_SOURCE now and then)
    // and MG's halo exchanges (a third ANY_SOURCE, nonblocking).
    same_output_after_kills(
        "lu-pattern",
        &["--iterations", "1500", "--checkpoint-every", "100"],
        &[
            // (Rank 2 sends about 100 messages an iteration: iteration
            // ~150, after the first checkpoint.)
            (
                "2@point:send.after_frame#15000",
                Some("global checkpoint 1 "),
            ),
            (
                "3@point:coordinated.bookmarks_sent#6",
                Some("global checkpoint 5 "),
            ),
            (
                "1@point:coordinated.committed#9",
                Some("global checkpoint 9 "),
            ),
        ],
    );
    same_output_after_kills(
        "mg-pattern",
        &["--cycles", "1500", "--checkpoint-every", "100"],
        &[
            // (About 33 sends a cycle: cycle ~150.)
            (
                "0@point:send.after_frame#5000",
                Some("global checkpoint 1 "),
            ),
            ("2@point:coordinated.written#4", None),
            (
                "1@point:coordinated.committed#11",
                Some("global checkpoint 11 "),
            ),
        ],
    );
}

#[test]
fn a_damaged_part_makes_the_restart_fall_back_to_the_previous_global_checkpoint() {
    let _guard = serial();
    let clean = run("none", &[], "scenarios", &["checkpoint-ring"]);
    let out = run(
        "coordinated",
        &[
            "--inject-failure",
            "1@point:coordinated.committed#4:corrupt-checkpoint",
        ],
        "scenarios",
        &["checkpoint-ring"],
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(text(&out.stdout), text(&clean.stdout), "{stderr}");
    assert!(
        stderr.contains("global checkpoint 4 is damaged: ")
            && stderr.contains("rank-1/checkpoints/ckpt-0000000004.vck: payload checksum mismatch"),
        "the launcher must name the damaged file:\n{stderr}"
    );
    assert!(
        stderr.contains("restarted all 4 ranks from global checkpoint 3 "),
        "{stderr}"
    );
}

#[test]
fn a_program_whose_messages_cross_its_checkpoint_calls_is_told_why_it_waits() {
    // Rank 1 waits, before its checkpoint call, for what rank 0 sends
    // after its own: no global checkpoint can be taken, and rank 0 says
    // whom it waits for, and why that may never come.
    let _guard = serial();
    let out = Command::new(vpml())
        .args([
            "run",
            "-n",
            "2",
            "--timeout",
            "15",
            "--protocol",
            "coordinated",
        ])
        .arg(example("scenarios"))
        .arg("checkpoint-crossing")
        .output()
        .expect("run vpml");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "{stderr}");
    assert!(
        stderr.contains(
            "vpml: rank 0: waiting 10 s for rank(s) [1] to reach global checkpoint 1 at checkpoint call 0; if they wait for a message sent after a checkpoint call, they never will"
        ),
        "{stderr}"
    );
}

#[test]
fn coordinated_across_hosts_refuses_loggers_it_did_not_start_with_one_line() {
    // Across hosts the restart looks for complete global checkpoints in
    // the copies on the loggers, which must be this launcher's own.
    let out = Command::new(vpml())
        .args([
            "run",
            "-n",
            "2",
            "--protocol",
            "coordinated",
            "--hosts",
            "a:1,b:1",
            "--event-logger-addrs",
            "127.0.0.1:9",
        ])
        .arg(example("scenarios"))
        .arg("hello")
        .output()
        .expect("run vpml");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr).trim(),
        "vpml run: --protocol coordinated across hosts keeps its checkpoint copies on event loggers this launcher starts: drop --event-logger-addrs"
    );
}

/// heat3d asking for no checkpoint of its own (its interval never comes):
/// every global checkpoint is asked for from outside.
const HEAT_ON_REQUEST: &[&str] = &[
    "--points",
    "6x6x24",
    "--steps",
    "200",
    "--output-interval",
    "25",
    "--checkpoint-interval",
    "1000000",
];

#[test]
fn vpml_checkpoint_and_sigusr1_reach_a_running_job() {
    let _guard = serial();
    // A directory of job files of our own: this job is the only one.
    let runtime = tempfile::tempdir().expect("temporary directory");
    let clean = run("none", &[], "heat3d", HEAT_ON_REQUEST);
    let job = Command::new(vpml())
        .env("XDG_RUNTIME_DIR", runtime.path())
        .args([
            "run",
            "-n",
            "4",
            "--timeout",
            "120",
            "--protocol",
            "coordinated",
        ])
        .arg(example("heat3d"))
        .args(HEAT_ON_REQUEST)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run vpml");
    let ask = || {
        Command::new(vpml())
            .env("XDG_RUNTIME_DIR", runtime.path())
            .arg("checkpoint")
            .output()
            .expect("vpml checkpoint")
    };
    // The job file appears once the launcher is up.
    let first = loop {
        let out = ask();
        if !text(&out.stderr).contains("no running job") {
            break out;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(first.status.success(), "{}", text(&first.stderr));
    let said = text(&first.stdout);
    assert!(
        said.starts_with("vpml checkpoint: job ")
            && said.ends_with(": global checkpoint 1 is complete\n"),
        "{said}"
    );
    // SAFETY: kill(2) on our own child, the launcher.
    let signalled = unsafe { libc::kill(job.id() as i32, libc::SIGUSR1) };
    assert_eq!(signalled, 0, "SIGUSR1 to the launcher");
    let second = ask();
    assert!(second.status.success(), "{}", text(&second.stderr));
    let out = job.wait_with_output().expect("wait for vpml");
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(text(&out.stdout), text(&clean.stdout), "{stderr}");
    assert!(
        stderr.contains("vpml run: SIGUSR1 asked for a global checkpoint")
            && stderr.contains("vpml run: global checkpoint 2 is complete"),
        "{stderr}"
    );
    // Once the job is gone, its file is too.
    let after = ask();
    assert_eq!(after.status.code(), Some(1));
    assert_eq!(
        text(&after.stderr),
        "vpml checkpoint: no running job of this user\n"
    );
}

#[test]
fn checkpoint_interval_asks_for_global_checkpoints_and_a_restart_uses_them() {
    same_output_after_kills_with(
        &["--checkpoint-interval", "0.2"],
        "heat3d",
        HEAT_ON_REQUEST,
        &[(
            "2@point:coordinated.committed#2",
            Some("global checkpoint 2 "),
        )],
    );
}

#[test]
fn checkpoint_requests_need_the_coordinated_protocol() {
    let out = Command::new(vpml())
        .args(["run", "-n", "2", "--checkpoint-interval", "5"])
        .arg(example("scenarios"))
        .arg("hello")
        .output()
        .expect("run vpml");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "vpml run: --checkpoint-interval asks for global checkpoints: it needs --protocol coordinated\n"
    );
}

#[test]
fn a_reused_log_dir_never_restarts_from_an_earlier_jobs_checkpoints() {
    let _guard = serial();
    let dir = tempfile::tempdir().expect("temporary directory");
    let log_dir = dir.path().to_str().expect("a UTF-8 path");
    let clean = run("none", &[], "scenarios", &["checkpoint-ring"]);
    // The first job leaves its last global checkpoints (19 and 20).
    let first = run(
        "coordinated",
        &["--log-dir", log_dir],
        "scenarios",
        &["checkpoint-ring"],
    );
    assert!(first.status.success(), "{}", text(&first.stderr));
    let out = run(
        "coordinated",
        &[
            "--log-dir",
            log_dir,
            "--inject-failure",
            "1@point:coordinated.committed#2",
        ],
        "scenarios",
        &["checkpoint-ring"],
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("restarted all 4 ranks from global checkpoint 2 "),
        "{stderr}"
    );
    assert_eq!(text(&out.stdout), text(&clean.stdout), "{stderr}");
}

#[test]
fn an_mpi_c_program_checkpointing_with_vpmlx_checkpoint_restarts_exactly() {
    // ckpt.c resumes at a checkpoint call: the restarted ranks propose
    // the next global checkpoint at once, while the last of them are
    // still connecting (a proposal sent over a link not yet up was lost).
    let prog = common::mpicc("ckpt");
    let prog = prog.to_str().expect("a UTF-8 path");
    let _guard = serial();
    let job = |protocol: &str, extra: &[&str]| {
        Command::new(vpml())
            .args(["run", "-n", "4", "--timeout", "120", "--protocol", protocol])
            .args(extra)
            .args([prog, "lines"])
            .output()
            .expect("run vpml")
    };
    let clean = job("none", &[]);
    assert!(clean.status.success(), "{}", text(&clean.stderr));
    // The first one lost its proposal in about one run in three.
    for spec in [
        "1@point:send.after_frame#3000",
        "1@point:send.after_frame#3000",
        "1@point:send.after_frame#3000",
        "1@point:send.after_frame#3000",
        "0@point:coordinated.bookmarks_sent#50",
        "3@point:coordinated.written#20",
    ] {
        let out = job("coordinated", &["--inject-failure", spec]);
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{spec}: {stderr}");
        assert!(
            stderr.contains("restarted all 4 ranks from global checkpoint"),
            "{spec}: {stderr}"
        );
        assert_eq!(text(&out.stdout), text(&clean.stdout), "{spec}: {stderr}");
    }
}
