//! The runtime around the messages: a deliberately non-deterministic run
//! for replay (`clock`), the CPU a blocked rank uses, and error values for
//! bad arguments.

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
