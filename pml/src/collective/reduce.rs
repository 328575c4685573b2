//! Reduce and allreduce over the fixed reduction tree (see the module
//! docs of `collective`): binomial reduce at every size, recursive-doubling
//! allreduce, and reduce-scatter + allgather for large vectors.

use super::scratch::with_scratch;
use super::{LARGE, bytes, bytes_mut, disjoint, mismatch, tag};
use crate::buffer::Pod;
use crate::comm::Comm;
use crate::error::Result;
use crate::op::{Op, fold_left, fold_right};

/// How the reduction tree renumbers ranks (see the module docs).
pub(super) struct Fold {
    /// Largest power of two ≤ n.
    pub(super) p2: usize,
    /// n − p2: ranks below 2·rem are folded pairwise.
    pub(super) rem: usize,
}

impl Fold {
    pub(super) fn new(n: usize) -> Fold {
        let p2 = if n.is_power_of_two() {
            n
        } else {
            n.next_power_of_two() / 2
        };
        Fold { p2, rem: n - p2 }
    }
    /// Participant number of rank `r`, or `None` for ranks folded away.
    pub(super) fn participant(&self, r: usize) -> Option<usize> {
        if r < 2 * self.rem {
            (r % 2 == 1).then_some(r / 2)
        } else {
            Some(r - self.rem)
        }
    }
    /// The rank a leaf of the reduction tree gathered at participant
    /// `target` (a rank that receives from nobody) sends its contribution
    /// to; `None` for the other ranks.
    fn leaf_parent(&self, r: usize, target: usize) -> Option<usize> {
        if r < 2 * self.rem {
            // Folded pairs: the even rank only sends.
            return r.is_multiple_of(2).then_some(r + 1);
        }
        let p = self.participant(r)?;
        // The pair of blocks of one participant each: one holds on.
        let holder = holder(p & !1, 2, target);
        (self.p2 > 1 && holder != p).then(|| self.rank(holder))
    }

    /// The participant that gathers the result for `root`: the root's, or
    /// for a root folded away, its partner's (which passes it on).
    fn target(&self, root: usize) -> Option<usize> {
        if root < 2 * self.rem && root.is_multiple_of(2) {
            self.participant(root + 1)
        } else {
            self.participant(root)
        }
    }

    /// Rank of participant `p`.
    pub(super) fn rank(&self, p: usize) -> usize {
        if p < self.rem {
            2 * p + 1
        } else {
            p + self.rem
        }
    }
}

/// Who holds the partial result of the aligned block of `size`
/// participants starting at `start` in a reduction gathered at `target`:
/// the target if it is in the block, else the block's first participant.
fn holder(start: usize, size: usize, target: usize) -> usize {
    if target & !(size - 1) == start {
        target
    } else {
        start
    }
}

