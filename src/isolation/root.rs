//! The root every sandbox lives under, sessions and plans alike, and its default: one
//! directory per machine user unless the caller names another.

use std::path::PathBuf;

use crate::error::{Error, Result};

/// The environment variable naming the root when the caller gives none.
pub const ROOT_ENV: &str = "PATCHBOX_ROOT";

/// The sandbox root used when none is given: `$PATCHBOX_ROOT`, else
/// `$HOME/.entropic/sandbox` (`$HOME` is honoured).
///
/// ```
/// let root = patchbox::isolation::default_root().unwrap();
/// assert!(root.is_absolute());
/// ```
pub fn default_root() -> Result<PathBuf> {
    if let Some(r) = std::env::var_os(ROOT_ENV).filter(|r| !r.is_empty()) {
        return Ok(PathBuf::from(r));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(dirs::home_dir)
        .ok_or_else(|| {
            Error::io(
                "find home directory",
                "$HOME",
                std::io::Error::new(std::io::ErrorKind::NotFound, "HOME is not set"),
            )
        })?;
    Ok(home.join(".entropic").join("sandbox"))
}
