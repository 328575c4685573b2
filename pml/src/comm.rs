//! Communicators and the point-to-point calls on them.

use std::cell::RefCell;
use std::rc::Rc;

use crate::buffer::{Buffer, Pod};
use crate::engine::{Engine, EngineStats, RecvNow};
use crate::error::{Error, Result};
use crate::idup::{Reserve, reserved};
use crate::matching::{ANY_TAG, RecvSpec, Source};
use crate::protocol::{CommChange, PersistentInit};
use crate::request::{Persistent, PersistentKind, Request};
use crate::status::Status;

pub(crate) type Shared = Rc<RefCell<Engine>>;

/// A communicator: a group of ranks with its own message space.
///
/// The world communicator holds every rank (context 0); [`Comm::dup`] and
/// [`Comm::split`] make new ones. Each communicator owns two contexts: one
/// for point-to-point messages and the next for its collectives, so the two
/// never match each other. Cloning is cheap and shares the engine.
#[derive(Clone)]
pub struct Comm {
    pub(crate) engine: Shared,
    pub(crate) context: u32,
    /// `None` for the world (identity mapping); for an
    /// intercommunicator, the local group.
    pub(crate) group: Option<Rc<Group>>,
    /// For an intercommunicator: the remote group and the local group's
    /// own communicator (see `crate::intercomm`).
    pub(crate) inter: Option<Rc<Inter>>,
    /// The contexts reserved for [`Comm::idup`] (`None`: none).
    pub(crate) reserve: Option<crate::idup::Reserve>,
}

/// What makes a communicator an intercommunicator.
pub(crate) struct Inter {
    /// The remote group: point-to-point ranks name its members (its
    /// `rank` is meaningless here).
    pub(crate) remote: Option<Rc<Group>>,
    /// The local group as an intracommunicator, on contexts of its own,
    /// for the local phases of collectives.
    pub(crate) local: Comm,
}

/// The members of a communicator other than the world.
pub(crate) struct Group {
    /// World rank of each communicator rank.
    pub(crate) members: Vec<usize>,
    /// This process's rank in the communicator.
    pub(crate) rank: usize,
    /// Communicator rank of each world rank (`usize::MAX` if not a member).
    pub(crate) rank_of_world: Vec<usize>,
}

impl Group {
    /// Translate world ranks in a status into communicator ranks.
    #[inline]
    pub(crate) fn localize(&self, mut st: Status) -> Status {
        let local = |w: usize| self.rank_of_world.get(w).copied().unwrap_or(usize::MAX);
        st.source = local(st.source);
        if let Some(Error::Truncated { source_rank, .. }) = st.error.as_deref_mut() {
            *source_rank = local(*source_rank);
        }
        st
    }
}

/// Translate a status for `group` (identity for the world).
#[inline]
pub(crate) fn localize(group: &Option<Rc<Group>>, st: Status) -> Status {
    match group {
        Some(g) => g.localize(st),
        None => st,
    }
}

/// `rank` is a rank of a group of `size`.
fn check_below(rank: usize, size: usize) -> Result<()> {
    if rank < size {
        Ok(())
    } else {
        Err(Error::InvalidRank {
            rank: i64::try_from(rank).unwrap_or(-1),
            size,
        })
    }
}

/// Context of [`Comm::self_comm`] communicators (the next one is their
/// collectives'); agreed contexts stay below the one before it, which
/// (like `u32::MAX`) names a lane of calls instead (see
/// [`crate::protocol::CallId`]).
pub(crate) const SELF_CONTEXT: u32 = u32::MAX - 2;

const _: () = assert!(crate::protocol::CallId::GENERALIZED_LANE == SELF_CONTEXT - 1);

/// Send modes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mode {
    Standard,
    Synchronous,
}

impl Comm {
    /// This process's rank in the communicator.
    pub fn rank(&self) -> usize {
        match &self.group {
            Some(g) => g.rank,
            None => self.engine.borrow().rank(),
        }
    }

    /// Number of ranks in the communicator.
    pub fn size(&self) -> usize {
        match &self.group {
            Some(g) => g.members.len(),
            None => self.engine.borrow().size(),
        }
    }

    /// World rank of communicator rank `r` (checked by the callers).
    pub(crate) fn world_rank(&self, r: usize) -> usize {
        match &self.group {
            Some(g) => g.members[r],
            None => r,
        }
    }

