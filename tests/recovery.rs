//! Crash recovery with the pessimist protocol, end to end: real jobs
//! through the real `vpml` launcher, real event loggers, ranks killed with
//! SIGKILL at chosen or random instants (`--inject-failure`), restarted
//! alone — and the job's standard output compared byte for byte with a
//! failure-free run of the same program.
//!
//! Random kill instants are drawn from a seed printed by each test (set
//! `VPML_TEST_SEED` to replay one) within the first 80 % of the
//! failure-free run's duration, measured on this machine; such a kill may
//! come after the job ended, and only those that landed are counted. A
//! test whose scenario needs its kill to land (a damaged checkpoint, a
//! kill during recovery, two ranks at once) kills at a protocol step (a
//! fault point) instead, which lands however loaded the machine is.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{HEAT, example, seed, serial, vpml};

/// Lines that are protocol counters, not application output: they differ
/// when a rank was restarted (its counters restart).
fn app_output(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with("events_logged"))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn run(n: usize, launcher: &[String], program: &str, args: &[&str]) -> (Output, Duration) {
    run_with(n, launcher, program, args, &[])
}

fn run_with(
    n: usize,
    launcher: &[String],
    program: &str,
    args: &[&str],
    envs: &[(&str, &str)],
) -> (Output, Duration) {
    let t = Instant::now();
    let out = Command::new(vpml())
        .envs(envs.iter().copied())
        .args(["run", "-n", &n.to_string(), "--timeout", "240"])
        .args(["--protocol", "pessimist"])
        .args(launcher)
        .arg(example(program))
        .args(args)
        .output()
        .expect("run vpml");
    (out, t.elapsed())
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Require that the run of `program` with `kills` succeeded and printed
/// `expected`, the failure-free output; its stderr.
fn succeeded_alike(
    program: &str,
    kills: &[impl std::fmt::Debug],
    out: &Output,
    expected: &str,
) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{program} with kills {kills:?} failed ({}):\n{stderr}",
        out.status
    );
    assert_eq!(
        app_output(out),
        expected,
        "{program}: output after kills {kills:?} differs from the failure-free run\n{stderr}"
    );
    stderr
}

/// Run `program` failure-free, then once per kill plan, and require the
/// same output every time. Each plan is a list of (rank, fraction of the
/// reference duration).
fn same_output_after_kills(
    n: usize,
    program: &str,
    args: &[&str],
    extra: &[&str],
    plans: &[Vec<(usize, f64)>],
) {
    same_output_after_kills_with(n, program, args, extra, &[], plans)
}

/// [`same_output_after_kills`] with environment variables for the jobs.
fn same_output_after_kills_with(
    n: usize,
    program: &str,
    args: &[&str],
    extra: &[&str],
    envs: &[(&str, &str)],
    plans: &[Vec<(usize, f64)>],
) {
    let _guard = serial();
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let (reference, took) = run_with(n, &extra, program, args, envs);
    assert!(
        reference.status.success(),
        "failure-free run of {program} failed:\n{}",
        String::from_utf8_lossy(&reference.stderr)
    );
    let expected = app_output(&reference);
    assert!(!expected.is_empty(), "{program} printed nothing");
    for plan in plans {
        let mut launcher = extra.clone();
        let mut shown = Vec::new();
        for &(rank, frac) in plan {
            let at = took.as_secs_f64() * frac;
            launcher.push("--inject-failure".into());
            launcher.push(format!("{rank}@{at:.3}"));
            shown.push(format!("{rank}@{at:.3}"));
        }
        let (out, _) = run_with(n, &launcher, program, args, envs);
        let stderr = succeeded_alike(program, &shown, &out, &expected);
        // A kill that reaches a rank as it finishes ends nothing (a kill
        // timed after the end is not even sent): only the kills that ended
        // a rank count.
        let restarts = stderr.matches("restarted it as incarnation").count();
        let kills = stderr.matches("was killed by signal 9").count();
        assert_eq!(
            restarts, kills,
            "every kill restarts exactly one rank\n{stderr}"
        );
        eprintln!("{program}: kills {shown:?} ({kills} landed): same output");
    }
}

