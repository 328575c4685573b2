//! Bad input: hostile bytes on a connection (garbage, oversized, cut and
//! damaged frames, wrong tokens, bad requests, stale incarnations) and
//! command-line errors.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use vpml_event_logger::wire::{self, Decoded, ErrorCode, Hello, Message};
use vpml_event_logger::{Client, ClientConfig, ClientError, EventBatch};

use super::{
    JOB, Logger, Opts, TOKEN, TempDir, assert_events, client_cfg, connect, event_for, events_for,
    logger_command,
};

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
    let log = logger.wait_stderr("bad frame magic");
    // The log is a file, not a terminal: no colour escape codes in it.
    assert!(!log.contains('\u{1b}'), "escape codes in the log:\n{log:?}");
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

/// The logger's resident memory, in KiB.
fn resident_kib(logger: &Logger) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", logger.child.id()))
        .expect("the logger's /proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

#[test]
fn idle_strangers_cannot_lock_out_ranks() {
    // More silent connections than the logger serves (100 here), and
    // than may wait for a Hello (64): each new one closes the oldest, so a
    // rank connecting after them still gets a slot and a session.
    let dir = TempDir::new("idle");
    let logger = Logger::start(
        &dir,
        &Opts {
            extra: &["--max-connections", "100"],
            ..Opts::default()
        },
    );
    let idle: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(logger.addr).expect("connect"))
        .collect();
    logger.wait_stderr("closing a connection that has not authenticated");
    let good = connect(vec![logger.addr], 0, 0);
    let last = good.put_batch(&events_for(1, 10)).expect("put");
    good.wait_durable(last)
        .expect("a rank is served beside them");
    drop(idle);
}

#[test]
fn a_stranger_costs_the_logger_a_few_kib() {
    // 40 connections announce a 16 MiB frame and send 2 MiB of it without
    // a Hello first: refused at the header (frames before Hello are tiny),
    // never buffered (before: ~2 MiB of memory each, 16 MiB if sent whole).
    let dir = TempDir::new("big-hello");
    let logger = Logger::start(&dir, &Opts::default());
    let before = resident_kib(&logger);
    let mut header = frame(&Message::Bye);
    header.truncate(wire::HEADER_LEN);
    header[8..12].copy_from_slice(&(16u32 << 20).to_le_bytes());
    let chunk = vec![0x5au8; 64 << 10];
    let strangers: Vec<TcpStream> = (0..40)
        .map(|_| {
            let mut s = TcpStream::connect(logger.addr).expect("connect");
            s.set_write_timeout(Some(Duration::from_secs(20)))
                .expect("timeout");
            // (The logger may close the connection under the writes.)
            let _ = s.write_all(&header);
            for _ in 0..32 {
                if s.write_all(&chunk).is_err() {
                    break;
                }
            }
            s
        })
        .collect();
    logger.wait_stderr("exceeds the limit");
    let grown = resident_kib(&logger).saturating_sub(before);
    assert!(
        grown < 16 << 10,
        "40 strangers grew the logger by {grown} KiB"
    );
    drop(strangers);
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