impl Comm {
    /// Combine `send` of every member with `op` (in rank order) into `recv`
    /// of `root`; `recv` is ignored elsewhere (pass `&mut []`).
    pub fn reduce<T: Pod, O: Op<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: &O,
        root: usize,
    ) -> Result<()> {
        self.intra_only("reduce (use inter_reduce)")?;
        self.check_rank(root)?;
        let r = self.rank();
        if r == root && recv.len() != send.len() {
            return Err(mismatch(format!(
                "reduce root buffer holds {} elements, contributions {}",
                recv.len(),
                send.len()
            )));
        }
        let len = send.len();
        let fold = Fold::new(self.size());
        if r != root
            && let Some(parent) = fold.target(root).and_then(|t| fold.leaf_parent(r, t))
        {
            // Nothing to combine here: the contribution goes up as it is.
            return self.c_send(parent, tag::REDUCE, bytes(send));
        }
        with_scratch(len, |tmp| {
            if r == root {
                return self.reduce_into(&mut Partial::new(send, recv, tmp), op, root);
            }
            with_scratch(len, |acc| {
                self.reduce_into(&mut Partial::new(send, acc, tmp), op, root)
            })
        })
    }

    /// The binomial reduce of [`Comm::reduce`] (at the root, `part`'s
    /// accumulator is its result buffer). The tree is fixed (aligned
    /// blocks of participants, the lower block's partial result first:
    /// the bits of [`Comm::allreduce`]); who combines two blocks is not:
    /// the holder of the block with the root's participant, so the result
    /// ends there without another hop.
    fn reduce_into<T: Pod, O: Op<T>>(
        &self,
        part: &mut Partial<'_, T>,
        op: &O,
        root: usize,
    ) -> Result<()> {
        let fold = Fold::new(self.size());
        let Some((p, target)) = self.reduce_fold_in(&fold, part, op, root)? else {
            return Ok(());
        };
        // This participant holds its block's partial result; each step
        // joins it with the partner block of the same size.
        let mut size = 1;
        while size < fold.p2 {
            let mine = p & !(size - 1);
            let theirs = mine ^ size;
            let joined = holder(mine & !(2 * size - 1), 2 * size, target);
            let other = holder(theirs, size, target);
            if joined != p {
                return self.c_send(fold.rank(joined), tag::REDUCE, bytes(part.current()));
            }
            part.combine_from(self, fold.rank(other), op, theirs < mine)?;
            size <<= 1;
        }
        if self.rank() == root {
            part.settle();
            return Ok(());
        }
        self.c_send(root, tag::REDUCE, bytes(part.current()))
    }

    /// The folding of a reduce to `root` (see the module docs): an even
    /// rank below 2·rem hands its contribution to the next one — and gets
    /// the result back from it if it is the root — and is done (`None`);
    /// the next one combines it first. Every other rank gets its
    /// participant number and that of the participant gathering the result.
    fn reduce_fold_in<T: Pod, O: Op<T>>(
        &self,
        fold: &Fold,
        part: &mut Partial<'_, T>,
        op: &O,
        root: usize,
    ) -> Result<Option<(usize, usize)>> {
        let r = self.rank();
        if r < 2 * fold.rem {
            if r.is_multiple_of(2) {
                self.c_send(r + 1, tag::REDUCE, bytes(part.current()))?;
                if r == root {
                    self.c_recv(r + 1, tag::REDUCE, bytes_mut(part.acc))?;
                }
                return Ok(None);
            }
            part.combine_from(self, r - 1, op, true)?;
        }
        match (fold.participant(r), fold.target(root)) {
            (Some(p), Some(target)) => Ok(Some((p, target))),
            _ => Err(mismatch("rank outside the reduction tree".into())),
        }
    }

    /// Combine `send` of every member with `op` (in rank order) into `recv`
    /// of every member; all members get bitwise identical results.
    ///
    /// ```
    /// # use vpml_pml as vpml;
    /// let world = vpml::init()?;
    /// let mut total = [0u64];
    /// world.allreduce(&[world.rank() as u64 + 1], &mut total, &vpml::Sum)?;
    /// let n = world.size() as u64;
    /// assert_eq!(total[0], n * (n + 1) / 2);
    /// # Ok::<(), vpml_pml::Error>(())
    /// ```
    pub fn allreduce<T: Pod, O: Op<T>>(&self, send: &[T], recv: &mut [T], op: &O) -> Result<()> {
        if self.is_inter() {
            return self.inter_allreduce(send, recv, op);
        }
        if recv.len() != send.len() {
            return Err(mismatch(format!(
                "allreduce result buffer holds {} elements, contribution {}",
                recv.len(),
                send.len()
            )));
        }
        recv.copy_from_slice(send);
        self.allreduce_in_place(recv, op)
    }

    /// [`Comm::allreduce`] with the contribution and the result in one buffer.
    /// On an intercommunicator, `acc` is this member's contribution and
    /// then the reduction of the remote group's.
    pub fn allreduce_in_place<T: Pod, O: Op<T>>(&self, acc: &mut [T], op: &O) -> Result<()> {
        if self.is_inter() {
            let contribution = acc.to_vec();
            return self.inter_allreduce(&contribution, acc, op);
        }
        let n = self.size();
        if n == 1 {
            return Ok(());
        }
        with_scratch(acc.len(), |tmp| self.allreduce_with(acc, tmp, op))
    }

    /// [`Comm::allreduce_in_place`] with `tmp` for what partners send.
    fn allreduce_with<T: Pod, O: Op<T>>(&self, acc: &mut [T], tmp: &mut [T], op: &O) -> Result<()> {
        let (r, n) = (self.rank(), self.size());
        let fold = Fold::new(n);
        if r < 2 * fold.rem {
            if r % 2 == 0 {
                self.c_send(r + 1, tag::ALLREDUCE, bytes(acc))?;
                // Wait for the result of the participants.
                return self.c_recv(r + 1, tag::ALLREDUCE, bytes_mut(acc));
            }
            self.c_recv(r - 1, tag::ALLREDUCE, bytes_mut(tmp))?;
            fold_left(op, tmp, acc);
        }
        let Some(p) = fold.participant(r) else {
            return Err(mismatch("rank outside the reduction tree".into()));
        };
        if std::mem::size_of_val(acc) <= LARGE || acc.len() < fold.p2 {
            let mut mask = 1;
            while mask < fold.p2 {
                let partner = p ^ mask;
                self.c_sendrecv(
                    fold.rank(partner),
                    bytes(acc),
                    fold.rank(partner),
                    bytes_mut(tmp),
                    tag::ALLREDUCE,
                )?;
                if partner < p {
                    fold_left(op, tmp, acc);
                } else {
                    fold_right(op, acc, tmp);
                }
                mask <<= 1;
            }
        } else {
            self.reduce_scatter_allgather(p, &fold, acc, tmp, op)?;
        }
        if r < 2 * fold.rem {
            self.c_send(r - 1, tag::ALLREDUCE, bytes(acc))?;
        }
        Ok(())
    }

    /// Large-vector allreduce among the `fold.p2` participants: recursive
    /// halving ([`Comm::recursive_halving`]), then the mirror-image allgather.
    fn reduce_scatter_allgather<T: Pod, O: Op<T>>(
        &self,
        p: usize,
        fold: &Fold,
        acc: &mut [T],
        tmp: &mut [T],
        op: &O,
    ) -> Result<()> {
        let steps = self.recursive_halving(p, fold, acc, tmp, op, tag::ALLREDUCE)?;
        for step in steps.into_iter().rev() {
            let elem = std::mem::size_of::<T>();
            let whole = bytes_mut(acc);
            let (out, inp) = disjoint(
                whole,
                step.keep.start * elem..step.keep.end * elem,
                step.give.start * elem..step.give.end * elem,
            )?;
            self.c_sendrecv(step.partner, out, step.partner, inp, tag::ALLREDUCE)?;
        }
        Ok(())
    }

    /// Recursive halving among the `fold.p2` participants, with doubling
    /// distance: each step combines aligned blocks, ranks lower half first.
    /// Participant `p` ends with the result of its block; the steps, to
    /// undo them.
    fn recursive_halving<T: Pod, O: Op<T>>(
        &self,
        p: usize,
        fold: &Fold,
        acc: &mut [T],
        tmp: &mut [T],
        op: &O,
        tag: i32,
    ) -> Result<Vec<Halving>> {
        let (mut lo, mut hi) = (0, acc.len());
        let mut steps = Vec::new();
        let mut mask = 1;
        while mask < fold.p2 {
            let partner = fold.rank(p ^ mask);
            let mid = lo + (hi - lo) / 2;
            let lower = p & mask == 0;
            let (keep, give) = if lower {
                (lo..mid, mid..hi)
            } else {
                (mid..hi, lo..mid)
            };
            self.c_sendrecv(
                partner,
                bytes(&acc[give.clone()]),
                partner,
                bytes_mut(&mut tmp[keep.clone()]),
                tag,
            )?;
            if lower {
                fold_right(op, &mut acc[keep.clone()], &tmp[keep.clone()]);
            } else {
                fold_left(op, &tmp[keep.clone()], &mut acc[keep.clone()]);
            }
            steps.push(Halving {
                partner,
                keep: keep.clone(),
                give,
            });
            (lo, hi) = (keep.start, keep.end);
            mask <<= 1;
        }
        Ok(steps)
    }
}

