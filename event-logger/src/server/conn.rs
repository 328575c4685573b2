//! One connection: its thread reads frames, checks the `Hello`, stores
//! puts and answers requests, and closes the connection (with an `Error`
//! and a log line) when the peer breaks the rules.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;
use vpml_fault_points::fault_point;

use super::flusher::FlushReq;
use super::{HELLO_MAX_FRAME, MAX_PUT_EVENT_BYTES, Shared, lock};
use crate::copies;
use crate::event::{EventBatch, EventId};
use crate::storage::{Durability, RankLog, StorageError, read_events};
use crate::wire::{
    Decoded, ErrorCode, HEADER_LEN, Hello, MAX_FRAME, Message, Stats, WireError, decode_frame,
    encode_events_raw, encode_frame,
};

/// Events are sent back to `Get` in chunks of about this size.
const GET_CHUNK_BYTES: usize = 1 << 20;

/// The sending half of a connection, shared with the flusher.
pub(super) struct ConnWriter {
    stream: Mutex<TcpStream>,
}

impl ConnWriter {
    pub(super) fn send(&self, msg: &Message) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(64);
        encode_frame(msg, &mut buf);
        self.send_raw(&buf)
    }

    fn send_raw(&self, frame: &[u8]) -> std::io::Result<()> {
        lock(&self.stream).write_all(frame)
    }

    /// Reports a session error and closes the connection.
    pub(super) fn fail(&self, code: ErrorCode, message: String) {
        let _ = self.send(&Message::Error {
            req: 0,
            code,
            message,
        });
        let _ = lock(&self.stream).shutdown(Shutdown::Both);
    }
}

/// Why a connection is closed by the logger.
struct Close {
    code: ErrorCode,
    reason: String,
}

impl Close {
    fn new(code: ErrorCode, reason: impl Into<String>) -> Self {
        Close {
            code,
            reason: reason.into(),
        }
    }
}

impl From<WireError> for Close {
    fn from(e: WireError) -> Self {
        let code = match e {
            WireError::TooLarge { .. } => ErrorCode::TooLarge,
            _ => ErrorCode::Malformed,
        };
        Close::new(code, e.to_string())
    }
}

fn storage_close(e: StorageError) -> Close {
    let code = match e {
        StorageError::Gap { .. } => ErrorCode::BadRequest,
        StorageError::Stale { .. } => ErrorCode::StaleIncarnation,
        _ => ErrorCode::Storage,
    };
    Close::new(code, e.to_string())
}

/// fsync `file`, the active file of `log` (job `job`, rank `rank`), as the
/// flusher does: counted, and on failure the log is marked failed (the
/// kernel may have dropped the data, so nothing it holds can be promised
/// any more) and the connection closes saying whose log it was.
fn sync_log(
    shared: &Shared,
    log: &Mutex<RankLog>,
    file: &std::fs::File,
    job: &str,
    rank: u32,
) -> Result<(), Close> {
    let synced = file.sync_data();
    shared.metrics.fsyncs.fetch_add(1, Ordering::Relaxed);
    synced.map_err(|e| {
        let why = format!("fsync of the event log of job {job:?} rank {rank} failed: {e}");
        tracing::error!("{why}; the rank's log is marked failed");
        lock(log).fail(why.clone());
        Close::new(ErrorCode::Storage, why)
    })
}

struct Session {
    job: String,
    rank: u32,
    incarnation: u32,
    log: Arc<Mutex<RankLog>>,
}

struct Conn<'a> {
    shared: &'a Shared,
    writer: Arc<ConnWriter>,
    flush_tx: Option<Sender<FlushReq>>,
    session: Option<Session>,
    /// Highest id to acknowledge once the read buffer is drained (write mode).
    pending_ack: Option<EventId>,
    /// The connection's number (in the server's tables).
    id: u64,
}

