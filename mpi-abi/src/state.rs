//! The library's process state: the world, the handle tables
//! (communicators, requests, derived datatypes, user operations), and
//! MPI's error handling.

use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI32};

use crate::consts::*;

/// A communicator as the library holds it: shared by its handle's entry
/// and the requests started on it.
pub(crate) type SharedComm = Rc<vpml::Comm>;

/// A communicator the C program holds a handle to.
pub(crate) struct CommEntry {
    /// The communicator, shared with the requests started on it (a
    /// request outlives a handle the program frees, as MPI allows).
    pub comm: SharedComm,
    pub errhandler: Errhandler,
    /// The virtual topology attached by `MPI_Cart_create` and friends.
    pub topology: Option<crate::topo::Topology>,
    /// The name given by `MPI_Comm_set_name`.
    pub name: Option<String>,
    /// Attributes cached on it: (keyval, value), in the order set.
    pub attrs: Vec<(c_int, usize)>,
    /// Persistent collectives made on it so far: each gets its own lane
    /// (see `vpml::raw::Transfer`), so that they may be started in any
    /// order, as MPI allows.
    pub persistent_collectives: u32,
}

/// What a persistent request does each time it is started.
pub(crate) enum Persistent {
    /// `MPI_Send_init`, `MPI_Ssend_init`, `MPI_Recv_init`.
    P2p(PersistentOp),
    /// A persistent collective (`MPI_Bcast_init` …).
    Collective(PersistentCollective),
    /// `MPI_Psend_init`, `MPI_Precv_init`.
    Partitioned(crate::p2p::Partitioned),
}

/// A persistent collective: laid out again, as its nonblocking twin, at
/// each start.
pub(crate) struct PersistentCollective {
    /// The communicator (shared: the program may free its handle first).
    pub on: SharedComm,
    /// Lays the collective out (shared, to be called outside the table's
    /// borrow).
    pub lay: std::rc::Rc<dyn Fn() -> Result<crate::coll::Laid, (c_int, String)>>,
    /// Private copies of the derived datatypes it uses, released with the
    /// request.
    pub types: Vec<Datatype>,
    /// Its lane on the communicator (see [`CommEntry::persistent_collectives`]).
    pub lane: u32,
    /// Arrays the layout reads at each start that the library made (the
    /// int copies of a large-count call's counts), kept as long as it.
    pub keep: Vec<Vec<c_int>>,
}

/// A point-to-point persistent request's operation.
#[derive(Clone)]
pub(crate) struct PersistentOp {
    pub send: bool,
    pub sync: bool,
    /// `MPI_Bsend_init`: each start copies the message and completes.
    pub buffered: bool,
    pub buf: *const c_void,
    pub count: c_int,
    /// The datatype: for a derived one, a private copy, freed with the
    /// request (the program may free its own first, as MPI allows).
    pub dt: Datatype,
    pub peer: c_int,
    pub tag: c_int,
    /// The communicator (shared: the program may free its handle first).
    pub on: SharedComm,
}

/// An operation in flight.
pub(crate) enum Active {
    /// The engine's request, and the communicator it was started on
    /// (shared: the program may free its handle first, as MPI allows; the
    /// status's ranks are numbered in it).
    Engine {
        id: vpml::raw::RawRequest,
        on: SharedComm,
    },
    /// A send or a receive that completed when it started: the engine
    /// keeps nothing of it but the call in its id, and its status is made
    /// here (the rank it went to or came from, in its communicator, the
    /// tag and the length).
    AtStart {
        id: vpml::raw::RawRequest,
        peer: c_int,
        tag: c_int,
        len: usize,
    },
}

impl Active {
    /// What the engine started on `on` (`dest`, `tag` and `len` for the
    /// status of a send complete at start; the communicator is cloned only
    /// for another request). A receive complete at start is made directly.
    pub(crate) fn new(
        id: vpml::raw::RawRequest,
        on: &SharedComm,
        dest: c_int,
        tag: c_int,
        len: usize,
    ) -> Active {
        if id.is_complete_send() {
            Active::AtStart {
                id,
                peer: dest,
                tag,
                len,
            }
        } else {
            Active::Engine {
                id,
                on: Rc::clone(on),
            }
        }
    }

