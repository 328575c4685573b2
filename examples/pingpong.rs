//! Ping-pong benchmark: one-way latency and streaming bandwidth between
//! ranks 0 and 1, for message sizes 0 B … 4 MiB.
//!
//! Method (the same as `benches/c/pingpong.c`, so both are comparable):
//! * latency: rank 0 sends, rank 1 answers with the same size; one-way
//!   latency is half the mean round trip; a second, separately timed
//!   pass clocks every round trip and reports half the median
//!   (`latency_p50_us`), which a rare stall (the kernel, a checkpoint)
//!   does not move;
//! * bandwidth: rank 0 posts a window of 64 nonblocking sends, rank 1 a
//!   window of 64 receives, then rank 1 answers with an empty message; the
//!   bytes of the window divided by the time per window.
//!
//! ```text
//! vpml run -n 2 target/release/examples/pingpong [--json] [--min BYTES]
//!     [--max BYTES] [--checkpoint-every-mib N]
//! ```
//! Extra ranks idle (asleep) until the end.
//!
//! With `--checkpoint-every-mib N` each rank takes an (empty) checkpoint
//! whenever it has sent and received N MiB (payload plus 64 bytes per
//! message) since its last one, as a long-running application would (far
//! more often, though: every few milliseconds at small sizes). The
//! checkpoint and an empty exchange after it (so both ranks are done) are
//! left out of the timings, and their count and mean time are printed at
//! the end: the figures are those of the messages. Checkpoints matter here
//! because under a logging protocol a receiver's checkpoint lets its
//! senders free and reuse their sender-log memory, so the figures show the
//! steady state instead of a log growing without bound.
//!
//! The ranks first run unmeasured bandwidth rounds at the largest size
//! (the largest burst between two checkpoints) from rank 0, then three of
//! at most 1 MiB messages from rank 1, then eight checkpoint intervals of
//! empty round trips (more than the records a log keeps, and once round
//! its segments), so both logs, and their indexes, have reached their
//! working size: a log's first growth takes fresh memory from the kernel,
//! a cost a long-running application pays once (see
//! `vpml-pessimist-nogc` in the suite for a log that never reuses).
//! Without a protocol a checkpoint does nothing.

use std::time::{Duration, Instant};

use vpml::{Completed, Request};

const WINDOW: usize = 64;
/// What a message counts for the checkpoint cadence beyond its payload (a
/// logged record's header is 64 bytes): empty messages fill logs too.
const ENVELOPE: usize = 64;
/// Checkpoint intervals of empty round trips before the timings: a log
/// freed at checkpoints has then gone once round its segments (at 16 MiB
/// segments it reuses the first one after about five intervals).
const WARM_INTERVALS: usize = 8;

fn sizes(max: usize) -> Vec<usize> {
    let mut v = vec![0];
    let mut s = 1;
    while s <= max {
        v.push(s);
        s *= 2;
    }
    v
}

fn latency_iters(size: usize) -> usize {
    if size <= 4096 {
        20_000
    } else {
        (200_000_000 / size).clamp(50, 20_000)
    }
}

fn bandwidth_reps(size: usize) -> usize {
    (512 * 1024 * 1024 / (WINDOW * size.max(1))).clamp(5, 200)
}

/// One round trip of `buf` between ranks 0 and 1 on `tag`: rank 0 sends
/// first, rank 1 answers with the same bytes.
fn round_trip(world: &vpml::Comm, tag: i32, buf: &mut [u8]) -> vpml::Result<()> {
    let peer = 1 - world.rank();
    if world.rank() == 0 {
        world.send(peer, tag, buf)?;
        world.recv(peer, tag, buf)?;
    } else {
        world.recv(peer, tag, buf)?;
        world.send(peer, tag, buf)?;
    }
    Ok(())
}

