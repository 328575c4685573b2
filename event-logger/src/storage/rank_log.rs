//! The log of one rank of one job: its segment files, rebuilt at start-up
//! (cutting a torn last record, or the damage with `--repair`), appended
//! to, rotated and truncated.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::record::{RECORD_HEADER_LEN, encode_record, scan_segment};
use super::{Durability, StorageConfig, StorageError, io_err, open_append, sync_dir};
use crate::event::{EventBatch, EventId};

/// One segment file.
#[derive(Debug)]
pub(super) struct Segment {
    /// First id it may hold (from its name).
    first: EventId,
    /// Last id it holds; `first - 1` when empty.
    last: EventId,
    path: PathBuf,
    len: u64,
}

fn segment_name(first: EventId) -> String {
    format!("seg-{first:020}.log")
}

fn parse_segment_name(name: &str) -> Option<EventId> {
    let digits = name.strip_prefix("seg-")?.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Ids start at 1: a segment named 0 is not one of ours.
    digits.parse().ok().filter(|&first| first >= 1)
}

/// Outcome of a put.
pub(crate) struct Appended {
    /// Highest stored id after the put.
    pub highest: EventId,
    /// Events newly stored.
    pub new_events: u64,
    /// Bytes written.
    pub bytes: u64,
    /// The file the last write went to (what a group commit must sync).
    pub file: Arc<File>,
}

/// The log of one rank of one job.
pub(crate) struct RankLog {
    dir: PathBuf,
    pub(super) segments: Vec<Segment>,
    active: Arc<File>,
    highest: EventId,
    incarnation: u32,
    failed: Option<String>,
    durability: Durability,
    segment_bytes: u64,
    buf: Vec<u8>,
}

impl RankLog {
    /// Rebuilds the log of a rank from its directory (created if missing).
    pub(super) fn open(dir: &Path, cfg: &StorageConfig) -> Result<RankLog, StorageError> {
        let created = !dir.exists();
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        if created && cfg.durability == Durability::Fsync {
            for d in dir.ancestors().skip(1).take(3) {
                sync_dir(d)?;
            }
        }
        let names = segment_files(dir)?;
        let mut segments: Vec<Segment> = Vec::new();
        let count = names.len();
        let mut iter = names.into_iter().enumerate();
        while let Some((i, (first, path))) = iter.next() {
            if let Some(prev) = segments.last()
                && prev.last.checked_add(1) != Some(first)
            {
                let why = format!(
                    "segment starts at id {first} but the previous one ends at {}",
                    prev.last
                );
                if !cfg.repair {
                    return Err(StorageError::Corrupt {
                        path,
                        offset: 0,
                        why,
                    });
                }
                tracing::warn!(path = %path.display(), %why, "repair: setting aside this and later segments");
                set_aside(&path)?;
                for (_, (_, p)) in iter.by_ref() {
                    set_aside(&p)?;
                }
                break;
            }
            let is_last = i + 1 == count;
            let scan = scan_segment(&path, first)?;
            let last = scan.ids.map_or(first - 1, |(_, l)| l);
            let mut stop_here = false;
            if let Some((offset, why, torn)) = scan.problem {
                if torn && is_last {
                    tracing::warn!(path = %path.display(), offset, %why, "cutting a torn record at the end of the log");
                } else if cfg.repair {
                    tracing::warn!(path = %path.display(), offset, %why, "repair: cutting the log at a corrupt record");
                    stop_here = true;
                } else {
                    return Err(StorageError::Corrupt { path, offset, why });
                }
                let f = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(io_err(&path))?;
                f.set_len(scan.valid_len).map_err(io_err(&path))?;
                f.sync_all().map_err(io_err(&path))?;
            }
            segments.push(Segment {
                first,
                last,
                path,
                len: scan.valid_len,
            });
            if stop_here {
                for (_, (_, p)) in iter.by_ref() {
                    set_aside(&p)?;
                }
                break;
            }
        }
        let incarnation = read_incarnation(dir, cfg.repair)?;
        let (segments, active) = match segments.last() {
            Some(last) => {
                let file = open_append(&last.path, false)?;
                (segments, file)
            }
            None => {
                let path = dir.join(segment_name(1));
                let file = open_append(&path, true)?;
                if cfg.durability == Durability::Fsync {
                    sync_dir(dir)?;
                }
                (
                    vec![Segment {
                        first: 1,
                        last: 0,
                        path,
                        len: 0,
                    }],
                    file,
                )
            }
        };
        let highest = segments.last().map_or(0, |s| s.last);
        Ok(RankLog {
            dir: dir.to_owned(),
            segments,
            active: Arc::new(active),
            highest,
            incarnation,
            failed: None,
            durability: cfg.durability,
            segment_bytes: cfg.segment_bytes,
            buf: Vec::new(),
        })
    }

