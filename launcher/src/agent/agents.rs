//! The launcher's side of a multi-host job: starting every host's agent,
//! meeting it, sending it commands, and turning what it says into
//! launcher events.

use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use vpml_event_logger::Strangers;

use super::hosts::{HostSpec, agent_command};
use super::wire::{JobSetup, WireError, lock, read_msg, read_msg_within, send};
use crate::Error;
use crate::event::Event;

/// Where and how agents meet the launcher.
pub(crate) struct Rendezvous<'a> {
    /// Address the launcher listens on.
    pub bind: &'a str,
    /// The job token agents present.
    pub token: &'a str,
    /// How long agents get to connect.
    pub timeout: Duration,
}

/// The launcher's agents: one control connection per host.
pub(crate) struct Agents {
    pub hosts: Vec<HostSpec>,
    writers: Vec<Option<Arc<Mutex<TcpStream>>>>,
    children: Vec<std::process::Child>,
    /// The job's coordinated checkpoint counters.
    pub checkpoints: Arc<Mutex<CheckpointMirror>>,
}

/// The counters of coordinated checkpointing in a job across hosts, as
/// the launcher sees them. Each host's job page has its own (the ranks
/// there record the checkpoints they complete); the launcher sends every
/// agent its requests (`CKPTREQ n`) and resets (`CKPTRESET generation
/// index`), and the agents report what their pages say (`CKPT generation
/// taken global`).
#[derive(Debug, Default)]
pub(crate) struct CheckpointMirror {
    /// Global checkpoints asked for so far.
    pub requests: u32,
    /// How many requests complete global checkpoints answered (the
    /// largest any host reported).
    pub taken: u32,
    /// The newest complete global checkpoint (the largest any host
    /// reported since the last reset).
    pub global: u32,
    /// Resets so far: a report of an earlier one is stale.
    pub generation: u32,
}

impl CheckpointMirror {
    /// A host's report, unless stale.
    fn report(&mut self, generation: u32, taken: u32, global: u32) {
        if generation == self.generation {
            self.taken = self.taken.max(taken);
            self.global = self.global.max(global);
        }
    }
}

/// What an agent reader thread tells the launcher.
pub(crate) type OutputFn = Arc<dyn Fn(usize, bool, &[u8]) + Send + Sync>;

