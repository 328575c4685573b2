//! Intercommunicators: two disjoint groups whose point-to-point calls name
//! ranks of the other group (MPI's `MPI_Intercomm_create`, `_merge`, and
//! `dup`, `split` and `create` of an intercommunicator).
//!
//! An intercommunicator takes four contexts from one agreement: its
//! point-to-point messages (`c`), its collectives' leader exchanges and
//! direct transfers (`c + 1`), and the local group's own
//! intracommunicator (`c + 2`, `c + 3`), which runs the local phases of
//! its collectives. Both groups agree on `c` as intracommunicators do: the
//! largest next-free id of every member of both groups, found by a
//! reduction in each group and an exchange between the two leaders (rank 0
//! of each group, or the leaders named to `intercomm_create`). Every step
//! receives from a named source, so under message logging making an
//! intercommunicator logs no event, and a restarted rank makes it again by
//! replaying its messages.

use std::rc::Rc;

use crate::comm::{Comm, Group, Inter, SELF_CONTEXT};
use crate::error::{Error, Result};
use crate::idup::reserved;

/// Contexts an intercommunicator takes (see the module documentation).
const INTER_CONTEXTS: u32 = 4;

impl Comm {
    /// True for an intercommunicator.
    pub fn is_inter(&self) -> bool {
        self.inter.is_some()
    }

    /// The size of an intercommunicator's remote group (0 for an
    /// intracommunicator).
    pub fn remote_size(&self) -> usize {
        match &self.inter {
            Some(i) => i.remote.as_ref().map_or(0, |g| g.members.len()),
            None => 0,
        }
    }

    /// The remote group's members as world ranks, in their rank order
    /// (empty for an intracommunicator).
    pub fn remote_world_ranks(&self) -> Vec<usize> {
        match &self.inter {
            Some(i) => i.remote.as_ref().map_or(Vec::new(), |g| g.members.clone()),
            None => Vec::new(),
        }
    }

    /// An error unless this is an intracommunicator (`what` names the call).
    pub(crate) fn intra_only(&self, what: &str) -> Result<()> {
        match self.inter {
            Some(_) => Err(Error::CommKind(format!(
                "{what} needs an intracommunicator, not an intercommunicator"
            ))),
            None => Ok(()),
        }
    }

    /// The local group's own communicator (the communicator itself for an
    /// intracommunicator).
    pub(crate) fn local(&self) -> &Comm {
        match &self.inter {
            Some(i) => &i.local,
            None => self,
        }
    }

    /// The largest next-free context id among this intracommunicator's
    /// members.
    fn max_next_context(&self) -> Result<u32> {
        let next = self.engine.borrow().next_context();
        let mut agreed = [0u32];
        self.allreduce(&[next], &mut agreed, &crate::op::Max)?;
        Ok(agreed[0])
    }

    /// Take `count` contexts from `id` on (the agreed largest next-free
    /// id, so free at every member), and the reserve for the new
    /// communicator's idups after them.
    fn take_contexts(&self, id: u32, count: u32) -> Result<u32> {
        let taken = reserved(count);
        if id >= SELF_CONTEXT - taken {
            return Err(Error::RequestState("communicator context ids exhausted"));
        }
        self.engine.borrow_mut().set_next_context(id + taken);
        Ok(id)
    }

    /// An intercommunicator of the local group `local` (world ranks in
    /// rank order, this process among them) and the remote group `remote`
    /// on context `context` (and the three after it).
    pub(crate) fn make_inter(&self, context: u32, local: Vec<usize>, remote: Vec<usize>) -> Comm {
        let local = self.with_members(context + 2, local);
        let mut rank_of_world = vec![usize::MAX; self.engine.borrow().size()];
        for (i, &w) in remote.iter().enumerate() {
            rank_of_world[w] = i;
        }
        let remote = Group {
            members: remote,
            rank: usize::MAX,
            rank_of_world,
        };
        Comm {
            engine: self.engine.clone(),
            context,
            group: local.group.clone(),
            inter: Some(Rc::new(Inter {
                remote: Some(Rc::new(remote)),
                local,
            })),
            reserve: None,
        }
    }

