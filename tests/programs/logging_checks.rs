//! Rank program for `tests/pessimist.rs`: `logging-checks MODE`.
//!
//! Each mode runs one family of non-deterministic constructs and prints,
//! for every event the pessimist protocol must log, one line
//! `event RANK KIND …` computed from what the program itself observed
//! (call ids come from `Request::call_id` and `Comm::last_call_id`). The
//! test compares these lines with the events the logger actually stored.

use vpml::protocol::CallId;
use vpml::{ANY_SOURCE, ANY_TAG, Comm, Request, Sum};

type R = Result<(), Box<dyn std::error::Error>>;

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let world = match vpml::init() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("init: {e}");
            std::process::exit(3);
        }
    };
    let r = match mode.as_str() {
        "named" => named(&world),
        "any" => any(&world),
        "completion" => completion(&world),
        "probe" => probe(&world),
        "cancel" => cancel(&world),
        "commit" => commit(&world),
        "commit-none-run" => commit_none_run(&world),
        "payloads" => payloads(&world),
        other => Err(format!("unknown mode {other:?}").into()),
    };
    if let Err(e) = r {
        eprintln!("logging-checks {mode} failed on rank {}: {e}", world.rank());
        std::process::exit(1);
    }
    let rank = world.rank();
    if let Err(e) = world.finalize() {
        eprintln!("finalize: {e}");
        std::process::exit(1);
    }
    if rank == 0 {
        println!("ok {mode}");
    }
}

fn ev(w: &Comm, what: String) {
    println!("event {} {what}", w.rank());
}

/// The Probe event the last probe call must have logged.
fn probed(w: &Comm, st: &vpml::Status) {
    ev(
        w,
        format!(
            "probe {} {} {} {}",
            w.last_call_id(),
            st.source(),
            st.tag(),
            st.len()
        ),
    );
}

fn ids<T: vpml::Buffer>(reqs: &[Option<Request<T>>], idx: &[usize]) -> Vec<CallId> {
    idx.iter()
        .filter_map(|&i| reqs[i].as_ref().map(|r| r.call_id()))
        .collect()
}

