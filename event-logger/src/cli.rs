//! `vpml event-logger`: runs a logger until SIGTERM or SIGINT.

use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::auth::Tokens;
use crate::server::{Server, ServerConfig};
use crate::storage::{DEFAULT_SEGMENT_BYTES, Durability};

/// Options of `vpml event-logger`.
#[derive(clap::Args, Debug, Clone)]
pub struct EventLoggerArgs {
    /// Address to listen on; the bound address is printed on stdout as one
    /// line (`HOST:PORT`) once the logger accepts connections.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Serve on this inherited listening TCP socket instead of `--listen`
    /// (what `vpml run` does, so a restarted logger keeps its address).
    #[arg(long, value_name = "FD", conflicts_with = "listen")]
    pub listen_fd: Option<i32>,
    /// Directory holding the logs (created if missing).
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
    /// File of `JOB TOKEN` lines naming the jobs served. Default:
    /// DIR/tokens, created with a random token for any job (`* TOKEN`) if
    /// it does not exist.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Acknowledge puts after `write` (survives a logger crash) or after a
    /// group-committed `fsync` (survives a machine crash).
    #[arg(long, value_enum, default_value = "write")]
    pub durability: Durability,
    /// Cut logs at a corrupt record (keeping what precedes it) instead of
    /// refusing to start.
    #[arg(long)]
    pub repair: bool,
    /// Size in bytes at which a segment file is closed and a new one started.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_SEGMENT_BYTES)]
    pub segment_bytes: u64,
    /// Connections served at once; beyond, new ones are refused. At most
    /// 64 of them may be waiting for their `Hello` (a new one beyond
    /// closes the oldest), so strangers never fill the slots.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,
}

/// Runs the logger; errors are printed as one line on stderr.
pub fn run(args: EventLoggerArgs) -> ExitCode {
    match serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vpml event-logger: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(args: EventLoggerArgs) -> Result<(), String> {
    vpml_fault_points::arm_from_env("event logger")?;
    // With a file-size limit, a write past it must fail with EFBIG (an error
    // reply) rather than kill the logger with SIGXFSZ.
    // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions
    // and installs no handler code. Raw libc: rustix changes dispositions
    // only through its `runtime` module, behind the C library's back.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])
    .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&args.data_dir)
        .map_err(|e| {
            format!(
                "cannot create data directory {}: {e}",
                args.data_dir.display()
            )
        })?;
    let tokens = match &args.token_file {
        Some(path) => Tokens::load(path),
        None => Tokens::load_or_create(&args.data_dir.join("tokens")),
    }
    .map_err(|e| e.to_string())?;
    let mut cfg = ServerConfig::new(args.data_dir, tokens);
    cfg.listen = args.listen;
    cfg.durability = args.durability;
    cfg.repair = args.repair;
    cfg.segment_bytes = args.segment_bytes;
    cfg.max_connections = usize::try_from(args.max_connections).unwrap_or(usize::MAX);
    let server = match args.listen_fd {
        Some(fd) => Server::serve_on(cfg, inherited_listener(fd)?),
        None => Server::bind(cfg),
    }
    .map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", server.local_addr())
        .and_then(|()| out.flush())
        .map_err(|e| format!("cannot print the address: {e}"))?;
    drop(out);
    if let Some(sig) = signals.forever().next() {
        tracing::info!(signal = sig, "stopping");
    }
    server.shutdown();
    Ok(())
}

/// The listening TCP socket inherited as descriptor `fd`, checked to be one.
fn inherited_listener(fd: i32) -> Result<std::net::TcpListener, String> {
    use std::os::fd::{BorrowedFd, FromRawFd};
    let bad = |why: String| format!("--listen-fd {fd}: {why}");
    if fd < 0 {
        return Err(bad(
            std::io::Error::from(rustix::io::Errno::BADF).to_string()
        ));
    }
    // SAFETY: `fd` is not -1 (checked above), was inherited open for this
    // purpose and is only borrowed for this check (a number naming no
    // descriptor makes getsockopt fail with EBADF; one that is not a
    // socket, with ENOTSOCK).
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    match rustix::net::sockopt::socket_acceptconn(borrowed) {
        Ok(true) => {}
        Ok(false) => return Err(bad("not a listening socket".into())),
        Err(e) => return Err(bad(std::io::Error::from(e).to_string())),
    }
    // SAFETY: `fd` is an open listening socket (checked above) that this
    // process inherited for this purpose and nothing else owns.
    let listener = unsafe { std::net::TcpListener::from_raw_fd(fd) };
    listener
        .local_addr()
        .map_err(|e| bad(format!("not a TCP socket: {e}")))?;
    Ok(listener)
}