/// One rank's partial result in a binomial reduce: its own contribution
/// `mine` until it combines a first partner's, then `acc`. The first
/// partner's part is received straight into `acc` and combined with
/// `mine` there, and `mine` goes to a parent as it is: no copy of the
/// caller's vector, and a parent reads the caller's own buffer.
struct Partial<'a, T> {
    mine: &'a [T],
    acc: &'a mut [T],
    /// For what partners send once `acc` holds the partial result.
    tmp: &'a mut [T],
    /// `acc` holds the partial result.
    started: bool,
}

impl<'a, T: Pod> Partial<'a, T> {
    /// Nothing combined yet: the partial result is `mine`.
    fn new(mine: &'a [T], acc: &'a mut [T], tmp: &'a mut [T]) -> Self {
        Partial {
            mine,
            acc,
            tmp,
            started: false,
        }
    }

    /// The partial result as it stands.
    fn current(&self) -> &[T] {
        if self.started { self.acc } else { self.mine }
    }

    /// Receive a partner's partial result from `src` and combine it with
    /// ours, theirs first if `theirs_first` (it covers lower ranks).
    fn combine_from<O: Op<T>>(
        &mut self,
        comm: &Comm,
        src: usize,
        op: &O,
        theirs_first: bool,
    ) -> Result<()> {
        let into = if self.started {
            &mut *self.tmp
        } else {
            &mut *self.acc
        };
        comm.c_recv(src, tag::REDUCE, bytes_mut(into))?;
        combine(
            op,
            self.started,
            theirs_first,
            self.mine,
            self.acc,
            self.tmp,
        );
        self.started = true;
        Ok(())
    }

    /// Leave the partial result in `acc`.
    fn settle(&mut self) {
        if !self.started {
            self.acc.copy_from_slice(self.mine);
            self.started = true;
        }
    }
}

/// Combine a partner's partial result, just received, with ours into
/// `acc`, in rank order (`theirs_first`: theirs covers lower ranks).
/// Before this rank's first combine (`!started`) ours is `mine` and theirs
/// was received into `acc`; after it, ours is `acc` and theirs is in `tmp`.
pub(super) fn combine<T: Copy, O: Op<T>>(
    op: &O,
    started: bool,
    theirs_first: bool,
    mine: &[T],
    acc: &mut [T],
    tmp: &[T],
) {
    match (started, theirs_first) {
        (false, true) => fold_right(op, acc, mine),
        (false, false) => fold_left(op, mine, acc),
        (true, true) => fold_left(op, tmp, acc),
        (true, false) => fold_right(op, acc, tmp),
    }
}

/// One step of [`Comm::recursive_halving`]: with `partner` (the rank of the
/// participant differing in the step's bit), this rank kept the elements
/// `keep` and gave away `give`.
struct Halving {
    partner: usize,
    keep: std::ops::Range<usize>,
    give: std::ops::Range<usize>,
}
