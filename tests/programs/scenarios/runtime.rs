//! The runtime around the messages: a deliberately non-deterministic run
//! for replay (`clock`), the CPU a blocked rank uses, error values for
//! bad arguments, and a job that waits at a gate for the test (`gate`).

use std::time::Duration;

use vpml::{ANY_SOURCE, ANY_TAG, Comm, Error};

use super::{R, check};

/// Not piecewise deterministic on purpose: rank 1 sends rank 0 three
/// messages, the third holding the wall-clock time. A replay of rank 1
/// must report its third send to rank 0 as the divergence.
pub(crate) fn clock(w: &Comm) -> R {
    match w.rank() {
        1 => {
            w.send(0, 1, b"first")?;
            w.send(0, 1, b"second")?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_nanos();
            w.send(0, 1, &now.to_le_bytes())?;
        }
        0 => {
            let mut buf = [0u8; 16];
            for _ in 0..3 {
                w.recv(1, 1, &mut buf)?;
            }
            println!("ok clock");
        }
        _ => {}
    }
    Ok(())
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills a plain struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// A rank blocked in recv for 2 s uses less than 0.2 s of CPU.
pub(crate) fn idle_cpu(w: &Comm) -> R {
    if w.rank() == 0 {
        w.recv(1, 0, &mut [0u8])?; // rank 1 is about to block
        std::thread::sleep(Duration::from_secs(2));
        w.send(1, 1, &[0u8])?;
        let mut used = [0f64];
        w.recv(1, 2, &mut used)?;
        println!("cpu used while blocked: {:.3} s", used[0]);
        // A rank that spun would use about the whole 2 s; one that sleeps
        // uses a little for its polls before sleeping, more when the
        // machine is busy (0.22 s was seen over TCP on 2 loaded cores):
        // half the time tells them apart without timing the polls.
        check(used[0] < 1.0, || {
            format!("a blocked rank used {:.3} s of CPU in 2 s", used[0])
        })?;
    } else if w.rank() == 1 {
        w.send(0, 0, &[0u8])?;
        let before = cpu_seconds();
        w.recv(0, 1, &mut [0u8])?;
        let used = cpu_seconds() - before;
        w.send(0, 2, &[used])?;
    }
    Ok(())
}

/// Bad arguments are error values, not panics.
pub(crate) fn invalid(w: &Comm) -> R {
    let n = w.size();
    check(
        matches!(w.send(n, 0, &[1u8]), Err(Error::InvalidRank { .. })),
        || "send to a rank outside".into(),
    )?;
    check(
        matches!(w.send(0, -3, &[1u8]), Err(Error::InvalidTag(-3))),
        || "negative tag".into(),
    )?;
    check(
        matches!(w.recv(n + 5, 0, &mut [0u8]), Err(Error::InvalidRank { .. })),
        || "recv from outside".into(),
    )?;
    check(
        matches!(w.recv(-7, 0, &mut [0u8]), Err(Error::InvalidRank { .. })),
        || "recv from -7".into(),
    )?;
    check(
        matches!(w.iprobe(ANY_SOURCE, -5), Err(Error::InvalidTag(-5))),
        || "probe tag".into(),
    )?;
    check(
        matches!(w.isend(0, ANY_TAG, vec![0u8]), Err(Error::InvalidTag(_))),
        || "ANY_TAG is not a send tag".into(),
    )?;
    check(matches!(vpml::init(), Err(Error::RequestState(_))), || {
        "second init".into()
    })?;
    Ok(())
}

/// For the test of hostile connections during a recovery: rounds of
/// ANY_SOURCE exchanges, whose later sends depend on what came, around a
/// gate. At the gate every rank prints `ready RANK PID`; rank 0 then waits
/// for a line on its stdin (the test's cue) before it lets the others on.
/// Rank 0 prints the job's checksum at the end.
pub(crate) fn gate(w: &Comm) -> R {
    let (me, n) = (w.rank(), w.size());
    let mut value = me as u64 + 1;
    let mut round = |r: i32| -> R {
        // A tag per round: an early peer's next round waits its turn.
        let tag = 100 + r;
        for q in (0..n).filter(|&q| q != me) {
            w.send(q, tag, &[value ^ r as u64])?;
        }
        let mut mixed = 0u64;
        for _ in 1..n {
            let mut got = [0u64];
            let st = w.recv(ANY_SOURCE, tag, &mut got)?;
            // Order-free, so that every run has one answer; the next
            // round's sends depend on every value received.
            mixed = mixed.wrapping_add(splitmix(got[0] ^ st.source() as u64));
        }
        value = splitmix(value ^ mixed);
        Ok(())
    };
    for r in 0..20 {
        round(r)?;
    }
    println!("ready {me} {}", std::process::id());
    if me == 0 {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)?;
        for q in 1..n {
            w.send(q, 6, &[0u8])?;
        }
    } else {
        w.recv(0, 6, &mut [0u8])?;
    }
    for r in 20..40 {
        round(r)?;
    }
    let mut all = vec![0u64; n];
    w.gather(&[value], &mut all, 0)?;
    if me == 0 {
        let sum = all.iter().fold(0u64, |a, &v| splitmix(a ^ v));
        println!("gate checksum {sum:016x}");
    }
    Ok(())
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// For coordinated checkpointing: every rank sends its right neighbour a
/// value, takes a checkpoint (every third step), then receives from its
/// left one — so each checkpoint has a message in flight on every
/// channel, saved with it and delivered after a restart. Each step also takes an ANY_SOURCE turn
/// whose later sends depend on what came. Rank 0 prints a checksum.
pub(crate) fn checkpoint_ring(w: &Comm) -> R {
    let (me, n) = (w.rank(), w.size());
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    // A restarted process resumes right after the checkpoint call, at
    // the top of the loop.
    let (mut step, mut acc) = match w.restart_state() {
        Some(b) if b.len() == 16 => (
            u64::from_le_bytes(b[..8].try_into()?),
            u64::from_le_bytes(b[8..].try_into()?),
        ),
        Some(b) => return Err(format!("a restart state of {} bytes", b.len()).into()),
        None => {
            let acc = me as u64 + 1;
            w.send(right, 7, &[splitmix(acc)])?;
            (0, acc)
        }
    };
    while step < 60 {
        let mut got = [0u64];
        w.recv(left, 7, &mut got)?;
        acc = splitmix(acc ^ got[0]);
        // Everyone reports to rank 0 in whatever order they come; rank 0
        // answers each in that order, saying its place in it (the answer
        // of the job does not depend on the order: every run has one).
        // A tag per step: a report of the next step (sent after a
        // checkpoint call) never matches a receive of this one (before
        // it), as coordinated checkpointing requires.
        let tag = 1000 + step as i32;
        if me == 0 {
            for k in 1..n {
                let st = w.recv(ANY_SOURCE, tag, &mut got)?;
                let reply = splitmix(got[0]);
                w.send(st.source(), tag, &[reply, k as u64])?;
                acc = acc.wrapping_add(reply);
            }
        } else {
            w.send(0, tag, &[acc])?;
            let mut reply = [0u64; 2];
            w.recv(0, tag, &mut reply)?;
            check(
                reply[0] == splitmix(acc) && (1..n as u64).contains(&reply[1]),
                || format!("rank 0 answered {reply:?} to {acc:#x}"),
            )?;
            acc = acc.wrapping_add(reply[0]);
        }
        step += 1;
        if step < 60 {
            w.send(right, 7, &[splitmix(acc ^ step)])?;
        }
        if step % 3 == 0 {
            w.checkpoint(&[step.to_le_bytes(), acc.to_le_bytes()].concat())?;
        }
    }
    let mut all = vec![0u64; n];
    w.gather(&[acc], &mut all, 0)?;
    if me == 0 {
        println!(
            "ring checksum {:016x}",
            all.iter().fold(0, |a, &v| splitmix(a ^ v))
        );
    }
    Ok(())
}

/// Breaks coordinated checkpointing's rule on purpose: rank 1 waits,
/// before its checkpoint call, for a message rank 0 sends after its own.
/// Under `coordinated` the job cannot checkpoint (nor go on): rank 0
/// must say what it waits for.
pub(crate) fn checkpoint_crossing(w: &Comm) -> R {
    match w.rank() {
        0 => {
            w.checkpoint(b"rank 0")?;
            w.send(1, 1, &[1u8])?;
        }
        1 => {
            w.recv(0, 1, &mut [0u8])?;
            w.checkpoint(b"rank 1")?;
        }
        _ => {
            w.checkpoint(b"other")?;
        }
    }
    Ok(())
}
