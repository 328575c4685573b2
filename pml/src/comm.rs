//! Communicators and the point-to-point calls on them.

use std::cell::RefCell;
use std::rc::Rc;

use crate::buffer::{Buffer, Pod};
use crate::engine::{Engine, EngineStats};
use crate::error::{Error, Result};
use crate::matching::{ANY_TAG, RecvSpec, Source};
use crate::request::{Persistent, PersistentKind, Request};
use crate::status::Status;

pub(crate) type Shared = Rc<RefCell<Engine>>;

/// A communicator: a group of ranks with its own message space.
///
/// Only the world communicator exists for now (context 0); `dup` and
/// `split` come with collectives. Cloning is cheap and shares the engine.
#[derive(Clone)]
pub struct Comm {
    pub(crate) engine: Shared,
    pub(crate) context: u32,
}

/// Send modes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mode {
    Standard,
    Synchronous,
}

impl Comm {
    /// This process's rank in the communicator.
    pub fn rank(&self) -> usize {
        self.engine.borrow().rank()
    }

    /// Number of ranks in the communicator.
    pub fn size(&self) -> usize {
        self.engine.borrow().size()
    }

    /// The job id given by the launcher (`"singleton"` outside `vpml run`).
    pub fn job_id(&self) -> String {
        self.engine.borrow().job_id().to_string()
    }

    /// Counters of this rank's engine.
    pub fn stats(&self) -> EngineStats {
        self.engine.borrow().stats()
    }

    /// True when large messages are copied once, straight from the
    /// sender's memory (false where the kernel forbids it; then they are
    /// pipelined through shared memory).
    pub fn single_copy(&self) -> bool {
        self.engine.borrow().single_copy()
    }

    pub(crate) fn check_dest(&self, dest: usize, tag: i32) -> Result<()> {
        if tag < 0 {
            return Err(Error::InvalidTag(tag));
        }
        self.engine.borrow().check_rank(dest)
    }

    pub(crate) fn spec(&self, source: Source, tag: i32) -> Result<RecvSpec> {
        if tag < 0 && tag != ANY_TAG {
            return Err(Error::InvalidTag(tag));
        }
        let source = match source {
            Source::Any => None,
            Source::Rank(r) => {
                self.engine.borrow().check_rank(r)?;
                Some(r)
            }
        };
        Ok(RecvSpec {
            source,
            tag: (tag != ANY_TAG).then_some(tag),
            context: self.context,
        })
    }

    fn blocking_send(&self, dest: usize, tag: i32, data: &[u8], mode: Mode) -> Result<()> {
        self.check_dest(dest, tag)?;
        let mut eng = self.engine.borrow_mut();
        if mode == Mode::Standard && eng.try_send_now(dest, tag, self.context, data) {
            return Ok(());
        }
        // SAFETY: `data` stays borrowed until the send completes below.
        let id = unsafe {
            eng.start_send(
                dest,
                tag,
                self.context,
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
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(buf);
        let mut eng = self.engine.borrow_mut();
        // SAFETY: `buf` stays mutably borrowed until the receive completes.
        let id = unsafe { eng.start_recv(spec, bytes.as_mut_ptr(), bytes.len())? };
        let waited = eng.wait(id);
        if let Err(e) = waited {
            // The receive may still be posted: withdraw it before `buf` is released.
            eng.cancel(id);
            return Err(e);
        }
        eng.take_status(id)?.into_result()
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
        self.check_dest(dest, send_tag)?;
        let spec = self.spec(source.into(), recv_tag)?;
        let out: &[u8] = bytemuck::cast_slice(data);
        let inp: &mut [u8] = bytemuck::cast_slice_mut(buf);
        let mut eng = self.engine.borrow_mut();
        // SAFETY: both buffers stay borrowed until both operations complete.
        let (r, s) = unsafe {
            let r = eng.start_recv(spec, inp.as_mut_ptr(), inp.len())?;
            let s = eng.start_send(dest, send_tag, self.context, out.as_ptr(), out.len(), false)?;
            (r, s)
        };
        let waited = eng.wait_until(|e| e.is_done(r) && e.is_done(s));
        if let Err(e) = waited {
            eng.cancel(r);
            return Err(e);
        }
        eng.take_status(s)?;
        eng.take_status(r)?.into_result()
    }

    fn start_isend<B: Buffer>(
        &self,
        dest: usize,
        tag: i32,
        buf: B,
        mode: Mode,
    ) -> Result<Request<B>> {
        self.check_dest(dest, tag)?;
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
        Ok(Request::new(self.engine.clone(), id, buf))
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
        Ok(Request::new(self.engine.clone(), id, buf))
    }

    /// Block until a message matching (`source`, `tag`) can be received;
    /// return its status without receiving it.
    pub fn probe(&self, source: impl Into<Source>, tag: i32) -> Result<Status> {
        let spec = self.spec(source.into(), tag)?;
        self.engine.borrow_mut().probe(&spec)
    }

    /// Like [`Comm::probe`] but return `None` at once if nothing matches yet.
    pub fn iprobe(&self, source: impl Into<Source>, tag: i32) -> Result<Option<Status>> {
        let spec = self.spec(source.into(), tag)?;
        self.engine.borrow_mut().iprobe(&spec)
    }

    /// A persistent standard send of `buf` to `dest`; start it as often as needed.
    pub fn send_init<B: Buffer>(&self, dest: usize, tag: i32, buf: B) -> Result<Persistent<B>> {
        self.check_dest(dest, tag)?;
        Ok(Persistent::new(
            self.clone(),
            PersistentKind::Send {
                dest,
                tag,
                mode: Mode::Standard,
            },
            buf,
        ))
    }

    /// A persistent synchronous send.
    pub fn ssend_init<B: Buffer>(&self, dest: usize, tag: i32, buf: B) -> Result<Persistent<B>> {
        self.check_dest(dest, tag)?;
        Ok(Persistent::new(
            self.clone(),
            PersistentKind::Send {
                dest,
                tag,
                mode: Mode::Synchronous,
            },
            buf,
        ))
    }

    /// A persistent receive into `buf`.
    pub fn recv_init<B: Buffer>(
        &self,
        source: impl Into<Source>,
        tag: i32,
        buf: B,
    ) -> Result<Persistent<B>> {
        let spec = self.spec(source.into(), tag)?;
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