    /// The engine's id of the operation.
    pub(crate) fn id(&self) -> vpml::raw::RawRequest {
        match self {
            Active::Engine { id, .. } | Active::AtStart { id, .. } => *id,
        }
    }

    /// The communicator it runs on, if the engine still has it.
    pub(crate) fn on(&self) -> Option<&SharedComm> {
        match self {
            Active::Engine { on, .. } => Some(on),
            Active::AtStart { .. } => None,
        }
    }

    /// The status of the completed operation, freeing what the engine
    /// kept of it.
    pub(crate) fn finish(&self) -> vpml::Result<vpml::Status> {
        match self {
            Active::Engine { id, on } => on.finish_raw(*id),
            &Active::AtStart { peer, tag, len, .. } => {
                Ok(vpml::Status::of_send(peer as usize, tag, len))
            }
        }
    }
}

/// A request the C program holds a handle to. Sends and receives of
/// predefined datatypes, most of a program's requests, use the first three
/// fields; the rest is boxed in `more`, so that an entry stays small to
/// move in and out of the table.
pub(crate) struct ReqEntry {
    /// The communicator (its error handler applies to the request).
    pub comm: Comm,
    /// An operation on `MPI_PROC_NULL`: complete at once, empty status.
    pub proc_null: bool,
    /// A nonblocking collective in flight (see
    /// [`ReqEntry::is_collective_in_flight`]).
    pub collective: bool,
    /// The operation in flight, if any (on the C buffer, or on the
    /// staging copy).
    pub active: Option<Active>,
    /// What only some requests have (`None`: nothing of it).
    pub more: Option<Box<More>>,
}

/// What only some requests have: see [`ReqEntry`].
#[derive(Default)]
pub(crate) struct More {
    /// Set for persistent requests: inactive between uses.
    pub persistent: Option<Persistent>,
    /// The packed copy a non-contiguous datatype travels in (the
    /// operation reads or writes it until it completes).
    pub staging: Option<crate::types::Message>,
    /// The status (source, tag, bytes) of a request complete from the
    /// start (`MPI_Imrecv`; with `proc_null` set, as the other complete
    /// ones).
    pub ready: Option<(usize, c_int, usize)>,
    /// A nonblocking collective's last step, run once its transfers
    /// completed (folding contributions, unpacking); it owns the memory
    /// the transfers use.
    pub after: Option<AfterCollective>,
    /// A generalized request's functions (`MPI_Grequest_start`).
    pub greq: Option<crate::p2p::Greq>,
}

impl More {
    /// Nothing in it.
    fn is_empty(&self) -> bool {
        let More {
            persistent,
            staging,
            ready,
            after,
            greq,
        } = self;
        persistent.is_none()
            && staging.is_none()
            && ready.is_none()
            && after.is_none()
            && greq.is_none()
    }
}

impl ReqEntry {
    /// A request on communicator `comm` running `active` (`None`: on
    /// `MPI_PROC_NULL`, complete at once), with nothing more.
    pub(crate) fn new(comm: Comm, active: Option<Active>) -> ReqEntry {
        ReqEntry {
            comm,
            proc_null: active.is_none(),
            collective: false,
            active,
            more: None,
        }
    }

    /// [`ReqEntry::new`] with `more` (left out when empty).
    pub(crate) fn with(comm: Comm, active: Option<Active>, more: More) -> ReqEntry {
        ReqEntry {
            more: (!more.is_empty()).then(|| Box::new(more)),
            ..ReqEntry::new(comm, active)
        }
    }

    /// A persistent request doing `op` on communicator `comm`, inactive.
    pub(crate) fn persistent_op(comm: Comm, op: Persistent) -> ReqEntry {
        ReqEntry {
            comm,
            proc_null: false,
            collective: false,
            active: None,
            more: Some(Box::new(More {
                persistent: Some(op),
                ..More::default()
            })),
        }
    }

    /// The boxed part, made empty if there was none.
    pub(crate) fn more_mut(&mut self) -> &mut More {
        self.more.get_or_insert_default()
    }

    /// A persistent request's operation.
    pub(crate) fn persistent(&self) -> Option<&Persistent> {
        self.more.as_ref()?.persistent.as_ref()
    }

