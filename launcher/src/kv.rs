//! The launcher's key/value service (protocol in `vpml_pml::bootstrap`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};

use crossbeam_channel::Sender;
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
    #[error("unsupported protocol version {0:?}")]
    Version(String),
    #[error("wrong job token")]
    WrongToken,
    #[error("missing or malformed rank")]
    NoRank,
    #[error("rank {0} is outside the job")]
    RankOutside(usize),
    #[error("rank {0}: malformed PUT")]
    MalformedPut(usize),
    #[error("rank {rank}: unknown request {request:?}")]
    UnknownRequest { rank: usize, request: String },
}

impl KvError {
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

struct Shared {
    size: usize,
    token: String,
    state: Mutex<State>,
    fence_done: Condvar,
    events: Sender<Event>,
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

/// Bind the service on loopback and serve it from background threads.
/// Returns the address ranks connect to.
pub(crate) fn start(
    bind: &str,
    size: usize,
    token: String,
    events: Sender<Event>,
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
    });
    let handle = KvHandle(shared.clone());
    std::thread::Builder::new()
        .name("vpml-kv".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let shared = shared.clone();
                let _ = std::thread::Builder::new()
                    .name("vpml-kv-conn".into())
                    .spawn(move || {
                        let peer = conn
                            .peer_addr()
                            .map(|a| a.to_string())
                            .unwrap_or_else(|_| "unknown peer".into());
                        if let Err(reason) = serve(&shared, conn) {
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
            }
        })?;
    Ok((addr, handle))
}

fn read_line(reader: &mut BufReader<TcpStream>) -> Result<Option<String>, KvError> {
    let mut line = String::new();
    let n = reader
        .take(MAX_LINE as u64 + 1)
        .read_line(&mut line)
        .map_err(KvError::Read)?;
    if n == 0 {
        return Ok(None);
    }
    if !line.ends_with('\n') {
        return Err(KvError::LongLine);
    }
    Ok(Some(line.trim_end().to_string()))
}

fn serve(shared: &Shared, conn: TcpStream) -> Result<(), KvError> {
    let _ = conn.set_nodelay(true);
    let mut out = conn.try_clone().map_err(KvError::Socket)?;
    let mut reader = BufReader::new(conn);
    let reply = |out: &mut TcpStream, s: &str| {
        out.write_all(format!("{s}\n").as_bytes())
            .map_err(KvError::Write)
    };
    let Some(hello) = read_line(&mut reader)? else {
        return Ok(());
    };
    let rank = match parse_hello(shared, &hello) {
        Ok(r) => r,
        Err(reason) => {
            let _ = reply(&mut out, &format!("ERR {reason}"));
            return Err(reason);
        }
    };
    reply(&mut out, "OK")?;
    while let Some(line) = read_line(&mut reader)? {
        let (cmd, rest) = line.split_once(' ').unwrap_or((&line, ""));
        match cmd {
            "PUT" => {
                let Some((k, v)) = rest.split_once(' ') else {
                    let _ = reply(&mut out, "ERR PUT needs a key and a value");
                    return Err(KvError::MalformedPut(rank));
                };
                lock(shared).values.insert(k.to_string(), v.to_string());
                reply(&mut out, "OK")?;
            }
            "GET" => {
                let v = lock(shared).values.get(rest).cloned();
                match v {
                    Some(v) => reply(&mut out, &format!("VAL {v}"))?,
                    None => reply(&mut out, "NONE")?,
                }
            }
            "FENCE" => {
                fence(shared);
                reply(&mut out, "OK")?;
            }
            "JOINED" => {
                let _ = shared.events.send(Event::Joined { rank });
                reply(&mut out, "OK")?;
            }
            "FINALIZE" => {
                let _ = shared.events.send(Event::Finalized { rank });
                reply(&mut out, "OK")?;
            }
            "ABORT" => {
                let (code, msg) = rest.split_once(' ').unwrap_or((rest, ""));
                let code = code.parse().unwrap_or(1);
                let _ = shared.events.send(Event::Abort {
                    rank,
                    code,
                    message: msg.to_string(),
                });
                reply(&mut out, "OK")?;
            }
            other => {
                let _ = reply(&mut out, "ERR unknown request");
                return Err(KvError::UnknownRequest {
                    rank,
                    request: other.to_string(),
                });
            }
        }
    }
    Ok(())
}

fn parse_hello(shared: &Shared, line: &str) -> Result<usize, KvError> {
    let mut parts = line.split(' ');
    if parts.next() != Some("HELLO") {
        return Err(KvError::NoHello);
    }
    let version = parts.next().unwrap_or("");
    if version != KV_PROTOCOL_VERSION.to_string() {
        return Err(KvError::Version(version.to_string()));
    }
    if parts.next() != Some(shared.token.as_str()) {
        return Err(KvError::WrongToken);
    }
    let rank: usize = parts
        .next()
        .and_then(|r| r.parse().ok())
        .ok_or(KvError::NoRank)?;
    if rank >= shared.size {
        return Err(KvError::RankOutside(rank));
    }
    Ok(rank)
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
