//! The spill writer: a thread that copies full segments from memory to
//! files on disk, so that their memory can take new records.
//!
//! The log hands it a segment's memory (shared, read-only from then on)
//! and goes on; the thread writes it to a temporary file, renames it into
//! place once complete (a `seg-*.vlog` in the spill directory is never a
//! partial copy) and reports back. It writes with `O_DIRECT` where the file
//! system allows: the device reads the memory itself, so the copy costs
//! the ranks' cores almost nothing and fills no page cache.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use memmap2::MmapMut;

/// A segment to copy: `len` bytes of `bytes` (a multiple of the page size,
/// as `O_DIRECT` wants) to `path`.
pub(crate) struct Job {
    pub(crate) index: u64,
    pub(crate) bytes: Arc<MmapMut>,
    pub(crate) len: usize,
    pub(crate) path: PathBuf,
}

/// A copy finished: segment `index`, and how it went.
pub(crate) struct Done {
    pub(crate) index: u64,
    pub(crate) result: std::io::Result<()>,
}

/// The thread and the channels to it.
pub(crate) struct SpillWriter {
    jobs: Option<Sender<Job>>,
    done: Receiver<Done>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SpillWriter {
    /// Start the thread (named after the rank, for debuggers).
    pub(crate) fn start(rank: u32) -> std::io::Result<SpillWriter> {
        let (jobs, todo) = crossbeam_channel::unbounded::<Job>();
        let (report, done) = crossbeam_channel::unbounded();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("vpml-spill-{rank}"))
            .spawn(move || {
                for job in todo {
                    if stopped.load(Ordering::Relaxed) {
                        break;
                    }
                    let result = write_copy(&job.path, &job.bytes[..job.len]);
                    // The memory is the log's again before it hears back.
                    drop(job.bytes);
                    if report
                        .send(Done {
                            index: job.index,
                            result,
                        })
                        .is_err()
                    {
                        break;
                    }
                }
            })?;
        Ok(SpillWriter {
            jobs: Some(jobs),
            done,
            stop,
            thread: Some(thread),
        })
    }

    /// Queue a copy.
    pub(crate) fn send(&self, job: Job) -> std::io::Result<()> {
        self.jobs
            .as_ref()
            .and_then(|j| j.send(job).ok())
            .ok_or_else(|| std::io::Error::other("the spill writer has stopped"))
    }

    /// A finished copy, if one is reported.
    pub(crate) fn try_done(&self) -> Option<Done> {
        self.done.try_recv().ok()
    }

    /// Wait for the next finished copy (`None` if the thread is gone).
    pub(crate) fn wait_done(&self) -> Option<Done> {
        self.done.recv().ok()
    }
}

impl SpillWriter {
    /// Stop the thread once the copy under way (if any) is done, skipping
    /// the queued ones, and return the copies it finished but did not
    /// report yet.
    pub(crate) fn finish(mut self) -> Vec<Done> {
        self.stop_thread();
        self.done.try_iter().collect()
    }

    fn stop_thread(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SpillWriter {
    fn drop(&mut self) {
        // Copies still queued are not wanted any more: the log is going.
        self.stop_thread();
    }
}

/// Write `bytes` to `path` through a temporary file renamed into place.
fn write_copy(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{}.tmp", name.unwrap_or_default()));
    let written = write_file(&tmp, bytes).and_then(|()| {
        vpml_fault_points::fault_point!("log.copy_written");
        std::fs::rename(&tmp, path)
    });
    vpml_fault_points::fault_point!("log.copy_named");
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Write `bytes` to a new file `path`: with `O_DIRECT` where the file
/// system takes it for these bytes, through the page cache otherwise.
fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let open = |flags| {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(flags)
            .mode(0o600)
            .open(path)
    };
    let einval = |e: &std::io::Error| e.raw_os_error() == Some(libc::EINVAL);
    match open(libc::O_DIRECT).and_then(|mut f| f.write_all(bytes)) {
        // tmpfs and some others take no O_DIRECT, and none takes a length
        // that is not a multiple of its block size (a segment adopted from
        // a checkpoint's copy may end anywhere).
        Err(e) if einval(&e) => open(0)?.write_all(bytes),
        other => other,
    }
}
