//! Record a real job (`vpml run --record`), then replay single ranks alone
//! (`vpml replay`): no divergence for piecewise-deterministic programs,
//! the exact send for one that is not, and clear errors for damaged
//! recordings.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{example, serial, vpml};

/// A fresh directory for a recording, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("vpml-rec-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn record(dir: &Path, n: usize, program: &str, args: &[&str]) -> Output {
    let out = Command::new(vpml())
        .args(["run", "-n", &n.to_string(), "--timeout", "240"])
        .arg(format!("--record={}", dir.display()))
        .arg(example(program))
        .args(args)
        .output()
        .expect("run vpml");
    assert!(
        out.status.success(),
        "recording {program} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn replay(dir: &Path, rank: usize) -> Output {
    Command::new(vpml())
        .arg("replay")
        .arg(dir)
        .args(["--rank", &rank.to_string()])
        .output()
        .expect("run vpml replay")
}

/// Application output without the protocol's counters.
fn app_lines(b: &[u8]) -> String {
    String::from_utf8_lossy(b)
        .lines()
        .filter(|l| !l.starts_with("events_logged"))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn every_rank_of_every_example_replays_alone_without_divergence() {
    let _g = serial();
    for (n, program, args) in [
        // Checkpoints free nothing in a recording: replays start over.
        (
            4,
            "heat3d",
            vec![
                "--points",
                "6x6x12",
                "--steps",
                "10",
                "--checkpoint-every",
                "3",
            ],
        ),
        (4, "cg-pattern", vec![]),
        (4, "mg-pattern", vec!["--cycles", "5"]),
        (4, "lu-pattern", vec!["--iterations", "5"]),
        (2, "anysource-pingpong", vec!["--check", "--max", "16"]),
        (4, "request-mix", vec!["--rounds", "60"]),
    ] {
        let dir = Dir::new(program);
        let recorded = record(&dir.0, n, program, &args);
        let manifest = std::fs::read_to_string(dir.0.join("manifest")).expect("manifest");
        assert!(manifest.contains(&format!("size {n}")), "{manifest}");
        for rank in 0..n {
            let out = replay(&dir.0, rank);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success() && stderr.contains("no divergence"),
                "{program}: replay of rank {rank} failed ({}):\n{stderr}",
                out.status
            );
            if rank == 0 {
                // Rank 0 prints the results: the replay prints them again.
                assert_eq!(
                    app_lines(&out.stdout),
                    app_lines(&recorded.stdout),
                    "{program}: rank 0's output differs in the replay"
                );
            }
        }
    }
}

#[test]
fn a_message_holding_the_time_is_reported_at_exactly_that_send() {
    let _g = serial();
    let dir = Dir::new("clock");
    record(&dir.0, 2, "scenarios", &["clock"]);
    let out = replay(&dir.0, 1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("diverged") && stderr.contains("send #3 to rank 0"),
        "the report names the third send to rank 0:\n{stderr}"
    );
    assert!(stderr.contains("after 2 matching sends"), "{stderr}");
    // Rank 0 only receives: its replay is fine.
    let out = replay(&dir.0, 0);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn replaying_rank_3_of_8_runs_that_rank_alone() {
    let _g = serial();
    let dir = Dir::new("eight");
    record(&dir.0, 8, "heat3d", &["--points", "4x4x8", "--steps", "5"]);
    // No other rank exists during the replay: if rank 3 needed one, it
    // would wait forever (and the replay reports a wait for a message that
    // is not in the recording).
    let out = replay(&dir.0, 3);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("rank 3 of") && stderr.contains("alone"),
        "{stderr}"
    );
    assert!(stderr.contains("no divergence"), "{stderr}");
    assert_eq!(out.stdout, b"", "rank 3 prints nothing");
}

