//! [`JobConfig`]: everything one process of a job is told when it starts —
//! who it is, how it reaches the job, the engine's settings and its
//! protocol's — read once, in one place.
//!
//! `vpml run` (and `vpml replay`) hand it over as the `VPML_*` environment
//! variables named in [`var`]: they survive `exec`, reach an unmodified MPI
//! C program through its loader, and can be read with
//! `cat /proc/<pid>/environ`. The launcher writes them with the `to_env`
//! methods here and a process reads them with [`JobConfig::from_env`]; no
//! other code of a rank reads a `VPML_*` variable (the fault injection of
//! the tests, `VPML_FAULT_POINT`, and the logging filter, `VPML_LOG`,
//! aside). A malformed value is an error naming the variable; the
//! protocol's settings are read only when a protocol is chosen. (The
//! launcher's own command line takes defaults from a few variables of the
//! user's — `VPML_PROTOCOL`, `VPML_TRANSPORT`, `VPML_SENDER_LOG` — and
//! `vpml mpicc` its compiler from `VPML_CC`.)
//!
//! [`JobConfig::get`] is the process's copy, read at the first call. The
//! simulator, which runs a whole job in one process, builds each rank's
//! settings itself and does not use it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::OnceLock;

use crate::bootstrap::JobEnv;
use crate::error::{Error, Result};

/// The environment variables that carry a [`JobConfig`].
pub mod var {
    /// Job id (hex).
    pub const JOB_ID: &str = "VPML_JOB_ID";
    /// This rank in the world.
    pub const RANK: &str = "VPML_RANK";
    /// Number of ranks in the world.
    pub const SIZE: &str = "VPML_SIZE";
    /// Address of the launcher's key/value service.
    pub const KV_ADDR: &str = "VPML_KV_ADDR";
    /// The job's secret token (hex).
    pub const TOKEN: &str = "VPML_TOKEN";
    /// Comma-separated inherited descriptors of every rank's mailbox, by rank.
    pub const MAILBOX_FDS: &str = "VPML_MAILBOX_FDS";
    /// Number of ranks sharing this host.
    pub const LOCAL_SIZE: &str = "VPML_LOCAL_SIZE";
    /// Number of cores of this host available to the job.
    pub const HOST_CORES: &str = "VPML_HOST_CORES";
    /// `shm` (default: shared memory between ranks of a host) or `tcp`
    /// (every pair over TCP).
    pub const TRANSPORT: &str = "VPML_TRANSPORT";
    /// Comma-separated host index of every rank (default: all on one host).
    /// Pairs on different hosts talk over TCP.
    pub const HOST_OF: &str = "VPML_HOST_OF";
    /// Inherited descriptor of the job page (set when crashed ranks are
    /// restarted, i.e. with a fault-tolerance protocol).
    pub const JOB_PAGE_FD: &str = "VPML_JOB_PAGE_FD";
    /// This process's incarnation (0 at first start).
    pub const INCARNATION: &str = "VPML_INCARNATION";
    /// Coordinated checkpointing: the global checkpoint a restarted
    /// process resumes from (every rank restarts from the same one; 0 or
    /// unset: from the beginning).
    pub const RESTART_FROM: &str = "VPML_RESTART_FROM";
    /// Non-empty: publish this rank's counters at finalize (`--stats`).
    pub const STATS: &str = "VPML_STATS";
    /// `vpml run --chaos SEED`: perturb delivery timing from this seed.
    pub const CHAOS: &str = "VPML_CHAOS";
    /// Non-empty: large messages never use single-copy reads.
    pub const SHM_NO_SINGLE_COPY: &str = "VPML_SHM_NO_SINGLE_COPY";
    /// Wall-clock time (ns since the Unix epoch) at which the launcher
    /// started this process (to time restarts).
    pub const SPAWNED_AT_NS: &str = "VPML_SPAWNED_AT_NS";
    /// `1`: write checkpoint and restart marks on stdout for the launcher
    /// (see [`crate::bootstrap::CHECKPOINT_MARK`]).
    pub const OUTPUT_MARKS: &str = "VPML_OUTPUT_MARKS";
    /// Set by `vpml replay`: the recording this rank is replayed from
    /// (alone: no launcher, no peers).
    pub const REPLAY_DIR: &str = "VPML_REPLAY_DIR";
    /// `vpml replay --until N`: stop at the N-th logged event.
    pub const REPLAY_UNTIL: &str = "VPML_REPLAY_UNTIL";
    /// `none` (default), `pessimist`, `coordinated` or `replay`
    /// ([`super::ProtocolName`]).
    pub const PROTOCOL: &str = "VPML_PROTOCOL";
    /// Comma-separated addresses of the job's event loggers.
    pub const EVENT_LOGGERS: &str = "VPML_EVENT_LOGGERS";
    /// How many loggers must hold an event before it is durable.
    pub const REPLICAS: &str = "VPML_REPLICAS";
    /// Directory under which each rank keeps its sender log (`rank-<r>/`).
    pub const LOG_DIR: &str = "VPML_LOG_DIR";
    /// `file` (default) or `memory` ([`super::SenderLogMode`]).
    pub const SENDER_LOG: &str = "VPML_SENDER_LOG";
    /// Size in bytes of a sender-log segment.
    pub const LOG_SEGMENT_SIZE: &str = "VPML_LOG_SEGMENT_SIZE";
    /// Bytes of memory a rank's sender log may hold (empty: the default,
    /// a share of the host's memory); beyond it, full segments move to
    /// disk.
    pub const SENDER_LOG_LIMIT: &str = "VPML_SENDER_LOG_LIMIT";
    /// Directory under which each rank moves its sender log's segments
    /// out of memory (`rank-<r>/spilled/`; empty: the log directory).
    pub const SPILL_DIR: &str = "VPML_SPILL_DIR";
    /// `1`: send each event to the loggers as soon as it exists.
    pub const EVENTS_EAGER: &str = "VPML_EVENTS_EAGER";
    /// `1`: the launcher restarts the loggers when they die.
    pub const LOGGERS_RESTARTED: &str = "VPML_LOGGERS_RESTARTED";
    /// `1`: never free events or log records (`vpml run --record`).
    pub const KEEP_LOGS: &str = "VPML_KEEP_LOGS";
    /// `loggers`: copy every checkpoint to the event loggers; `none`
    /// (default).
    pub const CHECKPOINT_COPIES: &str = "VPML_CHECKPOINT_COPIES";
}

