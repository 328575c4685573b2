//! Off-host copies of ranks' checkpoints: what a rank needs to restart on
//! another host when its own host is lost (its checkpoint, and the sender
//! log records that checkpoint keeps for its peers), stored as opaque
//! bytes next to the rank's events.
//!
//! Layout: `jobs/<job>/<rank>/copies/copy-<index>` (20 digits), written as
//! `copy-<index>.part` and renamed when complete; the newest [`KEPT`] are
//! kept. A part sent again (after a reconnect) replaces what followed its
//! offset, so saving is idempotent.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::storage::StorageError;

/// Copies kept per rank (as the rank keeps its last two checkpoints).
pub const KEPT: usize = 2;

/// Largest part a [`read_part`] returns.
pub const PART_BYTES: usize = 1 << 20;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StorageError + '_ {
    move |source| StorageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn name(index: u64) -> String {
    format!("copy-{index:020}")
}

/// Where a logger whose data directory is `root` keeps the copies of
/// `job`/`rank` (`job` must be valid).
pub fn dir_of(root: &Path, job: &str, rank: u32) -> PathBuf {
    root.join("jobs")
        .join(job)
        .join(rank.to_string())
        .join("copies")
}

/// The whole of copy `index` in `dir`; `None` if there is no such copy.
pub fn read_whole(dir: &Path, index: u64) -> Result<Option<Vec<u8>>, StorageError> {
    let path = dir.join(name(index));
    match std::fs::read(&path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(&path)(e)),
    }
}

/// Remove the copies in `dir` numbered above `index` (a restart from
/// global checkpoint `index` takes their numbers again).
pub fn remove_newer_than(dir: &Path, index: u64) -> Result<(), StorageError> {
    for i in indices(dir)?.into_iter().filter(|&i| i > index) {
        let p = dir.join(name(i));
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(&p)(e)),
            _ => {}
        }
    }
    Ok(())
}

/// The indices of the complete copies in `dir`, oldest first.
pub fn indices(dir: &Path) -> Result<Vec<u64>, StorageError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(dir)(e)),
    };
    let mut v: Vec<u64> = entries
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("copy-"))
                .filter(|n| n.len() == 20)
                .and_then(|n| n.parse().ok())
        })
        .collect();
    v.sort_unstable();
    Ok(v)
}

/// Store `bytes` at `offset` of copy `index` in `dir`; with `last`, the
/// copy is complete and older ones but [`KEPT`]` - 1` are removed.
pub fn write_part(
    dir: &Path,
    index: u64,
    offset: u64,
    bytes: &[u8],
    last: bool,
) -> Result<(), StorageError> {
    if index == 0 {
        return Err(StorageError::Io {
            path: dir.to_path_buf(),
            source: std::io::Error::other("checkpoint copy 0 (copies are numbered from 1)"),
        });
    }
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let part: PathBuf = dir.join(format!("{}.part", name(index)));
    let done = dir.join(name(index));
    if last && !part.exists() && ends_with(&done, offset, bytes) {
        // The last part again (its answer was lost with the connection):
        // the copy is complete already.
        return Ok(());
    }
    if offset == 0 {
        // A copy starts: parts of copies that never completed go.
        for e in std::fs::read_dir(dir).map_err(io(dir))?.flatten() {
            if e.file_name().to_str().is_some_and(|n| n.ends_with(".part")) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(offset == 0)
        .open(&part)
        .map_err(io(&part))?;
    let len = f.metadata().map_err(io(&part))?.len();
    if len < offset {
        return Err(StorageError::Io {
            path: part,
            source: std::io::Error::other(format!(
                "a part at offset {offset}, but only {len} bytes are stored"
            )),
        });
    }
    f.set_len(offset).map_err(io(&part))?;
    f.seek(SeekFrom::Start(offset)).map_err(io(&part))?;
    f.write_all(bytes).map_err(io(&part))?;
    if !last {
        return Ok(());
    }
    f.sync_all().map_err(io(&part))?;
    std::fs::rename(&part, &done).map_err(io(&done))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))?;
    let all = indices(dir)?;
    for old in all.iter().take(all.len().saturating_sub(KEPT)) {
        let p = dir.join(name(*old));
        std::fs::remove_file(&p).map_err(io(&p))?;
    }
    Ok(())
}

