//! The one error of the id layer: a text that is not an id of the kind asked for.
//!
//! It names the kind, the text as given and what is wrong, so the family errors it is
//! converted into (`crate::Error::InvalidId`, the plan's `SandboxError`) keep telling the
//! caller which id and why, without this floor module knowing those families.

/// A text refused as an id of some kind.
///
/// ```
/// let e = patchbox::id::DelegationId::parse("a/b").unwrap_err();
/// assert_eq!(e.kind(), "delegation id");
/// assert_eq!(e.id(), "a/b");
/// assert!(e.to_string().contains("only A-Z a-z 0-9 . _ - are allowed"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} {id:?}: {reason}")]
pub struct IdError {
    pub(crate) kind: &'static str,
    pub(crate) id: String,
    pub(crate) reason: &'static str,
    pub(crate) rule: &'static str,
}

impl IdError {
    /// The kind of id that was asked for, e.g. `"delegation id"`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The text as given.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What is wrong with it, e.g. `"empty"`.
    pub fn reason(&self) -> &'static str {
        self.reason
    }

    /// The whole rule an id of this kind follows, for messages that state it rather than
    /// the one failed part.
    pub fn rule(&self) -> &'static str {
        self.rule
    }

    /// The text as given, taken out.
    pub fn into_id(self) -> String {
        self.id
    }
}
