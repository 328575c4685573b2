//! The launcher's key/value service (protocol in `vpml_pml::bootstrap`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crossbeam_channel::Sender;
use vpml_event_logger::Strangers;
use vpml_pml::bootstrap::{KV_PROTOCOL_VERSION, MAX_LINE};

use crate::event::Event;

/// Why the service closed a rank's connection (logged; the rank gets
/// `ERR <message>` where it can).
#[derive(Debug, thiserror::Error)]
enum KvError {
    #[error("read failed: {0}")]
    Read(#[source] std::io::Error),
    #[error("write failed: {0}")]
    Write(#[source] std::io::Error),
    #[error("{0}")]
    Socket(#[source] std::io::Error),
    #[error("line longer than {MAX_LINE} bytes or cut short")]
    LongLine,
    #[error("expected HELLO")]
    NoHello,
    #[error("no HELLO in time")]
    HelloDeadline,
    #[error("unsupported protocol version {0:?}")]
    Version(String),
    #[error("wrong job token")]
    WrongToken,
    #[error("missing or malformed rank")]
    NoRank,
    #[error("rank {0} is outside the job")]
    RankOutside(usize),
    #[error("missing or malformed incarnation")]
    NoIncarnation,
    #[error("control connection: expected CHECKPOINT, not {0:?}")]
    ControlRequest(String),
    #[error("rank {0}: malformed PUT")]
    MalformedPut(usize),
    #[error("rank {rank}: unknown request {request:?}")]
    UnknownRequest { rank: usize, request: String },
}

impl KvError {
    /// What a rank is told of its bad request.
    fn reply(&self) -> &'static str {
        match self {
            KvError::MalformedPut(_) => "PUT needs a key and a value",
            _ => "unknown request",
        }
    }

    /// The rank's end of the connection was reset: a rank that died
    /// (killed, aborted), which is expected and reported elsewhere.
    fn is_reset(&self) -> bool {
        matches!(self, KvError::Read(e) | KvError::Write(e) | KvError::Socket(e)
            if e.kind() == std::io::ErrorKind::ConnectionReset)
    }
}

struct State {
    values: HashMap<String, String>,
    fence_arrived: usize,
    fence_generation: u64,
}

/// A connection must say HELLO within this time (each read, and in all
/// once another connection comes): a rank does at once.
const HELLO_DEADLINE: Duration = Duration::from_secs(3);
/// Longest HELLO line (`HELLO VERSION TOKEN RANK`): a stranger costs a
/// thread and its buffer until then, no more.
const MAX_HELLO_LINE: usize = 512;
/// At most this many silent connections wait for their HELLO at once (see
/// [`Strangers`]), so strangers never keep a rank out.
const MAX_UNAUTHENTICATED: usize = 64;

struct Shared {
    size: usize,
    token: String,
    state: Mutex<State>,
    fence_done: Condvar,
    events: Sender<Event>,
    /// The connections still without HELLO.
    strangers: Strangers,
    /// How long one may take to say it.
    hello_deadline: Duration,
}

/// Read access to the values ranks published.
#[derive(Clone)]
pub(crate) struct KvHandle(Arc<Shared>);

impl KvHandle {
    /// The value under `key`, if a rank put one.
    pub(crate) fn get(&self, key: &str) -> Option<String> {
        lock(&self.0).values.get(key).cloned()
    }
}

/// The service's parsers, for the fuzz targets (`fuzz/`): each must
/// return an answer for any input, never panic.
#[cfg(fuzzing)]
pub mod fuzzing {
    /// Parse `line` as a HELLO, then as a request.
    pub fn kv_line(line: &str) {
        let _ = super::parse_hello("token", 4, line);
        let _ = super::parse_request(1, line);
    }
}

/// Bind the service on loopback and serve it from background threads.
/// Returns the address ranks connect to.
pub(crate) fn start(
    bind: &str,
    size: usize,
    token: String,
    events: Sender<Event>,
) -> std::io::Result<(String, KvHandle)> {
    start_with(bind, size, token, events, HELLO_DEADLINE)
}

/// [`start`] giving connections `hello_deadline` to say HELLO.
fn start_with(
    bind: &str,
    size: usize,
    token: String,
    events: Sender<Event>,
    hello_deadline: Duration,
) -> std::io::Result<(String, KvHandle)> {
    let listener = TcpListener::bind((bind, 0))?;
    let addr = listener.local_addr()?.to_string();
    let shared = Arc::new(Shared {
        size,
        token,
        state: Mutex::new(State {
            values: HashMap::new(),
            fence_arrived: 0,
            fence_generation: 0,
        }),
        fence_done: Condvar::new(),
        events,
        strangers: Strangers::new(MAX_UNAUTHENTICATED, hello_deadline),
        hello_deadline,
    });
    let handle = KvHandle(shared.clone());
    std::thread::Builder::new()
        .name("vpml-kv".into())
        .spawn(move || {
            for (id, conn) in (0u64..).zip(listener.incoming()) {
                let Ok(conn) = conn else { continue };
                let Ok(closer) = conn.try_clone() else {
                    continue;
                };
                shared.strangers.admit(id, closer);
                let conn_shared = shared.clone();
                let spawned = std::thread::Builder::new()
                    .name("vpml-kv-conn".into())
                    .spawn(move || {
                        let peer = conn
                            .peer_addr()
                            .map(|a| a.to_string())
                            .unwrap_or_else(|_| "unknown peer".into());
                        let shared = conn_shared;
                        let served = serve(&shared, conn, id);
                        shared.strangers.forget(id);
                        if let Err(reason) = served {
                            // A rank that dies (killed, aborted) resets its
                            // connection: expected, and reported elsewhere.
                            if reason.is_reset() {
                                tracing::debug!(
                                    "key/value connection from {peer} closed: {reason}"
                                );
                            } else {
                                tracing::warn!("key/value connection from {peer} closed: {reason}");
                            }
                        }
                    });
                if spawned.is_err() {
                    shared.strangers.forget(id);
                }
            }
        })?;
    Ok((addr, handle))
}

fn read_line(reader: &mut BufReader<TcpStream>) -> Result<Option<String>, KvError> {
    read_line_within(reader, MAX_LINE)
}

/// A line of at most `max` bytes.
fn read_line_within(
    reader: &mut BufReader<TcpStream>,
    max: usize,
) -> Result<Option<String>, KvError> {
    let mut line = String::new();
    let n = reader
        .take(max as u64 + 1)
        .read_line(&mut line)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => KvError::HelloDeadline,
            _ => KvError::Read(e),
        })?;
    if n == 0 {
        return Ok(None);
    }
    if !line.ends_with('\n') {
        return Err(KvError::LongLine);
    }
    Ok(Some(line.trim_end().to_string()))
}

