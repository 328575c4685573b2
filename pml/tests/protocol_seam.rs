//! Every kind of entry point reaches the protocol: a protocol that records
//! what it is told, around a one-rank simulated engine.

use std::cell::RefCell;
use std::rc::Rc;

use vpml_pml::matching::RecvSpec;
use vpml_pml::protocol::{
    CallId, CommChange, CompletionKind, LoggedMessage, OutgoingMessage, PersistentInit, Protocol,
    RecvPlan, Replay, RequestInfo, SendPlan, WaitKind,
};
use vpml_pml::recovery::EngineSnapshot;
use vpml_pml::sim::{SimHooks, SimNet};
use vpml_pml::{ANY_SOURCE, Result, Status};

/// Writes one line per hook called.
struct Recorder(Rc<RefCell<Vec<String>>>);

impl Recorder {
    fn note(&self, line: String) {
        self.0.borrow_mut().push(line);
    }
}

impl Protocol for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn takes_checkpoints(&self) -> bool {
        true
    }
    fn send(&mut self, msg: &OutgoingMessage<'_>) -> Result<()> {
        self.note(format!("send to {} tag {}", msg.dest, msg.tag));
        Ok(())
    }
    fn keep(&mut self, _msg: &OutgoingMessage<'_>) -> Result<SendPlan> {
        Ok(SendPlan::Transmit)
    }
    fn idle(&mut self) {}
    fn post_recv(&mut self, _call: CallId, spec: &mut RecvSpec) -> Result<RecvPlan> {
        self.note(format!("post_recv tag {:?}", spec.tag));
        Ok(RecvPlan::Post)
    }
    fn matched(&mut self, _recv: CallId, source: usize) -> Result<()> {
        self.note(format!("matched from {source}"));
        Ok(())
    }
    fn completion(
        &mut self,
        call: CallId,
        kind: CompletionKind,
        requests: &[Option<RequestInfo>],
        done: &[usize],
    ) -> Result<()> {
        let requests: Vec<String> = requests
            .iter()
            .map(|r| match r {
                Some(r) => format!(
                    "call {} send {} at start {}",
                    r.call, r.is_send, r.completed_at_start
                ),
                None => "none".to_string(),
            })
            .collect();
        self.note(format!(
            "completion {call} {kind:?} done {done:?}: {}",
            requests.join(", ")
        ));
        Ok(())
    }
    fn waited(&mut self, kind: WaitKind, requests: &[Option<RequestInfo>]) -> Result<()> {
        self.note(format!("waited {kind:?} on {}", requests.len()));
        Ok(())
    }
    fn communicator(&mut self, change: &CommChange<'_>) -> Result<()> {
        self.note(match change {
            CommChange::Created { members, .. } => format!("communicator of {members:?}"),
            CommChange::Freed { .. } => "communicator freed".to_string(),
        });
        Ok(())
    }
    fn persistent(&mut self, init: &PersistentInit) -> Result<()> {
        self.note(format!(
            "persistent {} peer {:?} tag {}",
            if init.send { "send" } else { "recv" },
            init.peer,
            init.tag
        ));
        Ok(())
    }
    fn probe(
        &mut self,
        _call: CallId,
        any_source: bool,
        blocking: bool,
        found: Option<&Status>,
    ) -> Result<()> {
        self.note(format!(
            "probe any {any_source} blocking {blocking} found {}",
            found.is_some()
        ));
        Ok(())
    }
    fn cancel(&mut self, _call: CallId, _request: CallId, cancelled: bool) -> Result<()> {
        self.note(format!("cancel {cancelled}"));
        Ok(())
    }
    fn finalize(&mut self) -> Result<()> {
        self.note("finalize".to_string());
        Ok(())
    }
    fn stats(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
    fn take_restored(&mut self) -> Option<EngineSnapshot> {
        None
    }
    fn restart_state(&self) -> Option<Vec<u8>> {
        None
    }
    fn replay_ends(&self) -> Vec<(u32, u64)> {
        Vec::new()
    }
    fn replay_completion(
        &mut self,
        _call: CallId,
        _passed: &[CallId],
    ) -> Result<Replay<Vec<CallId>>> {
        Ok(Replay::Free)
    }
    fn replay_probe(
        &mut self,
        _call: CallId,
        _spec: &RecvSpec,
        _blocking: bool,
    ) -> Result<Replay<Option<(usize, i32)>>> {
        Ok(Replay::Free)
    }
    fn replay_cancel(&mut self, _call: CallId, _request: CallId) -> Result<Replay<bool>> {
        Ok(Replay::Free)
    }
    fn logged_messages(
        &mut self,
        _dest: usize,
        _after: &vpml_pml::lanes::LaneMap<u64>,
    ) -> Result<Vec<LoggedMessage>> {
        Ok(Vec::new())
    }
    fn checkpoint(
        &mut self,
        _engine: &EngineSnapshot,
        _app: &[u8],
    ) -> Result<Vec<(usize, u32, u64)>> {
        self.note("checkpoint".to_string());
        Ok(Vec::new())
    }
    fn free_log(&mut self, _dest: usize, _context: u32, _up_to: u64) -> Result<()> {
        Ok(())
    }
    fn recorded_incoming(&mut self, _from: usize) -> Result<Vec<LoggedMessage>> {
        Ok(Vec::new())
    }
}

