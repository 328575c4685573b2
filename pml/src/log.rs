//! Where a rank's warnings go: standard error, one line each, naming the
//! rank — `vpml: rank 1: refused a connection from 127.0.0.1:40112: …` —
//! filtered by `VPML_LOG` (as the `vpml` command is; `warn` by default).
//! Installed by [`crate::init`] in a process that `vpml run` or
//! `vpml replay` started, unless the program set a subscriber of its own.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Send this process's `tracing` events to standard error as rank `rank`
/// (incarnation `incarnation`), unless a subscriber is already set.
pub(crate) fn to_stderr(rank: usize, incarnation: u32) {
    if tracing::dispatcher::has_been_set() {
        return;
    }
    let filter = tracing_subscriber::EnvFilter::try_from_env("VPML_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Another thread may have set one meanwhile: then that one stays.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours on a terminal only: not as escape codes in a log file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .event_format(RankLine { rank, incarnation })
        .try_init();
}

/// One line per event: `vpml: rank R: MESSAGE fields`, with the
/// incarnation when it is not the first and the level when it is not a
/// warning.
struct RankLine {
    rank: usize,
    incarnation: u32,
}

impl<S, N> FormatEvent<S, N> for RankLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        write!(w, "vpml: rank {}", self.rank)?;
        if self.incarnation > 0 {
            write!(w, " (incarnation {})", self.incarnation)?;
        }
        match *event.metadata().level() {
            Level::WARN => write!(w, ": ")?,
            Level::ERROR => write!(w, ": error: ")?,
            level => write!(w, ": {}: ", level.as_str().to_lowercase())?,
        }
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}
