//! The connection to each replica: its driver thread connects (and
//! reconnects), says hello, and reads and handles the logger's replies.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::put::{advance, pump};
use super::{ClientError, Reply, Shared, State, fatal, lock, wait};
use crate::event::EventId;
use crate::wire::{Decoded, ErrorCode, Hello, MAX_FRAME, Message, decode_frame, encode_frame};

/// Writes a frame on replica `rep`'s connection of `generation`.
pub(super) fn write_frame(
    sh: &Shared,
    rep: usize,
    generation: u64,
    frame: &[u8],
) -> std::io::Result<()> {
    let mut guard = lock(&sh.streams[rep]);
    match &mut *guard {
        Some((g, stream)) if *g == generation => stream.write_all(frame),
        _ => Err(std::io::Error::new(
            ErrorKind::NotConnected,
            "connection replaced",
        )),
    }
}

/// Marks a connection lost (if it is still the current one).
pub(super) fn mark_down(sh: &Shared, st: &mut State, rep: usize, generation: u64, why: String) {
    let r = &mut st.reps[rep];
    if r.generation != generation || !r.up {
        return;
    }
    r.up = false;
    tracing::debug!(logger = %sh.addrs[rep], %why, "event-logger connection lost");
    r.last_error = Some(why);
    if let Some((_, s)) = &*lock(&sh.streams[rep]) {
        let _ = s.shutdown(Shutdown::Both);
    }
    for p in st.requests.values_mut() {
        if p.rep == rep {
            p.outcome.get_or_insert(Err(ClientError::Closed));
        }
    }
    // The survivors alone may now make events durable.
    advance(sh, st);
    sh.cv.notify_all();
}

/// Connects replica `rep`, says hello, and returns the stream with the
/// Welcome's (highest, first kept).
fn connect(sh: &Shared, rep: usize) -> Result<(TcpStream, EventId, EventId), ClientError> {
    let addr = sh.addrs[rep];
    let limit = sh.cfg.timeout.min(Duration::from_secs(5));
    let unreachable = |cause: String| ClientError::Unreachable {
        addr,
        waited: Duration::ZERO,
        cause,
    };
    let mut stream =
        TcpStream::connect_timeout(&addr, limit).map_err(|e| unreachable(e.to_string()))?;
    let _ = stream.set_nodelay(true);
    stream
        .set_read_timeout(Some(limit))
        .map_err(|e| unreachable(e.to_string()))?;
    let mut frame = Vec::new();
    encode_frame(
        &Message::Hello(Hello {
            job: sh.cfg.job.clone(),
            rank: sh.cfg.rank,
            incarnation: sh.cfg.incarnation,
            token: sh.cfg.token.clone(),
        }),
        &mut frame,
    );
    stream
        .write_all(&frame)
        .map_err(|e| unreachable(e.to_string()))?;
    let mut buf = Vec::new();
    let msg = read_one(&mut stream, &mut buf).map_err(unreachable)?;
    stream
        .set_read_timeout(None)
        .map_err(|e| unreachable(e.to_string()))?;
    match msg {
        Message::Welcome {
            highest,
            first_kept,
        } => Ok((stream, highest, first_kept)),
        Message::Error { code, message, .. } => Err(ClientError::Refused {
            addr,
            code,
            message,
        }),
        other => Err(ClientError::Protocol {
            addr,
            why: format!("expected Welcome, got {other:?}"),
        }),
    }
}

