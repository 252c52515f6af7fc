//! Conversions shared by the session-layer files: patch text in, paths out.
//!
//! Why: a patch is bytes (file contents need not be UTF-8), yet Python callers hold it as
//! `str` as often as `bytes`; and a path relative to the project is most useful in Python as
//! the `str` git prints, while absolute directories are `pathlib.Path`.
//!
//! Invariants: nothing here panics on input; a non-UTF-8 path name becomes a `str` with
//! surrogate escapes (what `os.fsdecode` gives), so it round-trips through `os.fsencode`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyString};

/// The bytes of a patch given as `bytes`, `bytearray` or `str` (encoded as UTF-8).
pub(crate) fn patch_bytes(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(b.to_vec());
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    Err(PyTypeError::new_err(format!(
        "a patch is bytes or str, not {}",
        obj.get_type().name()?
    )))
}

/// A relative path as the `str` Python shows (surrogate-escaped where not UTF-8).
pub(crate) fn rel(p: &Path) -> OsString {
    p.as_os_str().to_os_string()
}

/// A list of relative paths as `str`s.
pub(crate) fn rels(v: &[PathBuf]) -> Vec<OsString> {
    v.iter().map(|p| rel(p)).collect()
}

/// The sandbox root a store function works under: the one given, else the library's default
/// (`$PATCHBOX_ROOT`, else `~/.entropic/sandbox`).
pub(crate) fn root_of(root: Option<PathBuf>) -> patchbox::Result<PathBuf> {
    match root {
        Some(r) => Ok(r),
        None => patchbox::session::layout::default_root(),
    }
}
