//! The files behind `MPI_Win_allocate_shared` windows.
//!
//! Such a window's memory is one file in `/dev/shm` that the first member
//! makes and the others open by name; the first member unlinks it once
//! every member mapped it. A rank killed in between leaves it behind, so
//! the names carry the job id and the launcher removes what a job left
//! ([`remove_window_files`]) when it ends.

use std::path::{Path, PathBuf};

/// The directory of the window files.
pub const WINDOW_FILE_DIR: &str = "/dev/shm";

/// The path of window file `n` that process `pid` of job `job_id` makes.
pub fn window_file_path(job_id: &str, pid: u32, n: u64) -> PathBuf {
    Path::new(WINDOW_FILE_DIR).join(format!("{}{pid}-{n}", prefix(job_id)))
}

/// The name prefix of job `job_id`'s window files.
fn prefix(job_id: &str) -> String {
    format!("vpml-win-{job_id}-")
}

/// Remove the window files job `job_id` left in `dir` (normally
/// [`WINDOW_FILE_DIR`]); the number removed.
pub fn remove_window_files(dir: &Path, job_id: &str) -> usize {
    let prefix = prefix(job_id);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_jobs_own_window_files_are_removed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let name = |p: PathBuf| dir.path().join(p.file_name().expect("a file name"));
        let mine = [
            name(window_file_path("ab12", 7, 0)),
            name(window_file_path("ab12", 9, 3)),
        ];
        let other = name(window_file_path("ab123", 7, 0));
        for p in mine.iter().chain([&other]) {
            std::fs::write(p, b"x").expect("write");
        }
        assert_eq!(remove_window_files(dir.path(), "ab12"), 2);
        assert!(mine.iter().all(|p| !p.exists()));
        assert!(other.exists(), "another job's file was removed");
    }
}
