/// @file patchbox/fs_utils.hpp
/// @brief The plan executors' filesystem utilities (`_fs_utils` in their documentation):
/// copy a directory tree, put a backup back in place by renames, and the patch between two
/// trees.
///
/// patchbox's own strategies do not need them (their snapshots, commits and diffs are the
/// library's: deduplicated, crash-atomic, 3-way); they are here for code ported from the
/// documented module, such as a CustomStrategy that keeps its state in directories. Every
/// failure throws patchbox::Error: ErrorKind::NotADirectory when a tree that must exist is
/// missing or not a directory, ErrorKind::Io (naming the operation and the path) otherwise.
///
/// @code
/// namespace fs_utils = patchbox::plan::fs_utils;
/// fs_utils::backup_directory(work, backup);        // before a risky step
/// std::string patch = fs_utils::compute_diff(backup, work);  // what the step changed
/// fs_utils::safe_restore(backup, work);            // undo it: `work` is the backup again
/// @endcode
#ifndef PATCHBOX_FS_UTILS_HPP
#define PATCHBOX_FS_UTILS_HPP

#include <filesystem>
#include <string>

#include "patchbox/error.hpp"

/// patchbox's C++ API.
namespace patchbox {
/// Plan sandboxes (the Rust `patchbox::plan` layer).
namespace plan {
/// Filesystem utilities of the plan executors' documentation (their `_fs_utils` module).
namespace fs_utils {

/// Copies the tree @p src to @p dst (which must not exist; its parent must), preserving
/// permissions, timestamps (modification and access, to the nanosecond) and symlinks, which
/// are copied as links, never followed. Regular files, directories and symlinks are copied;
/// other kinds (sockets, devices, FIFOs) are refused.
/// @return @p dst.
/// @throws patchbox::Error (ErrorKind::NotADirectory when @p src is not a directory;
///   ErrorKind::Io when @p dst exists or a copy fails: what was copied so far stays).
std::filesystem::path backup_directory(const std::filesystem::path& src,
                                       const std::filesystem::path& dst);

/// Puts the tree @p backup in place of @p original by renames: @p original is moved aside,
/// @p backup renamed to it, then the old tree removed. At every instant @p original is either
/// the old tree or the whole backup (a failed rename puts the old tree back). A backup on
/// another filesystem is first copied next to @p original (a rename cannot cross
/// filesystems), with backup_directory(). @p backup is consumed. @p original need not exist.
/// @throws patchbox::Error (ErrorKind::NotADirectory when @p backup is not a directory;
///   ErrorKind::Io when a rename or copy fails, @p original then being the old tree).
void safe_restore(const std::filesystem::path& backup, const std::filesystem::path& original);

/// The patch that turns the tree @p original into the tree @p modified, as `git apply` and
/// `patch -p1` read it: git-style, `a/` and `b/` prefixes, sorted by path, added and deleted
/// files against `/dev/null`, executable-bit changes as `old mode`/`new mode`, symlinks by
/// their target, binary files as git binary literals. Empty when the two trees have the same
/// files. A tree that does not exist is empty (every file of the other is added or deleted);
/// `.git` directories are skipped. Computed by the Rust library (its patch writer).
/// @throws patchbox::Error (ErrorKind::Io when a side is not a directory or cannot be read).
std::string compute_diff(const std::filesystem::path& original,
                         const std::filesystem::path& modified);

}  // namespace fs_utils
}  // namespace plan
}  // namespace patchbox

#endif  // PATCHBOX_FS_UTILS_HPP
