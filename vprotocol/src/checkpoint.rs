//! Durable checkpoint files of one rank.
//!
//! A checkpoint is written to a temporary file, fsynced, renamed into place
//! and the directory fsynced, so a crash at any instant leaves either the
//! old or the new checkpoint, never a mix. The last two are kept: if the
//! newest turns out damaged when a rank restarts, it falls back to the
//! previous one (with a warning), which is why log garbage collection may
//! only free what precedes the *older* of the two.
//!
//! ## File format (version 4)
//!
//! `ckpt-<index>.vck`: a 40-byte header — magic `VPMLCKPT`, version (u32),
//! flags (u32, 0), checkpoint index (u64), payload length (u64), CRC-32C of
//! the payload (u32), CRC-32C of the first 36 header bytes (u32) — then the
//! payload. Integers are little-endian.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"VPMLCKPT";
const VERSION: u32 = 4;
const HEADER: usize = 40;
/// How many checkpoints are kept.
pub const KEPT: usize = 2;

/// Errors of the checkpoint store, naming the file concerned.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// A file operation failed (including a full disk).
    #[error("checkpoint {path}: {what}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// Every checkpoint present is damaged.
    #[error("no usable checkpoint in {dir}: {reasons}")]
    AllDamaged {
        /// The directory.
        dir: PathBuf,
        /// Why each was rejected.
        reasons: String,
    },
}

type Result<T> = std::result::Result<T, CheckpointError>;

fn io<'a>(
    path: &'a Path,
    what: &'static str,
) -> impl FnOnce(std::io::Error) -> CheckpointError + 'a {
    move |source| CheckpointError::Io {
        path: path.to_path_buf(),
        what,
        source,
    }
}

/// The checkpoints of one rank, in one directory.
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    dir: PathBuf,
}

/// A checkpoint read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// Its index (1, 2, 3, … in the order they were taken).
    pub index: u64,
    /// What was saved.
    pub payload: Vec<u8>,
    /// Why the newer checkpoints were skipped (each damaged file and what
    /// is wrong with it), if any were.
    pub skipped: Option<String>,
}

/// A checkpoint file's header after its magic.
struct Header {
    version: u32,
    index: u64,
    len: u64,
    payload_crc: u32,
    /// CRC-32C of the header's first 36 bytes.
    crc: u32,
}

impl Header {
    fn read(b: &[u8]) -> std::result::Result<Header, vpml_codec::Error> {
        let mut r = vpml_codec::Reader::new(b, "checkpoint header");
        let version = r.u32()?;
        let _reserved = r.u32()?;
        Ok(Header {
            version,
            index: r.u64()?,
            len: r.u64()?,
            payload_crc: r.u32()?,
            crc: r.u32()?,
        })
    }
}

impl CheckpointStore {
    /// The store in `dir` (created if missing).
    pub fn open(dir: &Path) -> Result<CheckpointStore> {
        std::fs::create_dir_all(dir).map_err(io(dir, "creating the checkpoint directory"))?;
        Ok(CheckpointStore {
            dir: dir.to_path_buf(),
        })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, index: u64) -> PathBuf {
        self.dir.join(format!("ckpt-{index:010}.vck"))
    }

    /// Indices of the checkpoint files present, oldest first.
    pub fn indices(&self) -> Result<Vec<u64>> {
        let mut v: Vec<u64> = std::fs::read_dir(&self.dir)
            .map_err(io(&self.dir, "listing checkpoints"))?
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_prefix("ckpt-")?
                    .strip_suffix(".vck")?
                    .parse()
                    .ok()
            })
            .collect();
        v.sort_unstable();
        Ok(v)
    }

    /// Save checkpoint `index` atomically, then delete all but the newest
    /// [`KEPT`].
    pub fn save(&self, index: u64, payload: &[u8]) -> Result<()> {
        use vpml_codec::{put_u32, put_u64};
        let mut h = Vec::with_capacity(HEADER);
        h.extend_from_slice(MAGIC);
        put_u32(&mut h, VERSION);
        put_u32(&mut h, 0);
        put_u64(&mut h, index);
        put_u64(&mut h, payload.len() as u64);
        put_u32(&mut h, vpml_sender_log::crc32c(payload));
        let crc = vpml_sender_log::crc32c(&h);
        put_u32(&mut h, crc);
        let final_path = self.path(index);
        let tmp = self.dir.join(format!(".ckpt-{index:010}.tmp"));
        {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)
                .map_err(io(&tmp, "creating"))?;
            f.write_all(&h).map_err(io(&tmp, "writing"))?;
            let (first, second) = payload.split_at(payload.len() / 2);
            f.write_all(first).map_err(io(&tmp, "writing"))?;
            vpml_fault_points::fault_point!("checkpoint.mid_write");
            f.write_all(second).map_err(io(&tmp, "writing"))?;
            f.sync_all().map_err(io(&tmp, "syncing"))?;
        }
        std::fs::rename(&tmp, &final_path).map_err(io(&final_path, "renaming into place"))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.dir, "syncing the directory"))?;
        let all = self.indices()?;
        for old in all.iter().take(all.len().saturating_sub(KEPT)) {
            let p = self.path(*old);
            std::fs::remove_file(&p).map_err(io(&p, "removing an old checkpoint"))?;
        }
        Ok(())
    }

    /// Checkpoint `index`'s file as stored (header and payload): what an
    /// off-host copy holds.
    pub fn file_bytes(&self, index: u64) -> Result<Vec<u8>> {
        let p = self.path(index);
        std::fs::read(&p).map_err(io(&p, "reading"))
    }

    /// Put `bytes` (from [`CheckpointStore::file_bytes`], possibly on
    /// another host) in place as checkpoint `index`. Loading checks them.
    pub fn install(&self, index: u64, bytes: &[u8]) -> Result<()> {
        let final_path = self.path(index);
        let tmp = self.dir.join(format!(".ckpt-{index:010}.tmp"));
        std::fs::write(&tmp, bytes).map_err(io(&tmp, "writing"))?;
        std::fs::rename(&tmp, &final_path).map_err(io(&final_path, "renaming into place"))
    }

    /// Remove the checkpoints numbered above `index` (newer than the one
    /// every rank restarts from: a later run must not mix them in).
    pub fn remove_newer_than(&self, index: u64) -> Result<()> {
        for i in self.indices()?.into_iter().filter(|&i| i > index) {
            let p = self.path(i);
            std::fs::remove_file(&p).map_err(io(&p, "removing"))?;
        }
        Ok(())
    }

    /// Checkpoint `index`'s payload, checked; why not (naming the file)
    /// if it is missing or damaged.
    pub fn read(&self, index: u64) -> std::result::Result<Vec<u8>, String> {
        let p = self.path(index);
        let bytes = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        payload_of(&bytes, index).map_err(|why| format!("{}: {why}", p.display()))
    }

    /// The newest intact checkpoint, falling back to older ones when the
    /// newest is damaged (`Loaded::skipped` says why); `None` if there is none.
    pub fn load_latest(&self) -> Result<Option<Loaded>> {
        let indices = self.indices()?;
        let mut reasons = Vec::new();
        for &index in indices.iter().rev() {
            match self.read(index) {
                Ok(payload) => {
                    // (The caller says it fell back, naming its rank.)
                    let skipped = (!reasons.is_empty()).then(|| reasons.join("; "));
                    return Ok(Some(Loaded {
                        index,
                        payload,
                        skipped,
                    }));
                }
                Err(why) => reasons.push(why),
            }
        }
        if reasons.is_empty() {
            Ok(None)
        } else {
            Err(CheckpointError::AllDamaged {
                dir: self.dir.clone(),
                reasons: reasons.join("; "),
            })
        }
    }
}