fn list(v: &[CallId]) -> String {
    v.iter()
        .map(CallId::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Named sources, wait, wait_all, blocking calls and collectives: nothing to log.
fn named(w: &Comm) -> R {
    let (r, n) = (w.rank(), w.size());
    let (right, left) = ((r + 1) % n, (r + n - 1) % n);
    for round in 0..20u64 {
        let mut reqs = vec![
            Some(w.irecv(left, 1, vec![0u64; 4])?),
            Some(w.isend(right, 1, vec![round; 4])?),
        ];
        vpml::wait_all(&mut reqs)?;
        let rr = w.irecv(left, 2, vec![0u8; 100_000])?;
        w.send(right, 2, &vec![round as u8; 100_000])?;
        rr.wait()?;
        let mut one = [Some(w.irecv(left, 3, vec![0u32])?)];
        w.ssend(right, 3, &[7u32])?;
        vpml::wait(&mut one[0])?;
        let mut s = [0u64];
        w.allreduce(&[round], &mut s, &Sum)?;
        w.barrier()?;
        let mut b = [round; 3];
        w.bcast(&mut b, round as usize % n)?;
        // A test of sends that completed when they started is determined.
        let mut sends = [Some(w.isend(right, 4, vec![1u8])?)];
        while vpml::test_any(&mut sends)?.is_none() {}
        w.recv(left, 4, &mut [0u8])?;
    }
    Ok(())
}

/// ANY_SOURCE receives, blocking and not, including irecv → send → wait.
fn any(w: &Comm) -> R {
    let n = w.size();
    if w.rank() == 0 {
        for _ in 0..2 * (n - 1) {
            let st = w.recv(ANY_SOURCE, 1, &mut [0u64])?;
            ev(w, format!("match {} {}", w.last_call_id(), st.source()));
        }
        let r = w.irecv(ANY_SOURCE, ANY_TAG, vec![0u8; 8])?;
        let id = r.call_id();
        w.send(1, 3, &[1u8])?;
        let done = r.wait()?;
        ev(w, format!("match {id} {}", done.status.source()));
    } else {
        w.send(0, 1, &[1u64])?;
        w.send(0, 1, &[2u64])?;
        if w.rank() == 1 {
            w.recv(0, 3, &mut [0u8])?;
            w.send(0, 2, &[5u8])?;
        }
    }
    Ok(())
}

/// The wait/test family: delivery sets, lazily logged runs of failures.
fn completion(w: &Comm) -> R {
    if w.rank() == 1 {
        let go = |tag: i32| w.recv(0, tag, &mut [0u8]);
        go(100)?;
        w.send(0, 5, &[5u8])?;
        go(101)?;
        for t in [10, 11, 12, 13] {
            w.send(0, t, &[t as u8])?;
        }
        go(102)?;
        for t in [20, 21, 22] {
            w.send(0, t, &[t as u8])?;
        }
        go(103)?;
        w.send(0, 30, &[30u8])?;
        let mut b = [0u8];
        w.recv(0, 40, &mut b)?;
        go(104)?;
        w.send(0, 60, &[60u8])?;
        w.recv(0, 61, &mut b)?;
        return Ok(());
    }
    if w.rank() != 0 {
        return Ok(());
    }
    // A: five failed tests, then a send: one NoneRun covering them.
    let mut r5 = [Some(w.irecv(1, 5, vec![0u8])?)];
    let mut calls = Vec::new();
    for _ in 0..5 {
        if vpml::test(&mut r5[0])?.is_some() {
            return Err("a test succeeded before the message was sent".into());
        }
        calls.push(w.last_call_id());
    }
    w.send(1, 100, &[0u8])?;
    ev(w, format!("none_run {} {}", calls[0], calls[4]));
    vpml::wait(&mut r5[0])?;
    // B: test_some over three arrived messages reports all three.
    let mut rs: Vec<Option<Request<Vec<u8>>>> = (10..13)
        .map(|t| w.irecv(1, t, vec![0u8]).map(Some))
        .collect::<Result<_, _>>()?;
    w.send(1, 101, &[0u8])?;
    w.recv(1, 13, &mut [0u8])?;
    let all = ids(&rs, &[0, 1, 2]);
    let got = vpml::test_some(&mut rs)?;
    if got.len() != 3 {
        return Err(format!("test_some reported {} of 3", got.len()).into());
    }
    ev(w, format!("delivery {} {}", w.last_call_id(), list(&all)));
    // C: wait_any, then test_any, then test_all.
    let mut rs: Vec<Option<Request<Vec<u8>>>> = (20..22)
        .map(|t| w.irecv(1, t, vec![0u8]).map(Some))
        .collect::<Result<_, _>>()?;
    let ids20 = ids(&rs, &[0, 1]);
    w.send(1, 102, &[0u8])?;
    w.recv(1, 22, &mut [0u8])?;
    let (i, _) = vpml::wait_any(&mut rs)?.ok_or("wait_any")?;
    ev(w, format!("delivery {} {}", w.last_call_id(), ids20[i]));
    let (j, _) = vpml::test_any(&mut rs)?.ok_or("test_any")?;
    ev(w, format!("delivery {} {}", w.last_call_id(), ids20[j]));
    // D: failed tests followed by a success with no send in between: the
    // run is dropped, only the success is logged.
    let mut r30 = [Some(w.irecv(1, 30, vec![0u8])?)];
    let id30 = ids(&r30, &[0]);
    w.send(1, 103, &[0u8])?;
    loop {
        if vpml::test_all(&mut r30)?.is_some() {
            ev(w, format!("delivery {} {}", w.last_call_id(), list(&id30)));
            break;
        }
    }
    // E: an issend is not complete at start; wait_some reports it.
    let mut s = [Some(w.issend(1, 40, vec![1u8])?)];
    let sid = ids(&s, &[0]);
    let done = vpml::wait_some(&mut s)?;
    if done.len() != 1 {
        return Err("wait_some on the issend".into());
    }
    ev(w, format!("delivery {} {}", w.last_call_id(), list(&sid)));
    // F: wait_any over a pending receive and a send that completed when it
    // started: the answer depends on the receive being pending, so it is
    // logged although the request it returns is such a send.
    let r60 = w.irecv(1, 60, vec![0u8])?;
    let s61 = w.isend(1, 61, vec![61u8])?;
    let s61_id = s61.call_id();
    let mut mix = vec![Some(r60), Some(s61)];
    let (i, _) = vpml::wait_any(&mut mix)?.ok_or("wait_any")?;
    if i != 1 {
        return Err("wait_any returned the receive nobody had sent yet".into());
    }
    ev(w, format!("delivery {} {s61_id}", w.last_call_id()));
    w.send(1, 104, &[0u8])?;
    vpml::wait(&mut mix[0])?;
    Ok(())
}

/// iprobe always logs (failures lazily); probe logs with ANY_SOURCE only.
fn probe(w: &Comm) -> R {
    if w.rank() == 1 {
        w.recv(0, 100, &mut [0u8])?;
        w.send(0, 7, &[1u8; 33])?;
        w.send(0, 8, &[2u8; 44])?;
        w.send(0, 9, &[3u8; 55])?;
        return Ok(());
    }
    if w.rank() != 0 {
        return Ok(());
    }
    if w.iprobe(1, 7)?.is_some() {
        return Err("iprobe found a message nobody sent yet".into());
    }
    let failed = w.last_call_id();
    w.send(1, 100, &[0u8])?;
    ev(w, format!("none_run {failed} {failed}"));
    let st = w.probe(ANY_SOURCE, 7)?;
    probed(w, &st);
    w.recv(1, 7, &mut [0u8; 33])?;
    w.probe(1, 8)?;
    w.recv(1, 8, &mut [0u8; 44])?;
    loop {
        if let Some(st) = w.iprobe(ANY_SOURCE, 9)? {
            probed(w, &st);
            break;
        }
    }
    w.recv(1, 9, &mut [0u8; 55])?;
    Ok(())
}

/// cancel of a pending receive and of a matched one.
fn cancel(w: &Comm) -> R {
    if w.rank() == 1 {
        w.send(0, 51, &[1u8])?;
        w.send(0, 52, &[2u8])?;
        return Ok(());
    }
    if w.rank() != 0 {
        return Ok(());
    }
    let never = w.irecv(1, 50, vec![0u8])?;
    let request = never.call_id();
    let c = never.cancel()?;
    ev(
        w,
        format!("cancel {} {request} {}", w.last_call_id(), u8::from(c)),
    );
    never.wait()?;
    let matched = w.irecv(1, 51, vec![0u8])?;
    let request = matched.call_id();
    w.recv(1, 52, &mut [0u8])?;
    let c = matched.cancel()?;
    ev(
        w,
        format!("cancel {} {request} {}", w.last_call_id(), u8::from(c)),
    );
    matched.wait()?;
    Ok(())
}

/// For the commit-rule test: rank 0 creates an event (ANY_SOURCE match)
/// once told on stdin, then sends; rank 1 reports when the send arrives.
fn commit(w: &Comm) -> R {
    // Every rank has finished its logger handshake before the test may stop
    // the logger.
    w.barrier()?;
    if w.rank() == 1 {
        w.send(0, 1, &[1u8])?;
        w.recv(0, 2, &mut [0u8])?;
        println!("rank 1 got the reply");
        return Ok(());
    }
    if w.rank() != 0 {
        return Ok(());
    }
    println!("rank 0 ready");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    w.recv(ANY_SOURCE, 1, &mut [0u8])?;
    println!("rank 0 sending the reply");
    w.send(1, 2, &[0u8])?;
    Ok(())
}

/// As [`commit`], with a failed test as the event: a lazily logged run of
/// failures must still be durable before the next send leaves, also when
/// sends before it needed nothing from the protocol.
fn commit_none_run(w: &Comm) -> R {
    w.barrier()?;
    if w.rank() == 1 {
        w.recv(0, 2, &mut [0u8])?;
        println!("rank 1 got the reply");
        // Completes rank 0's receive, only now.
        w.send(0, 3, &[3u8])?;
        for _ in 0..4 {
            w.recv(0, 4, &mut [0u8])?;
        }
        return Ok(());
    }
    if w.rank() != 0 {
        return Ok(());
    }
    // Sends with nothing pending first: the common, cheap case.
    for k in 0..4u8 {
        w.send(1, 4, &[k])?;
    }
    println!("rank 0 ready");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let mut r = [Some(w.irecv(1, 3, vec![0u8])?)];
    // Rank 1 sends tag 3 only after the reply: this test fails.
    if vpml::test(&mut r[0])?.is_some() {
        return Err("the test succeeded before the message was sent".into());
    }
    println!("rank 0 sending the reply");
    w.send(1, 2, &[0u8])?;
    vpml::wait(&mut r[0])?;
    Ok(())
}

/// Known payloads for reading the sender logs back after the job.
fn payloads(w: &Comm) -> R {
    let (r, n) = (w.rank(), w.size());
    let right = (r + 1) % n;
    let left = (r + n - 1) % n;
    for k in 0..30usize {
        let len = (k * 977) % 50_000;
        let data: Vec<u8> = (0..len).map(|i| (i * 31 + k + r) as u8).collect();
        let rr = w.irecv(left, k as i32, vec![0u8; len])?;
        w.send(right, k as i32, &data)?;
        rr.wait()?;
    }
    Ok(())
}
