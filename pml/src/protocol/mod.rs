//! The hooks a fault-tolerance protocol needs, and nothing more.
//!
//! The engine knows nothing of message logging. It calls the protocol
//! installed ([`crate::init_with`]) at every kind of entry point, in
//! program order, with the *call id* of the call ([`CallId`]): the
//! call's *lane* — the communicator context it works on — and its number
//! among that lane's calls. A call takes the next number of its lane when
//! it creates a request (every send and receive, blocking or not,
//! persistent starts, collectives' internal messages) or asks for a
//! non-deterministic answer (probes, cancels and the test/wait-any/
//! wait-some family: the lane of the first request passed that has a
//! call). A piecewise-deterministic program re-executed from the same
//! point assigns the same ids, which is what lets a recovering process be
//! matched with its logged events — and since each lane counts on its
//! own, the ids do not depend on how threads that each use their own
//! communicators interleave.
//!
//! Every kind of entry point reaches it: sends and receives (blocking or
//! not, persistent starts, collectives' internal messages), the test and
//! wait families (the determined ones, `wait` and `wait_all`, through
//! [`Protocol::waited`]), probes, cancels, persistent requests when they
//! are made, communicators when they are made or freed, checkpoints and
//! finalize. Every method is required, so adding an entry point to the
//! engine without deciding what each protocol does with it is a compile
//! error.
//!
//! The engine always has exactly one protocol and never asks which: with
//! none chosen it runs [`NoProtocol`], which keeps nothing and answers every
//! replay question with [`Replay::Free`]. The protocol is chosen at run
//! time (`--protocol`, the `ProtocolName` enum of `vpml-vprotocol`) and held
//! as a `Box<dyn Protocol>`: this crate cannot name the protocols built on
//! it (they depend on it), and a generic engine would put a type parameter
//! on every communicator. The cost is one indirect call per hook, which the
//! send gate ([`SendGate`]) spares the smallest sends.

use std::any::Any;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

mod none;

pub use none::NoProtocol;

use crate::error::Result;
use crate::lanes::LaneMap;
use crate::matching::RecvSpec;
use crate::recovery::EngineSnapshot;
use crate::status::Status;

/// Identifier of an API call (see the module docs).
pub use vpml_codec::CallId;

/// A message about to leave the process.
#[derive(Debug)]
pub struct OutgoingMessage<'a> {
    /// Id of the send call.
    pub call: CallId,
    /// Destination world rank.
    pub dest: usize,
    /// Communicator context.
    pub context: u32,
    /// Tag.
    pub tag: i32,
    /// Sequence number of the message among those to `dest` on `context`
    /// (1, 2, …).
    pub seq: u64,
    /// The payload.
    pub payload: &'a [u8],
    /// Synchronous send (completes only once matched).
    pub synchronous: bool,
    /// The engine transmits from the copy [`Protocol::keep`] keeps, if it
    /// keeps one (the plan it returns is used); false when the message
    /// already left from the caller's buffer (the plan is ignored).
    pub from_copy: bool,
}

/// A protocol's hold on memory it lent the engine ([`KeptBytes::with_loan`]):
/// while the engine keeps it, that memory takes no other data. The engine
/// drops it once the transport is done with the bytes.
pub type Loan = Arc<dyn Any + Send + Sync>;

/// Bytes a protocol keeps (a sender-log record's payload) and lends the
/// engine, which transmits or re-sends from them after the call that
/// handed them over has returned: the one place where memory crosses the
/// seam without a lifetime the compiler can check. The contract is the
/// constructor's.
#[derive(Debug, Clone)]
pub struct KeptBytes {
    ptr: *const u8,
    len: usize,
    loan: Option<Loan>,
}

impl KeptBytes {
    /// Lend `bytes` to the engine.
    ///
    /// # Safety
    /// `bytes` must stay valid and unchanged for as long as the engine may
    /// read them: while it holds this value (or a clone, or the loan taken
    /// from one) and the protocol has not freed the record — which it may
    /// do only for messages the receiver will never need again (it
    /// checkpointed past them) — or until the engine is gone.
    pub unsafe fn new(bytes: &[u8]) -> KeptBytes {
        KeptBytes {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
            loan: None,
        }
    }

    /// The same bytes, with the protocol's hold on their memory (see
    /// [`Loan`]), which travels with them.
    pub fn with_loan(mut self, loan: Loan) -> KeptBytes {
        self.loan = Some(loan);
        self
    }

    /// The hold on their memory, for the engine to keep while it reads
    /// them.
    pub fn loan(&self) -> Option<Loan> {
        self.loan.clone()
    }

