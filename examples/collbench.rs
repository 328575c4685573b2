//! Collective benchmark: time per call of allreduce (8 B, 1 MiB) and bcast
//! (1 MiB), averaged over many calls and taking the slowest rank; the same
//! method as `benches/c/collectives.c`.
//!
//! ```text
//! vpml run -n 4 target/release/examples/collbench [--json]
//! ```

use std::time::Instant;

use vpml::{Comm, Max, Sum};

fn iters(bytes: usize) -> usize {
    if bytes <= 1024 { 20_000 } else { 200 }
}

fn time<F: FnMut() -> Result<(), vpml::Error>>(
    world: &Comm,
    n: usize,
    mut f: F,
) -> Result<f64, vpml::Error> {
    for _ in 0..n / 10 + 1 {
        f()?;
    }
    world.barrier()?;
    let t0 = Instant::now();
    for _ in 0..n {
        f()?;
    }
    let mine = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
    let mut slowest = [0f64];
    world.allreduce(&[mine], &mut slowest, &Max)?;
    Ok(slowest[0])
}

fn main() -> Result<(), vpml::Error> {
    let json = std::env::args().any(|a| a == "--json");
    let world = vpml::init()?;
    let n = world.size();
    let mut results = Vec::new();
    for bytes in [8usize, 1 << 20] {
        let send = vec![1.0f64; bytes / 8];
        let mut recv = vec![0f64; bytes / 8];
        let us = time(&world, iters(bytes), || {
            world.allreduce(&send, &mut recv, &Sum)
        })?;
        results.push(("allreduce", bytes, us));
    }
    let mut buf = vec![0u8; 1 << 20];
    let us = time(&world, iters(buf.len()), || world.bcast(&mut buf, 0))?;
    results.push(("bcast", 1 << 20, us));
    if world.rank() == 0 {
        for (op, bytes, us) in results {
            if json {
                println!(
                    "{{\"impl\":\"vpml\",\"ranks\":{n},\"op\":\"{op}\",\"bytes\":{bytes},\"us\":{us:.3}}}"
                );
            } else {
                println!("{op:>10} {bytes:>8} B on {n} ranks: {us:>10.3} us");
            }
        }
    }
    world.finalize()
}
