//! `--inject-failure`: the crashes a test asks for — SIGKILLs at chosen
//! times (of a rank, a host's agent or an event logger) and fault points
//! armed in one process each (see `vpml-fault-points`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::ids::random_bytes;
use crate::{Error, RunArgs};

/// The process a kill or a fault point is aimed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// A rank (its current process).
    Rank(usize),
    /// The agent of host number N (multi-host jobs).
    Agent(usize),
    /// Event logger number N (started by this launcher).
    Logger(usize),
}

/// A planned SIGKILL.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Injection {
    pub target: Target,
    /// What `after` counts from.
    pub clock: Clock,
    pub after: Duration,
    /// Damage the rank's newest checkpoint before restarting it (testing
    /// the fall-back to the older one).
    pub corrupt_checkpoint: bool,
    /// Remove the files of the rank (of the host's ranks, with an agent)
    /// before its restart, as the loss of a machine would (testing
    /// off-host checkpoint copies).
    pub lose_files: bool,
    /// Damage, in every other rank's sender log, the newest message kept
    /// for the rank before restarting it (testing that a job whose lost
    /// messages cannot all be re-sent stops, and says where).
    pub corrupt_sender_logs: bool,
}

/// What a timed injection's delay counts from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Clock {
    /// The job's start (`RANK@SECONDS`).
    Start,
    /// The moment every rank has joined the job (random kills: a kill in
    /// start-up would stop the job instead of testing recovery).
    Join,
    /// The rank's next restart (`RANK@restart+SECONDS`).
    Restart,
}

/// A fault point armed in one process: the `incarnation`-th process of
/// `target` (0: the first) dies at `spec` (`NAME` or `NAME#N`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ArmedPoint {
    pub target: Target,
    pub incarnation: u32,
    pub spec: String,
    /// The rank's files go when the point kills it (`…:lose-files`).
    pub lose_files: bool,
    /// The rank's newest checkpoint is damaged when this process dies
    /// (at the point, or before it if something else kills it first):
    /// `…:corrupt-checkpoint`.
    pub corrupt_checkpoint: bool,
    /// The other ranks' sender logs are damaged before the rank restarts
    /// (`…:corrupt-sender-log`; see [`Injection::corrupt_sender_logs`]).
    pub corrupt_sender_logs: bool,
}

/// Most kills one `random:K` may plan (each is kept in memory; a job
/// never gets that many restarts anyway).
pub(crate) const MAX_RANDOM_KILLS: usize = 10_000;

/// What is wrong with an `--inject-failure` spec.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// Not `RANK@…`, `agent:…`, `logger:…` nor `random:K`.
    #[error("expected RANK@SECONDS, RANK@point:NAME or random:K")]
    Shape,
    /// `random:` without a number of kills from 1 to 10 000.
    #[error("expected random:K with 1 ≤ K ≤ {MAX_RANDOM_KILLS}")]
    RandomCount,
    /// A time that is not a number.
    #[error("bad number of seconds")]
    Seconds,
    /// `random:K@SECONDS` with a window that is not positive.
    #[error("the window must be a positive number of seconds")]
    Window,
    /// A negative time.
    #[error("the time must be a non-negative number of seconds")]
    NegativeTime,
    /// A time too long to wait for.
    #[error("the time must be at most {} seconds", crate::MAX_SECONDS)]
    TooLong,
    /// A rank, host or logger that is not a number.
    #[error("bad {what} number {value:?}")]
    Number {
        /// `rank`, `host` or `logger`.
        what: &'static str,
        /// As given.
        value: String,
    },
    /// `agent:` in a job on this host alone.
    #[error("agent kills need --hosts or --hostfile")]
    AgentWithoutHosts,
    /// `logger:` without loggers this launcher starts.
    #[error("logger kills need --protocol pessimist and loggers this launcher starts")]
    LoggerWithoutLoggers,
    /// `logger:I` with I ≥ `--event-loggers`.
    #[error("logger {index} is outside the job (--event-loggers {loggers})")]
    LoggerOutside {
        /// I.
        index: usize,
        /// `--event-loggers`.
        loggers: usize,
    },
    /// A rank ≥ `-n`.
    #[error("rank {0} is outside the job")]
    RankOutside(usize),
    /// A fault point name `vpml-fault-points` does not know (its message
    /// lists the known ones).
    #[error("{0}")]
    Point(String),
    /// A fault point in a release build.
    #[error("fault points exist only in debug builds (cargo build, not --release)")]
    ReleaseBuild,
    /// `:corrupt-checkpoint` or `:corrupt-sender-log` on a logger or an
    /// agent.
    #[error("corrupt-checkpoint and corrupt-sender-log go with rank kills")]
    CorruptTarget,
    /// `:lose-files` on a logger.
    #[error("lose-files goes with rank and agent kills")]
    LoseFilesTarget,
    /// A fault point in an agent.
    #[error("agents have no fault points")]
    AgentPoint,
    /// A fault point in a multi-host job.
    #[error("fault points are armed in single-host jobs only")]
    PointsOnHosts,
    /// Two fault points in one process.
    #[error("one fault point per process")]
    TwoPoints,
    /// `restart+` on an agent or a logger.
    #[error("restart+ goes with ranks")]
    RestartNotRank,
}

