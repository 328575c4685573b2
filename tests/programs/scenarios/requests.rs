//! The request calls: the wait/test family, persistent requests,
//! synchronous sends, cancel.

use vpml::{Comm, Completed, Error, Persistent, Request, Status};

use super::{R, check, pattern};

/// wait_some/test_some report every completed request at once;
/// wait_any/test_any/test_all/test/wait behave as MPI's.
pub(crate) fn wait_test_family(w: &Comm) -> R {
    let k = 8usize;
    if w.rank() > 0 {
        let mut go = [0u8];
        for round in 0..3 {
            w.recv(0, 100 + round, &mut go)?;
            for i in 0..k {
                w.send(0, i as i32, &[(w.rank() * 1000 + i) as u32])?;
            }
            w.send(0, 50, &[0u8])?;
        }
        return Ok(());
    }
    let post = || -> Result<Vec<Option<Request<Vec<u32>>>>, Error> {
        let mut v = Vec::new();
        for r in 1..w.size() {
            for i in 0..k {
                v.push(Some(w.irecv(r, i as i32, vec![0u32; 1])?));
            }
        }
        Ok(v)
    };
    let arrived = |round: i32| -> R {
        for r in 1..w.size() {
            w.send(r, 100 + round, &[0u8])?;
        }
        // The "done" messages come after every data message of each sender,
        // so once they are received every request above has completed.
        for r in 1..w.size() {
            w.recv(r, 50, &mut [0u8])?;
        }
        Ok(())
    };
    let n = k * (w.size() - 1);
    let expect = |idx: usize, c: &Completed<Vec<u32>>| -> R {
        let (r, i) = (1 + idx / k, idx % k);
        check(c.buf[0] as usize == r * 1000 + i, || {
            format!("request {idx} got {}", c.buf[0])
        })
    };

    // wait_some: everything already done comes back in one call.
    let mut reqs = post()?;
    check(vpml::test_some(&mut reqs)?.is_empty(), || {
        "test_some completed a receive before any send".into()
    })?;
    arrived(0)?;
    let done = vpml::wait_some(&mut reqs)?;
    check(done.len() == n, || {
        format!(
            "wait_some reported {} of {n} completed requests",
            done.len()
        )
    })?;
    for (idx, c) in &done {
        expect(*idx, c)?;
    }
    check(reqs.iter().all(Option::is_none), || {
        "completed slots must become None".into()
    })?;
    check(vpml::wait_some(&mut reqs)?.is_empty(), || {
        "wait_some on no active request".into()
    })?;
    check(vpml::wait_any(&mut reqs)?.is_none(), || {
        "wait_any on no active request".into()
    })?;

    // test_some the same way.
    let mut reqs = post()?;
    arrived(1)?;
    let done = vpml::test_some(&mut reqs)?;
    check(done.len() == n, || {
        format!("test_some reported {} of {n}", done.len())
    })?;
    for (idx, c) in &done {
        expect(*idx, c)?;
    }

    // test_all, test_any, wait_any, test, wait on a third round.
    let mut reqs = post()?;
    check(vpml::test_all(&mut reqs)?.is_none(), || {
        "test_all before any message".into()
    })?;
    check(vpml::test_any(&mut reqs)?.is_none(), || {
        "test_any before any message".into()
    })?;
    arrived(2)?;
    let (first, c) = vpml::wait_any(&mut reqs)?.ok_or("wait_any returned nothing")?;
    check(first == 0, || {
        format!("wait_any picked {first}, the lowest done index is 0")
    })?;
    expect(first, &c)?;
    let (second, c) = vpml::test_any(&mut reqs)?.ok_or("test_any returned nothing")?;
    check(second == 1, || format!("test_any picked {second}"))?;
    expect(second, &c)?;
    let c = vpml::test(&mut reqs[2])?.ok_or("test of a completed request")?;
    expect(2, &c)?;
    let c = vpml::wait(&mut reqs[3])?.ok_or("wait of an active request")?;
    expect(3, &c)?;
    check(vpml::wait(&mut reqs[3])?.is_none(), || {
        "wait on an empty slot".into()
    })?;
    let rest = vpml::test_all(&mut reqs)?.ok_or("test_all after all arrived")?;
    check(rest.len() == n - 4, || {
        format!("test_all returned {}", rest.len())
    })?;
    Ok(())
}

