//! Durable storage: per job and rank, append-only segment files of
//! checksummed records (layout in the crate documentation).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::event::{EventBatch, EventId, validate};
use crate::wire::MAX_FRAME;

/// First bytes of every stored record.
pub const RECORD_MAGIC: [u8; 4] = *b"VPLR";
/// Version of the record layout.
pub const RECORD_VERSION: u16 = 2;
/// Size of a record header.
pub const RECORD_HEADER_LEN: usize = 36;
/// Default size at which a rank's active segment is closed and a new one
/// started.
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 << 20;

/// When a logger acknowledges a put.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Durability {
    /// After the records are written to the file (`write(2)`): survives a
    /// crash of the logger, not of the machine.
    Write,
    /// After a group-committed `fdatasync`: survives a machine crash.
    Fsync,
}

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A record in the middle of a log is damaged.
    #[error(
        "{path}: corrupt record at offset {offset}: {why} (start with --repair to cut the log there)"
    )]
    Corrupt {
        /// The segment file.
        path: PathBuf,
        /// Byte offset of the damaged record.
        offset: u64,
        /// What is wrong.
        why: String,
    },
    /// The rank's log is unusable after an earlier failure.
    #[error("log of this rank failed earlier: {0}")]
    Failed(String),
    /// A put would leave a gap in the ids.
    #[error(
        "events starting at id {first} would leave a gap after the highest stored id {highest}"
    )]
    Gap {
        /// First id of the put.
        first: EventId,
        /// Highest stored id.
        highest: EventId,
    },
    /// A newer incarnation of the rank exists.
    #[error("incarnation {incarnation} is stale: incarnation {current} has connected")]
    Stale {
        /// Incarnation of the request.
        incarnation: u32,
        /// Newest incarnation seen.
        current: u32,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StorageError + '_ {
    move |source| StorageError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Options of a [`Storage`].
#[derive(Debug, Clone)]
pub struct StorageConfig {
    /// Data directory.
    pub root: PathBuf,
    /// When puts are acknowledged.
    pub durability: Durability,
    /// Segment size limit.
    pub segment_bytes: u64,
    /// Cut logs at corrupt records instead of refusing to start.
    pub repair: bool,
}

/// One segment file.
#[derive(Debug)]
struct Segment {
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
    segments: Vec<Segment>,
    active: Arc<File>,
    highest: EventId,
    incarnation: u32,
    failed: Option<String>,
    durability: Durability,
    segment_bytes: u64,
    buf: Vec<u8>,
}

/// Fixed fields of a record header.
struct RecordHeader {
    len: u32,
    count: u32,
    first: EventId,
    last: EventId,
    crc: u32,
}

fn parse_record_header(h: &[u8; RECORD_HEADER_LEN]) -> Result<RecordHeader, String> {
    if h[0..4] != RECORD_MAGIC {
        return Err(format!("bad record magic {:02x?}", &h[0..4]));
    }
    let version = u16::from_le_bytes([h[4], h[5]]);
    if version != RECORD_VERSION {
        return Err(format!("unknown record version {version}"));
    }
    if h[6] != 0 || h[7] != 0 {
        return Err("reserved header bytes are not zero".into());
    }
    let u32_at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    let u64_at = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&h[i..i + 8]);
        u64::from_le_bytes(b)
    };
    let hdr = RecordHeader {
        len: u32_at(8),
        count: u32_at(12),
        first: u64_at(16),
        last: u64_at(24),
        crc: u32_at(32),
    };
    if hdr.len > MAX_FRAME {
        return Err(format!("record length {} exceeds {MAX_FRAME}", hdr.len));
    }
    if hdr.count == 0
        || hdr.first == 0
        || hdr.last.checked_sub(hdr.first) != Some(u64::from(hdr.count) - 1)
    {
        return Err(format!(
            "record header says {} events from {} to {}",
            hdr.count, hdr.first, hdr.last
        ));
    }
    Ok(hdr)
}

/// Checks a complete record's checksum and events.
fn check_record(
    head: &[u8; RECORD_HEADER_LEN],
    hdr: &RecordHeader,
    payload: &[u8],
) -> Result<(), String> {
    let crc = crate::bytes::crc32c(&[&head[..32], payload]);
    if crc != hdr.crc {
        return Err(format!(
            "checksum mismatch (stored {:#010x}, computed {crc:#010x})",
            hdr.crc
        ));
    }
    let first = validate(hdr.count, payload).map_err(|e| e.to_string())?;
    if first != hdr.first {
        return Err(format!(
            "header says first id {} but events start at {first}",
            hdr.first
        ));
    }
    Ok(())
}

