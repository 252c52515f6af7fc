//! Ids that sort in the order they were made.
//!
//! ```
//! let a = patchbox::id::next();
//! let b = patchbox::id::next();
//! assert!(a < b); // also within one millisecond
//! assert_eq!(a.to_string().len(), 26);
//! ```
//!
//! Sessions, undo records, checkpoints, plan sandboxes and snapshot layers are named by a
//! ULID, and each of those stores reads "oldest first" or "the newest" as the order of the
//! names. A plain ULID is random within its millisecond, so two made in the same
//! millisecond sort either way: a list of checkpoints came back out of order, and "undo the
//! newest" could pick the older of two applies. Every such id comes from here instead: one
//! monotonic generator per process, so an id is greater than every id this process made
//! before.
//!
//! Across processes the order is the clock's: two processes that each make an id in the
//! same millisecond get a random order between them, as with plain ULIDs.

use parking_lot::Mutex;

/// The process's generator: within one millisecond it increments the random part.
static IDS: Mutex<ulid::Generator> = Mutex::new(ulid::Generator::new());

/// A new ULID, greater than every id this process made before through this function.
pub fn next() -> ulid::Ulid {
    // Overflow needs 2^80 ids in one millisecond; a plain ULID then is still unique.
    IDS.lock().generate().unwrap_or_else(|_| ulid::Ulid::new())
}

/// [`next`] as its 26-character text, the form used in file names.
pub fn next_string() -> String {
    next().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_made_in_a_burst_sort_in_the_order_they_were_made() {
        let ids: Vec<String> = (0..10_000).map(|_| next_string()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len());
    }
}
