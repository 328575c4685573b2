//! Forwarding the ranks' output: line by line, tagged with the rank on
//! request, and without the lines a restarted rank prints again.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex};

use vpml_pml::bootstrap::{CHECKPOINT_MARK, RESTART_MARK};

/// What a rank printed on stdout over all its incarnations.
#[derive(Default)]
struct RankOutput {
    /// Bytes of the rank's own output forwarded so far.
    total: u64,
    /// `total` when each checkpoint was taken.
    at_checkpoint: std::collections::HashMap<u64, u64>,
    /// Bytes a restarted process prints again before its new output.
    skip: u64,
    /// The forwarder of the previous process's stdout (finished first).
    previous: Option<std::thread::JoinHandle<()>>,
}

/// Every rank's output, printed line by line by the launcher (from local
/// pipes or from agents). A rank's stdout carries the marks of
/// [`vpml_pml::bootstrap::CHECKPOINT_MARK`]: a restarted process's output
/// is dropped until it has re-printed what was printed after the
/// checkpoint it restarted from.
pub(crate) struct Outputs {
    ranks: Vec<Mutex<RankOutput>>,
    tag: bool,
}

impl Outputs {
    pub(crate) fn new(n: usize, tag: bool) -> Outputs {
        Outputs {
            ranks: (0..n).map(|_| Mutex::new(RankOutput::default())).collect(),
            tag,
        }
    }

    fn state(&self, rank: usize) -> Option<std::sync::MutexGuard<'_, RankOutput>> {
        self.ranks
            .get(rank)
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub(crate) fn take_previous_of(&self, rank: usize) -> Option<std::thread::JoinHandle<()>> {
        self.state(rank)?.previous.take()
    }

    pub(crate) fn set_previous(&self, rank: usize, h: std::thread::JoinHandle<()>) {
        if let Some(mut st) = self.state(rank) {
            st.previous = Some(h);
        }
    }

    pub(crate) fn take_previous(&self) -> Vec<std::thread::JoinHandle<()>> {
        (0..self.ranks.len())
            .filter_map(|r| self.take_previous_of(r))
            .collect()
    }

    /// One line (with its newline, unless the stream ended without one).
    pub(crate) fn emit(&self, rank: usize, is_err: bool, line: &[u8]) {
        if !is_err {
            let Some(mut st) = self.state(rank) else {
                return;
            };
            let text = String::from_utf8_lossy(line);
            let mark = |m: &str| {
                text.strip_prefix(m)
                    .and_then(|r| r.trim_end().strip_suffix(']'))
                    .and_then(|n| n.parse::<u64>().ok())
            };
            if let Some(i) = mark(CHECKPOINT_MARK) {
                let total = st.total;
                st.at_checkpoint.insert(i, total);
                return;
            }
            if let Some(i) = mark(RESTART_MARK) {
                let from = if i == 0 {
                    0
                } else {
                    st.at_checkpoint.get(&i).copied().unwrap_or(st.total)
                };
                st.skip = st.total.saturating_sub(from);
                st.total = from;
                return;
            }
            let n = line.len() as u64;
            st.total += n;
            if st.skip >= n {
                st.skip -= n;
                return;
            }
            st.skip = 0;
        }
        let mut out: Box<dyn Write> = if is_err {
            Box::new(std::io::stderr().lock())
        } else {
            Box::new(std::io::stdout().lock())
        };
        if self.tag {
            let _ = write!(out, "[{rank}] ");
        }
        let _ = out.write_all(line);
        if !line.ends_with(b"\n") {
            let _ = out.write_all(b"\n");
        }
        let _ = out.flush();
    }
}

/// Forward one output stream of a local rank line by line (stdout after
/// the previous process's stdout has been forwarded whole).
pub(crate) fn forward(
    stream: impl Read + Send + 'static,
    outputs: Arc<Outputs>,
    rank: usize,
    is_err: bool,
    previous: Option<std::thread::JoinHandle<()>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        if let Some(h) = previous {
            let _ = h.join();
        }
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => outputs.emit(rank, is_err, &line),
            }
        }
    })
}
