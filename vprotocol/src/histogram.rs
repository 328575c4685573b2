//! The fixed-size latency histogram behind `--stats`' logger-wait quantiles.

/// A fixed-size latency histogram: 8 buckets per power of two (values
/// within 12.5 % of the truth), so a long job records every wait in
/// constant memory.
#[derive(Debug, Clone)]
pub(crate) struct Histogram {
    counts: Box<[u64; 64 * 8]>,
    total: u64,
    /// Sum of the values, for the exact mean.
    sum: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; 64 * 8]),
            total: 0,
            sum: 0,
        }
    }
}

impl Histogram {
    fn bucket(v: u64) -> usize {
        if v < 8 {
            return v as usize;
        }
        let major = 63 - v.leading_zeros() as usize; // ≥ 3
        let minor = ((v >> (major - 3)) & 7) as usize;
        (major - 2) * 8 + minor
    }

    /// Smallest value of bucket `b`.
    fn value(b: usize) -> u64 {
        if b < 8 {
            return b as u64;
        }
        let (major, minor) = (b / 8 + 2, (b % 8) as u64);
        (8 + minor) << (major - 3)
    }

    pub(crate) fn record(&mut self, v: u64) {
        self.counts[Self::bucket(v)] += 1;
        self.total += 1;
        self.sum = self.sum.saturating_add(v);
    }

    /// The exact mean (0 when empty).
    pub(crate) fn mean(&self) -> u64 {
        self.sum.checked_div(self.total).unwrap_or(0)
    }

    /// The value at quantile `p` (0 when empty).
    pub(crate) fn quantile(&self, p: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((self.total - 1) as f64 * p).round() as u64;
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen > rank {
                return Self::value(b);
            }
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::Histogram;

    #[test]
    fn histogram_quantiles_are_within_an_eighth() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile(0.5), 0);
        assert_eq!(h.mean(), 0);
        for v in 1..=10_000u64 {
            h.record(v * 100);
        }
        assert_eq!(h.mean(), 500_050);
        for (p, exact) in [(0.5, 500_000.0), (0.99, 990_000.0)] {
            let got = h.quantile(p) as f64;
            assert!(
                got <= exact && got >= exact * 0.875,
                "p{p}: {got} vs {exact}"
            );
        }
        let mut small = Histogram::default();
        small.record(3);
        assert_eq!(small.quantile(0.99), 3);
        let mut huge = Histogram::default();
        huge.record(u64::MAX);
        assert!(huge.quantile(0.5) > u64::MAX / 2);
    }
}