    /// The group point-to-point ranks name: the remote group of an
    /// intercommunicator, this communicator's own otherwise.
    #[inline]
    pub(crate) fn peers(&self) -> &Option<Rc<Group>> {
        match &self.inter {
            Some(i) => &i.remote,
            None => &self.group,
        }
    }

    /// Number of ranks point-to-point calls may name (the remote group's
    /// size on an intercommunicator).
    pub(crate) fn peer_count(&self) -> usize {
        match self.peers() {
            Some(g) => g.members.len(),
            None => self.engine.borrow().size(),
        }
    }

    /// World rank of peer `r` (checked by the callers): of the remote
    /// group on an intercommunicator.
    #[inline]
    pub(crate) fn peer_world_rank(&self, r: usize) -> usize {
        match self.peers() {
            Some(g) => g.members[r],
            None => r,
        }
    }

    /// The members' ranks in the world communicator, in this
    /// communicator's rank order.
    pub fn world_ranks(&self) -> Vec<usize> {
        (0..self.size()).map(|r| self.world_rank(r)).collect()
    }

    /// Translate world ranks in a status into peer ranks.
    #[inline]
    pub(crate) fn localize(&self, st: Status) -> Status {
        localize(self.peers(), st)
    }

    /// The communicator context used by this communicator's collectives.
    pub(crate) fn collective_context(&self) -> u32 {
        self.context + 1
    }

    /// A new communicator with the same members and a fresh message space
    /// (collective: every member must call it).
    pub fn dup(&self) -> Result<Comm> {
        if self.inter.is_some() {
            return self.inter_dup();
        }
        let context = self.agree_context()?;
        self.dup_on(context)
    }

    /// [`Comm::dup`] on a context the members agreed otherwise (see
    /// [`Comm::context_proposal`]).
    pub fn dup_on(&self, context: u32) -> Result<Comm> {
        self.intra_only("dup_on")?;
        let comm = Comm {
            engine: self.engine.clone(),
            context,
            group: self.group.clone(),
            inter: None,
            reserve: Some(Reserve::agreed(context, 2)),
        };
        comm.announce()?;
        Ok(comm)
    }

    /// Tell the protocol this communicator was made.
    pub(crate) fn announce(&self) -> Result<()> {
        let (members, remote) = (self.world_ranks(), self.remote_world_ranks());
        self.engine
            .borrow_mut()
            .communicator_changed(&CommChange::Created {
                context: self.context,
                members: &members,
                remote: &remote,
            })
    }

    /// Partition the communicator: members that pass the same `color` form
    /// a new communicator, ordered by `key` then by rank here; `None` as
    /// color (`MPI_UNDEFINED`) joins none and gets `None` back. Collective.
    pub fn split(&self, color: Option<u32>, key: i64) -> Result<Option<Comm>> {
        if self.inter.is_some() {
            return self.inter_split(color, key);
        }
        let context = self.agree_context()?;
        let mut all = vec![0u64; 3 * self.size()];
        self.allgather(&split_entry(color, key), &mut all)?;
        self.split_on(context, &all, color)
    }

    /// [`Comm::split`] on a context the members agreed otherwise (see
    /// [`Comm::context_proposal`]), given every member's
    /// [`split_entry`], in rank order.
    pub fn split_on(&self, context: u32, all: &[u64], color: Option<u32>) -> Result<Option<Comm>> {
        self.intra_only("split_on")?;
        if all.len() != 3 * self.size() {
            return Err(Error::Collective(format!(
                "split: {} entries for {} members",
                all.len() / 3,
                self.size()
            )));
        }
        let Some(color) = color else {
            return Ok(None);
        };
        let mut members: Vec<(i64, usize)> = all
            .chunks_exact(3)
            .enumerate()
            .filter(|(_, c)| c[0] == 1 && c[1] == u64::from(color))
            .map(|(r, c)| (c[2] as i64, r))
            .collect();
        members.sort();
        let world: Vec<usize> = members.iter().map(|&(_, r)| self.world_rank(r)).collect();
        let comm = self.with_members(context, world).agreed();
        comm.announce()?;
        Ok(Some(comm))
    }

