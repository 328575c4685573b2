//! Message buffers: what can be sent and received.
//!
//! Blocking calls borrow slices of plain-old-data elements (`&[T]`,
//! `&mut [T]` with `T: Pod`). Nonblocking calls take an owned buffer
//! ([`Buffer`]: `Vec<T>` or `Box<[T]>`) and give it back when the request
//! completes, so a buffer in flight can be neither touched nor dropped: the
//! borrow checker rejects it at compile time.
//!
//! ```compile_fail
//! # use vpml_pml as vpml;
//! let world = vpml::init().unwrap();
//! let mut buf = vec![0u8; 4];
//! let req = world.irecv(0, 0, buf).unwrap();
//! buf[0] = 1; // error: `buf` was moved into the request
//! ```

pub use bytemuck::Pod;

/// An owned buffer whose storage does not move when the buffer value is
/// moved, so the engine may keep a pointer to it while a request is active.
///
/// # Safety
///
/// `as_bytes`/`as_bytes_mut` must return the same address and length every
/// time they are called on one value, and that storage must stay valid and
/// unaliased while the value is alive, even if the value is moved. Heap
/// buffers (`Vec`, `Box<[T]>`) have this property; arrays on the stack do not.
pub unsafe trait Buffer: 'static {
    /// The buffer's bytes.
    fn as_bytes(&self) -> &[u8];
    /// The buffer's bytes, writable.
    fn as_bytes_mut(&mut self) -> &mut [u8];
}

// SAFETY: a Vec's heap storage does not move when the Vec is moved, and it
// cannot be reallocated without `&mut Vec`, which the engine never hands out
// while a request is active.
unsafe impl<T: Pod> Buffer for Vec<T> {
    fn as_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(self.as_slice())
    }
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(self.as_mut_slice())
    }
}

// SAFETY: as for Vec: boxed storage is stable across moves of the box.
unsafe impl<T: Pod> Buffer for Box<[T]> {
    fn as_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self[..])
    }
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(&mut self[..])
    }
}
