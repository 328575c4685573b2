//! The pessimist protocol (seed 002, made complete): failure-free path.
//!
//! * **Events.** Only non-deterministic outcomes become events, each named
//!   by the call id of the call it belongs to (never by a request slot):
//!   `Match` when a receive posted with ANY_SOURCE matches; `Delivery` with
//!   the completed request ids for `test`, `test_any`, `test_some`,
//!   `test_all`, `wait_any`, `wait_some` (unless every completed request is
//!   a send that completed when it started — that answer is determined);
//!   `Probe` for every `iprobe` and for `probe` with ANY_SOURCE; `Cancel`
//!   for `cancel` of a receive. Consecutive unsuccessful tests and iprobes
//!   are one lazy `NoneRun`: dropped if a later call of the run succeeds
//!   before anything was flushed, otherwise logged before the next send.
//! * **Commit rule.** Events are batched and pipelined to the loggers by
//!   the client; before an application message leaves, every event created
//!   before it must be durable. A send with no event pending pays nothing.
//! * **Sender-based log.** Every payload is appended to the rank's
//!   memory-mapped sender log before it is transmitted, and the transport
//!   sends from the log: a standard send completes once its payload is in
//!   the log, and a large message is copied by the receiver straight out of
//!   the log (no copy beyond the log's own).

use std::path::PathBuf;
use std::time::Instant;

use vpml_event_logger::{Client, ClientConfig, Event};
use vpml_pml::bootstrap::JobEnv;
use vpml_pml::matching::RecvSpec;
use vpml_pml::protocol::{
    CallId, CompletionKind, OutgoingMessage, Protocol, RequestInfo, SendPlan,
};
use vpml_pml::{Error, Result, Status};
use vpml_sender_log::{DEFAULT_SEGMENT_SIZE, RecordHeader, SenderLog};

use crate::env;

/// Everything the pessimist protocol needs to start.
#[derive(Clone, Debug)]
pub struct Config {
    /// Job id (the loggers' job name).
    pub job: String,
    /// This rank.
    pub rank: usize,
    /// Incarnation of this process.
    pub incarnation: u32,
    /// The job token.
    pub token: String,
    /// Event loggers.
    pub loggers: Vec<std::net::SocketAddr>,
    /// Loggers that must hold an event before it is durable.
    pub replicas: usize,
    /// This rank's sender-log directory.
    pub log_dir: PathBuf,
    /// Sender-log segment size.
    pub segment_size: usize,
    /// Send each event to the loggers as soon as it exists (`true`), or
    /// batch them until the next send needs them (the default; each socket
    /// write that wakes a logger costs ~10 µs on virtual machines).
    /// `VPML_EVENTS_EAGER=1` selects eager sending.
    pub send_eagerly: bool,
}

impl Config {
    /// Read the configuration `vpml run --protocol pessimist` sets up.
    pub fn from_env(job: &JobEnv) -> Result<Config> {
        let loggers = crate::parse_addrs(&crate::var(env::EVENT_LOGGERS)?)?;
        if loggers.is_empty() {
            return Err(Error::Bootstrap(format!(
                "{} lists no logger",
                env::EVENT_LOGGERS
            )));
        }
        let num = |name: &str, default: usize| -> Result<usize> {
            match std::env::var(name) {
                Ok(v) => v
                    .parse()
                    .map_err(|_| Error::Bootstrap(format!("{name}={v:?} is not a number"))),
                Err(_) => Ok(default),
            }
        };
        Ok(Config {
            job: job.job_id.clone(),
            rank: job.rank,
            incarnation: num(env::INCARNATION, 0)? as u32,
            token: job.token.clone(),
            replicas: num(env::REPLICAS, 1)?.clamp(1, loggers.len()),
            loggers,
            log_dir: crate::log_dir(job.rank)?,
            segment_size: num("VPML_LOG_SEGMENT_SIZE", DEFAULT_SEGMENT_SIZE)?,
            send_eagerly: num("VPML_EVENTS_EAGER", 0)? != 0,
        })
    }
}

/// Counters for `--stats`.
#[derive(Default, Debug, Clone)]
struct Counters {
    matches: u64,
    probes: u64,
    deliveries: u64,
    none_runs: u64,
    none_runs_dropped: u64,
    cancels: u64,
    sends: u64,
    sends_waited: u64,
    /// Time each waiting send spent waiting for durability.
    waits: Histogram,
    /// Time spent handing events to the logger client, in ns.
    put_ns: u64,
}