    /// A communicator of `members` (world ranks, in the order of their new
    /// ranks), made by them alone: collective over `members` only, who all
    /// pass the same list (MPI's `MPI_Comm_create_group`); a process not
    /// in the list gets `None` at once. Every member must belong to this
    /// communicator, once. The members agree on the new context over this
    /// communicator's collective channel, so two such calls on one
    /// communicator whose member lists overlap must come in the same
    /// order at every common member.
    pub fn create_group(&self, members: &[usize]) -> Result<Option<Comm>> {
        self.check_group(members)?;
        if !members.contains(&self.world_rank(self.rank())) {
            return Ok(None);
        }
        // The members alone, on this communicator's channels, agree on
        // the context.
        let among = self.with_members(self.context, members.to_vec());
        let context = among.agree_context()?;
        self.create_group_on(members, context)
    }

    /// [`Comm::create_group`] on a context its members agreed otherwise (a
    /// block of [`Comm::contexts_per_communicator`]; see
    /// [`Comm::context_proposal`]).
    pub fn create_group_on(&self, members: &[usize], context: u32) -> Result<Option<Comm>> {
        self.check_group(members)?;
        if !members.contains(&self.world_rank(self.rank())) {
            return Ok(None);
        }
        let comm = self.with_members(context, members.to_vec()).agreed();
        comm.announce()?;
        Ok(Some(comm))
    }

    /// Check that `members` (world ranks) are distinct members of this
    /// intracommunicator.
    fn check_group(&self, members: &[usize]) -> Result<()> {
        self.intra_only("create_group")?;
        let mine = self.world_ranks();
        let mut seen = vec![false; self.engine.borrow().size()];
        for &w in members {
            if !mine.contains(&w) || std::mem::replace(&mut seen[w], true) {
                return Err(Error::Collective(format!(
                    "create_group: world rank {w} is not a member, or listed twice"
                )));
            }
        }
        Ok(())
    }

    /// A communicator of `world` (world ranks in rank order, this process
    /// among them) on `context`, with no reserve for idups (one made by
    /// agreement gets [`Comm::agreed`]).
    pub(crate) fn with_members(&self, context: u32, world: Vec<usize>) -> Comm {
        let me = self.world_rank(self.rank());
        let mut rank_of_world = vec![usize::MAX; self.engine.borrow().size()];
        for (i, &w) in world.iter().enumerate() {
            rank_of_world[w] = i;
        }
        let rank = rank_of_world[me];
        Comm {
            engine: self.engine.clone(),
            context,
            group: Some(Rc::new(Group {
                members: world,
                rank,
                rank_of_world,
            })),
            inter: None,
            reserve: None,
        }
    }

    /// This communicator, made by agreement on its context, with the
    /// reserve for its idups that agreement took.
    pub(crate) fn agreed(mut self) -> Comm {
        let per = if self.inter.is_some() { 4 } else { 2 };
        self.reserve = Some(Reserve::agreed(self.context, per));
        self
    }

    /// A communicator of this process alone (MPI's `MPI_COMM_SELF`). Made
    /// without communication, so a restarted process can make it again at
    /// any point; its messages stay apart from every other communicator's
    /// (a context of its own).
    pub fn self_comm(&self) -> Comm {
        let me = self.world_rank(self.rank());
        let mut rank_of_world = vec![usize::MAX; self.engine.borrow().size()];
        rank_of_world[me] = 0;
        Comm {
            engine: self.engine.clone(),
            context: SELF_CONTEXT,
            group: Some(Rc::new(Group {
                members: vec![me],
                rank: 0,
                rank_of_world,
            })),
            inter: None,
            reserve: None,
        }
    }

    /// Release the communicator. (Nothing is held beyond the handle; this
    /// exists for symmetry with MPI and to end its use explicitly; the
    /// protocol hears of it.)
    pub fn free(self) {
        if self.context == 0 || self.context == SELF_CONTEXT {
            // The world and self were never announced as made.
            return;
        }
        let change = CommChange::Freed {
            context: self.context,
        };
        // A protocol that fails here has failed the engine: the next call
        // reports it.
        let _ = self.engine.borrow_mut().communicator_changed(&change);
    }

    /// Agree on a context id for a new communicator: the largest next-free
    /// id among the members. Two communicators that share a member always
    /// get different ids, because each member hands out increasing ids.
    pub(crate) fn agree_context(&self) -> Result<u32> {
        let mut agreed = [0u32];
        self.allreduce(&[self.context_proposal()], &mut agreed, &crate::op::Max)?;
        self.commit_context(agreed[0])
    }

    /// The context this communicator's point-to-point messages carry:
    /// unique among the communicators a process holds, the same at every
    /// member.
    pub fn context_id(&self) -> u32 {
        self.context
    }

