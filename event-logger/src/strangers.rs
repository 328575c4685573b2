//! A bounded pool of connections that have not shown the job's token yet,
//! shared by vpml's servers (the event logger here; the launcher's
//! key/value service and its port for agents).
//!
//! A legitimate peer authenticates as soon as it connects, so what stays
//! in the pool is idle or slow. When a connection arrives, those in the
//! pool longer than the deadline are closed, and if the pool is still
//! full, the oldest *silent* one (nothing unread in its socket) is closed
//! to make room: a peer whose hello is waiting to be read is never the one
//! closed. Closing a connection shuts its socket down, which ends the read
//! its thread blocks in; the thread then [`Strangers::forget`]s it.

use std::collections::BTreeMap;
use std::net::{Shutdown, TcpStream};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// See the module documentation.
#[derive(Debug)]
pub struct Strangers {
    max: usize,
    deadline: Duration,
    /// By connection id (ids grow with time: the first is the oldest):
    /// when it arrived, and a handle to close it.
    waiting: Mutex<BTreeMap<u64, (Instant, TcpStream)>>,
}

impl Strangers {
    /// A pool of at most `max` silent connections, each closed once it has
    /// waited `deadline` without authenticating (when another arrives).
    pub fn new(max: usize, deadline: Duration) -> Strangers {
        Strangers {
            max: max.max(1),
            deadline,
            waiting: Mutex::new(BTreeMap::new()),
        }
    }

    /// Count connection `id` (`closer`: a clone of its socket), closing
    /// those past the deadline and, if the pool is full, the oldest silent
    /// one. Returns how many were closed.
    pub fn admit(&self, id: u64, closer: TcpStream) -> usize {
        let mut waiting = self.lock();
        let now = Instant::now();
        let expired: Vec<u64> = waiting
            .iter()
            .filter(|(_, (since, _))| now.duration_since(*since) >= self.deadline)
            .map(|(&id, _)| id)
            .collect();
        let mut closed = 0;
        for id in expired {
            if let Some((_, s)) = waiting.remove(&id) {
                close(&s, "no hello within the deadline");
                closed += 1;
            }
        }
        if waiting.len() >= self.max {
            let silent = waiting
                .iter()
                .find(|(_, (_, s))| is_silent(s))
                .map(|(&id, _)| id);
            if let Some((_, s)) = silent.and_then(|id| waiting.remove(&id)) {
                close(&s, "too many connections without hello");
                closed += 1;
            }
            // None silent: every one has its hello waiting to be read, and
            // is gone as soon as it is; the pool is let grow meanwhile.
        }
        waiting.insert(id, (now, closer));
        closed
    }

    /// Close the oldest connection of the pool, if any (to free a slot
    /// of a server that is full): whether there was one.
    pub fn close_oldest(&self) -> bool {
        let Some((_, (_, s))) = self.lock().pop_first() else {
            return false;
        };
        close(&s, "the server is full");
        true
    }

    /// Connection `id` authenticated, or ended: no longer counted.
    pub fn forget(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// How many connections are waiting.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// No connection is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, (Instant, TcpStream)>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Nothing unread in `s` (looked at without taking it, and without
/// changing the socket's blocking mode, which its thread relies on).
fn is_silent(s: &TcpStream) -> bool {
    use rustix::net::{RecvFlags, recv};
    let mut byte = [0u8; 1];
    match recv(s, &mut byte, RecvFlags::PEEK | RecvFlags::DONTWAIT) {
        Ok((n, _)) => n == 0, // (0: the peer closed it.)
        Err(_) => true,
    }
}

fn close(s: &TcpStream, why: &str) {
    let peer = s
        .peer_addr()
        .map_or_else(|_| "?".to_owned(), |a| a.to_string());
    tracing::warn!(%peer, "closing a connection that has not authenticated: {why}");
    let _ = s.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;

    use super::*;

    /// `n` connections, each as (client end, server end).
    fn connections(n: usize) -> Vec<(TcpStream, TcpStream)> {
        let l = TcpListener::bind("127.0.0.1:0").expect("listen");
        let addr = l.local_addr().expect("address");
        (0..n)
            .map(|_| {
                let c = TcpStream::connect(addr).expect("connect");
                let (s, _) = l.accept().expect("accept");
                (c, s)
            })
            .collect()
    }

    fn closed(client: &mut TcpStream) -> bool {
        client
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        matches!(client.read(&mut [0u8; 1]), Ok(0) | Err(_))
    }

    #[test]
    fn a_full_pool_closes_the_oldest_silent_connection() {
        let pool = Strangers::new(2, Duration::from_secs(600));
        let mut c = connections(3);
        // The oldest has its hello waiting: the next oldest goes instead.
        c[0].0.write_all(b"HELLO").expect("send");
        assert_eq!(pool.admit(0, c[0].1.try_clone().expect("clone")), 0);
        assert_eq!(pool.admit(1, c[1].1.try_clone().expect("clone")), 0);
        assert_eq!(pool.admit(2, c[2].1.try_clone().expect("clone")), 1);
        assert!(closed(&mut c[1].0));
        assert_eq!(pool.len(), 2);
        pool.forget(0);
        pool.forget(2);
        assert!(pool.is_empty());
    }

    #[test]
    fn connections_past_the_deadline_are_closed_when_another_comes() {
        let pool = Strangers::new(64, Duration::ZERO);
        let mut c = connections(2);
        pool.admit(0, c[0].1.try_clone().expect("clone"));
        assert_eq!(pool.admit(1, c[1].1.try_clone().expect("clone")), 1);
        assert!(closed(&mut c[0].0));
        assert!(pool.close_oldest());
        assert!(closed(&mut c[1].0));
        assert!(!pool.close_oldest());
    }
}
