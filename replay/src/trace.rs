//! `vpml trace …` (look into recordings) and `vpml check-determinism`.
//!
//! * `ls` — the recordings under the default directory;
//! * `info [DIR]` — the manifest;
//! * `dump [DIR] [--rank R] [--json]` — every recorded send (destination,
//!   sequence number, tag, length, checksum) and every event, per rank;
//! * `stats [DIR]` — counts per rank;
//! * `diff A B` — per rank, the first send that differs between two
//!   recordings of the same program (events may differ: which message an
//!   ANY_SOURCE receive takes is allowed to change; what is sent is what
//!   matters).
//!
//! `vpml check-determinism -n N PROGRAM [ARGS]…` records the program twice
//! with different `--chaos` seeds (which perturb delivery timing) and
//! diffs the two recordings.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use vpml_event_logger::Event;
use vpml_sender_log::SenderLog;

use crate::Error;
use crate::recording::{self, Manifest};

/// `vpml trace` subcommands.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum TraceCommand {
    /// List the recordings under the default directory.
    Ls,
    /// Show a recording's manifest.
    Info {
        /// The recording (default: the latest).
        dir: Option<PathBuf>,
    },
    /// Print every recorded send and event.
    Dump {
        /// The recording (default: the latest).
        dir: Option<PathBuf>,
        /// Only this rank.
        #[arg(long)]
        rank: Option<usize>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Counts per rank: messages, bytes, events by kind.
    Stats {
        /// The recording (default: the latest).
        dir: Option<PathBuf>,
    },
    /// The first differing send per rank between two recordings.
    Diff {
        /// First recording.
        a: PathBuf,
        /// Second recording.
        b: PathBuf,
    },
}

/// Options of `vpml trace`.
#[derive(clap::Args, Debug, Clone)]
pub struct TraceArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: TraceCommand,
}

/// Run `vpml trace`.
pub fn trace_main(args: TraceArgs) -> ExitCode {
    match trace(&args.command) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("vpml trace: {e}");
            ExitCode::from(1)
        }
    }
}

/// One recorded send.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Send {
    dest: u32,
    seq: u64,
    tag: i32,
    context: u32,
    len: usize,
    crc: u32,
}

struct Recording {
    dir: PathBuf,
    manifest: Manifest,
}

impl Recording {
    fn open(dir: Option<&Path>) -> Result<Recording, Error> {
        let dir = recording::resolve(dir)?;
        let manifest = recording::read_manifest(&dir)?;
        Ok(Recording { dir, manifest })
    }

    /// Rank `r`'s sends, per destination and context in sequence order.
    fn sends(&self, r: usize) -> Result<Vec<Send>, Error> {
        let log = SenderLog::open_read_only(&self.dir.join(format!("rank-{r}")))?;
        let mut out = Vec::new();
        for dest in log.destinations() {
            for ctx in log.contexts_to(dest) {
                for rec in log.iter_from(dest, ctx, 0) {
                    let rec = rec?;
                    out.push(Send {
                        dest,
                        seq: rec.header.seq,
                        tag: rec.header.tag,
                        context: rec.header.context,
                        len: rec.payload.len(),
                        crc: vpml_sender_log::crc32c(rec.payload),
                    });
                }
            }
        }
        Ok(out)
    }

    /// Rank `r`'s events (from the logger that holds the most of them).
    fn events(&self, r: usize) -> Result<Vec<(u64, Event)>, Error> {
        let mut best = Vec::new();
        let entries = std::fs::read_dir(&self.dir).map_err(Error::io(&self.dir))?;
        for e in entries.flatten() {
            if !e.file_name().to_string_lossy().starts_with("logger-") {
                continue;
            }
            let got =
                vpml_event_logger::read_stored_events(&e.path(), &self.manifest.job, r as u32)?;
            if got.len() > best.len() {
                best = got;
            }
        }
        Ok(best)
    }
}