/// Reads exactly one frame (used only for the Welcome).
fn read_one(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<Message, String> {
    let mut chunk = [0u8; 4096];
    loop {
        match decode_frame(buf, MAX_FRAME).map_err(|e| e.to_string())? {
            Decoded::Frame(m, used) => {
                buf.drain(..used);
                return Ok(m);
            }
            Decoded::NeedMore(_) => {}
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Err("connection closed by the logger".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Driver thread of replica `rep`: (re)connects and reads replies.
pub(super) fn drive(sh: &Shared, rep: usize) {
    let addr = sh.addrs[rep];
    let mut backoff = Duration::from_millis(5);
    loop {
        {
            let st = lock(&sh.st);
            if st.closing || st.fatal.is_some() {
                return;
            }
        }
        match connect(sh, rep) {
            Ok((stream, highest, first_kept)) => {
                backoff = Duration::from_millis(5);
                let reader = match stream.try_clone() {
                    Ok(r) => r,
                    Err(e) => {
                        let mut st = lock(&sh.st);
                        st.reps[rep].last_error = Some(e.to_string());
                        continue;
                    }
                };
                let generation = {
                    let mut st = lock(&sh.st);
                    if st.closing {
                        return;
                    }
                    let r = &st.reps[rep];
                    if highest < r.acked {
                        let e = ClientError::Protocol {
                            addr,
                            why: format!(
                                "logger lost acknowledged events: it acknowledged up to {} but now holds only up to {highest}",
                                r.acked
                            ),
                        };
                        fatal(sh, &mut st, e);
                        return;
                    }
                    if st.numbering_ready && highest > st.last_id {
                        let e = ClientError::Protocol {
                            addr,
                            why: format!(
                                "logger holds event {highest} but this client only created up to {} (another writer for this rank?)",
                                st.last_id
                            ),
                        };
                        fatal(sh, &mut st, e);
                        return;
                    }
                    let r = &mut st.reps[rep];
                    r.generation += 1;
                    r.up = true;
                    r.goodbye = false;
                    r.sent = highest;
                    r.acked = highest;
                    r.welcomed.get_or_insert((highest, first_kept));
                    let generation = r.generation;
                    *lock(&sh.streams[rep]) = Some((generation, stream));
                    advance(sh, &mut st);
                    sh.cv.notify_all();
                    generation
                };
                tracing::debug!(logger = %addr, highest, "event-logger session open");
                pump(sh, rep);
                let why = read_loop(sh, rep, reader);
                let mut st = lock(&sh.st);
                mark_down(sh, &mut st, rep, generation, why);
                *lock(&sh.streams[rep]) = None;
            }
            Err(e @ (ClientError::Refused { .. } | ClientError::Protocol { .. }))
                if !matches!(
                    e,
                    ClientError::Refused {
                        code: ErrorCode::Unavailable,
                        ..
                    }
                ) =>
            {
                let mut st = lock(&sh.st);
                if !st.closing {
                    fatal(sh, &mut st, e);
                }
                return;
            }
            Err(e) => {
                let mut st = lock(&sh.st);
                st.reps[rep].last_error = Some(match e {
                    ClientError::Unreachable { cause, .. } => cause,
                    other => other.to_string(),
                });
                sh.cv.notify_all();
            }
        }
        // Back off before the next attempt (woken early by close).
        let st = lock(&sh.st);
        if st.closing || st.fatal.is_some() {
            return;
        }
        drop(wait(sh, st, backoff));
        backoff = (backoff * 2).min(Duration::from_millis(500));
    }
}

/// Reads replies until the connection ends; returns why it ended.
fn read_loop(sh: &Shared, rep: usize, mut stream: TcpStream) -> String {
    let addr = sh.addrs[rep];
    let mut buf = vec![0u8; 64 << 10];
    let (mut start, mut end) = (0usize, 0usize);
    loop {
        loop {
            match decode_frame(&buf[start..end], MAX_FRAME) {
                Ok(Decoded::Frame(msg, used)) => {
                    start += used;
                    match on_message(sh, rep, msg) {
                        Ok(false) => {}
                        Ok(true) => pump(sh, rep),
                        Err(why) => return why,
                    }
                }
                Ok(Decoded::NeedMore(need)) => {
                    if start > 0 {
                        buf.copy_within(start..end, 0);
                        end -= start;
                        start = 0;
                    }
                    if need > buf.len() {
                        buf.resize(need, 0);
                    }
                    break;
                }
                Err(e) => {
                    tracing::warn!(logger = %addr, error = %e, "undecodable frame from the event logger");
                    return format!("undecodable frame: {e}");
                }
            }
        }
        match stream.read(&mut buf[end..]) {
            Ok(0) => return "connection closed by the logger".into(),
            Ok(n) => end += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return format!("read failed: {e}"),
        }
    }
}

/// Handles one reply: `Ok(true)` asks for queued events to be sent,
/// `Err(why)` ends the connection.
fn on_message(sh: &Shared, rep: usize, msg: Message) -> Result<bool, String> {
    let addr = sh.addrs[rep];
    let mut st = lock(&sh.st);
    match msg {
        Message::Ack { highest } => {
            if highest > st.last_id && st.numbering_ready {
                let e = ClientError::Protocol {
                    addr,
                    why: format!(
                        "acknowledged event {highest}, beyond the last one created ({})",
                        st.last_id
                    ),
                };
                fatal(sh, &mut st, e);
                return Err("protocol violation".into());
            }
            let r = &mut st.reps[rep];
            if highest > r.acked {
                r.acked = highest;
                let before = sh.durable.load(Ordering::Relaxed);
                advance(sh, &mut st);
                if sh.durable.load(Ordering::Relaxed) > before {
                    sh.cv.notify_all();
                }
            }
            // Events queued while the acknowledged ones were in flight.
            let r = &st.reps[rep];
            if r.acked >= r.sent && r.sent < st.last_id && !r.writing {
                return Ok(true);
            }
        }
        Message::Events { req, last, batch } => {
            if let Some(p) = st.requests.get_mut(&req) {
                if let Err(e) = p.partial.extend(&batch) {
                    p.outcome = Some(Err(ClientError::Protocol {
                        addr,
                        why: e.to_string(),
                    }));
                } else if last {
                    p.outcome = Some(Ok(Reply::Events(std::mem::take(&mut p.partial))));
                }
                if last {
                    sh.cv.notify_all();
                }
            }
        }
        Message::Truncated {
            req,
            segments,
            bytes,
        } => complete(sh, &mut st, req, Ok(Reply::Truncated(segments, bytes))),
        Message::StatsReply { req, stats } => complete(sh, &mut st, req, Ok(Reply::Stats(stats))),
        Message::CopySaved { req } => complete(sh, &mut st, req, Ok(Reply::CopySaved)),
        Message::CopyData {
            req,
            index,
            total,
            offset,
            bytes,
        } => complete(
            sh,
            &mut st,
            req,
            Ok(Reply::CopyData(index, total, offset, bytes)),
        ),
        Message::Error { req, code, message } if req != 0 => {
            complete(
                sh,
                &mut st,
                req,
                Err(ClientError::Request {
                    addr,
                    code,
                    message,
                }),
            );
        }
        Message::Error { code, message, .. } => {
            if code == ErrorCode::Unavailable {
                return Err(format!("{code}: {message}"));
            }
            let why = format!("{code}: {message}");
            fatal(
                sh,
                &mut st,
                ClientError::Refused {
                    addr,
                    code,
                    message,
                },
            );
            return Err(why);
        }
        Message::Goodbye => {
            st.reps[rep].goodbye = true;
            sh.cv.notify_all();
            return Err("session ended".into());
        }
        other => {
            let e = ClientError::Protocol {
                addr,
                why: format!("unexpected message {other:?}"),
            };
            fatal(sh, &mut st, e);
            return Err("protocol violation".into());
        }
    }
    Ok(false)
}

fn complete(sh: &Shared, st: &mut State, req: u64, outcome: Result<Reply, ClientError>) {
    if let Some(p) = st.requests.get_mut(&req) {
        p.outcome = Some(outcome);
        sh.cv.notify_all();
    }
}