/// Everything `--inject-failure` asked for.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// Timed kills, ordered by time.
    pub kills: Vec<Injection>,
    pub points: Vec<ArmedPoint>,
}

impl Plan {
    /// The fault point to arm in process `incarnation` of `target`.
    pub fn point_for(&self, target: Target, incarnation: u32) -> Option<&str> {
        self.points
            .iter()
            .find(|p| p.target == target && p.incarnation == incarnation)
            .map(|p| p.spec.as_str())
    }
}

/// Parse the `--inject-failure` specs.
pub(crate) fn plan(args: &RunArgs) -> Result<Plan, Error> {
    let mut out = Plan::default();
    let mut seed = None;
    for spec in &args.inject_failure {
        let bad = |why: SpecError| Error::InjectFailure {
            spec: spec.clone(),
            why,
        };
        if let Some(rest) = spec.strip_prefix("random:") {
            let (k, window) = match rest.split_once('@') {
                Some((k, w)) => (k, w.parse::<f64>().map_err(|_| bad(SpecError::Seconds))?),
                None => (rest, 2.0),
            };
            let k: usize = k
                .parse()
                .ok()
                .filter(|&k| (1..=MAX_RANDOM_KILLS).contains(&k))
                .ok_or_else(|| bad(SpecError::RandomCount))?;
            if !(window.is_finite() && window > 0.0) {
                return Err(bad(SpecError::Window));
            }
            let window = crate::seconds(window).ok_or_else(|| bad(SpecError::TooLong))?;
            let s = *seed.get_or_insert(match args.inject_seed {
                Some(s) => s,
                None => u64::from_le_bytes(random_bytes::<8>()?),
            });
            let mut x = s ^ (out.kills.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            for _ in 0..k {
                x = splitmix(x);
                let rank = (x % args.ranks as u64) as usize;
                x = splitmix(x);
                let frac = (x >> 11) as f64 / (1u64 << 53) as f64;
                out.kills.push(Injection {
                    target: Target::Rank(rank),
                    clock: Clock::Join,
                    after: window.mul_f64(frac),
                    corrupt_checkpoint: false,
                    lose_files: false,
                    corrupt_sender_logs: false,
                });
            }
            continue;
        }
        // What else the kill does, in any order after it.
        let (mut spec, mut corrupt_checkpoint, mut lose_files, mut corrupt_sender_logs) =
            (spec.as_str(), false, false, false);
        loop {
            if let Some(s) = spec.strip_suffix(":corrupt-checkpoint") {
                (spec, corrupt_checkpoint) = (s, true);
            } else if let Some(s) = spec.strip_suffix(":lose-files") {
                (spec, lose_files) = (s, true);
            } else if let Some(s) = spec.strip_suffix(":corrupt-sender-log") {
                (spec, corrupt_sender_logs) = (s, true);
            } else {
                break;
            }
        }
        let (who, when) = spec.split_once('@').ok_or_else(|| bad(SpecError::Shape))?;
        let target = target(args, who).map_err(bad)?;
        if (corrupt_checkpoint || corrupt_sender_logs) && !matches!(target, Target::Rank(_)) {
            return Err(bad(SpecError::CorruptTarget));
        }
        let (when, after_restart) = match when.strip_prefix("restart+") {
            Some(s) => (s, true),
            None => (when, false),
        };
        if let Some(point) = when.strip_prefix("point:") {
            vpml_fault_points::parse(point).map_err(|why| bad(SpecError::Point(why)))?;
            if !cfg!(debug_assertions) {
                return Err(bad(SpecError::ReleaseBuild));
            }
            if lose_files && !matches!(target, Target::Rank(_)) {
                return Err(bad(SpecError::LoseFilesTarget));
            }
            if matches!(target, Target::Agent(_)) {
                return Err(bad(SpecError::AgentPoint));
            }
            if args.hosts.is_some() || args.hostfile.is_some() {
                return Err(bad(SpecError::PointsOnHosts));
            }
            // The K-th `restart+point` of a target is armed in its K-th
            // restarted process.
            let incarnation = if after_restart {
                1 + out
                    .points
                    .iter()
                    .filter(|p| p.target == target && p.incarnation > 0)
                    .count() as u32
            } else {
                0
            };
            if out.point_for(target, incarnation).is_some() {
                return Err(bad(SpecError::TwoPoints));
            }
            out.points.push(ArmedPoint {
                target,
                incarnation,
                spec: point.to_string(),
                lose_files,
                corrupt_checkpoint,
                corrupt_sender_logs,
            });
            continue;
        }
        let secs: f64 = when.parse().map_err(|_| bad(SpecError::Seconds))?;
        if !(secs.is_finite() && secs >= 0.0) {
            return Err(bad(SpecError::NegativeTime));
        }
        let after = crate::seconds(secs).ok_or_else(|| bad(SpecError::TooLong))?;
        if after_restart && !matches!(target, Target::Rank(_)) {
            return Err(bad(SpecError::RestartNotRank));
        }
        if lose_files && matches!(target, Target::Logger(_)) {
            return Err(bad(SpecError::LoseFilesTarget));
        }
        out.kills.push(Injection {
            target,
            clock: if after_restart {
                Clock::Restart
            } else {
                Clock::Start
            },
            after,
            corrupt_checkpoint,
            lose_files,
            corrupt_sender_logs,
        });
    }
    if let Some(s) = seed {
        eprintln!("vpml run: random failure injection, seed {s} (--inject-seed {s} repeats it)");
    }
    out.kills.sort_by_key(|i| i.after);
    Ok(out)
}

/// `RANK`, `agent:HOST` or `logger:N`.
fn target(args: &RunArgs, who: &str) -> Result<Target, SpecError> {
    let number = |s: &str, what: &'static str| {
        s.parse::<usize>().map_err(|_| SpecError::Number {
            what,
            value: s.to_string(),
        })
    };
    if let Some(host) = who.strip_prefix("agent:") {
        if args.hosts.is_none() && args.hostfile.is_none() {
            return Err(SpecError::AgentWithoutHosts);
        }
        return Ok(Target::Agent(number(host, "host")?));
    }
    if let Some(i) = who.strip_prefix("logger:") {
        let i = number(i, "logger")?;
        if args.protocol != "pessimist" || args.event_logger_addrs.is_some() {
            return Err(SpecError::LoggerWithoutLoggers);
        }
        if i >= args.event_loggers {
            return Err(SpecError::LoggerOutside {
                index: i,
                loggers: args.event_loggers,
            });
        }
        return Ok(Target::Logger(i));
    }
    let rank = number(who, "rank")?;
    if rank >= args.ranks {
        return Err(SpecError::RankOutside(rank));
    }
    Ok(Target::Rank(rank))
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Remove `rank`'s directory under the log directory, as the loss of the
/// machine it ran on would (testing aid); says so, `when` saying when.
pub(crate) fn remove_rank_files(log_dir: &Path, rank: usize, when: &str) {
    let d = log_dir.join(format!("rank-{rank}"));
    match std::fs::remove_dir_all(&d) {
        Ok(()) => eprintln!("vpml run: removed {} {when} (testing aid)", d.display()),
        Err(e) => eprintln!("vpml run: cannot remove {}: {e}", d.display()),
    }
}

/// Flip one byte of the newest checkpoint of a rank (testing aid).
pub(crate) fn corrupt_newest_checkpoint(log_dir: &Path, rank: usize) -> Result<PathBuf, Error> {
    let dir = log_dir.join(format!("rank-{rank}")).join("checkpoints");
    let newest = std::fs::read_dir(&dir)
        .map_err(Error::io(&dir))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "vck"))
        .max()
        .ok_or_else(|| Error::NoCheckpoint(dir.clone()))?;
    let mut bytes = std::fs::read(&newest).map_err(Error::io(&newest))?;
    if let Some(b) = bytes.last_mut() {
        *b ^= 0xff;
    }
    std::fs::write(&newest, &bytes).map_err(Error::io(&newest))?;
    Ok(newest)
}

