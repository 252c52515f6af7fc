//! The bridge behind `<patchbox/fs_utils.hpp>`: `compute_diff`, the patch between two
//! directory trees ([`crate::tree::dir_diff::diff_dirs`]). The other two helpers of that header
//! (`backup_directory`, `safe_restore`) are plain `std::filesystem` work in the C++ glue.

use super::{core, guarded, path_from};

#[cxx::bridge(namespace = "patchbox::bridge")]
mod bridge {
    extern "Rust" {
        fn fs_compute_diff(original: &[u8], modified: &[u8]) -> Result<Vec<u8>>;
    }
}

/// The patch turning the tree `original` into `modified` (paths as bytes).
fn fs_compute_diff(original: &[u8], modified: &[u8]) -> Result<Vec<u8>, String> {
    guarded(|| {
        core(crate::tree::dir_diff::diff_dirs(
            &path_from(original),
            &path_from(modified),
        ))
    })
}