fn encode_record(count: u32, first: EventId, events: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&RECORD_MAGIC);
    out.extend_from_slice(&RECORD_VERSION.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    // Records hold one put's events, which fit in a frame (< 4 GiB).
    out.extend_from_slice(&(events.len() as u32).to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&first.to_le_bytes());
    out.extend_from_slice(&(first + u64::from(count) - 1).to_le_bytes());
    let crc = crate::bytes::crc32c(&[&out[..32], events]);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(events);
}

/// Result of scanning one segment file.
struct Scan {
    /// Bytes of complete, valid records.
    valid_len: u64,
    /// Ids held (first, last) if any.
    ids: Option<(EventId, EventId)>,
    /// Where and why the scan stopped early.
    problem: Option<(u64, String, bool)>,
}

/// Reads the records of a segment. A damaged record is reported as
/// (offset, why, torn) where `torn` means it is the file's last record and
/// could be a write cut short by a crash.
fn scan_segment(path: &Path, expect_first: EventId) -> Result<Scan, StorageError> {
    let mut file = File::open(path).map_err(io_err(path))?;
    let file_len = file.metadata().map_err(io_err(path))?.len();
    let mut reader = std::io::BufReader::with_capacity(1 << 20, &mut file);
    let mut offset = 0u64;
    let mut ids: Option<(EventId, EventId)> = None;
    let mut payload = Vec::new();
    let mut next = expect_first;
    let stop = |offset: u64, why: String, torn: bool, ids| Scan {
        valid_len: offset,
        ids,
        problem: Some((offset, why, torn)),
    };
    while offset < file_len {
        let remaining = file_len - offset;
        if remaining < RECORD_HEADER_LEN as u64 {
            return Ok(stop(
                offset,
                format!("incomplete record header ({remaining} bytes)"),
                true,
                ids,
            ));
        }
        let mut head = [0u8; RECORD_HEADER_LEN];
        reader.read_exact(&mut head).map_err(io_err(path))?;
        let hdr = match parse_record_header(&head) {
            Ok(h) => h,
            Err(why) => {
                // A zero-filled tail is what a machine crash leaves behind
                // after the file size was extended but the data not written.
                let mut rest = Vec::new();
                reader.read_to_end(&mut rest).map_err(io_err(path))?;
                let zero = head.iter().chain(&rest).all(|&b| b == 0);
                return Ok(stop(offset, why, zero, ids));
            }
        };
        let end = offset + RECORD_HEADER_LEN as u64 + u64::from(hdr.len);
        if end > file_len {
            return Ok(stop(
                offset,
                format!("record of {} bytes runs past the end of the file", hdr.len),
                true,
                ids,
            ));
        }
        payload.resize(hdr.len as usize, 0);
        reader.read_exact(&mut payload).map_err(io_err(path))?;
        if let Err(why) = check_record(&head, &hdr, &payload) {
            return Ok(stop(offset, why, end == file_len, ids));
        }
        if hdr.first != next {
            return Ok(stop(
                offset,
                format!(
                    "record starts at id {} where {next} was expected",
                    hdr.first
                ),
                false,
                ids,
            ));
        }
        ids = Some((ids.map_or(hdr.first, |(f, _)| f), hdr.last));
        // A header passed the checks, so last < u64::MAX unless forged.
        next = hdr.last.saturating_add(1);
        offset = end;
    }
    Ok(Scan {
        valid_len: offset,
        ids,
        problem: None,
    })
}

fn sync_dir(path: &Path) -> Result<(), StorageError> {
    File::open(path)
        .and_then(|d| d.sync_all())
        .map_err(io_err(path))
}

fn open_append(path: &Path, create: bool) -> Result<File, StorageError> {
    OpenOptions::new()
        .append(true)
        .create_new(create)
        .open(path)
        .map_err(io_err(path))
}