impl Agents {
    /// Start every host's agent and wait for each to connect (at most
    /// `timeout`), then send the job setup. `setup_for(host)` builds it.
    pub(crate) fn start(
        hosts: Vec<HostSpec>,
        how: &Rendezvous<'_>,
        events: Sender<Event>,
        output: OutputFn,
        setup_for: impl Fn(usize) -> JobSetup,
    ) -> Result<Agents, Error> {
        let (bind, token, timeout) = (how.bind, how.token, how.timeout);
        let launcher_pid = std::process::id();
        let listener = TcpListener::bind((bind, 0)).map_err(|source| Error::ListenForAgents {
            bind: bind.to_string(),
            source,
        })?;
        let control = listener
            .local_addr()
            .map_err(Error::ControlSocket)?
            .to_string();
        let vpml = std::env::current_exe().map_err(Error::CurrentExe)?;
        let mut children = Vec::new();
        for (i, h) in hosts.iter().enumerate() {
            let mut cmd = agent_command(h, i, &control, &vpml);
            cmd.stdin(Stdio::piped());
            // SAFETY: only async-signal-safe calls between fork and exec.
            unsafe {
                cmd.pre_exec(move || crate::process::child_setup(launcher_pid, None));
            }
            let mut child = cmd.spawn().map_err(|source| Error::StartAgent {
                host: h.name.clone(),
                source,
            })?;
            if let Some(mut stdin) = child.stdin.take() {
                let _ = writeln!(stdin, "{token}");
            }
            children.push(child);
        }
        let mut agents = Agents {
            writers: (0..hosts.len()).map(|_| None).collect(),
            hosts,
            children,
            checkpoints: Arc::default(),
        };
        listener
            .set_nonblocking(true)
            .map_err(Error::ControlSocket)?;
        let deadline = Instant::now() + timeout;
        // Each connection's hello is read by a thread of its own, so a
        // silent one delays no agent; at most MAX_WAITING_HELLOS silent
        // ones wait (see `Strangers`).
        type Hello = Result<(usize, TcpStream, BufReader<TcpStream>), HelloError>;
        let (hello_tx, hellos) = crossbeam_channel::unbounded::<(std::net::SocketAddr, Hello)>();
        let strangers = Arc::new(Strangers::new(MAX_WAITING_HELLOS, HELLO_DEADLINE));
        let mut next_id = 0u64;
        while agents.writers.iter().any(Option::is_none) {
            if let Some(i) = agents.exited_agent() {
                return Err(Error::AgentExited {
                    host: agents.hosts[i].name.clone(),
                });
            }
            // Hellos read first: an agent that said hello is never the
            // one a newcomer pushes out.
            while let Ok((from, hello)) = hellos.try_recv() {
                match hello {
                    Ok((i, s, reader)) if agents.writers[i].is_none() => {
                        let w = Arc::new(Mutex::new(s));
                        send(&w, "SETUP", &setup_for(i).encode()).map_err(|source| {
                            Error::AgentConnection {
                                host: agents.hosts[i].name.clone(),
                                source,
                            }
                        })?;
                        agents.writers[i] = Some(Arc::clone(&w));
                        watch_agent(
                            (i, agents.hosts[i].name.clone()),
                            reader,
                            events.clone(),
                            output.clone(),
                            Arc::clone(&agents.checkpoints),
                        );
                    }
                    Ok((i, _, _)) => {
                        tracing::warn!("refused a second agent for host {i} from {from}")
                    }
                    Err(why) => tracing::warn!("refused an agent connection from {from}: {why}"),
                }
            }
            loop {
                match listener.accept() {
                    Ok((s, from)) => {
                        let Ok(closer) = s.try_clone() else {
                            continue;
                        };
                        next_id += 1;
                        let id = next_id;
                        strangers.admit(id, closer);
                        let (tx, token, hosts, pool) = (
                            hello_tx.clone(),
                            token.to_string(),
                            agents.hosts.len(),
                            Arc::clone(&strangers),
                        );
                        let spawned = std::thread::Builder::new()
                            .name("vpml-agent-hello".into())
                            .spawn(move || {
                                let hello = agent_hello(s, &token, hosts);
                                pool.forget(id);
                                let _ = tx.send((from, hello));
                            });
                        if let Err(e) = spawned {
                            strangers.forget(id);
                            tracing::warn!("refused an agent connection from {from}: {e}");
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(Error::AcceptAgents(e)),
                }
            }
            if agents.writers.iter().all(Option::is_some) {
                break;
            }
            if Instant::now() >= deadline {
                let missing: Vec<&str> = agents
                    .writers
                    .iter()
                    .zip(&agents.hosts)
                    .filter(|(w, _)| w.is_none())
                    .map(|(_, h)| h.name.as_str())
                    .collect();
                return Err(Error::AgentsUnreachable {
                    hosts: missing.join(", "),
                    secs: timeout.as_secs_f64(),
                });
            }
            // A new connection, or a hello read: look again either way
            // (a hello thread's result is seen within the slice).
            use rustix::event::{PollFd, PollFlags, Timespec, poll};
            let slice = Timespec {
                tv_sec: 0,
                tv_nsec: 5_000_000,
            };
            let _ = poll(&mut [PollFd::new(&listener, PollFlags::IN)], Some(&slice));
        }
        // Hellos still being read end with their connections.
        while strangers.close_oldest() {}
        Ok(agents)
    }

    fn exited_agent(&mut self) -> Option<usize> {
        self.children
            .iter_mut()
            .position(|c| matches!(c.try_wait(), Ok(Some(_))))
    }

    /// Send a command to the agent of `host` (ignored if it is gone: its
    /// loss is reported separately).
    pub(crate) fn command(&self, host: usize, header: &str) {
        if let Some(Some(w)) = self.writers.get(host)
            && let Err(e) = send(w, header, &[])
        {
            tracing::debug!("agent {host}: {e}");
        }
    }

    /// SIGKILL the agent of `host` (testing aid; its ranks die with it).
    pub(crate) fn kill(&self, host: usize) {
        if let Some(c) = self.children.get(host) {
            // Our child (reaped in `stop`).
            crate::process::signal(c.id() as i32, rustix::process::Signal::KILL);
        }
    }

    /// Send a command to every agent.
    pub(crate) fn broadcast(&self, header: &str) {
        for h in 0..self.writers.len() {
            self.command(h, header);
        }
    }

    /// Stop: close every control connection (agents kill their ranks and
    /// exit), then reap the agents.
    pub(crate) fn stop(&mut self) {
        for w in self.writers.iter().flatten() {
            let _ = lock(w).shutdown(std::net::Shutdown::Both);
        }
        for c in &mut self.children {
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                match c.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= deadline => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                    // Agents exit as soon as their ranks are gone.
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
    }
}

/// Why a connection that claims to be an agent is refused.
#[derive(Debug, thiserror::Error)]
enum HelloError {
    #[error("{0}")]
    Socket(#[source] std::io::Error),
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("closed before its hello")]
    Closed,
    #[error("not a vpml agent")]
    NotAgent,
    #[error("wrong job token")]
    WrongToken,
    #[error("bad host index")]
    BadHost,
}

/// How long a connection has to send its hello (an agent does at once).
const HELLO_DEADLINE: Duration = Duration::from_secs(3);
/// At most this many silent connections wait for their hello at once.
const MAX_WAITING_HELLOS: usize = 64;
/// Largest hello header (`HELLO <token> <host>`); it has no payload.
const MAX_HELLO_HEADER: usize = 512;

/// Read and check an agent's `HELLO <token> <host>`.
fn agent_hello(
    s: TcpStream,
    token: &str,
    hosts: usize,
) -> Result<(usize, TcpStream, BufReader<TcpStream>), HelloError> {
    s.set_nonblocking(false).map_err(HelloError::Socket)?;
    s.set_read_timeout(Some(HELLO_DEADLINE))
        .map_err(HelloError::Socket)?;
    let _ = s.set_nodelay(true);
    let mut reader = BufReader::new(s.try_clone().map_err(HelloError::Socket)?);
    let (header, _) =
        read_msg_within(&mut reader, MAX_HELLO_HEADER, 0)?.ok_or(HelloError::Closed)?;
    let mut p = header.split(' ');
    if p.next() != Some("HELLO") {
        return Err(HelloError::NotAgent);
    }
    if p.next() != Some(token) {
        return Err(HelloError::WrongToken);
    }
    let host: usize = p
        .next()
        .and_then(|h| h.parse().ok())
        .filter(|&h| h < hosts)
        .ok_or(HelloError::BadHost)?;
    s.set_read_timeout(None).map_err(HelloError::Socket)?;
    reader
        .get_ref()
        .set_read_timeout(None)
        .map_err(HelloError::Socket)?;
    Ok((host, s, reader))
}

/// Turn an agent's messages into launcher events.
fn watch_agent(
    (host, name): (usize, String),
    mut reader: BufReader<TcpStream>,
    events: Sender<Event>,
    output: OutputFn,
    checkpoints: Arc<Mutex<CheckpointMirror>>,
) {
    std::thread::spawn(move || {
        let why = loop {
            let (header, payload) = match read_msg(&mut reader) {
                Ok(Some(m)) => m,
                Ok(None) => break "its connection closed".to_string(),
                Err(e) => break e.to_string(),
            };
            let mut p = header.split(' ');
            let cmd = p.next().unwrap_or("");
            let nums: Vec<i64> = p.filter_map(|v| v.parse().ok()).collect();
            match (cmd, nums.as_slice()) {
                ("OUT", [rank, is_err]) => output(*rank as usize, *is_err != 0, &payload),
                ("EXIT", [rank, inc, code, sig]) => {
                    let status = if *sig != 0 {
                        ExitStatus::from_raw((*sig as i32) & 0x7f)
                    } else {
                        ExitStatus::from_raw(((*code as i32) & 0xff) << 8)
                    };
                    let _ = events.send(Event::Exited {
                        rank: *rank as usize,
                        pid: None,
                        incarnation: *inc as u32,
                        status,
                    });
                }
                ("CKPT", &[generation, taken, global]) => {
                    let n = |v: i64| u32::try_from(v).ok();
                    let (Some(generation), Some(taken), Some(global)) =
                        (n(generation), n(taken), n(global))
                    else {
                        break format!("sent a malformed message {header:?}");
                    };
                    lock(&checkpoints).report(generation, taken, global);
                }
                _ => break format!("sent a malformed message {header:?}"),
            }
        };
        let _ = events.send(Event::AgentLost { host, name, why });
    });
}

#[cfg(test)]
mod tests {
    use super::super::wire::write_msg;
    use super::*;

    #[test]
    fn an_agent_with_a_wrong_token_is_refused() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let hello = |line: &str| {
            let mut c = TcpStream::connect(addr).unwrap();
            write_msg(&mut c, line, &[]).unwrap();
            let (s, _) = l.accept().unwrap();
            agent_hello(s, "right", 2)
                .map(|(h, _, _)| h)
                .map_err(|e| e.to_string())
        };
        assert_eq!(hello("HELLO right 1").unwrap(), 1);
        assert_eq!(hello("HELLO wrong 1").unwrap_err(), "wrong job token");
        assert_eq!(hello("HELLO right 7").unwrap_err(), "bad host index");
        assert_eq!(hello("GET / HTTP/1.0").unwrap_err(), "not a vpml agent");
        // Before its token is checked, a connection may send little.
        let long = format!("HELLO right 1 {}", "x".repeat(MAX_HELLO_HEADER));
        assert!(hello(&long).unwrap_err().contains("at most 512"));
        let mut c = TcpStream::connect(addr).unwrap();
        write_msg(&mut c, "HELLO right 1", &[0u8; 64]).unwrap();
        let (s, _) = l.accept().unwrap();
        let err = agent_hello(s, "right", 2).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("payload of 64 bytes (at most 0)"));
        // A silent one is given up at the deadline.
        let _silent = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        assert!(agent_hello(s, "right", 2).is_err());
    }
}