/// A rank alone never waits for anyone: idling would mean a hang.
struct NeverIdle;

impl SimHooks for NeverIdle {
    fn idle(&self) {
        panic!("a one-rank job waited for a peer");
    }
    fn frame_written(&self, _from: usize, _to: usize, _message: Option<(u32, u64)>) {}
    fn finalized(&self, _rank: usize) {}
}

#[test]
fn waits_communicators_and_persistent_requests_reach_the_protocol() {
    let lines = Rc::new(RefCell::new(Vec::new()));
    let net = SimNet::new(1, 4);
    let world = vpml_pml::sim::join(
        0,
        &net,
        Rc::new(NeverIdle),
        None,
        Some(Box::new(Recorder(Rc::clone(&lines)))),
        0,
    )
    .expect("join");
    let heard = |what: &str| lines.borrow().iter().any(|l| l.starts_with(what));

    let send = world.isend(0, 1, vec![7u64]).expect("isend");
    let recv = world.irecv(ANY_SOURCE, 1, vec![0u64]).expect("irecv");
    let mut both = [Some(send), Some(recv)];
    vpml_pml::wait_all(&mut both).expect("wait_all");
    assert!(heard("waited All on 2"), "{:?}", lines.borrow());
    // The ANY_SOURCE receive's match is reported, once.
    let count = |what: &str| lines.borrow().iter().filter(|l| *l == what).count();
    assert_eq!(count("matched from 0"), 1, "{:?}", lines.borrow());

    world
        .isend(0, 2, vec![8u64])
        .expect("isend")
        .wait()
        .expect("wait");
    assert!(heard("waited One on 1"), "{:?}", lines.borrow());
    let got = world
        .irecv(0, 2, vec![0u64])
        .expect("irecv")
        .wait()
        .expect("wait");
    assert_eq!(got.buf, [8]);

    let dup = world.dup().expect("dup");
    assert!(heard("communicator of [0]"), "{:?}", lines.borrow());
    let split = world.split(Some(3), 0).expect("split").expect("a member");
    assert_eq!(
        lines
            .borrow()
            .iter()
            .filter(|l| l.starts_with("communicator of"))
            .count(),
        2
    );
    dup.free();
    split.free();
    // Never announced as made, so never reported as freed either.
    world.self_comm().free();
    assert_eq!(
        lines
            .borrow()
            .iter()
            .filter(|l| *l == "communicator freed")
            .count(),
        2
    );

    let _ps = world.send_init(0, 5, vec![1u64]).expect("send_init");
    let _pr = world
        .recv_init(ANY_SOURCE, 5, vec![0u64])
        .expect("recv_init");
    assert!(
        heard("persistent send peer Some(0) tag 5"),
        "{:?}",
        lines.borrow()
    );
    assert!(
        heard("persistent recv peer None tag 5"),
        "{:?}",
        lines.borrow()
    );
    // The MPI C library keeps its own persistent requests and says so.
    world
        .persistent_made(false, Some(0), 9)
        .expect("persistent_made");
    assert!(
        heard("persistent recv peer Some(0) tag 9"),
        "{:?}",
        lines.borrow()
    );
    assert!(
        world.persistent_made(true, Some(3), 9).is_err(),
        "rank 3 of 1"
    );

    // Probes, cancels, checkpoints and finalize reach it too.
    assert!(world.iprobe(ANY_SOURCE, 77).expect("iprobe").is_none());
    assert!(
        heard("probe any true blocking false found false"),
        "{:?}",
        lines.borrow()
    );
    let pending = world.irecv(0, 78, vec![0u64]).expect("irecv");
    assert!(pending.cancel().expect("cancel"));
    assert!(heard("cancel true"), "{:?}", lines.borrow());
    drop(pending);
    assert!(world.checkpoint(b"state").expect("checkpoint"));
    assert!(heard("checkpoint"), "{:?}", lines.borrow());
    world.finalize().expect("finalize");
    assert!(heard("finalize"), "{:?}", lines.borrow());
}

