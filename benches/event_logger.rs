//! Event-logger benchmark against a real `vpml event-logger` process.
//!
//! ```text
//! cargo bench --bench event_logger             # ~1 minute
//! cargo bench --bench event_logger -- --secs 3 # longer runs per point
//! cargo bench --bench event_logger -- --latency-only
//! ```
//!
//! For each durability mode (`write`, `fsync`): sustained events/s with 1, 4
//! and 16 concurrent clients (one rank each, pipelined puts) at 1, 16 and
//! 256 events per put, and the latency of one event (put, then wait until it
//! is durable) p50/p99. A bare loopback TCP round trip (64 bytes, nodelay,
//! echo in another process, like the logger; with a blocking and with a
//! spinning read) is sampled in turn with the ack latency, so the ratios
//! compare them under the same load. Prints a table
//! and one JSON line per measurement (`{"bench":"event_logger",…}`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use vpml_event_logger::{CallId, Client, ClientConfig, Event};

const JOB: &str = "bench";
const TOKEN: &str = "bench-token-0123456789abcdef";

struct Logger {
    child: Child,
    addr: SocketAddr,
}

impl Logger {
    fn start(dir: &Path, durability: &str) -> Logger {
        let _ = std::fs::remove_dir_all(dir.join("data"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_vpml"))
            .args(["event-logger", "--durability", durability, "--data-dir"])
            .arg(dir.join("data"))
            .arg("--token-file")
            .arg(dir.join("tokens"))
            .stdout(Stdio::piped())
            .spawn()
            .expect("start vpml event-logger");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the logger's address");
        let addr = line.trim().parse().expect("logger address");
        Logger { child, addr }
    }
}

impl Drop for Logger {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client(addr: SocketAddr, rank: u32) -> Client {
    let mut cfg = ClientConfig::new(vec![addr], JOB, rank, 0, TOKEN);
    cfg.timeout = Duration::from_secs(60);
    cfg.max_pending_events = 256 << 10;
    Client::connect(cfg).expect("connect to the logger")
}

fn event(i: u64) -> Event {
    Event::Match {
        recv: CallId::new(0, i),
        source: (i % 64) as u32,
    }
}

/// Events/s with `clients` ranks putting `batch` events per put for `secs`.
fn throughput(addr: SocketAddr, clients: u32, batch: usize, secs: f64, rank_base: u32) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let start_line = Arc::new(std::sync::Barrier::new(clients as usize + 1));
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let stop = Arc::clone(&stop);
            let start_line = Arc::clone(&start_line);
            std::thread::spawn(move || {
                let c = client(addr, rank_base + i);
                let events: Vec<Event> = (0..batch as u64).map(event).collect();
                start_line.wait();
                let first = c.last_id();
                while !stop.load(Ordering::Relaxed) {
                    c.put_batch(&events).expect("put");
                }
                let last = c.last_id();
                c.wait_durable(last).expect("durable");
                let done = Instant::now();
                // Reclaim the disk space before the next configuration.
                c.truncate(last).expect("truncate");
                c.close().expect("close");
                (last - first, done)
            })
        })
        .collect();
    start_line.wait();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    let mut end = t0;
    for t in threads {
        let (n, done) = t.join().expect("client thread");
        total += n;
        end = end.max(done);
    }
    total as f64 / (end - t0).as_secs_f64()
}

fn percentiles(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.50), at(0.99))
}

/// A bare loopback TCP echo (64 bytes, nodelay) served by another process
/// (this benchmark started with `--echo-server`), like the logger.
struct Echo {
    stream: TcpStream,
    child: Child,
}

/// `--echo-server`: print the port, echo 64-byte messages until EOF.
fn echo_server() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    println!("{}", listener.local_addr().expect("addr"));
    let (mut s, _) = listener.accept().expect("accept");
    s.set_nodelay(true).expect("nodelay");
    let mut buf = [0u8; 64];
    while s.read_exact(&mut buf).is_ok() {
        if s.write_all(&buf).is_err() {
            break;
        }
    }
}

impl Echo {
    fn start() -> Echo {
        let mut child = Command::new(std::env::current_exe().expect("own path"))
            .arg("--echo-server")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the echo process");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("echo address");
        let addr: SocketAddr = line.trim().parse().expect("echo address");
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Echo { stream, child }
    }

    /// One round trip, in µs.
    fn round_trip(&mut self) -> f64 {
        let mut buf = [7u8; 64];
        let t = Instant::now();
        self.stream.write_all(&buf).expect("send");
        self.stream.read_exact(&mut buf).expect("receive");
        t.elapsed().as_secs_f64() * 1e6
    }
}