impl RankLog {
    /// Rebuilds the log of a rank from its directory (created if missing).
    fn open(dir: &Path, cfg: &StorageConfig) -> Result<RankLog, StorageError> {
        let created = !dir.exists();
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        if created && cfg.durability == Durability::Fsync {
            for d in dir.ancestors().skip(1).take(3) {
                sync_dir(d)?;
            }
        }
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

    /// Records that `incarnation` connected; refuses older ones.
    pub(crate) fn admit(&mut self, incarnation: u32) -> Result<(), StorageError> {
        if incarnation < self.incarnation {
            return Err(StorageError::Stale {
                incarnation,
                current: self.incarnation,
            });
        }
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

/// Reads stored events with ids ≥ `from` from the files of a read plan,
/// handing them to `sink` one record at a time as (count, encoded events).
/// Every record is checked again (the files may have been damaged since
/// start-up).
pub(crate) fn read_events(
    plan: &[(PathBuf, u64, EventId)],
    from: EventId,
    mut sink: impl FnMut(u32, &[u8]) -> std::io::Result<()>,
) -> Result<(), StorageError> {
    let mut payload = Vec::new();
    for (path, len, _) in plan {
        let mut file = match File::open(path) {
            Ok(f) => f,
            // Truncated since the plan was made: those events are gone.
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(StorageError::Io {
                    path: path.clone(),
                    source: e,
                });
            }
        };
        let mut reader = std::io::BufReader::with_capacity(1 << 20, &mut file);
        let mut offset = 0u64;
        while offset < *len {
            let at = offset;
            let corrupt = move |why: String| StorageError::Corrupt {
                path: path.clone(),
                offset: at,
                why,
            };
            let mut head = [0u8; RECORD_HEADER_LEN];
            reader.read_exact(&mut head).map_err(io_err(path))?;
            let hdr = parse_record_header(&head).map_err(corrupt)?;
            payload.resize(hdr.len as usize, 0);
            reader.read_exact(&mut payload).map_err(io_err(path))?;
            check_record(&head, &hdr, &payload).map_err(corrupt)?;
            offset += (RECORD_HEADER_LEN + payload.len()) as u64;
            if hdr.last < from {
                continue;
            }
            let batch =
                EventBatch::parse(hdr.count, &payload).map_err(|e| corrupt(e.to_string()))?;
            let (count, bytes) = batch.suffix_from(from);
            sink(count, bytes).map_err(io_err(path))?;
        }
    }
    Ok(())
}

/// Every stored event of `job`/`rank` under the data directory `root`,
/// read offline (no server), in id order. A missing rank is an empty
/// list; damage is an error naming the file and offset.
pub fn read_stored_events(
    root: &Path,
    job: &str,
    rank: u32,
) -> Result<Vec<(EventId, crate::Event)>, StorageError> {
    let dir = root.join("jobs").join(job).join(rank.to_string());
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let cfg = StorageConfig {
        root: root.to_path_buf(),
        durability: Durability::Write,
        segment_bytes: DEFAULT_SEGMENT_BYTES,
        repair: false,
    };
    let log = RankLog::open(&dir, &cfg)?;
    let plan = log.read_plan(1);
    let mut out = Vec::new();
    let mut bad = None;
    read_events(&plan, 1, |count, bytes| {
        match EventBatch::parse(count, bytes) {
            Ok(b) => out.extend(b.events()),
            Err(e) => bad = Some(e.to_string()),
        }
        Ok(())
    })?;
    if let Some(why) = bad {
        return Err(StorageError::Corrupt {
            path: dir,
            offset: 0,
            why,
        });
    }
    Ok(out)
}

/// A rank's log, shared by its connections.
pub(crate) type SharedLog = Arc<Mutex<RankLog>>;

/// The logs of every job and rank under a data directory.
pub(crate) struct Storage {
    cfg: StorageConfig,
    ranks: Mutex<HashMap<(String, u32), SharedLog>>,
}

impl Storage {
    /// Opens a data directory and rebuilds every rank's log from its files.
    pub(crate) fn open(cfg: StorageConfig) -> Result<Storage, StorageError> {
        let jobs = cfg.root.join("jobs");
        std::fs::create_dir_all(&jobs).map_err(io_err(&jobs))?;
        let mut ranks = HashMap::new();
        for job in std::fs::read_dir(&jobs).map_err(io_err(&jobs))? {
            let job = job.map_err(io_err(&jobs))?;
            let name = job.file_name();
            let Some(job_name) = name.to_str().filter(|n| crate::auth::valid_job_name(n)) else {
                tracing::warn!(path = %job.path().display(), "ignoring an entry that is not a job directory");
                continue;
            };
            let job_dir = job.path();
            if !job_dir.is_dir() {
                continue;
            }
            for rank in std::fs::read_dir(&job_dir).map_err(io_err(&job_dir))? {
                let rank = rank.map_err(io_err(&job_dir))?;
                let r = rank
                    .file_name()
                    .to_str()
                    .and_then(|s| s.parse::<u32>().ok());
                let Some(r) = r.filter(|r| rank.file_name().to_str() == Some(&r.to_string()))
                else {
                    tracing::warn!(path = %rank.path().display(), "ignoring an entry that is not a rank directory");
                    continue;
                };
                let log = RankLog::open(&rank.path(), &cfg)?;
                tracing::debug!(
                    job = job_name,
                    rank = r,
                    highest = log.highest,
                    "rank log loaded"
                );
                ranks.insert((job_name.to_owned(), r), Arc::new(Mutex::new(log)));
            }
        }
        Ok(Storage {
            cfg,
            ranks: Mutex::new(ranks),
        })
    }

    /// Where the checkpoint copies of `job`/`rank` live (see
    /// [`crate::copies`]). `job` must be valid.
    pub(crate) fn copies_dir(&self, job: &str, rank: u32) -> PathBuf {
        self.cfg
            .root
            .join("jobs")
            .join(job)
            .join(rank.to_string())
            .join("copies")
    }

    /// The log of `job`/`rank`, created if new. `job` must be valid.
    pub(crate) fn rank(&self, job: &str, rank: u32) -> Result<Arc<Mutex<RankLog>>, StorageError> {
        let mut ranks = self.ranks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(log) = ranks.get(&(job.to_owned(), rank)) {
            return Ok(Arc::clone(log));
        }
        let dir = self.cfg.root.join("jobs").join(job).join(rank.to_string());
        let log = Arc::new(Mutex::new(RankLog::open(&dir, &self.cfg)?));
        ranks.insert((job.to_owned(), rank), Arc::clone(&log));
        Ok(log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;

    /// A fresh path (not created yet) under a temporary directory that
    /// goes away with the returned guard.
    fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
        let guard = tempfile::Builder::new()
            .prefix("vpml-el-storage-")
            .tempdir()
            .expect("a temporary directory");
        let p = guard.path().join(name);
        (guard, p)
    }

    fn cfg(root: &Path, seg: u64) -> StorageConfig {
        StorageConfig {
            root: root.to_owned(),
            durability: Durability::Write,
            segment_bytes: seg,
            repair: false,
        }
    }

    fn batch(first: EventId, n: u64) -> EventBatch {
        let mut b = EventBatch::new();
        for id in first..first + n {
            b.push(
                id,
                &Event::Match {
                    recv: id * 10,
                    source: 1,
                },
            )
            .unwrap();
        }
        b
    }

    fn stored(log: &RankLog, from: EventId) -> Vec<EventId> {
        let mut ids = Vec::new();
        read_events(&log.read_plan(from), from, |n, b| {
            ids.extend(
                EventBatch::parse(n, b)
                    .unwrap()
                    .events()
                    .into_iter()
                    .map(|(i, _)| i),
            );
            Ok(())
        })
        .unwrap();
        ids
    }

    #[test]
    fn append_is_idempotent_rotates_truncates_and_reloads() {
        let (_tmp, root) = tmp("basic");
        let s = Storage::open(cfg(&root, 200)).unwrap();
        let log = s.rank("j", 0).unwrap();
        let mut l = log.lock().unwrap();
        assert_eq!(l.append(&batch(1, 3), 0).unwrap().new_events, 3);
        assert_eq!(l.append(&batch(2, 3), 0).unwrap().new_events, 1);
        assert_eq!(l.append(&batch(1, 2), 0).unwrap().new_events, 0);
        assert!(matches!(
            l.append(&batch(9, 1), 0),
            Err(StorageError::Gap { .. })
        ));
        for i in 0..10 {
            l.append(&batch(5 + i * 2, 2), 0).unwrap();
        }
        assert_eq!(l.highest(), 24);
        assert!(l.segments.len() > 3, "segments: {}", l.segments.len());
        assert_eq!(stored(&l, 1), (1..=24).collect::<Vec<_>>());
        assert_eq!(stored(&l, 20), (20..=24).collect::<Vec<_>>());
        let before = l.segments.len();
        let (files, _) = l.truncate(12).unwrap();
        assert!(files > 0);
        assert_eq!(l.segments.len(), before - files as usize);
        assert!(l.first_kept() <= 13 && l.first_kept() > 1);
        drop(l);
        drop(s);
        let s = Storage::open(cfg(&root, 200)).unwrap();
        let l = s.rank("j", 0).unwrap();
        let l = l.lock().unwrap();
        assert_eq!(l.highest(), 24);
        let kept = stored(&l, 1);
        assert_eq!(*kept.last().unwrap(), 24);
        assert!(kept[0] <= 13);
        drop(l);
        let l = s.rank("j", 0).unwrap();
        let mut l = l.lock().unwrap();
        let (files, _) = l.truncate(100).unwrap();
        assert!(files > 0);
        assert_eq!(l.first_kept(), 0);
        assert_eq!(l.highest(), 24);
        assert_eq!(l.append(&batch(25, 1), 0).unwrap().highest, 25);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn stale_incarnations_are_refused() {
        let (_tmp, root) = tmp("inc");
        let s = Storage::open(cfg(&root, 1 << 20)).unwrap();
        let log = s.rank("j", 3).unwrap();
        let mut l = log.lock().unwrap();
        l.admit(2).unwrap();
        assert!(matches!(l.admit(1), Err(StorageError::Stale { .. })));
        assert!(matches!(
            l.append(&batch(1, 1), 1),
            Err(StorageError::Stale { .. })
        ));
        drop(l);
        drop(s);
        let s = Storage::open(cfg(&root, 1 << 20)).unwrap();
        let log = s.rank("j", 3).unwrap();
        assert!(log.lock().unwrap().admit(1).is_err());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
