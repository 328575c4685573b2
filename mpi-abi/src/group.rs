//! Groups and the communicators made from them: `MPI_Comm_group`, the
//! `MPI_Group_*` set operations, rank translation and comparison,
//! `MPI_Comm_create` and `MPI_Comm_create_group`.
//!
//! A group is the list of its members' world ranks, in group rank order
//! (a process is its world rank: vpml has no dynamic processes). Results
//! with no member are `MPI_GROUP_EMPTY`, as in MPICH.

use std::ffi::c_int;

use crate::comm::register;
use crate::consts::*;
use crate::state::{STATE, c_array, comm, error, handle_of, insert, put, slot_of, vpml_error};

/// The members of group `g` (world ranks), or `None` for an invalid handle.
pub(crate) fn members(g: Group) -> Option<Vec<usize>> {
    if g == MPI_GROUP_EMPTY {
        return Some(Vec::new());
    }
    let i = slot_of(g, USER_GROUP_KIND)?;
    STATE.with(|s| s.borrow().groups.get(i)?.clone())
}

/// A handle for a group of `members` (`MPI_GROUP_EMPTY` if none).
pub(crate) fn new_group(members: Vec<usize>) -> Group {
    if members.is_empty() {
        return MPI_GROUP_EMPTY;
    }
    STATE.with(|s| {
        handle_of(
            USER_GROUP_KIND,
            insert(&mut s.borrow_mut().groups, 0, members),
        )
    })
}

/// This process's world rank (`None` before `MPI_Init`).
fn my_world_rank() -> Option<usize> {
    STATE.with(|s| {
        let s = s.borrow();
        let w = s.world.as_ref()?;
        Some(w.world_ranks()[w.rank()])
    })
}

/// The members of `g`, or the `MPI_ERR_GROUP` error of `func`.
fn group(func: &str, g: Group) -> Result<Vec<usize>, c_int> {
    members(g).ok_or_else(|| error(MPI_COMM_WORLD, func, MPI_ERR_GROUP, "invalid group"))
}

/// The members of groups `a` and `b`, or the `MPI_ERR_GROUP` error of `func`.
fn two_groups(func: &str, a: Group, b: Group) -> Result<(Vec<usize>, Vec<usize>), c_int> {
    Ok((group(func, a)?, group(func, b)?))
}

/// Group ranks `ranks` of a group of `size`, checked: in range and
/// distinct.
fn checked_ranks(func: &str, ranks: &[c_int], size: usize) -> Result<Vec<usize>, c_int> {
    let mut seen = vec![false; size];
    ranks
        .iter()
        .map(|&r| match usize::try_from(r).ok().filter(|&r| r < size) {
            Some(r) if !std::mem::replace(&mut seen[r], true) => Ok(r),
            Some(_) => Err(error(
                MPI_COMM_WORLD,
                func,
                MPI_ERR_RANK,
                &format!("rank {r} listed twice"),
            )),
            None => Err(error(
                MPI_COMM_WORLD,
                func,
                MPI_ERR_RANK,
                &format!("rank {r} is not in a group of {size}"),
            )),
        })
        .collect()
}

/// The ranks the triplets `(first, last, stride)` name in a group of
/// `size`, in order, checked as `checked_ranks` does (each triplet before
/// it is expanded: a huge range is an error, not an allocation).
fn range_ranks(func: &str, ranges: &[[c_int; 3]], size: usize) -> Result<Vec<usize>, c_int> {
    let mut ranks = Vec::new();
    for &[first, last, stride] in ranges {
        let bad = |why: &str| {
            error(
                MPI_COMM_WORLD,
                func,
                MPI_ERR_ARG,
                &format!("range ({first}, {last}, {stride}): {why}"),
            )
        };
        if stride == 0 {
            return Err(bad("stride 0"));
        }
        let span = i64::from(last) - i64::from(first);
        if span != 0 && (span < 0) != (stride < 0) {
            return Err(bad("runs away from its last rank"));
        }
        let n = span / i64::from(stride);
        let in_group = |r: i64| (0..size as i64).contains(&r);
        if !in_group(i64::from(first)) || !in_group(i64::from(first) + n * i64::from(stride)) {
            return Err(bad(&format!("outside a group of {size}")));
        }
        if ranks.len() as i64 + n + 1 > size as i64 {
            return Err(bad("names more ranks than the group has"));
        }
        ranks.extend((0..=n).map(|k| (i64::from(first) + k * i64::from(stride)) as c_int));
    }
    checked_ranks(func, &ranks, size)
}