    /// Their length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No bytes at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where they start (for the engine's own raw views of them).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// The bytes, for as long as the contract of [`KeptBytes::new`] holds.
    ///
    /// # Safety
    /// The protocol has not freed them (see [`KeptBytes::new`]), and the
    /// returned slice is not used past that.
    pub unsafe fn as_slice<'a>(&self) -> &'a [u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: valid and unchanged for len bytes (the caller's contract
        // and `new`'s).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// The protocol's word to the engine, kept current without a call: while
/// it is open below `n` bytes, a send of fewer payload bytes needs nothing
/// from [`Protocol::send`] (see [`Protocol::send_gate`]). One load on the
/// hot path instead of a dynamic call. A new gate is closed.
#[derive(Debug, Clone, Default)]
pub struct SendGate(Rc<Cell<usize>>);

impl SendGate {
    /// Sends of fewer than `n` payload bytes may skip [`Protocol::send`].
    pub fn open_below(&self, n: usize) {
        self.0.set(n);
    }

    /// Every send goes through [`Protocol::send`].
    pub fn close(&self) {
        self.0.set(0);
    }

    /// May a send of `len` payload bytes skip [`Protocol::send`]?
    #[inline]
    pub fn lets_through(&self, len: usize) -> bool {
        len < self.0.get()
    }
}

/// What the engine does with a message after the protocol saw it.
#[derive(Debug, Clone)]
pub enum SendPlan {
    /// Send the caller's buffer as usual.
    Transmit,
    /// The protocol keeps a copy of the payload. The engine transmits
    /// from that copy and, for a standard send, completes the send at
    /// once: the caller's buffer is free.
    Logged(KeptBytes),
}

/// Which completion call reports completed requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionKind {
    /// `test` of one request.
    Test,
    /// `test_any`.
    TestAny,
    /// `test_some`.
    TestSome,
    /// `test_all`.
    TestAll,
    /// `wait_any` (also `wait` on one slot).
    WaitAny,
    /// `wait_some`.
    WaitSome,
}

/// A request passed to a completion call.
#[derive(Debug, Clone, Copy)]
pub struct RequestInfo {
    /// Call id that created the request.
    pub call: CallId,
    /// True for a send.
    pub is_send: bool,
    /// True for a request that completed when it started: a send (its
    /// completion is not an outcome anybody can observe differently), or,
    /// with no protocol that hears receives, a receive whose message
    /// already waited.
    pub completed_at_start: bool,
}

/// A blocking wait whose answer is determined: every request passed
/// completes (`wait` on one request, `wait_all`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitKind {
    /// `wait` on one request.
    One,
    /// `wait_all` (also `sendrecv`, over its two requests, and the MPI C
    /// library's `MPI_Wait`, over one).
    All,
}

/// A communicator came into being or ended (world ranks, in rank order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommChange<'a> {
    /// `dup`, `split` or another constructor made a communicator:
    /// point-to-point messages on context `context`, its collectives on
    /// `context + 1` (an intercommunicator's local group also on
    /// `context + 2` and `+ 3`).
    Created {
        /// Its context id.
        context: u32,
        /// Its members' world ranks, in rank order (for an
        /// intercommunicator, the local group).
        members: &'a [usize],
        /// An intercommunicator's remote group, in rank order (empty for
        /// an intracommunicator).
        remote: &'a [usize],
    },
    /// `free` ended the communicator with context `context`.
    Freed {
        /// Its context id.
        context: u32,
    },
}

/// A persistent request was made (`send_init`, `ssend_init`, `recv_init`):
/// nothing moves until it is started, and each start is a send or a
/// receive the protocol sees as any other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PersistentInit {
    /// A send (else a receive).
    pub send: bool,
    /// The destination, or the source (`None`: ANY_SOURCE), as a world rank.
    pub peer: Option<usize>,
    /// Tag (may be ANY_TAG for a receive).
    pub tag: i32,
    /// Communicator context.
    pub context: u32,
}

/// What a restarted process must answer for a call, from its logged events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replay<T> {
    /// No logged answer: decide as usual (the call is past the last event).
    Free,
    /// The call came out "nothing" the first time (a failed test or
    /// iprobe): answer that again.
    NotYet,
    /// The logged answer.
    Logged(T),
}

/// What the engine does with a receive it posts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvPlan {
    /// Match it as usual (possibly with a source the protocol forced).
    Post,
    /// A restarted process re-executes a receive that a later `cancel`
    /// withdrew the first time: it must not match anything before that
    /// cancel, which then completes it as cancelled.
    HoldForCancel,
}

/// A message kept in a protocol's sender log, to be sent again to a
/// restarted receiver.
#[derive(Debug, Clone)]
pub struct LoggedMessage {
    /// Communicator context.
    pub context: u32,
    /// Tag.
    pub tag: i32,
    /// Sequence number among the sender's messages to this rank on `context`.
    pub seq: u64,
    /// The payload, kept by the protocol (see [`KeptBytes::new`]).
    pub bytes: KeptBytes,
}

