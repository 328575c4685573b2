//! The pessimist protocol on real jobs: the events a real `vpml
//! event-logger` process stored are exactly those each construct must
//! produce; the commit rule holds a send back while the logger is stopped;
//! sender logs read back byte-exact after the job; applications give the
//! same results with the protocol as without.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{example, serial, vpml};
use vpml_event_logger::{Client, ClientConfig, Event};

/// A `vpml event-logger` process of the test's own; the jobs use the
/// token file it made itself (a comment line, then `* TOKEN`).
struct Logger {
    child: Child,
    addr: String,
    dir: PathBuf,
    token: String,
    /// Holds `dir` (removed when the logger is dropped).
    _tmp: tempfile::TempDir,
}

impl Logger {
    fn start(name: &str) -> Logger {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("vpml-pessimist-{name}-"))
            .tempdir()
            .unwrap();
        let dir = tmp.path().to_path_buf();
        let mut child = Command::new(vpml())
            .args(["event-logger", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.join("data"))
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the event logger");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // (The address is printed once the token file is written.)
        let token = vpml_event_logger::Tokens::load(&dir.join("data/tokens"))
            .expect("the logger's token file")
            .any_job_token()
            .expect("a token for any job")
            .to_string();
        Logger {
            child,
            addr: line.trim().to_string(),
            dir,
            token,
            _tmp: tmp,
        }
    }

    fn job_args(&self) -> Vec<String> {
        vec![
            "--protocol".into(),
            "pessimist".into(),
            "--event-logger-addrs".into(),
            self.addr.clone(),
            "--token-file".into(),
            self.dir.join("data/tokens").display().to_string(),
        ]
    }

    /// Every stored event of `rank` in `job`, formatted like the rank
    /// program's `event` lines.
    fn events(&self, job: &str, rank: usize) -> Vec<String> {
        let cfg = ClientConfig::new(
            vec![self.addr.parse().unwrap()],
            job,
            rank as u32,
            0,
            &self.token,
        );
        let client = Client::connect(cfg).expect("connect to the logger");
        let events = client.get_events(1).expect("get events");
        let _ = client.close();
        events
            .into_iter()
            .map(|(_, e)| format_event(rank, &e))
            .collect()
    }
}

impl Drop for Logger {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn format_event(rank: usize, e: &Event) -> String {
    let body = match e {
        Event::Match { recv, source } => format!("match {recv} {source}"),
        Event::Probe {
            call,
            found: true,
            source,
            tag,
            length,
        } => format!("probe {call} {source} {tag} {length}"),
        Event::Probe { call, .. } => format!("probe {call} not-found"),
        Event::Delivery { call, completed } => {
            format!(
                "delivery {call} {}",
                completed
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )
        }
        Event::NoneRun { lane, first, last } => {
            format!("none_run {lane}:{first} {lane}:{last}")
        }
        Event::Cancel {
            call,
            request,
            cancelled,
        } => format!("cancel {call} {request} {}", u8::from(*cancelled)),
    };
    format!("event {rank} {body}")
}

fn job_id(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("vpml run: job ")?
                .split(',')
                .next()
                .map(str::to_string)
        })
        .unwrap_or_else(|| panic!("no job line in:\n{stderr}"))
}

fn run(n: usize, args: &[String], program: &str, prog_args: &[&str]) -> Output {
    Command::new(vpml())
        .args(["run", "-v", "-n", &n.to_string(), "--timeout", "120"])
        .args(args)
        .arg(example(program))
        .args(prog_args)
        .output()
        .expect("run vpml")
}

/// Run `logging-checks MODE` under pessimist and compare, rank by rank,
/// the events the logger stored with those the program says must exist.
fn check_mode(n: usize, mode: &str) {
    let _g = serial();
    let logger = Logger::start(mode);
    let out = run(n, &logger.job_args(), "logging-checks", &[mode]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(&format!("ok {mode}")),
        "{mode}: {}\n{stdout}\n{stderr}",
        out.status
    );
    let job = job_id(&stderr);
    let mut want: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for l in stdout.lines().filter(|l| l.starts_with("event ")) {
        let rank: usize = l.split(' ').nth(1).unwrap().parse().unwrap();
        want.entry(rank).or_default().push(l.to_string());
    }
    for rank in 0..n {
        let mut got = logger.events(&job, rank);
        let mut expected = want.remove(&rank).unwrap_or_default();
        got.sort();
        expected.sort();
        assert_eq!(
            got, expected,
            "{mode}: events of rank {rank} (stored vs expected)"
        );
    }
}

#[test]
fn named_sources_waits_and_collectives_log_nothing() {
    check_mode(3, "named");
}

#[test]
fn any_source_receives_log_one_match_each() {
    check_mode(3, "any");
}

#[test]
fn test_and_wait_family_log_delivery_sets_and_lazy_none_runs() {
    check_mode(2, "completion");
}

#[test]
fn probes_log_their_answers() {
    check_mode(2, "probe");
}

