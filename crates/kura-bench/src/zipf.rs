//! The key trace: `ops` draws from a Zipf distribution over a universe of `universe` keys
//! (the key of rank r has probability proportional to 1 / (r + 1)^s), made once so that every
//! cache replays exactly the same requests.

use kura::split_mix::{mix, SplitMix64};

/// The probability of each rank, most popular first; sums to 1.
pub fn probabilities(universe: u64, s: f64) -> Vec<f64> {
    let weights: Vec<f64> = (1..=universe).map(|rank| (rank as f64).powf(-s)).collect();
    let total: f64 = weights.iter().sum();
    weights.into_iter().map(|w| w / total).collect()
}

/// `ops` keys drawn by inverting the cumulative distribution with a binary search.
pub fn trace(probabilities: &[f64], ops: u64, seed: u64) -> Vec<u64> {
    let mut cumulative = Vec::with_capacity(probabilities.len());
    let mut sum = 0.0;
    for p in probabilities {
        sum += p;
        cumulative.push(sum);
    }
    let last = probabilities.len().saturating_sub(1);
    let mut rng = SplitMix64::new(seed);
    (0..ops)
        .map(|_| {
            let u = rng.unit() * sum;
            let rank = cumulative.partition_point(|&c| c <= u).min(last);
            mix(rank as u64) // a bijection: distinct ranks stay distinct keys, hot keys land far apart
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![expect(clippy::indexing_slicing, reason = "a test fails loudly on the first broken expectation")]
    use super::*;

    #[test]
    fn popular_ranks_come_up_as_often_as_their_probability() {
        let p = probabilities(1000, 1.0);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        let keys = trace(&p, 200_000, 7);
        let top = keys.iter().filter(|&&k| k == mix(0)).count() as f64 / keys.len() as f64;
        assert!((top - p[0]).abs() < 0.01, "rank 0 drawn {top}, expected {}", p[0]);
        assert!(keys.iter().all(|k| (0..1000).map(mix).any(|s| s == *k)));
    }
}