    /// Make an intercommunicator between this communicator's group (the
    /// local group) and another, disjoint one (MPI's
    /// `MPI_Intercomm_create`). Collective over both groups: in each,
    /// every member names the same `local_leader`; the two leaders, which
    /// both belong to `peer`, name each other there as `remote_leader`
    /// (ignored elsewhere) and exchange the groups through `peer` with
    /// `tag`, like any message of the application's. `peer` matters at
    /// the local leader only (`None` elsewhere is fine; at the leader it is
    /// an error, which every member of the group returns, as it does any
    /// failure of the leaders' exchange).
    pub fn intercomm_create(
        &self,
        local_leader: usize,
        peer: Option<&Comm>,
        remote_leader: usize,
        tag: i32,
    ) -> Result<Comm> {
        self.intra_only("intercomm_create")?;
        self.check_rank(local_leader)?;
        let next = self.max_next_context()?;
        let local = self.world_ranks();
        // [next-free context, members…] of each group.
        let mine: Vec<u64> = std::iter::once(u64::from(next))
            .chain(local.iter().map(|&w| w as u64))
            .collect();
        // The leader's failure reaches its group as a table of no words,
        // so no member waits for a table that never comes.
        let mut theirs = Vec::new();
        let mut failed = None;
        if self.rank() == local_leader {
            match self.leaders_exchange(peer, remote_leader, tag, &mine) {
                Ok(t) => theirs = t,
                Err(e) => failed = Some(e),
            }
        }
        let mut len = [theirs.len() as u64];
        self.bcast(&mut len, local_leader)?;
        if let Some(e) = failed {
            return Err(e);
        }
        theirs.resize(self.table_len(len[0])?, 0);
        self.bcast(&mut theirs, local_leader)?;
        let (their_next, remote) = self.members_of(&theirs)?;
        if remote.iter().any(|w| local.contains(w)) {
            return Err(Error::CommKind(
                "intercomm_create: the remote group shares members with the local one".into(),
            ));
        }
        let context = self.take_contexts(next.max(their_next), INTER_CONTEXTS)?;
        let comm = self.make_inter(context, local, remote).agreed();
        comm.announce()?;
        Ok(comm)
    }

    /// [`Comm::intercomm_create`] when the groups already know each other
    /// (`remote`: the remote group's world ranks in rank order) and agreed
    /// on `context` otherwise (a block of
    /// [`Comm::contexts_per_intercommunicator`]).
    pub fn intercomm_create_on(&self, context: u32, remote: Vec<usize>) -> Result<Comm> {
        self.intra_only("intercomm_create")?;
        let local = self.world_ranks();
        if remote.iter().any(|w| local.contains(w)) {
            return Err(Error::CommKind(
                "intercomm_create: the remote group shares members with the local one".into(),
            ));
        }
        let comm = self.make_inter(context, local, remote).agreed();
        comm.announce()?;
        Ok(comm)
    }

    /// The local leader's side of `intercomm_create`: give the remote
    /// leader this group's table through `peer`, get the remote group's.
    fn leaders_exchange(
        &self,
        peer: Option<&Comm>,
        remote_leader: usize,
        tag: i32,
        mine: &[u64],
    ) -> Result<Vec<u64>> {
        let peer = peer.ok_or_else(|| {
            Error::CommKind("intercomm_create: the local leader names no peer communicator".into())
        })?;
        let mut len = [0u64];
        let n = [mine.len() as u64];
        peer.sendrecv(&n, remote_leader, tag, &mut len, remote_leader, tag)?;
        let mut theirs = vec![0u64; self.table_len(len[0])?];
        peer.sendrecv(mine, remote_leader, tag, &mut theirs, remote_leader, tag)?;
        Ok(theirs)
    }

    /// A group table length a leader announced, if it can be one: the
    /// next context id and up to four words per world rank (0: the
    /// leader failed).
    pub(crate) fn table_len(&self, len: u64) -> Result<usize> {
        let most = 1 + 4 * self.engine.borrow().size();
        usize::try_from(len)
            .ok()
            .filter(|&n| (1..=most).contains(&n))
            .ok_or_else(|| match len {
                0 => Error::Collective("the group's leader failed to reach the other group".into()),
                _ => Error::Collective(format!("a group table of {len} words")),
            })
    }

    /// The next-free context and world ranks of a [next, members…] table.
    fn members_of(&self, table: &[u64]) -> Result<(u32, Vec<usize>)> {
        let size = self.engine.borrow().size();
        let next = u32::try_from(table[0])
            .map_err(|_| Error::Collective(format!("context id {} out of range", table[0])))?;
        let mut seen = vec![false; size];
        let mut members = Vec::with_capacity(table.len() - 1);
        for &w in &table[1..] {
            let w = usize::try_from(w).ok().filter(|&w| w < size);
            match w {
                Some(w) if !std::mem::replace(&mut seen[w], true) => members.push(w),
                _ => return Err(Error::Collective("a group table names a bad rank".into())),
            }
        }
        Ok((next, members))
    }

    /// A new intercommunicator with the same groups (`dup` of an
    /// intercommunicator).
    /// How many contexts an intercommunicator made by agreement takes: its
    /// four and those reserved for its idups.
    pub fn contexts_per_intercommunicator() -> u32 {
        reserved(INTER_CONTEXTS)
    }

    /// [`Comm::dup`] of an intercommunicator on a context both groups
    /// agreed otherwise (a block of
    /// [`Comm::contexts_per_intercommunicator`]; see
    /// [`Comm::context_proposal`]).
    pub fn inter_dup_on(&self, context: u32) -> Result<Comm> {
        if !self.is_inter() {
            return Err(Error::CommKind(
                "inter_dup_on needs an intercommunicator".into(),
            ));
        }
        let comm = self
            .make_inter(context, self.world_ranks(), self.remote_world_ranks())
            .agreed();
        comm.announce()?;
        Ok(comm)
    }