/// Run heat3d failure-free, then with the kills `specs` (`--inject-failure`
/// values, each at a protocol step: a fault point, or a time after a
/// restart), and require the same output and one restart per kill. A kill
/// at a step always lands, however fast or loaded the machine is; returns
/// the job's stderr for further checks.
fn heat3d_after_point_kills(extra: &[&str], specs: &[&str]) -> String {
    let _guard = serial();
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let (reference, _) = run(4, &extra, "heat3d", HEAT);
    assert!(
        reference.status.success(),
        "failure-free heat3d failed:\n{}",
        String::from_utf8_lossy(&reference.stderr)
    );
    let mut launcher = extra;
    for spec in specs {
        launcher.push("--inject-failure".into());
        launcher.push(spec.to_string());
    }
    let (out, _) = run(4, &launcher, "heat3d", HEAT);
    let stderr = succeeded_alike("heat3d", specs, &out, &app_output(&reference));
    let restarts = stderr.matches("restarted it as incarnation").count();
    assert_eq!(restarts, specs.len(), "one restart per kill\n{stderr}");
    stderr
}

/// `count` plans of `per_plan` kills at random ranks and instants.
fn random_plans(name: &str, n: usize, count: usize, per_plan: usize) -> Vec<Vec<(usize, f64)>> {
    let s = seed();
    eprintln!("{name}: kill seed {s} (VPML_TEST_SEED={s} replays it)");
    let mut x = s;
    (0..count)
        .map(|_| {
            (0..per_plan)
                .map(|_| {
                    let rank = (splitmix(&mut x) % n as u64) as usize;
                    let frac = 0.05 + 0.75 * (splitmix(&mut x) >> 11) as f64 / (1u64 << 53) as f64;
                    (rank, frac)
                })
                .collect()
        })
        .collect()
}

#[test]
fn heat3d_is_bit_identical_after_kills_at_random_instants() {
    let plans = random_plans("heat3d", 4, 4, 1);
    same_output_after_kills(4, "heat3d", HEAT, &[], &plans);
}

#[test]
fn mg_pattern_is_bit_identical_after_kills_at_random_instants() {
    let plans = random_plans("mg-pattern", 4, 3, 1);
    same_output_after_kills(4, "mg-pattern", &["--cycles", "300"], &[], &plans);
}

#[test]
fn lu_pattern_is_bit_identical_after_kills_at_random_instants() {
    let plans = random_plans("lu-pattern", 4, 3, 1);
    same_output_after_kills(4, "lu-pattern", &["--iterations", "300"], &[], &plans);
}

#[test]
fn anysource_pingpong_is_bit_identical_after_kills_in_wait_any() {
    // Both ranks spend their time blocked in wait_any on an ANY_SOURCE
    // receive: every kill lands in (or next to) one.
    let plans = random_plans("anysource-pingpong", 2, 3, 1);
    same_output_after_kills(
        2,
        "anysource-pingpong",
        &["--check", "--max", "256"],
        &[],
        &plans,
    );
}

#[test]
fn request_mix_is_bit_identical_after_kills_at_random_instants() {
    let plans = random_plans("request-mix", 4, 3, 2);
    same_output_after_kills(4, "request-mix", &["--rounds", "300"], &[], &plans);
}

#[test]
fn two_ranks_killed_at_once_recover() {
    // Two ranks, each right after its third checkpoint (taken at the same
    // step: the second dies while the first is down or recovering).
    heat3d_after_point_kills(
        &[],
        &[
            "1@point:checkpoint.before_gc#3",
            "2@point:checkpoint.before_gc#3",
        ],
    );
}