pub(super) fn serve_connection(shared: &Shared, mut stream: TcpStream, peer: &str, id: u64) {
    shared.metrics.open.fetch_add(1, Ordering::Relaxed);
    shared.metrics.total.fetch_add(1, Ordering::Relaxed);
    let _ = stream.set_nodelay(true);
    let writer = match stream.try_clone() {
        Ok(s) => Arc::new(ConnWriter {
            stream: Mutex::new(s),
        }),
        Err(e) => {
            tracing::warn!(%peer, error = %e, "cannot set up connection");
            shared.metrics.open.fetch_sub(1, Ordering::Relaxed);
            return;
        }
    };
    let mut conn = Conn {
        shared,
        writer,
        flush_tx: lock(&shared.flush_tx).clone(),
        session: None,
        pending_ack: None,
        id,
    };
    let outcome = conn.run(&mut stream);
    if let Some(id) = conn.pending_ack.take() {
        let _ = conn.writer.send(&Message::Ack { highest: id });
    }
    let (job, rank) = conn
        .session
        .as_ref()
        .map_or(("-", -1), |s| (s.job.as_str(), i64::from(s.rank)));
    match outcome {
        Ok(()) => tracing::debug!(%peer, job, rank, "connection closed"),
        Err(close) => {
            if !shared.stopping.load(Ordering::SeqCst) {
                tracing::warn!(%peer, job, rank, code = %close.code, reason = %close.reason, "closing connection");
                if matches!(
                    close.code,
                    ErrorCode::Malformed
                        | ErrorCode::TooLarge
                        | ErrorCode::AuthFailed
                        | ErrorCode::BadRequest
                ) {
                    shared.metrics.refused.fetch_add(1, Ordering::Relaxed);
                }
            }
            let message = if close.code == ErrorCode::AuthFailed {
                // Do not tell a stranger which jobs exist.
                "unknown job or wrong token".to_owned()
            } else {
                close.reason
            };
            conn.writer.fail(close.code, message);
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
    shared.metrics.open.fetch_sub(1, Ordering::Relaxed);
}

impl Conn<'_> {
    /// Reads and handles frames until the peer leaves (`Ok`) or must be
    /// disconnected (`Err`).
    fn run(&mut self, stream: &mut TcpStream) -> Result<(), Close> {
        let hello_timeout = self.shared.cfg.hello_timeout;
        let _ = stream.set_read_timeout(Some(hello_timeout));
        let max_authenticated = self.shared.cfg.max_frame.min(MAX_FRAME);
        // Before the Hello, a small buffer and small frames only: a
        // stranger costs a few KiB (the buffer grows with what an
        // authenticated peer actually sends).
        let mut buf = vec![0u8; 4 << 10];
        let (mut start, mut end) = (0usize, 0usize);
        let opened = std::time::Instant::now();
        let mut timeout_cleared = false;
        loop {
            // Handle every complete frame already received.
            loop {
                let max = if self.session.is_some() {
                    max_authenticated
                } else {
                    HELLO_MAX_FRAME
                };
                match decode_frame(&buf[start..end], max)? {
                    Decoded::Frame(msg, used) => {
                        start += used;
                        if !self.handle(msg)? {
                            return Ok(());
                        }
                    }
                    Decoded::NeedMore(need) => {
                        if start > 0 {
                            buf.copy_within(start..end, 0);
                            end -= start;
                            start = 0;
                        }
                        if need > buf.len() {
                            // Grow with the data actually received, never
                            // straight to what a header claims.
                            let grown = need.min(buf.len() * 2).max(HEADER_LEN);
                            buf.resize(grown, 0);
                        }
                        break;
                    }
                }
            }
            if let Some(id) = self.pending_ack.take() {
                fault_point!("logger.before_ack");
                self.writer
                    .send(&Message::Ack { highest: id })
                    .map_err(|e| {
                        Close::new(ErrorCode::Unavailable, format!("cannot send ack: {e}"))
                    })?;
            }
            // Once the Hello is in, the connection may idle as long as the
            // client likes (a rank with no events for minutes is normal).
            if self.session.is_some() && !timeout_cleared {
                let _ = stream.set_read_timeout(None);
                timeout_cleared = true;
            }
            match stream.read(&mut buf[end..]) {
                Ok(0) if end > start => {
                    return Err(Close::new(
                        ErrorCode::Malformed,
                        format!(
                            "connection closed inside a frame ({} bytes received)",
                            end - start
                        ),
                    ));
                }
                Ok(0) => return Ok(()),
                Ok(n) => end += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(Close::new(
                        ErrorCode::BadRequest,
                        format!("no Hello within {} s", hello_timeout.as_secs_f64()),
                    ));
                }
                Err(e) => {
                    tracing::debug!(error = %e, "connection read failed");
                    return Ok(());
                }
            }
            if self.session.is_some() {
                if !timeout_cleared {
                    let _ = stream.set_read_timeout(None);
                    timeout_cleared = true;
                }
            } else if opened.elapsed() > hello_timeout {
                // A peer trickling bytes must not hold a thread forever.
                return Err(Close::new(
                    ErrorCode::BadRequest,
                    format!("no Hello within {} s", hello_timeout.as_secs_f64()),
                ));
            }
        }
    }

    /// Handles one message; `Ok(false)` ends the connection normally.
    fn handle(&mut self, msg: Message) -> Result<bool, Close> {
        let Some(session) = &self.session else {
            return match msg {
                Message::Hello(h) => self.hello(h).map(|()| true),
                _ => Err(Close::new(
                    ErrorCode::BadRequest,
                    "first message is not Hello",
                )),
            };
        };
        match msg {
            Message::Put { rank, batch } => {
                if rank != session.rank {
                    return Err(Close::new(
                        ErrorCode::BadRequest,
                        format!("put for rank {rank} on a session of rank {}", session.rank),
                    ));
                }
                self.put(&batch)?;
            }
            Message::Get { req, rank, from } => self.get(req, rank, from)?,
            Message::Truncate { req, rank, up_to } => {
                if rank != session.rank {
                    return Err(Close::new(
                        ErrorCode::BadRequest,
                        format!(
                            "truncate for rank {rank} on a session of rank {}",
                            session.rank
                        ),
                    ));
                }
                let reply = match lock(&session.log).truncate(up_to) {
                    Ok((segments, bytes)) => {
                        tracing::debug!(
                            job = session.job,
                            rank,
                            up_to,
                            segments,
                            bytes,
                            "truncated"
                        );
                        Message::Truncated {
                            req,
                            segments,
                            bytes,
                        }
                    }
                    Err(e) => storage_error(req, e),
                };
                self.reply(&reply)?;
            }
            Message::Stats { req } => {
                let m = &self.shared.metrics;
                let (highest, first_kept, (segments, bytes)) = {
                    let l = lock(&session.log);
                    (l.highest(), l.first_kept(), l.usage())
                };
                let stats = Stats {
                    connections_open: m.open.load(Ordering::Relaxed),
                    connections_total: m.total.load(Ordering::Relaxed),
                    connections_refused: m.refused.load(Ordering::Relaxed),
                    puts: m.puts.load(Ordering::Relaxed),
                    events_stored: m.events.load(Ordering::Relaxed),
                    bytes_written: m.bytes.load(Ordering::Relaxed),
                    fsyncs: m.fsyncs.load(Ordering::Relaxed),
                    rank_highest: highest,
                    rank_first_kept: first_kept,
                    rank_segments: segments,
                    rank_bytes: bytes,
                };
                self.reply(&Message::StatsReply { req, stats })?;
            }
            Message::Bye => {
                let id = if self.shared.cfg.durability == Durability::Fsync {
                    let (file, id) = {
                        let l = lock(&session.log);
                        (l.active_file(), l.highest())
                    };
                    sync_log(self.shared, &session.log, &file, &session.job, session.rank)?;
                    Some(id)
                } else {
                    self.pending_ack.take()
                };
                if let Some(id) = id {
                    self.reply(&Message::Ack { highest: id })?;
                }
                self.reply(&Message::Goodbye)?;
                return Ok(false);
            }
            Message::SaveCopy {
                req,
                index,
                offset,
                last,
                bytes,
            } => {
                let dir = self.shared.storage.copies_dir(&session.job, session.rank);
                // Under the rank's lock, after checking that no newer
                // incarnation has connected: a dead process's copy, still
                // being received, never lands after its successor's
                // `DropCopies`.
                let saved = {
                    let l = lock(&session.log);
                    l.check_current(session.incarnation)
                        .and_then(|()| copies::write_part(&dir, index, offset, &bytes, last))
                };
                let reply = match saved {
                    Ok(()) => Message::CopySaved { req },
                    Err(e) => storage_error(req, e),
                };
                self.reply(&reply)?;
            }
            Message::DropCopies { req, above } => {
                let dir = self.shared.storage.copies_dir(&session.job, session.rank);
                let dropped = {
                    let l = lock(&session.log);
                    l.check_current(session.incarnation)
                        .and_then(|()| copies::remove_newer_than(&dir, above))
                };
                let reply = match dropped {
                    Ok(()) => Message::CopySaved { req },
                    Err(e) => storage_error(req, e),
                };
                self.reply(&reply)?;
            }
            Message::LoadCopy {
                req,
                rank,
                index,
                offset,
            } => {
                // Any rank of the session's job (a rank restarted elsewhere).
                let dir = self.shared.storage.copies_dir(&session.job, rank);
                let reply = match copies::read_part(&dir, index, offset) {
                    Ok(found) => {
                        let (index, total, bytes) = found.unwrap_or_default();
                        Message::CopyData {
                            req,
                            index,
                            total,
                            offset,
                            bytes,
                        }
                    }
                    Err(e) => storage_error(req, e),
                };
                self.reply(&reply)?;
            }
            Message::Hello(_) => return Err(Close::new(ErrorCode::BadRequest, "second Hello")),
            other => {
                return Err(Close::new(
                    ErrorCode::BadRequest,
                    format!("unexpected message from a client: {}", kind_name(&other)),
                ));
            }
        }
        Ok(true)
    }

    fn reply(&self, msg: &Message) -> Result<(), Close> {
        self.writer
            .send(msg)
            .map_err(|e| Close::new(ErrorCode::Unavailable, format!("cannot send reply: {e}")))
    }

    fn hello(&mut self, h: Hello) -> Result<(), Close> {
        if let Err(why) = self.shared.cfg.tokens.check(&h.job, &h.token) {
            return Err(Close::new(
                ErrorCode::AuthFailed,
                format!("job {:?}: {why}", h.job),
            ));
        }
        // No longer a stranger: it leaves the bounded pool of those.
        self.shared.strangers.forget(self.id);
        let log = self
            .shared
            .storage
            .rank(&h.job, h.rank)
            .map_err(storage_close)?;
        let (highest, first_kept, file) = {
            let mut l = lock(&log);
            l.admit(h.incarnation).map_err(storage_close)?;
            (l.highest(), l.first_kept(), l.active_file())
        };
        if self.shared.cfg.durability == Durability::Fsync {
            // The client resends from `highest + 1`: what it is told is stored
            // must be durable.
            sync_log(self.shared, &log, &file, &h.job, h.rank)?;
        }
        tracing::debug!(
            job = h.job,
            rank = h.rank,
            incarnation = h.incarnation,
            highest,
            "session opened"
        );
        self.reply(&Message::Welcome {
            highest,
            first_kept,
        })?;
        self.session = Some(Session {
            job: h.job,
            rank: h.rank,
            incarnation: h.incarnation,
            log,
        });
        Ok(())
    }

    fn put(&mut self, batch: &EventBatch) -> Result<(), Close> {
        let Some(session) = &self.session else {
            return Err(Close::new(ErrorCode::BadRequest, "put before Hello"));
        };
        if batch.as_bytes().len() > MAX_PUT_EVENT_BYTES {
            return Err(Close::new(
                ErrorCode::TooLarge,
                format!(
                    "put of {} bytes of events exceeds {MAX_PUT_EVENT_BYTES}",
                    batch.as_bytes().len()
                ),
            ));
        }
        fault_point!("logger.received");
        let m = &self.shared.metrics;
        m.puts.fetch_add(1, Ordering::Relaxed);
        let appended = lock(&session.log)
            .append(batch, session.incarnation)
            .map_err(storage_close)?;
        m.events.fetch_add(appended.new_events, Ordering::Relaxed);
        m.bytes.fetch_add(appended.bytes, Ordering::Relaxed);
        match &self.flush_tx {
            Some(tx) => tx
                .send(FlushReq {
                    file: appended.file,
                    log: Arc::clone(&session.log),
                    conn: Arc::clone(&self.writer),
                    id: appended.highest,
                })
                .map_err(|_| Close::new(ErrorCode::Unavailable, "logger is shutting down"))?,
            None => self.pending_ack = Some(appended.highest),
        }
        Ok(())
    }

    fn get(&mut self, req: u64, rank: u32, from: EventId) -> Result<(), Close> {
        let Some(session) = &self.session else {
            return Err(Close::new(ErrorCode::BadRequest, "get before Hello"));
        };
        // Any rank of the session's job may be read (recovery, replay tools).
        let log = if rank == session.rank {
            Arc::clone(&session.log)
        } else {
            self.shared
                .storage
                .rank(&session.job, rank)
                .map_err(storage_close)?
        };
        let plan = lock(&log).read_plan(from);
        let mut chunk = Vec::new();
        let mut count = 0u32;
        let mut frame = Vec::new();
        let writer = Arc::clone(&self.writer);
        let mut send = |last: bool, count: u32, events: &[u8]| {
            frame.clear();
            encode_events_raw(req, last, count, events, &mut frame);
            writer.send_raw(&frame)
        };
        let result = read_events(&plan, from.max(1), |n, bytes| {
            if count > 0 && chunk.len() + bytes.len() > GET_CHUNK_BYTES {
                send(false, count, &chunk)?;
                chunk.clear();
                count = 0;
            }
            chunk.extend_from_slice(bytes);
            count += n;
            Ok(())
        });
        let sent = match result {
            Ok(()) => send(true, count, &chunk),
            Err(e) => {
                tracing::error!(error = %e, "cannot read a rank's events");
                let mut buf = Vec::new();
                encode_frame(&storage_error(req, e), &mut buf);
                self.writer.send_raw(&buf)
            }
        };
        sent.map_err(|e| Close::new(ErrorCode::Unavailable, format!("cannot send events: {e}")))
    }
}

/// The reply to request `req` that storage failed.
fn storage_error(req: u64, e: impl std::fmt::Display) -> Message {
    Message::Error {
        req,
        code: ErrorCode::Storage,
        message: e.to_string(),
    }
}

fn kind_name(m: &Message) -> &'static str {
    match m {
        Message::Hello(_) => "Hello",
        Message::Put { .. } => "Put",
        Message::Get { .. } => "Get",
        Message::Truncate { .. } => "Truncate",
        Message::Stats { .. } => "Stats",
        Message::Bye => "Bye",
        Message::Welcome { .. } => "Welcome",
        Message::Ack { .. } => "Ack",
        Message::Events { .. } => "Events",
        Message::Truncated { .. } => "Truncated",
        Message::StatsReply { .. } => "StatsReply",
        Message::Error { .. } => "Error",
        Message::Goodbye => "Goodbye",
        Message::SaveCopy { .. } => "SaveCopy",
        Message::DropCopies { .. } => "DropCopies",
        Message::LoadCopy { .. } => "LoadCopy",
        Message::CopySaved { .. } => "CopySaved",
        Message::CopyData { .. } => "CopyData",
    }
}
