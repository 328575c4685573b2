//! The buffer of a point-to-point transfer: the C buffer itself, or a
//! packed staging copy for a non-contiguous datatype.

use std::ffi::{c_int, c_void};

use super::datatype::{bytes_of, info, layout, pack, predefined_size, span_of, unpack};
use crate::consts::*;
use crate::state::DerivedType;

/// A message buffer: the C buffer itself for a contiguous datatype, else
/// a packed staging copy (unpacked into the C buffer when a receive
/// completes).
pub(crate) enum Message {
    /// The C buffer.
    Direct { ptr: *mut u8, len: usize },
    /// A staging buffer (boxed: rare, and a request entry stays small).
    Staged(Box<Staged>),
}

/// A packed copy of `count` elements of `layout` at `user`.
pub(crate) struct Staged {
    data: Box<[u8]>,
    user: *mut u8,
    layout: DerivedType,
}

impl Message {
    /// [`Message::new`] for a predefined datatype (the C buffer itself),
    /// without looking the type up: the hot path of the point-to-point
    /// calls. `None` for any other datatype, and for arguments
    /// [`Message::new`] rejects (it names the error).
    #[inline]
    pub(crate) fn predefined(buf: *const c_void, count: c_int, dt: Datatype) -> Option<Message> {
        let size = super::predefined_size(dt).filter(|&s| s > 0)?;
        let len = usize::try_from(count).ok()?.checked_mul(size)?;
        (len == 0 || !buf.is_null()).then_some(Message::Direct {
            ptr: buf as *mut u8,
            len,
        })
    }

    /// The buffer for `count` elements of `dt` at `buf`; packed now when
    /// `send`.
    ///
    /// # Safety
    /// `buf` holds `count` elements of `dt` (the C caller's contract).
    pub(crate) unsafe fn new(
        buf: *const c_void,
        count: c_int,
        dt: Datatype,
        send: bool,
    ) -> Result<Message, (c_int, &'static str)> {
        if count == 0 && dt == MPI_DATATYPE_NULL {
            // Nothing of no type: empty (as MPICH accepts it).
            return Ok(Message::Direct {
                ptr: buf as *mut u8,
                len: 0,
            });
        }
        // A predefined type first, on its own: its size stays in a
        // register (merged with the derived types' path, the type's
        // description went through the stack and was read back with a
        // wider load than the store that wrote it, which waits for every
        // older store, a send's ring writes among them).
        let direct = |len: usize| {
            if len > 0 && buf.is_null() {
                return Err((MPI_ERR_BUFFER, "null buffer"));
            }
            Ok(Message::Direct {
                ptr: buf as *mut u8,
                len,
            })
        };
        if let Some(size) = predefined_size(dt) {
            return direct(bytes_of(count, size)?);
        }
        let t = info(dt).ok_or((MPI_ERR_TYPE, "invalid datatype"))?;
        let len = span_of(count, &t)?;
        if t.contiguous || len == 0 {
            return direct(len);
        }
        let layout = layout(dt).ok_or((MPI_ERR_TYPE, "invalid datatype"))?;
        let n = usize::try_from(count).unwrap_or(0);
        let data = if send {
            // SAFETY: caller contract.
            unsafe { pack(buf as *const u8, n, &layout) }.into_boxed_slice()
        } else {
            vec![0u8; len].into_boxed_slice()
        };
        Ok(Message::Staged(Box::new(Staged {
            data,
            user: buf as *mut u8,
            layout,
        })))
    }

    /// Where the transfer reads or writes, and how many bytes.
    pub(crate) fn target(&mut self) -> (*mut u8, usize) {
        match self {
            Message::Direct { ptr, len } => (*ptr, *len),
            Message::Staged(s) => (s.data.as_mut_ptr(), s.data.len()),
        }
    }

    /// The bytes the transfer reads or writes (for a call that completes
    /// before it returns).
    pub(crate) fn bytes(&mut self) -> &mut [u8] {
        match self {
            Message::Direct { len: 0, .. } => &mut [],
            // SAFETY: the C buffer holds `len` bytes for the duration of
            // the call that made this message (the C caller's contract).
            Message::Direct { ptr, len } => unsafe { std::slice::from_raw_parts_mut(*ptr, *len) },
            Message::Staged(s) => &mut s.data,
        }
    }

    /// The bytes, to read (a send buffer, which may be read-only memory).
    pub(crate) fn read_only(&mut self) -> &[u8] {
        let (ptr, len) = self.target();
        if len == 0 {
            return &[];
        }
        // SAFETY: the C buffer (or the staging copy) holds `len` bytes for
        // the duration of the call that made this message.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }

    /// A transfer into this buffer completed with `received` bytes (all of
    /// them when `None`): move them into the C buffer if they were staged.
    pub(crate) fn finish(&self, received: Option<usize>) {
        if let Message::Staged(s) = self {
            let n = received.map_or(s.data.len(), |r| r.min(s.data.len()));
            // SAFETY: `user` holds the elements (the contract of the call
            // that made this message).
            unsafe { unpack(&s.data[..n], s.user, &s.layout) };
        }
    }
}
