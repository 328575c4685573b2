//! The messages one-sided operations travel as: a request from origin to
//! target (a [`Header`], the target's byte runs, then the data), and the
//! tags on a window's private communicator.

use bytemuck::{Pod, Zeroable};

/// Requests to a target, matched there from any source (the order a
/// target takes them in is what a logging protocol records).
pub(crate) const TAG_REQUEST: i32 = 1;
/// Replies from a target — data, grants, acknowledgements — matched by the
/// origin from that target in the order it asked.
pub(crate) const TAG_REPLY: i32 = 2;
/// `MPI_Win_post`'s word to each origin of the exposure group.
pub(crate) const TAG_POST: i32 = 3;
/// A request too long for the target's inbox, whole, after its `Follows`.
pub(crate) const TAG_DATA: i32 = 4;
/// `MPI_Win_complete`'s word to each target of a direct window
/// ([`super::direct`]), which takes no requests.
pub(crate) const TAG_COMPLETE: i32 = 5;

/// What a request asks of its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Kind {
    /// Write the data into the runs.
    Put = 1,
    /// Reply with the runs' bytes.
    Get = 2,
    /// Combine the data into the runs with `op`.
    Accumulate = 3,
    /// Reply with the runs' bytes, then combine the data into them.
    GetAccumulate = 4,
    /// Reply with the runs' bytes; replace them with the data if they
    /// equal the compare bytes that follow it.
    CompareAndSwap = 5,
    /// Grant a lock (`lock` says which) when it can, with a reply.
    Lock = 6,
    /// Let the origin's lock go, and reply.
    Unlock = 7,
    /// Reply (every earlier request of the origin is done).
    Flush = 8,
    /// The origin's access epoch of `MPI_Win_start` ended.
    Complete = 9,
    /// A request of `data_len` bytes follows whole, with `TAG_DATA`.
    Follows = 10,
}

impl Kind {
    fn from_u32(v: u32) -> Option<Kind> {
        Some(match v {
            1 => Kind::Put,
            2 => Kind::Get,
            3 => Kind::Accumulate,
            4 => Kind::GetAccumulate,
            5 => Kind::CompareAndSwap,
            6 => Kind::Lock,
            7 => Kind::Unlock,
            8 => Kind::Flush,
            9 => Kind::Complete,
            10 => Kind::Follows,
            _ => return None,
        })
    }

    /// Does it read or write the window's memory (and so count towards
    /// the operations a fence waits for)?
    pub(crate) fn is_access(self) -> bool {
        matches!(
            self,
            Kind::Put | Kind::Get | Kind::Accumulate | Kind::GetAccumulate | Kind::CompareAndSwap
        )
    }
}

/// The fixed part of a request.
#[derive(Clone, Copy, Pod, Zeroable, Default)]
#[repr(C)]
pub(crate) struct Header {
    pub kind: u32,
    /// The reduction (accumulates), or the lock type (`Lock`).
    pub arg: i32,
    /// The predefined datatype accumulates combine elements of.
    pub base: i32,
    /// How many runs follow.
    pub runs: u32,
    /// Bytes of data after the runs (the compare bytes of
    /// `CompareAndSwap` come after, as many again).
    pub data_len: u64,
    /// Where the runs start: a byte offset into the window, or an address
    /// in a dynamic window.
    pub at: i64,
}

/// A request, taken apart.
pub(crate) struct Request<'a> {
    pub kind: Kind,
    pub header: Header,
    /// (offset from `header.at`, length) of each run of target bytes.
    pub runs: Vec<(i64, u64)>,
    pub data: &'a [u8],
    /// `CompareAndSwap`'s compare bytes.
    pub compare: &'a [u8],
}

/// A request of `kind` without runs or data.
pub(crate) fn control(kind: Kind, arg: i32) -> Vec<u8> {
    encode(
        kind,
        Header {
            arg,
            ..Header::default()
        },
        &[],
        &[],
        &[],
    )
}

/// The announcement of a request of `len` bytes sent whole after it.
pub(crate) fn follows_of(len: usize) -> Vec<u8> {
    let header = Header {
        kind: Kind::Follows as u32,
        data_len: len as u64,
        ..Header::default()
    };
    bytemuck::bytes_of(&header).to_vec()
}

