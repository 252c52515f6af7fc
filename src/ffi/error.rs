//! The bridge behind `<patchbox/error.hpp>`: the error kind names of the linked library, so
//! the C++ side can check that its `patchbox::ErrorKind` agrees with [`Error::KINDS`].

use crate::error::Error;

#[cxx::bridge(namespace = "patchbox::bridge")]
mod bridge {
    extern "Rust" {
        fn error_kinds() -> Vec<String>;
    }
}

/// [`Error::KINDS`], for `patchbox::library_error_kinds()`.
fn error_kinds() -> Vec<String> {
    super::guarded_or_default(|| Error::KINDS.iter().map(|k| k.to_string()).collect())
}
