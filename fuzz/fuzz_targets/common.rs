//! What the file-reading targets share: a scratch directory of their own
//! (in memory when /dev/shm exists), emptied before each input, and named
//! after the target only, so that runs reuse it instead of leaving one
//! each behind (one process per target at a time).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The directory of `target`, emptied: the input's files go in it.
pub fn scratch(target: &str) -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        base.join(format!("vpml-fuzz-{target}"))
    });
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("scratch directory");
    dir
}