/// `--inject-failure`'s parser, for the fuzz targets (`fuzz/`).
#[cfg(fuzzing)]
pub mod fuzzing {
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: crate::RunArgs,
    }

    /// Parse `specs` as `--inject-failure` values of a 4-rank pessimist
    /// job: a plan or an error, never a panic.
    pub fn inject_specs(specs: &[&str]) {
        let mut argv = vec!["vpml", "-n", "4", "--protocol", "pessimist"];
        for s in specs {
            argv.extend(["--inject-failure", s]);
        }
        argv.push("prog");
        if let Ok(cli) = Cli::try_parse_from(argv) {
            let _ = super::plan(&cli.run);
        }
    }
}

/// Flip the first payload byte of the newest message with a payload that
/// rank `from`'s sender log keeps for rank `to` (testing aid; `from` must
/// be stopped meanwhile): the file and the offset of the record, or
/// `None` if it keeps no such message.
pub(crate) fn corrupt_newest_record_to(
    log_dir: &Path,
    from: usize,
    to: usize,
) -> Result<Option<(PathBuf, u64)>, String> {
    use std::os::unix::fs::FileExt;
    let dir = log_dir.join(format!("rank-{from}"));
    let log = vpml_sender_log::SenderLog::open_read_only(&dir).map_err(|e| e.to_string())?;
    let to = u32::try_from(to).map_err(|_| format!("rank {to} out of range"))?;
    let mut newest = None;
    for ctx in log.contexts_to(to) {
        for r in log.iter_from(to, ctx, 0) {
            let r = r.map_err(|e| e.to_string())?;
            if !r.payload.is_empty() {
                newest = newest.max(Some((r.location.segment, r.location.offset)));
            }
        }
    }
    let Some((segment, offset)) = newest else {
        return Ok(None);
    };
    let path = log
        .segment_file(segment)
        .ok_or_else(|| format!("segment {segment} of {} has no file", dir.display()))?
        .to_path_buf();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, offset)
        .and_then(|()| file.write_all_at(&[byte[0] ^ 0xff], offset))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Some((path, offset - vpml_sender_log::RECORD_HEADER as u64)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn plan_of(args: &[&str]) -> Result<Plan, String> {
        let mut argv = vec!["vpml", "-n", "4"];
        argv.extend_from_slice(args);
        argv.push("prog");
        plan(&Cli::parse_from(argv).run).map_err(|e| e.to_string())
    }

    #[test]
    fn points_are_armed_in_the_process_they_name() {
        let p = plan_of(&[
            "--protocol",
            "pessimist",
            "--inject-failure",
            "1@point:send.after_frame#3",
            "--inject-failure",
            "1@restart+point:recovery.connected",
            "--inject-failure",
            "1@restart+point:recovery.replaying#2",
            "--inject-failure",
            "logger:0@point:logger.received",
        ])
        .unwrap();
        assert!(p.kills.is_empty());
        assert_eq!(p.point_for(Target::Rank(1), 0), Some("send.after_frame#3"));
        assert_eq!(p.point_for(Target::Rank(1), 1), Some("recovery.connected"));
        assert_eq!(
            p.point_for(Target::Rank(1), 2),
            Some("recovery.replaying#2")
        );
        assert_eq!(p.point_for(Target::Rank(0), 0), None);
        assert_eq!(p.point_for(Target::Logger(0), 0), Some("logger.received"));
        let damaged = plan_of(&[
            "--protocol",
            "pessimist",
            "--inject-failure",
            "2@point:checkpoint.mid_write#5:corrupt-checkpoint",
        ])
        .unwrap();
        assert_eq!(
            damaged.point_for(Target::Rank(2), 0),
            Some("checkpoint.mid_write#5")
        );
        assert!(damaged.points[0].corrupt_checkpoint && !damaged.points[0].lose_files);
        // What a kill also does, in either order.
        let both = plan_of(&[
            "--protocol",
            "pessimist",
            "--inject-failure",
            "2@point:send.after_frame#30:corrupt-sender-log:lose-files",
            "--inject-failure",
            "1@3.5:lose-files:corrupt-sender-log",
        ])
        .unwrap();
        let p = &both.points[0];
        assert_eq!(p.spec, "send.after_frame#30");
        assert!(p.corrupt_sender_logs && p.lose_files && !p.corrupt_checkpoint);
        let k = &both.kills[0];
        assert_eq!(k.after, Duration::from_secs_f64(3.5));
        assert!(k.corrupt_sender_logs && k.lose_files && !k.corrupt_checkpoint);
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let err = |args: &[&str]| plan_of(args).unwrap_err();
        assert!(err(&["--inject-failure", "1@point:nowhere"]).contains("known:"));
        assert!(err(&["--inject-failure", "9@point:send.after_frame"]).contains("outside"));
        assert!(err(&["--inject-failure", "logger:0@1.0"]).contains("--protocol pessimist"));
        assert!(err(&["--inject-failure", "random:0"]).contains("1 ≤ K"));
        assert!(err(&["--inject-failure", "random:x@2"]).contains("1 ≤ K"));
        // Found by the fuzz target inject_spec: planned billions of kills;
        // a time too long for a Duration (a panic).
        assert!(err(&["--inject-failure", "random:99999999999"]).contains("K ≤ 10000"));
        assert!(err(&["--inject-failure", &format!("0@{}", "4".repeat(105))]).contains("at most"));
        assert!(err(&["--inject-failure", "random:2@1e300"]).contains("at most"));
        assert!(
            err(&[
                "--protocol",
                "pessimist",
                "--inject-failure",
                "1@point:send.after_frame",
                "--inject-failure",
                "1@point:send.before_frame",
            ])
            .contains("one fault point per process")
        );
        assert!(
            err(&[
                "--protocol",
                "pessimist",
                "--inject-failure",
                "logger:0@point:logger.received:corrupt-checkpoint",
            ])
            .contains("go with rank kills")
        );
        assert!(
            err(&[
                "--protocol",
                "pessimist",
                "--inject-failure",
                "logger:0@2:corrupt-sender-log",
            ])
            .contains("go with rank kills")
        );
        let timed = plan_of(&[
            "--protocol",
            "pessimist",
            "--inject-failure",
            "logger:0@1.5",
        ])
        .unwrap();
        assert_eq!(timed.kills[0].target, Target::Logger(0));
    }
}