/// The pessimist protocol of one rank.
pub struct Pessimist {
    client: Client,
    log: SenderLog,
    /// A run of unsuccessful tests/iprobes not yet logged: (first, last) call.
    none_run: Option<(CallId, CallId)>,
    /// Highest event id known durable.
    durable: u64,
    /// Id of the last event handed to the client.
    last_put: u64,
    counters: Counters,
}

fn fail(what: &str, e: impl std::fmt::Display) -> Error {
    Error::EngineFailed(format!("pessimist protocol: {what}: {e}"))
}

impl Pessimist {
    /// Connect to the loggers and create the sender log.
    pub fn start(cfg: Config) -> Result<Pessimist> {
        let mut cc = ClientConfig::new(
            cfg.loggers.clone(),
            &cfg.job,
            cfg.rank as u32,
            cfg.incarnation,
            &cfg.token,
        );
        cc.replicas = cfg.replicas;
        cc.send_eagerly = cfg.send_eagerly;
        let client = Client::connect(cc).map_err(|e| fail("connecting to the event loggers", e))?;
        let log = SenderLog::create(&cfg.log_dir, cfg.rank as u32, cfg.segment_size)
            .map_err(|e| fail("creating the sender log", e))?;
        let durable = client.durable();
        Ok(Pessimist {
            client,
            log,
            none_run: None,
            durable,
            last_put: durable,
            counters: Counters::default(),
        })
    }

    fn put(&mut self, event: Event) -> Result<()> {
        match &event {
            Event::Match { .. } => self.counters.matches += 1,
            Event::Probe { .. } => self.counters.probes += 1,
            Event::Delivery { .. } => self.counters.deliveries += 1,
            Event::NoneRun { .. } => self.counters.none_runs += 1,
            Event::Cancel { .. } => self.counters.cancels += 1,
        }
        let t = Instant::now();
        self.last_put = self
            .client
            .put(&event)
            .map_err(|e| fail("logging an event", e))?;
        self.counters.put_ns += t.elapsed().as_nanos() as u64;
        Ok(())
    }

    /// A successful non-deterministic call: an unflushed run of failures
    /// before it needs no event any more (replay answers "none" to calls
    /// without an event while a later event exists).
    fn drop_none_run(&mut self) {
        if self.none_run.take().is_some() {
            self.counters.none_runs_dropped += 1;
        }
    }

    fn failed_call(&mut self, call: CallId) {
        self.none_run = Some(match self.none_run {
            Some((first, _)) => (first, call),
            None => (call, call),
        });
    }

    /// The commit rule: everything created so far is durable before a
    /// message leaves.
    fn commit(&mut self) -> Result<()> {
        if let Some((first, last)) = self.none_run.take() {
            self.put(Event::NoneRun { first, last })?;
        }
        // The id of the last event we put, known without asking the client
        // (whose state sits behind a lock): a send with nothing pending
        // costs one comparison.
        let last = self.last_put;
        if last <= self.durable {
            return Ok(());
        }
        let t0 = Instant::now();
        self.client
            .wait_all_durable()
            .map_err(|e| fail("waiting for the event loggers", e))?;
        self.durable = last;
        self.counters.sends_waited += 1;
        self.counters.waits.record(t0.elapsed().as_nanos() as u64);
        Ok(())
    }
}

/// A fixed-size latency histogram: 8 buckets per power of two (values
/// within 12.5 % of the truth), so a long job records every wait in
/// constant memory.
#[derive(Debug, Clone)]
struct Histogram {
    counts: Box<[u64; 64 * 8]>,
    total: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; 64 * 8]),
            total: 0,
        }
    }
}

impl Histogram {
    fn bucket(v: u64) -> usize {
        if v < 8 {
            return v as usize;
        }
        let major = 63 - v.leading_zeros() as usize; // ≥ 3
        let minor = ((v >> (major - 3)) & 7) as usize;
        (major - 2) * 8 + minor
    }

    /// Smallest value of bucket `b`.
    fn value(b: usize) -> u64 {
        if b < 8 {
            return b as u64;
        }
        let (major, minor) = (b / 8 + 2, (b % 8) as u64);
        (8 + minor) << (major - 3)
    }

    fn record(&mut self, v: u64) {
        self.counts[Self::bucket(v)] += 1;
        self.total += 1;
    }

    /// The value at quantile `p` (0 when empty).
    fn quantile(&self, p: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((self.total - 1) as f64 * p).round() as u64;
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen > rank {
                return Self::value(b);
            }
        }
        0
    }
}

