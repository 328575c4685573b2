//! How each derived datatype was made: `MPI_Type_get_envelope` and
//! `MPI_Type_get_contents` give back the constructor and its arguments.
//!
//! Each constructor records its recipe: the combiner (`MPI_COMBINER_*`)
//! and its integer, address and datatype arguments, in the order MPI
//! lists them. A recipe holds a reference to each derived datatype it
//! names, so that the program may free those first (MPI allows it) and
//! still decode the new type; `MPI_Type_get_contents` hands out one more
//! reference per derived datatype it returns, which the program frees. A
//! derived type's table slot is released when its last reference goes.

use std::collections::BTreeMap;
use std::ffi::c_int;

use crate::consts::*;
use crate::state::{STATE, State, error, put, release, slot_of};

/// `MPI_COMBINER_*`: which constructor made a datatype (MPICH's values).
pub(crate) const MPI_COMBINER_NAMED: c_int = 1;
pub(crate) const MPI_COMBINER_DUP: c_int = 2;
pub(crate) const MPI_COMBINER_CONTIGUOUS: c_int = 3;
pub(crate) const MPI_COMBINER_VECTOR: c_int = 4;
pub(crate) const MPI_COMBINER_HVECTOR: c_int = 6;
pub(crate) const MPI_COMBINER_INDEXED: c_int = 7;
pub(crate) const MPI_COMBINER_HINDEXED: c_int = 9;
pub(crate) const MPI_COMBINER_INDEXED_BLOCK: c_int = 10;
pub(crate) const MPI_COMBINER_STRUCT: c_int = 12;
pub(crate) const MPI_COMBINER_SUBARRAY: c_int = 13;
pub(crate) const MPI_COMBINER_DARRAY: c_int = 14;
pub(crate) const MPI_COMBINER_RESIZED: c_int = 18;
pub(crate) const MPI_COMBINER_HINDEXED_BLOCK: c_int = 19;

/// A derived datatype's constructor and arguments.
pub(crate) struct Recipe {
    pub combiner: c_int,
    pub ints: Vec<c_int>,
    pub addrs: Vec<Aint>,
    pub types: Vec<Datatype>,
}

/// Recipes and reference counts of the derived datatypes.
#[derive(Default)]
pub(crate) struct Recipes {
    made: BTreeMap<Datatype, Recipe>,
    /// The counts of types a large-count constructor made with a count
    /// past an int (MPI 4.0's "large counts"; their recipe holds no ints).
    large: BTreeMap<Datatype, Vec<Count>>,
    /// References to a derived type beyond the program's first one.
    extra: BTreeMap<Datatype, usize>,
}

impl Recipes {
    pub(crate) const fn new() -> Recipes {
        Recipes {
            made: BTreeMap::new(),
            large: BTreeMap::new(),
            extra: BTreeMap::new(),
        }
    }
}

/// A derived (not predefined) datatype handle?
fn derived(dt: Datatype) -> bool {
    slot_of(dt, USER_TYPE_KIND).is_some()
}

/// The combiner, integer arguments (its large counts, for a type made
/// with counts past an int) and datatypes of derived type `dt`'s recipe;
/// `None` for a predefined (or invalid) type, or one made without one.
pub(crate) fn recipe_of(dt: Datatype) -> Option<(c_int, Vec<Count>, Vec<Datatype>)> {
    STATE.with(|s| {
        let s = s.borrow();
        let r = s.recipes.made.get(&dt)?;
        let counts = match s.recipes.large.get(&dt) {
            Some(l) => l.clone(),
            None => r.ints.iter().map(|&i| Count::from(i)).collect(),
        };
        Some((r.combiner, counts, r.types.clone()))
    })
}

/// As [`record`], for a type a large-count constructor made with a count
/// past an int: its counts are the recipe's large counts.
pub(crate) fn record_large(
    rc: c_int,
    new: *mut Datatype,
    combiner: c_int,
    large: Vec<Count>,
    types: Vec<Datatype>,
) -> c_int {
    let rc = record(rc, new, || Recipe {
        combiner,
        ints: Vec::new(),
        addrs: Vec::new(),
        types,
    });
    if rc == MPI_SUCCESS {
        // SAFETY: the constructor just wrote the handle there.
        if let Some(&h) = unsafe { new.as_ref() } {
            STATE.with(|s| s.borrow_mut().recipes.large.insert(h, large));
        }
    }
    rc
}

/// The large counts of `dt`'s recipe (none for a type made with int
/// counts).
pub(crate) fn large_counts(dt: Datatype) -> Vec<Count> {
    STATE.with(|s| {
        s.borrow()
            .recipes
            .large
            .get(&dt)
            .cloned()
            .unwrap_or_default()
    })
}

