//! # vpml-fault-points — named places where a test makes a process die
//!
//! Recovery must be exact whatever step of the protocol a crash interrupts,
//! so a crash at a random time is not enough of a test: each step of the
//! protocol has a named fault point ([`ALL`]), and a test names one for
//! one process (`vpml run --inject-failure RANK@point:NAME`). The launcher
//! passes it in [`ENV`] (`NAME` or `NAME#N`) to that process alone, which
//! then kills itself with SIGKILL — as a crash would end it, with no
//! unwinding and no flushing — the `N`-th time (default: the first) it
//! reaches the point, after one line on stderr naming it.
//!
//! The points are [`fault_point!`] calls backed by the `fail` crate's
//! registry. They exist in debug builds only (what the tests run): in a
//! release build the macro expands to nothing and [`arm_from_env`] refuses
//! a point, so a job never silently runs without the crash it asked for.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

#[doc(hidden)]
pub use fail;

/// The environment variable naming the point at which this process dies:
/// `NAME` (the first time it is reached) or `NAME#N` (the `N`-th time).
pub const ENV: &str = "VPML_FAULT_POINT";

/// Every fault point, and the step of the protocol it interrupts.
pub const ALL: &[(&str, &str)] = &[
    (
        "start.in_fences",
        "a rank is in its start-up fences: the job is not joined yet (no restart can take its place)",
    ),
    (
        "send.before_events_durable",
        "a send waits for events to be durable: before the wait",
    ),
    (
        "send.after_events_durable",
        "a send's events are durable, the message has not left",
    ),
    (
        "send.before_log_append",
        "a send's payload is not yet in the sender log",
    ),
    (
        "send.mid_log_append",
        "a send's record is in the sender log but for the first word of its header",
    ),
    (
        "send.after_log_append",
        "a send's payload is in the sender log",
    ),
    (
        "send.before_frame",
        "a message's frame is about to be written (or queued) to its link",
    ),
    (
        "send.after_frame",
        "a message's frame was written (or queued) to its link",
    ),
    (
        "recv.after_match",
        "an ANY_SOURCE receive matched; its event is not yet logged",
    ),
    (
        "event.after_put",
        "an event was handed to the loggers' client (queued or sent), not yet acknowledged",
    ),
    (
        "log.copy_written",
        "a full sender-log segment is written to disk under a temporary name, not yet named",
    ),
    (
        "log.copy_named",
        "a full sender-log segment's copy on disk is named; its memory is not yet free",
    ),
    (
        "log.moved_to_disk",
        "a sender-log segment lives on disk alone; its memory is set aside, not yet reused",
    ),
    (
        "checkpoint.mid_write",
        "half of a checkpoint file is written",
    ),
    (
        "checkpoint.after_write",
        "a checkpoint file is in place; its output mark and copies are not",
    ),
    (
        "checkpoint.before_gc",
        "a checkpoint is saved; events and peers' log records are not yet freed",
    ),
    (
        "coordinated.bookmarks_sent",
        "a rank sent its bookmarks for a global checkpoint; the channels are not drained",
    ),
    (
        "coordinated.written",
        "a rank wrote its part of a global checkpoint; the others may not have",
    ),
    (
        "coordinated.committed",
        "every rank wrote its part of a global checkpoint; this one has not returned",
    ),
    (
        "recovery.loaded_checkpoint",
        "a restarted process read its checkpoint; its log and events are not loaded",
    ),
    (
        "recovery.restoring_copy",
        "a rank restarted after its host was lost fetched its checkpoint copy; its directory is not in place",
    ),
    (
        "recovery.fetched_events",
        "a restarted process fetched its logged events",
    ),
    (
        "recovery.connected",
        "a restarted process connected to the running ranks",
    ),
    (
        "recovery.replaying",
        "a restarted process re-executes a call its logged events answer",
    ),
    (
        "recovery.resending",
        "a running rank connected to a restarted peer and re-sends what it lacks",
    ),
    (
        "logger.received",
        "an event logger received events and has not stored them",
    ),
    (
        "logger.before_ack",
        "an event logger stored events and has not acknowledged them",
    ),
];

/// Is `name` one of [`ALL`]?
pub fn is_known(name: &str) -> bool {
    ALL.iter().any(|(n, _)| *n == name)
}

/// Parse `NAME` or `NAME#N` into the point and the hit that kills.
pub fn parse(spec: &str) -> Result<(&str, u64), String> {
    let (name, hit) = match spec.split_once('#') {
        Some((name, n)) => match n.parse::<u64>() {
            Ok(n) if n > 0 => (name, n),
            _ => return Err(format!("fault point {spec:?}: #N must be a positive count")),
        },
        None => (spec, 1),
    };
    if !is_known(name) {
        let known: Vec<&str> = ALL.iter().map(|(n, _)| *n).collect();
        return Err(format!(
            "no fault point named {name:?} (known: {})",
            known.join(", ")
        ));
    }
    Ok((name, hit))
}