/// A fault-tolerance protocol wrapped around the engine.
pub trait Protocol {
    /// Short name (`pessimist`, …), shown in the job's info line.
    fn name(&self) -> &'static str;

    /// Does the application's `checkpoint` take one (and reach
    /// [`Protocol::checkpoint`])? If not, it does nothing and returns
    /// false, and periodic checkpoints are never due.
    fn takes_checkpoints(&self) -> bool;

    /// Are checkpoints global (`coordinated`)? Then every checkpoint call
    /// of the program reaches the engine, the ranks agree at which call
    /// the next one is taken, drain the channels between them there, and
    /// return only once every rank has written its part (see
    /// `engine/coordinated.rs`); [`Protocol::checkpoint`] writes this
    /// rank's part.
    fn coordinated(&self) -> bool {
        false
    }

    /// A message is about to leave the process (any send, including those
    /// of collectives). Called before anything is transmitted; may block
    /// (e.g. until earlier events are durable). Once it returned `Ok`,
    /// [`Protocol::keep`] of the same message must not fail for want of
    /// room.
    fn send(&mut self, msg: &OutgoingMessage<'_>) -> Result<()>;

    /// A gate the protocol keeps current, if it wants to spare small
    /// sends the [`Protocol::send`] call: while it is open below `n`, a
    /// send of fewer than `n` payload bytes needs nothing from `send` (no
    /// event to wait for, room ready for the copy), and the engine skips
    /// the call; [`Protocol::keep`] still runs. The protocol must close it
    /// before anything that would make `send` do work: an event created,
    /// room used up. Asked once, when the protocol is installed; `None`
    /// (the default): every send is shown to `send`.
    fn send_gate(&self) -> Option<SendGate> {
        None
    }

    /// Keep the payload of the message [`Protocol::send`] just accepted,
    /// before the sending call returns. The engine calls it either before
    /// transmitting, and then transmits what the plan says, or right after
    /// the message left from the caller's buffer (the plan is then
    /// ignored): a small standard send written whole into the transport,
    /// or a large message the receiver reads out of the caller's buffer
    /// (single copy). The copy then overlaps the receiver's work instead of
    /// delaying the message.
    fn keep(&mut self, msg: &OutgoingMessage<'_>) -> Result<SendPlan>;

    /// Does [`Protocol::keep`] ever keep anything? Asked once, when the
    /// protocol is installed; `false` spares every send the call (the
    /// engine transmits the caller's buffer). The default: `true`.
    fn keeps_payloads(&self) -> bool {
        true
    }

    /// The engine waits with nothing to do: a moment for short work that
    /// would otherwise delay the next call (warming the caches the next
    /// send writes to).
    fn idle(&mut self);

    /// A receive was posted. `spec.source == None` means ANY_SOURCE; a
    /// restarted process may force it to the logged source, or hold it
    /// back from matching (see [`RecvPlan`]).
    fn post_recv(&mut self, call: CallId, spec: &mut RecvSpec) -> Result<RecvPlan>;

    /// Does [`Protocol::post_recv`] ever change a receive? Asked once,
    /// when the protocol is installed; `false` spares every receive the
    /// call (it is posted as it is). The default: `true`.
    fn hears_posted_receives(&self) -> bool {
        true
    }

    /// A receive posted with ANY_SOURCE (call `recv`) matched a message
    /// from world rank `source`.
    fn matched(&mut self, recv: CallId, source: usize) -> Result<()>;

    /// A completion call (`call`) of `kind` over `requests` (inactive slots
    /// are `None`) reports the requests at the indices `done` as complete
    /// (possibly none).
    fn completion(
        &mut self,
        call: CallId,
        kind: CompletionKind,
        requests: &[Option<RequestInfo>],
        done: &[usize],
    ) -> Result<()>;

    /// A blocking wait whose answer is determined (`kind`) returned: every
    /// request in `requests` completed. No call id: there is nothing to
    /// log or replay; the protocol hears of it so that no entry point
    /// bypasses it, unless it said it has nothing to do with it
    /// ([`Protocol::hears_waits`]).
    fn waited(&mut self, kind: WaitKind, requests: &[Option<RequestInfo>]) -> Result<()>;

    /// Does [`Protocol::waited`] do anything? Asked once, when the
    /// protocol is installed; `false` spares every blocking wait the call
    /// (and describing its requests). The default: `true`.
    fn hears_waits(&self) -> bool {
        true
    }

    /// A communicator was made (`dup`, `split`) or freed. The world and
    /// `self_comm` are never announced; `Freed` comes only from an explicit
    /// `free` (a communicator dropped without one is not reported, and a
    /// handle's clones share its context). May come after
    /// [`Protocol::finalize`] (a program that frees communicators late).
    fn communicator(&mut self, change: &CommChange<'_>) -> Result<()>;

    /// A persistent request was made (its starts come as sends and
    /// receives).
    fn persistent(&mut self, init: &PersistentInit) -> Result<()>;

    /// A probe answered: `found` is the probed message, if any. `blocking`
    /// for `probe`, false for `iprobe`; `any_source` if the probe named no
    /// source.
    fn probe(
        &mut self,
        call: CallId,
        any_source: bool,
        blocking: bool,
        found: Option<&Status>,
    ) -> Result<()>;

    /// `cancel` of a receive request (`request` is the call that created it).
    fn cancel(&mut self, call: CallId, request: CallId, cancelled: bool) -> Result<()>;

    /// The rank finishes: make everything durable.
    fn finalize(&mut self) -> Result<()>;

    /// Counters for `--stats`, as (name, value).
    fn stats(&self) -> Vec<(String, u64)>;

    // ------------------------------------------------------------ recovery

    /// The engine state of the checkpoint this process restarts from (taken
    /// once, when the protocol is installed); `None` at a first start or
    /// when there is no checkpoint.
    fn take_restored(&mut self) -> Option<EngineSnapshot>;

    /// The application's state saved with that checkpoint.
    fn restart_state(&self) -> Option<Vec<u8>>;

    /// For each lane, the number of the last call with a logged event a
    /// restarted process replays (empty if none): past it, the lane's
    /// calls run on their own.
    fn replay_ends(&self) -> Vec<(u32, u64)>;

    /// The logged answer of completion call `call` (a list of the call ids
    /// of the requests it completed), given the call ids of the requests
    /// it was passed. Asked for every completion call, so that a logged
    /// answer that does not fit (see [`crate::Error::Diverged`]) is an
    /// error rather than a different outcome.
    fn replay_completion(&mut self, call: CallId, passed: &[CallId])
    -> Result<Replay<Vec<CallId>>>;

    /// The logged answer of probe call `call` (`blocking` for `probe`) of
    /// `spec`: the (source, tag) found, or `None` for "nothing".
    fn replay_probe(
        &mut self,
        call: CallId,
        spec: &RecvSpec,
        blocking: bool,
    ) -> Result<Replay<Option<(usize, i32)>>>;

    /// The requests (by the calls that created them) whose completion is
    /// logged as the outcome of call `call`, without answering it: for a
    /// binding that completes a request at points of its own choosing (the
    /// MPI C library's one-sided requests), so that a re-execution makes
    /// that completion call where the logged execution did. `None` when no
    /// completion is logged for `call`.
    fn replay_logged_completion(&self, _call: CallId) -> Option<Vec<CallId>> {
        None
    }

    /// The logged outcome of cancel call `call` of the receive created by
    /// call `request`.
    fn replay_cancel(&mut self, call: CallId, request: CallId) -> Result<Replay<bool>>;

    /// This restarted process linked to `dest`'s current process, which
    /// holds `held` of this process's messages on each context and is
    /// *settled*: past any re-execution of its own (every logged call
    /// reached, so every logged completion of a message it needed is in),
    /// with no receive bound to this rank by its log or by a first
    /// fragment (whose next message a logged match may name). A message
    /// sent before then and beyond `held` reached no running process and
    /// no durable event names it: a re-execution need not make it again
    /// (see `vprotocol`'s `previous_sends`). Called once per peer, at
    /// most, and never for a peer that is not settled. Nothing by
    /// default.
    fn peer_holds(&mut self, _dest: usize, _held: &LaneMap<u64>) {}

    /// Every logged message to `dest` whose sequence number on its context
    /// is above `after`'s for that context, in order within each context
    /// (to send again after `dest` restarted, or after this process
    /// restarted and `dest` lacks them). An error if one cannot be read
    /// back (the peer would be short of it).
    fn logged_messages(&mut self, dest: usize, after: &LaneMap<u64>) -> Result<Vec<LoggedMessage>>;

    /// Save a checkpoint (`engine` plus the application's `app` bytes).
    /// Returns, for each sender and context, up to which sequence number
    /// it may now free its log records to this process: (sender, context,
    /// sequence number).
    fn checkpoint(&mut self, engine: &EngineSnapshot, app: &[u8])
    -> Result<Vec<(usize, u32, u64)>>;

    /// Receiver `dest` checkpointed: records to it on `context` up to
    /// `up_to` are not needed any more.
    fn free_log(&mut self, dest: usize, context: u32, up_to: u64) -> Result<()>;

    /// When one rank is replayed alone (`vpml replay`): every message rank
    /// `from` sent to it in the recording, in order. Empty otherwise.
    fn recorded_incoming(&mut self, from: usize) -> Result<Vec<LoggedMessage>>;
}