#[test]
fn a_rank_killed_again_while_it_recovers_recovers() {
    // The second kill comes a few milliseconds after the restart: while
    // the new process starts, fetches its state or re-executes.
    // The first kill is at a step (after the second checkpoint), so it
    // always lands; the second is timed from the restart.
    let mut landed_during = 0;
    for delay in ["0.001", "0.005", "0.012"] {
        let again = format!("2@restart+{delay}");
        let stderr = heat3d_after_point_kills(&[], &["2@point:checkpoint.before_gc#2", &again]);
        assert!(stderr.contains("during its recovery"), "{stderr}");
        assert!(stderr.contains("restarted it as incarnation 2"), "{stderr}");
        let during = !stderr.contains("rank 2 (incarnation 1) caught up");
        eprintln!("second kill {delay} s after the restart: before catch-up: {during}");
        landed_during += usize::from(during);
    }
    // Catching up takes tens of milliseconds: the earliest kills land in it.
    assert!(landed_during > 0, "no second kill landed during a recovery");
}

#[test]
fn kills_before_the_first_checkpoint_and_right_after_checkpoints() {
    // No checkpoint yet (the first follows step 5; rank 3 sends in every
    // iteration of step 1's solver): the rank restarts from the beginning.
    heat3d_after_point_kills(&[], &["3@point:send.after_frame#3"]);
    // A checkpoint after every step: every kill follows one closely.
    let every_step = [
        "--points",
        "6x6x24",
        "--steps",
        "40",
        "--output-interval",
        "5",
        "--checkpoint-every",
        "1",
    ];
    same_output_after_kills(4, "heat3d", &every_step, &[], &[vec![(1, 0.5)]]);
    // And exactly after one: between writing it and freeing what it
    // replaces.
    heat3d_after_point_kills(&[], &["1@point:checkpoint.before_gc#4"]);
}

#[test]
fn a_peer_needs_messages_sent_before_the_restarted_ranks_checkpoint() {
    // Rank 1 restarts from a checkpoint; later rank 0 fails and needs the
    // messages rank 1 sent it since rank 0's own last checkpoint — some
    // of them sent before rank 1's checkpoint, so only rank 1's kept log
    // (which outlives its first process) still has them.
    same_output_after_kills(4, "heat3d", HEAT, &[], &[vec![(1, 0.3), (0, 0.7)]]);
}

#[test]
fn a_damaged_newest_checkpoint_falls_back_to_the_older_one() {
    // Killed half-way through its fifth checkpoint: the fourth, the newest
    // complete one, is damaged, and what precedes the third was freed
    // when the fourth was taken.
    let stderr =
        heat3d_after_point_kills(&[], &["1@point:checkpoint.mid_write#5:corrupt-checkpoint"]);
    // "damaged FILE before restarting rank 1" from the launcher; the
    // restarted rank's warning names the same file.
    let damaged = stderr
        .lines()
        .find_map(|l| l.split_once("damaged ")?.1.split_once(" before restarting"))
        .map(|(file, _)| file)
        .unwrap_or_else(|| panic!("no checkpoint damaged:\n{stderr}"));
    assert!(
        stderr.contains(&format!(
            "falling back to checkpoint 3: {damaged}: payload checksum mismatch"
        )),
        "the restarted rank must warn that it fell back, naming the damaged file:\n{stderr}"
    );
}

#[test]
fn a_damaged_sender_log_stops_the_job_naming_the_record() {
    // Rank 2 dies mid-run; before its restart the newest message each
    // neighbour keeps for it is damaged. With no checkpoint, the restarted
    // rank needs every message, that one too: the neighbour that finds
    // the bad record stops the job with one line naming file and offset
    // (status 70), instead of re-sending what it has or hanging.
    let _guard = serial();
    let no_checkpoints: Vec<&str> = HEAT
        .iter()
        .copied()
        .chain(["--checkpoint-every", "0"])
        .collect();
    let kill = "2@point:send.after_frame#30:corrupt-sender-log";
    let (out, _) = run(
        4,
        &["--inject-failure".into(), kill.into()],
        "heat3d",
        &no_checkpoints,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(70), "{stderr}");
    let damaged: Vec<(&str, &str)> = stderr
        .lines()
        .filter_map(|l| l.split_once("keeps for rank 2: the record at offset "))
        .filter_map(|(who, at)| Some((who.rsplit_once("rank ")?.1.split(' ').next()?, at)))
        .collect();
    assert!(!damaged.is_empty(), "no record damaged:\n{stderr}");
    // "OFFSET of FILE" in the notice, "FILE: … at offset OFFSET" in the
    // line that stops the job.
    let stop = stderr
        .lines()
        .find(|l| l.contains("aborted the job (code 70)"))
        .unwrap_or_else(|| panic!("no line stopping the job:\n{stderr}"));
    assert!(
        damaged.iter().any(|(from, at)| {
            let (offset, file) = at.split_once(" of ").unwrap_or_default();
            stop.contains(&format!(
                "rank {from} cannot re-send the messages restarted rank 2 needs: sender log {file}: payload checksum mismatch in the record at offset {offset}"
            ))
        }),
        "the line stopping the job must name a damaged record:\n{stderr}"
    );
}