#[test]
fn cancels_log_whether_they_took_effect() {
    check_mode(2, "cancel");
}

/// SIGSTOPs `child` and returns once the whole process has stopped. The
/// signal alone only starts a group stop: until the thread that takes it
/// runs, the logger's other threads keep serving (and acknowledging).
fn stop_until_stopped(child: &Child) {
    let pid = child.id() as libc::pid_t;
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0, "SIGSTOP");
    let mut status = 0;
    // SAFETY: waiting for our own child's stop; WUNTRACED reports it
    // without reaping, so `Child` still owns the process.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WUNTRACED) };
    assert!(
        r == pid && libc::WIFSTOPPED(status),
        "the logger did not stop (waitpid {r}, status {status:#x})"
    );
}

#[test]
fn a_send_after_an_event_waits_for_the_stopped_logger() {
    send_waits_for_the_stopped_logger("commit");
}

#[test]
fn a_send_after_a_failed_test_waits_for_the_stopped_logger() {
    send_waits_for_the_stopped_logger("commit-none-run");
}

/// The commit rule with the logger stopped: in `mode`, rank 0 prints
/// "rank 0 ready", creates an event once told "go" on stdin, prints
/// "rank 0 sending the reply" and sends; rank 1 prints "rank 1 got the
/// reply" when the send arrives, which must wait for the logger.
fn send_waits_for_the_stopped_logger(mode: &str) {
    let _g = serial();
    let logger = Logger::start(mode);
    let mut child = Command::new(vpml())
        .args(["run", "-n", "2", "--timeout", "120"])
        .args(logger.job_args())
        .arg(example("logging-checks"))
        .arg(mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run vpml");
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let wait_for = |what: &str| loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no {what:?} line"));
        assert!(
            !line.contains("got the reply") || what.contains("got the reply"),
            "the reply arrived too early: {line}"
        );
        if line.contains(what) {
            return;
        }
    };
    wait_for("rank 0 ready");
    stop_until_stopped(&logger.child);
    writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
    wait_for("rank 0 sending the reply");
    // The reply follows an unlogged event: it must not arrive while the
    // logger cannot acknowledge. Watch for a while.
    if let Ok(line) = rx.recv_timeout(Duration::from_millis(1500)) {
        assert!(
            !line.contains("got the reply"),
            "reply delivered while the logger was stopped"
        );
    }
    // SAFETY: as above.
    unsafe { libc::kill(logger.child.id() as i32, libc::SIGCONT) };
    wait_for("rank 1 got the reply");
    assert!(child.wait().unwrap().success());
}

#[test]
fn sender_logs_read_back_byte_exact_after_the_job() {
    let _g = serial();
    let tmp = tempfile::Builder::new()
        .prefix("vpml-pessimist-logs-")
        .tempdir()
        .unwrap();
    let dir = tmp.path().join("logs");
    let out = run(
        3,
        &[
            "--protocol".into(),
            "pessimist".into(),
            "--log-dir".into(),
            dir.display().to_string(),
            "--sender-log".into(),
            "file".into(),
        ],
        "logging-checks",
        &["payloads"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for r in 0..3usize {
        let log =
            vpml_sender_log::SenderLog::open_read_only(&Path::new(&dir).join(format!("rank-{r}")))
                .expect("open log");
        let right = ((r + 1) % 3) as u32;
        // The program sends on the world (context 0).
        let records: Vec<_> = log.iter_from(right, 0, 0).map(|r| r.unwrap()).collect();
        assert_eq!(
            records.len(),
            30,
            "rank {r} logged {} messages to {right}",
            records.len()
        );
        for (k, rec) in records.iter().enumerate() {
            let len = (k * 977) % 50_000;
            let want: Vec<u8> = (0..len).map(|i| (i * 31 + k + r) as u8).collect();
            assert_eq!(rec.header.tag, k as i32);
            assert_eq!(rec.header.seq, k as u64 + 1);
            assert!(
                rec.payload == want.as_slice(),
                "rank {r} message {k} differs in the log"
            );
        }
    }
}

#[test]
fn applications_give_the_same_results_with_and_without_the_protocol() {
    let _g = serial();
    let pess = vec!["--protocol".to_string(), "pessimist".to_string()];
    for (prog, n, args) in [
        ("heat3d", 4, vec!["--points", "6x6x12", "--steps", "10"]),
        ("mg-pattern", 4, vec!["--cycles", "3"]),
        ("request-mix", 4, vec!["--rounds", "40"]),
    ] {
        let plain = run(n, &[], prog, &args);
        let logged = run(n, &pess, prog, &args);
        assert!(
            plain.status.success() && logged.status.success(),
            "{prog}: {}",
            String::from_utf8_lossy(&logged.stderr)
        );
        // Everything but the protocol's own event count must be identical.
        let results = |o: &Output| -> Vec<String> {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| !l.starts_with("events_logged"))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(
            results(&plain),
            results(&logged),
            "{prog} printed different results under pessimist"
        );
    }
}