/// One bandwidth round: rank `sender` sends the window's buffers, the
/// other rank receives into them, then answers with an empty message.
fn window_round(
    world: &vpml::Comm,
    peer: usize,
    window: &mut Vec<Vec<u8>>,
    sender: usize,
) -> vpml::Result<()> {
    let mut reqs: Vec<Option<Request<Vec<u8>>>> = Vec::with_capacity(WINDOW);
    for b in window.drain(..) {
        reqs.push(Some(if world.rank() == sender {
            world.isend(peer, 2, b)?
        } else {
            world.irecv(peer, 2, b)?
        }));
    }
    for Completed { buf, .. } in vpml::wait_all(&mut reqs)? {
        window.push(buf);
    }
    if world.rank() == sender {
        world.recv(peer, 3, &mut [0u8; 0])?;
    } else {
        world.send(peer, 3, &[0u8; 0])?;
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    // The number after option `name`, if given.
    let number = |name: &str| -> Result<Option<usize>, std::num::ParseIntError> {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map(|v| v.parse::<usize>())
            .transpose()
    };
    let max = number("--max")?.unwrap_or(4 << 20);
    let min = number("--min")?.unwrap_or(0);
    let checkpoint_every = number("--checkpoint-every-mib")?.map(|mib| mib << 20);
    let mut moved_since_checkpoint = 0usize;
    let mut checkpoints = (0u32, Duration::ZERO);
    // Checkpoint if due, then exchange an empty message with the other
    // rank (which checkpoints at the same point) so both are done; the
    // time taken is returned, and left out of the timings.
    let mut checkpoint_after = |world: &vpml::Comm, moved: usize| -> vpml::Result<Duration> {
        moved_since_checkpoint += moved;
        if checkpoint_every.is_none_or(|every| moved_since_checkpoint < every) {
            return Ok(Duration::ZERO);
        }
        let t = Instant::now();
        moved_since_checkpoint = 0;
        world.checkpoint(&[])?;
        round_trip(world, 4, &mut [])?;
        let took = t.elapsed();
        checkpoints.0 += 1;
        checkpoints.1 += took;
        Ok(took)
    };
    let world = vpml::init()?;
    let (rank, size) = (world.rank(), world.size());
    if size < 2 {
        eprintln!(
            "pingpong needs at least 2 ranks: vpml run -n 2 {}",
            std::env::args().next().unwrap_or_default()
        );
        std::process::exit(2);
    }
    if rank >= 2 {
        let mut done = [0u8; 0];
        world.recv(0, 99, &mut done)?;
        return Ok(());
    }
    let peer = 1 - rank;
    if rank == 0 && !json {
        println!(
            "# vpml ping-pong, {size} ranks, single-copy large messages: {}",
            world.single_copy()
        );
        println!(
            "{:>10} {:>14} {:>14} {:>16}",
            "bytes", "latency(us)", "median(us)", "bandwidth(MB/s)"
        );
    }
    let mut buf = vec![0u8; max];
    let mut window: Vec<Vec<u8>> = (0..WINDOW).map(|_| Vec::with_capacity(max)).collect();
    if checkpoint_every.is_some() {
        // Unmeasured: the largest bursts between checkpoints, so the logs
        // reach their working size.
        for b in &mut window {
            b.resize(max, 1);
        }
        for _ in 0..3 {
            window_round(&world, peer, &mut window, 0)?;
            checkpoint_after(&world, (max + ENVELOPE) * WINDOW)?;
        }
        // Rank 1 sends only small messages and answers: a smaller burst
        // the other way grows its log to what the latency tests use.
        let back = max.min(1 << 20);
        for b in &mut window {
            b.truncate(back);
        }
        for _ in 0..3 {
            window_round(&world, peer, &mut window, 1)?;
            checkpoint_after(&world, (back + ENVELOPE) * WINDOW)?;
        }
        // Empty messages for WARM_INTERVALS checkpoint intervals: each log
        // then holds the most records it ever keeps (what was sent since
        // the receiver's older kept checkpoint), so its index has grown to
        // hold them, and has gone once round its segments, so that it
        // reuses memory instead of taking more.
        for _ in 0..WARM_INTERVALS * checkpoint_every.unwrap_or(0) / (2 * ENVELOPE) {
            round_trip(&world, 1, &mut [])?;
            checkpoint_after(&world, 2 * ENVELOPE)?;
        }
    }
    for s in sizes(max).into_iter().filter(|&s| s >= min) {
        // Latency.
        let iters = latency_iters(s);
        let warm = iters / 10 + 1;
        let (mut t0, mut paused) = (Instant::now(), Duration::ZERO);
        for i in 0..warm + iters {
            if i == warm {
                (t0, paused) = (Instant::now(), Duration::ZERO);
            }
            round_trip(&world, 1, &mut buf[..s])?;
            paused += checkpoint_after(&world, 2 * (s + ENVELOPE))?;
        }
        let lat_us = (t0.elapsed() - paused).as_secs_f64() * 1e6 / (2.0 * iters as f64);
        // The same again, each round trip clocked (the clock is read once
        // per round trip, outside the mean above).
        let mut round_trips_ns: Vec<u64> = Vec::with_capacity(iters);
        for _ in 0..iters {
            let t = Instant::now();
            round_trip(&world, 1, &mut buf[..s])?;
            round_trips_ns.push(t.elapsed().as_nanos() as u64);
            checkpoint_after(&world, 2 * (s + ENVELOPE))?;
        }
        round_trips_ns.sort_unstable();
        let p50_us = round_trips_ns[iters / 2] as f64 / 2e3;

        // Bandwidth.
        let reps = bandwidth_reps(s);
        for b in &mut window {
            b.resize(s, 1);
        }
        let (mut t0, mut paused) = (Instant::now(), Duration::ZERO);
        for r in 0..reps + 1 {
            if r == 1 {
                (t0, paused) = (Instant::now(), Duration::ZERO);
            }
            window_round(&world, peer, &mut window, 0)?;
            paused += checkpoint_after(&world, (s + ENVELOPE) * WINDOW)?;
        }
        let secs = (t0.elapsed() - paused).as_secs_f64();
        let mbs = (s * WINDOW * reps) as f64 / secs / 1e6;
        if rank == 0 {
            if json {
                println!(
                    "{{\"impl\":\"vpml\",\"bytes\":{s},\"latency_us\":{lat_us:.4},\"latency_p50_us\":{p50_us:.4},\"bandwidth_mbs\":{mbs:.1}}}"
                );
            } else {
                println!("{s:>10} {lat_us:>14.3} {p50_us:>14.3} {mbs:>16.1}");
            }
        }
    }
    if rank == 0 && checkpoint_every.is_some() {
        let (n, total) = checkpoints;
        let mean_us = total.as_secs_f64() * 1e6 / f64::from(n.max(1));
        if json {
            println!(
                "{{\"impl\":\"vpml\",\"checkpoints\":{n},\"checkpoint_mean_us\":{mean_us:.1}}}"
            );
        } else {
            println!(
                "# {n} checkpoints, {mean_us:.1} us each with the exchange after (not in the timings)"
            );
        }
    }
    if rank == 0 {
        for r in 2..size {
            world.send(r, 99, &[0u8; 0])?;
        }
    }
    world.finalize()?;
    Ok(())
}