    /// See [`ReqEntry::persistent`].
    pub(crate) fn persistent_mut(&mut self) -> Option<&mut Persistent> {
        self.more.as_mut()?.persistent.as_mut()
    }

    /// The staging copy of the operation in flight.
    pub(crate) fn staging(&self) -> Option<&crate::types::Message> {
        self.more.as_ref()?.staging.as_ref()
    }

    /// Take the staging copy out.
    pub(crate) fn take_staging(&mut self) -> Option<crate::types::Message> {
        self.more.as_mut()?.staging.take()
    }

    /// The status of a request complete from the start.
    pub(crate) fn ready(&self) -> Option<(usize, c_int, usize)> {
        self.more.as_ref()?.ready
    }

    /// A nonblocking collective in flight, or a request laid out as one
    /// (`MPI_Isendrecv`) whose last step still holds memory its transfers
    /// use: it can be neither cancelled nor freed until it completes.
    pub(crate) fn is_collective_in_flight(&self) -> bool {
        self.collective || self.more.as_ref().is_some_and(|m| m.after.is_some())
    }

    /// Take a nonblocking collective's last step out.
    pub(crate) fn take_after(&mut self) -> Option<AfterCollective> {
        self.more.as_mut()?.after.take()
    }

    /// A generalized request's functions.
    pub(crate) fn greq(&self) -> Option<&crate::p2p::Greq> {
        self.more.as_ref()?.greq.as_ref()
    }

    /// See [`ReqEntry::greq`].
    pub(crate) fn greq_mut(&mut self) -> Option<&mut crate::p2p::Greq> {
        self.more.as_mut()?.greq.as_mut()
    }

    /// Whether this is a generalized request.
    pub(crate) fn is_greq(&self) -> bool {
        self.greq().is_some()
    }

    /// Take a generalized request's functions out.
    pub(crate) fn take_greq(&mut self) -> Option<crate::p2p::Greq> {
        self.more.as_mut()?.greq.take()
    }
}

/// See [`ReqEntry::after`].
pub(crate) type AfterCollective = Box<dyn FnOnce() -> Result<(), (c_int, String)>>;

/// A derived datatype: where the bytes of one element lie.
#[derive(Clone, Debug)]
pub(crate) struct DerivedType {
    /// (offset from the element's start, length) of each run of bytes, in
    /// type-map order; adjacent runs merged.
    pub blocks: Vec<(isize, usize)>,
    /// Lower bound and extent (the stride between consecutive elements).
    pub lb: isize,
    pub extent: isize,
    /// The predefined type every byte belongs to, if there is one (what
    /// reductions and `MPI_Get_elements` count in), and how many of them
    /// one element holds.
    pub base: Option<Datatype>,
    pub per: usize,
    /// Alignment of the largest predefined type inside (struct padding).
    pub align: usize,
    /// What made the lower and the upper bound.
    pub bounds: (Bound, Bound),
}

/// Where a datatype's bound comes from, which decides whether it stays a
/// bound of the types built from it (MPI's "sticky" markers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bound {
    /// The data's extreme: a type built from it takes the extreme of all
    /// its parts' data.
    Data,
    /// A marker (`MPI_LB`, `MPI_UB`, or a resize, subarray or darray):
    /// it overrides the data's bounds in the types built from it.
    Marker,
    /// None (`MPI_LB` has no upper bound, `MPI_UB` no lower one, an empty
    /// type neither).
    Absent,
}

/// A user reduction (`MPI_Op_create`).
pub(crate) type UserFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut Datatype);
/// A large-count user reduction (`MPI_Op_create_c`).
pub(crate) type UserFnC = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut Count, *mut Datatype);

/// A user reduction's function, as the program gave it.
#[derive(Clone, Copy)]
pub(crate) enum UserFunction {
    Int(UserFn),
    Large(UserFnC),
}