/// A raw send written whole at once keeps no request in the engine, yet
/// a completion call over it tells the protocol the same as for any send
/// complete at start: its call, a send, complete at start.
#[test]
fn a_raw_send_complete_at_start_is_described_to_the_protocol_like_any_other() {
    let lines = Rc::new(RefCell::new(Vec::new()));
    let net = SimNet::new(2, 4);
    let hooks: Rc<dyn SimHooks> = Rc::new(NeverIdle);
    let protocol = Recorder(Rc::clone(&lines));
    let r0 = vpml_pml::sim::join(
        0,
        &net,
        Rc::clone(&hooks),
        None,
        Some(Box::new(protocol)),
        0,
    )
    .expect("join 0");
    let r1 = vpml_pml::sim::join(1, &net, hooks, None, None, 0).expect("join 1");

    let out = [5u8; 24];
    let mut inp = [0u8; 8];
    // SAFETY: both buffers outlive the requests, which complete below.
    let (sent, pending) = unsafe {
        (
            r0.isend_raw(1, 3, out.as_ptr(), out.len(), false)
                .expect("isend_raw"),
            r0.irecv_raw(1, 4, inp.as_mut_ptr(), inp.len())
                .expect("irecv_raw"),
        )
    };
    assert!(sent.is_complete_send());
    assert!(!pending.is_complete_send());
    // The engine has no status for it; the binding makes it.
    assert!(r0.finish_raw(sent).is_err());
    let st = vpml_pml::Status::of_send(1, 3, 24);
    assert_eq!((st.source(), st.tag(), st.len()), (1, 3, 24));

    let done = r0
        .completion_raw(CompletionKind::WaitAny, &[Some(sent), Some(pending)])
        .expect("waitany");
    assert_eq!(done, [0]);
    assert_eq!(
        lines.borrow().last().map(String::as_str),
        Some(
            "completion 0:3 WaitAny done [0]: call 0:1 send true at start true, call 0:2 send false at start false"
        ),
    );
    // Cancelling or freeing it is harmless: it is complete.
    assert!(!r0.cancel_raw(sent).expect("cancel"));
    r0.detach_raw(sent);

    // The bytes went: rank 1 receives them.
    let mut got = [0u8; 24];
    // SAFETY: `got` outlives the receive, waited for below.
    let r = unsafe { r1.irecv_raw(0, 3, got.as_mut_ptr(), got.len()) }.expect("irecv");
    r1.wait_all_raw(&[Some(r)]).expect("wait");
    let st = r1.finish_raw(r).expect("status");
    assert_eq!((st.source(), st.len(), got), (0, 24, out));
}