/// Arm the point [`ENV`] names, if any; `who` ("rank 1", "event logger
/// 0") goes into the line printed before dying.
pub fn arm_from_env(who: &str) -> Result<(), String> {
    let Some(spec) = std::env::var_os(ENV) else {
        return Ok(());
    };
    let spec = spec
        .into_string()
        .map_err(|_| format!("{ENV} is not UTF-8"))?;
    if spec.is_empty() {
        return Ok(());
    }
    let (name, hit) = parse(&spec)?;
    if !cfg!(debug_assertions) {
        return Err(format!(
            "{ENV}={spec}: fault points exist only in debug builds"
        ));
    }
    let who = who.to_string();
    let point = name.to_string();
    let reached = AtomicU64::new(0);
    fail::cfg_callback(name, move || {
        if reached.fetch_add(1, Ordering::Relaxed) + 1 == hit {
            die(&who, &point, hit);
        }
    })
}

/// Die as a crash would: SIGKILL, nothing flushed or unwound.
fn die(who: &str, point: &str, hit: u64) -> ! {
    eprintln!("vpml: {who}: killed at fault point {point} (reached {hit} times)");
    // SIGKILL cannot be caught or blocked, so the process ends before
    // `kill` returns; abort only if the kill itself failed.
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    std::process::abort()
}

/// What a thread's hook is told: the name of the fault point reached.
pub type ThreadHook = Box<dyn Fn(&'static str)>;

thread_local! {
    static THREAD_HOOK: RefCell<Option<ThreadHook>> = const { RefCell::new(None) };
}

/// Call `hook` with the name of every fault point this thread reaches (in
/// a debug build), or stop with `None`. The simulator (`vpml-sim`) runs
/// every rank of a job on its own thread and crashes one by unwinding it
/// from here.
pub fn set_thread_hook(hook: Option<ThreadHook>) {
    THREAD_HOOK.with(|h| *h.borrow_mut() = hook);
}

/// This thread reached fault point `name` (called by [`fault_point!`]):
/// tell its hook, then act on the point if it is armed.
#[doc(hidden)]
pub fn reached(name: &'static str) {
    // (Not while unwinding: a hook that unwinds again would abort.)
    if !std::thread::panicking() {
        THREAD_HOOK.with(|h| {
            if let Some(hook) = h.borrow().as_ref() {
                hook(name);
            }
        });
    }
    fail::fail_point!(name);
}

/// A named fault point (one of [`ALL`]): in a debug build, the process
/// dies here if [`arm_from_env`] armed this name, and this thread's hook
/// ([`set_thread_hook`]) hears of it; nothing in release.
#[macro_export]
macro_rules! fault_point {
    ($name:literal) => {
        #[cfg(debug_assertions)]
        $crate::reached($name);
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_names_a_known_point_and_a_positive_hit() {
        assert_eq!(parse("send.after_frame"), Ok(("send.after_frame", 1)));
        assert_eq!(parse("logger.received#3"), Ok(("logger.received", 3)));
        assert!(
            parse("send.after_frame#0")
                .unwrap_err()
                .contains("positive")
        );
        assert!(parse("send.after_frames").unwrap_err().contains("known:"));
    }

    /// Every `fault_point!` in the workspace names a point of [`ALL`], and
    /// every point of [`ALL`] is placed somewhere.
    #[test]
    fn the_list_matches_the_points_in_the_sources() {
        fn scan(dir: &std::path::Path, found: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    scan(&p, found);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let text = std::fs::read_to_string(&p).unwrap();
                    for part in text.split("fault_point!(\"").skip(1) {
                        found.push(part.split('"').next().unwrap().to_string());
                    }
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut found = Vec::new();
        for krate in ["pml", "vprotocol", "event-logger", "sender-log", "launcher"] {
            scan(&root.join(krate).join("src"), &mut found);
        }
        for name in &found {
            assert!(is_known(name), "fault_point!({name:?}) is not in ALL");
        }
        for (name, _) in ALL {
            assert!(found.iter().any(|f| f == name), "{name} is never placed");
        }
    }

    #[test]
    fn an_unarmed_point_does_nothing() {
        fault_point!("send.after_frame");
    }

    #[test]
    fn a_thread_hook_hears_the_points_of_its_thread_only() {
        use std::sync::{Arc, Mutex};
        let heard = Arc::new(Mutex::new(Vec::new()));
        let h = Arc::clone(&heard);
        set_thread_hook(Some(Box::new(move |name| h.lock().unwrap().push(name))));
        fault_point!("send.after_frame");
        std::thread::spawn(|| {
            fault_point!("send.before_frame");
        })
        .join()
        .unwrap();
        set_thread_hook(None);
        fault_point!("event.after_put");
        assert_eq!(*heard.lock().unwrap(), ["send.after_frame"]);
    }
}