fn event_kind(e: &Event) -> &'static str {
    match e {
        Event::Match { .. } => "match",
        Event::Probe { .. } => "probe",
        Event::Delivery { .. } => "delivery",
        Event::NoneRun { .. } => "none_run",
        Event::Cancel { .. } => "cancel",
    }
}

fn trace(cmd: &TraceCommand) -> Result<u8, Error> {
    match cmd {
        TraceCommand::Ls => {
            let root = recording::default_root()?;
            let mut rows = Vec::new();
            if let Ok(entries) = std::fs::read_dir(&root) {
                for e in entries.flatten() {
                    if e.file_name() == "latest" {
                        continue;
                    }
                    if let Ok(m) = recording::read_manifest(&e.path()) {
                        rows.push((e.path(), m));
                    }
                }
            }
            rows.sort_by(|a, b| a.0.cmp(&b.0));
            if rows.is_empty() {
                println!("no recordings under {}", root.display());
            }
            for (p, m) in rows {
                println!(
                    "{}  job {}  {} ranks  {}",
                    p.display(),
                    m.job,
                    m.size,
                    m.program.to_string_lossy()
                );
            }
            Ok(0)
        }
        TraceCommand::Info { dir } => {
            let rec = Recording::open(dir.as_deref())?;
            let m = &rec.manifest;
            println!("recording {}", rec.dir.display());
            println!("job {}, {} ranks, protocol {}", m.job, m.size, m.protocol);
            let args: Vec<String> = m
                .args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            println!("program {} {}", m.program.to_string_lossy(), args.join(" "));
            for (r, c) in m.ranks.iter().enumerate() {
                println!(
                    "rank {r}: {}",
                    c.as_deref().unwrap_or("no counters (did not finalize)")
                );
            }
            Ok(0)
        }
        TraceCommand::Dump { dir, rank, json } => {
            let rec = Recording::open(dir.as_deref())?;
            for r in 0..rec.manifest.size {
                if rank.is_some_and(|x| x != r) {
                    continue;
                }
                let sends = rec.sends(r)?;
                let events = rec.events(r)?;
                if !json {
                    println!("rank {r}: {} sends, {} events", sends.len(), events.len());
                }
                for s in &sends {
                    if *json {
                        println!(
                            "{{\"rank\":{r},\"kind\":\"send\",\"dest\":{},\"seq\":{},\"tag\":{},\"context\":{},\"len\":{},\"crc\":\"{:08x}\"}}",
                            s.dest, s.seq, s.tag, s.context, s.len, s.crc
                        );
                    } else {
                        println!(
                            "  send #{} to rank {}: tag {}, context {}, {} bytes, checksum {:08x}",
                            s.seq, s.dest, s.tag, s.context, s.len, s.crc
                        );
                    }
                }
                for (id, e) in &events {
                    if *json {
                        let text = format!("{e:?}").replace('"', "'");
                        println!(
                            "{{\"rank\":{r},\"kind\":\"event\",\"id\":{id},\"type\":\"{}\",\"event\":\"{text}\"}}",
                            event_kind(e)
                        );
                    } else {
                        println!("  event {id}: {e:?}");
                    }
                }
            }
            Ok(0)
        }
        TraceCommand::Stats { dir } => {
            let rec = Recording::open(dir.as_deref())?;
            println!(
                "{:>5} {:>10} {:>14} {:>8} {:>8} {:>9} {:>9} {:>7}",
                "rank", "messages", "bytes", "match", "probe", "delivery", "none_run", "cancel"
            );
            for r in 0..rec.manifest.size {
                let sends = rec.sends(r)?;
                let events = rec.events(r)?;
                let count = |k: &str| events.iter().filter(|(_, e)| event_kind(e) == k).count();
                println!(
                    "{r:>5} {:>10} {:>14} {:>8} {:>8} {:>9} {:>9} {:>7}",
                    sends.len(),
                    sends.iter().map(|s| s.len as u64).sum::<u64>(),
                    count("match"),
                    count("probe"),
                    count("delivery"),
                    count("none_run"),
                    count("cancel")
                );
            }
            Ok(0)
        }
        TraceCommand::Diff { a, b } => {
            let (ra, rb) = (Recording::open(Some(a))?, Recording::open(Some(b))?);
            Ok(u8::from(!diff(&ra, &rb)?))
        }
    }
}