/// A protocol this build knows, as `VPML_PROTOCOL` and `--protocol` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProtocolName {
    /// `none` (or unset, or empty): no fault tolerance.
    #[default]
    None,
    /// `pessimist`: pessimistic sender-based message logging.
    Pessimist,
    /// `coordinated`: coordinated checkpoints at the program's checkpoint
    /// calls; every rank restarts from the last one after any failure.
    Coordinated,
    /// `replay`: `vpml replay`'s protocol (built by `vpml-replay`).
    Replay,
}

impl ProtocolName {
    /// Every protocol, in the order error messages list them.
    pub const ALL: [ProtocolName; 4] = [
        ProtocolName::None,
        ProtocolName::Pessimist,
        ProtocolName::Coordinated,
        ProtocolName::Replay,
    ];

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolName::None => "none",
            ProtocolName::Pessimist => "pessimist",
            ProtocolName::Coordinated => "coordinated",
            ProtocolName::Replay => "replay",
        }
    }

    /// A value of `VPML_PROTOCOL` (empty means `none`); an unknown name is
    /// a [`Error::Bootstrap`] that lists the known ones.
    pub fn parse(name: &str) -> Result<ProtocolName> {
        if name.is_empty() {
            return Ok(ProtocolName::None);
        }
        ProtocolName::ALL
            .into_iter()
            .find(|p| p.as_str() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = ProtocolName::ALL.iter().map(|p| p.as_str()).collect();
                Error::Bootstrap(format!(
                    "unknown protocol {name:?} in {} (known: {})",
                    var::PROTOCOL,
                    known.join(", ")
                ))
            })
    }
}

