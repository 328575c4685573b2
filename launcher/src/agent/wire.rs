//! The control connection between the launcher and an agent: messages
//! are `u32` length + header line, `u32` length + payload (little-endian),
//! bounded in size; and the job setup each agent gets once.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;

use super::AgentError;

/// Largest header and payload of one control message.
const MAX_HEADER: usize = 4096;
const MAX_PAYLOAD: usize = 16 << 20;

/// A broken control connection (either side).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// Reading failed.
    #[error("read failed: {0}")]
    Read(#[source] std::io::Error),
    /// The stream ended inside a message.
    #[error("message cut short: {0}")]
    CutShort(#[source] std::io::Error),
    /// A header over the limit.
    #[error("header of {len} bytes (at most {max})")]
    LongHeader {
        /// As announced.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A payload over the limit.
    #[error("payload of {len} bytes (at most {max})")]
    LongPayload {
        /// As announced.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A header that is not text.
    #[error("header is not UTF-8")]
    HeaderNotUtf8,
    /// Writing failed.
    #[error("launcher connection: {0}")]
    Write(#[source] std::io::Error),
}

/// Write one message.
pub(crate) fn write_msg(w: &mut impl Write, header: &str, payload: &[u8]) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(8 + header.len() + payload.len());
    buf.extend_from_slice(&(header.len() as u32).to_le_bytes());
    buf.extend_from_slice(header.as_bytes());
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(payload);
    w.write_all(&buf)?;
    w.flush()
}

/// Read one message; `Ok(None)` at a clean end of stream.
pub(crate) fn read_msg(r: &mut impl Read) -> Result<Option<(String, Vec<u8>)>, WireError> {
    read_msg_within(r, MAX_HEADER, MAX_PAYLOAD)
}

/// [`read_msg`] with a header of at most `max_header` bytes and a payload
/// of at most `max_payload` (an agent's hello: small, before its token
/// is checked).
pub(crate) fn read_msg_within(
    r: &mut impl Read,
    max_header: usize,
    max_payload: usize,
) -> Result<Option<(String, Vec<u8>)>, WireError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(WireError::Read(e)),
    }
    let n = u32::from_le_bytes(len) as usize;
    if n > max_header {
        return Err(WireError::LongHeader {
            len: n,
            max: max_header,
        });
    }
    let mut header = vec![0u8; n];
    r.read_exact(&mut header).map_err(WireError::CutShort)?;
    let header = String::from_utf8(header).map_err(|_| WireError::HeaderNotUtf8)?;
    r.read_exact(&mut len).map_err(WireError::CutShort)?;
    let n = u32::from_le_bytes(len) as usize;
    if n > max_payload {
        return Err(WireError::LongPayload {
            len: n,
            max: max_payload,
        });
    }
    let mut payload = vec![0u8; n];
    r.read_exact(&mut payload).map_err(WireError::CutShort)?;
    Ok(Some((header, payload)))
}

/// What every rank of the job gets, sent to each agent once.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JobSetup {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub size: usize,
    /// Environment common to all ranks (job id, kv address, token, …).
    pub envs: Vec<(String, String)>,
    /// Crashed ranks are restarted (create a job page).
    pub restartable: bool,
    /// Number of ranks this host starts at first (for the idle policy).
    pub local_ranks: usize,
    /// Bind ranks to cores.
    pub bind: bool,
}

impl JobSetup {
    /// The setup as a message payload.
    pub(super) fn encode(&self) -> Vec<u8> {
        use std::os::unix::ffi::OsStrExt;
        let mut s = String::new();
        s += &format!("program {}\n", hex::encode(self.program.as_bytes()));
        for a in &self.args {
            s += &format!("arg {}\n", hex::encode(a.as_bytes()));
        }
        s += &format!("size {}\n", self.size);
        s += &format!("restartable {}\n", u8::from(self.restartable));
        s += &format!("local {}\n", self.local_ranks);
        s += &format!("bind {}\n", u8::from(self.bind));
        for (k, v) in &self.envs {
            s += &format!(
                "env {} {}\n",
                hex::encode(k.as_bytes()),
                hex::encode(v.as_bytes())
            );
        }
        s.into_bytes()
    }

    /// The setup a payload holds.
    pub(super) fn decode(b: &[u8]) -> Result<JobSetup, AgentError> {
        use std::os::unix::ffi::OsStringExt;
        let text = std::str::from_utf8(b).map_err(|_| AgentError::SetupNotUtf8)?;
        let mut j = JobSetup {
            program: OsString::new(),
            args: Vec::new(),
            size: 0,
            envs: Vec::new(),
            restartable: false,
            local_ranks: 0,
            bind: false,
        };
        for line in text.lines() {
            let mut p = line.split(' ');
            let bad = || AgentError::SetupLine(line.to_string());
            let bytes = |v: Option<&str>| v.and_then(|v| hex::decode(v).ok()).ok_or_else(bad);
            let num = |v: Option<&str>| v.and_then(|v| v.parse::<usize>().ok()).ok_or_else(bad);
            match p.next() {
                Some("program") => j.program = OsString::from_vec(bytes(p.next())?),
                Some("arg") => j.args.push(OsString::from_vec(bytes(p.next())?)),
                Some("size") => j.size = num(p.next())?,
                Some("restartable") => j.restartable = num(p.next())? != 0,
                Some("local") => j.local_ranks = num(p.next())?,
                Some("bind") => j.bind = num(p.next())? != 0,
                Some("env") => {
                    let k = String::from_utf8(bytes(p.next())?).map_err(|_| bad())?;
                    let v = String::from_utf8(bytes(p.next())?).map_err(|_| bad())?;
                    j.envs.push((k, v));
                }
                _ => return Err(bad()),
            }
        }
        if j.size == 0 {
            return Err(AgentError::SetupSize);
        }
        Ok(j)
    }
}

/// Lock `m`, even if a thread panicked holding it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Send one message on a shared connection.
pub(super) fn send(w: &Mutex<TcpStream>, header: &str, payload: &[u8]) -> Result<(), WireError> {
    write_msg(&mut *lock(w), header, payload).map_err(WireError::Write)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setups_round_trip_and_messages_are_bounded() {
        let s = JobSetup {
            program: "/bin/prog with space".into(),
            args: vec!["--x".into(), "a b\nc".into()],
            size: 4,
            envs: vec![("K".into(), "v=1,2".into())],
            restartable: true,
            local_ranks: 2,
            bind: false,
        };
        assert_eq!(JobSetup::decode(&s.encode()).unwrap(), s);
        assert!(JobSetup::decode(b"size 0\n").is_err());
        assert!(JobSetup::decode(b"what 1\n").is_err());
        let mut buf = Vec::new();
        write_msg(&mut buf, "OUT 1 0", b"line\n").unwrap();
        let (h, p) = read_msg(&mut buf.as_slice()).unwrap().unwrap();
        assert_eq!((h.as_str(), p.as_slice()), ("OUT 1 0", &b"line\n"[..]));
        let huge = (u32::MAX).to_le_bytes();
        assert!(
            read_msg(&mut huge.as_slice())
                .unwrap_err()
                .to_string()
                .contains("header")
        );
        assert_eq!(read_msg(&mut [].as_slice()).unwrap(), None);
    }
}