/// Runs of the basic elements of one element of `dt`, in type-map (and
/// packed) order: `(what, how many)`, where `leaf` says what one element
/// of a predefined type is made of. Every constructor but
/// `MPI_Type_create_struct` repeats one type (as many of its elements as
/// the bytes say); a struct's recipe lists its parts. Adjacent equal runs
/// merge, so a vector of a million doubles is one run.
pub(crate) fn expand<T: Copy + PartialEq>(
    dt: Datatype,
    leaf: &impl Fn(Datatype) -> Result<Vec<(T, usize)>, String>,
) -> Result<Vec<(T, usize)>, String> {
    let Some((combiner, counts, types)) = recipe_of(dt) else {
        // A type made without a recipe (a large-count call's temporary
        // one) holds copies of one predefined type.
        return match crate::types::info(dt) {
            Some(i) if derived(dt) => match i.base {
                Some(b) => Ok(match leaf(b)?[..] {
                    [(what, k)] => vec![(what, k * i.per)],
                    ref parts => parts.repeat(i.per),
                }),
                None => Err("a datatype without a recipe".into()),
            },
            _ => leaf(dt),
        };
    };
    let size = |t| {
        crate::types::info(t)
            .map(|i| i.size)
            .ok_or("invalid datatype")
    };
    let mut runs = Vec::new();
    let mut repeat = |part: &[(T, usize)], n: usize| {
        let mut push = |what: T, k: usize| match runs.last_mut() {
            _ if k == 0 => {}
            Some((w, c)) if *w == what => *c += k,
            _ => runs.push((what, k)),
        };
        if let [(what, k)] = part[..] {
            push(what, k * n);
        } else {
            for _ in 0..n {
                for &(what, k) in part {
                    push(what, k);
                }
            }
        }
    };
    if combiner == MPI_COMBINER_STRUCT {
        for (i, &t) in types.iter().enumerate() {
            let blocklen = counts
                .get(i + 1)
                .map_or(0, |&b| usize::try_from(b).unwrap_or(0));
            repeat(&expand(t, leaf)?, blocklen);
        }
    } else if let [old] = types[..]
        && let Some(n) = size(dt)?.checked_div(size(old)?)
    {
        repeat(&expand(old, leaf)?, n);
    }
    Ok(runs)
}

/// How many integers, addresses, large counts and datatypes describe
/// `dt`, and its combiner; `None` for an invalid handle.
fn envelope(dt: Datatype) -> Option<(usize, usize, usize, usize, c_int)> {
    let found = STATE.with(|s| {
        let s = s.borrow();
        let large = s.recipes.large.get(&dt).map_or(0, Vec::len);
        s.recipes.made.get(&dt).map(|r| {
            (
                r.ints.len(),
                r.addrs.len(),
                large,
                r.types.len(),
                r.combiner,
            )
        })
    });
    match found {
        Some(f) => Some(f),
        None if !derived(dt) && crate::types::info(dt).is_some() => {
            Some((0, 0, 0, 0, MPI_COMBINER_NAMED))
        }
        None => None,
    }
}

/// After a constructor returned `rc`: on success, record the recipe of
/// the type written to `*new`. Returns `rc`.
pub(crate) fn record(rc: c_int, new: *mut Datatype, recipe: impl FnOnce() -> Recipe) -> c_int {
    if rc != MPI_SUCCESS {
        return rc;
    }
    // SAFETY: the constructor just wrote the handle there.
    let Some(&h) = (unsafe { new.as_ref() }) else {
        return rc;
    };
    let r = recipe();
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        for &t in r.types.iter().filter(|&&t| derived(t)) {
            *s.recipes.extra.entry(t).or_insert(0) += 1;
        }
        s.recipes.made.insert(h, r);
    });
    rc
}

/// Drop one reference to derived type `h`: the last one releases its
/// slot, its name and its recipe (and the recipe's references). False if
/// `h` is not a derived type in use.
pub(crate) fn unref(s: &mut State, h: Datatype) -> bool {
    match s.recipes.extra.get_mut(&h) {
        Some(n) if *n > 1 => {
            *n -= 1;
            return true;
        }
        Some(_) => {
            s.recipes.extra.remove(&h);
            return true;
        }
        None => {}
    }
    if !release(&mut s.types, h, USER_TYPE_KIND) {
        return false;
    }
    s.type_names.remove(&h);
    s.recipes.large.remove(&h);
    if let Some(r) = s.recipes.made.remove(&h) {
        for t in r.types.into_iter().filter(|&t| derived(t)) {
            unref(s, t);
        }
    }
    true
}

