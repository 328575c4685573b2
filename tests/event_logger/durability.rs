//! What survives a crash of the logger: SIGKILL mid-stream, one of two
//! replicas lost and restarted, replicas brought level, fsync group commit,
//! checkpoint copies kept on every replica, dropped on a restart.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use vpml_event_logger::{Client, ClientError};

use super::{
    JOB, Logger, Opts, TempDir, assert_events, client_cfg, connect, event_for, events_for,
    put_stream, wait_until,
};

#[test]
fn sigkill_mid_stream_loses_no_acknowledged_event_and_clients_reconnect() {
    let dir = TempDir::new("sigkill");
    let logger = Logger::start(&dir, &Opts::default());
    let addr = logger.addr;
    let opts = Opts {
        listen: Some(addr),
        ..Opts::default()
    };
    let client = Arc::new(connect(vec![addr], 0, 0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = put_stream(Arc::clone(&client), Arc::clone(&stop));

    wait_until("10k durable events", || client.durable() >= 10_000);
    logger.kill();
    let acked_first_kill = client.durable();

    // Same port: the client reconnects by itself and resends what the dead
    // logger had not acknowledged.
    let logger = Logger::start(&dir, &opts);
    wait_until("the client to resume after the restart", || {
        client.durable() >= acked_first_kill + 10_000
    });
    logger.kill();
    stop.store(true, Ordering::Relaxed);
    let last_put = writer.join().expect("writer thread");
    let acked = client.durable();
    assert!(acked >= acked_first_kill + 10_000 && acked <= last_put);
    drop(client);

    // The rank "restarts": a new incarnation reads its events back.
    let logger = Logger::start(&dir, &opts);
    let reader = connect(vec![logger.addr], 0, 1);
    let highest = reader.last_id();
    assert!(
        highest >= acked,
        "logger holds up to {highest}, but {acked} were acknowledged"
    );
    let events = reader.get_events(1).expect("get events");
    assert_events(&events, 1, highest);
    // The restarted rank continues the numbering.
    let id = reader.put(&event_for(highest + 1)).expect("put");
    assert_eq!(id, highest + 1);
    reader.wait_durable(id).expect("durable after restart");
    reader.close().expect("close");
    let stderr = logger.stop();
    assert!(!stderr.contains("corrupt"), "{stderr}");
}

/// Two loggers in `<name>-a` and `<name>-b`, and rank 0's client of both
/// as replicas.
fn two_replicas(
    name: &str,
    survivors_acknowledge: bool,
) -> (TempDir, Logger, TempDir, Logger, Arc<Client>) {
    let dir_a = TempDir::new(&format!("{name}-a"));
    let dir_b = TempDir::new(&format!("{name}-b"));
    let a = Logger::start(&dir_a, &Opts::default());
    let b = Logger::start(&dir_b, &Opts::default());
    let mut cfg = client_cfg(vec![a.addr, b.addr], 0, 0);
    cfg.replicas = 2;
    cfg.survivors_acknowledge = survivors_acknowledge;
    let client = Arc::new(Client::connect(cfg).expect("connect"));
    assert_eq!(client.replicas(), &[a.addr, b.addr]);
    (dir_a, a, dir_b, b, client)
}

#[test]
fn with_two_replicas_one_logger_crash_loses_no_acknowledged_event() {
    let (_dir_a, a, _dir_b, b, client) = two_replicas("replica", false);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = put_stream(Arc::clone(&client), Arc::clone(&stop));
    wait_until("5k durable events", || client.durable() >= 5_000);
    let b_addr = b.addr;
    b.kill();
    stop.store(true, Ordering::Relaxed);
    let last = writer.join().expect("writer thread");
    let acked = client.durable();

    // With one replica gone nothing new can become durable, and the error
    // says which logger is missing.
    let id = client.put(&event_for(last + 1)).expect("put");
    let down = format!("logger {b_addr}: down");
    wait_until("the client to report the dead replica", || {
        match client.wait_durable_timeout(id, Duration::from_millis(50)) {
            Err(ClientError::Timeout { status, .. }) => status.contains(&down),
            other => panic!("expected a time-out, got {other:?}"),
        }
    });
    drop(client);

    // Everything acknowledged is on the survivor.
    let reader = connect(vec![a.addr], 0, 1);
    assert!(reader.last_id() >= acked);
    assert_events(&reader.get_events(1).expect("get"), 1, reader.last_id());
}

#[test]
fn with_two_replicas_the_survivor_acknowledges_and_a_restarted_logger_is_brought_level() {
    let (_dir_a, a, dir_b, b, client) = two_replicas("survivor", true);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = put_stream(Arc::clone(&client), Arc::clone(&stop));
    wait_until("5k durable events", || client.durable() >= 5_000);
    let b_addr = b.addr;
    b.kill();

    // With one replica gone the survivor acknowledges alone: puts go on
    // becoming durable.
    let before = client.durable();
    wait_until("events durable on the survivor alone", || {
        client.durable() > before + 1_000
    });
    stop.store(true, Ordering::Relaxed);
    let last = writer.join().expect("writer thread");
    client.wait_durable(last).expect("durable on the survivor");

    // The logger comes back on its address, from its files; the client
    // sends it what it missed while it was down.
    let opts = Opts {
        listen: Some(b_addr),
        ..Opts::default()
    };
    let b = Logger::start(&dir_b, &opts);
    let id = client.put(&event_for(last + 1)).expect("put");
    client.wait_durable(id).expect("durable");
    wait_until("the restarted logger to hold every event", || {
        client
            .stats()
            .is_ok_and(|s| s.iter().all(|r| r.rank_highest == id))
    });
    match Arc::try_unwrap(client) {
        Ok(c) => c.close().expect("close"),
        Err(_) => panic!("the writer thread still holds the client"),
    }
    for (name, addr) in [("a", a.addr), ("b", b.addr)] {
        let reader = connect(vec![addr], 0, 1);
        assert_eq!(reader.last_id(), last + 1, "logger {name}");
        assert_events(&reader.get_events(1).expect("get"), 1, last + 1);
    }
}

#[test]
fn replicas_are_brought_level_when_a_rank_restarts() {
    // Logger a holds 500 events of rank 0, logger b none (as if the previous
    // incarnation died before b got them); a client with both as replicas
    // copies them to b before adding its own.
    let dir_a = TempDir::new("level-a");
    let dir_b = TempDir::new("level-b");
    let a = Logger::start(&dir_a, &Opts::default());
    let b = Logger::start(&dir_b, &Opts::default());
    let solo = connect(vec![a.addr], 0, 0);
    let last = solo.put_batch(&events_for(1, 500)).expect("put");
    solo.wait_durable(last).expect("durable");
    solo.close().expect("close");

    let mut cfg = client_cfg(vec![a.addr, b.addr], 0, 1);
    cfg.replicas = 2;
    let both = Client::connect(cfg).expect("connect");
    assert_eq!(both.last_id(), 500);
    let id = both.put(&event_for(501)).expect("put");
    both.wait_durable(id).expect("durable on both");
    both.close().expect("close");
    let only_b = connect(vec![b.addr], 0, 2);
    assert_events(&only_b.get_events(1).expect("get"), 1, 501);
}

#[test]
fn fsync_mode_group_commits_and_survives_sigkill() {
    let dir = TempDir::new("fsync");
    let logger = Logger::start(
        &dir,
        &Opts {
            extra: &["--durability", "fsync"],
            ..Opts::default()
        },
    );
    let clients: Vec<Arc<Client>> = (0..4)
        .map(|r| Arc::new(connect(vec![logger.addr], r, 0)))
        .collect();
    let threads: Vec<_> = clients
        .iter()
        .map(|c| {
            let c = Arc::clone(c);
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let first = c.last_id() + 1;
                    let last = c.put_batch(&events_for(first, 20)).expect("put");
                    c.wait_durable(last).expect("durable");
                }
                c.last_id()
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().expect("client thread"), 1000);
    }
    let stats = clients[0].stats().expect("stats")[0].clone();
    assert!(stats.fsyncs >= 1 && stats.puts >= 200, "{stats:?}");
    drop(clients);
    logger.kill();
    let logger = Logger::start(&dir, &Opts::default());
    for r in 0..4 {
        let reader = connect(vec![logger.addr], r, 1);
        assert_eq!(reader.last_id(), 1000);
        assert_events(&reader.get_events(1).expect("get"), 1, 1000);
    }
}

#[test]
fn checkpoint_copies_are_kept_on_every_replica_and_read_back_from_a_survivor() {
    let dir_a = TempDir::new("copies-a");
    let dir_b = TempDir::new("copies-b");
    let a = Logger::start(&dir_a, &Opts::default());
    let b = Logger::start(&dir_b, &Opts::default());
    let mut cfg = client_cfg(vec![a.addr, b.addr], 0, 0);
    cfg.replicas = 2;
    let client = Client::connect(cfg).expect("connect");
    assert_eq!(client.load_copy(0).expect("load"), None);
    // Larger than one part, so it travels in several.
    let copy = |index: u64| -> Vec<u8> {
        (0..2_500_000u64)
            .map(|i| (i.wrapping_mul(index + 7) >> 3) as u8)
            .collect()
    };
    for index in 1..=3 {
        client.save_copy(index, &copy(index)).expect("save");
    }
    client.close().expect("close");
    a.kill();
    // Another rank's client (its restarted process on another host)
    // reads the newest copy from the logger that is left.
    let reader = connect(vec![b.addr], 1, 1);
    let (index, bytes) = reader.load_copy(0).expect("load").expect("a copy");
    assert_eq!(index, 3);
    assert!(bytes == copy(3), "the copy came back changed");
    reader.close().expect("close");
    let kept: Vec<String> =
        std::fs::read_dir(dir_b.data().join("jobs").join(JOB).join("0").join("copies"))
            .expect("copies dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
    assert_eq!(kept.len(), 2, "{kept:?}");
}

#[test]
fn a_restarted_rank_drops_newer_copies_and_its_predecessors_copies_are_refused() {
    let dir_a = TempDir::new("drop-a");
    let dir_b = TempDir::new("drop-b");
    let a = Logger::start(&dir_a, &Opts::default());
    let b = Logger::start(&dir_b, &Opts::default());
    let both = |incarnation: u32| {
        let mut cfg = client_cfg(vec![a.addr, b.addr], 0, incarnation);
        cfg.replicas = 2;
        Client::connect(cfg).expect("connect")
    };
    let old = both(0);
    for index in 4..=5 {
        old.save_copy(index, &[index as u8; 100]).expect("save");
    }
    // The next process restarts from 4: copy 5 goes; the one before it
    // may no longer add any.
    let new = both(1);
    new.drop_copies_above(4).expect("drop");
    assert!(
        old.save_copy(6, &[6; 100]).is_err(),
        "a replaced process saved a copy"
    );
    assert_eq!(new.load_copy(0).expect("load").map(|c| c.0), Some(4));
    // A copy that fails the caller's check on one replica is taken from
    // the other; refused everywhere, the reasons say so.
    std::fs::write(
        dir_a
            .data()
            .join("jobs")
            .join(JOB)
            .join("0")
            .join("copies")
            .join(format!("copy-{:020}", 4)),
        [0u8; 100],
    )
    .expect("damage the copy");
    let good = |b: &[u8]| {
        if b == [4u8; 100] {
            Ok(())
        } else {
            Err("damaged".to_string())
        }
    };
    assert_eq!(
        new.load_copy_at(0, 4, good).expect("load"),
        Some(vec![4u8; 100])
    );
    assert_eq!(new.load_copy_at(0, 5, good).expect("load"), None);
    let err = new
        .load_copy_at(0, 4, |_| Err("never".to_string()))
        .unwrap_err();
    assert_eq!(err.matches(": never").count(), 2, "{err}");
    new.close().expect("close");
    drop(old);
}
