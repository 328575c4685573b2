//! The hosts of a multi-host job (`--hosts`, host files) and how their
//! agents start.

use std::process::Command;

/// How the launcher starts an agent on a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartMethod {
    /// A child process on this machine.
    Fork,
    /// A child process inside the network namespace named like the host.
    Netns,
    /// Over ssh.
    Ssh,
}

/// One host of the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// Host name (for ssh/netns) — also how messages name it.
    pub name: String,
    /// Ranks it takes at start (0 for a spare).
    pub slots: usize,
    /// How its agent starts.
    pub via: StartMethod,
}

/// What is wrong with `--hosts`, `--spare-hosts` or a host file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HostsError {
    /// `--via` (or `via=`) names no start method.
    #[error("unknown start method {0:?} (fork, netns, ssh)")]
    Method(String),
    /// `--hosts`: `name:slots` with a bad slot count.
    #[error("--hosts: bad slot count in {0:?}")]
    SlotCount(String),
    /// `--hosts`: an empty name or one with spaces.
    #[error("--hosts: bad host name in {0:?}")]
    HostName(String),
    /// A host file's `slots=` is not a number.
    #[error("host file line {line}: bad slots {value:?}")]
    FileSlots {
        /// Line number, from 1.
        line: usize,
        /// The value.
        value: String,
    },
    /// A host file field this vpml does not know.
    #[error("host file line {line}: unknown field {field:?}")]
    FileField {
        /// Line number, from 1.
        line: usize,
        /// The field.
        field: String,
    },
    /// A host file's `via=` names no start method.
    #[error("host file line {line}: unknown start method {method:?} (fork, netns, ssh)")]
    FileMethod {
        /// Line number, from 1.
        line: usize,
        /// The method.
        method: String,
    },
    /// A host file without hosts.
    #[error("the host file lists no host")]
    NoHost,
}

fn method(name: &str, via: Option<&str>) -> Result<StartMethod, HostsError> {
    Ok(match via {
        Some("fork") => StartMethod::Fork,
        Some("netns") => StartMethod::Netns,
        Some("ssh") => StartMethod::Ssh,
        Some(other) => return Err(HostsError::Method(other.to_string())),
        None if name == "localhost" => StartMethod::Fork,
        None => StartMethod::Ssh,
    })
}

/// Parse `--hosts h1:2,h2:2` (`via` applies to every host; default: fork
/// for `localhost`, ssh otherwise).
pub fn parse_hosts(list: &str, via: Option<&str>) -> Result<Vec<HostSpec>, HostsError> {
    list.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|item| {
            let item = item.trim();
            let (name, slots) = match item.rsplit_once(':') {
                Some((n, s)) => (
                    n,
                    s.parse::<usize>()
                        .map_err(|_| HostsError::SlotCount(item.to_string()))?,
                ),
                None => (item, 1),
            };
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(HostsError::HostName(item.to_string()));
            }
            Ok(HostSpec {
                name: name.to_string(),
                slots,
                via: method(name, via)?,
            })
        })
        .collect()
}

/// Parse a host file: lines `host [slots=N] [via=fork|netns|ssh]`, `#`
/// comments, as Open MPI's (without its other keys).
pub fn parse_hostfile(text: &str, via: Option<&str>) -> Result<Vec<HostSpec>, HostsError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let name = words.next().unwrap_or_default().to_string();
        let mut slots = 1;
        let mut this_via = via.map(str::to_string);
        for w in words {
            match w.split_once('=') {
                Some(("slots", n)) => {
                    slots = n.parse().map_err(|_| HostsError::FileSlots {
                        line: i + 1,
                        value: n.to_string(),
                    })?
                }
                Some(("via", m)) => this_via = Some(m.to_string()),
                _ => {
                    return Err(HostsError::FileField {
                        line: i + 1,
                        field: w.to_string(),
                    });
                }
            }
        }
        let via = method(&name, this_via.as_deref()).map_err(|e| match e {
            HostsError::Method(method) => HostsError::FileMethod {
                line: i + 1,
                method,
            },
            other => other,
        })?;
        out.push(HostSpec { name, slots, via });
    }
    if out.is_empty() {
        return Err(HostsError::NoHost);
    }
    Ok(out)
}

/// The command that starts the agent of host `index`.
pub(crate) fn agent_command(
    h: &HostSpec,
    index: usize,
    control: &str,
    vpml: &std::path::Path,
) -> Command {
    let agent_args = [
        "agent".to_string(),
        "--connect".into(),
        control.to_string(),
        "--host".into(),
        index.to_string(),
    ];
    match h.via {
        StartMethod::Fork => {
            let mut c = Command::new(vpml);
            c.args(&agent_args);
            c
        }
        StartMethod::Netns => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &h.name])
                .arg(vpml)
                .args(&agent_args);
            c
        }
        StartMethod::Ssh => {
            let mut c = Command::new("ssh");
            c.args(["-o", "BatchMode=yes", "-o", "ConnectTimeout=10", &h.name])
                .arg(vpml)
                .args(&agent_args);
            c
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_lists_and_files_are_parsed_with_clear_errors() {
        let h = parse_hosts("a:2,localhost:1,b", Some("netns")).unwrap();
        assert_eq!(h.len(), 3);
        assert_eq!((h[0].slots, h[0].via), (2, StartMethod::Netns));
        assert_eq!(h[2].slots, 1);
        let d = parse_hosts("localhost:2,far:2", None).unwrap();
        assert_eq!((d[0].via, d[1].via), (StartMethod::Fork, StartMethod::Ssh));
        assert!(
            parse_hosts("a:x", None)
                .unwrap_err()
                .to_string()
                .contains("slot count")
        );
        let f =
            parse_hostfile("# hosts\nn1 slots=2 via=netns\n\nn2 slots=3 # two\n", None).unwrap();
        assert_eq!(
            f[1],
            HostSpec {
                name: "n2".into(),
                slots: 3,
                via: StartMethod::Ssh
            }
        );
        assert!(
            parse_hostfile("n1 cpus=2\n", None)
                .unwrap_err()
                .to_string()
                .contains("line 1")
        );
        assert!(parse_hostfile("\n# none\n", None).is_err());
    }

    #[test]
    fn agents_start_through_fork_netns_or_ssh() {
        let vpml = std::path::Path::new("/opt/vpml");
        let h = |via| HostSpec {
            name: "n1".into(),
            slots: 1,
            via,
        };
        let show = |c: Command| {
            std::iter::once(c.get_program().to_string_lossy().into_owned())
                .chain(c.get_args().map(|a| a.to_string_lossy().into_owned()))
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            show(agent_command(&h(StartMethod::Netns), 1, "10.0.0.1:5", vpml)),
            "ip netns exec n1 /opt/vpml agent --connect 10.0.0.1:5 --host 1"
        );
        assert!(
            show(agent_command(&h(StartMethod::Ssh), 0, "a:1", vpml))
                .starts_with("ssh -o BatchMode=yes -o ConnectTimeout=10 n1 /opt/vpml agent")
        );
        assert_eq!(
            show(agent_command(&h(StartMethod::Fork), 2, "a:1", vpml)),
            "/opt/vpml agent --connect a:1 --host 2"
        );
    }
}
