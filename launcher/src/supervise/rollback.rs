//! The launcher's side of coordinated checkpointing (see `vpml-pml`'s
//! `engine/coordinated.rs`): global checkpoints asked for from outside
//! the program (`vpml checkpoint`, SIGUSR1, `--checkpoint-interval`), and
//! the restart — after any failure every rank stops, and all restart
//! together from the newest global checkpoint that every rank wrote.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use rustix::process::Signal;
use vpml_event_logger::copies;
use vpml_vprotocol::checkpoint::{CheckpointStore, payload_of};
use vpml_vprotocol::coordinated::checkpoint_dir;

use super::{SupervisedJob, Supervisor};

/// Where the event loggers keep the copies of each rank's part of the
/// global checkpoints (a coordinated job across hosts, whose ranks' own
/// files may be on a lost host, or on hosts this launcher cannot read).
#[derive(Debug, Clone)]
pub struct CopyStores {
    /// The loggers' data directories.
    pub logger_dirs: Vec<PathBuf>,
    /// The job's name on the loggers.
    pub job: String,
}

impl CopyStores {
    fn dirs(&self, rank: usize) -> impl Iterator<Item = PathBuf> + '_ {
        let rank = u32::try_from(rank).unwrap_or(u32::MAX);
        self.logger_dirs
            .iter()
            .map(move |d| copies::dir_of(d, &self.job, rank))
    }

    /// The newest global checkpoint of which every one of `ranks` ranks'
    /// part has an intact copy on some logger (0: none), and a note for
    /// each newer one that does not.
    pub(crate) fn newest_complete(&self, ranks: usize) -> Result<(u64, Vec<String>), String> {
        let mut held = Vec::with_capacity(ranks);
        for r in 0..ranks {
            let mut have = Vec::new();
            for dir in self.dirs(r) {
                have.extend(copies::indices(&dir).map_err(|e| e.to_string())?);
            }
            held.push(have);
        }
        newest_intact(held, |k| {
            let mut damaged = Vec::new();
            for r in 0..ranks {
                if let Err(why) = self.intact(r, k)? {
                    damaged.push(why);
                }
            }
            Ok(damaged)
        })
    }

    /// Does some logger hold an intact copy of `rank`'s part of global
    /// checkpoint `k`? Why not. A copy that cannot be read at all is an
    /// error, not damage: the restart stops rather than remove a
    /// checkpoint that may be good.
    fn intact(&self, rank: usize, k: u64) -> Result<Result<(), String>, String> {
        let mut why = Vec::new();
        for dir in self.dirs(rank) {
            if let Some(bytes) = copies::read_whole(&dir, k).map_err(|e| e.to_string())? {
                match payload_of(&bytes, k) {
                    Ok(_) => return Ok(Ok(())),
                    Err(e) => why.push(format!("{}: copy {k}: {e}", dir.display())),
                }
            }
        }
        if why.is_empty() {
            why.push(format!("no copy of rank {rank}'s part"));
        }
        Ok(Err(why.join("; ")))
    }

    /// Remove the copies newer than global checkpoint `k`.
    pub(crate) fn remove_newer_than(&self, ranks: usize, k: u64) -> Result<(), String> {
        for r in 0..ranks {
            for dir in self.dirs(r) {
                copies::remove_newer_than(&dir, k).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }
}

/// A rollback under way: the failure that caused it, until every rank
/// has stopped.
pub(super) struct Rollback {
    why: String,
    code: u8,
    /// The rank whose death caused it.
    rank: usize,
    started: Instant,
}

/// A global checkpoint asked for and not yet complete.
pub(super) struct CheckpointRequest {
    /// Who asked (`SIGUSR1`, `vpml checkpoint`, `--checkpoint-interval`).
    by: String,
    /// The job page's request count with this one: a complete global
    /// checkpoint that took this many requests answers it.
    ticket: u32,
    at: Instant,
    reply: Option<Sender<Result<u32, String>>>,
}

/// How often the launcher looks whether a checkpoint asked for is complete.
const POLL: Duration = Duration::from_millis(50);

/// The newest global checkpoint every one of `ranks` ranks has, intact,
/// under the job's log directory `root` (0: none, start over), and a note
/// for each newer one that is not usable everywhere.
pub(crate) fn newest_complete(root: &Path, ranks: usize) -> Result<(u64, Vec<String>), String> {
    let mut stores = Vec::with_capacity(ranks);
    let mut held = Vec::with_capacity(ranks);
    for r in 0..ranks {
        let store = CheckpointStore::open(&checkpoint_dir(root, r)).map_err(|e| e.to_string())?;
        held.push(store.indices().map_err(|e| e.to_string())?);
        stores.push(store);
    }
    newest_intact(held, |k| {
        Ok(stores.iter().filter_map(|s| s.read(k).err()).collect())
    })
}

/// The newest checkpoint number in every one of `held` (each rank's
/// numbers) of which `damaged` names no damaged part (0: none), and a
/// note for each newer one it does; `damaged`'s error stops the search.
fn newest_intact(
    held: Vec<Vec<u64>>,
    damaged: impl Fn(u64) -> Result<Vec<String>, String>,
) -> Result<(u64, Vec<String>), String> {
    let mut every: Vec<u64> = held.first().cloned().unwrap_or_default();
    for have in &held[1.min(held.len())..] {
        every.retain(|k| have.contains(k));
    }
    every.sort_unstable();
    every.dedup();
    let mut notes = Vec::new();
    for &k in every.iter().rev() {
        let damaged = damaged(k)?;
        if damaged.is_empty() {
            return Ok((k, notes));
        }
        notes.push(format!(
            "global checkpoint {k} is damaged: {}",
            damaged.join("; ")
        ));
    }
    Ok((0, notes))
}

impl<J: SupervisedJob> Supervisor<J> {
    /// `by` asks for a global checkpoint; `reply` gets its number once it
    /// is complete, or why it was not taken.
    pub(crate) fn on_checkpoint_request(
        &mut self,
        by: &str,
        reply: Option<Sender<Result<u32, String>>>,
    ) {
        let refuse = if !self.rollback {
            Some("the job takes no global checkpoints (run it with --protocol coordinated)")
        } else if self.failure.is_some() || self.all_finalized {
            Some("the job is ending")
        } else {
            None
        };
        if let Some(why) = refuse {
            notice!(self, "{by} asked for a global checkpoint: refused: {why}");
            if let Some(r) = reply {
                let _ = r.send(Err(why.to_string()));
            }
            return;
        }
        let ticket = self.job.request_checkpoint();
        notice!(
            self,
            "{by} asked for a global checkpoint: the ranks take it at their next checkpoint call"
        );
        self.requests.push(CheckpointRequest {
            by: by.to_string(),
            ticket,
            at: Instant::now(),
            reply,
        });
    }

    /// When the checkpoint timers next need the supervisor.
    pub(super) fn checkpoint_wake(&self) -> Option<Instant> {
        let poll = (!self.requests.is_empty()).then(|| Instant::now() + POLL);
        [poll, self.next_interval_request]
            .into_iter()
            .flatten()
            .min()
    }

    /// Answer the requests a complete global checkpoint satisfies, and
    /// ask again when `--checkpoint-interval` is due.
    pub(super) fn checkpoint_timers(&mut self, now: Instant) {
        if !self.requests.is_empty() {
            let taken = self.job.requests_taken();
            let done = self.job.global_checkpoint();
            let (answered, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.requests)
                .into_iter()
                .partition(|r| taken >= r.ticket);
            self.requests = waiting;
            for r in answered {
                notice!(
                    self,
                    "global checkpoint {done} is complete, {:.1} ms after {} asked for it",
                    now.duration_since(r.at).as_secs_f64() * 1e3,
                    r.by
                );
                if let Some(reply) = r.reply {
                    let _ = reply.send(Ok(done));
                }
            }
        }
        if let (Some(at), Some(every)) = (self.next_interval_request, self.checkpoint_interval)
            && now >= at
        {
            self.next_interval_request = Some(now + every);
            if self.requests.is_empty() && self.failure.is_none() && !self.all_finalized {
                self.on_checkpoint_request("--checkpoint-interval", None);
            }
        }
    }

    /// The job ends: requests still waiting were never taken.
    pub(super) fn refuse_pending_checkpoints(&mut self) {
        for r in std::mem::take(&mut self.requests) {
            let why = "the job ended before the ranks reached a checkpoint call";
            notice!(
                self,
                "the global checkpoint {} asked for was not taken: {why}",
                r.by
            );
            if let Some(reply) = r.reply {
                let _ = reply.send(Err(why.to_string()));
            }
        }
    }

    /// `--inject-failure RANK…:corrupt-checkpoint`: damage the newest
    /// checkpoint of `rank`, whose death started the rollback.
    fn damage_checkpoint_if_asked(&mut self, rank: usize) {
        let asked = self.corrupt_at.contains(&(rank, self.incarnation[rank]));
        if !(std::mem::take(&mut self.corrupt_before_restart[rank]) || asked) {
            return;
        }
        if let Some(dir) = &self.log_dir {
            match crate::inject::corrupt_newest_checkpoint(dir, rank) {
                Ok(p) => notice!(self, "damaged {} before the restart", p.display()),
                Err(e) => notice!(self, "could not damage a checkpoint: {e}"),
            }
        }
    }

    /// The global checkpoint every one of `ranks` ranks restarts from
    /// (0: the beginning), the newer ones removed, and whether a newer one
    /// was passed over as damaged.
    fn restart_point(&mut self, ranks: usize) -> Result<(u64, bool), String> {
        let (k, notes) = if let Some(copies) = &self.copy_stores {
            let (k, notes) = copies.newest_complete(ranks)?;
            copies.remove_newer_than(ranks, k)?;
            (k, notes)
        } else if let Some(dir) = &self.log_dir {
            let (k, notes) = newest_complete(dir, ranks)?;
            for r in 0..ranks {
                CheckpointStore::open(&checkpoint_dir(dir, r))
                    .and_then(|s| s.remove_newer_than(k))
                    .map_err(|e| e.to_string())?;
            }
            (k, notes)
        } else {
            (0, Vec::new())
        };
        let damaged = !notes.is_empty();
        for n in notes {
            notice!(self, "{n}");
        }
        Ok((k, damaged))
    }

    /// `rank` died (`why`): stop every rank, then restart them all (in
    /// [`Supervisor::rollback_if_stopped`], once the last has exited).
    pub(super) fn start_rollback(&mut self, rank: usize, why: String, code: u8) {
        if self.rolling_back.is_some() {
            return;
        }
        self.rolling_back = Some(Rollback {
            why,
            code,
            rank,
            started: Instant::now(),
        });
        let live = self.live();
        self.signal_all(&live, Signal::KILL);
        self.rollback_if_stopped();
    }

    /// Once every rank of a rollback has exited: restart them all from
    /// the newest complete global checkpoint.
    pub(super) fn rollback_if_stopped(&mut self) {
        if self.alive.iter().any(|&a| a) {
            return;
        }
        let Some(rb) = self.rolling_back.take() else {
            return;
        };
        if self.failure.is_some() {
            // The job was ended meanwhile (--timeout, an abort, Ctrl-C).
            return;
        }
        let ranks = self.alive.len();
        self.restarts_done += 1;
        self.damage_checkpoint_if_asked(rb.rank);
        let (from, damaged) = match self.restart_point(ranks) {
            Ok(found) => found,
            Err(e) => {
                self.fail(rb.code, format!("{}; cannot restart: {e}", rb.why));
                return;
            }
        };
        self.job.set_restart_from(from);
        self.job
            .reset_global_checkpoint(u32::try_from(from).unwrap_or(u32::MAX));
        let t0 = Instant::now();
        let hosts_before: Vec<Option<String>> = (0..ranks).map(|r| self.job.host_name(r)).collect();
        let incarnations: Vec<u32> = (0..ranks).map(|r| self.job.announce_restart(r)).collect();
        for (r, &inc) in incarnations.iter().enumerate() {
            self.incarnation[r] = inc;
            self.finalized[r] = false;
            if let Err(e) = self.job.respawn(r, inc) {
                self.fail(rb.code, format!("{}; cannot restart rank {r}: {e}", rb.why));
                return;
            }
            self.alive[r] = true;
        }
        self.job.wake_all();
        if let Some(after) = self.on_restart[rb.rank].pop_front() {
            self.armed.push((Instant::now() + after, rb.rank));
        }
        let detected = self.killed_at[rb.rank]
            .take()
            .map(|k| {
                format!(
                    ", detected {:.1} ms after the kill",
                    rb.started.duration_since(k).as_secs_f64() * 1e3
                )
            })
            .unwrap_or_default();
        // Ranks of a lost host run on a spare now.
        let moved: Vec<String> = (0..ranks)
            .filter_map(|r| {
                let now = self.job.host_name(r)?;
                (hosts_before[r].as_ref() != Some(&now)).then(|| format!("rank {r} on host {now}"))
            })
            .collect();
        let moved = if moved.is_empty() {
            String::new()
        } else {
            format!("; {}", moved.join(", "))
        };
        let point = if from == 0 && damaged {
            "the beginning (no usable global checkpoint)".to_string()
        } else if from == 0 {
            "the beginning (no global checkpoint yet)".to_string()
        } else {
            format!("global checkpoint {from}")
        };
        notice!(
            self,
            "{}; restarted all {ranks} ranks from {point} (restart {} of at most {}{detected}, all stopped in {:.1} ms, spawned in {:.1} ms){moved}",
            rb.why,
            self.restarts_done,
            self.max_restarts,
            t0.duration_since(rb.started).as_secs_f64() * 1e3,
            t0.elapsed().as_secs_f64() * 1e3
        );
    }
}

#[cfg(test)]
mod tests {
    use super::newest_intact;

    #[test]
    fn the_newest_number_every_rank_holds_intact_is_chosen() {
        let none = |_| Ok(Vec::new());
        let held = vec![vec![3, 4, 5], vec![4, 5], vec![3, 4]];
        assert_eq!(newest_intact(held, none), Ok((4, Vec::new())));
        let (k, notes) = newest_intact(vec![vec![4, 5], vec![4, 5]], |k| {
            Ok(if k == 5 {
                vec!["rank 1: payload checksum mismatch".to_string()]
            } else {
                Vec::new()
            })
        })
        .unwrap();
        assert_eq!(k, 4);
        assert_eq!(
            notes,
            ["global checkpoint 5 is damaged: rank 1: payload checksum mismatch"]
        );
        assert_eq!(
            newest_intact(vec![vec![1], vec![2]], none),
            Ok((0, Vec::new()))
        );
        assert_eq!(newest_intact(Vec::new(), none), Ok((0, Vec::new())));
        // A part that cannot be read stops the search: nothing is
        // declared damaged (and removed) on an I/O error.
        let io = newest_intact(vec![vec![4, 5]], |_| Err("EIO".to_string()));
        assert_eq!(io, Err("EIO".to_string()));
    }
}