fn serve(shared: &Shared, conn: TcpStream, id: u64) -> Result<(), KvError> {
    let _ = conn.set_nodelay(true);
    conn.set_read_timeout(Some(shared.hello_deadline))
        .map_err(KvError::Socket)?;
    let mut out = conn.try_clone().map_err(KvError::Socket)?;
    let mut reader = BufReader::new(conn);
    let reply = |out: &mut TcpStream, s: &str| {
        out.write_all(format!("{s}\n").as_bytes())
            .map_err(KvError::Write)
    };
    // A short line within a short time, or the connection goes (a peer
    // trickling bytes is closed once 64 newer strangers came).
    let Some(hello) = read_line_within(&mut reader, MAX_HELLO_LINE)? else {
        return Ok(());
    };
    let (rank, incarnation) = match parse_hello(&shared.token, shared.size, &hello) {
        Ok(Caller::Rank { rank, incarnation }) => (rank, incarnation),
        Ok(Caller::Control) => {
            shared.strangers.forget(id);
            return serve_control(shared, &mut reader, &mut out);
        }
        Err(reason) => {
            let _ = reply(&mut out, &format!("ERR {reason}"));
            return Err(reason);
        }
    };
    // A rank now: it may stay quiet as long as it likes.
    shared.strangers.forget(id);
    reader
        .get_ref()
        .set_read_timeout(None)
        .map_err(KvError::Socket)?;
    reply(&mut out, "OK")?;
    while let Some(line) = read_line(&mut reader)? {
        let request = match parse_request(rank, &line) {
            Ok(r) => r,
            Err(e) => {
                let _ = reply(&mut out, &format!("ERR {}", e.reply()));
                return Err(e);
            }
        };
        match request {
            Request::Put(k, v) => {
                lock(shared).values.insert(k.to_string(), v.to_string());
                reply(&mut out, "OK")?;
            }
            Request::Get(k) => {
                let v = lock(shared).values.get(k).cloned();
                match v {
                    Some(v) => reply(&mut out, &format!("VAL {v}"))?,
                    None => reply(&mut out, "NONE")?,
                }
            }
            Request::Fence => {
                fence(shared);
                reply(&mut out, "OK")?;
            }
            Request::Joined => {
                let _ = shared.events.send(Event::Joined { rank });
                reply(&mut out, "OK")?;
            }
            Request::Finalize => {
                let _ = shared.events.send(Event::Finalized { rank, incarnation });
                reply(&mut out, "OK")?;
            }
            Request::Abort(code, message) => {
                let _ = shared.events.send(Event::Abort {
                    rank,
                    incarnation,
                    code,
                    message: message.to_string(),
                });
                reply(&mut out, "OK")?;
            }
        }
    }
    Ok(())
}

