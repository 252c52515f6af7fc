//! A small LRU cache of reconstructed pack objects, keyed by pack and offset and bounded by
//! total bytes, so that reading many versions of one file (which share delta bases) is cheap.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::git::oid::ObjectKind;

/// Total bytes kept by the reconstructed-object cache.
const CACHE_BUDGET: usize = 16 << 20;

pub(super) type Obj = (ObjectKind, Arc<Vec<u8>>);

#[derive(Default)]
pub(super) struct Cache {
    map: HashMap<(u32, u64), (u64, Obj)>,
    order: BTreeMap<u64, (u32, u64)>,
    bytes: usize,
    tick: u64,
}

impl Cache {
    pub(super) fn get(&mut self, key: (u32, u64)) -> Option<Obj> {
        self.tick += 1;
        let tick = self.tick;
        let (t, obj) = self.map.get_mut(&key)?;
        self.order.remove(t);
        *t = tick;
        self.order.insert(tick, key);
        Some(obj.clone())
    }

    pub(super) fn put(&mut self, key: (u32, u64), obj: &Obj) {
        let size = obj.1.len();
        if size > CACHE_BUDGET / 8 || self.map.contains_key(&key) {
            return;
        }
        self.tick += 1;
        self.map.insert(key, (self.tick, obj.clone()));
        self.order.insert(self.tick, key);
        self.bytes += size;
        while self.bytes > CACHE_BUDGET {
            let Some((_, k)) = self.order.pop_first() else {
                break;
            };
            if let Some((_, (_, d))) = self.map.remove(&k) {
                self.bytes -= d.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_evicts_by_bytes() {
        let mut c = Cache::default();
        let big = Arc::new(vec![0u8; CACHE_BUDGET / 8]);
        for i in 0..20u64 {
            c.put((0, i), &(ObjectKind::Blob, big.clone()));
        }
        assert!(c.bytes <= CACHE_BUDGET);
        assert!(c.get((0, 19)).is_some());
        assert!(c.get((0, 0)).is_none());
    }
}
