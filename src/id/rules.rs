//! The two shapes an id takes, and the macro that makes one newtype per id kind.
//!
//! Names chosen by a caller (delegation and plan ids) become directory and file names, so
//! they are restricted to a portable, inert alphabet ([`check_name`]). Names this library
//! makes (sessions, plan sandboxes, checkpoints) are ULIDs from [`super::next`]
//! ([`check_ulid`]). Each kind is its own type so an operation that needs, say, a
//! delegation id cannot be handed a plan id or unchecked text.

use super::IdError;

/// Longest accepted name-shaped id, in bytes.
pub const MAX_NAME_LEN: usize = 128;

/// The rule of a name-shaped id, as stated in messages.
pub(crate) const NAME_RULE: &str = "use 1 to 128 of A-Z a-z 0-9 . _ - (not starting with '.')";

/// The rule of a ULID-shaped id, as stated in messages.
pub(crate) const ULID_RULE: &str = "expected a 26-character ULID";

/// Checks a name-shaped id: `[A-Za-z0-9._-]`, 1 to [`MAX_NAME_LEN`] bytes, not starting
/// with `.` (so not `.` or `..` either).
pub(crate) fn check_name(kind: &'static str, id: &str) -> Result<(), IdError> {
    let bad = |reason| {
        Err(IdError {
            kind,
            id: id.to_string(),
            reason,
            rule: NAME_RULE,
        })
    };
    if id.is_empty() {
        return bad("empty");
    }
    if id.len() > MAX_NAME_LEN {
        return bad("longer than 128 bytes");
    }
    if id.starts_with('.') {
        // Names starting with '.' are the library's own temporary files: a listing passes
        // over them, so such an id would make its work invisible.
        return bad("must not start with '.'");
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return bad("only A-Z a-z 0-9 . _ - are allowed");
    }
    Ok(())
}

/// Checks a ULID-shaped id: 26 characters of Crockford base 32 that decode to a ULID.
/// `reason` is the message's wording of a failure (e.g. `"not a session id"`).
pub(crate) fn check_ulid(
    kind: &'static str,
    reason: &'static str,
    id: &str,
) -> Result<(), IdError> {
    if id.len() == 26 && ulid::Ulid::from_string(id).is_ok() {
        Ok(())
    } else {
        Err(IdError {
            kind,
            id: id.to_string(),
            reason,
            rule: ULID_RULE,
        })
    }
}

/// Makes a validated id newtype `$name` whose text passed `$check`.
///
/// The type gets `parse`, `as_str`, `into_string`, `Display`, `AsRef<str>`, `Borrow<str>`
/// (so maps keyed by it are looked up with a `&str`), `FromStr`, `TryFrom<&str>` and
/// `TryFrom<String>`, comparisons with `str`, and serde as a plain string that is checked
/// again when read.
macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal, $check:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// What this kind of id is called in messages.
            pub const KIND: &'static str = $kind;

            /// `text` as this kind of id, or why it is not one.
            pub fn parse(text: &str) -> Result<Self, $crate::id::IdError> {
                let check: fn(&'static str, &str) -> Result<(), $crate::id::IdError> = $check;
                check($kind, text)?;
                Ok($name(text.to_string()))
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id as an owned `String`.
            pub fn into_string(self) -> String {
                self.0
            }

            /// An id this library just made (a fresh ULID from [`crate::id::next`]) or
            /// read from a place only it writes, taken without checking again.
            #[allow(dead_code)]
            pub(crate) fn trusted(text: String) -> Self {
                $name(text)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(&self.0, f)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::id::IdError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $name::parse(s)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = $crate::id::IdError;
            fn try_from(s: &str) -> Result<Self, Self::Error> {
                $name::parse(s)
            }
        }

        impl TryFrom<String> for $name {
            type Error = $crate::id::IdError;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                let check: fn(&'static str, &str) -> Result<(), $crate::id::IdError> = $check;
                check($kind, &s)?;
                Ok($name(s))
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl $crate::id::IntoId<$name> for &str {
            fn into_id(self) -> Result<$name, $crate::id::IdError> {
                $name::parse(self)
            }
        }

        impl $crate::id::IntoId<$name> for &String {
            fn into_id(self) -> Result<$name, $crate::id::IdError> {
                $name::parse(self)
            }
        }

        impl $crate::id::IntoId<$name> for &$name {
            fn into_id(self) -> Result<$name, $crate::id::IdError> {
                Ok(self.clone())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                $name::try_from(s).map_err(serde::de::Error::custom)
            }
        }
    };
}

pub(crate) use id_type;
