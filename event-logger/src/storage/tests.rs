//! Unit tests of the storage: appending, rotating, truncating, reloading,
//! and refusing stale incarnations.

use super::*;
use crate::event::{CallId, Event};

/// A fresh path (not created yet) under a temporary directory that
/// goes away with the returned guard.
fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let guard = tempfile::Builder::new()
        .prefix("vpml-el-storage-")
        .tempdir()
        .expect("a temporary directory");
    let p = guard.path().join(name);
    (guard, p)
}

fn cfg(root: &Path, seg: u64) -> StorageConfig {
    StorageConfig {
        root: root.to_owned(),
        durability: Durability::Write,
        segment_bytes: seg,
        repair: false,
    }
}

fn batch(first: EventId, n: u64) -> EventBatch {
    let mut b = EventBatch::new();
    for id in first..first + n {
        b.push(
            id,
            &Event::Match {
                recv: CallId::new(0, id * 10),
                source: 1,
            },
        )
        .unwrap();
    }
    b
}

fn stored(log: &RankLog, from: EventId) -> Vec<EventId> {
    let mut ids = Vec::new();
    read_events(&log.read_plan(from), from, |n, b| {
        ids.extend(
            EventBatch::parse(n, b)
                .unwrap()
                .events()
                .into_iter()
                .map(|(i, _)| i),
        );
        Ok(())
    })
    .unwrap();
    ids
}

#[test]
fn append_is_idempotent_rotates_truncates_and_reloads() {
    let (_tmp, root) = tmp("basic");
    let s = Storage::open(cfg(&root, 200)).unwrap();
    let log = s.rank("j", 0).unwrap();
    let mut l = log.lock().unwrap();
    assert_eq!(l.append(&batch(1, 3), 0).unwrap().new_events, 3);
    assert_eq!(l.append(&batch(2, 3), 0).unwrap().new_events, 1);
    assert_eq!(l.append(&batch(1, 2), 0).unwrap().new_events, 0);
    assert!(matches!(
        l.append(&batch(9, 1), 0),
        Err(StorageError::Gap { .. })
    ));
    for i in 0..10 {
        l.append(&batch(5 + i * 2, 2), 0).unwrap();
    }
    assert_eq!(l.highest(), 24);
    assert!(l.segments.len() > 3, "segments: {}", l.segments.len());
    assert_eq!(stored(&l, 1), (1..=24).collect::<Vec<_>>());
    assert_eq!(stored(&l, 20), (20..=24).collect::<Vec<_>>());
    let before = l.segments.len();
    let (files, _) = l.truncate(12).unwrap();
    assert!(files > 0);
    assert_eq!(l.segments.len(), before - files as usize);
    assert!(l.first_kept() <= 13 && l.first_kept() > 1);
    drop(l);
    drop(s);
    let s = Storage::open(cfg(&root, 200)).unwrap();
    let l = s.rank("j", 0).unwrap();
    let l = l.lock().unwrap();
    assert_eq!(l.highest(), 24);
    let kept = stored(&l, 1);
    assert_eq!(*kept.last().unwrap(), 24);
    assert!(kept[0] <= 13);
    drop(l);
    let l = s.rank("j", 0).unwrap();
    let mut l = l.lock().unwrap();
    let (files, _) = l.truncate(100).unwrap();
    assert!(files > 0);
    assert_eq!(l.first_kept(), 0);
    assert_eq!(l.highest(), 24);
    assert_eq!(l.append(&batch(25, 1), 0).unwrap().highest, 25);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn stale_incarnations_are_refused() {
    let (_tmp, root) = tmp("inc");
    let s = Storage::open(cfg(&root, 1 << 20)).unwrap();
    let log = s.rank("j", 3).unwrap();
    let mut l = log.lock().unwrap();
    l.admit(2).unwrap();
    assert!(matches!(l.admit(1), Err(StorageError::Stale { .. })));
    assert!(matches!(
        l.append(&batch(1, 1), 1),
        Err(StorageError::Stale { .. })
    ));
    drop(l);
    drop(s);
    let s = Storage::open(cfg(&root, 1 << 20)).unwrap();
    let log = s.rank("j", 3).unwrap();
    assert!(log.lock().unwrap().admit(1).is_err());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn reading_a_recording_offline_changes_nothing_and_names_damage() {
    let (_tmp, root) = tmp("offline");
    {
        let s = Storage::open(cfg(&root, 200)).unwrap();
        let log = s.rank("j", 0).unwrap();
        let mut l = log.lock().unwrap();
        for i in 0..5 {
            l.append(&batch(1 + i * 3, 3), 0).unwrap();
        }
    }
    let dir = root.join("jobs").join("j").join("0");
    let mut segs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("seg-"))
        })
        .collect();
    segs.sort();
    assert!(segs.len() >= 2, "{segs:?}");
    // A torn last record (a crash mid-write) is left out, not cut.
    let last = segs.last().unwrap().clone();
    let mut f = OpenOptions::new().append(true).open(&last).unwrap();
    std::io::Write::write_all(&mut f, &[7u8; 9]).unwrap();
    let len = std::fs::metadata(&last).unwrap().len();
    let events = read_stored_events(&root, "j", 0).unwrap();
    let ids: Vec<EventId> = events.iter().map(|(i, _)| *i).collect();
    assert_eq!(ids, (1..=15).collect::<Vec<_>>());
    assert_eq!(
        std::fs::metadata(&last).unwrap().len(),
        len,
        "the recording changed"
    );
    // A missing rank is empty, and creates nothing.
    assert!(read_stored_events(&root, "j", 9).unwrap().is_empty());
    assert!(!root.join("jobs").join("j").join("9").exists());
    // Damage before the end is an error naming the file and offset.
    let first = segs[0].clone();
    let mut bytes = std::fs::read(&first).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&first, &bytes).unwrap();
    let e = read_stored_events(&root, "j", 0)
        .err()
        .map(|e| e.to_string());
    assert!(
        e.as_deref()
            .is_some_and(|e| e.contains(&first.display().to_string())),
        "{e:?}"
    );
}
