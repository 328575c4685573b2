//! `vpml run` itself: errors, exit codes, output forwarding, signals,
//! time-outs, and that nothing is left behind however a job ends.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{example, scenario, serial, vpml};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn vpml_run(args: &[&str]) -> std::process::Output {
    Command::new(vpml())
        .arg("run")
        .args(args)
        .output()
        .expect("run vpml")
}

/// The entries of /dev/shm a vpml launcher made (`vpml-logs-<pid>-…`,
/// `vpml-mpi-<pid>-…`) and left behind: its pid no longer runs. (Entries
/// of launchers still running, e.g. other jobs on the machine, are not
/// leftovers.)
fn shm_leftovers() -> BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| {
                    let pid = ["vpml-logs-", "vpml-mpi-"]
                        .iter()
                        .find_map(|p| name.strip_prefix(p))
                        .and_then(|rest| rest.split('-').next())
                        .and_then(|pid| pid.parse::<i32>().ok());
                    pid.is_some_and(is_gone)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A process is gone once it no longer exists or is a zombie.
fn is_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

/// Wait (bounded) until every pid is gone; returns the ones still alive.
fn wait_gone(pids: &[i32], limit: Duration) -> Vec<i32> {
    let end = Instant::now() + limit;
    loop {
        let alive: Vec<i32> = pids.iter().copied().filter(|&p| !is_gone(p)).collect();
        if alive.is_empty() || Instant::now() > end {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Start a job whose ranks print `ready <pid>` and then block; return the
/// launcher and the rank pids once all are ready.
fn start_hanging_job(n: usize, extra: &[&str]) -> (Child, Vec<i32>) {
    let mut child = Command::new(vpml())
        .args(["run", "-n", &n.to_string(), "--timeout", "120"])
        .args(extra)
        .arg(example("scenarios"))
        .arg("hang")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn vpml");
    let stdout = child.stdout.take().expect("stdout");
    let mut pids = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("read line");
        if let Some(pid) = line.strip_prefix("ready ") {
            pids.push(pid.parse().expect("pid"));
        }
        if pids.len() == n {
            break;
        }
    }
    assert_eq!(pids.len(), n, "not every rank became ready");
    (child, pids)
}

#[test]
fn bad_rank_count_is_refused() {
    let prog = example("scenarios");
    let prog = prog.to_str().unwrap();
    let out = vpml_run(&["-n", "0", prog, "hello"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("vpml run: -n must be at least 1"),
        "{}",
        stderr(&out)
    );
    let out = vpml_run(&["-n", "many", prog, "hello"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("invalid value 'many'"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn missing_program_is_named() {
    let out = vpml_run(&["-n", "2", "/no/such/dir/prog"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        "vpml run: program not found: /no/such/dir/prog"
    );
    let out = vpml_run(&["-n", "2", "no-such-program-vpml-test"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("program not found: no-such-program-vpml-test (not in PATH)"));
    let not_exec = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let out = vpml_run(&["-n", "2", not_exec]);
    assert!(
        stderr(&out).contains("is not an executable file"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_killed_rank_stops_the_job_with_its_signal() {
    let before = shm_leftovers();
    let out = scenario(3, "crash", &[], &[]);
    assert_eq!(out.status.code(), Some(128 + 9));
    assert!(
        stderr(&out).contains("vpml run: rank 1 was killed by signal 9 (SIGKILL)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(shm_leftovers(), before, "the job left files in /dev/shm");
}

#[test]
fn a_finalized_rank_exit_status_is_the_job_status_without_a_line() {
    // As mpiexec: a program that finishes cleanly and returns 3 makes the
    // job return 3; nothing is added to its output.
    let out = scenario(3, "finalized-exit", &[], &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("exited with status"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_failing_rank_exit_status_is_the_job_status() {
    let out = scenario(3, "exit-code", &[], &[]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).contains("vpml run: rank 1 exited with status 3"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn exiting_without_finalize_is_a_failure() {
    let out = scenario(2, "no-finalize", &[], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("vpml run: rank 1 exited without finalizing"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn abort_stops_the_job_with_its_code() {
    let out = scenario(3, "abort", &[], &[]);
    assert_eq!(out.status.code(), Some(7));
    assert!(
        stderr(&out).contains("vpml run: rank 1 aborted the job (code 7)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn tag_output_prefixes_each_line_with_its_rank() {
    let out = scenario(3, "hello", &["--tag-output"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for r in 0..3 {
        let want = format!("[{r}] hello from rank {r} of 3");
        assert!(
            stdout.lines().any(|l| l == want),
            "missing {want:?} in:\n{stdout}"
        );
    }
    // Without the option, lines are forwarded untouched.
    let out = scenario(2, "hello", &[], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().any(|l| l == "hello from rank 1 of 2"),
        "{stdout}"
    );
}

#[test]
fn timeout_stops_a_hung_job() {
    let _g = serial();
    let out = Command::new(vpml())
        .args(["run", "-n", "2", "--timeout", "1"])
        .arg(example("scenarios"))
        .arg("hang")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(124));
    assert!(
        stderr(&out).contains("vpml run: job timed out after 1 s"),
        "{}",
        stderr(&out)
    );
    // MPIEXEC_TIMEOUT, as MPICH's and Open MPI's launchers read it.
    let out = Command::new(vpml())
        .args(["run", "-n", "2"])
        .env("MPIEXEC_TIMEOUT", "1")
        .arg(example("scenarios"))
        .arg("hang")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    // Negative, and too long to wait for (it used to panic): one line.
    for t in ["-4", "1e300"] {
        let bad = vpml_run(&["-n", "2", "--timeout", t, "true"]);
        assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
        assert_eq!(stderr(&bad).lines().count(), 1, "{}", stderr(&bad));
        assert!(
            stderr(&bad).contains("--timeout must be a positive number"),
            "{}",
            stderr(&bad)
        );
    }
}

#[test]
fn ctrl_c_is_forwarded_to_the_ranks() {
    let _g = serial();
    let (mut child, pids) = start_hanging_job(3, &[]);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(130));
    assert!(wait_gone(&pids, Duration::from_secs(30)).is_empty());
}

#[test]
fn killing_the_launcher_takes_the_ranks_along_and_leaves_nothing() {
    let _g = serial();
    // With a protocol the job has a log directory in /dev/shm.
    let (mut child, pids) = start_hanging_job(4, &["--protocol", "pessimist"]);
    let launcher = child.id();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(launcher as i32, libc::SIGKILL) };
    let _ = child.wait();
    let alive = wait_gone(&pids, Duration::from_secs(30));
    assert!(alive.is_empty(), "ranks {alive:?} outlived their launcher");
    // A launcher killed with SIGKILL cannot clean up: the next one does,
    // and says so.
    let left: Vec<String> = shm_leftovers()
        .into_iter()
        .filter(|e| e.starts_with(&format!("vpml-logs-{launcher}-")))
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    let dir = Path::new("/dev/shm").join(&left[0]);
    // (Any launcher starting on this machine sweeps it: one of another
    // job running meanwhile may be first.)
    let still_there = dir.exists();
    let next = Command::new(vpml())
        .args(["run", "-n", "2", "--protocol", "pessimist"])
        .arg(example("scenarios"))
        .arg("hello")
        .output()
        .expect("run vpml");
    assert!(next.status.success(), "{}", stderr(&next));
    let said = format!(
        "vpml: removed {}, left by a launcher that was killed",
        dir.display()
    );
    assert!(
        stderr(&next).contains(&said) || !still_there,
        "{}",
        stderr(&next)
    );
    assert!(!dir.exists());
}
