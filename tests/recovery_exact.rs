//! Recovery is exact for every non-deterministic outcome, or it stops
//! loudly. Real jobs through the real launcher, with real event loggers
//! and ranks killed by SIGKILL; every test name starts with `recovery_`
//! (`cargo test recovery_` runs them with `tests/recovery.rs`).
//!
//! * `tests/c/nondet.c` makes later sends depend on every
//!   non-deterministic outcome an MPI program can observe and checks at
//!   the end that what each rank says it sent equals what the others
//!   received: a re-execution that answered any call differently breaks
//!   the check.
//! * `tests/c/intercomm.c` makes, uses and derives intercommunicators,
//!   `tests/c/nbc.c` runs nonblocking collectives: killed at each of
//!   their sends, they must still pass their checks.
//! * `tests/c/rma.c` uses one-sided communication: killed at each of its
//!   sends, it must still pass its checks (a fetch-and-op counter whose
//!   increments depend on the values fetched); with its dynamic window,
//!   which sends addresses, or once it made a shared-memory window, a kill
//!   must stop the job with one line.
//! * `tests/c/part.c` uses partitioned communication, its sends depending
//!   on `MPI_Parrived`'s outcomes: killed at each of its sends, it must
//!   still pass its checks.
//! * `tests/c/diverge.c` is not piecewise deterministic (its messages
//!   carry the process id): recovery must refuse it with one line.
//!
//! Kill instants come from `--inject-seed`, drawn from a seed each test
//! prints (`VPML_TEST_SEED` replays one).

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{mpicc, seed, serial, vpml};

/// `vpml run -n 4 --protocol pessimist <launcher> program <args>`.
fn job_command(launcher: &[String], program: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(vpml());
    cmd.args(["run", "-n", "4", "--timeout", "240"])
        .args(["--protocol", "pessimist"])
        .args(launcher)
        .arg(program)
        .args(args);
    cmd
}

