//! [`Timestamp`]: a file time as the kernel keeps it, seconds and nanoseconds.
//!
//! Modification and change times cross the whole library: stat data in manifests and git's
//! index, the stamps a transaction checks before it moves an original, the mtimes an undo
//! restores. They travel as one type so that the two halves never come apart or swap, and so
//! that comparing two of them is the lexicographic order of `(secs, nanos)` everywhere.
//!
//! The halves are kept as the kernel and `std` hand them over (`st_mtime`,
//! `st_mtime_nsec`; [`MetadataExt::mtime_nsec`](std::os::unix::fs::MetadataExt) is an `i64`),
//! and the text and JSON forms are the ones a `(i64, i64)` tuple had: the records on disk
//! read and write the same.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A file time: whole seconds since the epoch and the nanoseconds within that second.
///
/// Ordered as the pair `(secs, nanos)`; serialized (serde) as the 2-element array
/// `[secs, nanos]`, which is what the tuple it replaces wrote.
///
/// ```
/// use patchbox::fs::Timestamp;
/// let t = Timestamp::new(1_700_000_000, 5);
/// assert!(t < Timestamp::new(1_700_000_000, 6));
/// assert_eq!(serde_json::to_string(&t).unwrap(), "[1700000000,5]");
/// assert_eq!(serde_json::from_str::<Timestamp>("[1700000000,5]").unwrap(), t);
/// assert_eq!(Timestamp::from((1, 2)), Timestamp::new(1, 2));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    /// Seconds since the epoch (`st_mtime`).
    pub secs: i64,
    /// Nanoseconds within the second (`st_mtime_nsec`), `0..1_000_000_000` from the kernel.
    pub nanos: i64,
}

impl Timestamp {
    /// The time `secs` seconds and `nanos` nanoseconds after the epoch.
    pub const fn new(secs: i64, nanos: i64) -> Timestamp {
        Timestamp { secs, nanos }
    }

    /// The modification time of `m`.
    pub fn mtime_of(m: &std::fs::Metadata) -> Timestamp {
        use std::os::unix::fs::MetadataExt;
        Timestamp::new(m.mtime(), m.mtime_nsec())
    }

    /// The status-change time of `m`.
    pub fn ctime_of(m: &std::fs::Metadata) -> Timestamp {
        use std::os::unix::fs::MetadataExt;
        Timestamp::new(m.ctime(), m.ctime_nsec())
    }

    /// The modification time of a rustix `stat`.
    pub fn mtime_of_stat(st: &rustix::fs::Stat) -> Timestamp {
        #[allow(clippy::unnecessary_cast)] // the field types differ between targets
        Timestamp::new(st.st_mtime as i64, st.st_mtime_nsec as i64)
    }

    /// The status-change time of a rustix `stat`.
    pub fn ctime_of_stat(st: &rustix::fs::Stat) -> Timestamp {
        #[allow(clippy::unnecessary_cast)] // the field types differ between targets
        Timestamp::new(st.st_ctime as i64, st.st_ctime_nsec as i64)
    }

    /// The pair `(secs, nanos)`.
    pub const fn pair(self) -> (i64, i64) {
        (self.secs, self.nanos)
    }
}

impl From<(i64, i64)> for Timestamp {
    fn from((secs, nanos): (i64, i64)) -> Timestamp {
        Timestamp { secs, nanos }
    }
}

impl From<Timestamp> for (i64, i64) {
    fn from(t: Timestamp) -> (i64, i64) {
        t.pair()
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.pair().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        <(i64, i64)>::deserialize(d).map(Timestamp::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_like_the_pair() {
        let a = Timestamp::new(1, 999_999_999);
        let b = Timestamp::new(2, 0);
        assert!(a < b);
        assert_eq!(a.cmp(&b), a.pair().cmp(&b.pair()));
    }

    #[test]
    fn json_is_the_tuple_array() {
        let t = Timestamp::new(-3, 7);
        let j = serde_json::to_string(&t).unwrap();
        assert_eq!(j, serde_json::to_string(&(-3i64, 7i64)).unwrap());
        assert_eq!(serde_json::from_str::<Timestamp>(&j).unwrap(), t);
    }
}
