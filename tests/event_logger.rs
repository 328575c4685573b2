//! The event logger as a real process (`vpml event-logger`) driven by the
//! real client: crashes, replicas, hostile input, full disks, damaged files
//! and truncation.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use vpml_event_logger::wire::{self, Decoded, ErrorCode, Hello, Message};
use vpml_event_logger::{Client, ClientConfig, ClientError, Event, EventBatch, EventId};

const JOB: &str = "job1";
const TOKEN: &str = "test-token-0123456789abcdef";

/// The event with id `id`: every kind in turn, fields derived from the id so
/// that what is read back can be checked.
fn event_for(id: EventId) -> Event {
    match id % 5 {
        0 => Event::Match {
            recv: id * 3,
            source: (id % 7) as u32,
        },
        1 => Event::Probe {
            call: id * 3,
            found: id.is_multiple_of(2),
            source: (id % 11) as u32,
            tag: -(id as i32 % 5),
            length: id * 100,
        },
        2 => Event::Delivery {
            call: id * 3,
            completed: (0..id % 4).map(|k| id + k).collect(),
        },
        3 => Event::NoneRun {
            first: id,
            last: id + 5,
        },
        _ => Event::Cancel {
            call: id,
            request: id / 2,
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

#[test]
fn sigkill_mid_stream_loses_no_acknowledged_event_and_clients_reconnect() {
    let dir = TempDir::new("sigkill");
    let logger = Logger::start(&dir, &Opts::default());
    let addr = logger.addr;
    let opts = Opts {
        listen: Some(addr),
        ..Opts::default()
    };
    let client = Arc::new(connect(vec![addr], 0, 0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = put_stream(Arc::clone(&client), Arc::clone(&stop));

    wait_until("10k durable events", || client.durable() >= 10_000);
    logger.kill();
    let acked_first_kill = client.durable();

    // Same port: the client reconnects by itself and resends what the dead
    // logger had not acknowledged.
    let logger = Logger::start(&dir, &opts);
    wait_until("the client to resume after the restart", || {
        client.durable() >= acked_first_kill + 10_000
    });
    logger.kill();
    stop.store(true, Ordering::Relaxed);
    let last_put = writer.join().expect("writer thread");
    let acked = client.durable();
    assert!(acked >= acked_first_kill + 10_000 && acked <= last_put);
    drop(client);

    // The rank "restarts": a new incarnation reads its events back.
    let logger = Logger::start(&dir, &opts);
    let reader = connect(vec![logger.addr], 0, 1);
    let highest = reader.last_id();
    assert!(
        highest >= acked,
        "logger holds up to {highest}, but {acked} were acknowledged"
    );
    let events = reader.get_events(1).expect("get events");
    assert_events(&events, 1, highest);
    // The restarted rank continues the numbering.
    let id = reader.put(&event_for(highest + 1)).expect("put");
    assert_eq!(id, highest + 1);
    reader.wait_durable(id).expect("durable after restart");
    reader.close().expect("close");
    let stderr = logger.stop();
    assert!(!stderr.contains("corrupt"), "{stderr}");
}

/// Two loggers in `<name>-a` and `<name>-b`, and rank 0's client of both
/// as replicas.
fn two_replicas(
    name: &str,
    survivors_acknowledge: bool,
) -> (TempDir, Logger, TempDir, Logger, Arc<Client>) {
    let dir_a = TempDir::new(&format!("{name}-a"));
    let dir_b = TempDir::new(&format!("{name}-b"));
    let a = Logger::start(&dir_a, &Opts::default());
    let b = Logger::start(&dir_b, &Opts::default());
    let mut cfg = client_cfg(vec![a.addr, b.addr], 0, 0);
    cfg.replicas = 2;
    cfg.survivors_acknowledge = survivors_acknowledge;
    let client = Arc::new(Client::connect(cfg).expect("connect"));
    assert_eq!(client.replicas(), &[a.addr, b.addr]);
    (dir_a, a, dir_b, b, client)
}

#[test]
fn with_two_replicas_one_logger_crash_loses_no_acknowledged_event() {
    let (_dir_a, a, _dir_b, b, client) = two_replicas("replica", false);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = put_stream(Arc::clone(&client), Arc::clone(&stop));
    wait_until("5k durable events", || client.durable() >= 5_000);
    let b_addr = b.addr;
    b.kill();
    stop.store(true, Ordering::Relaxed);
    let last = writer.join().expect("writer thread");
    let acked = client.durable();

    // With one replica gone nothing new can become durable, and the error
    // says which logger is missing.
    let id = client.put(&event_for(last + 1)).expect("put");
    let down = format!("logger {b_addr}: down");
    wait_until("the client to report the dead replica", || {
        match client.wait_durable_timeout(id, Duration::from_millis(50)) {
            Err(ClientError::Timeout { status, .. }) => status.contains(&down),
            other => panic!("expected a time-out, got {other:?}"),
        }
    });
    drop(client);

    // Everything acknowledged is on the survivor.
    let reader = connect(vec![a.addr], 0, 1);
    assert!(reader.last_id() >= acked);
    assert_events(&reader.get_events(1).expect("get"), 1, reader.last_id());
}

#[test]
fn with_two_replicas_the_survivor_acknowledges_and_a_restarted_logger_is_brought_level() {
    let (_dir_a, a, dir_b, b, client) = two_replicas("survivor", true);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = put_stream(Arc::clone(&client), Arc::clone(&stop));
    wait_until("5k durable events", || client.durable() >= 5_000);
    let b_addr = b.addr;
    b.kill();

    // With one replica gone the survivor acknowledges alone: puts go on
    // becoming durable.
    let before = client.durable();
    wait_until("events durable on the survivor alone", || {
        client.durable() > before + 1_000
    });
    stop.store(true, Ordering::Relaxed);
    let last = writer.join().expect("writer thread");
    client.wait_durable(last).expect("durable on the survivor");

    // The logger comes back on its address, from its files; the client
    // sends it what it missed while it was down.
    let opts = Opts {
        listen: Some(b_addr),
        ..Opts::default()
    };
    let b = Logger::start(&dir_b, &opts);
    let id = client.put(&event_for(last + 1)).expect("put");
    client.wait_durable(id).expect("durable");
    wait_until("the restarted logger to hold every event", || {
        client
            .stats()
            .is_ok_and(|s| s.iter().all(|r| r.rank_highest == id))
    });
    match Arc::try_unwrap(client) {
        Ok(c) => c.close().expect("close"),
        Err(_) => panic!("the writer thread still holds the client"),
    }
    for (name, addr) in [("a", a.addr), ("b", b.addr)] {
        let reader = connect(vec![addr], 0, 1);
        assert_eq!(reader.last_id(), last + 1, "logger {name}");
        assert_events(&reader.get_events(1).expect("get"), 1, last + 1);
    }
}

#[test]
fn replicas_are_brought_level_when_a_rank_restarts() {
    // Logger a holds 500 events of rank 0, logger b none (as if the previous
    // incarnation died before b got them); a client with both as replicas
    // copies them to b before adding its own.
    let dir_a = TempDir::new("level-a");
    let dir_b = TempDir::new("level-b");
    let a = Logger::start(&dir_a, &Opts::default());
    let b = Logger::start(&dir_b, &Opts::default());
    let solo = connect(vec![a.addr], 0, 0);
    let last = solo.put_batch(&events_for(1, 500)).expect("put");
    solo.wait_durable(last).expect("durable");
    solo.close().expect("close");

    let mut cfg = client_cfg(vec![a.addr, b.addr], 0, 1);
    cfg.replicas = 2;
    let both = Client::connect(cfg).expect("connect");
    assert_eq!(both.last_id(), 500);
    let id = both.put(&event_for(501)).expect("put");
    both.wait_durable(id).expect("durable on both");
    both.close().expect("close");
    let only_b = connect(vec![b.addr], 0, 2);
    assert_events(&only_b.get_events(1).expect("get"), 1, 501);
}

/// Connects a raw socket, sends `bytes`, optionally half-closes, and returns
/// what the logger answered before closing.
fn raw_exchange(addr: SocketAddr, bytes: &[u8], half_close: bool) -> Vec<Message> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    s.write_all(bytes).expect("send");
    if half_close {
        s.shutdown(std::net::Shutdown::Write).expect("half close");
    }
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let mut msgs = Vec::new();
    let mut at = 0;
    while let Ok(Decoded::Frame(m, used)) = wire::decode_frame(&got[at..], wire::MAX_FRAME) {
        msgs.push(m);
        at += used;
    }
    msgs
}

fn frame(msg: &Message) -> Vec<u8> {
    let mut v = Vec::new();
    wire::encode_frame(msg, &mut v);
    v
}

fn hello(job: &str, rank: u32, incarnation: u32, token: &str) -> Message {
    Message::Hello(Hello {
        job: job.into(),
        rank,
        incarnation,
        token: token.into(),
    })
}

fn assert_error(msgs: &[Message], code: ErrorCode) {
    assert!(
        msgs.iter()
            .any(|m| matches!(m, Message::Error { req: 0, code: c, .. } if *c == code)),
        "expected an error {code}, got {msgs:?}"
    );
}

#[test]
fn hostile_input_closes_only_that_connection() {
    let dir = TempDir::new("hostile");
    let logger = Logger::start(&dir, &Opts::default());
    let good = connect(vec![logger.addr], 0, 0);
    let mut next = 1;
    let mut check_good = || {
        let last = good.put_batch(&events_for(next, 10)).expect("put");
        good.wait_durable(last)
            .expect("the good client keeps working");
        next = last + 1;
    };
    check_good();

    // Garbage instead of a frame.
    let msgs = raw_exchange(logger.addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", false);
    assert_error(&msgs, ErrorCode::Malformed);
    logger.wait_stderr("bad frame magic");
    check_good();

    // A header announcing 32 MiB: refused before anything is read.
    let mut big = frame(&Message::Bye);
    big[8..12].copy_from_slice(&(32u32 << 20).to_le_bytes());
    assert_error(&raw_exchange(logger.addr, &big, false), ErrorCode::TooLarge);
    logger.wait_stderr("exceeds the limit");
    check_good();

    // A frame cut short by the peer.
    let whole = frame(&hello(JOB, 5, 0, TOKEN));
    let _ = raw_exchange(logger.addr, &whole[..whole.len() - 3], true);
    logger.wait_stderr("connection closed inside a frame");
    check_good();

    // A flipped bit.
    let mut flipped = frame(&hello(JOB, 5, 0, TOKEN));
    let n = flipped.len();
    flipped[n - 5] ^= 0x10;
    assert_error(
        &raw_exchange(logger.addr, &flipped, false),
        ErrorCode::Malformed,
    );
    logger.wait_stderr("checksum mismatch");
    check_good();

    // Wrong token, unknown job: the client learns only "authentication failed".
    let msgs = raw_exchange(
        logger.addr,
        &frame(&hello(JOB, 5, 0, "wrong-token-0123456789")),
        false,
    );
    assert_error(&msgs, ErrorCode::AuthFailed);
    logger.wait_stderr("wrong token");
    let msgs = raw_exchange(logger.addr, &frame(&hello("other-job", 5, 0, TOKEN)), false);
    assert_error(&msgs, ErrorCode::AuthFailed);
    logger.wait_stderr("unknown job");
    let mut cfg = client_cfg(vec![logger.addr], 1, 0);
    cfg.token = "x".repeat(20);
    match Client::connect(cfg) {
        Err(ClientError::Refused {
            code: ErrorCode::AuthFailed,
            ..
        }) => {}
        other => panic!("expected an authentication failure, got {other:?}"),
    }
    check_good();

    // A put with a gap in the ids, and a put before Hello.
    let mut bad = frame(&hello(JOB, 7, 0, TOKEN));
    let mut batch = EventBatch::new();
    batch.push(5, &event_for(5)).expect("push");
    bad.extend(frame(&Message::Put {
        rank: 7,
        batch: batch.clone(),
    }));
    let msgs = raw_exchange(logger.addr, &bad, false);
    assert!(
        matches!(msgs.first(), Some(Message::Welcome { highest: 0, .. })),
        "{msgs:?}"
    );
    assert_error(&msgs, ErrorCode::BadRequest);
    logger.wait_stderr("would leave a gap");
    let msgs = raw_exchange(logger.addr, &frame(&Message::Put { rank: 7, batch }), false);
    assert_error(&msgs, ErrorCode::BadRequest);
    logger.wait_stderr("first message is not Hello");
    check_good();

    // An older incarnation of a rank that has restarted is refused.
    let newer = connect(vec![logger.addr], 3, 2);
    match Client::connect(client_cfg(vec![logger.addr], 3, 1)) {
        Err(ClientError::Refused {
            code: ErrorCode::StaleIncarnation,
            ..
        }) => {}
        other => panic!("expected a stale incarnation, got {other:?}"),
    }
    drop(newer);
    check_good();

    let stats = good.stats().expect("stats");
    assert!(stats[0].connections_refused >= 9, "{:?}", stats[0]);
    assert_eq!(stats[0].rank_highest, next - 1);
    assert_events(&good.get_events(1).expect("get"), 1, next - 1);
}

#[test]
fn full_disk_gives_errors_and_never_an_ack() {
    let dir = TempDir::new("full");
    let opts = Opts {
        file_size_limit: Some(64 << 10),
        ..Opts::default()
    };
    let logger = Logger::start(&dir, &opts);
    let client = connect(vec![logger.addr], 0, 0);
    let mut failure = None;
    for _ in 0..1000 {
        let first = client.last_id() + 1;
        let last = client.put_batch(&events_for(first, 100)).expect("queued");
        if let Err(e) = client.wait_durable(last) {
            failure = Some((e, first));
            break;
        }
    }
    let (err, first_failed) = failure.expect("the 64 KiB limit was never hit");
    assert!(
        matches!(&err, ClientError::Refused { code: ErrorCode::Storage, message, .. } if message.contains("File too large")),
        "{err}"
    );
    let acked = client.durable();
    assert_eq!(
        acked,
        first_failed - 1,
        "events of the failed put were acknowledged"
    );
    // The client refuses to go on without the guarantee.
    assert_eq!(client.put(&event_for(1)).unwrap_err(), err);
    drop(client);
    logger.wait_stderr("File too large");

    // The logger stays up for the others, and its files hold whole records
    // only: a restart finds no torn or corrupt record.
    let other = connect(vec![logger.addr], 1, 0);
    let id = other.put(&event_for(1)).expect("put");
    other.wait_durable(id).expect("another rank still works");
    drop(other);
    let stderr = logger.stop();
    let logger = Logger::start(&dir, &Opts::default());
    let reader = connect(vec![logger.addr], 0, 1);
    let highest = reader.last_id();
    assert_eq!(highest, acked, "the failed put left events behind");
    assert_events(&reader.get_events(1).expect("get"), 1, highest);
    drop(reader);
    let restart = logger.stop();
    assert!(
        !restart.contains("torn") && !restart.contains("corrupt"),
        "{stderr}\n{restart}"
    );
}

fn fill(addr: SocketAddr, rank: u32, n: u64, batch: u64) -> EventId {
    let client = connect(vec![addr], rank, 0);
    let mut last = 0;
    while last < n {
        // One batch per record: wait before the next put.
        last = client
            .put_batch(&events_for(last + 1, batch.min(n - last)))
            .expect("put");
        client.wait_durable(last).expect("durable");
    }
    client.close().expect("close");
    last
}

#[test]
fn a_torn_tail_is_cut_with_a_warning() {
    let dir = TempDir::new("torn");
    let logger = Logger::start(&dir, &Opts::default());
    fill(logger.addr, 0, 100, 10);
    logger.stop();
    let seg = dir.segments(0).pop().expect("a segment");
    let len = std::fs::metadata(&seg).expect("meta").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .and_then(|f| f.set_len(len - 7))
        .expect("cut the file");

    let logger = Logger::start(&dir, &Opts::default());
    logger.wait_stderr("cutting a torn record");
    let reader = connect(vec![logger.addr], 0, 1);
    assert_eq!(reader.last_id(), 90, "the last batch of 10 was torn");
    assert_events(&reader.get_events(1).expect("get"), 1, 90);
    let id = reader.put_batch(&events_for(91, 5)).expect("put");
    reader.wait_durable(id).expect("durable");
    assert_events(&reader.get_events(80).expect("get"), 80, 95);
}

#[test]
fn corruption_in_the_middle_stops_startup_and_repair_recovers() {
    let dir = TempDir::new("corrupt");
    let small = Opts {
        extra: &["--segment-bytes", "4096"],
        ..Opts::default()
    };
    let logger = Logger::start(&dir, &small);
    fill(logger.addr, 0, 2000, 20);
    logger.stop();
    let segs = dir.segments(0);
    assert!(segs.len() > 4, "{} segments", segs.len());
    let victim = &segs[1];
    let mut bytes = std::fs::read(victim).expect("read");
    let at = bytes.len() / 2;
    bytes[at] ^= 0xff;
    std::fs::write(victim, &bytes).expect("write");

    let out = logger_command(&dir, &small).output().expect("run logger");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.lines().last().unwrap_or_default();
    assert!(
        line.starts_with("vpml event-logger: ") && line.contains(&victim.display().to_string()),
        "{stderr}"
    );
    let offset: usize = line
        .split("corrupt record at offset ")
        .nth(1)
        .and_then(|s| s.split(':').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no offset in {line:?}"));
    assert!(
        offset <= at && at - offset < 20 * 60 + 36,
        "offset {offset}, damage at {at}"
    );

    let repair = Opts {
        extra: &["--segment-bytes", "4096", "--repair"],
        ..Opts::default()
    };
    let logger = Logger::start(&dir, &repair);
    logger.wait_stderr("repair: cutting the log at a corrupt record");
    let reader = connect(vec![logger.addr], 0, 1);
    let highest = reader.last_id();
    assert!(highest > 0 && highest < 2000, "kept {highest}");
    assert_events(&reader.get_events(1).expect("get"), 1, highest);
    let id = reader.put(&event_for(highest + 1)).expect("put");
    reader.wait_durable(id).expect("durable after repair");
    let set_aside = std::fs::read_dir(victim.parent().expect("dir"))
        .expect("dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().to_string_lossy().ends_with(".corrupt"))
        })
        .count();
    assert_eq!(set_aside, segs.len() - 2, "later segments are set aside");
}

#[test]
fn truncate_reclaims_whole_segments() {
    let dir = TempDir::new("truncate");
    let opts = Opts {
        extra: &["--segment-bytes", "4096"],
        ..Opts::default()
    };
    let logger = Logger::start(&dir, &opts);
    let client = connect(vec![logger.addr], 0, 0);
    let mut last = 0;
    while last < 3000 {
        last = client.put_batch(&events_for(last + 1, 30)).expect("put");
    }
    client.wait_durable(last).expect("durable");
    let before = dir.segments(0).len();
    assert_eq!(
        client.stats().expect("stats")[0].rank_segments,
        before as u64
    );
    let (files, bytes) = client.truncate(2000).expect("truncate");
    assert!(files > 0 && bytes > 0);
    let after = dir.segments(0).len();
    assert_eq!(after, before - files as usize);
    let stats = &client.stats().expect("stats")[0];
    let first_kept = stats.rank_first_kept;
    assert!(
        first_kept > 1 && first_kept <= 2001,
        "first kept {first_kept}"
    );
    assert_events(&client.get_events(1).expect("get"), first_kept, 3000);
    assert!(
        client.truncate(last + 1).is_err(),
        "cannot truncate what is not durable"
    );
    client.close().expect("close");

    // The state survives a restart, and ids continue after a full truncate.
    logger.stop();
    let logger = Logger::start(&dir, &opts);
    let client = connect(vec![logger.addr], 0, 1);
    assert_eq!(client.last_id(), 3000);
    assert_eq!(
        client.stats().expect("stats")[0].rank_first_kept,
        first_kept
    );
    client.truncate(3000).expect("truncate all");
    assert_eq!(dir.segments(0).len(), 1);
    assert_eq!(client.get_events(1).expect("get"), vec![]);
    let id = client.put(&event_for(3001)).expect("put");
    assert_eq!(id, 3001);
    client.wait_durable(id).expect("durable");
    assert_events(&client.get_events(1).expect("get"), 3001, 3001);
}

#[test]
fn fsync_mode_group_commits_and_survives_sigkill() {
    let dir = TempDir::new("fsync");
    let logger = Logger::start(
        &dir,
        &Opts {
            extra: &["--durability", "fsync"],
            ..Opts::default()
        },
    );
    let clients: Vec<Arc<Client>> = (0..4)
        .map(|r| Arc::new(connect(vec![logger.addr], r, 0)))
        .collect();
    let threads: Vec<_> = clients
        .iter()
        .map(|c| {
            let c = Arc::clone(c);
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let first = c.last_id() + 1;
                    let last = c.put_batch(&events_for(first, 20)).expect("put");
                    c.wait_durable(last).expect("durable");
                }
                c.last_id()
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().expect("client thread"), 1000);
    }
    let stats = clients[0].stats().expect("stats")[0].clone();
    assert!(stats.fsyncs >= 1 && stats.puts >= 200, "{stats:?}");
    drop(clients);
    logger.kill();
    let logger = Logger::start(&dir, &Opts::default());
    for r in 0..4 {
        let reader = connect(vec![logger.addr], r, 1);
        assert_eq!(reader.last_id(), 1000);
        assert_events(&reader.get_events(1).expect("get"), 1, 1000);
    }
}

#[test]
fn command_line_errors_are_one_line() {
    let dir = TempDir::new("cli");
    std::fs::write(dir.tokens(), "job1 short\n").expect("write");
    let out = logger_command(&dir, &Opts::default())
        .output()
        .expect("run");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("line 1") && stderr.contains("token"),
        "{stderr}"
    );

    // An inherited descriptor that is no listening socket (stdin here).
    let out = Command::new(env!("CARGO_BIN_EXE_vpml"))
        .args(["event-logger", "--listen-fd", "0", "--data-dir"])
        .arg(dir.path().join("d1"))
        .stdin(Stdio::null())
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--listen-fd 0:"), "{stderr}");

    // Without a token file the logger creates one with a random token.
    let data = dir.path().join("d2");
    let mut child = Command::new(env!("CARGO_BIN_EXE_vpml"))
        .args(["event-logger", "--data-dir"])
        .arg(&data)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("address");
    let addr: SocketAddr = line.trim().parse().expect("an address");
    assert!(addr.ip().is_loopback());
    let tokens = std::fs::read_to_string(data.join("tokens")).expect("token file");
    let token = tokens
        .lines()
        .find_map(|l| l.strip_prefix("* "))
        .expect("a token for any job")
        .to_owned();
    let c =
        Client::connect(ClientConfig::new(vec![addr], "anyjob", 0, 0, &token)).expect("connect");
    c.wait_durable(c.put(&event_for(1)).expect("put"))
        .expect("durable");
    drop(c);
    child.kill().expect("kill");
    child.wait().expect("wait");
}

#[test]
fn checkpoint_copies_are_kept_on_every_replica_and_read_back_from_a_survivor() {
    let dir_a = TempDir::new("copies-a");
    let dir_b = TempDir::new("copies-b");
    let a = Logger::start(&dir_a, &Opts::default());
    let b = Logger::start(&dir_b, &Opts::default());
    let mut cfg = client_cfg(vec![a.addr, b.addr], 0, 0);
    cfg.replicas = 2;
    let client = Client::connect(cfg).expect("connect");
    assert_eq!(client.load_copy(0).expect("load"), None);
    // Larger than one part, so it travels in several.
    let copy = |index: u64| -> Vec<u8> {
        (0..2_500_000u64)
            .map(|i| (i.wrapping_mul(index + 7) >> 3) as u8)
            .collect()
    };
    for index in 1..=3 {
        client.save_copy(index, &copy(index)).expect("save");
    }
    client.close().expect("close");
    a.kill();
    // Another rank's client (its restarted process on another host)
    // reads the newest copy from the logger that is left.
    let reader = connect(vec![b.addr], 1, 1);
    let (index, bytes) = reader.load_copy(0).expect("load").expect("a copy");
    assert_eq!(index, 3);
    assert!(bytes == copy(3), "the copy came back changed");
    reader.close().expect("close");
    let kept: Vec<String> =
        std::fs::read_dir(dir_b.data().join("jobs").join(JOB).join("0").join("copies"))
            .expect("copies dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
    assert_eq!(kept.len(), 2, "{kept:?}");
}
