//! The ids of the plan family: a plan (chosen by the caller), and a plan sandbox and a
//! checkpoint (ULIDs this library makes).

use super::rules::{check_name, check_ulid, id_type};

id_type!(
    /// A plan id: `[A-Za-z0-9._-]`, 1 to 128 bytes, not starting with `.`. It names the
    /// plan's directory, so it follows the same rule as a delegation id.
    ///
    /// ```
    /// use patchbox::id::PlanId;
    /// assert_eq!(PlanId::parse("p-1").unwrap().to_string(), "p-1");
    /// assert!(PlanId::parse("a/b").is_err());
    /// ```
    PlanId,
    "plan id",
    check_name
);

id_type!(
    /// A plan sandbox id: the ULID a sandbox got when it was made.
    ///
    /// ```
    /// use patchbox::id::SandboxId;
    /// let id = SandboxId::new();
    /// assert_eq!(SandboxId::parse(id.as_str()).unwrap(), id);
    /// assert!(SandboxId::parse("").is_err());
    /// ```
    SandboxId,
    "sandbox id",
    |kind, id| check_ulid(kind, "not a sandbox id", id)
);

id_type!(
    /// A checkpoint id: the ULID a checkpoint got when it was taken; checkpoints of one
    /// sandbox sort by it in the order they were taken.
    ///
    /// ```
    /// use patchbox::id::CheckpointId;
    /// let id = CheckpointId::new();
    /// assert_eq!(CheckpointId::parse(id.as_str()).unwrap(), id);
    /// assert!(CheckpointId::parse("../x").is_err());
    /// ```
    CheckpointId,
    "checkpoint id",
    |kind, id| check_ulid(kind, "not a checkpoint id", id)
);

impl SandboxId {
    /// A fresh sandbox id, greater than every id this process made before.
    #[allow(clippy::new_without_default)]
    pub fn new() -> SandboxId {
        SandboxId(super::next_string())
    }
}

impl CheckpointId {
    /// A fresh checkpoint id, greater than every id this process made before.
    #[allow(clippy::new_without_default)]
    pub fn new() -> CheckpointId {
        CheckpointId(super::next_string())
    }
}