#[test]
fn damaged_or_incomplete_recordings_give_clear_errors() {
    let _g = serial();
    let dir = Dir::new("damage");
    record(&dir.0, 2, "scenarios", &["order"]);
    // A bad rank.
    let out = replay(&dir.0, 5);
    assert!(String::from_utf8_lossy(&out.stderr).contains("outside the recorded job"));
    // A damaged sender log names its file.
    let seg = std::fs::read_dir(dir.0.join("rank-1"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "vlog"))
        .expect("a segment of rank 1");
    let mut bytes = std::fs::read(&seg).unwrap();
    for b in &mut bytes[64 + 48..64 + 56] {
        *b ^= 0x5a;
    }
    std::fs::write(&seg, &bytes).unwrap();
    let out = replay(&dir.0, 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let name = seg.file_name().unwrap().to_string_lossy().into_owned();
    assert!(stderr.contains(&name), "the error names {name}:\n{stderr}");
    // A lost sender log: the recording is incomplete, and says where.
    std::fs::remove_dir_all(dir.0.join("rank-1")).unwrap();
    std::fs::create_dir(dir.0.join("rank-1")).unwrap();
    let out = replay(&dir.0, 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("incomplete") && stderr.contains("rank-1"),
        "{stderr}"
    );
    // No manifest: not a recording.
    std::fs::remove_file(dir.0.join("manifest")).unwrap();
    let out = replay(&dir.0, 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a recording"), "{stderr}");
}

fn vpml_cmd(args: &[&str]) -> Output {
    Command::new(vpml()).args(args).output().expect("run vpml")
}

#[test]
fn trace_lists_dumps_counts_and_diffs_recordings() {
    let _g = serial();
    let (a, b) = (Dir::new("trace-a"), Dir::new("trace-b"));
    record(&a.0, 2, "scenarios", &["clock"]);
    record(&b.0, 2, "scenarios", &["clock"]);
    let pa = a.0.to_string_lossy().into_owned();
    let pb = b.0.to_string_lossy().into_owned();
    // info
    let out = vpml_cmd(&["trace", "info", &pa]);
    let info = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && info.contains("2 ranks"), "{info}");
    assert!(info.contains("rank 1: protocol=pessimist"), "{info}");
    // dump --json: one object per send, the same count as stats says
    let out = vpml_cmd(&["trace", "dump", &pa, "--json"]);
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let sends = lines.iter().filter(|v| v["kind"] == "send").count();
    assert_eq!(sends, 3, "rank 1 sent three messages");
    assert_eq!(lines[2]["seq"], 3);
    let out = vpml_cmd(&["trace", "stats", &pa]);
    let stats = String::from_utf8_lossy(&out.stdout);
    assert!(
        stats
            .lines()
            .any(|l| l.split_whitespace().take(3).collect::<Vec<_>>() == ["1", "3", "27"]),
        "{stats}"
    );
    // diff: the third send (the wall-clock time) differs
    let out = vpml_cmd(&["trace", "diff", &pa, &pb]);
    let diff = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{diff}");
    assert!(
        diff.contains("rank 1: first difference: send #3 to rank 0"),
        "{diff}"
    );
    assert!(diff.contains("rank 0: same 0 sends"), "{diff}");
}

#[test]
fn check_determinism_tells_deterministic_programs_from_others() {
    let _g = serial();
    let heat = example("heat3d");
    let out = Command::new(vpml())
        .args(["check-determinism", "-n", "4"])
        .arg(&heat)
        .args(["--points", "4x4x8", "--steps", "4"])
        .output()
        .expect("run vpml");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("no divergence"),
        "{stdout}"
    );
    let out = Command::new(vpml())
        .args(["check-determinism", "-n", "2"])
        .arg(example("scenarios"))
        .arg("clock")
        .output()
        .expect("run vpml");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("not deterministic"), "{stdout}");
}