    /// What this process proposes in a context agreement: its next free
    /// context. The agreed context is the largest proposal of the members
    /// ([`Comm::commit_context`]). For bindings that run the agreement
    /// themselves — threads that make communicators at once must not run
    /// two agreements over one process's contexts at the same time.
    pub fn context_proposal(&self) -> u32 {
        self.engine.borrow().next_context()
    }

    /// Take `agreed` (the largest proposal) and the contexts after it that
    /// a communicator reserves ([`Comm::contexts_per_communicator`]);
    /// returns it. The next free context only moves up.
    pub fn commit_context(&self, agreed: u32) -> Result<u32> {
        self.commit_context_block(agreed, Self::contexts_per_communicator())
    }

    /// [`Comm::commit_context`] for a block of `taken` contexts (an
    /// intercommunicator's: [`Comm::contexts_per_intercommunicator`]).
    pub fn commit_context_block(&self, agreed: u32, taken: u32) -> Result<u32> {
        if agreed >= SELF_CONTEXT - taken {
            return Err(Error::RequestState("communicator context ids exhausted"));
        }
        let mut eng = self.engine.borrow_mut();
        let next = eng.next_context().max(agreed + taken);
        eng.set_next_context(next);
        Ok(agreed)
    }

    /// Propose, and hold for this agreement alone, the next free block of
    /// contexts: the next free context moves past it (for bindings that
    /// run several agreements of one process at once; see
    /// [`Comm::context_proposal`]).
    pub fn take_context_block(&self) -> u32 {
        self.take_context_block_of(Self::contexts_per_communicator())
    }

    /// [`Comm::take_context_block`] for a block of `taken` contexts.
    pub fn take_context_block_of(&self, taken: u32) -> u32 {
        let mut eng = self.engine.borrow_mut();
        let first = eng.next_context();
        let next = first.saturating_add(taken);
        eng.set_next_context(next.min(SELF_CONTEXT));
        first
    }

    /// How many contexts an intracommunicator made by agreement takes: its
    /// own two and those reserved for its idups.
    pub fn contexts_per_communicator() -> u32 {
        reserved(2)
    }

    /// The job id given by the launcher (`"singleton"` outside `vpml run`).
    pub fn job_id(&self) -> String {
        self.engine.borrow().job_id().to_string()
    }

    /// Counters of this rank's engine.
    pub fn stats(&self) -> EngineStats {
        self.engine.borrow().stats()
    }

