//! The plain-LRU reference for the hit-ratio table: an exact simulation of one global LRU
//! list replaying the trace, and Che's approximation computed from the Zipf probabilities
//! alone (the "theoretical" figure for independent requests).

use std::collections::HashMap;

/// No neighbour, in the intrusive list below.
const NIL: usize = usize::MAX;

struct Node {
    key: u64,
    prev: usize,
    next: usize,
}

/// A least-recently-used set of keys: a slab of nodes in a doubly linked list (head = most
/// recent) and a map from key to node.
pub struct LruSet {
    capacity: usize,
    nodes: Vec<Node>,
    index: HashMap<u64, usize>,
    head: usize,
    tail: usize,
}

impl LruSet {
    pub fn new(capacity: usize) -> LruSet {
        LruSet {
            capacity: capacity.max(1),
            nodes: Vec::with_capacity(capacity),
            index: HashMap::with_capacity(capacity),
            head: NIL,
            tail: NIL,
        }
    }

    /// Requests `key`: true on a hit. A miss inserts it, evicting the least recent key if full.
    pub fn access(&mut self, key: u64) -> bool {
        if let Some(&node) = self.index.get(&key) {
            self.unlink(node);
            self.push_front(node);
            return true;
        }
        let node = if self.nodes.len() < self.capacity {
            self.nodes.push(Node { key, prev: NIL, next: NIL });
            self.nodes.len() - 1
        } else {
            let victim = self.tail;
            self.unlink(victim);
            if let Some(old) = self.nodes.get_mut(victim) {
                self.index.remove(&old.key);
                old.key = key;
            }
            victim
        };
        self.index.insert(key, node);
        self.push_front(node);
        false
    }

    fn unlink(&mut self, node: usize) {
        let (prev, next) = self.nodes.get(node).map_or((NIL, NIL), |n| (n.prev, n.next));
        match self.nodes.get_mut(prev) {
            Some(p) => p.next = next,
            None => self.head = next,
        }
        match self.nodes.get_mut(next) {
            Some(n) => n.prev = prev,
            None => self.tail = prev,
        }
    }

    fn push_front(&mut self, node: usize) {
        let old_head = self.head;
        if let Some(n) = self.nodes.get_mut(node) {
            n.prev = NIL;
            n.next = old_head;
        }
        match self.nodes.get_mut(old_head) {
            Some(h) => h.prev = node,
            None => self.tail = node,
        }
        self.head = node;
    }
}

/// The hit ratio over `measured` of one exact LRU of `capacity` keys that replayed `warmup`
/// first.
pub fn simulate(warmup: &[u64], measured: &[u64], capacity: usize) -> f64 {
    let mut lru = LruSet::new(capacity);
    warmup.iter().for_each(|&key| {
        lru.access(key);
    });
    let hits = measured.iter().filter(|&&key| lru.access(key)).count();
    hits as f64 / measured.len().max(1) as f64
}

/// Che's approximation of LRU's hit ratio under independent requests with these
/// probabilities: find the characteristic time T with sum(1 - e^(-p T)) = capacity, then
/// the hit ratio is sum(p (1 - e^(-p T))). Accurate to a fraction of a percent for Zipf.
pub fn che_hit_ratio(probabilities: &[f64], capacity: usize) -> f64 {
    if capacity >= probabilities.len() {
        return 1.0;
    }
    let occupancy = |t: f64| probabilities.iter().map(|p| 1.0 - (-p * t).exp()).sum::<f64>();
    let (mut low, mut high) = (0.0f64, 1.0f64);
    while occupancy(high) < capacity as f64 {
        high *= 2.0;
    }
    for _ in 0..100 {
        let middle = (low + high) / 2.0;
        if occupancy(middle) < capacity as f64 {
            low = middle;
        } else {
            high = middle;
        }
    }
    probabilities.iter().map(|p| p * (1.0 - (-p * high).exp())).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used_key() {
        let mut lru = LruSet::new(2);
        assert!(!lru.access(1));
        assert!(!lru.access(2));
        assert!(lru.access(1)); // 2 is now the least recent
        assert!(!lru.access(3)); // evicts 2
        assert!(lru.access(1));
        assert!(!lru.access(2)); // evicts 3
        assert!(!lru.access(3)); // evicts 1
        assert!(lru.access(2));
    }

    #[test]
    fn simulation_agrees_with_che() {
        let p = crate::zipf::probabilities(10_000, 0.9);
        let trace = crate::zipf::trace(&p, 400_000, 3);
        let (warmup, measured) = trace.split_at(100_000);
        let simulated = simulate(warmup, measured, 1000);
        let approximated = che_hit_ratio(&p, 1000);
        assert!((simulated - approximated).abs() < 0.02, "{simulated} vs {approximated}");
    }
}
