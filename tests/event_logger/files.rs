//! The logger's files: a full disk, a torn tail, corruption in the middle
//! and repair, truncation.

use std::net::SocketAddr;

use vpml_event_logger::wire::ErrorCode;
use vpml_event_logger::{ClientError, EventId};

use super::{Logger, Opts, TempDir, assert_events, connect, event_for, events_for, logger_command};

#[test]
fn full_disk_gives_errors_and_never_an_ack() {
    let dir = TempDir::new("full");
    let opts = Opts {
        file_size_limit: Some(64 << 10),
        ..Opts::default()
    };
    let logger = Logger::start(&dir, &opts);
    let client = connect(vec![logger.addr], 0, 0);
    let mut failure = None;
    for _ in 0..1000 {
        let first = client.last_id() + 1;
        let last = client.put_batch(&events_for(first, 100)).expect("queued");
        if let Err(e) = client.wait_durable(last) {
            failure = Some((e, first));
            break;
        }
    }
    let (err, first_failed) = failure.expect("the 64 KiB limit was never hit");
    assert!(
        matches!(&err, ClientError::Refused { code: ErrorCode::Storage, message, .. } if message.contains("File too large")),
        "{err}"
    );
    let acked = client.durable();
    assert_eq!(
        acked,
        first_failed - 1,
        "events of the failed put were acknowledged"
    );
    // The client refuses to go on without the guarantee.
    assert_eq!(client.put(&event_for(1)).unwrap_err(), err);
    drop(client);
    logger.wait_stderr("File too large");

    // The logger stays up for the others, and its files hold whole records
    // only: a restart finds no torn or corrupt record.
    let other = connect(vec![logger.addr], 1, 0);
    let id = other.put(&event_for(1)).expect("put");
    other.wait_durable(id).expect("another rank still works");
    drop(other);
    let stderr = logger.stop();
    let logger = Logger::start(&dir, &Opts::default());
    let reader = connect(vec![logger.addr], 0, 1);
    let highest = reader.last_id();
    assert_eq!(highest, acked, "the failed put left events behind");
    assert_events(&reader.get_events(1).expect("get"), 1, highest);
    drop(reader);
    let restart = logger.stop();
    assert!(
        !restart.contains("torn") && !restart.contains("corrupt"),
        "{stderr}\n{restart}"
    );
}

fn fill(addr: SocketAddr, rank: u32, n: u64, batch: u64) -> EventId {
    let client = connect(vec![addr], rank, 0);
    let mut last = 0;
    while last < n {
        // One batch per record: wait before the next put.
        last = client
            .put_batch(&events_for(last + 1, batch.min(n - last)))
            .expect("put");
        client.wait_durable(last).expect("durable");
    }
    client.close().expect("close");
    last
}

#[test]
fn a_torn_tail_is_cut_with_a_warning() {
    let dir = TempDir::new("torn");
    let logger = Logger::start(&dir, &Opts::default());
    fill(logger.addr, 0, 100, 10);
    logger.stop();
    let seg = dir.segments(0).pop().expect("a segment");
    let len = std::fs::metadata(&seg).expect("meta").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .and_then(|f| f.set_len(len - 7))
        .expect("cut the file");

    let logger = Logger::start(&dir, &Opts::default());
    logger.wait_stderr("cutting a torn record");
    let reader = connect(vec![logger.addr], 0, 1);
    assert_eq!(reader.last_id(), 90, "the last batch of 10 was torn");
    assert_events(&reader.get_events(1).expect("get"), 1, 90);
    let id = reader.put_batch(&events_for(91, 5)).expect("put");
    reader.wait_durable(id).expect("durable");
    assert_events(&reader.get_events(80).expect("get"), 80, 95);
}