/// Where the pessimist protocol keeps its sender log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SenderLogMode {
    /// In memory-mapped segment files (the default).
    #[default]
    File,
    /// In anonymous memory, spilled to a file at each checkpoint.
    Memory,
}

impl SenderLogMode {
    /// Its name (`file`, `memory`).
    pub fn as_str(self) -> &'static str {
        match self {
            SenderLogMode::File => "file",
            SenderLogMode::Memory => "memory",
        }
    }
}

/// The engine's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineSettings {
    /// Publish the counters at finalize (`vpml run --stats`).
    pub stats: bool,
    /// Perturb delivery timing from this seed (`vpml run --chaos`).
    pub chaos: Option<u64>,
    /// Large messages never use single-copy reads.
    pub no_single_copy: bool,
    /// Write checkpoint and restart marks on stdout for the launcher.
    pub output_marks: bool,
    /// When the launcher started this process (ns since the Unix epoch).
    pub spawned_at_ns: Option<u128>,
}

/// The fault-tolerance protocol's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtocolSettings {
    /// Which protocol.
    pub name: ProtocolName,
    /// The job's event loggers.
    pub event_loggers: Vec<SocketAddr>,
    /// Loggers that must hold an event before it is durable (`None`: 1).
    pub replicas: Option<usize>,
    /// Where ranks keep their sender logs (each under `rank-<r>/`).
    pub log_dir: Option<PathBuf>,
    /// Sender log in files or in memory.
    pub sender_log: SenderLogMode,
    /// Sender-log segment size in bytes (`None`: the log's default).
    pub segment_size: Option<usize>,
    /// Bytes of memory each rank's sender log may hold (`None`: a share
    /// of the host's memory, see the protocol).
    pub sender_log_limit: Option<u64>,
    /// Where ranks move sender-log segments out of memory (each under
    /// `rank-<r>/spilled/`; `None`: under the log directory).
    pub spill_dir: Option<PathBuf>,
    /// Send events to the loggers as soon as they exist.
    pub events_eager: bool,
    /// The launcher restarts the loggers when they die.
    pub loggers_restarted: bool,
    /// Never free events or log records (a recording).
    pub keep_logs: bool,
    /// Copy every checkpoint to the event loggers.
    pub checkpoint_copies: bool,
}

/// A rank replayed alone from a recording (`vpml replay`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplaySettings {
    /// The recording.
    pub dir: PathBuf,
    /// Stop at this logged event.
    pub until: Option<u64>,
}

/// Everything one process of a job is told when it starts (see the module
/// docs).
#[derive(Debug, Clone, Default)]
pub struct JobConfig {
    /// Who this process is and how it reaches the job; `None` for a
    /// program not started by `vpml run` (a one-rank job).
    pub job: Option<JobEnv>,
    /// The engine's settings.
    pub engine: EngineSettings,
    /// The protocol's settings.
    pub protocol: ProtocolSettings,
    /// Set when this rank is replayed alone.
    pub replay: Option<ReplaySettings>,
}

/// The environment a [`JobConfig`] is read from: a variable's value, if
/// set (a seam for tests).
pub(crate) type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl JobConfig {
    /// This process's configuration, read from its environment at the
    /// first call (an error then is returned again at every call).
    pub fn get() -> Result<&'static JobConfig> {
        static CONFIG: OnceLock<std::result::Result<JobConfig, String>> = OnceLock::new();
        CONFIG
            .get_or_init(|| JobConfig::from_env().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| Error::Bootstrap(e.clone()))
    }

    /// Read the configuration from this process's environment.
    pub fn from_env() -> Result<JobConfig> {
        JobConfig::read(&process_env)
    }

    /// Read the configuration through `get`.
    fn read(get: Lookup<'_>) -> Result<JobConfig> {
        let replay = get(var::REPLAY_DIR).map(PathBuf::from);
        let job = match &replay {
            Some(_) => Some(JobEnv::for_replay(get)?),
            None => JobEnv::read(get)?,
        };
        Ok(JobConfig {
            job,
            engine: EngineSettings::read(get)?,
            // A process without a protocol reads none of its settings (a
            // stale one left in the user's shell does not stop it).
            protocol: match ProtocolName::parse(&get(var::PROTOCOL).unwrap_or_default())? {
                ProtocolName::None => ProtocolSettings::default(),
                name => ProtocolSettings::read(get, name)?,
            },
            replay: match replay {
                None => None,
                Some(dir) => Some(ReplaySettings {
                    dir,
                    until: optional(get, var::REPLAY_UNTIL)?,
                }),
            },
        })
    }
}