    /// Highest stored id.
    pub(crate) fn highest(&self) -> EventId {
        self.highest
    }

    /// Lowest stored id (0 when none).
    pub(crate) fn first_kept(&self) -> EventId {
        self.segments
            .iter()
            .find(|s| s.len > 0)
            .map_or(0, |s| s.first)
    }

    /// (segments, bytes) held.
    pub(crate) fn usage(&self) -> (u64, u64) {
        (
            self.segments.len() as u64,
            self.segments.iter().map(|s| s.len).sum(),
        )
    }

    /// The file currently appended to.
    pub(crate) fn active_file(&self) -> Arc<File> {
        Arc::clone(&self.active)
    }

    /// Marks the log unusable (after a failed fsync, whose data may be lost).
    pub(crate) fn fail(&mut self, why: String) {
        self.failed.get_or_insert(why);
    }

    /// Whether `incarnation` is still the newest that connected.
    pub(crate) fn check_current(&self, incarnation: u32) -> Result<(), StorageError> {
        if incarnation < self.incarnation {
            return Err(StorageError::Stale {
                incarnation,
                current: self.incarnation,
            });
        }
        Ok(())
    }

    /// Records that `incarnation` connected; refuses older ones.
    pub(crate) fn admit(&mut self, incarnation: u32) -> Result<(), StorageError> {
        self.check_current(incarnation)?;
        if incarnation > self.incarnation {
            let tmp = self.dir.join("incarnation.tmp");
            let path = self.dir.join("incarnation");
            let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
            writeln!(f, "{incarnation}")
                .and_then(|()| f.sync_all())
                .map_err(io_err(&tmp))?;
            std::fs::rename(&tmp, &path).map_err(io_err(&path))?;
            if self.durability == Durability::Fsync {
                sync_dir(&self.dir)?;
            }
            self.incarnation = incarnation;
        }
        Ok(())
    }

    /// Stores the events of `batch` that are new (ids above the highest
    /// stored one); repeated ids are ignored.
    pub(crate) fn append(
        &mut self,
        batch: &EventBatch,
        incarnation: u32,
    ) -> Result<Appended, StorageError> {
        if let Some(why) = &self.failed {
            return Err(StorageError::Failed(why.clone()));
        }
        if incarnation < self.incarnation {
            return Err(StorageError::Stale {
                incarnation,
                current: self.incarnation,
            });
        }
        let nothing = |log: &RankLog| Appended {
            highest: log.highest,
            new_events: 0,
            bytes: 0,
            file: Arc::clone(&log.active),
        };
        if batch.is_empty() || batch.last() <= self.highest {
            return Ok(nothing(self));
        }
        if batch.first() > self.highest + 1 {
            return Err(StorageError::Gap {
                first: batch.first(),
                highest: self.highest,
            });
        }
        let first = self.highest + 1;
        let (count, events) = batch.suffix_from(first);
        let record_len = (RECORD_HEADER_LEN + events.len()) as u64;
        if self.active_len() > 0 && self.active_len() + record_len > self.segment_bytes {
            self.rotate()?;
        }
        encode_record(count, first, events, &mut self.buf);
        let seg = self.segments.len() - 1;
        let path = self.segments[seg].path.clone();
        let before = self.segments[seg].len;
        if let Err(e) = (&*self.active).write_all(&self.buf) {
            // Cut what a short write left so the file stays a sequence of
            // whole records; if even that fails the log cannot be trusted.
            if let Err(e2) = self.active.set_len(before) {
                self.fail(format!(
                    "{}: write failed ({e}) and could not be undone ({e2})",
                    path.display()
                ));
            }
            return Err(StorageError::Io { path, source: e });
        }
        let s = &mut self.segments[seg];
        s.len += record_len;
        s.last = first + u64::from(count) - 1;
        self.highest = s.last;
        Ok(Appended {
            highest: self.highest,
            new_events: u64::from(count),
            bytes: record_len,
            file: Arc::clone(&self.active),
        })
    }

    fn active_len(&self) -> u64 {
        self.segments.last().map_or(0, |s| s.len)
    }

