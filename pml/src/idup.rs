//! Duplicates made without communication (MPI's `MPI_Comm_idup`).
//!
//! A communicator made by agreement takes, besides its own contexts, a
//! reserve: [`IDUP_RESERVE`] slots for its idups, and as many for each of
//! theirs. The i-th idup of a communicator takes its i-th slot — the same
//! at every member, since members duplicate a communicator in the same
//! order — so an idup never waits for other ranks, whatever they do
//! first, and two idups of different communicators never share contexts
//! (every slot lies in the reserve of one communicator, which every member
//! skipped when it was made). Past those slots (a 17th idup of one
//! communicator, or an idup of an idup of an idup) `idup` is
//! [`Comm::dup`], which agrees and waits for every member. The world's
//! reserve comes first; how many of it were taken is in checkpoints.

use std::cell::Cell;
use std::rc::Rc;

use crate::comm::Comm;
use crate::error::Result;

/// Slots each reserve holds.
pub(crate) const IDUP_RESERVE: u32 = 16;

/// Contexts an agreement takes for a communicator of `per` contexts (2,
/// or 4 for an intercommunicator): its own, its idups', and theirs.
pub(crate) const fn reserved(per: u32) -> u32 {
    per * (1 + IDUP_RESERVE + IDUP_RESERVE * IDUP_RESERVE)
}

/// The first context handed out by agreement, after the world's own two
/// and its reserve.
pub(crate) const FIRST_AGREED_CONTEXT: u32 = reserved(2);

/// A communicator's reserve for idups.
#[derive(Clone)]
pub(crate) struct Reserve {
    /// How many slots idups took (shared by the communicator's clones);
    /// `None` for the world, counted in the engine (checkpoints keep it).
    taken: Option<Rc<Cell<u32>>>,
    /// The first slot's context.
    first: u32,
    /// Where the reserves of the idups' own idups start (`None`: they
    /// get none).
    theirs: Option<u32>,
}

impl Reserve {
    /// The reserve of a communicator made by agreement on `context`, of
    /// `per` contexts.
    pub(crate) fn agreed(context: u32, per: u32) -> Reserve {
        Reserve {
            taken: Some(Rc::default()),
            first: context + per,
            theirs: Some(context + per * (1 + IDUP_RESERVE)),
        }
    }

    /// The world's.
    pub(crate) fn world() -> Reserve {
        Reserve {
            taken: None,
            ..Reserve::agreed(0, 2)
        }
    }
}

impl Comm {
    /// A duplicate made at once, without communication (MPI's
    /// `MPI_Comm_idup`; see the module documentation). Collective: every
    /// member calls it, duplicating this communicator in the same order.
    pub fn idup(&self) -> Result<Comm> {
        match self.idup_reserved() {
            Some(made) => made,
            None => self.dup(),
        }
    }

    /// [`Comm::idup`] from the reserve: `None` if this communicator has no
    /// slot left (its members must then agree, as [`Comm::dup`] does; the
    /// slot count moves on all the same, at every member alike).
    pub fn idup_reserved(&self) -> Option<Result<Comm>> {
        let r = self.reserve.as_ref()?;
        let i = match &r.taken {
            Some(n) => n.replace(n.get() + 1),
            None => self.engine.borrow_mut().next_world_idup(),
        };
        if i >= IDUP_RESERVE {
            return None;
        }
        Some(self.idup_slot(r, i))
    }

    /// The duplicate on slot `i` of reserve `r`.
    fn idup_slot(&self, r: &Reserve, i: u32) -> Result<Comm> {
        let per = if self.is_inter() { 4 } else { 2 };
        let context = r.first + per * i;
        let reserve = r.theirs.map(|theirs| Reserve {
            taken: Some(Rc::default()),
            first: theirs + per * IDUP_RESERVE * i,
            theirs: None,
        });
        let mut comm = match &self.inter {
            Some(_) => self.make_inter(context, self.world_ranks(), self.remote_world_ranks()),
            None => Comm {
                engine: self.engine.clone(),
                context,
                group: self.group.clone(),
                inter: None,
                reserve: None,
            },
        };
        comm.reserve = reserve;
        comm.announce()?;
        Ok(comm)
    }
}