/// The payload of `bytes`, the whole file of checkpoint `index` (as
/// [`CheckpointStore::file_bytes`] returns it, or an off-host copy of
/// it), checked; why not.
pub fn payload_of(bytes: &[u8], index: u64) -> std::result::Result<Vec<u8>, String> {
    if bytes.len() < HEADER || &bytes[0..8] != MAGIC {
        return Err("not a checkpoint (bad magic)".into());
    }
    let header = Header::read(&bytes[8..HEADER]).map_err(|e| e.to_string())?;
    if vpml_sender_log::crc32c(&bytes[0..36]) != header.crc {
        return Err("header checksum mismatch".into());
    }
    if header.version != VERSION {
        return Err(format!("unsupported version {}", header.version));
    }
    if header.index != index || (bytes.len() - HEADER) as u64 != header.len {
        return Err("truncated or misnamed".into());
    }
    let payload = bytes[HEADER..].to_vec();
    if vpml_sender_log::crc32c(&payload) != header.payload_crc {
        return Err("payload checksum mismatch".into());
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(name: &str) -> CheckpointStore {
        let d = std::env::temp_dir().join(format!("vpml-ckpt-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        CheckpointStore::open(&d).unwrap()
    }

    #[test]
    fn the_newest_of_the_last_two_is_loaded() {
        let s = store("newest");
        assert_eq!(s.load_latest().unwrap(), None);
        for i in 1..=5u64 {
            s.save(i, &vec![i as u8; 1000 * i as usize]).unwrap();
        }
        assert_eq!(s.indices().unwrap(), vec![4, 5]);
        let l = s.load_latest().unwrap().unwrap();
        assert_eq!((l.index, l.payload.len(), l.skipped), (5, 5000, None));
        let _ = std::fs::remove_dir_all(&s.dir);
    }

    #[test]
    fn a_damaged_newest_checkpoint_falls_back_to_the_previous() {
        let s = store("fallback");
        s.save(1, b"first state").unwrap();
        s.save(2, b"second state").unwrap();
        let p = s.path(2);
        let mut b = std::fs::read(&p).unwrap();
        let last = b.len() - 1;
        b[last] ^= 0x40;
        std::fs::write(&p, &b).unwrap();
        let l = s.load_latest().unwrap().unwrap();
        assert_eq!((l.index, l.payload.as_slice()), (1, &b"first state"[..]));
        assert_eq!(
            l.skipped,
            Some(format!("{}: payload checksum mismatch", p.display()))
        );
        // Both damaged: an error naming the files.
        std::fs::write(s.path(1), b"garbage").unwrap();
        let err = s.load_latest().unwrap_err().to_string();
        assert!(
            err.contains("ckpt-0000000001.vck") && err.contains("ckpt-0000000002.vck"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&s.dir);
    }

    #[test]
    fn a_leftover_temporary_file_is_ignored() {
        let s = store("tmp");
        s.save(1, b"good").unwrap();
        std::fs::write(s.dir.join(".ckpt-0000000002.tmp"), b"half written").unwrap();
        assert_eq!(s.load_latest().unwrap().unwrap().payload, b"good");
        let _ = std::fs::remove_dir_all(&s.dir);
    }
}