impl EngineSettings {
    /// The settings a user may set for `vpml run` — `VPML_CHAOS` and
    /// `VPML_SHM_NO_SINGLE_COPY` — from this process's environment (the
    /// others are the launcher's to decide: a stale one in the shell is
    /// not read).
    pub fn user_knobs_from_env() -> Result<EngineSettings> {
        EngineSettings::read_knobs(&process_env)
    }

    fn read_knobs(get: Lookup<'_>) -> Result<EngineSettings> {
        Ok(EngineSettings {
            chaos: optional(get, var::CHAOS)?,
            no_single_copy: get(var::SHM_NO_SINGLE_COPY).is_some_and(|v| !v.is_empty()),
            ..EngineSettings::default()
        })
    }

    fn read(get: Lookup<'_>) -> Result<EngineSettings> {
        Ok(EngineSettings {
            stats: get(var::STATS).is_some_and(|v| !v.is_empty()),
            output_marks: get(var::OUTPUT_MARKS).as_deref() == Some("1"),
            spawned_at_ns: optional(get, var::SPAWNED_AT_NS)?,
            ..EngineSettings::read_knobs(get)?
        })
    }

    /// The variables that carry the job-wide settings, every one of them
    /// (an empty value is "off" or "unset", so nothing inherited from the
    /// launcher's environment can add to them). The per-process ones,
    /// `output_marks` and `spawned_at_ns`, are set by whoever starts each
    /// process, with the rank's own variables.
    pub fn to_env(&self) -> Vec<(String, String)> {
        vec![
            (var::STATS.into(), on(self.stats)),
            (var::CHAOS.into(), some(self.chaos)),
            (var::SHM_NO_SINGLE_COPY.into(), on(self.no_single_copy)),
        ]
    }
}

impl ProtocolSettings {
    /// The settings a user may set for `vpml run` — segment size, eager
    /// events, loggers restarted, kept logs, checkpoint copies — from this
    /// process's environment (the others are the launcher's to decide: a
    /// stale one in the shell is not read).
    pub fn user_knobs_from_env() -> Result<ProtocolSettings> {
        ProtocolSettings::read_knobs(&process_env)
    }

    fn read_knobs(get: Lookup<'_>) -> Result<ProtocolSettings> {
        Ok(ProtocolSettings {
            segment_size: optional(get, var::LOG_SEGMENT_SIZE)?,
            events_eager: flag(get, var::EVENTS_EAGER)?,
            loggers_restarted: flag(get, var::LOGGERS_RESTARTED)?,
            keep_logs: flag(get, var::KEEP_LOGS)?,
            checkpoint_copies: match get(var::CHECKPOINT_COPIES).as_deref() {
                Some("loggers") => true,
                Some("") | Some("none") | None => false,
                Some(other) => {
                    return Err(Error::Bootstrap(format!(
                        "{}={other:?}: expected loggers or none",
                        var::CHECKPOINT_COPIES
                    )));
                }
            },
            ..ProtocolSettings::default()
        })
    }

