//! The files behind the C library's windows in shared memory
//! (`MPI_Win_allocate_shared`, and `MPI_Win_allocate` when it makes a
//! direct window).
//!
//! Such a window's memory is one file in `/dev/shm` that the first member
//! makes and the others open by name; the first member unlinks it once
//! every member mapped it. A rank killed in between leaves it behind, so
//! the names carry the job id, and the launcher and its agents remove what
//! a job left ([`remove_window_files`]) when it ends (a launcher killed
//! with SIGKILL cannot).

use std::path::{Path, PathBuf};

/// The directory of the window files.
pub const WINDOW_FILE_DIR: &str = "/dev/shm";

/// The path of window file `n` that process `pid` of job `job_id` makes.
pub fn window_file_path(job_id: &str, pid: u32, n: u64) -> PathBuf {
    Path::new(WINDOW_FILE_DIR).join(format!("{}{pid}-{n}", prefix(job_id)))
}

/// The name prefix of job `job_id`'s window files: of the id, only ASCII
/// letters, digits and `_` (the launcher's ids are hex), so that no id
/// makes a path outside the directory.
fn prefix(job_id: &str) -> String {
    let id: String = job_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    format!("vpml-win-{id}-")
}

/// Remove the window files job `job_id` left; the number removed.
pub fn remove_window_files(job_id: &str) -> usize {
    remove_in(Path::new(WINDOW_FILE_DIR), job_id)
}

/// [`remove_window_files`] in `dir`.
fn remove_in(dir: &Path, job_id: &str) -> usize {
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

    /// The sweep takes the job's files and leaves another job's, whose id
    /// starts the same.
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
        assert_eq!(remove_in(dir.path(), "ab12"), 2);
        assert!(mine.iter().all(|p| !p.exists()));
        assert!(other.exists(), "another job's file was removed");
    }

    /// An id cannot lead out of the directory.
    #[test]
    fn a_job_id_with_a_slash_stays_in_the_directory() {
        let p = window_file_path("../a/b", 1, 2);
        assert_eq!(p, Path::new(WINDOW_FILE_DIR).join("vpml-win-ab-1-2"));
    }
}