impl UserFunction {
    /// `inout = in ⊕ inout` over `count` elements `extent` bytes apart
    /// (in slices of at most 2^31-1 for a function that counts in ints).
    ///
    /// # Safety
    /// MPI's contract for user operations: both buffers hold `count`
    /// elements of `*dt`.
    pub(crate) unsafe fn call(
        self,
        inv: *mut c_void,
        inout: *mut c_void,
        count: usize,
        extent: isize,
        dt: *mut Datatype,
    ) {
        match self {
            UserFunction::Int(f) => {
                let mut done = 0;
                while done < count {
                    let n = (count - done).min(c_int::MAX as usize);
                    let at = done as isize * extent;
                    let mut len = n as c_int;
                    // SAFETY: caller contract; the slice lies inside.
                    unsafe {
                        f(
                            inv.wrapping_byte_offset(at),
                            inout.wrapping_byte_offset(at),
                            &mut len,
                            dt,
                        )
                    };
                    done += n;
                }
            }
            UserFunction::Large(f) => {
                let mut len = count as Count;
                // SAFETY: caller contract.
                unsafe { f(inv, inout, &mut len, dt) };
            }
        }
    }
}

/// Everything the library keeps between calls.
pub(crate) struct State {
    pub world: Option<vpml::World>,
    /// Slot 0 is `MPI_COMM_WORLD`, slot 1 `MPI_COMM_SELF`.
    pub comms: Vec<Option<CommEntry>>,
    pub requests: Requests,
    /// Groups: the world ranks of their members, in group rank order.
    pub groups: Vec<Option<Vec<usize>>>,
    /// Info objects: their key/value pairs, in the order first set.
    pub infos: Vec<Option<Vec<(String, String)>>>,
    /// User error handlers (kept until the end: a communicator may still
    /// use one its handle was freed for).
    pub errhandlers: Vec<Option<crate::errhan::CommErrhandlerFn>>,
    /// User error classes, codes and strings.
    pub user_errors: crate::errhan::UserErrors,
    pub types: Vec<Option<DerivedType>>,
    /// Keyvals (`MPI_Comm_create_keyval` …).
    pub keyvals: Vec<Option<crate::attr::Keyval>>,
    /// Attributes cached on datatypes: (keyval, value) per type.
    pub type_attrs: std::collections::BTreeMap<Datatype, Vec<(c_int, usize)>>,
    /// Messages taken by matched probes (`MPI_Mprobe`).
    pub messages: Vec<Option<crate::p2p::Matched>>,
    /// Windows (`MPI_Win_create` …).
    pub windows: Vec<Option<crate::rma::Window>>,
    /// Attributes cached on windows: (keyval, value) per window.
    pub win_attrs: std::collections::BTreeMap<c_int, Vec<(c_int, usize)>>,
    /// Sessions (`MPI_Session_init`).
    pub sessions: Vec<Option<crate::session::SessionEntry>>,
    /// Names given by `MPI_Type_set_name`.
    pub type_names: std::collections::BTreeMap<Datatype, String>,
    /// How each derived datatype was made, and references to them.
    pub recipes: crate::recipes::Recipes,
    /// User operations: the function, and whether it commutes.
    pub ops: Vec<Option<(UserFunction, bool)>>,
    /// Staging buffers of requests freed while active: the engine may
    /// still write into them, so they live until `MPI_Finalize` is done.
    pub orphans: Vec<crate::types::Message>,
    /// The buffer given to `MPI_Buffer_attach` (buffered sends copy their
    /// message instead, so it only has to be given back).
    pub attached: Option<(*mut c_void, c_int)>,
}

impl State {
    const fn new() -> State {
        State {
            world: None,
            comms: Vec::new(),
            requests: Requests::new(),
            groups: Vec::new(),
            infos: Vec::new(),
            errhandlers: Vec::new(),
            user_errors: crate::errhan::UserErrors::new(),
            types: Vec::new(),
            sessions: Vec::new(),
            windows: Vec::new(),
            win_attrs: std::collections::BTreeMap::new(),
            type_names: std::collections::BTreeMap::new(),
            recipes: crate::recipes::Recipes::new(),
            keyvals: Vec::new(),
            messages: Vec::new(),
            type_attrs: std::collections::BTreeMap::new(),
            ops: Vec::new(),
            orphans: Vec::new(),
            attached: None,
        }
    }
}

/// The state, shared by the threads of a program: under
/// `MPI_THREAD_FUNNELED` only the thread that initialized MPI calls it;
/// under `MPI_THREAD_SERIALIZED` and `MPI_THREAD_MULTIPLE` any thread
/// may, and every call holds the call lock ([`crate::threads`]) while it
/// touches the state or the engine.
pub(crate) struct Shared(RefCell<State>);