/// [`job_command`], run to its end.
fn job(launcher: &[String], program: &Path, args: &[&str]) -> Output {
    job_command(launcher, program, args)
        .output()
        .expect("run vpml")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn restarts(stderr: &str) -> usize {
    stderr.matches("restarted it as incarnation").count()
}

#[test]
fn recovery_of_every_nondeterministic_c_call_is_consistent_after_random_kills() {
    let _g = serial();
    let prog = mpicc("nondet");
    let want = "nondet: 200 iterations on 4 ranks, conservation ok\n";
    let reference = job(&[], &prog, &["200", "20"]);
    assert!(reference.status.success(), "{}", text(&reference.stderr));
    assert_eq!(text(&reference.stdout), want);
    let s = seed();
    eprintln!("kill seed {s} (VPML_TEST_SEED={s} replays it)");
    // (transport, checkpoint every N iterations (0: never), kills)
    let plans = [
        ("shm", "0", 1),
        ("shm", "20", 2),
        ("tcp", "0", 2),
        ("tcp", "20", 1),
        ("shm", "20", 3),
    ];
    for (i, (transport, every, kills)) in plans.into_iter().enumerate() {
        let launcher: Vec<String> = [
            "--transport",
            transport,
            "--inject-failure",
            &format!("random:{kills}@1.0"),
            "--inject-seed",
            &s.wrapping_add(i as u64).to_string(),
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        let out = job(&launcher, &prog, &["200", every]);
        let stderr = text(&out.stderr);
        assert!(
            out.status.success() && text(&out.stdout) == want,
            "{transport}, checkpoint every {every}, {kills} kill(s): {} (stdout {:?})\n{stderr}",
            out.status,
            text(&out.stdout)
        );
        eprintln!(
            "{transport}, checkpoint every {every}: {} restart(s), consistent",
            restarts(&stderr)
        );
    }
}

#[test]
fn recovery_from_a_random_kill_drawn_in_the_first_millisecond() {
    // Random kill instants count from the moment every rank has joined:
    // drawn from the job's start, a 1 ms window killed ranks in start-up,
    // which stops the job instead of testing recovery.
    let _g = serial();
    let prog = mpicc("nondet");
    let want = "nondet: 200 iterations on 4 ranks, conservation ok\n";
    let s = seed();
    eprintln!("kill seed {s} (VPML_TEST_SEED={s} replays it)");
    let launcher: Vec<String> = [
        "--inject-failure",
        "random:1@0.001",
        "--inject-seed",
        &s.to_string(),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let out = job(&launcher, &prog, &["200", "0"]);
    let stderr = text(&out.stderr);
    assert!(
        out.status.success() && text(&out.stdout) == want,
        "{} (stdout {:?})\n{stderr}",
        out.status,
        text(&out.stdout)
    );
    assert_eq!(restarts(&stderr), 1, "{stderr}");
}

/// Kill each of `ranks` after its n-th send, for every n until a kill no
/// longer lands (at least `min_kills` must): `name` must pass its checks
/// with the same output every time.
fn exact_after_a_kill_at_each_send(name: &str, ranks: &[usize], min_kills: usize) {
    exact_after_kills_at_sends(name, &[], ranks, 1, min_kills);
}

/// [`exact_after_a_kill_at_each_send`], the program run with `args`.
fn exact_after_a_kill_at_each_send_with(
    name: &str,
    args: &[&str],
    ranks: &[usize],
    min_kills: usize,
) {
    exact_after_kills_at_sends(name, args, ranks, 1, min_kills);
}

/// Kill each of `ranks` after its 1st send, its `1 + stride`-th, its
/// `1 + 2 stride`-th and so on until a kill no longer lands: `name`, run
/// with `args`, must pass its checks with the same output every time.
fn exact_after_kills_at_sends(
    name: &str,
    args: &[&str],
    ranks: &[usize],
    stride: usize,
    min_kills: usize,
) {
    let _g = serial();
    let prog = mpicc(name);
    let reference = job(&[], &prog, args);
    let want = text(&reference.stdout);
    assert!(
        reference.status.success() && want.starts_with(&format!("{name} ok ")),
        "{want}{}",
        text(&reference.stderr)
    );
    for &rank in ranks {
        let mut landed = 0;
        for n in (1..).step_by(stride) {
            let kill = format!("{rank}@point:send.after_frame#{n}");
            let out = job(&["--inject-failure".into(), kill.clone()], &prog, args);
            let stderr = text(&out.stderr);
            assert!(
                out.status.success(),
                "kill {kill}: {} (stdout: {})\n{stderr}",
                out.status,
                text(&out.stdout)
            );
            assert_eq!(text(&out.stdout), want, "kill {kill}: {stderr}");
            if restarts(&stderr) == 0 {
                break;
            }
            landed += 1;
        }
        assert!(
            landed >= min_kills,
            "rank {rank}: only {landed} sends to kill at"
        );
    }
}

#[test]
fn recovery_of_intercommunicators_is_exact_after_a_kill_at_each_send() {
    // Rank 2 (group A, not its leader) and rank 3 (group B's leader):
    // making, using, deriving and merging intercommunicators.
    exact_after_a_kill_at_each_send("intercomm", &[2, 3], 20);
}

#[test]
fn recovery_of_threads_on_their_own_communicators_is_exact_after_kills_amid_them() {
    // Three threads per rank under MPI_THREAD_MULTIPLE, each on its own
    // communicator, every ANY_SOURCE match, Waitany and Testsome outcome
    // and failed Iprobe feeding its later sends: the restarted rank's
    // threads interleave differently, and must re-execute exactly (every
    // third send of ranks 1 and 2).
    exact_after_kills_at_sends("threadcomms", &[], &[1, 2], 3, 20);
}

#[test]
fn recovery_of_nonblocking_collectives_is_exact_after_a_kill_at_each_send() {
    // Collectives in flight together, completed by Waitany and by polling
    // Testall: their completions are logged and replayed.
    exact_after_a_kill_at_each_send("nbc", &[1, 2], 20);
}

#[test]
fn recovery_c_output_printed_before_a_checkpoint_is_neither_lost_nor_repeated() {
    let _g = serial();
    let prog = mpicc("ckpt");
    let reference = job(&[], &prog, &["lines"]);
    assert!(reference.status.success(), "{}", text(&reference.stderr));
    let want = text(&reference.stdout);
    assert_eq!(want.lines().count(), 2000 / 7 + 2, "{want}");
    // Rank 2 sends 3 messages a step: killed 30 % and 70 % of the way
    // (counted in sends, not seconds: a kill always lands mid-run).
    for hit in [1800, 4200] {
        let kill = format!("2@point:send.after_frame#{hit}");
        let out = job(
            &["--inject-failure".into(), kill.clone()],
            &prog,
            &["lines"],
        );
        let stderr = text(&out.stderr);
        assert!(
            out.status.success(),
            "kill {kill}: {} (stdout: {})\n{stderr}",
            out.status,
            text(&out.stdout)
        );
        assert_eq!(restarts(&stderr), 1, "kill {kill} landed: {stderr}");
        assert!(stderr.contains("rank 2 resumed at step"), "{stderr}");
        assert_eq!(text(&out.stdout), want, "kill {kill}: {stderr}");
    }
}

#[test]
fn recovery_replays_a_c_program_that_resumes_from_vpmlx_checkpoints() {
    let _g = serial();
    let prog = mpicc("nondet");
    let dir = tempfile::tempdir().expect("temporary directory");
    let rec = dir.path().join("rec");
    let out = job(
        &[format!("--record={}", rec.display())],
        &prog,
        &["60", "20"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let replay = Command::new(vpml())
        .args(["replay"])
        .arg(&rec)
        .args(["--rank", "1"])
        .output()
        .expect("run vpml replay");
    let stderr = text(&replay.stderr);
    assert!(replay.status.success(), "{stderr}");
    assert!(stderr.contains("no divergence"), "{stderr}");
}

#[test]
fn recovery_stops_with_one_line_when_re_execution_diverges() {
    let _g = serial();
    let prog = mpicc("diverge");
    let reference = job(&[], &prog, &[]);
    assert!(reference.status.success(), "{}", text(&reference.stderr));
    // Half-way through rank 1's 12000 sends (counted, not timed: the kill
    // always lands mid-run).
    let kill = "1@point:send.after_frame#6000".to_string();
    let out = job(&["--inject-failure".into(), kill.clone()], &prog, &[]);
    let stderr = text(&out.stderr);
    assert_eq!(restarts(&stderr), 1, "kill {kill} landed: {stderr}");
    assert_eq!(out.status.code(), Some(70), "{stderr}");
    assert!(
        !text(&out.stdout).contains("diverge sum"),
        "the job must not finish: {stderr}"
    );
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("diverged from its logged execution"))
        .collect();
    assert!(!lines.is_empty(), "no divergence line: {stderr}");
    let line = lines[0];
    for part in ["rank 1 (incarnation 1)", "send #1 to rank 0", "checksum"] {
        assert!(line.contains(part), "{part:?} missing from {line}");
    }
}

/// A rank whose threads call MPI at once (`MPI_THREAD_MULTIPLE`) is
/// re-executed exactly while each thread uses its own communicators; what
/// the log cannot replay — two threads on one communicator
/// (`MPI_COMM_SELF` here), threads making communicators, a one-sided
/// window under `MPI_THREAD_MULTIPLE` — stops the job with one line. Killed at a
/// send, the job either finishes with the failure-free output or stops
/// with one such line.
#[test]
fn recovery_of_a_rank_whose_threads_call_mpi_at_once_is_exact_or_stops_with_one_line() {
    let _g = serial();
    let prog = mpicc("multiple");
    let reference = job(&[], &prog, &[]);
    let want = text(&reference.stdout);
    assert!(want.starts_with("multiple ok "), "{want}");
    let reasons = [
        "two threads call MPI on",
        "a communicator is made while several threads call MPI",
        "a one-sided window is made under MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE",
    ];
    for n in [1, 40, 400] {
        let kill = format!("1@point:send.after_frame#{n}");
        let out = job(&["--inject-failure".into(), kill.clone()], &prog, &[]);
        let stderr = text(&out.stderr);
        assert_eq!(restarts(&stderr), 1, "kill {kill} landed: {stderr}");
        if out.status.success() {
            assert_eq!(text(&out.stdout), want, "kill {kill}: {stderr}");
            continue;
        }
        assert_eq!(out.status.code(), Some(70), "kill {kill}: {stderr}");
        assert!(
            !text(&out.stdout).contains("multiple ok"),
            "the job must not finish: {stderr}"
        );
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|l| reasons.iter().any(|r| l.contains(r)))
            .collect();
        assert_eq!(lines.len(), 1, "kill {kill}: {stderr}");
        assert!(
            lines[0].contains("rank 1 (incarnation 1) diverged"),
            "{}",
            lines[0]
        );
    }
}

#[test]
fn recovery_of_one_sided_communication_is_exact_after_a_kill_at_each_send() {
    // Rank 0 is the target of the locked counter, compare-and-swap and
    // post/wait; rank 1 an origin of every operation and a target in a
    // receive, a test loop and an allreduce. The dynamic window is left
    // out: it sends addresses, which differ in a restarted process (see
    // the next test); so are shared-memory windows, which no log can
    // replay (see the test after it); and so are the hundreds of
    // operations on allocated windows, which would make a kill at each
    // send take hundreds of jobs.
    exact_after_a_kill_at_each_send_with(
        "rma",
        &["no-addresses", "no-shared", "no-allocated"],
        &[0, 1],
        40,
    );
}

#[test]
fn recovery_of_partitioned_communication_is_exact_after_a_kill_at_each_send() {
    // Each rank's next sends depend on how many MPI_Parrived calls found
    // its receive incomplete: a restarted rank must replay those outcomes
    // for what it says it sent to match what arrived.
    exact_after_a_kill_at_each_send("part", &[1, 2], 20);
}

#[test]
fn recovery_of_a_program_that_sends_addresses_stops_the_job_with_one_line() {
    // rma.c's dynamic window exchanges heap addresses: a rank restarted
    // after sending them sends other ones when it re-executes, and the
    // job stops, saying so, instead of going on with other answers. (A
    // rank restarted before then just sends its new ones.) Every kill
    // gives the failure-free output or that one line.
    let _g = serial();
    let prog = mpicc("rma");
    // (Without the many operations on allocated windows: see above.)
    let args = ["no-allocated"];
    let want = text(&job(&[], &prog, &args).stdout);
    let mut stopped = 0;
    for n in (100..).step_by(10) {
        let kill = format!("1@point:send.after_frame#{n}");
        let out = job(&["--inject-failure".into(), kill.clone()], &prog, &args);
        let stderr = text(&out.stderr);
        if restarts(&stderr) == 0 {
            break;
        }
        if out.status.code() == Some(70) {
            assert_eq!(
                stderr.matches("diverged from its logged execution").count(),
                1,
                "kill {kill}: {stderr}"
            );
            assert!(!text(&out.stdout).contains("rma ok"), "kill {kill}");
            stopped += 1;
        } else {
            assert!(
                out.status.success(),
                "kill {kill}: {} (stdout: {})\n{stderr}",
                out.status,
                text(&out.stdout)
            );
            assert_eq!(text(&out.stdout), want, "kill {kill}: {stderr}");
        }
    }
    assert!(stopped > 0, "no kill landed after the addresses were sent");
}

#[test]
fn recovery_of_a_rank_that_made_a_shared_memory_window_stops_the_job_with_one_line() {
    // Loads and stores into a shared window's memory are in no log: a rank
    // restarted after it made one cannot re-execute it, and the job stops
    // saying so; a kill before the window is made recovers exactly.
    let _g = serial();
    let prog = mpicc("rma");
    let args = ["shared-only"];
    let want = text(&job(&[], &prog, &args).stdout);
    assert!(want.starts_with("rma ok "), "{want}");
    let (mut stopped, mut exact) = (0, 0);
    for n in 1.. {
        let kill = format!("1@point:send.after_frame#{n}");
        let out = job(&["--inject-failure".into(), kill.clone()], &prog, &args);
        let stderr = text(&out.stderr);
        if restarts(&stderr) == 0 {
            break;
        }
        if out.status.code() == Some(70) {
            assert_eq!(
                stderr
                    .matches("re-executes MPI_Win_allocate_shared")
                    .count(),
                1,
                "kill {kill}: {stderr}"
            );
            assert!(!text(&out.stdout).contains("rma ok"), "kill {kill}");
            stopped += 1;
        } else {
            assert!(
                out.status.success(),
                "kill {kill}: {} (stdout: {})\n{stderr}",
                out.status,
                text(&out.stdout)
            );
            assert_eq!(text(&out.stdout), want, "kill {kill}: {stderr}");
            exact += 1;
        }
    }
    assert!(stopped > 0 && exact > 0, "{stopped} stopped, {exact} exact");
}

#[test]
fn recovery_a_rank_killed_during_start_up_stops_the_job_with_one_line() {
    let _g = serial();
    let prog = mpicc("diverge");
    // The others wait for it in the start-up fences: no process can take
    // its place there.
    let out = job(
        &["--inject-failure".into(), "1@point:start.in_fences".into()],
        &prog,
        &[],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{stderr}");
    assert_eq!(restarts(&stderr), 0, "{stderr}");
    assert!(
        stderr.contains("rank 1 was killed by signal 9 (SIGKILL) during start-up"),
        "{stderr}"
    );
}

#[test]
fn recovery_ctrl_c_to_the_process_group_ends_the_job_without_restarts() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    let _g = serial();
    let prog = mpicc("diverge");
    let mut child = job_command(&[], &prog, &[])
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run vpml");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut seen = String::new();
    // The ranks are past start-up once they report progress.
    for line in lines.by_ref() {
        let line = line.expect("read stderr");
        seen.push_str(&line);
        seen.push('\n');
        if line.starts_with("rank 0 at ") {
            break;
        }
    }
    assert!(seen.contains("rank 0 at "), "{seen}");
    let pgid = child.id() as i32;
    // SAFETY: a signal to the process group this test created.
    assert_eq!(unsafe { libc::kill(-pgid, libc::SIGINT) }, 0);
    for line in lines {
        seen.push_str(&line.expect("read stderr"));
        seen.push('\n');
    }
    let status = child.wait().expect("wait for vpml");
    assert_eq!(status.code(), Some(130), "{seen}");
    assert_eq!(restarts(&seen), 0, "Ctrl-C restarted a rank: {seen}");
}
