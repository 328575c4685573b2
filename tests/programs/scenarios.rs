//! Rank program for the integration tests: `scenarios NAME`, started by
//! `vpml run`. Each scenario checks its own results and panics (non-zero
//! exit) on the first wrong one; on success rank 0 prints `ok NAME`.
//!
//! The scenarios are grouped by what they check: message order, matching,
//! probes and truncation (`scenarios/matching.rs`); the request calls
//! (`scenarios/requests.rs`); large, self and all-to-all transfers
//! (`scenarios/transfers.rs`); the runtime around the messages
//! (`scenarios/runtime.rs`). The modules sit in `scenarios/` and are named
//! by `#[path]`, as this file is the program's root in `tests/programs/`.

#[path = "scenarios/matching.rs"]
mod matching;
#[path = "scenarios/requests.rs"]
mod requests;
#[path = "scenarios/runtime.rs"]
mod runtime;
#[path = "scenarios/transfers.rs"]
mod transfers;

use matching::{any_source, order, probe, truncate};
use requests::{cancel, persistent, ssend, wait_test_family};
use runtime::{checkpoint_crossing, checkpoint_ring, clock, gate, idle_cpu, invalid};
use transfers::{alltoall, big_ring, huge, large, self_messages, sendrecv};
use vpml::{ANY_SOURCE, Comm};

type R = Result<(), Box<dyn std::error::Error>>;

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let world = vpml::init().unwrap_or_else(|e| {
        eprintln!("scenarios: init failed: {e}");
        std::process::exit(3)
    });
    let result = match name.as_str() {
        "order" => order(&world),
        "any" => any_source(&world),
        "probe" => probe(&world),
        "some" => wait_test_family(&world),
        "truncate" => truncate(&world),
        "persistent" => persistent(&world),
        "ssend" => ssend(&world),
        "cancel" => cancel(&world),
        "large" => large(&world),
        "huge" => huge(&world),
        "big-ring" => big_ring(&world),
        "clock" => clock(&world),
        "self" => self_messages(&world),
        "alltoall" => alltoall(&world),
        "idle-cpu" => idle_cpu(&world),
        "invalid" => invalid(&world),
        "sendrecv" => sendrecv(&world),
        "gate" => gate(&world),
        "checkpoint-ring" => checkpoint_ring(&world),
        "checkpoint-crossing" => checkpoint_crossing(&world),
        "finalized-exit" => Ok(()),
        "hello" => {
            println!("hello from rank {} of {}", world.rank(), world.size());
            Ok(())
        }
        "crash" => {
            if world.rank() == 1 {
                // SAFETY: raising a signal against ourselves.
                unsafe { libc::raise(libc::SIGKILL) };
            }
            block_forever(&world)
        }
        "exit-code" => {
            if world.rank() == 1 {
                std::process::exit(3);
            }
            block_forever(&world)
        }
        "no-finalize" => {
            if world.rank() == 1 {
                std::process::exit(0);
            }
            block_forever(&world)
        }
        "abort" => {
            if world.rank() == 1 {
                world.abort(7);
            }
            block_forever(&world)
        }
        "hang" => {
            println!("ready {}", std::process::id());
            block_forever(&world)
        }
        other => {
            eprintln!("scenarios: unknown scenario {other:?}");
            std::process::exit(2)
        }
    };
    if let Err(e) = result {
        eprintln!("scenario {name} failed on rank {}: {e}", world.rank());
        std::process::exit(1);
    }
    let rank = world.rank();
    if let Err(e) = world.finalize() {
        eprintln!("finalize failed: {e}");
        std::process::exit(1);
    }
    if rank == 0 {
        println!("ok {name}");
    }
    // The program's own exit status after a clean finish (as a C
    // program's `return rank;` after MPI_Finalize).
    if name == "finalized-exit" && rank == 1 {
        std::process::exit(3);
    }
}

/// Wait for a message that never comes (until the launcher stops the job).
fn block_forever(world: &Comm) -> R {
    let mut b = [0u8; 1];
    world.recv(ANY_SOURCE, 12345, &mut b)?;
    Err("a message came that nobody sent".into())
}

fn check(cond: bool, what: impl FnOnce() -> String) -> R {
    if cond { Ok(()) } else { Err(what().into()) }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