// SAFETY: the state (and the vpml objects inside, which are not `Send`:
// communicators share the engine through an `Rc<RefCell<_>>`) is only
// touched from MPI calls. Under FUNNELED those all come from one thread;
// under SERIALIZED and MULTIPLE each call holds the process-wide call lock
// whenever it touches them, so one thread at a time does, and the lock's
// release/acquire orders one thread's accesses before the next's. A call
// that lets the lock go while it waits (`threads::block_until`) holds no
// borrow of the state or the engine meanwhile: only its own clones of
// communicators, whose reference counts other threads change under the
// lock while it sleeps without touching them.
unsafe impl Sync for Shared {}

impl Shared {
    /// Run `f` on the state (the call lock, when needed, is already held
    /// by the MPI call this runs in).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&RefCell<State>) -> R) -> R {
        f(&self.0)
    }
}

/// The library's state.
pub(crate) static STATE: Shared = Shared(RefCell::new(State::new()));

/// `MPI_Init` succeeded (it stays set after `MPI_Finalize`), and
/// `MPI_Finalize` ran; and the thread support granted at init. Outside the
/// state: `MPI_Initialized`, `MPI_Finalized` and `MPI_Query_thread` may be
/// called from any thread at any time, even while another thread blocks in
/// a call that holds the state.
pub(crate) static INITIALIZED: AtomicBool = AtomicBool::new(false);
/// See [`INITIALIZED`].
pub(crate) static FINALIZED: AtomicBool = AtomicBool::new(false);
/// See [`INITIALIZED`].
pub(crate) static THREAD_LEVEL: AtomicI32 = AtomicI32::new(MPI_THREAD_FUNNELED);

/// The handle of slot `i` of a table whose handles are of `kind` (the
/// top byte, as MPICH encodes handle kinds).
pub(crate) fn handle_of(kind: u32, i: usize) -> c_int {
    (kind | i as u32) as c_int
}

/// The table slot of handle `h`, if it is of `kind`.
pub(crate) fn slot_of(h: c_int, kind: u32) -> Option<usize> {
    let h = h as u32;
    (h & 0xff00_0000 == kind).then_some((h & 0x00ff_ffff) as usize)
}

/// Empty the slot of handle `h` (of `kind`) in `table`; false if it held
/// nothing.
pub(crate) fn release<T>(table: &mut [Option<T>], h: c_int, kind: u32) -> bool {
    slot_of(h, kind)
        .and_then(|i| table.get_mut(i)?.take())
        .is_some()
}

/// Table slot of a communicator handle.
pub(crate) fn comm_slot(h: Comm) -> Option<usize> {
    match h {
        MPI_COMM_WORLD => Some(0),
        MPI_COMM_SELF => Some(1),
        _ => slot_of(h, USER_COMM_KIND),
    }
}

/// Handle of communicator table slot `i`.
pub(crate) fn comm_handle(i: usize) -> Comm {
    match i {
        0 => MPI_COMM_WORLD,
        1 => MPI_COMM_SELF,
        _ => handle_of(USER_COMM_KIND, i),
    }
}

/// Table slot of a request handle.
pub(crate) fn request_slot(h: Request) -> Option<usize> {
    let h = h as u32;
    (h & 0xff00_0000 == REQUEST_KIND && h != MPI_REQUEST_NULL as u32)
        .then(|| (h & 0x00ff_ffff) as usize - 1)
}

/// Handle of request table slot `i`.
pub(crate) fn request_handle(i: usize) -> Request {
    (REQUEST_KIND | (i as u32 + 1)) as Request
}

/// The request table: entries by slot, and the free slots, so that a
/// program with many requests in flight starts each in O(1).
pub(crate) struct Requests {
    entries: Vec<Option<ReqEntry>>,
    free: Vec<usize>,
}

