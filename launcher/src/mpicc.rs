//! `vpml mpicc`: build MPI C programs for vpml without an MPI installed.
//!
//! Runs the C compiler (`$VPML_CC`, else `cc`) with vpml's own `mpi.h`
//! (MPICH's ABI, written for vpml) and `vpml_ext.h` on the include path and, when linking,
//! vpml's MPI library, which answers to `libmpich.so.12`. The program then
//! runs under `vpml run` (which puts vpml's library first on its loader
//! path), and also on MPICH.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use crate::Error;

/// vpml's headers: `mpi.h` and `vpml_ext.h`.
const HEADERS: [(&str, &str); 2] = [
    ("mpi.h", include_str!("../../mpi-abi/include/mpi.h")),
    (
        "vpml_ext.h",
        include_str!("../../mpi-abi/include/vpml_ext.h"),
    ),
];

/// Arguments of `vpml mpicc`: everything is passed to the C compiler.
#[derive(clap::Args, Debug)]
pub struct MpiccArgs {
    /// Compiler arguments (sources, -o, -O2, -c, ...).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// A directory holding vpml's headers (written once per version of them).
fn include_dir() -> Result<PathBuf, Error> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    let mut digest = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    for (_, text) in HEADERS {
        digest.update(text.as_bytes());
    }
    let crc = digest.finalize() as u32;
    let dir = base
        .join("vpml")
        .join(format!("include-{}-{crc:08x}", env!("CARGO_PKG_VERSION")));
    std::fs::create_dir_all(&dir).map_err(Error::io(&dir))?;
    for (name, text) in HEADERS {
        let header = dir.join(name);
        if std::fs::read_to_string(&header).is_ok_and(|h| h == text) {
            continue;
        }
        // Written whole, then renamed: concurrent builds never see half.
        let tmp = dir.join(format!(".{name}.{}", std::process::id()));
        std::fs::write(&tmp, text).map_err(Error::io(&tmp))?;
        std::fs::rename(&tmp, &header).map_err(Error::io(&header))?;
    }
    Ok(dir)
}

/// The compiler command for `args`.
pub fn command(args: &[String]) -> Result<Command, Error> {
    let cc = std::env::var("VPML_CC").unwrap_or_else(|_| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.arg("-I").arg(include_dir()?);
    cmd.args(args);
    let links = !args
        .iter()
        .any(|a| matches!(a.as_str(), "-c" | "-E" | "-S" | "-M" | "-MM"));
    if links {
        cmd.arg(crate::mpi_library()?);
    }
    Ok(cmd)
}

/// Entry point of `vpml mpicc`.
pub fn mpicc_main(args: MpiccArgs) -> ExitCode {
    if args.args.is_empty() {
        eprintln!("vpml mpicc: no input (e.g. `vpml mpicc -O2 prog.c -o prog`)");
        return ExitCode::from(2);
    }
    let mut cmd = match command(&args.args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("vpml mpicc: {e}");
            return ExitCode::from(2);
        }
    };
    match cmd.status() {
        Ok(st) if st.success() => ExitCode::SUCCESS,
        Ok(st) => ExitCode::from(st.code().unwrap_or(1).clamp(1, 255) as u8),
        Err(e) => {
            eprintln!(
                "vpml mpicc: cannot run {:?}: {e} (set VPML_CC to your C compiler)",
                cmd.get_program()
            );
            ExitCode::from(2)
        }
    }
}