/// If `bytes` announce a request that follows whole, its length.
pub(crate) fn follows(bytes: &[u8]) -> Option<u64> {
    let head = bytes.get(..size_of::<Header>())?;
    let header: Header = bytemuck::pod_read_unaligned(head);
    (header.kind == Kind::Follows as u32 && bytes.len() == size_of::<Header>())
        .then_some(header.data_len)
}

/// Encode a request.
pub(crate) fn encode(
    kind: Kind,
    mut header: Header,
    runs: &[(i64, u64)],
    data: &[u8],
    compare: &[u8],
) -> Vec<u8> {
    header.kind = kind as u32;
    header.runs = runs.len() as u32;
    header.data_len = data.len() as u64;
    let mut out =
        Vec::with_capacity(size_of::<Header>() + runs.len() * 16 + data.len() + compare.len());
    out.extend_from_slice(bytemuck::bytes_of(&header));
    for &(off, len) in runs {
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
    }
    out.extend_from_slice(data);
    out.extend_from_slice(compare);
    out
}

/// Take a request apart; why not, when it is malformed.
pub(crate) fn decode(bytes: &[u8]) -> Result<Request<'_>, String> {
    let head = bytes.get(..size_of::<Header>()).ok_or_else(|| {
        format!(
            "a request of {} bytes is shorter than its header",
            bytes.len()
        )
    })?;
    let header: Header = bytemuck::pod_read_unaligned(head);
    let kind = Kind::from_u32(header.kind)
        .ok_or_else(|| format!("unknown request kind {}", header.kind))?;
    let mut rest = &bytes[size_of::<Header>()..];
    let runs_len = (header.runs as usize)
        .checked_mul(16)
        .filter(|&n| n <= rest.len())
        .ok_or_else(|| format!("{} runs do not fit in the request", header.runs))?;
    let runs = rest[..runs_len]
        .chunks_exact(16)
        .map(|c| {
            let (off, len) = c.split_at(8);
            let word = |b: &[u8]| <[u8; 8]>::try_from(b).unwrap_or_default();
            (i64::from_le_bytes(word(off)), u64::from_le_bytes(word(len)))
        })
        .collect();
    rest = &rest[runs_len..];
    let data_len = usize::try_from(header.data_len).unwrap_or(usize::MAX);
    let compare_len = if kind == Kind::CompareAndSwap {
        data_len
    } else {
        0
    };
    if data_len.checked_add(compare_len) != Some(rest.len()) {
        return Err(format!(
            "{} bytes of data announced, {} sent",
            data_len.saturating_add(compare_len),
            rest.len()
        ));
    }
    let (data, compare) = rest.split_at(data_len);
    Ok(Request {
        kind,
        header,
        runs,
        data,
        compare,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_decodes_to_what_was_encoded() {
        let h = Header {
            arg: 3,
            base: 7,
            at: -16,
            ..Header::default()
        };
        let bytes = encode(Kind::CompareAndSwap, h, &[(0, 4), (8, 4)], &[1; 8], &[2; 8]);
        let r = decode(&bytes).map_err(|e| e.to_string());
        let r = r.as_ref().map(|r| {
            (
                r.kind,
                r.header.arg,
                r.header.at,
                r.runs.clone(),
                r.data,
                r.compare,
            )
        });
        assert_eq!(
            r.ok(),
            Some((
                Kind::CompareAndSwap,
                3,
                -16,
                vec![(0, 4), (8, 4)],
                &[1u8; 8][..],
                &[2u8; 8][..]
            ))
        );
    }

    #[test]
    fn a_long_request_is_announced_with_its_length() {
        assert_eq!(follows(&follows_of(70_000)), Some(70_000));
        let put = encode(Kind::Put, Header::default(), &[(0, 4)], &[1; 4], &[]);
        assert_eq!(follows(&put), None);
        assert_eq!(follows(&put[..10]), None);
    }

    #[test]
    fn a_malformed_request_says_why() {
        let bytes = encode(Kind::Put, Header::default(), &[(0, 4)], &[1; 4], &[]);
        assert!(decode(&bytes[..10]).is_err_and(|e| e.contains("shorter than its header")));
        assert!(decode(&bytes[..bytes.len() - 1]).is_err_and(|e| e.contains("announced")));
        let mut bad = bytes.clone();
        bad[0] = 99;
        assert!(decode(&bad).is_err_and(|e| e.contains("unknown request kind 99")));
        let mut many = bytes;
        many[12] = 0xff;
        assert!(decode(&many).is_err_and(|e| e.contains("runs do not fit")));
    }
}