    /// Name of the fault-tolerance protocol in use (`none`, `pessimist`, …).
    pub fn protocol(&self) -> &'static str {
        self.engine.borrow().protocol_name()
    }

    /// The id of the last call on this communicator's point-to-point lane
    /// (see [`crate::protocol`]): every send and receive, probe, cancel
    /// and test/wait-any/wait-some call on it takes the next id (whatever
    /// the protocol), and logs name calls by it.
    pub fn last_call_id(&self) -> crate::protocol::CallId {
        self.engine.borrow().last_call(self.context)
    }

    /// Non-deterministic events this rank's protocol has logged so far
    /// (0 without a protocol).
    pub fn events_logged(&self) -> u64 {
        self.protocol_stats()
            .into_iter()
            .find(|(k, _)| k == "events_total")
            .map_or(0, |(_, v)| v)
    }

    /// Counters of the fault-tolerance protocol, as (name, value).
    pub fn protocol_stats(&self) -> Vec<(String, u64)> {
        self.engine.borrow().protocol_stats()
    }

    /// Save a checkpoint of this rank: `state` is the application's state,
    /// vpml adds its own (channel counters, unmatched messages, position in
    /// the logs). If the rank crashes later, it restarts from here: the
    /// new process gets `state` back from [`Comm::restart_state`] and
    /// continues, re-executing from this point. With `pessimist` each
    /// rank checkpoints on its own; with `coordinated` every call is a
    /// checkpoint call that every rank must make, and the ranks take a
    /// global checkpoint together (see the `coordinated` protocol for
    /// what a program must do). Call it where no request of this rank is
    /// in flight (an error otherwise). Communicators other than the world
    /// that exist at the checkpoint are not saved: create them after it, or
    /// before the first checkpoint from the start of the program.
    ///
    /// Returns whether a checkpoint was taken here: false (and nothing
    /// saved) when no fault-tolerance protocol is active — without one a
    /// crash ends the job anyway — or, with `coordinated`, when the ranks
    /// agreed on a later call.
    ///
    /// ```no_run
    /// # fn main() -> vpml_pml::Result<()> {
    /// let world = vpml_pml::init()?;
    /// // A restarted process resumes from its last checkpoint.
    /// let (mut step, mut x) = match world.restart_state() {
    ///     Some(b) => (u64::from_le_bytes(b[..8].try_into().unwrap()),
    ///                 f64::from_le_bytes(b[8..16].try_into().unwrap())),
    ///     None => (0, 1.0),
    /// };
    /// while step < 1000 {
    ///     let mut v = [x * 0.5];
    ///     world.allreduce_in_place(&mut v, &vpml_pml::Sum)?;
    ///     x = v[0];
    ///     step += 1;
    ///     world.checkpoint_if_due(std::time::Duration::from_secs(10), || {
    ///         [step.to_le_bytes(), x.to_le_bytes()].concat()
    ///     })?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn checkpoint(&self, state: &[u8]) -> Result<bool> {
        self.engine.borrow_mut().checkpoint(state)
    }

    /// [`Comm::checkpoint`] with `state()`, if `interval` has passed since
    /// this rank's last checkpoint (or its start) — with `coordinated`,
    /// if the ranks agreed on this call for a global checkpoint (one rank's
    /// interval due, or one asked for with `vpml checkpoint`, SIGUSR1 to
    /// the launcher or `--checkpoint-interval`). Returns whether one was
    /// taken. `state` is not called when none is.
    pub fn checkpoint_if_due(
        &self,
        interval: std::time::Duration,
        state: impl FnOnce() -> Vec<u8>,
    ) -> Result<bool> {
        let Some(at) = self.engine.borrow_mut().checkpoint_if_due(interval)? else {
            return Ok(false);
        };
        // Made outside the engine: `state` may call this communicator.
        let bytes = state();
        self.engine.borrow_mut().checkpoint_at(at, &bytes)
    }

    /// The application state saved by the checkpoint this process restarts
    /// from; `None` at a first start, or when the rank crashed before its
    /// first checkpoint (it then restarts from the beginning).
    pub fn restart_state(&self) -> Option<Vec<u8>> {
        self.engine.borrow().restart_state()
    }

    /// 0 for the first process of this rank, i for its i-th restart.
    pub fn incarnation(&self) -> u32 {
        self.engine.borrow().incarnation()
    }

    /// True while this process re-executes what an earlier one of its rank
    /// did: restarted and not yet past its last logged event or the last
    /// send its peers already had (or replayed alone by `vpml replay`).
    pub fn reexecuting(&self) -> bool {
        self.engine.borrow().reexecuting()
    }

    /// Stop the job because this process's re-execution cannot follow the
    /// logged execution, as for any divergence: the launcher is told (it
    /// prints one line saying `what`, with the rank and incarnation, and
    /// ends the job with exit status 70) and every later call of this
    /// process fails. Returns the line if no launcher was there to tell
    /// (a rank replayed alone), for the caller to print.
    pub fn stop_diverged(&self, what: &str) -> Option<String> {
        let mut eng = self.engine.borrow_mut();
        let e = eng.diverged(what);
        eng.fail(&e);
        (!eng.has_launcher()).then(|| e.to_string())
    }

    /// Was this process started by a launcher (which prints the job's
    /// lines), rather than replayed alone?
    pub fn has_launcher(&self) -> bool {
        self.engine.borrow().has_launcher()
    }

    /// True when large messages are copied once, straight from the
    /// sender's memory (false where the kernel forbids it; then they are
    /// pipelined through shared memory).
    pub fn single_copy(&self) -> bool {
        self.engine.borrow().single_copy()
    }

    pub(crate) fn check_rank(&self, rank: usize) -> Result<()> {
        check_below(rank, self.size())
    }

    /// Check a destination and tag; return the destination's world rank.
    pub(crate) fn check_dest(&self, dest: usize, tag: i32) -> Result<usize> {
        if tag < 0 {
            return Err(Error::InvalidTag(tag));
        }
        check_below(dest, self.peer_count())?;
        Ok(self.peer_world_rank(dest))
    }

    /// Inlined: the receive calls read the spec back at once, and through
    /// memory a load wider than the stores that wrote it would wait for
    /// every store before it (a send's ring writes included).
    #[inline]
    pub(crate) fn spec(&self, source: Source, tag: i32) -> Result<RecvSpec> {
        if tag < 0 && tag != ANY_TAG {
            return Err(Error::InvalidTag(tag));
        }
        let source = match source {
            Source::Any => None,
            Source::Rank(r) => {
                check_below(r, self.peer_count())?;
                Some(self.peer_world_rank(r))
            }
        };
        Ok(RecvSpec {
            source,
            tag: (tag != ANY_TAG).then_some(tag),
            context: self.context,
        })
    }

    fn blocking_send(&self, dest: usize, tag: i32, data: &[u8], mode: Mode) -> Result<()> {
        let dest = self.check_dest(dest, tag)?;
        self.raw_send(dest, tag, self.context, data, mode)
    }

    /// Blocking send to world rank `dest` on `context` (no checks).
    pub(crate) fn raw_send(
        &self,
        dest: usize,
        tag: i32,
        context: u32,
        data: &[u8],
        mode: Mode,
    ) -> Result<()> {
        let mut eng = self.engine.borrow_mut();
        if mode == Mode::Standard && eng.try_send_now(dest, tag, context, data)? {
            return Ok(());
        }
        // SAFETY: `data` stays borrowed until the send completes below.
        let id = unsafe {
            eng.start_send(
                dest,
                tag,
                context,
                data.as_ptr(),
                data.len(),
                mode == Mode::Synchronous,
            )?
        };
        let waited = eng.wait(id);
        let status = eng.take_status(id);
        waited?;
        status.map(|_| ())
    }

    /// Send `data` to `dest` with `tag`. Returns once `data` may be reused
    /// (small messages are buffered; large ones wait for the receiver).
    ///
    /// ```
    /// # use vpml_pml as vpml;
    /// let world = vpml::init()?;
    /// if world.size() == 1 {
    ///     world.send(0, 7, &[1.5f64, 2.5])?; // to ourselves
    ///     let mut buf = [0f64; 2];
    ///     let st = world.recv(0, 7, &mut buf)?;
    ///     assert_eq!((buf, st.tag()), ([1.5, 2.5], 7));
    /// }
    /// # Ok::<(), vpml_pml::Error>(())
    /// ```
    pub fn send<T: Pod>(&self, dest: usize, tag: i32, data: &[T]) -> Result<()> {
        self.blocking_send(dest, tag, bytemuck::cast_slice(data), Mode::Standard)
    }

    /// Synchronous send: returns only after the matching receive was posted.
    pub fn ssend<T: Pod>(&self, dest: usize, tag: i32, data: &[T]) -> Result<()> {
        self.blocking_send(dest, tag, bytemuck::cast_slice(data), Mode::Synchronous)
    }

    /// Receive into `buf` from `source` (a rank or [`crate::ANY_SOURCE`]) with
    /// `tag` (or [`ANY_TAG`]). A message longer than `buf` fills it and
    /// returns [`Error::Truncated`].
    pub fn recv<T: Pod>(
        &self,
        source: impl Into<Source>,
        tag: i32,
        buf: &mut [T],
    ) -> Result<Status> {
        let spec = self.spec(source.into(), tag)?;
        self.raw_recv(spec, bytemuck::cast_slice_mut(buf))
    }

    /// Blocking receive for an already translated spec.
    pub(crate) fn raw_recv(&self, spec: RecvSpec, bytes: &mut [u8]) -> Result<Status> {
        let mut eng = self.engine.borrow_mut();
        let st = recv_blocking(&mut eng, spec, bytes)?;
        drop(eng);
        self.localize(st).into_result()
    }

    /// Send to `dest` and receive from `source` in one call, without
    /// deadlock whatever the partners do first.
    pub fn sendrecv<T: Pod, U: Pod>(
        &self,
        data: &[T],
        dest: usize,
        send_tag: i32,
        buf: &mut [U],
        source: impl Into<Source>,
        recv_tag: i32,
    ) -> Result<Status> {
        let dest = self.check_dest(dest, send_tag)?;
        let spec = self.spec(source.into(), recv_tag)?;
        self.raw_sendrecv(
            bytemuck::cast_slice(data),
            dest,
            send_tag,
            self.context,
            bytemuck::cast_slice_mut(buf),
            spec,
            || {},
        )
    }

    /// `sendrecv` to world rank `dest` on `context` for a translated spec;
    /// `meanwhile` runs once both operations started (or, when the send
    /// left at once and the receive may come straight off the ring, after
    /// the send), before waiting for them (work that overlaps the
    /// transfer: it must not use the engine).
    #[allow(clippy::too_many_arguments)] // sendrecv's own list, and the overlap
    pub(crate) fn raw_sendrecv(
        &self,
        out: &[u8],
        dest: usize,
        send_tag: i32,
        context: u32,
        inp: &mut [u8],
        spec: RecvSpec,
        meanwhile: impl FnOnce(),
    ) -> Result<Status> {
        let mut eng = self.engine.borrow_mut();
        // Nothing else going on: the send leaves now, whole, and the
        // receive may come straight off the ring (posted after the send,
        // which can only change when an eager message of the peer is
        // matched: never, under a protocol that hears no receives).
        if eng.receives_may_bypass() && eng.try_send_now(dest, send_tag, context, out)? {
            meanwhile();
            let st = recv_blocking(&mut eng, spec, inp)?;
            drop(eng);
            return self.localize(st).into_result();
        }
        // SAFETY: both buffers stay borrowed until both operations complete.
        let (r, s) = unsafe {
            let r = eng.start_recv(spec, inp.as_mut_ptr(), inp.len())?;
            let s = eng.start_send_lean(dest, send_tag, context, out.as_ptr(), out.len(), false)?;
            (r, s)
        };
        meanwhile();
        let waited = eng.wait_all(&[Some(r), Some(s)]);
        if let Err(e) = waited {
            eng.withdraw(r);
            return Err(e);
        }
        // (A send complete at start left nothing to take.)
        if !s.is_complete_send() {
            eng.take_status(s)?;
        }
        let st = eng.take_status(r)?;
        drop(eng);
        self.localize(st).into_result()
    }

    fn start_isend<B: Buffer>(
        &self,
        dest: usize,
        tag: i32,
        buf: B,
        mode: Mode,
    ) -> Result<Request<B>> {
        let dest = self.check_dest(dest, tag)?;
        let bytes = buf.as_bytes();
        // SAFETY: the request keeps `buf` private until completion (Buffer
        // contract: its storage does not move with it).
        let id = unsafe {
            self.engine.borrow_mut().start_send(
                dest,
                tag,
                self.context,
                bytes.as_ptr(),
                bytes.len(),
                mode == Mode::Synchronous,
            )?
        };
        Ok(Request::new(
            self.engine.clone(),
            self.peers().clone(),
            id,
            buf,
        ))
    }

    /// Start sending `buf`; the request gives it back when done.
    ///
    /// ```
    /// # use vpml_pml as vpml;
    /// let world = vpml::init()?;
    /// let me = world.rank();
    /// let r = world.irecv(me, 0, vec![0u32; 3])?;
    /// let s = world.isend(me, 0, vec![1u32, 2, 3])?;
    /// let sent = s.wait()?;
    /// let got = r.wait()?;
    /// assert_eq!(got.buf, sent.buf);
    /// assert_eq!(got.status.count::<u32>()?, 3);
    /// # Ok::<(), vpml_pml::Error>(())
    /// ```
    pub fn isend<B: Buffer>(&self, dest: usize, tag: i32, buf: B) -> Result<Request<B>> {
        self.start_isend(dest, tag, buf, Mode::Standard)
    }

    /// Start a synchronous send: it completes once the receive matched.
    pub fn issend<B: Buffer>(&self, dest: usize, tag: i32, buf: B) -> Result<Request<B>> {
        self.start_isend(dest, tag, buf, Mode::Synchronous)
    }

    /// Start receiving into `buf`.
    pub fn irecv<B: Buffer>(
        &self,
        source: impl Into<Source>,
        tag: i32,
        mut buf: B,
    ) -> Result<Request<B>> {
        let spec = self.spec(source.into(), tag)?;
        let bytes = buf.as_bytes_mut();
        // SAFETY: as in `start_isend`.
        let id = unsafe {
            self.engine
                .borrow_mut()
                .start_recv(spec, bytes.as_mut_ptr(), bytes.len())?
        };
        Ok(Request::new(
            self.engine.clone(),
            self.peers().clone(),
            id,
            buf,
        ))
    }

    /// Block until a message matching (`source`, `tag`) can be received;
    /// return its status without receiving it.
    pub fn probe(&self, source: impl Into<Source>, tag: i32) -> Result<Status> {
        let spec = self.spec(source.into(), tag)?;
        let st = self.engine.borrow_mut().probe(&spec)?;
        Ok(self.localize(st))
    }

    /// Like [`Comm::probe`] but return `None` at once if nothing matches yet.
    pub fn iprobe(&self, source: impl Into<Source>, tag: i32) -> Result<Option<Status>> {
        let spec = self.spec(source.into(), tag)?;
        let st = self.engine.borrow_mut().iprobe(&spec)?;
        Ok(st.map(|st| self.localize(st)))
    }

    /// A persistent standard send of `buf` to `dest`; start it as often as needed.
    pub fn send_init<B: Buffer>(&self, dest: usize, tag: i32, buf: B) -> Result<Persistent<B>> {
        self.persistent_send(dest, tag, buf, Mode::Standard)
    }

    /// A persistent synchronous send.
    pub fn ssend_init<B: Buffer>(&self, dest: usize, tag: i32, buf: B) -> Result<Persistent<B>> {
        self.persistent_send(dest, tag, buf, Mode::Synchronous)
    }

    fn persistent_send<B: Buffer>(
        &self,
        dest: usize,
        tag: i32,
        buf: B,
        mode: Mode,
    ) -> Result<Persistent<B>> {
        let dest = self.check_dest(dest, tag)?;
        self.engine.borrow_mut().persistent_made(&PersistentInit {
            send: true,
            peer: Some(dest),
            tag,
            context: self.context,
        })?;
        Ok(Persistent::new(
            self.clone(),
            PersistentKind::Send { dest, tag, mode },
            buf,
        ))
    }

    /// Tell the protocol that a persistent request was made by other means
    /// than [`Comm::send_init`]/[`Comm::recv_init`] (the MPI C library
    /// keeps its own): a send to, or a receive from, rank `peer` of this
    /// communicator (`None`: any source), with `tag`.
    pub fn persistent_made(&self, send: bool, peer: Option<usize>, tag: i32) -> Result<()> {
        let peer = match peer {
            Some(p) if send => Some(self.check_dest(p, tag)?),
            Some(p) => self.spec(p.into(), tag)?.source,
            None => self.spec(crate::ANY_SOURCE, tag)?.source,
        };
        self.engine.borrow_mut().persistent_made(&PersistentInit {
            send,
            peer,
            tag,
            context: self.context,
        })
    }

    /// A persistent receive into `buf`.
    pub fn recv_init<B: Buffer>(
        &self,
        source: impl Into<Source>,
        tag: i32,
        buf: B,
    ) -> Result<Persistent<B>> {
        let spec = self.spec(source.into(), tag)?;
        self.engine.borrow_mut().persistent_made(&PersistentInit {
            send: false,
            peer: spec.source,
            tag,
            context: self.context,
        })?;
        Ok(Persistent::new(
            self.clone(),
            PersistentKind::Recv { spec },
            buf,
        ))
    }

    /// Stop the whole job with exit code `code` (like `MPI_Abort`).
    pub fn abort(&self, code: i32) -> ! {
        let msg = format!("rank {} called abort({code})", self.rank());
        self.engine.borrow_mut().abort(code, &msg);
        std::process::exit(code)
    }
}

