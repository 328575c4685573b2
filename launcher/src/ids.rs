//! Random job ids and tokens (shown in hexadecimal, `hex::encode`).

use crate::Error;

/// `N` random bytes from the operating system.
pub(crate) fn random_bytes<const N: usize>() -> Result<[u8; N], Error> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(Error::NoRandomness)?;
    Ok(b)
}