/// A control connection (`vpml checkpoint`, which read the job's token
/// from the launcher's job file): one `CHECKPOINT` request, answered
/// `OK <number>` once that global checkpoint is complete, or `ERR <why>`.
fn serve_control(
    shared: &Shared,
    reader: &mut BufReader<TcpStream>,
    out: &mut TcpStream,
) -> Result<(), KvError> {
    let mut reply = |s: &str| {
        out.write_all(format!("{s}\n").as_bytes())
            .map_err(KvError::Write)
    };
    reply("OK")?;
    // The request follows the HELLO at once.
    let line = read_line_within(reader, MAX_HELLO_LINE)?;
    if line.as_deref() != Some("CHECKPOINT") {
        let _ = reply("ERR expected CHECKPOINT");
        return Err(KvError::ControlRequest(line.unwrap_or_default()));
    }
    let (tx, rx) = crossbeam_channel::bounded(1);
    let asked = shared.events.send(Event::CheckpointRequest {
        by: "vpml checkpoint".into(),
        reply: Some(tx),
    });
    let answer = match asked.ok().and_then(|()| rx.recv().ok()) {
        Some(Ok(index)) => format!("OK {index}"),
        Some(Err(why)) => format!("ERR {why}"),
        None => "ERR the job ended".into(),
    };
    reply(&answer)
}

/// Who said HELLO.
#[derive(Debug, PartialEq)]
enum Caller {
    /// A process of the job: its rank and incarnation.
    Rank { rank: usize, incarnation: u32 },
    /// `vpml checkpoint` (`HELLO VERSION TOKEN control`).
    Control,
}

/// A request of an introduced rank.
#[derive(Debug, PartialEq)]
enum Request<'a> {
    Put(&'a str, &'a str),
    Get(&'a str),
    Fence,
    Joined,
    Finalize,
    Abort(i32, &'a str),
}

/// Read one request line of `rank`.
fn parse_request(rank: usize, line: &str) -> Result<Request<'_>, KvError> {
    let (cmd, rest) = line.split_once(' ').unwrap_or((line, ""));
    Ok(match cmd {
        "PUT" => {
            let (k, v) = rest.split_once(' ').ok_or(KvError::MalformedPut(rank))?;
            Request::Put(k, v)
        }
        "GET" => Request::Get(rest),
        "FENCE" => Request::Fence,
        "JOINED" => Request::Joined,
        "FINALIZE" => Request::Finalize,
        "ABORT" => {
            let (code, msg) = rest.split_once(' ').unwrap_or((rest, ""));
            Request::Abort(code.parse().unwrap_or(1), msg)
        }
        other => {
            return Err(KvError::UnknownRequest {
                rank,
                request: other.to_string(),
            });
        }
    })
}

