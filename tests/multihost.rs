//! Multi-host jobs on one machine: every "host" is a Linux network
//! namespace joined to a bridge (created here, as root), its agent started
//! with `ip netns exec`. Pairs of ranks inside a namespace talk over
//! shared memory, pairs across namespaces over TCP between the
//! namespaces' addresses.
//!
//! Creating namespaces needs root and `ip`; where the sandbox forbids it,
//! each test prints why and is skipped (it does not pretend to pass).

mod common;

use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{example, serial, vpml};

/// A bridge and `n` namespaces `<prefix>0..` with addresses 10.X.Y.(10+i),
/// the bridge at 10.X.Y.1; `isolated` extra namespaces get no link at all.
struct Hosts {
    prefix: String,
    bridge: String,
    n: usize,
    isolated: usize,
    bridge_ip: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Hosts {
    fn create(n: usize, isolated: usize) -> Result<Hosts, String> {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let k = COUNT.fetch_add(1, Ordering::SeqCst);
        let id = (std::process::id() as usize * 7 + k) % 200;
        let prefix = format!("vp{id}n");
        let subnet = format!("10.{}.{}", 100 + k % 100, id);
        let h = Hosts {
            bridge: format!("vp{id}br"),
            prefix,
            n,
            isolated,
            bridge_ip: format!("{subnet}.1"),
        };
        h.setup(&subnet).inspect_err(|_| h.teardown())?;
        Ok(h)
    }

    fn setup(&self, subnet: &str) -> Result<(), String> {
        ip(&["link", "add", &self.bridge, "type", "bridge"])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/24", self.bridge_ip),
            "dev",
            &self.bridge,
        ])?;
        ip(&["link", "set", &self.bridge, "up"])?;
        for i in 0..self.n + self.isolated {
            let ns = self.name(i);
            ip(&["netns", "add", &ns])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            if i >= self.n {
                continue;
            }
            let (outer, inner) = (format!("{ns}o"), format!("{ns}i"));
            ip(&[
                "link", "add", &outer, "type", "veth", "peer", "name", &inner,
            ])?;
            ip(&["link", "set", &inner, "netns", &ns])?;
            ip(&["link", "set", &outer, "master", &self.bridge])?;
            ip(&["link", "set", &outer, "up"])?;
            let addr = format!("{subnet}.{}/24", 10 + i);
            ip(&["-n", &ns, "addr", "add", &addr, "dev", &inner])?;
            ip(&["-n", &ns, "link", "set", &inner, "up"])?;
        }
        Ok(())
    }

    fn name(&self, i: usize) -> String {
        format!("{}{i}", self.prefix)
    }

    fn teardown(&self) {
        for i in 0..self.n + self.isolated {
            let _ = ip(&["netns", "del", &self.name(i)]);
            let _ = ip(&["link", "del", &format!("{}o", self.name(i))]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }

    /// `vpml run` arguments placing `slots` ranks on each namespace host.
    fn launch(&self, hosts: &[(usize, usize)], spares: &[usize]) -> Vec<String> {
        let list: Vec<String> = hosts
            .iter()
            .map(|&(i, slots)| format!("{}:{slots}", self.name(i)))
            .collect();
        let mut a = vec![
            "--bind".to_string(),
            self.bridge_ip.clone(),
            "--via".into(),
            "netns".into(),
            "--hosts".into(),
            list.join(","),
            "--agent-timeout".into(),
            "20".into(),
        ];
        if !spares.is_empty() {
            let s: Vec<String> = spares.iter().map(|&i| self.name(i)).collect();
            a.push("--spare-hosts".into());
            a.push(s.join(","));
        }
        a
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// The hosts, or `None` (with the reason printed) where namespaces cannot
/// be made here.
fn hosts(n: usize, isolated: usize) -> Option<Hosts> {
    match Hosts::create(n, isolated) {
        Ok(h) => Some(h),
        Err(why) => {
            eprintln!("SKIPPED: cannot create network namespaces here ({why})");
            None
        }
    }
}

fn run(n: usize, launcher: &[String], program: &str, args: &[&str]) -> Output {
    Command::new(vpml())
        .args(["run", "-n", &n.to_string(), "--timeout", "240"])
        .args(launcher)
        .arg(example(program))
        .args(args)
        .output()
        .expect("run vpml")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn point_to_point_across_three_namespace_hosts() {
    let _g = serial();
    let Some(h) = hosts(3, 0) else { return };
    // The ranks fill the three hosts in order: with 2 or 3 ranks every
    // pair crosses hosts (TCP); with more, pairs within a host use shared
    // memory and the others TCP between the namespaces.
    for (n, name) in [
        (2usize, "order"),
        (4, "any"),
        (3, "probe"),
        (4, "some"),
        (2, "truncate"),
        (2, "persistent"),
        (4, "ssend"),
        (2, "cancel"),
        (2, "large"),
        (2, "self"),
        (5, "sendrecv"),
        (16, "alltoall"),
    ] {
        let slots = n.div_ceil(3);
        let launcher = h.launch(&[(0, slots), (1, slots), (2, slots)], &[]);
        let out = run(n, &launcher, "scenarios", &[name]);
        let (stdout, stderr) = text(&out);
        assert!(
            out.status.success() && stdout.lines().any(|l| l == format!("ok {name}")),
            "scenario {name} on {n} ranks across namespaces failed ({}):\n{stdout}\n{stderr}",
            out.status
        );
    }
    let launcher = h.launch(&[(0, 2), (1, 2), (2, 2)], &[]);
    let out = run(6, &launcher, "collective-checks", &["all"]);
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "collectives across namespaces:\n{stdout}\n{stderr}"
    );
}

#[test]
fn a_killed_agent_stops_the_job_naming_its_host() {
    let _g = serial();
    let Some(h) = hosts(2, 0) else { return };
    let mut launcher = h.launch(&[(0, 2), (1, 2)], &[]);
    launcher.extend(["--inject-failure".into(), "agent:1@0.3".into()]);
    let out = run(4, &launcher, "heat3d", &["--steps", "400"]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("host {} was lost", h.name(1))),
        "the message names the host:\n{stderr}"
    );
}

#[test]
fn an_unreachable_host_is_named_after_the_agent_timeout() {
    let _g = serial();
    // Host 1 has no network link: its agent can never reach the launcher.
    let Some(h) = hosts(1, 1) else { return };
    let mut launcher = h.launch(&[(0, 1), (1, 1)], &[]);
    let n = launcher.len();
    launcher[n - 1] = "2".into(); // --agent-timeout 2
    let out = run(2, &launcher, "heat3d", &[]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("host(s) {} unreachable", h.name(1))),
        "{stderr}"
    );
}

#[test]
fn ranks_of_a_lost_host_restart_on_a_spare_and_switch_to_tcp() {
    let _g = serial();
    let Some(h) = hosts(3, 0) else { return };
    let heat = [
        "--points",
        "8x8x32",
        "--steps",
        "60",
        "--output-interval",
        "10",
        "--checkpoint-every",
        "5",
    ];
    let mut launcher = h.launch(&[(0, 2), (1, 2)], &[2]);
    launcher.extend(["--protocol".into(), "pessimist".into()]);
    let t0 = std::time::Instant::now();
    let reference = run(4, &launcher, "heat3d", &heat);
    // Kill at a third of the failure-free run: it lands even if the next
    // run is faster.
    let at = format!("{:.3}", t0.elapsed().as_secs_f64() / 3.0);
    let (want, stderr) = text(&reference);
    assert!(reference.status.success(), "{stderr}");
    // Ranks 2 and 3 share host 1 over shared memory; after their agent
    // dies they run on the spare, host 2, and talk to ranks 0 and 1 (and,
    // on the spare, to each other) from there.
    let mut killed = launcher.clone();
    killed.extend(["--inject-failure".into(), format!("agent:1@{at}")]);
    let out = run(4, &killed, "heat3d", &heat);
    let (got, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("on host {}", h.name(2))),
        "ranks restarted on the spare:\n{stderr}"
    );
    assert_eq!(got, want, "{stderr}");
    // The host is lost with its files (checkpoints, sender logs): its ranks
    // restart on the spare from the copies their checkpoints left on the
    // event loggers, and peers still get the messages those ranks sent
    // before their checkpoints.
    let mut gone = launcher.clone();
    gone.extend([
        "--inject-failure".into(),
        format!("agent:1@{at}:lose-files"),
    ]);
    let out = run(4, &gone, "heat3d", &heat);
    let (got, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    for rank in [2, 3] {
        assert!(
            stderr.contains(&format!("rank-{rank} with host {}", h.name(1))),
            "rank {rank}'s files were removed:\n{stderr}"
        );
    }
    assert_eq!(
        stderr
            .matches("(its host was lost): restarting from the copy of checkpoint")
            .count(),
        2,
        "both ranks restarted from their copies:\n{stderr}"
    );
    assert_eq!(got, want, "{stderr}");
    // A single rank killed on a namespace host restarts in place.
    let mut one = launcher.clone();
    one.extend(["--inject-failure".into(), format!("1@{at}")]);
    let out = run(4, &one, "heat3d", &heat);
    let (got, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(got, want, "{stderr}");
}

#[test]
fn coordinated_restarts_every_rank_with_a_lost_hosts_ranks_on_spares_from_the_copies() {
    let _g = serial();
    let Some(h) = hosts(4, 0) else { return };
    // heat3d takes no checkpoint of its own (its interval never comes):
    // the launcher asks every 0.2 s, through every host's agent, and
    // learns from them when each global checkpoint is complete.
    let heat = [
        "--points",
        "8x8x32",
        "--steps",
        "200",
        "--output-interval",
        "10",
        "--checkpoint-interval",
        "1000000",
    ];
    let mut launcher = h.launch(&[(0, 2), (1, 2)], &[2, 3]);
    launcher.extend([
        "--protocol".into(),
        "coordinated".into(),
        "--checkpoint-interval".into(),
        "0.2".into(),
    ]);
    let t0 = std::time::Instant::now();
    let reference = run(4, &launcher, "heat3d", &heat);
    // (Late in the run: by then several global checkpoints are complete.)
    let at = format!("{:.3}", t0.elapsed().as_secs_f64() * 0.7);
    let (want, stderr) = text(&reference);
    assert!(reference.status.success(), "{stderr}");
    assert!(
        stderr
            .matches("is complete, ")
            .zip(stderr.matches("after --checkpoint-interval asked for it"))
            .count()
            >= 2,
        "global checkpoints asked for across hosts complete:\n{stderr}"
    );
    // Host 1 is lost with its files (ranks 2 and 3's parts of every
    // global checkpoint): all four ranks restart from the newest global
    // checkpoint, 2 and 3 on the spares (one each: the least loaded) from
    // their parts' copies on the event loggers. The pair 2–3 goes from
    // shared memory to TCP; 0–1 stays on shared memory.
    let mut gone = launcher.clone();
    gone.extend([
        "--inject-failure".into(),
        format!("agent:1@{at}:lose-files"),
    ]);
    let out = run(4, &gone, "heat3d", &heat);
    let (got, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("restarted all 4 ranks from global checkpoint ")
            && stderr.contains(&format!(
                "rank 2 on host {}, rank 3 on host {}",
                h.name(2),
                h.name(3)
            )),
        "every rank restarted, 2 and 3 on the spares:\n{stderr}"
    );
    assert_eq!(
        stderr.matches("cannot be read on this host").count(),
        2,
        "ranks 2 and 3 restarted from their copies:\n{stderr}"
    );
    assert_eq!(got, want, "{stderr}");
}
