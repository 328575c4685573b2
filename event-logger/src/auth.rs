//! Jobs and their tokens: which `Hello`s a logger accepts.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::wire::MAX_TOKEN_LEN;

/// Shortest accepted token.
pub const MIN_TOKEN_LEN: usize = 16;

/// The jobs a logger serves and their tokens, read from a token file.
///
/// Token file format: UTF-8 text, one `JOB TOKEN` pair per line separated by
/// white space; empty lines and lines starting with `#` are ignored. `JOB`
/// is a job name ([`valid_job_name`]) or `*` for "any job presenting this
/// token". A token is 16–256 printable ASCII characters without spaces.
#[derive(Clone)]
pub struct Tokens {
    entries: Vec<(Option<String>, String)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the tokens themselves.
        let jobs: Vec<&str> = self
            .entries
            .iter()
            .map(|(j, _)| j.as_deref().unwrap_or("*"))
            .collect();
        f.debug_struct("Tokens").field("jobs", &jobs).finish()
    }
}

/// A token file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The file could not be read or written.
    #[error("token file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line is not a valid `JOB TOKEN` pair.
    #[error("token file {path} line {line}: {why}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// The file names no job.
    #[error("token file {0} names no job")]
    Empty(PathBuf),
}

/// Whether `name` may name a job: 1–64 bytes of `[A-Za-z0-9_.-]`, not
/// starting with `.` (job names become directory names).
pub fn valid_job_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= crate::wire::MAX_JOB_LEN
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

fn valid_token(token: &str) -> Result<(), String> {
    if token.len() < MIN_TOKEN_LEN || token.len() > MAX_TOKEN_LEN {
        return Err(format!(
            "token must be {MIN_TOKEN_LEN}–{MAX_TOKEN_LEN} characters, not {}",
            token.len()
        ));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("token must be printable ASCII without spaces".into());
    }
    Ok(())
}

impl Tokens {
    /// Accepts `job` with `token` (for embedding; `job` `None` = any job).
    pub fn single(job: Option<&str>, token: &str) -> Result<Self, String> {
        if let Some(j) = job
            && !valid_job_name(j)
        {
            return Err(format!("invalid job name {j:?}"));
        }
        valid_token(token)?;
        Ok(Tokens {
            entries: vec![(job.map(str::to_owned), token.to_owned())],
        })
    }

    /// Parses token-file text; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, TokenError> {
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let syntax = |why: String| TokenError::Syntax {
                path: path.to_owned(),
                line: i + 1,
                why,
            };
            let mut words = line.split_whitespace();
            let (Some(job), Some(token), None) = (words.next(), words.next(), words.next()) else {
                return Err(syntax("expected `JOB TOKEN`".into()));
            };
            let job = if job == "*" {
                None
            } else if valid_job_name(job) {
                Some(job.to_owned())
            } else {
                return Err(syntax(format!("invalid job name {job:?}")));
            };
            valid_token(token).map_err(syntax)?;
            entries.push((job, token.to_owned()));
        }
        if entries.is_empty() {
            return Err(TokenError::Empty(path.to_owned()));
        }
        Ok(Tokens { entries })
    }

    /// Reads a token file.
    pub fn load(path: &Path) -> Result<Self, TokenError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Reads `path`, or creates it (mode 0600) with a fresh random token for
    /// any job (`* TOKEN`) when it does not exist.
    pub fn load_or_create(path: &Path) -> Result<Self, TokenError> {
        let io = |source| TokenError::Io {
            path: path.to_owned(),
            source,
        };
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(mut f) => {
                let token = random_token().map_err(io)?;
                writeln!(
                    f,
                    "# vpml event-logger tokens: JOB TOKEN per line (* = any job)\n* {token}"
                )
                .and_then(|()| f.sync_all())
                .map_err(io)?;
                tracing::info!(path = %path.display(), "created a token file with a new random token");
                Self::load(path)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Self::load(path),
            Err(e) => Err(io(e)),
        }
    }

    /// The token of the first `* TOKEN` line (any job), if there is one:
    /// what a client whose job names are not known in advance presents.
    pub fn any_job_token(&self) -> Option<&str> {
        self.entries
            .iter()
            .find(|(job, _)| job.is_none())
            .map(|(_, t)| t.as_str())
    }

    /// Checks a `Hello`'s job and token; `Err` says why (for the log only).
    pub fn check(&self, job: &str, token: &str) -> Result<(), &'static str> {
        if !valid_job_name(job) {
            return Err("invalid job name");
        }
        let mut known = false;
        for (j, t) in &self.entries {
            if j.as_deref().is_none_or(|j| j == job) {
                known = true;
                if constant_time_eq(t.as_bytes(), token.as_bytes()) {
                    return Ok(());
                }
            }
        }
        Err(if known { "wrong token" } else { "unknown job" })
    }
}

/// 32 random bytes as 64 lower-case hex characters.
pub fn random_token() -> std::io::Result<String> {
    let mut raw = [0u8; 32];
    getrandom::fill(&mut raw).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(hex::encode(raw))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_rules() {
        let p = Path::new("t");
        let t = Tokens::parse("# c\n\njob1 0123456789abcdef\n* fedcba9876543210zz\n", p).unwrap();
        assert!(t.check("job1", "0123456789abcdef").is_ok());
        assert!(t.check("other", "fedcba9876543210zz").is_ok());
        assert_eq!(t.check("job1", "0123456789abcdeX"), Err("wrong token"));
        assert_eq!(t.check("../x", "0123456789abcdef"), Err("invalid job name"));
        assert_eq!(t.any_job_token(), Some("fedcba9876543210zz"));
        let only = Tokens::parse("job1 0123456789abcdef", p).unwrap();
        assert_eq!(only.check("job2", "0123456789abcdef"), Err("unknown job"));
        assert_eq!(only.any_job_token(), None);
        assert!(
            Tokens::parse("job1 short", p)
                .unwrap_err()
                .to_string()
                .contains("line 1")
        );
        assert!(Tokens::parse("../x 0123456789abcdef", p).is_err());
        assert!(Tokens::parse("a b c", p).is_err());
        assert!(matches!(
            Tokens::parse("# nothing\n", p),
            Err(TokenError::Empty(_))
        ));
        assert!(!format!("{t:?}").contains("0123"));
    }
}