#[test]
fn idle_connections_to_the_survivors_listeners_delay_no_recovery() {
    // An attacker on the machine holds 40 silent connections to every
    // listening socket of every survivor, then rank 2 dies. A survivor
    // that read handshakes one at a time waited up to 5 s on each silent
    // one (40 × 5 s, past the job's --timeout); now it reads them side by
    // side, refuses silent ones beyond a few, and the job ends with the
    // failure-free answer.
    let _guard = serial();
    let job = |stdin: Stdio| {
        Command::new(vpml())
            .args([
                "run",
                "-n",
                "4",
                "--timeout",
                "120",
                "--protocol",
                "pessimist",
            ])
            .arg(example("scenarios"))
            .arg("gate")
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run vpml")
    };
    let answer = |stdout: &[u8]| -> String {
        String::from_utf8_lossy(stdout)
            .lines()
            .filter(|l| !l.starts_with("ready ") && !l.starts_with("events_logged"))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let mut clean = job(Stdio::piped());
    writeln!(clean.stdin.take().expect("stdin"), "go").expect("cue the job");
    let clean = clean.wait_with_output().expect("wait for vpml");
    assert!(
        clean.status.success(),
        "{}",
        String::from_utf8_lossy(&clean.stderr)
    );
    assert!(answer(&clean.stdout).contains("gate checksum"));

    let mut child = job(Stdio::piped());
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut pids = std::collections::BTreeMap::new();
    let mut before = Vec::new();
    while pids.len() < 4 {
        let mut line = String::new();
        if stdout.read_line(&mut line).expect("read stdout") == 0 {
            let out = child.wait_with_output().expect("wait for vpml");
            panic!(
                "job ended before its gate:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if let Some(rest) = line.trim_end().strip_prefix("ready ") {
            let (rank, pid) = rest.split_once(' ').expect("ready RANK PID");
            pids.insert(
                rank.parse::<usize>().expect("rank"),
                pid.parse::<i32>().expect("pid"),
            );
        } else {
            before.extend_from_slice(line.as_bytes());
        }
    }
    let mut idle = Vec::new();
    for (&rank, &pid) in pids.iter().filter(|&(&r, _)| r != 2) {
        let addrs = listening_addresses(pid);
        assert!(!addrs.is_empty(), "rank {rank} (pid {pid}) listens nowhere");
        for addr in addrs {
            for _ in 0..40 {
                idle.push(TcpStream::connect(addr).expect("connect to a rank's listener"));
            }
        }
    }
    // SAFETY: kill(2) on a rank process of our own job.
    let killed = unsafe { libc::kill(pids[&2], libc::SIGKILL) };
    assert_eq!(killed, 0, "SIGKILL rank 2");
    writeln!(child.stdin.take().expect("stdin"), "go").expect("cue the job");
    stdout.read_to_end(&mut before).expect("read stdout");
    let out = child.wait_with_output().expect("wait for vpml");
    drop(idle);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("rank 2 was killed by signal 9"),
        "rank 2 was not restarted:\n{stderr}"
    );
    assert!(
        stderr.contains("too many handshakes at once"),
        "no survivor refused a silent connection:\n{stderr}"
    );
    assert_eq!(answer(&before), answer(&clean.stdout), "{stderr}");
}

/// The IPv4 addresses process `pid` listens on for TCP (its sockets'
/// inodes looked up in /proc/net/tcp).
fn listening_addresses(pid: i32) -> Vec<SocketAddr> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the rank's descriptors")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    table
        .lines()
        .skip(1)
        .filter_map(|row| {
            let f: Vec<&str> = row.split_whitespace().collect();
            // local_address, state (0A: listening), inode.
            if f.get(3) != Some(&"0A") || !inodes.iter().any(|i| Some(&i.as_str()) == f.get(9)) {
                return None;
            }
            let (ip, port) = f.get(1)?.split_once(':')?;
            let ip = u32::from_str_radix(ip, 16).ok()?;
            let port = u16::from_str_radix(port, 16).ok()?;
            // The kernel prints the address (network order in memory) as
            // a native-endian word.
            Some(SocketAddr::from((Ipv4Addr::from(ip.to_ne_bytes()), port)))
        })
        .collect()
}

