//! How a restarted rank of a simulated job links to the running ranks: the
//! same handshake as over TCP (see [`crate::recovery`]) — the newer process
//! says how many of the peer's messages it has, the peer answers with its
//! incarnation and how many of the newer process's messages it has — but
//! carried by the simulator's queues ([`crate::sim`]) with a fresh pair of
//! pipes per link.

use std::rc::Rc;
use std::sync::{Arc, Mutex};

use super::{Connection, Engine, Rendezvous};
use crate::error::Result;
use crate::sim::{Hello, Pipe, Reply, SimNet};

impl Engine {
    fn sim_net(&self) -> Option<SimNet> {
        match &self.recovery.as_ref()?.rendezvous {
            Rendezvous::Sim(net) => Some(net.clone()),
            Rendezvous::Tcp(_) => None,
        }
    }

    /// Ask incarnation `inc` of `q` for a link and wait for its answer;
    /// `None` if it refused or was restarted meanwhile (its new process
    /// then links to us).
    pub(super) fn sim_connect_to(
        &mut self,
        q: usize,
        inc: u32,
    ) -> Option<super::tcp_rendezvous::Linked> {
        let me = self.core.rank;
        let net = self.sim_net()?;
        let hooks = self.sim.clone()?;
        let rc = self.recovery.as_ref()?;
        let to_peer = Arc::new(Pipe::default());
        let from_peer = Arc::new(Pipe::default());
        let reply = Arc::new(Mutex::new(None));
        net.post_hello(
            q,
            Hello {
                from: me,
                incarnation: rc.incarnation,
                received: self.core.recv_seq[q].clone(),
                to_acceptor: Arc::clone(&to_peer),
                from_acceptor: Arc::clone(&from_peer),
                reply: Arc::clone(&reply),
            },
        );
        loop {
            let answer = reply.lock().unwrap_or_else(|p| p.into_inner()).take();
            match answer {
                Some(Reply::Accepted {
                    incarnation,
                    received,
                    settled,
                }) if incarnation == inc => {
                    let link = net.link_over(me, q, to_peer, from_peer, hooks);
                    return Some(super::tcp_rendezvous::Linked {
                        conn: Connection::Sim(link),
                        received,
                        single_copy: false,
                        host: 0,
                        settled,
                    });
                }
                Some(Reply::Accepted { incarnation, .. }) => {
                    tracing::info!(
                        rank = me,
                        peer = q,
                        incarnation,
                        "answered by another process"
                    );
                    return None;
                }
                Some(Reply::Refused(why)) => {
                    tracing::info!(rank = me, peer = q, "refused: {why}");
                    return None;
                }
                None => {}
            }
            if rc.page.incarnation(q) != inc {
                return None;
            }
            hooks.idle();
        }
    }

    /// Answer the hellos of restarted peers (only while one is expected).
    pub(super) fn sim_accept_restarted(&mut self) -> Result<()> {
        let me = self.core.rank;
        let (Some(net), Some(hooks)) = (self.sim_net(), self.sim.clone()) else {
            return Ok(());
        };
        loop {
            if self.recovery.as_ref().is_none_or(|rc| rc.expected == 0) {
                return Ok(());
            }
            let Some(hello) = net.take_hello(me) else {
                return Ok(());
            };
            // The page may announce the restart only now.
            self.notice_restarts();
            let Some(rc) = self.recovery.as_ref() else {
                return Ok(());
            };
            let q = hello.from;
            let answer = if q >= self.size || q == me {
                Reply::Refused(format!("no rank {q} to link to"))
            } else if hello.incarnation != rc.page.incarnation(q)
                || rc.page.start_epoch(q) <= rc.my_start
            {
                Reply::Refused(format!(
                    "rank {q} incarnation {} is not a newer process",
                    hello.incarnation
                ))
            } else {
                Reply::Accepted {
                    incarnation: rc.incarnation,
                    received: self.core.recv_seq[q].clone(),
                    settled: self.settled_for(q),
                }
            };
            let accepted = matches!(answer, Reply::Accepted { .. });
            *hello.reply.lock().unwrap_or_else(|p| p.into_inner()) = Some(answer);
            if accepted {
                let link = net.link_over(
                    me,
                    q,
                    hello.from_acceptor,
                    hello.to_acceptor,
                    Rc::clone(&hooks),
                );
                self.install_link(q, Connection::Sim(link), hello.received, false, 0, false)?;
            }
        }
    }
}
