//! Running MPI C programs on vpml's MPICH-ABI library.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Error, protocol};

/// For an MPI C program (`--mpi-abi`, or a program that links MPICH's
/// `libmpich.so.12`): a directory where `libmpich.so.12` and
/// `libmpi.so.12` are vpml's MPICH-ABI library, to put first on the ranks'
/// loader path.
/// `who` names the command in the line that says so. The caller removes
/// the directory when the job ends.
pub(crate) fn mpi_abi_dir(
    force: bool,
    program: &Path,
    job_id: &str,
    who: &str,
    verbose: bool,
) -> Result<Option<PathBuf>, Error> {
    // A substring search (SIMD) over the file: no ELF parsing needed, and
    // fast enough that the job's start does not notice it.
    let linked = std::fs::read(program)
        .map(|b| {
            memchr::memmem::find(&b, b"libmpich.so.12").is_some()
                || memchr::memmem::find(&b, b"libmpi.so.12").is_some()
        })
        .unwrap_or(false);
    if !force && !linked {
        return Ok(None);
    }
    let lib = mpi_library().map_err(|e| Error::MpiProgram {
        program: program.to_path_buf(),
        source: Box::new(e),
    })?;
    // Named by our pid, so that the next run removes it if we are killed.
    protocol::remove_stale_dirs(&std::env::temp_dir(), MPI_LINKS_PREFIX, verbose);
    let links =
        std::env::temp_dir().join(format!("{MPI_LINKS_PREFIX}{}-{job_id}", std::process::id()));
    std::fs::create_dir_all(&links).map_err(Error::io(&links))?;
    for name in ["libmpich.so.12", "libmpi.so.12"] {
        let link = links.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&lib, &link).map_err(Error::io(&link))?;
    }
    if verbose {
        eprintln!(
            "{who}: {} runs on vpml's MPI library ({})",
            program.display(),
            lib.display()
        );
    }
    Ok(Some(links))
}

/// `vpml replay`'s way to run an MPI C program on vpml's MPI library
/// (`vpml_replay::recording::MpiSetup`): if `program` is an MPI program,
/// puts the library first on `cmd`'s loader path and returns the directory
/// (named after `name`) to remove when the program is done.
pub fn mpi_abi_setup(
    cmd: &mut Command,
    program: &Path,
    name: &str,
) -> Result<Option<PathBuf>, Error> {
    let dir = mpi_abi_dir(false, program, name, "vpml replay", false)?;
    if let Some(dir) = &dir {
        cmd.env("LD_LIBRARY_PATH", loader_path_with(dir));
    }
    Ok(dir)
}

/// Prefix of the temporary directories of [`mpi_abi_dir`]:
/// `<prefix><launcher pid>-<job>`.
const MPI_LINKS_PREFIX: &str = "vpml-mpi-";

/// `LD_LIBRARY_PATH` with `dir` first.
pub(crate) fn loader_path_with(dir: &Path) -> String {
    match std::env::var("LD_LIBRARY_PATH") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", dir.display()),
        _ => dir.display().to_string(),
    }
}

/// vpml's MPICH-ABI library (`libvpml_mpich.so`), found next to the
/// `vpml` binary or in its `deps/` directory (where `cargo test` builds
/// it), the newer of the two.
pub fn mpi_library() -> Result<PathBuf, Error> {
    let exe = std::env::current_exe().map_err(Error::CurrentExe)?;
    let dir = exe.parent().ok_or(Error::NoExeDir)?;
    // Both may exist in a cargo target directory (`cargo build -p
    // vpml-mpi-abi` writes the first, `cargo test` only the second): the
    // newer one is the current build.
    [
        dir.join("libvpml_mpich.so"),
        dir.join("deps").join("libvpml_mpich.so"),
    ]
    .into_iter()
    .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
    .max_by_key(|(modified, _)| *modified)
    .map(|(_, p)| p)
    .ok_or_else(|| Error::NoMpiLibrary { exe: exe.clone() })
}