/// Check a `HELLO VERSION TOKEN RANK INCARNATION` line (or `HELLO
/// VERSION TOKEN control` for `vpml checkpoint`): who says it.
fn parse_hello(token: &str, size: usize, line: &str) -> Result<Caller, KvError> {
    let mut parts = line.split(' ');
    if parts.next() != Some("HELLO") {
        return Err(KvError::NoHello);
    }
    let version = parts.next().unwrap_or("");
    if version != KV_PROTOCOL_VERSION.to_string() {
        return Err(KvError::Version(version.to_string()));
    }
    if parts.next() != Some(token) {
        return Err(KvError::WrongToken);
    }
    let who = parts.next();
    if who == Some("control") {
        return Ok(Caller::Control);
    }
    let rank: usize = who.and_then(|r| r.parse().ok()).ok_or(KvError::NoRank)?;
    if rank >= size {
        return Err(KvError::RankOutside(rank));
    }
    let incarnation = parts
        .next()
        .and_then(|i| i.parse().ok())
        .ok_or(KvError::NoIncarnation)?;
    Ok(Caller::Rank { rank, incarnation })
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, State> {
    shared.state.lock().unwrap_or_else(|p| p.into_inner())
}

fn fence(shared: &Shared) {
    let mut st = lock(shared);
    let generation = st.fence_generation;
    st.fence_arrived += 1;
    if st.fence_arrived == shared.size {
        st.fence_arrived = 0;
        st.fence_generation += 1;
        shared.fence_done.notify_all();
        return;
    }
    while st.fence_generation == generation {
        st = shared
            .fence_done
            .wait(st)
            .unwrap_or_else(|p| p.into_inner());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vpml_pml::bootstrap::KvClient;

    const TOKEN: &str = "kv-test-token-0123456789";

    /// The peer closed `s` (or reset it) within 20 s.
    fn closed_by_peer(s: &TcpStream) -> bool {
        let mut s = s.try_clone().expect("clone");
        s.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        match s.read(&mut [0u8; 1]) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }

    #[test]
    fn strangers_never_keep_a_rank_out() {
        let (tx, _rx) = crossbeam_channel::unbounded();
        // A deadline no test waits for: only the pool can close them.
        let (addr, kv) =
            start_with("127.0.0.1", 1, TOKEN.into(), tx, Duration::from_secs(3600)).expect("start");
        // More silent connections than may wait for a HELLO: the oldest
        // are closed to make room.
        let idle: Vec<TcpStream> = (0..3 * MAX_UNAUTHENTICATED)
            .map(|_| TcpStream::connect(&addr).expect("connect"))
            .collect();
        assert!(closed_by_peer(&idle[0]));
        let mut rank = KvClient::connect(&addr, TOKEN, 0, 0).expect("a rank connects");
        rank.put("key", "value").expect("put");
        assert_eq!(kv.get("key").as_deref(), Some("value"));
    }

    #[test]
    fn a_silent_connection_is_closed_at_the_hello_deadline() {
        let (tx, _rx) = crossbeam_channel::unbounded();
        let (addr, _kv) = start("127.0.0.1", 1, TOKEN.into(), tx).expect("start");
        let silent = TcpStream::connect(&addr).expect("connect");
        assert!(closed_by_peer(&silent));
        // A HELLO line longer than any real one is refused too.
        let mut long = TcpStream::connect(&addr).expect("connect");
        long.write_all(format!("HELLO {}\n", "x".repeat(MAX_HELLO_LINE)).as_bytes())
            .expect("send");
        assert!(closed_by_peer(&long));
    }
}