impl Requests {
    const fn new() -> Requests {
        Requests {
            entries: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Every request in the table, with its handle.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Request, &ReqEntry)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| Some((request_handle(i), e.as_ref()?)))
    }

    /// Store `e`; its slot. Inlined, so that the caller builds the entry
    /// in place: copying it in from the caller's stack read back fields
    /// just written at other widths, and such a load waits for every
    /// store before it, a send's ring writes included.
    #[inline(always)]
    pub(crate) fn insert(&mut self, e: ReqEntry) -> usize {
        // A free slot is empty: nothing to drop before writing it.
        if let Some(i) = self.free.pop()
            && let Some(slot @ None) = self.entries.get_mut(i)
        {
            *slot = Some(e);
            return i;
        }
        self.entries.push(Some(e));
        self.entries.len() - 1
    }

    /// The entry in slot `i`.
    pub(crate) fn get(&self, i: usize) -> Option<&ReqEntry> {
        self.entries.get(i)?.as_ref()
    }

    /// The entry in slot `i`, to change.
    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut ReqEntry> {
        self.entries.get_mut(i)?.as_mut()
    }

    /// Take the entry out of slot `i`, freeing the slot.
    pub(crate) fn remove(&mut self, i: usize) -> Option<ReqEntry> {
        let e = self.entries.get_mut(i)?.take()?;
        self.free.push(i);
        Some(e)
    }

    /// Free slot `i`, dropping its entry where it lies (a completion
    /// retires every request it completes: no move of the entry).
    pub(crate) fn free(&mut self, i: usize) {
        if let Some(e) = self.entries.get_mut(i)
            && e.is_some()
        {
            *e = None;
            self.free.push(i);
        }
    }

    /// Every entry, emptying the table.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = ReqEntry> + '_ {
        self.free.clear();
        self.entries.drain(..).flatten()
    }
}

/// The C array `p[0..n]` (empty for n <= 0 or a null pointer).
///
/// # Safety
/// `p` holds `n` values when `n > 0` and it is not null.
pub(crate) unsafe fn c_array<'a, T>(p: *const T, n: c_int) -> &'a [T] {
    match usize::try_from(n) {
        // SAFETY: caller contract.
        Ok(n) if n > 0 && !p.is_null() => unsafe { std::slice::from_raw_parts(p, n) },
        _ => &[],
    }
}

/// Store `v` in the first free slot of `table`; its index.
pub(crate) fn insert<T>(table: &mut Vec<Option<T>>, first: usize, v: T) -> usize {
    if table.len() < first {
        table.resize_with(first, || None);
    }
    match table.iter().skip(first).position(Option::is_none) {
        Some(i) => {
            table[first + i] = Some(v);
            first + i
        }
        None => {
            table.push(Some(v));
            table.len() - 1
        }
    }
}

/// Run `f` on the communicator behind handle `h`, borrowed (no clone), and
/// the state's request table; `None` if `h` is no valid communicator (or
/// MPI is not initialized: the table is empty then), for the caller to
/// report through [`comm`]. The hot path of the point-to-point calls.
///
/// `f` must not call back into the library: the state stays borrowed. (A
/// protocol's send hook may wait for its event logger meanwhile; the calls
/// another thread may make then, such as `MPI_Initialized`, do not touch
/// the state.)
#[inline]
pub(crate) fn with_comm<R>(h: Comm, f: impl FnOnce(&SharedComm, &mut Requests) -> R) -> Option<R> {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let State {
            comms, requests, ..
        } = &mut *s;
        let c = &comm_slot(h).and_then(|i| comms.get(i))?.as_ref()?.comm;
        Some(f(c, requests))
    })
}

/// A clone of the world communicator, if MPI is started (for calls that
/// let the state go before they use it).
pub(crate) fn world_comm() -> Option<vpml::Comm> {
    STATE.with(|s| s.borrow().world.as_ref().map(|w| (**w).clone()))
}

/// A communicator that reaches the engine (every communicator shares
/// it): the world's, while MPI is initialized.
pub(crate) fn engine_comm(s: &State) -> Option<SharedComm> {
    Some(Rc::clone(&s.comms.first()?.as_ref()?.comm))
}