/// A count argument of `func`, checked (negative is an error).
fn count(func: &str, n: c_int) -> Result<c_int, c_int> {
    if n < 0 {
        return Err(error(
            MPI_COMM_WORLD,
            func,
            MPI_ERR_ARG,
            &format!("negative count {n}"),
        ));
    }
    Ok(n)
}

/// Write a new group's handle through `out`.
///
/// # Safety
/// `out` is a group handle pointer.
unsafe fn give(out: *mut Group, members: Vec<usize>) -> c_int {
    // SAFETY: caller contract.
    unsafe { put(out, new_group(members)) };
    MPI_SUCCESS
}

export! {
    fn MPI_Comm_group / PMPI_Comm_group(h: Comm, out: *mut Group) -> c_int {
        match comm("MPI_Comm_group", h) {
            // SAFETY: a group handle pointer (caller contract).
            Ok(c) => unsafe { give(out, c.world_ranks()) },
            Err(code) => code,
        }
    }

    fn MPI_Comm_remote_group / PMPI_Comm_remote_group(h: Comm, out: *mut Group) -> c_int {
        match comm("MPI_Comm_remote_group", h) {
            // SAFETY: a group handle pointer (caller contract).
            Ok(c) if c.is_inter() => unsafe { give(out, c.remote_world_ranks()) },
            Ok(_) => error(h, "MPI_Comm_remote_group", MPI_ERR_COMM, "not an intercommunicator"),
            Err(code) => code,
        }
    }

    fn MPI_Group_size / PMPI_Group_size(g: Group, size: *mut c_int) -> c_int {
        match group("MPI_Group_size", g) {
            Ok(m) => {
                // SAFETY: an int pointer (caller contract).
                unsafe { put(size, m.len() as c_int) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Group_rank / PMPI_Group_rank(g: Group, rank: *mut c_int) -> c_int {
        match group("MPI_Group_rank", g) {
            Ok(m) => {
                let me = my_world_rank();
                let r = m.iter().position(|&w| Some(w) == me).map_or(MPI_UNDEFINED, |r| r as c_int);
                // SAFETY: an int pointer (caller contract).
                unsafe { put(rank, r) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Group_free / PMPI_Group_free(g: *mut Group) -> c_int {
        // SAFETY: a group handle pointer (caller contract).
        let h = unsafe { g.as_ref().copied() }.unwrap_or(MPI_GROUP_NULL);
        let freed = h == MPI_GROUP_EMPTY
            || STATE.with(|s| crate::state::release(&mut s.borrow_mut().groups, h, USER_GROUP_KIND));
        if !freed {
            return error(MPI_COMM_WORLD, "MPI_Group_free", MPI_ERR_GROUP, "invalid group");
        }
        // SAFETY: as above.
        unsafe { put(g, MPI_GROUP_NULL) };
        MPI_SUCCESS
    }

    fn MPI_Group_incl / PMPI_Group_incl(g: Group, n: c_int, ranks: *const c_int, out: *mut Group) -> c_int {
        let func = "MPI_Group_incl";
        let m = match group(func, g) { Ok(m) => m, Err(code) => return code };
        if let Err(code) = count(func, n) {
            return code;
        }
        // SAFETY: `ranks` holds `n` ints (caller contract).
        match checked_ranks(func, unsafe { c_array(ranks, n) }, m.len()) {
            // SAFETY: a group handle pointer (caller contract).
            Ok(rs) => unsafe { give(out, rs.iter().map(|&r| m[r]).collect()) },
            Err(code) => code,
        }
    }

    fn MPI_Group_excl / PMPI_Group_excl(g: Group, n: c_int, ranks: *const c_int, out: *mut Group) -> c_int {
        let func = "MPI_Group_excl";
        let m = match group(func, g) { Ok(m) => m, Err(code) => return code };
        if let Err(code) = count(func, n) {
            return code;
        }
        // SAFETY: `ranks` holds `n` ints (caller contract).
        match checked_ranks(func, unsafe { c_array(ranks, n) }, m.len()) {
            Ok(rs) => {
                let kept = (0..m.len()).filter(|r| !rs.contains(r)).map(|r| m[r]).collect();
                // SAFETY: a group handle pointer (caller contract).
                unsafe { give(out, kept) }
            }
            Err(code) => code,
        }
    }

    fn MPI_Group_range_incl / PMPI_Group_range_incl(g: Group, n: c_int, ranges: *const [c_int; 3], out: *mut Group) -> c_int {
        let func = "MPI_Group_range_incl";
        let m = match group(func, g) { Ok(m) => m, Err(code) => return code };
        if let Err(code) = count(func, n) {
            return code;
        }
        // SAFETY: `ranges` holds `n` triplets (caller contract).
        match range_ranks(func, unsafe { c_array(ranges, n) }, m.len()) {
            // SAFETY: a group handle pointer (caller contract).
            Ok(rs) => unsafe { give(out, rs.iter().map(|&r| m[r]).collect()) },
            Err(code) => code,
        }
    }

    fn MPI_Group_range_excl / PMPI_Group_range_excl(g: Group, n: c_int, ranges: *const [c_int; 3], out: *mut Group) -> c_int {
        let func = "MPI_Group_range_excl";
        let m = match group(func, g) { Ok(m) => m, Err(code) => return code };
        if let Err(code) = count(func, n) {
            return code;
        }
        // SAFETY: `ranges` holds `n` triplets (caller contract).
        match range_ranks(func, unsafe { c_array(ranges, n) }, m.len()) {
            Ok(rs) => {
                let kept = (0..m.len()).filter(|r| !rs.contains(r)).map(|r| m[r]).collect();
                // SAFETY: a group handle pointer (caller contract).
                unsafe { give(out, kept) }
            }
            Err(code) => code,
        }
    }

    fn MPI_Group_union / PMPI_Group_union(a: Group, b: Group, out: *mut Group) -> c_int {
        let func = "MPI_Group_union";
        let (ma, mb) = match two_groups(func, a, b) { Ok(v) => v, Err(code) => return code };
        // `a`'s members, then `b`'s that are not in `a`.
        let extra: Vec<usize> = mb.iter().copied().filter(|w| !ma.contains(w)).collect();
        // SAFETY: a group handle pointer (caller contract).
        unsafe { give(out, ma.into_iter().chain(extra).collect()) }
    }

    fn MPI_Group_intersection / PMPI_Group_intersection(a: Group, b: Group, out: *mut Group) -> c_int {
        let func = "MPI_Group_intersection";
        let (ma, mb) = match two_groups(func, a, b) { Ok(v) => v, Err(code) => return code };
        // In `a`'s order.
        // SAFETY: a group handle pointer (caller contract).
        unsafe { give(out, ma.into_iter().filter(|w| mb.contains(w)).collect()) }
    }

    fn MPI_Group_difference / PMPI_Group_difference(a: Group, b: Group, out: *mut Group) -> c_int {
        let func = "MPI_Group_difference";
        let (ma, mb) = match two_groups(func, a, b) { Ok(v) => v, Err(code) => return code };
        // SAFETY: a group handle pointer (caller contract).
        unsafe { give(out, ma.into_iter().filter(|w| !mb.contains(w)).collect()) }
    }

    fn MPI_Group_translate_ranks / PMPI_Group_translate_ranks(a: Group, n: c_int, ranks: *const c_int, b: Group, out: *mut c_int) -> c_int {
        let func = "MPI_Group_translate_ranks";
        let (ma, mb) = match two_groups(func, a, b) { Ok(v) => v, Err(code) => return code };
        if let Err(code) = count(func, n) {
            return code;
        }
        // SAFETY: `ranks` holds `n` ints (caller contract).
        let ranks = unsafe { c_array(ranks, n) };
        let mut translated = Vec::with_capacity(ranks.len());
        for &r in ranks {
            if r == MPI_PROC_NULL {
                translated.push(MPI_PROC_NULL);
                continue;
            }
            let Some(&w) = usize::try_from(r).ok().and_then(|r| ma.get(r)) else {
                return error(MPI_COMM_WORLD, func, MPI_ERR_RANK, &format!("rank {r} is not in a group of {}", ma.len()));
            };
            translated.push(mb.iter().position(|&x| x == w).map_or(MPI_UNDEFINED, |p| p as c_int));
        }
        if !translated.is_empty() {
            // SAFETY: `out` holds `n` ints (caller contract).
            unsafe { std::ptr::copy_nonoverlapping(translated.as_ptr(), out, translated.len()) };
        }
        MPI_SUCCESS
    }

    fn MPI_Group_compare / PMPI_Group_compare(a: Group, b: Group, result: *mut c_int) -> c_int {
        let func = "MPI_Group_compare";
        let (ma, mb) = match two_groups(func, a, b) { Ok(v) => v, Err(code) => return code };
        let r = if ma == mb {
            MPI_IDENT
        } else {
            let (mut sa, mut sb) = (ma, mb);
            sa.sort_unstable();
            sb.sort_unstable();
            if sa == sb { MPI_SIMILAR } else { MPI_UNEQUAL }
        };
        // SAFETY: an int pointer (caller contract).
        unsafe { put(result, r) };
        MPI_SUCCESS
    }

    fn MPI_Comm_create / PMPI_Comm_create(h: Comm, g: Group, out: *mut Comm) -> c_int {
        let func = "MPI_Comm_create";
        let c = match comm(func, h) { Ok(c) => c, Err(code) => return code };
        let m = match group(func, g) { Ok(m) => m, Err(code) => return code };
        if c.is_inter() {
            // Each group passes a subgroup of its own; the two are joined.
            let mine = c.world_ranks();
            if m.iter().any(|w| !mine.contains(w)) {
                return error(h, func, MPI_ERR_GROUP, "the group has a process outside the local group");
            }
            return match crate::agreement::exclusive(|| c.inter_create(&m)) {
                Ok(d) => {
                    let handle = d.map_or(MPI_COMM_NULL, |d| register(h, d));
                    // SAFETY: a handle pointer (caller contract).
                    unsafe { put(out, handle) };
                    MPI_SUCCESS
                }
                Err(e) => vpml_error(h, func, &e),
            };
        }
        let mine = c.world_ranks();
        if m.iter().any(|w| !mine.contains(w)) {
            return error(h, func, MPI_ERR_GROUP, "the group has a process outside the communicator");
        }
        // Collective over the communicator. Processes may pass different
        // groups, as long as they are disjoint (MPI 2.2): each group is
        // one color (its lowest member), its members keyed by group rank;
        // a process outside the group it passed joins none.
        let me = mine[c.rank()];
        let (color, key) = match m.iter().position(|&w| w == me) {
            Some(r) => (m.iter().min().map(|&w| w as u32), r as i64),
            None => (None, 0),
        };
        match crate::agreement::split(func, h, &c, color, key) {
            Ok(d) => {
                let handle = d.map_or(MPI_COMM_NULL, |d| register(h, d));
                // SAFETY: a handle pointer (caller contract).
                unsafe { put(out, handle) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }

    fn MPI_Comm_create_group / PMPI_Comm_create_group(h: Comm, g: Group, tag: c_int, out: *mut Comm) -> c_int {
        let func = "MPI_Comm_create_group";
        let c = match comm(func, h) { Ok(c) => c, Err(code) => return code };
        let m = match group(func, g) { Ok(m) => m, Err(code) => return code };
        if tag < 0 {
            return error(h, func, MPI_ERR_TAG, &format!("invalid tag {tag}"));
        }
        match crate::agreement::create_group(func, h, &c, &m, tag) {
            Ok(d) => {
                let handle = d.map_or(MPI_COMM_NULL, |d| register(h, d));
                // SAFETY: a handle pointer (caller contract).
                unsafe { put(out, handle) };
                MPI_SUCCESS
            }
            Err(code) => code,
        }
    }
}