    /// The settings of protocol `name`.
    fn read(get: Lookup<'_>, name: ProtocolName) -> Result<ProtocolSettings> {
        let event_loggers = match get(var::EVENT_LOGGERS) {
            None => Vec::new(),
            Some(list) => list
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|a| {
                    a.trim().parse().map_err(|_| {
                        Error::Bootstrap(format!("{}: {a:?} is not an address", var::EVENT_LOGGERS))
                    })
                })
                .collect::<Result<Vec<SocketAddr>>>()?,
        };
        Ok(ProtocolSettings {
            name,
            event_loggers,
            replicas: optional(get, var::REPLICAS)?,
            log_dir: get(var::LOG_DIR)
                .filter(|d| !d.is_empty())
                .map(PathBuf::from),
            sender_log_limit: optional(get, var::SENDER_LOG_LIMIT)?,
            spill_dir: get(var::SPILL_DIR)
                .filter(|d| !d.is_empty())
                .map(PathBuf::from),
            sender_log: match get(var::SENDER_LOG).as_deref() {
                Some("memory") => SenderLogMode::Memory,
                Some("file") | Some("") | None => SenderLogMode::File,
                Some(other) => {
                    return Err(Error::Bootstrap(format!(
                        "{}={other:?}: expected memory or file",
                        var::SENDER_LOG
                    )));
                }
            },
            ..ProtocolSettings::read_knobs(get)?
        })
    }

    /// The variables that carry these settings, every one of them (an
    /// empty value is "off" or "unset", so nothing inherited from the
    /// launcher's environment can add to them).
    pub fn to_env(&self) -> Vec<(String, String)> {
        let loggers: Vec<String> = self.event_loggers.iter().map(|a| a.to_string()).collect();
        vec![
            (var::PROTOCOL.into(), self.name.as_str().into()),
            (var::EVENT_LOGGERS.into(), loggers.join(",")),
            (var::REPLICAS.into(), some(self.replicas)),
            (
                var::LOG_DIR.into(),
                self.log_dir
                    .as_ref()
                    .map_or(String::new(), |d| d.display().to_string()),
            ),
            (var::SENDER_LOG.into(), self.sender_log.as_str().into()),
            (var::LOG_SEGMENT_SIZE.into(), some(self.segment_size)),
            (var::SENDER_LOG_LIMIT.into(), some(self.sender_log_limit)),
            (
                var::SPILL_DIR.into(),
                self.spill_dir
                    .as_ref()
                    .map_or(String::new(), |d| d.display().to_string()),
            ),
            (var::EVENTS_EAGER.into(), on(self.events_eager)),
            (var::LOGGERS_RESTARTED.into(), on(self.loggers_restarted)),
            (var::KEEP_LOGS.into(), on(self.keep_logs)),
            (
                var::CHECKPOINT_COPIES.into(),
                if self.checkpoint_copies {
                    "loggers"
                } else {
                    "none"
                }
                .into(),
            ),
        ]
    }
}

/// A switch's value: `1` or empty.
fn on(b: bool) -> String {
    if b { "1".into() } else { String::new() }
}

/// An optional value, or empty.
fn some<T: ToString>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

/// A required variable.
pub(crate) fn required(get: Lookup<'_>, name: &str) -> Result<String> {
    get(name).ok_or_else(|| Error::Bootstrap(format!("{name} is not set")))
}

/// A number in variable `name`'s value `value`.
pub(crate) fn number<T: FromStr>(name: &str, value: &str) -> Result<T> {
    value
        .trim()
        .parse()
        .map_err(|_| Error::Bootstrap(format!("{name}={value:?} is not a valid number")))
}

/// An optional number (unset or empty: `None`).
pub(crate) fn optional<T: FromStr>(get: Lookup<'_>, name: &str) -> Result<Option<T>> {
    match get(name) {
        Some(v) if !v.trim().is_empty() => number(name, &v).map(Some),
        _ => Ok(None),
    }
}

