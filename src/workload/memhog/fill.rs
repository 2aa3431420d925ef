//! What the hog writes into a page: random words, made as compressible as asked by zeroing
//! the tail of every 512-byte block (upstream's rule, so zswap or a compressing device sees
//! the same data).

use rand::RngCore;
use std::sync::atomic::{AtomicU64, Ordering};

/// Words per 512-byte block.
const BLOCK_WORDS: usize = 64;

/// Random words at the front of each block for compressibility `comp` (0: all random, 1: all
/// zero): `floor(64 × (1 − comp))`.
pub fn random_words(comp: f64) -> usize {
    ((BLOCK_WORDS as f64) * (1.0 - comp.clamp(0.0, 1.0))).floor() as usize
}

/// Fills `page` (a page of words): per block, the first `random` words from `rng`, the rest 0.
pub fn fill_page(page: &[AtomicU64], random: usize, rng: &mut impl RngCore) {
    for block in page.chunks(BLOCK_WORDS) {
        for (i, w) in block.iter().enumerate() {
            let v = if i < random { rng.next_u64() } else { 0 };
            w.store(v, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn compressibility_zeroes_the_tail_of_every_block() {
        assert_eq!(random_words(0.0), 64);
        assert_eq!(random_words(0.5), 32);
        assert_eq!(random_words(0.99), 0);
        assert_eq!(random_words(1.0), 0);
        assert_eq!(random_words(-1.0), 64);

        let page: Vec<AtomicU64> = (0..512).map(|_| AtomicU64::new(7)).collect();
        let mut rng = SmallRng::seed_from_u64(1);
        fill_page(&page, random_words(0.75), &mut rng);
        for (i, w) in page.iter().enumerate() {
            let v = w.load(Ordering::Relaxed);
            if i % 64 < 16 {
                assert_ne!(v, 0, "word {} should be random", i);
            } else {
                assert_eq!(v, 0, "word {} should be zero", i);
            }
        }
        let distinct: std::collections::BTreeSet<u64> =
            page.iter().map(|w| w.load(Ordering::Relaxed)).collect();
        assert!(distinct.len() > 100, "random words differ");
    }
}