#[test]
fn recovery_works_over_tcp_and_across_hosts() {
    // After its fourth checkpoint: the restarted rank replays from it,
    // its peers re-send over TCP.
    heat3d_after_point_kills(&["--transport", "tcp"], &["2@point:checkpoint.before_gc#4"]);
    same_output_after_kills(
        4,
        "request-mix",
        &["--rounds", "300"],
        &["--simulate-hosts", "2"],
        &[vec![(1, 0.4)]],
    );
}

#[test]
fn recovery_works_with_sender_logs_in_memory() {
    // With memory logs the restarted process restores the records peers
    // may need from its checkpoint's spill file (file logs, the default,
    // are reopened instead).
    // Killed while writing its third checkpoint, then again while its
    // restarted process writes its second.
    heat3d_after_point_kills(
        &["--sender-log", "memory"],
        &[
            "1@point:checkpoint.mid_write#3",
            "1@restart+point:checkpoint.mid_write#2",
        ],
    );
}

#[test]
fn messages_half_transferred_when_their_sender_dies_come_again() {
    // 4 MiB messages are in transit most of the time: read in one piece
    // from the sender's memory (single copy), as 32 KiB fragments through
    // the rings, or over TCP; the kills land in the middle of transfers.
    let plans = random_plans("big-ring", 3, 2, 1);
    let args = ["big-ring"];
    same_output_after_kills(3, "scenarios", &args, &[], &plans);
    same_output_after_kills(3, "scenarios", &args, &["--transport", "tcp"], &plans);
    same_output_after_kills_with(
        3,
        "scenarios",
        &args,
        &[],
        &[("VPML_SHM_NO_SINGLE_COPY", "1")],
        &plans,
    );
}

#[test]
fn without_a_protocol_a_killed_rank_ends_the_job() {
    let _guard = serial();
    let out = Command::new(vpml())
        .args(["run", "-n", "4", "--timeout", "240", "--protocol", "none"])
        .args(["--inject-failure", "1@0.2"])
        .arg(example("heat3d"))
        // Far more steps than 0.2 s allows even in a release build (about
        // 3 ms a step there): the kill always comes first.
        .args(["--points", "6x6x24", "--steps", "4000"])
        .output()
        .expect("run vpml");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{stderr}");
    assert!(stderr.contains("rank 1 was killed by signal 9"), "{stderr}");
    assert!(!stderr.contains("restarted"), "{stderr}");
}

#[test]
fn failure_injection_specs_are_checked() {
    let _guard = serial();
    for (spec, why) in [
        ("9@1", "outside the job"),
        ("1@-2", "non-negative"),
        ("x", "expected RANK@SECONDS"),
        ("random:z", "expected random:K"),
    ] {
        let out = Command::new(vpml())
            .args(["run", "-n", "2", "--inject-failure", spec])
            .arg(example("heat3d"))
            .output()
            .expect("run vpml");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{spec}: {stderr}");
        assert!(stderr.contains(why), "{spec}: {stderr}");
    }
}