/// A 0/1 switch (unset or empty: off).
fn flag(get: Lookup<'_>, name: &str) -> Result<bool> {
    Ok(optional::<u64>(get, name)?.is_some_and(|v| v != 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(vars: &[(&str, &str)]) -> Result<JobConfig> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        JobConfig::read(&|name| map.get(name).cloned())
    }

    #[test]
    fn settings_survive_the_trip_through_the_environment() {
        // (The per-process `output_marks` and `spawned_at_ns` are set by
        // whoever starts each process.)
        let engine = EngineSettings {
            stats: true,
            chaos: Some(7),
            no_single_copy: true,
            output_marks: false,
            spawned_at_ns: None,
        };
        let protocol = ProtocolSettings {
            name: ProtocolName::Pessimist,
            event_loggers: vec![
                "127.0.0.1:4000".parse().unwrap(),
                "[::1]:9".parse().unwrap(),
            ],
            replicas: Some(2),
            log_dir: Some("/tmp/logs".into()),
            sender_log: SenderLogMode::Memory,
            segment_size: Some(1 << 20),
            sender_log_limit: Some(3 << 30),
            spill_dir: Some("/var/tmp/spill".into()),
            events_eager: true,
            loggers_restarted: true,
            keep_logs: true,
            checkpoint_copies: true,
        };
        let vars: Vec<(String, String)> = engine
            .to_env()
            .into_iter()
            .chain(protocol.to_env())
            .collect();
        let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let cfg = read(&refs).unwrap();
        assert_eq!(cfg.engine, engine);
        assert_eq!(cfg.protocol, protocol);
        assert!(cfg.job.is_none() && cfg.replay.is_none());
        // The defaults are what nothing set gives, and survive the trip
        // too (written as empty values, which override inherited ones).
        let empty = read(&[]).unwrap();
        assert_eq!(empty.engine, EngineSettings::default());
        assert_eq!(empty.protocol, ProtocolSettings::default());
        let vars: Vec<(String, String)> = EngineSettings::default()
            .to_env()
            .into_iter()
            .chain(ProtocolSettings::default().to_env())
            .collect();
        let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let cfg = read(&refs).unwrap();
        assert_eq!(cfg.engine, EngineSettings::default());
        assert_eq!(cfg.protocol, ProtocolSettings::default());
        // The per-process settings are read as the launcher writes them.
        let cfg = read(&[(var::OUTPUT_MARKS, "1"), (var::SPAWNED_AT_NS, "12")]).unwrap();
        assert!(cfg.engine.output_marks);
        assert_eq!(cfg.engine.spawned_at_ns, Some(12));
    }

    #[test]
    fn protocol_names_parse() {
        for p in ProtocolName::ALL {
            assert_eq!(ProtocolName::parse(p.as_str()).ok(), Some(p));
        }
        assert_eq!(ProtocolName::parse("").ok(), Some(ProtocolName::None));
    }

    #[test]
    fn a_rank_and_a_replay_are_read_whole() {
        let cfg = read(&[
            (var::RANK, "1"),
            (var::SIZE, "2"),
            (var::JOB_ID, "ab"),
            (var::KV_ADDR, "127.0.0.1:5"),
            (var::TOKEN, "t"),
            (var::MAILBOX_FDS, "3,4"),
            (var::LOCAL_SIZE, "2"),
            (var::HOST_CORES, "2"),
            (var::HOST_OF, "0,1"),
            (var::TRANSPORT, "tcp"),
            (var::INCARNATION, "3"),
            (var::JOB_PAGE_FD, "9"),
        ])
        .unwrap();
        let job = cfg.job.unwrap();
        assert_eq!((job.rank, job.size, job.incarnation), (1, 2, 3));
        assert_eq!(
            (&job.mailbox_fds[..], &job.host_of[..]),
            (&[3, 4][..], &[0, 1][..])
        );
        assert!(job.transport_tcp && job.over_tcp(0, 1));
        assert_eq!(job.job_page_fd, Some(9));
        let cfg = read(&[
            (var::REPLAY_DIR, "/rec"),
            (var::REPLAY_UNTIL, "12"),
            (var::RANK, "0"),
            (var::SIZE, "4"),
            (var::JOB_ID, "ab"),
        ])
        .unwrap();
        assert_eq!(cfg.job.map(|j| j.size), Some(4));
        assert_eq!(
            cfg.replay,
            Some(ReplaySettings {
                dir: "/rec".into(),
                until: Some(12)
            })
        );
        let e = read(&[
            (var::RANK, "0"),
            (var::SIZE, "2"),
            (var::JOB_ID, "a"),
            (var::KV_ADDR, "x"),
            (var::TOKEN, "t"),
            (var::MAILBOX_FDS, "3"),
            (var::LOCAL_SIZE, "1"),
            (var::HOST_CORES, "1"),
        ])
        .err()
        .map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("VPML_MAILBOX_FDS lists 1 entries for 2 ranks")),
            "{e:?}"
        );
    }

    #[test]
    fn an_inherited_descriptor_named_twice_is_refused() {
        let rank = |fds: &'static str, page: &'static str| {
            read(&[
                (var::RANK, "0"),
                (var::SIZE, "2"),
                (var::JOB_ID, "a"),
                (var::KV_ADDR, "x"),
                (var::TOKEN, "t"),
                (var::MAILBOX_FDS, fds),
                (var::LOCAL_SIZE, "2"),
                (var::HOST_CORES, "1"),
                (var::JOB_PAGE_FD, page),
            ])
            .err()
            .map(|e| e.to_string())
        };
        assert_eq!(rank("3,4", "5"), None);
        for e in [rank("3,3", ""), rank("3,4", "4")] {
            assert!(
                e.as_deref()
                    .is_some_and(|e| e.contains("descriptor 3 is named twice")
                        || e.contains("descriptor 4 is named twice")),
                "{e:?}"
            );
        }
    }

    #[test]
    fn a_bad_value_is_an_error_naming_its_variable() {
        // Without a protocol, the protocol's settings are not read at all.
        assert!(read(&[(var::SENDER_LOG, "disk")]).is_ok());
        // The launcher reads only the user's knobs: stale values of what it
        // decides itself are not its concern.
        let stale = |name: &str| match name {
            "VPML_EVENT_LOGGERS" => Some("localhost".to_string()),
            "VPML_SPAWNED_AT_NS" => Some("soon".to_string()),
            "VPML_LOG_SEGMENT_SIZE" => Some("4096".to_string()),
            _ => None,
        };
        let knobs = ProtocolSettings::read_knobs(&stale).unwrap();
        assert_eq!(knobs.segment_size, Some(4096));
        assert!(knobs.event_loggers.is_empty());
        assert!(EngineSettings::read_knobs(&stale).is_ok());
        let pessimist = (var::PROTOCOL, "pessimist");
        for (name, value, says) in [
            (
                var::PROTOCOL,
                "optimist",
                "unknown protocol \"optimist\" in VPML_PROTOCOL (known: none, pessimist, coordinated, replay)",
            ),
            (
                var::SENDER_LOG,
                "disk",
                "VPML_SENDER_LOG=\"disk\": expected memory or file",
            ),
            (
                var::CHECKPOINT_COPIES,
                "ssd",
                "VPML_CHECKPOINT_COPIES=\"ssd\": expected loggers or none",
            ),
            (
                var::LOG_SEGMENT_SIZE,
                "big",
                "VPML_LOG_SEGMENT_SIZE=\"big\" is not a valid number",
            ),
            (
                var::EVENT_LOGGERS,
                "localhost",
                "VPML_EVENT_LOGGERS: \"localhost\" is not an address",
            ),
            (var::CHAOS, "-1", "VPML_CHAOS=\"-1\" is not a valid number"),
        ] {
            let e = read(&[pessimist, (name, value)])
                .err()
                .map(|e| e.to_string());
            assert!(
                e.as_deref().is_some_and(|e| e.contains(says)),
                "{name}: {e:?}"
            );
        }
        let e = read(&[(var::RANK, "3"), (var::SIZE, "2")])
            .err()
            .map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("rank 3 is not inside a job of 2 ranks")),
            "{e:?}"
        );
    }
}