/// Is `path` exactly `offset + bytes.len()` long, ending with `bytes`?
fn ends_with(path: &Path, offset: u64, bytes: &[u8]) -> bool {
    let Ok(mut f) = File::open(path) else {
        return false;
    };
    if f.metadata().map(|m| m.len()).ok() != Some(offset + bytes.len() as u64) {
        return false;
    }
    let mut stored = vec![0; bytes.len()];
    f.seek(SeekFrom::Start(offset)).is_ok() && f.read_exact(&mut stored).is_ok() && stored == bytes
}

/// Bytes `offset..` (at most [`PART_BYTES`]) of copy `index` in `dir`
/// (0: the newest) with the copy's index and length; `None` if there is
/// no such copy.
pub fn read_part(
    dir: &Path,
    index: u64,
    offset: u64,
) -> Result<Option<(u64, u64, Vec<u8>)>, StorageError> {
    let index = match index {
        0 => match indices(dir)?.last() {
            Some(&i) => i,
            None => return Ok(None),
        },
        i => i,
    };
    let path = dir.join(name(index));
    let mut f = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path)(e)),
    };
    let total = f.metadata().map_err(io(&path))?.len();
    let want = total.saturating_sub(offset).min(PART_BYTES as u64) as usize;
    let mut bytes = vec![0; want];
    f.seek(SeekFrom::Start(offset.min(total)))
        .map_err(io(&path))?;
    f.read_exact(&mut bytes).map_err(io(&path))?;
    Ok(Some((index, total, bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_read_back_whole_and_only_the_newest_two_stay() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("copies");
        assert!(read_part(&dir, 0, 0).unwrap().is_none());
        for index in 1..=3u64 {
            let body: Vec<u8> = (0..3000u32).map(|i| (i as u64 * index) as u8).collect();
            write_part(&dir, index, 0, &body[..1000], false).unwrap();
            // A part sent again after a reconnect replaces itself.
            write_part(&dir, index, 1000, &body[1000..2000], false).unwrap();
            write_part(&dir, index, 1000, &body[1000..2000], false).unwrap();
            // Not readable before it is complete.
            assert!(read_part(&dir, index, 0).unwrap().is_none());
            write_part(&dir, index, 2000, &body[2000..], true).unwrap();
            let (i, total, bytes) = read_part(&dir, 0, 0).unwrap().unwrap();
            assert_eq!((i, total, bytes), (index, 3000, body));
        }
        assert_eq!(indices(&dir).unwrap(), vec![2, 3]);
        assert!(read_part(&dir, 1, 0).unwrap().is_none());
        assert_eq!(read_part(&dir, 3, 2999).unwrap().unwrap().2.len(), 1);
    }

    #[test]
    fn a_part_past_the_stored_end_is_refused() {
        let d = tempfile::tempdir().unwrap();
        write_part(d.path(), 1, 0, b"abc", false).unwrap();
        let err = write_part(d.path(), 1, 10, b"x", true).unwrap_err();
        assert!(err.to_string().contains("only 3 bytes are stored"), "{err}");
        assert!(write_part(d.path(), 0, 0, b"x", true).is_err());
    }

    #[test]
    fn the_last_part_sent_again_after_a_reconnect_is_accepted() {
        let d = tempfile::tempdir().unwrap();
        write_part(d.path(), 4, 0, b"abc", false).unwrap();
        write_part(d.path(), 4, 3, b"def", true).unwrap();
        write_part(d.path(), 4, 3, b"def", true).unwrap();
        assert_eq!(read_part(d.path(), 0, 0).unwrap().unwrap().2, b"abcdef");
        // A new copy under the same number (a rank that fell back to an
        // older checkpoint) replaces it, even at the same length.
        write_part(d.path(), 4, 0, b"ABCDEF", true).unwrap();
        assert_eq!(read_part(d.path(), 0, 0).unwrap().unwrap().2, b"ABCDEF");
        // A copy that never completed is dropped when the next one starts.
        write_part(d.path(), 5, 0, b"xy", false).unwrap();
        write_part(d.path(), 6, 0, b"z", true).unwrap();
        assert!(!d.path().join(format!("{}.part", name(5))).exists());
    }
}