/// A persistent request is started, completed and reused; its buffer is
/// reachable only while it is inactive.
pub(crate) fn persistent(w: &Comm) -> R {
    let rounds = 100u64;
    if w.rank() == 0 {
        let mut p = w.send_init(1, 5, vec![0u8; 32])?;
        let mut big = w.send_init(1, 6, vec![0u8; 100_000])?;
        for i in 0..rounds {
            p.buffer_mut().ok_or("inactive buffer")?.fill(i as u8);
            big.buffer_mut().ok_or("inactive buffer")?.fill(i as u8);
            let mut both = [p, big];
            vpml::start_all(&mut both)?;
            check(both[0].buffer().is_none(), || {
                "buffer reachable while active".into()
            })?;
            check(both[0].start().is_err(), || {
                "starting an active request must fail".into()
            })?;
            let sts = vpml::wait_all(&mut both)?;
            check(sts.len() == 2 && sts[0].source() == 1, || {
                format!("send statuses {sts:?}")
            })?;
            [p, big] = both;
        }
        let got = p.into_buffer()?;
        check(got == vec![(rounds - 1) as u8; 32], || {
            "buffer after the last use".into()
        })?;
    } else if w.rank() == 1 {
        let mut p: Persistent<Vec<u8>> = w.recv_init(0, 5, vec![0u8; 32])?;
        let mut big = w.recv_init(0, 6, vec![0u8; 100_000])?;
        for i in 0..rounds {
            p.start()?;
            big.start()?;
            let st: Status = p.wait()?;
            check(st.len() == 32, || format!("length {}", st.len()))?;
            check(p.buffer() == Some(&vec![i as u8; 32]), || {
                format!("round {i}: {:?}", p.buffer())
            })?;
            let mut one = [big];
            let (idx, st) = loop {
                if let Some(x) = vpml::test_any(&mut one)? {
                    break x;
                }
            };
            check(idx == 0 && st.len() == 100_000, || {
                "large persistent receive".into()
            })?;
            [big] = one;
            check(
                big.buffer()
                    .is_some_and(|b| b.iter().all(|&x| x == i as u8)),
                || "large payload".into(),
            )?;
        }
    }
    Ok(())
}

/// A synchronous send completes only once the receive has matched: its
/// message may sit in the receiver's unexpected queue without completing it.
pub(crate) fn ssend(w: &Comm) -> R {
    for (len, tag) in [(16usize, 1), (500_000, 2)] {
        if w.rank() == 0 {
            let mut s = Some(w.issend(1, tag, pattern(tag as u64, len))?);
            // Rank 1 tells us once our message is in its unexpected queue.
            w.recv(1, 20, &mut [0u8])?;
            for _ in 0..1000 {
                check(vpml::test(&mut s)?.is_none(), || {
                    format!("issend of {len} bytes completed before the receive was posted")
                })?;
            }
            w.send(1, 21, &[0u8])?;
            let c = vpml::wait(&mut s)?.ok_or("active")?;
            check(c.status.len() == len, || "send status length".into())?;
            // The blocking form returns at all.
            w.ssend(1, tag + 10, &pattern(7, len))?;
        } else if w.rank() == 1 {
            loop {
                if w.iprobe(0, tag)?.is_some() {
                    break;
                }
            }
            w.send(0, 20, &[0u8])?;
            w.recv(0, 21, &mut [0u8])?;
            let mut buf = vec![0u8; len];
            w.recv(0, tag, &mut buf)?;
            check(buf == pattern(tag as u64, len), || "issend payload".into())?;
            w.recv(0, tag + 10, &mut buf)?;
            check(buf == pattern(7, len), || "ssend payload".into())?;
        }
    }
    Ok(())
}

/// cancel withdraws a pending receive, and does nothing to a matched one.
pub(crate) fn cancel(w: &Comm) -> R {
    if w.rank() == 1 {
        w.send(0, 2, &[42u32])?;
        w.send(0, 5, &[0u8])?;
        w.recv(0, 3, &mut [0u8])?;
        w.send(0, 4, &[43u32])?;
        return Ok(());
    }
    let never = w.irecv(1, 1, vec![0u32; 1])?;
    check(never.cancel()?, || "cancel of a pending receive".into())?;
    let c = never.wait()?;
    check(c.status.is_cancelled(), || {
        "status must say cancelled".into()
    })?;
    // A matched receive cannot be cancelled: the tag-5 message comes after
    // the tag-2 one, so once it is in, the receive below has matched.
    let got = w.irecv(1, 2, vec![0u32; 1])?;
    w.recv(1, 5, &mut [0u8])?;
    check(!got.cancel()?, || {
        "cancel of a matched receive succeeded".into()
    })?;
    let c = got.wait()?;
    check(!c.status.is_cancelled() && c.buf == [42], || {
        format!("matched receive: {:?}", c.buf)
    })?;
    // A cancelled persistent receive can be started again.
    let mut p = w.recv_init(1, 4, vec![0u32; 1])?;
    p.start()?;
    check(p.cancel()?, || "cancel of a persistent receive".into())?;
    check(p.wait()?.is_cancelled(), || {
        "persistent cancelled status".into()
    })?;
    w.send(1, 3, &[0u8])?;
    p.start()?;
    check(
        !p.wait()?.is_cancelled() && p.buffer() == Some(&vec![43]),
        || "reused after cancel".into(),
    )?;
    Ok(())
}
