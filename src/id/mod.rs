//! Ids: the generator of ids that sort in the order they were made, and one validated type
//! per id kind.
//!
//! The kinds ([`DelegationId`], [`SessionId`], [`PlanId`], [`SandboxId`], [`CheckpointId`])
//! are parsed once where text comes in (a public function taking `&str`, a CLI argument, the
//! bridges, a record read from disk) and carried as the type after that, so an operation
//! that needs a valid id takes the type and checks nothing. This is a floor module: it knows
//! no family; their error enums convert [`IdError`] with `From`.
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

mod error;
mod plan;
mod rules;
mod session;

pub use error::IdError;
pub use plan::{CheckpointId, PlanId, SandboxId};
pub use rules::MAX_NAME_LEN;
pub use session::{DelegationId, SessionId};

/// What a function taking an id accepts: a reference to the id itself (taken as it is) or
/// to text (parsed here, at the boundary). Public functions take `impl IntoId<DelegationId>`
/// so callers holding a `&str` keep compiling and callers holding the type are not checked
/// again. Only references implement it, so a caller's `&format!(…)` stays as it was.
///
/// ```
/// use patchbox::id::{DelegationId, IntoId};
/// let typed = DelegationId::parse("a").unwrap();
/// let again: DelegationId = (&typed).into_id().unwrap();
/// assert_eq!(again, typed);
/// assert!(IntoId::<DelegationId>::into_id("a/b").is_err());
/// ```
pub trait IntoId<T> {
    /// The id, or why the text is not one.
    fn into_id(self) -> Result<T, IdError>;
}

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

    #[test]
    fn a_bad_delegation_id_is_refused_with_the_reason() {
        for (bad, reason) in [
            ("", "empty"),
            ("..", "must not start with '.'"),
            (".hidden", "must not start with '.'"),
            ("../x", "must not start with '.'"),
            ("a/b", "only A-Z a-z 0-9 . _ - are allowed"),
            ("a b", "only A-Z a-z 0-9 . _ - are allowed"),
            ("é", "only A-Z a-z 0-9 . _ - are allowed"),
        ] {
            let e = DelegationId::parse(bad).unwrap_err();
            assert_eq!(e.reason(), reason, "{bad:?}");
            assert_eq!(e.id(), bad);
            assert_eq!(
                e.to_string(),
                format!("invalid delegation id {bad:?}: {reason}")
            );
        }
        let long = "a".repeat(MAX_NAME_LEN + 1);
        assert_eq!(
            DelegationId::parse(&long).unwrap_err().reason(),
            "longer than 128 bytes"
        );
        assert!(DelegationId::parse(&"a".repeat(MAX_NAME_LEN)).is_ok());
    }

    #[test]
    fn a_good_id_round_trips_through_text_and_serde() {
        let d = DelegationId::parse("task-1.2_b").unwrap();
        assert_eq!(d.as_str(), "task-1.2_b");
        assert_eq!(d.to_string(), "task-1.2_b");
        assert_eq!("task-1.2_b".parse::<DelegationId>().unwrap(), d);
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(json, "\"task-1.2_b\"");
        assert_eq!(serde_json::from_str::<DelegationId>(&json).unwrap(), d);

        let p = PlanId::parse("plan.1").unwrap();
        assert_eq!(PlanId::try_from(p.to_string()).unwrap(), p);
        for fresh in [
            SessionId::new().into_string(),
            SandboxId::new().into_string(),
            CheckpointId::new().into_string(),
        ] {
            assert_eq!(SessionId::parse(&fresh).unwrap().as_str(), fresh);
            assert_eq!(SandboxId::parse(&fresh).unwrap().as_str(), fresh);
            assert_eq!(CheckpointId::parse(&fresh).unwrap().as_str(), fresh);
        }
    }

    #[test]
    fn a_bad_ulid_id_is_refused_and_serde_checks_what_it_reads() {
        let e = SessionId::parse("not-a-session").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid session id \"not-a-session\": not a session id"
        );
        assert!(SandboxId::parse("0".repeat(27).as_str()).is_err());
        assert!(CheckpointId::parse("../../etc/passwd").is_err());
        let e = serde_json::from_str::<CheckpointId>("\"x/y\"").unwrap_err();
        assert!(e.to_string().contains("invalid checkpoint id"), "{e}");
        assert!(serde_json::from_str::<PlanId>("\"\"").is_err());
    }

    #[test]
    fn kinds_are_distinct_types_with_their_own_names_in_messages() {
        assert_eq!(PlanId::parse("a b").unwrap_err().kind(), "plan id");
        assert_eq!(SandboxId::parse("x").unwrap_err().kind(), "sandbox id");
        assert_eq!(DelegationId::KIND, "delegation id");
    }
}