    pub(crate) fn inter_dup(&self) -> Result<Comm> {
        let next = self.local().max_next_context()?;
        let theirs = self.swap_with_remote(&[u64::from(next)])?;
        let context = self.take_contexts(next.max(self.context_of(&theirs)?), INTER_CONTEXTS)?;
        let comm = self
            .make_inter(context, self.world_ranks(), self.remote_world_ranks())
            .agreed();
        comm.announce()?;
        Ok(comm)
    }

    /// The context id at the head of a table from the remote group.
    fn context_of(&self, table: &[u64]) -> Result<u32> {
        table
            .first()
            .and_then(|&c| u32::try_from(c).ok())
            .ok_or_else(|| Error::Collective("the remote group sent no context id".into()))
    }

    /// `split` of an intercommunicator: the members of each group that
    /// pass one color form the two groups of a new intercommunicator,
    /// each ordered by `key` then by old rank; `None` if this process
    /// passes no color, or no remote member passed its color.
    pub(crate) fn inter_split(&self, color: Option<u32>, key: i64) -> Result<Option<Comm>> {
        let local = self.local();
        let next = local.max_next_context()?;
        // (has color, color, key) of every local member, in rank order.
        let mine = [
            u64::from(color.is_some()),
            u64::from(color.unwrap_or(0)),
            key as u64,
        ];
        let mut all = vec![0u64; 3 * self.size()];
        local.allgather(&mine, &mut all)?;
        let table: Vec<u64> = std::iter::once(u64::from(next))
            .chain(all.iter().copied())
            .collect();
        let theirs = self.swap_with_remote(&table)?;
        if (theirs.len() - 1) != 3 * self.remote_size() {
            return Err(Error::Collective(
                "split: the remote group sent a table of the wrong size".into(),
            ));
        }
        let context = self.take_contexts(next.max(self.context_of(&theirs)?), INTER_CONTEXTS)?;
        let Some(color) = color else {
            return Ok(None);
        };
        // World ranks of a group's members of `color`, by key then rank.
        let pick = |rows: &[u64], world: &dyn Fn(usize) -> usize| -> Vec<usize> {
            let mut m: Vec<(i64, usize)> = rows
                .chunks_exact(3)
                .enumerate()
                .filter(|(_, c)| c[0] == 1 && c[1] == u64::from(color))
                .map(|(r, c)| (c[2] as i64, r))
                .collect();
            m.sort();
            m.into_iter().map(|(_, r)| world(r)).collect()
        };
        let new_local = pick(&all, &|r| self.world_rank(r));
        let new_remote = pick(&theirs[1..], &|r| self.peer_world_rank(r));
        if new_remote.is_empty() {
            return Ok(None);
        }
        let comm = self.make_inter(context, new_local, new_remote).agreed();
        comm.announce()?;
        Ok(Some(comm))
    }

    /// `MPI_Comm_create` on an intercommunicator: every member of each
    /// group passes the same subgroup `members` of its own group (world
    /// ranks in new rank order); the new intercommunicator joins the two
    /// subgroups. `None` for a process outside its subgroup, or when the
    /// other group's is empty. Collective over both groups.
    pub fn inter_create(&self, members: &[usize]) -> Result<Option<Comm>> {
        if !self.is_inter() {
            return Err(Error::CommKind(
                "inter_create needs an intercommunicator".into(),
            ));
        }
        let local = self.world_ranks();
        if members.iter().any(|w| !local.contains(w)) {
            return Err(Error::Collective(
                "inter_create: a member is not in the local group".into(),
            ));
        }
        let me = self.world_rank(self.rank());
        match members.iter().position(|&w| w == me) {
            Some(pos) => self.inter_split(Some(0), pos as i64),
            None => self.inter_split(None, 0),
        }
    }

    /// Join the two groups of an intercommunicator into one
    /// intracommunicator (MPI's `MPI_Intercomm_merge`): the group whose
    /// members pass `high = false` comes first; if both pass the same
    /// value, the group whose leader has the lower world rank does.
    /// Collective over both groups.
    pub fn merge(&self, high: bool) -> Result<Comm> {
        if !self.is_inter() {
            return Err(Error::CommKind("merge needs an intercommunicator".into()));
        }
        let next = self.local().max_next_context()?;
        let theirs = self.swap_with_remote(&[u64::from(next), u64::from(high)])?;
        let their_high = theirs.get(1).is_some_and(|&h| h == 1);
        let context = self.take_contexts(next.max(self.context_of(&theirs)?), 2)?;
        self.merge_on(context, high, their_high)
    }

    /// [`Comm::merge`] on a context both groups agreed otherwise (a block
    /// of [`Comm::contexts_per_communicator`]), the remote group having
    /// passed `their_high`.
    pub fn merge_on(&self, context: u32, high: bool, their_high: bool) -> Result<Comm> {
        if !self.is_inter() {
            return Err(Error::CommKind("merge needs an intercommunicator".into()));
        }
        let (local, remote) = (self.world_ranks(), self.remote_world_ranks());
        let local_first = if high != their_high {
            !high
        } else {
            local[0] < remote[0]
        };
        let members = if local_first {
            [local, remote].concat()
        } else {
            [remote, local].concat()
        };
        let comm = self.local().with_members(context, members).agreed();
        comm.announce()?;
        Ok(comm)
    }
}