/// The communicator behind handle `h` (shared), or the error code.
pub(crate) fn comm(func: &str, h: Comm) -> Result<SharedComm, c_int> {
    let found = STATE.with(|s| {
        let s = s.borrow();
        if s.world.is_none() {
            return Err("called before MPI_Init or after MPI_Finalize");
        }
        comm_slot(h)
            .and_then(|i| s.comms.get(i)?.as_ref())
            .map(|e| Rc::clone(&e.comm))
            .ok_or("invalid communicator")
    });
    found.map_err(|why| error(MPI_COMM_WORLD, func, MPI_ERR_COMM, why))
}

/// [`comm`], for calls MPI defines on intracommunicators only: an
/// intercommunicator is `MPI_ERR_COMM`.
pub(crate) fn intra_comm(func: &str, h: Comm) -> Result<SharedComm, c_int> {
    let c = comm(func, h)?;
    if c.is_inter() {
        return Err(error(
            h,
            func,
            MPI_ERR_COMM,
            "not defined on an intercommunicator",
        ));
    }
    Ok(c)
}

/// The error class of a vpml error.
pub(crate) fn class_of(e: &vpml::Error) -> c_int {
    match e {
        vpml::Error::Truncated { .. } => MPI_ERR_TRUNCATE,
        vpml::Error::InvalidRank { .. } => MPI_ERR_RANK,
        vpml::Error::InvalidTag(_) => MPI_ERR_TAG,
        vpml::Error::CommKind(_) => MPI_ERR_COMM,
        _ => MPI_ERR_OTHER,
    }
}

/// Report error `code` of `func` on communicator `comm` as MPI says: with
/// `MPI_ERRORS_RETURN` the code comes back; otherwise (the default,
/// `MPI_ERRORS_ARE_FATAL`) one line naming the function and the error,
/// then the job stops.
pub(crate) fn error(comm: Comm, func: &str, code: c_int, why: &str) -> c_int {
    let handler = STATE.with(|s| {
        s.try_borrow().ok().and_then(|s| {
            let i = comm_slot(comm).unwrap_or(0);
            s.comms.get(i)?.as_ref().map(|e| e.errhandler)
        })
    });
    match handler {
        Some(MPI_ERRORS_RETURN) => return code,
        Some(h) => {
            if let Some(f) = crate::errhan::handler_fn(h) {
                crate::errhan::call_user(f, comm, code);
                return code;
            }
        }
        None => {}
    }
    fatal(func, code, why)
}

/// One line naming the function and the error, then the job stops
/// (`MPI_ERRORS_ARE_FATAL`).
pub(crate) fn fatal(func: &str, code: c_int, why: &str) -> ! {
    let text = crate::errhan::user_string(code)
        .unwrap_or_else(|| crate::env::error_text(code).to_string());
    eprintln!("vpml libmpi: {func}: {why} ({text})");
    STATE.with(|s| {
        if let Ok(s) = s.try_borrow()
            && let Some(world) = s.world.as_ref()
        {
            world.abort(code.max(1));
        }
    });
    std::process::exit(code.max(1))
}

/// `error` for a vpml error. A divergence of a re-executed rank stops the
/// job whatever the error handler: the launcher says why, once (a rank
/// replayed alone says it itself), and the process ends as the engine's
/// divergences do.
pub(crate) fn vpml_error(comm: Comm, func: &str, e: &vpml::Error) -> c_int {
    if let vpml::Error::Diverged(_) = e {
        let told = STATE.with(|s| {
            s.try_borrow()
                .ok()
                .and_then(|s| s.world.as_ref().map(|w| w.comm().has_launcher()))
        });
        if told != Some(true) {
            eprintln!("vpml: {e}");
        }
        std::process::exit(DIVERGED_EXIT_CODE);
    }
    error(comm, func, class_of(e), &e.to_string())
}

/// The exit status of a job stopped by a divergence (vpml's engine uses
/// the same).
pub(crate) const DIVERGED_EXIT_CODE: c_int = 70;

/// Write `v` through a C out-pointer.
///
/// # Safety
/// `p` is null or valid for a write of `T`.
pub(crate) unsafe fn put<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: caller contract.
        unsafe { p.write(v) };
    }
}
#[cfg(test)]
mod tests {
    /// Every send and receive moves an entry into the request table and
    /// out: what only some requests need stays boxed.
    #[test]
    fn a_request_entry_stays_within_a_cache_line() {
        assert!(size_of::<super::ReqEntry>() <= 64);
    }
}