    /// Closes the active segment and starts a new, empty one.
    fn rotate(&mut self) -> Result<(), StorageError> {
        let first = self.highest + 1;
        let path = self.dir.join(segment_name(first));
        let file = open_append(&path, true)?;
        if self.durability == Durability::Fsync {
            // The old segment's data is synced by the group commit of the
            // puts that wrote it; the new name must survive a crash too.
            sync_dir(&self.dir)?;
        }
        self.segments.push(Segment {
            first,
            last: first - 1,
            path,
            len: 0,
        });
        self.active = Arc::new(file);
        Ok(())
    }

    /// Deletes the segments holding only ids ≤ `up_to`; returns (files, bytes).
    pub(crate) fn truncate(&mut self, up_to: EventId) -> Result<(u32, u64), StorageError> {
        if let Some(why) = &self.failed {
            return Err(StorageError::Failed(why.clone()));
        }
        let up_to = up_to.min(self.highest);
        if self.active_len() > 0 && self.highest <= up_to {
            self.rotate()?;
        }
        let mut files = 0u32;
        let mut bytes = 0u64;
        while self.segments.len() > 1 && self.segments[0].last <= up_to {
            let seg = self.segments.remove(0);
            std::fs::remove_file(&seg.path).map_err(io_err(&seg.path))?;
            files += 1;
            bytes += seg.len;
        }
        if files > 0 && self.durability == Durability::Fsync {
            sync_dir(&self.dir)?;
        }
        Ok((files, bytes))
    }

    /// The files to read for ids ≥ `from`, each with the length to read
    /// (records appended later are not part of the answer).
    pub(crate) fn read_plan(&self, from: EventId) -> Vec<(PathBuf, u64, EventId)> {
        self.segments
            .iter()
            .filter(|s| s.len > 0 && s.last >= from)
            .map(|s| (s.path.clone(), s.len, s.first))
            .collect()
    }
}

/// The segment files of a rank log directory, by first id.
fn segment_files(dir: &Path) -> Result<Vec<(EventId, PathBuf)>, StorageError> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(first) = parse_segment_name(name) {
            names.push((first, entry.path()));
        } else if name != "incarnation"
            && name != "incarnation.tmp"
            && name != "copies"
            && !name.ends_with(".corrupt")
        {
            tracing::warn!(path = %entry.path().display(), "ignoring unexpected file in a rank log directory");
        }
    }
    names.sort();
    Ok(names)
}

/// What [`RankLog::read_plan`] gives, for a rank log directory read
/// without a server and without changing anything: the segments must
/// follow each other and be whole, but for a torn last record (a write a
/// crash cut short, which the server would cut on its next start), which
/// is left out.
pub(super) fn read_only_plan(dir: &Path) -> Result<Vec<(PathBuf, u64, EventId)>, StorageError> {
    let names = segment_files(dir)?;
    let count = names.len();
    let mut plan = Vec::with_capacity(count);
    let mut next: Option<EventId> = None;
    for (i, (first, path)) in names.into_iter().enumerate() {
        if let Some(n) = next
            && n != first
        {
            return Err(StorageError::Corrupt {
                path,
                offset: 0,
                why: format!(
                    "segment starts at id {first} but the previous one ends at {}",
                    n - 1
                ),
            });
        }
        let scan = scan_segment(&path, first)?;
        if let Some((offset, why, torn)) = scan.problem
            && !(torn && i + 1 == count)
        {
            return Err(StorageError::Corrupt { path, offset, why });
        }
        next = Some(scan.ids.map_or(first, |(_, last)| last + 1));
        if scan.valid_len > 0 {
            plan.push((path, scan.valid_len, first));
        }
    }
    Ok(plan)
}

/// Renames a damaged segment out of the way (kept for inspection).
fn set_aside(path: &Path) -> Result<(), StorageError> {
    let mut to = path.as_os_str().to_owned();
    to.push(".corrupt");
    std::fs::rename(path, &to).map_err(io_err(path))
}

fn read_incarnation(dir: &Path, repair: bool) -> Result<u32, StorageError> {
    let path = dir.join("incarnation");
    match std::fs::read_to_string(&path) {
        Ok(text) => match text.trim().parse() {
            Ok(i) => Ok(i),
            Err(_) if repair => {
                tracing::warn!(path = %path.display(), "repair: ignoring an unreadable incarnation file");
                Ok(0)
            }
            Err(_) => Err(StorageError::Corrupt {
                path,
                offset: 0,
                why: "not an incarnation number".into(),
            }),
        },
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(0),
        Err(e) => Err(StorageError::Io { path, source: e }),
    }
}
