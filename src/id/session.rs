//! The ids of the session family: a delegation (chosen by the engine) and a session (a
//! ULID this library makes).

use super::rules::{check_name, check_ulid, id_type};

id_type!(
    /// A delegation id: `[A-Za-z0-9._-]`, 1 to 128 bytes, not starting with `.`. It names the
    /// sandbox `d-<id>` and the pending patch `<id>.patch`, so it is checked once where it
    /// comes in and never again.
    ///
    /// ```
    /// use patchbox::id::DelegationId;
    /// let id = DelegationId::parse("task-1.2_b").unwrap();
    /// assert_eq!(id.as_str(), "task-1.2_b");
    /// assert!(DelegationId::parse("../x").is_err());
    /// assert!(DelegationId::parse(".hidden").is_err());
    /// ```
    DelegationId,
    "delegation id",
    check_name
);

id_type!(
    /// A session id: the ULID naming a session directory under the sandbox root.
    ///
    /// ```
    /// use patchbox::id::SessionId;
    /// let id = SessionId::new();
    /// assert_eq!(SessionId::parse(id.as_str()).unwrap(), id);
    /// assert!(SessionId::parse("not-a-ulid").is_err());
    /// ```
    SessionId,
    "session id",
    |kind, id| check_ulid(kind, "not a session id", id)
);

impl SessionId {
    /// A fresh session id, greater than every id this process made before.
    #[allow(clippy::new_without_default)]
    pub fn new() -> SessionId {
        SessionId(super::next_string())
    }
}
