//! The event logger as a real process (`vpml event-logger`) driven by the
//! real client: crashes, replicas, hostile input, full disks, damaged files
//! and truncation.
//!
//! The tests are grouped by what they check: what survives a crash of the
//! logger, with and without replicas (`event_logger/durability.rs`); bad
//! input on the wire and on the command line (`event_logger/bad_input.rs`);
//! the logger's files: a full disk, damage and truncation
//! (`event_logger/files.rs`). This file holds what they share; the modules
//! sit in `event_logger/` and are named by `#[path]`, as Cargo builds every
//! file directly in `tests/` as a test binary of its own.

#[path = "event_logger/bad_input.rs"]
mod bad_input;
#[path = "event_logger/durability.rs"]
mod durability;
#[path = "event_logger/files.rs"]
mod files;

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use vpml_event_logger::{CallId, Client, ClientConfig, Event, EventId};

const JOB: &str = "job1";
const TOKEN: &str = "test-token-0123456789abcdef";

/// The event with id `id`: every kind in turn, fields derived from the id so
/// that what is read back can be checked.
fn event_for(id: EventId) -> Event {
    let c = |n| CallId::new((id % 3) as u32, n);
    match id % 5 {
        0 => Event::Match {
            recv: c(id * 3),
            source: (id % 7) as u32,
        },
        1 => Event::Probe {
            call: c(id * 3),
            found: id.is_multiple_of(2),
            source: (id % 11) as u32,
            tag: -(id as i32 % 5),
            length: id * 100,
        },
        2 => Event::Delivery {
            call: c(id * 3),
            completed: (0..id % 4).map(|k| c(id + k)).collect(),
        },
        3 => Event::NoneRun {
            lane: (id % 3) as u32,
            first: id,
            last: id + 5,
        },
        _ => Event::Cancel {
            call: c(id),
            request: c(id / 2),
            cancelled: id.is_multiple_of(3),
        },
    }
}

fn events_for(first: EventId, n: u64) -> Vec<Event> {
    (first..first + n).map(event_for).collect()
}

/// Asserts that `events` are exactly ids `from..=to` with their contents.
fn assert_events(events: &[(EventId, Event)], from: EventId, to: EventId) {
    assert_eq!(
        events.len() as u64,
        to + 1 - from,
        "expected events {from}..={to}, got {} events ({:?}..{:?})",
        events.len(),
        events.first().map(|e| e.0),
        events.last().map(|e| e.0)
    );
    for (i, (id, ev)) in events.iter().enumerate() {
        assert_eq!(*id, from + i as u64);
        assert_eq!(*ev, event_for(*id), "content of event {id}");
    }
}

/// A fresh directory for one test (removed when dropped), with the job's
/// token file.
struct TempDir(tempfile::TempDir);

impl TempDir {
    fn new(name: &str) -> Self {
        let t = tempfile::Builder::new()
            .prefix(&format!("vpml-el-{name}-"))
            .tempdir()
            .expect("create temp dir");
        std::fs::write(t.path().join("tokens"), format!("{JOB} {TOKEN}\n"))
            .expect("write token file");
        TempDir(t)
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn data(&self) -> PathBuf {
        self.path().join("data")
    }

    fn tokens(&self) -> PathBuf {
        self.path().join("tokens")
    }

    /// Segment files of a rank, sorted.
    fn segments(&self, rank: u32) -> Vec<PathBuf> {
        let dir = self.data().join("jobs").join(JOB).join(rank.to_string());
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("rank dir")
            .map(|e| e.expect("dir entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        v.sort();
        v
    }
}

/// A `vpml event-logger` process.
struct Logger {
    child: Child,
    addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

#[derive(Default, Clone)]
struct Opts<'a> {
    listen: Option<SocketAddr>,
    extra: &'a [&'a str],
    /// RLIMIT_FSIZE for the process, in bytes.
    file_size_limit: Option<u64>,
}

fn logger_command(dir: &TempDir, opts: &Opts<'_>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vpml"));
    cmd.arg("event-logger")
        .arg("--data-dir")
        .arg(dir.data())
        .arg("--token-file")
        .arg(dir.tokens())
        .args(opts.extra)
        .env("VPML_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(addr) = opts.listen {
        cmd.arg("--listen").arg(addr.to_string());
    }
    if let Some(limit) = opts.file_size_limit {
        // SAFETY: between fork and exec only async-signal-safe calls are
        // made (setrlimit, signal), touching no memory shared with the parent.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: limit,
                    rlim_max: limit,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
    }
    cmd
}

impl Logger {
    fn start(dir: &TempDir, opts: &Opts<'_>) -> Logger {
        let mut child = logger_command(dir, opts)
            .spawn()
            .expect("start vpml event-logger");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().expect("stderr pipe");
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut line = String::new();
        let out = child.stdout.take().expect("stdout pipe");
        BufReader::new(out)
            .read_line(&mut line)
            .expect("read address");
        let addr = line.trim().parse().unwrap_or_else(|_| {
            let status = child.wait().expect("wait");
            panic!(
                "logger printed {line:?} instead of its address ({status}); stderr:\n{}",
                stderr.lock().unwrap()
            )
        });
        Logger {
            child,
            addr,
            stderr,
        }
    }

    fn kill(mut self) {
        self.child.kill().expect("SIGKILL logger");
        self.child.wait().expect("wait logger");
    }

    fn stop(mut self) -> String {
        // SAFETY: plain kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(rc, 0);
        let status = self.child.wait().expect("wait logger");
        assert!(status.success(), "logger exited with {status}");
        self.stderr_now()
    }

    fn stderr_now(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits (bounded) until the logger's stderr contains `what`.
    fn wait_stderr(&self, what: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = self.stderr_now();
            if s.contains(what) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "logger never logged {what:?}; stderr:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Logger {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client_cfg(loggers: Vec<SocketAddr>, rank: u32, incarnation: u32) -> ClientConfig {
    let mut cfg = ClientConfig::new(loggers, JOB, rank, incarnation, TOKEN);
    cfg.timeout = Duration::from_secs(20);
    cfg
}

fn connect(loggers: Vec<SocketAddr>, rank: u32, incarnation: u32) -> Client {
    Client::connect(client_cfg(loggers, rank, incarnation)).expect("connect to the logger")
}

/// Puts batches of 1..=64 events until `stop`, from another thread.
fn put_stream(client: Arc<Client>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<EventId> {
    std::thread::spawn(move || {
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let first = client.last_id() + 1;
            let size = n % 64 + 1;
            n += 1;
            match client.put_batch(&events_for(first, size)) {
                Ok(_) => {}
                Err(e) => panic!("put failed: {e}"),
            }
        }
        client.last_id()
    })
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}
