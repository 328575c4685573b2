//! Tests of the log as a whole (the pieces' own tests sit with them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;
use crate::format::{RECORD_HEADER, SEGMENT_HEADER, record_span};
use crate::memory::{PAGE, POPULATE_STEP};
use crate::segment::SPARE_SEGMENTS;

/// A fresh path for a log directory (not created yet), under a temporary
/// directory that goes away with the returned guard.
fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let guard = tempfile::Builder::new()
        .prefix("vpml-slog-")
        .tempdir()
        .expect("a temporary directory");
    let dir = guard.path().join(name);
    (guard, dir)
}

/// How many different segment indexes `segments` names.
fn distinct(segments: impl Iterator<Item = u64>) -> usize {
    segments.collect::<std::collections::BTreeSet<u64>>().len()
}

pub(crate) fn hdr(dest: u32, seq: u64) -> RecordHeader {
    RecordHeader {
        dest,
        context: 0,
        tag: (seq % 7) as i32,
        seq,
    }
}

#[test]
fn each_destination_and_context_is_a_stream_of_its_own() {
    let (_tmp, dir) = tmp("streams");
    let mut log = SenderLog::create(&dir, 0, 1 << 16).unwrap();
    let on = |context, seq| RecordHeader {
        dest: 1,
        context,
        tag: seq as i32,
        seq,
    };
    // Two threads' communicators interleaved: context 0 gets 1..=5,
    // context 547 gets 1..=3.
    for (context, seq) in [
        (0, 1),
        (547, 1),
        (0, 2),
        (0, 3),
        (547, 2),
        (0, 4),
        (547, 3),
        (0, 5),
    ] {
        log.append(on(context, seq), &[context as u8, seq as u8])
            .unwrap();
    }
    assert_eq!(log.contexts_to(1), vec![0, 547]);
    assert_eq!(log.records_to(1), 8);
    let seqs = |log: &SenderLog, context, from| -> Vec<u64> {
        log.iter_from(1, context, from)
            .map(|r| r.unwrap().header.seq)
            .collect()
    };
    assert_eq!(seqs(&log, 547, 2), vec![2, 3]);
    assert_eq!(seqs(&log, 0, 4), vec![4, 5]);
    let r = log.get(1, 547, 3).unwrap().unwrap();
    assert_eq!((r.header.context, r.payload), (547, &[35u8, 3][..]));
    assert!(log.get(1, 547, 4).unwrap().is_none());
    // Freeing one stream leaves the other.
    log.free_up_to(1, 0, 5).unwrap();
    assert_eq!(log.records_to(1), 3);
    assert_eq!(log.contexts_to(1), vec![547]);
    drop(log);
    // A restarted process keeps, per stream, what its checkpoint had sent
    // (freed records still in a kept segment come back: harmless).
    let again = SenderLog::reopen(&dir, 0, 1 << 16, |_, c| if c == 547 { 2 } else { 3 }).unwrap();
    assert_eq!(seqs(&again, 547, 0), vec![1, 2]);
    assert_eq!(seqs(&again, 0, 0), vec![1, 2, 3]);
}

