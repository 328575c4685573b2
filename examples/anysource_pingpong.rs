//! The paper's modified NetPIPE (seed 002): a ping-pong in which every
//! receive is an ANY_SOURCE `irecv` completed by `wait_any` — the worst
//! case for message logging, since each reception is non-deterministic.
//!
//! ```text
//! vpml run -n 2 target/release/examples/anysource-pingpong [--json] [--max BYTES] [--check]
//! ```
//!
//! `--check` prints, instead of timings, a checksum of every message rank 0
//! received (each side changes one byte of the buffer before sending it
//! back): output that must come out identical after any crash and recovery.

use std::time::Instant;

use vpml::{ANY_SOURCE, Comm, Request};

fn receive(world: &Comm, buf: Vec<u8>) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let mut slot: [Option<Request<Vec<u8>>>; 1] = [Some(world.irecv(ANY_SOURCE, 1, buf)?)];
    let (_, done) = vpml::wait_any(&mut slot)?.ok_or("wait_any found no request")?;
    Ok(done.buf)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let check = args.iter().any(|a| a == "--check");
    let max: usize = match args.iter().position(|a| a == "--max") {
        Some(i) => args.get(i + 1).ok_or("--max needs a value")?.parse()?,
        None => 1 << 20,
    };
    let world = vpml::init()?;
    let (rank, size) = (world.rank(), world.size());
    if size != 2 {
        return Err("anysource-pingpong runs on exactly 2 ranks".into());
    }
    let peer = 1 - rank;
    if rank == 0 && !json && !check {
        println!("{:>10} {:>14}", "bytes", "latency(us)");
    }
    let mut s = 0usize;
    loop {
        let iters = if s <= 4096 {
            10_000
        } else {
            (100_000_000 / s).clamp(50, 10_000)
        };
        let warm = iters / 10 + 1;
        let mut buf = vec![0u8; s];
        let mut t0 = Instant::now();
        let mut sum: u64 = 0xcbf2_9ce4_8422_2325;
        for i in 0..warm + iters {
            if i == warm {
                t0 = Instant::now();
            }
            if check && s > 0 {
                buf[i % s] = buf[i % s].wrapping_add(1 + rank as u8);
            }
            if rank == 0 {
                world.send(peer, 1, &buf)?;
                buf = receive(&world, buf)?;
                if check {
                    sum = buf.iter().fold(sum ^ i as u64, |h, &b| {
                        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
                    });
                }
            } else {
                buf = receive(&world, buf)?;
                world.send(peer, 1, &buf)?;
            }
        }
        let us = t0.elapsed().as_secs_f64() * 1e6 / (2.0 * iters as f64);
        if rank == 0 {
            if check {
                println!("bytes {s} checksum {sum:016x}");
            } else if json {
                println!("{{\"impl\":\"vpml\",\"bytes\":{s},\"latency_us\":{us:.4}}}");
            } else {
                println!("{s:>10} {us:>14.3}");
            }
        }
        if s >= max {
            break;
        }
        s = if s == 0 { 1 } else { s * 4 };
    }
    world.finalize()?;
    Ok(())
}
