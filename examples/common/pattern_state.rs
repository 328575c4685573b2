//! The checkpoint of the pattern programs (`lu-pattern`, `mg-pattern`):
//! four counters, then the rank's values, as little-endian words.

/// A checkpoint of `counters` and `values`.
pub fn encode(counters: [u64; 4], values: &[f64]) -> Vec<u8> {
    counters
        .into_iter()
        .chain(values.iter().map(|x| x.to_bits()))
        .flat_map(u64::to_le_bytes)
        .collect()
}

/// Stop the program, saying `why` on one line.
pub fn exit_with(why: &str) -> ! {
    eprintln!("{why}");
    std::process::exit(1)
}

/// The counters and `len` values of checkpoint `b`; why not (naming
/// `program`) if it holds another number of bytes.
pub fn decode(program: &str, b: &[u8], len: usize) -> Result<([u64; 4], Vec<f64>), String> {
    if b.len() != 8 * (4 + len) {
        return Err(format!(
            "{program}: checkpoint holds {} bytes, expected {} (different options?)",
            b.len(),
            8 * (4 + len)
        ));
    }
    let words: Vec<u64> = b
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
        .collect();
    let counters = [words[0], words[1], words[2], words[3]];
    Ok((
        counters,
        words[4..].iter().map(|&w| f64::from_bits(w)).collect(),
    ))
}