#[test]
fn recordings_default_to_the_data_directory_with_a_latest_link() {
    let _g = serial();
    let data = Dir::new("xdg");
    let run = |args: &[&str]| {
        Command::new(vpml())
            .env("XDG_DATA_HOME", &data.0)
            .args(args)
            .output()
            .expect("run vpml")
    };
    let mut rec = vec!["run", "-n", "2", "--record"];
    let prog = example("scenarios").to_string_lossy().into_owned();
    rec.extend([prog.as_str(), "order"]);
    let out = run(&rec);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let root = data.0.join("vpml").join("recordings");
    assert!(root.join("latest").join("manifest").exists());
    let out = run(&["replay", "--rank", "1"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no divergence"),
        "the latest recording replays without naming it"
    );
    let out = run(&["trace", "ls"]);
    let ls = String::from_utf8_lossy(&out.stdout);
    assert_eq!(ls.lines().count(), 1, "{ls}");
    assert!(ls.contains("2 ranks"), "{ls}");
}

#[test]
fn replay_until_stops_at_the_event_for_a_debugger() {
    use std::io::{BufRead, BufReader};
    let _g = serial();
    let dir = Dir::new("until");
    record(&dir.0, 2, "anysource-pingpong", &["--check", "--max", "4"]);
    let mut child = Command::new(vpml())
        .arg("replay")
        .arg(&dir.0)
        .args(["--rank", "1", "--until", "5"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run vpml replay");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let stopped = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.contains("stopped at event"))
        .expect("the replay stops at event 5");
    assert!(stopped.contains("stopped at event 5"), "{stopped}");
    // The stopped process waits for a debugger; resume it instead.
    let pid: i32 = stopped
        .rsplit("gdb -p ")
        .next()
        .and_then(|p| p.trim().parse().ok())
        .expect("the message names the pid");
    // The message comes just before the rank stops itself: a SIGCONT sent
    // in between would be lost and leave it stopped for good. It is our
    // grandchild (no waitpid), so watch its state in /proc.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the rank lives");
        let state = stat.rsplit(") ").next().and_then(|s| s.chars().next());
        if state == Some('T') {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "rank never stopped: {stat}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // SAFETY: plain syscall; the pid is the replayed rank, our grandchild.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().expect("wait");
    assert!(status.success(), "{rest:?}");
    assert!(rest.iter().any(|l| l.contains("no divergence")), "{rest:?}");
}

#[test]
fn a_rank_replays_under_a_debugger() {
    let _g = serial();
    if Command::new("gdb").arg("--version").output().is_err() {
        eprintln!("SKIPPED: gdb is not installed");
        return;
    }
    let dir = Dir::new("gdb");
    record(&dir.0, 2, "scenarios", &["any"]);
    let out = Command::new(vpml())
        .arg("replay")
        .arg(&dir.0)
        .args(["--rank", "1", "--", "gdb", "-batch", "-ex", "run", "--args"])
        .output()
        .expect("run vpml replay");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("no divergence"), "{stdout}\n{stderr}");
    assert!(stdout.contains("exited normally"), "gdb ran it:\n{stdout}");
}

/// One-sided communication: every rank of `tests/c/rma.c` (targets of
/// locked fetch-and-ops, fences, post/wait and accumulates, origins of
/// every operation) replays alone and takes its requests where the
/// recording says.
#[test]
fn every_rank_of_a_one_sided_c_program_replays_alone_without_divergence() {
    let _g = serial();
    let prog = common::mpicc("rma");
    let dir = Dir::new("rma");
    let recorded = Command::new(vpml())
        .args(["run", "-n", "4", "--timeout", "240"])
        .arg(format!("--record={}", dir.0.display()))
        .arg(&prog)
        // (Addresses differ in a replayed process, and a shared-memory
        // window's loads and stores are in no recording: a replay stops
        // at either, with one line.)
        .args(["no-addresses", "no-shared"])
        .output()
        .expect("run vpml");
    assert!(
        recorded.status.success(),
        "{}",
        String::from_utf8_lossy(&recorded.stderr)
    );
    assert!(
        app_lines(&recorded.stdout).starts_with("rma ok "),
        "{}{}",
        app_lines(&recorded.stdout),
        String::from_utf8_lossy(&recorded.stderr)
    );
    for rank in 0..4 {
        let out = replay(&dir.0, rank);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stderr.contains("no divergence"),
            "replay of rank {rank} failed ({}):\n{stderr}",
            out.status
        );
        if rank == 0 {
            assert_eq!(app_lines(&out.stdout), app_lines(&recorded.stdout));
        }
    }
}