#[test]
fn an_out_of_range_destination_is_refused_on_append_and_on_read() {
    let (_tmp, dir) = tmp("dest-range");
    let mut log = SenderLog::create(&dir, 0, 1 << 16).unwrap();
    let err = log
        .append(hdr(MAX_DESTINATIONS, 1), b"x")
        .expect_err("rank past the bound");
    assert!(
        err.to_string().contains("destination rank 1048576"),
        "{err}"
    );
    log.append(hdr(1000, 1), b"far rank").unwrap();
    log.append(hdr(2, 1), b"two").unwrap();
    assert_eq!(log.destinations(), vec![2, 1000]);
    assert_eq!(
        log.get(1000, 0, 1).unwrap().map(|r| r.payload),
        Some(&b"far rank"[..])
    );
    drop(log);
    // A damaged file whose header sum still matches names the rank.
    let path = segment_path(&dir, 0);
    let mut bytes = std::fs::read(&path).unwrap();
    let h = SEGMENT_HEADER;
    bytes[h + 4..h + 8].copy_from_slice(&u32::MAX.to_le_bytes());
    let sum = crc32c::crc32c(&bytes[h..h + 40]);
    bytes[h + 40..h + 44].copy_from_slice(&sum.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let err = SenderLog::open_read_only(&dir)
        .err()
        .expect("damaged record refused");
    assert!(
        err.to_string()
            .contains("destination rank 4294967295 out of range in the record at offset 64"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_segment_takes_memory_only_as_records_reach_it() {
    use std::os::unix::fs::MetadataExt;
    let (_tmp, dir) = tmp("lazy");
    let mut log = SenderLog::create(&dir, 0, 16 << 20).unwrap();
    log.append(hdr(1, 1), &[1u8; 100]).unwrap();
    let file = segment_path(&dir, 0);
    let taken = |f: &Path| std::fs::metadata(f).unwrap().blocks() * 512;
    let first = taken(&file);
    assert!(
        first <= (POPULATE_STEP + PAGE) as u64,
        "a 16 MiB segment took {first} bytes for one record"
    );
    // Records far past the first step still land on taken memory.
    for seq in 2..=200u64 {
        log.append(hdr(1, seq), &[seq as u8; 4000]).unwrap();
    }
    assert!(
        taken(&file) < 4 << 20,
        "200 records took {} bytes",
        taken(&file)
    );
    let r = log.get(1, 0, 200).unwrap().unwrap();
    assert_eq!(r.payload, &[200u8; 4000][..]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_record_lands_on_taken_memory_and_ready_room_is_exact() {
    let (_tmp, dir) = tmp("ready");
    let mut log = SenderLog::create(&dir, 0, 1 << 20).unwrap();
    assert_eq!(log.ready_below(), 0, "nothing is ready before a record");
    let mut promised = 0;
    // Sizes that cross populate steps and segment ends at odd places,
    // through both of `reserve`'s paths, with idle moments between.
    for seq in 1..=3000u64 {
        let len = (seq as usize * 7919) % 5000;
        let below = log.ready_below();
        if below > 0 {
            assert!(record_span(below - 1) <= log.ready);
            assert!(record_span(below) > log.ready);
        }
        let before = (log.current, log.segment_count(), log.ready);
        log.reserve(len).unwrap();
        if len < below {
            // Promised by `ready_below`: no work, nothing moved.
            assert_eq!((log.current, log.segment_count(), log.ready), before);
            promised += 1;
        }
        log.append(hdr(1, seq), &vec![seq as u8; len]).unwrap();
        if seq % 7 == 0 {
            log.warm_up(4096);
        }
        let seg = log.segments.get(&log.current.unwrap()).unwrap();
        assert!(
            seg.used + RECORD_HEADER <= seg.populated,
            "record {seq} ends at {} past taken memory {}",
            seg.used,
            seg.populated
        );
        assert!(log.ready <= seg.ready());
    }
    assert!(promised > 1000, "only {promised} appends took the promise");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn memory_already_taken_is_reused_before_more_is_taken() {
    use std::os::unix::fs::MetadataExt;
    let (_tmp, dir) = tmp("retake");
    let taken = |f: &Path| std::fs::metadata(f).unwrap().blocks() * 512;
    let mut log = SenderLog::create(&dir, 0, 1 << 20).unwrap();
    // Fill segment 0 (all of it taken), start segment 1, then free
    // segment 0's records: it becomes a spare with its memory.
    let mut seq = 0u64;
    while log.segment_count() < 2 {
        seq += 1;
        log.append(hdr(1, seq), &[7u8; 1000]).unwrap();
    }
    let first_of_segment_1 = seq;
    log.free_up_to(1, 0, first_of_segment_1 - 1).unwrap();
    assert_eq!(log.segment_count(), 1);
    let segment_1 = segment_path(&dir, 1);
    let before = taken(&segment_1);
    assert!(before < 1 << 20, "segment 1 took {before} bytes at once");
    // Log on past segment 1's taken memory: the spare's is used
    // instead, and segment 1 takes no more.
    let (_, reused_before) = log.segments_started();
    while log.segments_started().1 == reused_before {
        seq += 1;
        log.append(hdr(1, seq), &[8u8; 1000]).unwrap();
        assert!(seq < first_of_segment_1 + 2000, "the spare was never used");
    }
    assert_eq!(taken(&segment_1), before, "segment 1 took more memory");
    // Every record reads back, across the switch.
    for s in first_of_segment_1..=seq {
        let r = log.get(1, 0, s).unwrap().unwrap();
        assert_eq!(r.payload.len(), 1000);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_reserved_record_goes_where_the_reservation_said() {
    let (_tmp, dir) = tmp("reserve");
    let mut log = SenderLog::create(&dir, 0, 4096).unwrap();
    let mut starts = Vec::new();
    for seq in 1..=40u64 {
        let seg = log.reserve(1000).unwrap();
        let (loc, _) = log.append_stored(hdr(1, seq), &[seq as u8; 1000]).unwrap();
        assert_eq!(loc.segment, seg);
        starts.push(seg);
    }
    assert!(
        starts.windows(2).any(|w| w[0] != w[1]),
        "segments must roll over"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn records_come_back_by_destination_and_sequence() {
    let (_tmp, dir) = tmp("basic");
    let mut log = SenderLog::create(&dir, 3, 4096).unwrap();
    for seq in 1..=50u64 {
        for dest in 0..3u32 {
            let payload = vec![(seq as u8).wrapping_add(dest as u8); (seq as usize * 13) % 300];
            log.append(hdr(dest, seq), &payload).unwrap();
        }
    }
    assert!(log.segment_count() > 1, "small segments must roll over");
    let r = log.get(1, 0, 17).unwrap().unwrap();
    assert_eq!(r.header, hdr(1, 17));
    assert_eq!(r.payload, vec![18u8; 17 * 13].as_slice());
    let seqs: Vec<u64> = log
        .iter_from(2, 0, 45)
        .map(|r| r.unwrap())
        .map(|r| r.header.seq)
        .collect();
    assert_eq!(seqs, vec![45, 46, 47, 48, 49, 50]);
    assert!(log.get(7, 0, 1).unwrap().is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn freeing_every_destination_reclaims_whole_segments() {
    let (_tmp, dir) = tmp("free");
    let mut log = SenderLog::create(&dir, 0, 4096).unwrap();
    for seq in 1..=100u64 {
        log.append(hdr(1, seq), &[1u8; 200]).unwrap();
        log.append(hdr(2, seq), &[2u8; 200]).unwrap();
    }
    let before = log.segment_count();
    assert_eq!(
        log.free_up_to(1, 0, 100).unwrap(),
        0,
        "dest 2 still needs every segment"
    );
    let freed = log.free_up_to(2, 0, 60).unwrap();
    assert!(freed > 0 && log.segment_count() == before - freed);
    assert!(log.get(2, 0, 60).unwrap().is_none() && log.get(2, 0, 61).unwrap().is_some());
    let names = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let in_log = names(&dir).iter().filter(|n| n.starts_with("seg-")).count();
    assert_eq!(in_log, log.segment_count());
    let spares = |dir: &Path| {
        names(dir)
            .iter()
            .filter(|n| n.starts_with(".seg-spare-"))
            .count()
    };
    // Freed segments are set aside for reuse: all of them, as live and
    // spare segments together stay within the log's peak.
    assert_eq!(spares(&dir), freed);
    // Never more: a log that shrinks for good gives memory back.
    log.free_up_to(2, 0, 100).unwrap();
    assert!(spares(&dir) > freed);
    assert!(spares(&dir) + log.segment_count() <= before.max(SPARE_SEGMENTS));
    drop(log);
    assert!(
        names(&dir).iter().all(|n| n.starts_with("seg-")),
        "spares are deleted with the log: {:?}",
        names(&dir)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_reader_sees_what_was_written_and_ignores_a_torn_tail() {
    let (_tmp, dir) = tmp("reader");
    let mut log = SenderLog::create(&dir, 5, 1 << 16).unwrap();
    for seq in 1..=20u64 {
        log.append(hdr(0, seq), &vec![seq as u8; 1000]).unwrap();
    }
    // Simulate a crash after a payload but before its header.
    let last = log.append(hdr(0, 21), &[9u8; 64]).unwrap();
    let seg = segment_path(&dir, last.segment);
    drop(log);
    let mut bytes = std::fs::read(&seg).unwrap();
    let hdr_at = last.offset as usize - RECORD_HEADER;
    bytes[hdr_at..hdr_at + RECORD_HEADER].fill(0);
    std::fs::write(&seg, &bytes).unwrap();
    let r = SenderLog::open_read_only(&dir).unwrap();
    assert_eq!(r.rank(), 5);
    assert_eq!(
        r.iter_from(0, 0, 1)
            .collect::<Result<Vec<_>>>()
            .unwrap()
            .len(),
        20
    );
    assert_eq!(
        r.get(0, 0, 20).unwrap().unwrap().payload,
        vec![20u8; 1000].as_slice()
    );
    // Damage in the middle is an error naming the file and offset.
    bytes[SEGMENT_HEADER + RECORD_HEADER + 10] ^= 0xff;
    std::fs::write(&seg, &bytes).unwrap();
    let err = SenderLog::open_read_only(&dir).err().unwrap().to_string();
    let name = seg.file_name().unwrap().to_string_lossy().into_owned();
    assert!(err.contains(&name) && err.contains("offset 64"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_reused_segment_never_shows_its_old_records() {
    let (_tmp, dir) = tmp("reuse");
    let mut log = SenderLog::create(&dir, 2, 4096).unwrap();
    for seq in 1..=100u64 {
        log.append(hdr(0, seq), &[seq as u8; 300]).unwrap();
    }
    let current = log.get(0, 0, 100).unwrap().unwrap().location.segment;
    let mut want: Vec<u64> = (1..=100)
        .filter(|&s| log.get(0, 0, s).unwrap().unwrap().location.segment == current)
        .collect();
    assert!(log.free_up_to(0, 0, 100).unwrap() >= SPARE_SEGMENTS);
    // Shorter records: the reused segments keep whole old records
    // after the new ones.
    let mut reused = false;
    for seq in 101..=120u64 {
        let at = log.append(hdr(0, seq), &[!(seq as u8); 10]).unwrap();
        reused |= at.segment > current;
    }
    assert!(reused, "later records go to a reused segment");
    want.extend(101..=120);
    let seqs = |dir: &Path| -> Vec<u64> {
        let r = SenderLog::open_read_only(dir).unwrap();
        let mut v: Vec<u64> = r
            .iter_from(0, 0, 0)
            .map(|r| r.unwrap())
            .map(|r| r.header.seq)
            .collect();
        v.sort();
        v
    };
    assert_eq!(seqs(&dir), want);
    let r = SenderLog::open_read_only(&dir).unwrap();
    assert_eq!(r.get(0, 0, 120).unwrap().unwrap().payload, &[!120u8; 10]);
    // A crash between payload and header of the last record: the
    // chain ends before it, not at the old bytes behind it.
    let last = log.get(0, 0, 120).unwrap().unwrap().location;
    let hdr_at = last.offset as usize - RECORD_HEADER;
    let seg = segment_path(&dir, last.segment);
    drop(r);
    drop(log);
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[hdr_at..hdr_at + RECORD_HEADER].fill(0);
    std::fs::write(&seg, &bytes).unwrap();
    want.pop();
    assert_eq!(seqs(&dir), want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_memory_log_spills_to_a_file_and_a_new_log_restores_what_it_keeps() {
    let (_tmp, dir) = tmp("spill");
    std::fs::create_dir_all(&dir).unwrap();
    let mut log = SenderLog::create_in_memory(3, 8192);
    let body = |d: u32, seq: u64| vec![(d as u8) ^ (seq as u8); (seq as usize * 131) % 3000];
    for seq in 1..=20u64 {
        for d in [0u32, 1] {
            let h = RecordHeader {
                dest: d,
                context: 5,
                tag: seq as i32,
                seq,
            };
            log.append(h, &body(d, seq)).unwrap();
        }
    }
    // Freed records are neither spilled nor restored; freed segments
    // are reused without new memory.
    log.free_up_to(0, 5, 6).unwrap();
    let spill = dir.join("log-1.vlog");
    assert_eq!(log.save_kept(&spill).unwrap(), 14 + 20);
    let back = SenderLog::restore(&spill, None, 3, 8192, |d, c| match (d, c) {
        (0, 5) => 15,
        (_, 5) => 20,
        _ => 0,
    })
    .unwrap();
    let zero: Vec<u64> = back
        .iter_from(0, 5, 0)
        .map(|r| r.unwrap())
        .map(|r| r.header.seq)
        .collect();
    assert_eq!(zero, (7..=15).collect::<Vec<_>>());
    assert_eq!(back.records_to(1), 20);
    for r in back.iter_from(1, 5, 0).map(|r| r.unwrap()) {
        assert_eq!(r.payload, body(1, r.header.seq).as_slice());
        assert_eq!((r.header.context, r.header.tag), (5, r.header.seq as i32));
    }
    // A restored log keeps growing after the spilled records.
    let mut back = back;
    let h = RecordHeader {
        dest: 0,
        context: 5,
        tag: 0,
        seq: 16,
    };
    back.append(h, b"after").unwrap();
    assert_eq!(back.get(0, 5, 16).unwrap().unwrap().payload, b"after");
    // A damaged spill file is refused with its name.
    let mut bytes = std::fs::read(&spill).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x55;
    std::fs::write(&spill, &bytes).unwrap();
    let err = SenderLog::restore(&spill, None, 3, 8192, |_, _| u64::MAX)
        .err()
        .expect("damage detected")
        .to_string();
    assert!(err.contains("log-1.vlog"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_record_larger_than_a_segment_gets_its_own() {
    let (_tmp, dir) = tmp("big");
    let mut log = SenderLog::create(&dir, 0, 4096).unwrap();
    let big = vec![7u8; 100_000];
    log.append(hdr(0, 1), &[1, 2, 3]).unwrap();
    log.append(hdr(0, 2), &big).unwrap();
    log.append(hdr(0, 3), &[4]).unwrap();
    assert_eq!(log.get(0, 0, 2).unwrap().unwrap().payload, big.as_slice());
    assert_eq!(log.get(0, 0, 3).unwrap().unwrap().payload, &[4]);
    let _ = std::fs::remove_dir_all(&dir);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn random_appends_and_frees_match_a_model(ops in prop::collection::vec((0u32..3, 0usize..700, any::<bool>()), 1..120)) {
        let (_tmp, dir) = tmp(&format!("prop-{}", ops.len()));
        let mut log = SenderLog::create(&dir, 1, 4096).unwrap();
        let mut model: Vec<(u32, u64, Vec<u8>)> = Vec::new();
        // Segment of each kept record, and of the last append (the
        // current segment, never freed).
        let mut segment_of: BTreeMap<(u32, u64), u64> = BTreeMap::new();
        let mut current = None;
        let mut next = [0u64; 3];
        for (dest, len, free) in ops {
            if free && next[dest as usize] > 1 {
                let upto = next[dest as usize] / 2;
                log.free_up_to(dest, 0, upto).unwrap();
                model.retain(|(d, s, _)| *d != dest || *s > upto);
                segment_of.retain(|&(d, s), _| d != dest || s > upto);
                // Exactly the segments with a kept record remain.
                prop_assert_eq!(log.segment_count(), distinct(segment_of.values().copied().chain(current)));
            } else {
                next[dest as usize] += 1;
                let seq = next[dest as usize];
                let payload: Vec<u8> = (0..len).map(|i| (i as u64 * 31 + seq) as u8).collect();
                let at = log.append(hdr(dest, seq), &payload).unwrap();
                segment_of.insert((dest, seq), at.segment);
                current = Some(at.segment);
                model.push((dest, seq, payload));
            }
        }
        for dest in 0..3 {
            let got: Vec<(u64, Vec<u8>)> = log.iter_from(dest, 0, 0).map(|r| r.unwrap()).map(|r| (r.header.seq, r.payload.to_vec())).collect();
            let want: Vec<(u64, Vec<u8>)> = model.iter().filter(|(d, _, _)| *d == dest).map(|(_, s, p)| (*s, p.clone())).collect();
            prop_assert_eq!(got, want);
        }
        let reread = SenderLog::open_read_only(&dir).unwrap();
        for (dest, seq, payload) in &model {
            prop_assert_eq!(reread.get(*dest, 0, *seq).unwrap().map(|r| r.payload.to_vec()), Some(payload.clone()));
        }
        // Freed records stay in segments that still hold kept ones:
        // a restarted writer indexes them again.
        let mut on_file: BTreeMap<(u32, u64), u64> = BTreeMap::new();
        for dest in 0..3 {
            for r in reread.iter_from(dest, 0, 0).map(|r| r.unwrap()) {
                on_file.insert((dest, r.header.seq), r.location.segment);
            }
        }
        drop((reread, log));
        // A restarted writer's index (rebuilt from the files) frees
        // the same way: three quarters of each destination, then the
        // rest.
        let mut again = SenderLog::reopen(&dir, 1, 4096, |_, _| u64::MAX).unwrap();
        for dest in 0..3 {
            let upto = next[dest as usize] * 3 / 4;
            again.free_up_to(dest, 0, upto).unwrap();
            model.retain(|(d, s, _)| *d != dest || *s > upto);
            on_file.retain(|&(d, s), _| d != dest || s > upto);
            prop_assert_eq!(again.segment_count(), distinct(on_file.values().copied()));
        }
        for (dest, seq, payload) in &model {
            prop_assert_eq!(again.get(*dest, 0, *seq).unwrap().map(|r| r.payload.to_vec()), Some(payload.clone()));
        }
        for dest in 0..3 {
            again.free_up_to(dest, 0, u64::MAX).unwrap();
        }
        prop_assert_eq!(again.segment_count(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A rank that crashed twice leaves a log where its second process logged
/// again what its first one had logged after the checkpoint: every reader
/// sees each message once, as the later process logged it. (Found by the
/// simulator: a restarted process compared its re-execution against both
/// copies and reported a divergence that was not there.)
#[test]
fn a_message_logged_by_two_incarnations_is_read_once_as_the_later_one_logged_it() {
    let (_tmp, dir) = tmp("incarnations");
    {
        let mut first = SenderLog::create(&dir, 0, 4096).unwrap();
        first.append(hdr(1, 1), b"kept by the checkpoint").unwrap();
        first.append(hdr(1, 2), b"first process").unwrap();
        first.append(hdr(1, 3), b"first process").unwrap();
    }
    {
        let mut second = SenderLog::reopen(&dir, 0, 4096, |_, _| 1).unwrap();
        second.append(hdr(1, 2), b"second process").unwrap();
    }
    let read = SenderLog::open_read_only(&dir).unwrap();
    let seen: Vec<(u64, Vec<u8>)> = read
        .iter_from(1, 0, 1)
        .map(|r| r.unwrap())
        .map(|r| (r.header.seq, r.payload.to_vec()))
        .collect();
    assert_eq!(
        seen,
        [
            (1, b"kept by the checkpoint".to_vec()),
            (2, b"second process".to_vec()),
            // Logged by the first process only: the second one crashed
            // before re-executing it, and it still binds the third.
            (3, b"first process".to_vec()),
        ]
    );
    let third = SenderLog::reopen(&dir, 0, 4096, |_, _| 1).unwrap();
    assert_eq!(
        third
            .iter_from(1, 0, 1)
            .collect::<Result<Vec<_>>>()
            .unwrap()
            .len(),
        1
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