/// Print the first differing send per rank; true if none differs.
fn diff(a: &Recording, b: &Recording) -> Result<bool, Error> {
    if a.manifest.size != b.manifest.size || a.manifest.program != b.manifest.program {
        return Err(Error::NotComparable {
            a: a.dir.clone(),
            b: b.dir.clone(),
        });
    }
    let mut same = true;
    for r in 0..a.manifest.size {
        let (sa, sb) = (a.sends(r)?, b.sends(r)?);
        let (ea, eb) = (a.events(r)?.len(), b.events(r)?.len());
        let first = sa
            .iter()
            .zip(&sb)
            .find(|(x, y)| x != y)
            .map(|(x, y)| (Some(x.clone()), Some(y.clone())))
            .or_else(|| match sa.len().cmp(&sb.len()) {
                std::cmp::Ordering::Equal => None,
                std::cmp::Ordering::Greater => Some((sa.get(sb.len()).cloned(), None)),
                std::cmp::Ordering::Less => Some((None, sb.get(sa.len()).cloned())),
            });
        let show = |s: &Option<Send>| match s {
            Some(s) => format!(
                "send #{} to rank {} on context {}: tag {}, {} bytes, checksum {:08x}",
                s.seq, s.dest, s.context, s.tag, s.len, s.crc
            ),
            None => "no such send".into(),
        };
        match first {
            None => println!("rank {r}: same {} sends ({ea} vs {eb} events)", sa.len()),
            Some((x, y)) => {
                same = false;
                println!("rank {r}: first difference: {} vs {}", show(&x), show(&y));
            }
        }
    }
    Ok(same)
}

/// Options of `vpml check-determinism`.
#[derive(clap::Args, Debug, Clone)]
pub struct CheckArgs {
    /// Number of ranks.
    #[arg(short = 'n', long = "np", value_name = "N")]
    pub ranks: usize,
    /// The two chaos seeds.
    #[arg(long, value_name = "A,B", default_value = "1,2")]
    pub seeds: String,
    /// Keep the two recordings (their directories are printed).
    #[arg(long)]
    pub keep: bool,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

/// Run `vpml check-determinism`: 0 if the two recordings send the same
/// messages, 1 if they differ.
pub fn check_main(args: CheckArgs) -> ExitCode {
    match check(&args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("vpml check-determinism: {e}");
            ExitCode::from(1)
        }
    }
}

fn check(args: &CheckArgs) -> Result<u8, Error> {
    let seeds: Vec<&str> = args.seeds.split(',').collect();
    if seeds.len() != 2 || seeds.iter().any(|s| s.parse::<u64>().is_err()) {
        return Err(Error::BadSeeds(args.seeds.clone()));
    }
    let vpml = std::env::current_exe().map_err(Error::FindVpml)?;
    let base = std::env::temp_dir().join(format!("vpml-check-{}", std::process::id()));
    let mut dirs = Vec::new();
    for seed in &seeds {
        let dir = base.join(format!("chaos-{seed}"));
        let status = Command::new(&vpml)
            .args(["run", "-n", &args.ranks.to_string(), "--chaos", seed])
            .arg(format!("--record={}", dir.display()))
            .args(&args.command)
            .status()
            .map_err(Error::RunVpml)?;
        if !status.success() {
            return Err(Error::ChaosRunFailed {
                seed: seed.to_string(),
                status,
            });
        }
        dirs.push(dir);
    }
    let same = diff(
        &Recording::open(Some(&dirs[0]))?,
        &Recording::open(Some(&dirs[1]))?,
    )?;
    if same {
        println!("no divergence: both runs sent the same messages");
    } else {
        println!("the program is not deterministic: the runs sent different messages (above)");
    }
    if args.keep {
        println!("recordings kept in {}", base.display());
    } else {
        let _ = std::fs::remove_dir_all(&base);
    }
    Ok(u8::from(!same))
}