export! {
    fn MPI_Type_get_envelope / PMPI_Type_get_envelope(dt: Datatype, ni: *mut c_int, na: *mut c_int, nd: *mut c_int, combiner: *mut c_int) -> c_int {
        let (i, a, l, d, c) = match envelope(dt) {
            Some(f) => f,
            None => return error(MPI_COMM_WORLD, "MPI_Type_get_envelope", MPI_ERR_TYPE, "invalid datatype"),
        };
        if l > 0 {
            let why = "made with counts past 2^31-1: MPI_Type_get_envelope_c gives them";
            return error(MPI_COMM_WORLD, "MPI_Type_get_envelope", MPI_ERR_TYPE, why);
        }
        // SAFETY: int pointers (caller contract).
        unsafe {
            put(ni, i as c_int);
            put(na, a as c_int);
            put(nd, d as c_int);
            put(combiner, c);
        }
        MPI_SUCCESS
    }

    fn MPI_Type_get_contents / PMPI_Type_get_contents(dt: Datatype, max_i: c_int, max_a: c_int, max_d: c_int, ints: *mut c_int, addrs: *mut Aint, types: *mut Datatype) -> c_int {
        let func = "MPI_Type_get_contents";
        let copied = STATE.with(|s| {
            let mut s = s.borrow_mut();
            let r = s.recipes.made.get(&dt)?;
            let fits = r.ints.len() <= max_i.max(0) as usize
                && r.addrs.len() <= max_a.max(0) as usize
                && r.types.len() <= max_d.max(0) as usize;
            if !fits {
                return Some(Err(()));
            }
            let (i, a, d) = (r.ints.clone(), r.addrs.clone(), r.types.clone());
            // Each derived type handed out is one more reference.
            for &t in d.iter().filter(|&&t| derived(t)) {
                *s.recipes.extra.entry(t).or_insert(0) += 1;
            }
            Some(Ok((i, a, d)))
        });
        let (i, a, d) = match copied {
            Some(Ok(c)) => c,
            Some(Err(())) => return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, "the arrays are too small for the type's arguments"),
            None => return error(MPI_COMM_WORLD, func, MPI_ERR_TYPE, "a predefined or invalid datatype has no contents"),
        };
        // SAFETY: each array holds at least its max entries, which are at
        // least as many as written (checked above; caller contract).
        // (An empty array may be any pointer, null included: not touched.)
        unsafe {
            if !i.is_empty() {
                std::ptr::copy_nonoverlapping(i.as_ptr(), ints, i.len());
            }
            if !a.is_empty() {
                std::ptr::copy_nonoverlapping(a.as_ptr(), addrs, a.len());
            }
            if !d.is_empty() {
                std::ptr::copy_nonoverlapping(d.as_ptr(), types, d.len());
            }
        }
        MPI_SUCCESS
    }

    fn MPI_Type_get_envelope_c / PMPI_Type_get_envelope_c(dt: Datatype, ni: *mut Count, na: *mut Count, nl: *mut Count, nd: *mut Count, combiner: *mut c_int) -> c_int {
        let Some((i, a, l, d, c)) = envelope(dt) else {
            return error(MPI_COMM_WORLD, "MPI_Type_get_envelope_c", MPI_ERR_TYPE, "invalid datatype");
        };
        // SAFETY: MPI_Count and int pointers (caller contract).
        unsafe {
            put(ni, i as Count);
            put(na, a as Count);
            put(nl, l as Count);
            put(nd, d as Count);
            put(combiner, c);
        }
        MPI_SUCCESS
    }

    fn MPI_Type_get_contents_c / PMPI_Type_get_contents_c(dt: Datatype, max_i: Count, max_a: Count, max_l: Count, max_d: Count, ints: *mut c_int, addrs: *mut Aint, large: *mut Count, types: *mut Datatype) -> c_int {
        let func = "MPI_Type_get_contents_c";
        let l = large_counts(dt);
        if l.len() as Count > max_l {
            return error(MPI_COMM_WORLD, func, MPI_ERR_ARG, "the arrays are too small for the type's arguments");
        }
        let narrow = |n: Count| c_int::try_from(n).unwrap_or(c_int::MAX);
        // SAFETY: the caller's arrays (as MPI_Type_get_contents's).
        let rc = unsafe { MPI_Type_get_contents(dt, narrow(max_i), narrow(max_a), narrow(max_d), ints, addrs, types) };
        if rc == MPI_SUCCESS && !l.is_empty() {
            // SAFETY: `large` holds `max_l` >= l.len() counts (checked).
            unsafe { std::ptr::copy_nonoverlapping(l.as_ptr(), large, l.len()) };
        }
        rc
    }
}