impl Protocol for Pessimist {
    fn name(&self) -> &'static str {
        "pessimist"
    }

    fn send(&mut self, msg: &OutgoingMessage<'_>) -> Result<SendPlan> {
        self.commit()?;
        self.counters.sends += 1;
        let header = RecordHeader {
            dest: msg.dest as u32,
            context: msg.context,
            tag: msg.tag,
            seq: msg.seq,
        };
        let loc = self
            .log
            .append(header, msg.payload)
            .map_err(|e| fail("appending to the sender log", e))?;
        let stored = self
            .log
            .payload(&loc)
            .ok_or_else(|| fail("reading back the sender log", "record missing"))?;
        Ok(SendPlan::Logged {
            ptr: stored.as_ptr(),
            len: stored.len(),
        })
    }

    fn post_recv(&mut self, _call: CallId, _spec: &mut RecvSpec) -> Result<()> {
        Ok(())
    }

    fn matched(&mut self, recv: CallId, source: usize) -> Result<()> {
        self.put(Event::Match {
            recv,
            source: source as u32,
        })
    }

    fn completion(
        &mut self,
        call: CallId,
        _kind: CompletionKind,
        requests: &[Option<RequestInfo>],
        done: &[usize],
    ) -> Result<()> {
        if done.is_empty() {
            self.failed_call(call);
            return Ok(());
        }
        let infos: Vec<RequestInfo> = done
            .iter()
            .filter_map(|&i| requests.get(i).copied().flatten())
            .collect();
        if requests
            .iter()
            .flatten()
            .all(|r| r.is_send && r.completed_at_start)
        {
            // Determined: every request passed is a send that completed
            // when it started, so any replay gives the same answer.
            return Ok(());
        }
        self.drop_none_run();
        self.put(Event::Delivery {
            call,
            completed: infos.iter().map(|r| r.call).collect(),
        })
    }

    fn probe(
        &mut self,
        call: CallId,
        any_source: bool,
        blocking: bool,
        found: Option<&Status>,
    ) -> Result<()> {
        match found {
            None => {
                self.failed_call(call);
                Ok(())
            }
            Some(_) if blocking && !any_source => Ok(()),
            Some(st) => {
                self.drop_none_run();
                self.put(Event::Probe {
                    call,
                    found: true,
                    source: st.source() as u32,
                    tag: st.tag(),
                    length: st.len() as u64,
                })
            }
        }
    }

    fn cancel(&mut self, call: CallId, _request: CallId, cancelled: bool) -> Result<()> {
        self.put(Event::Cancel { call, cancelled })
    }

    fn finalize(&mut self) -> Result<()> {
        // A trailing run of failed tests precedes no send: nobody depends on it.
        self.none_run = None;
        self.client
            .wait_all_durable()
            .map_err(|e| fail("making the last events durable", e))?;
        Ok(())
    }

    fn stats(&self) -> Vec<(String, u64)> {
        let c = &self.counters;
        vec![
            ("events_match".into(), c.matches),
            ("events_probe".into(), c.probes),
            ("events_delivery".into(), c.deliveries),
            ("events_none_run".into(), c.none_runs),
            ("none_runs_dropped".into(), c.none_runs_dropped),
            ("events_cancel".into(), c.cancels),
            (
                "events_total".into(),
                c.matches + c.probes + c.deliveries + c.none_runs + c.cancels,
            ),
            ("logged_sends".into(), c.sends),
            ("sends_waiting_for_loggers".into(), c.sends_waited),
            ("logger_wait_p50_ns".into(), c.waits.quantile(0.5)),
            ("logger_wait_p99_ns".into(), c.waits.quantile(0.99)),
            ("sender_log_bytes".into(), self.log.bytes_logged()),
            (
                "sender_log_segments".into(),
                self.log.segment_count() as u64,
            ),
            ("event_put_ns_total".into(), c.put_ns),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::Histogram;

    #[test]
    fn histogram_quantiles_are_within_an_eighth() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile(0.5), 0);
        for v in 1..=10_000u64 {
            h.record(v * 100);
        }
        for (p, exact) in [(0.5, 500_000.0), (0.99, 990_000.0)] {
            let got = h.quantile(p) as f64;
            assert!(
                got <= exact && got >= exact * 0.875,
                "p{p}: {got} vs {exact}"
            );
        }
        let mut small = Histogram::default();
        small.record(3);
        assert_eq!(small.quantile(0.99), 3);
        let mut huge = Histogram::default();
        huge.record(u64::MAX);
        assert!(huge.quantile(0.5) > u64::MAX / 2);
    }
}