#[test]
fn corruption_in_the_middle_stops_startup_and_repair_recovers() {
    let dir = TempDir::new("corrupt");
    let small = Opts {
        extra: &["--segment-bytes", "4096"],
        ..Opts::default()
    };
    let logger = Logger::start(&dir, &small);
    fill(logger.addr, 0, 2000, 20);
    logger.stop();
    let segs = dir.segments(0);
    assert!(segs.len() > 4, "{} segments", segs.len());
    let victim = &segs[1];
    let mut bytes = std::fs::read(victim).expect("read");
    let at = bytes.len() / 2;
    bytes[at] ^= 0xff;
    std::fs::write(victim, &bytes).expect("write");

    let out = logger_command(&dir, &small).output().expect("run logger");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.lines().last().unwrap_or_default();
    assert!(
        line.starts_with("vpml event-logger: ") && line.contains(&victim.display().to_string()),
        "{stderr}"
    );
    let offset: usize = line
        .split("corrupt record at offset ")
        .nth(1)
        .and_then(|s| s.split(':').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no offset in {line:?}"));
    assert!(
        offset <= at && at - offset < 20 * 60 + 36,
        "offset {offset}, damage at {at}"
    );

    let repair = Opts {
        extra: &["--segment-bytes", "4096", "--repair"],
        ..Opts::default()
    };
    let logger = Logger::start(&dir, &repair);
    logger.wait_stderr("repair: cutting the log at a corrupt record");
    let reader = connect(vec![logger.addr], 0, 1);
    let highest = reader.last_id();
    assert!(highest > 0 && highest < 2000, "kept {highest}");
    assert_events(&reader.get_events(1).expect("get"), 1, highest);
    let id = reader.put(&event_for(highest + 1)).expect("put");
    reader.wait_durable(id).expect("durable after repair");
    let set_aside = std::fs::read_dir(victim.parent().expect("dir"))
        .expect("dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().to_string_lossy().ends_with(".corrupt"))
        })
        .count();
    assert_eq!(set_aside, segs.len() - 2, "later segments are set aside");
}

#[test]
fn truncate_reclaims_whole_segments() {
    let dir = TempDir::new("truncate");
    let opts = Opts {
        extra: &["--segment-bytes", "4096"],
        ..Opts::default()
    };
    let logger = Logger::start(&dir, &opts);
    let client = connect(vec![logger.addr], 0, 0);
    let mut last = 0;
    while last < 3000 {
        last = client.put_batch(&events_for(last + 1, 30)).expect("put");
    }
    client.wait_durable(last).expect("durable");
    let before = dir.segments(0).len();
    assert_eq!(
        client.stats().expect("stats")[0].rank_segments,
        before as u64
    );
    let (files, bytes) = client.truncate(2000).expect("truncate");
    assert!(files > 0 && bytes > 0);
    let after = dir.segments(0).len();
    assert_eq!(after, before - files as usize);
    let stats = &client.stats().expect("stats")[0];
    let first_kept = stats.rank_first_kept;
    assert!(
        first_kept > 1 && first_kept <= 2001,
        "first kept {first_kept}"
    );
    assert_events(&client.get_events(1).expect("get"), first_kept, 3000);
    assert!(
        client.truncate(last + 1).is_err(),
        "cannot truncate what is not durable"
    );
    client.close().expect("close");

    // The state survives a restart, and ids continue after a full truncate.
    logger.stop();
    let logger = Logger::start(&dir, &opts);
    let client = connect(vec![logger.addr], 0, 1);
    assert_eq!(client.last_id(), 3000);
    assert_eq!(
        client.stats().expect("stats")[0].rank_first_kept,
        first_kept
    );
    client.truncate(3000).expect("truncate all");
    assert_eq!(dir.segments(0).len(), 1);
    assert_eq!(client.get_events(1).expect("get"), vec![]);
    let id = client.put(&event_for(3001)).expect("put");
    assert_eq!(id, 3001);
    client.wait_durable(id).expect("durable");
    assert_events(&client.get_events(1).expect("get"), 3001, 3001);
}