/// A member's entry in a split's allgather: (has a color, color, key).
pub fn split_entry(color: Option<u32>, key: i64) -> [u64; 3] {
    [
        u64::from(color.is_some()),
        u64::from(color.unwrap_or(0)),
        key as u64,
    ]
}

/// A blocking receive into `bytes`: straight off the source's ring when
/// nothing else is going on ([`Engine::recv_now`]), else posted and waited
/// for.
fn recv_blocking(eng: &mut Engine, spec: RecvSpec, bytes: &mut [u8]) -> Result<Status> {
    // SAFETY: `bytes` is borrowed for the call; no request is left behind.
    let spun = match unsafe { eng.recv_now(&spec, bytes.as_mut_ptr(), bytes.len())? } {
        RecvNow::Took(st) => return Ok(st),
        RecvNow::NotNow => false,
        RecvNow::Spun => true,
    };
    // SAFETY: `bytes` stays mutably borrowed until the receive completes.
    let id = unsafe { eng.start_recv(spec, bytes.as_mut_ptr(), bytes.len())? };
    let waited = if spun {
        eng.wait_spun(id)
    } else {
        eng.wait(id)
    };
    if let Err(e) = waited {
        // The receive may still be posted: withdraw it before `bytes` is released.
        eng.withdraw(id);
        return Err(e);
    }
    eng.take_status(id)
}