impl Echo {
    /// One round trip with the reply polled in a busy loop (as
    /// `wait_durable` spins briefly before sleeping), in µs.
    fn round_trip_spinning(&mut self) -> f64 {
        let mut buf = [7u8; 64];
        self.stream.set_nonblocking(true).expect("nonblocking");
        let t = Instant::now();
        self.stream.write_all(&buf).expect("send");
        let mut got = 0;
        while got < buf.len() {
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => panic!("echo closed"),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::hint::spin_loop(),
                Err(e) => panic!("echo: {e}"),
            }
        }
        let us = t.elapsed().as_secs_f64() * 1e6;
        self.stream.set_nonblocking(false).expect("blocking");
        us
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        let _ = self.child.wait();
    }
}

/// (p50, p99) in µs of: the single-event ack latency, a bare TCP round
/// trip with a blocking read, and one with a spinning read — sampled in
/// turn so that all three see the same machine load.
fn latencies(addr: SocketAddr, rank: u32, n: usize) -> [(f64, f64); 3] {
    let c = client(addr, rank);
    let mut echo = Echo::start();
    let mut samples = [(); 3].map(|()| Vec::with_capacity(n));
    for i in 0..n + n / 10 {
        let blocking = echo.round_trip();
        let spinning = echo.round_trip_spinning();
        let t = Instant::now();
        let id = c.put(&event(i as u64)).expect("put");
        c.wait_durable(id).expect("durable");
        let ack = t.elapsed().as_secs_f64() * 1e6;
        if i >= n / 10 {
            for (v, x) in samples.iter_mut().zip([ack, blocking, spinning]) {
                v.push(x);
            }
        }
    }
    c.close().expect("close");
    samples.map(percentiles)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--echo-server") {
        return echo_server();
    }
    let secs: f64 = args
        .iter()
        .position(|a| a == "--secs")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let latency_only = args.iter().any(|a| a == "--latency-only");
    let tmp = tempfile::Builder::new()
        .prefix("vpml-el-bench-")
        .tempdir()
        .expect("temp dir");
    let dir: PathBuf = tmp.path().to_path_buf();
    std::fs::write(dir.join("tokens"), format!("{JOB} {TOKEN}\n")).expect("token file");

    let json = |fields: String| println!("{{\"bench\":\"event_logger\",{fields}}}");

    for mode in ["write", "fsync"] {
        let logger = Logger::start(&dir, mode);
        println!("\n== durability {mode} ==");
        println!("{:>8} {:>7} {:>14}", "clients", "batch", "events/s");
        let mut rank = 0;
        let sizes: &[u32] = if latency_only { &[] } else { &[1, 4, 16] };
        for &clients in sizes {
            for batch in [1usize, 16, 256] {
                let rate = throughput(logger.addr, clients, batch, secs, rank);
                rank += clients;
                println!("{clients:>8} {batch:>7} {rate:>14.0}");
                json(format!(
                    "\"metric\":\"events_per_s\",\"durability\":\"{mode}\",\"clients\":{clients},\"batch\":{batch},\"value\":{rate:.0}"
                ));
            }
        }
        let n = if mode == "write" { 20_000 } else { 5_000 };
        let [(p50, p99), (tcp50, tcp99), (spin50, spin99)] = latencies(logger.addr, rank, n);
        println!(
            "bare loopback TCP round trip (64 B): p50 {tcp50:.1} µs  p99 {tcp99:.1} µs; \
             with a spinning read: p50 {spin50:.1} µs  p99 {spin99:.1} µs"
        );
        json(format!(
            "\"metric\":\"tcp_rtt_us\",\"durability\":\"{mode}\",\"p50\":{tcp50:.2},\"p99\":{tcp99:.2},\"spinning_p50\":{spin50:.2},\"spinning_p99\":{spin99:.2}"
        ));
        println!(
            "single-event ack latency: p50 {p50:.1} µs  p99 {p99:.1} µs  \
             (p50 = {:.2} × bare round trip, {:.2} × spinning round trip)",
            p50 / tcp50,
            p50 / spin50
        );
        json(format!(
            "\"metric\":\"ack_latency_us\",\"durability\":\"{mode}\",\"p50\":{p50:.2},\"p99\":{p99:.2},\"p50_over_tcp_rtt\":{:.3},\"p50_over_spinning_rtt\":{:.3}",
            p50 / tcp50,
            p50 / spin50
        ));
        drop(logger);
    }
}
