/// @file patchbox/apply.hpp
/// @brief The consumer side: applying a delegation's patch to the user's project, and undoing
/// it.
///
/// Once the user consents, the consumer applies a SandboxResult::patch (or any git-style
/// patch) to the project with apply_patch(). It is built around four promises:
///
/// 1. **All or nothing.** Every file is resolved in memory first; only if every file can be
///    applied is anything written, through a transaction that rolls back on failure.
///    ApplyOptions::check stops before writing.
/// 2. **Drift is handled, never guessed past.** A file that already holds the patch's result
///    is FileStatus::AlreadyApplied; exact context (possibly at an offset) is
///    FileStatus::Applied; with ApplyOptions::preimages a 3-way merge absorbs non-overlapping
///    local edits (FileStatus::Merged); overlapping edits are a FileStatus::Conflict, which
///    refuses the whole patch unless ApplyOptions::conflict_markers is set. Applying a patch
///    twice changes nothing and reports Outcome::AlreadyApplied.
/// 3. **Nothing outside the project.** Paths with `..`, absolute paths, `.git` components and
///    paths through symlinks are refused; new symlinks must point inside the project unless
///    ApplyOptions::allow_outside_symlinks is set.
/// 4. **Undoable.** With ApplyOptions::undo_dir the apply records what it replaced;
///    undo_apply() restores it.
///
/// Conflicts and refusals are not exceptions: they are reported per file in the ApplyReport,
/// whose Outcome says whether anything was written. Error is thrown only when the patch cannot
/// be read at all (ErrorKind::PatchParse, or ErrorKind::Containment for a `..` or absolute
/// path), for a bad project directory (ErrorKind::NotADirectory), or when writing failed
/// (ErrorKind::Io, ErrorKind::ApplyFailed; the project has then been rolled back).
///
/// Stands alone: a consumer that only applies patches includes just this header
/// (`<patchbox/sandbox.hpp>` does not include it). Link the CMake target `patchbox::patchbox`. The functions are
/// thread-safe, but concurrent applies to the same project are detected, not locked out.
///
/// @code
/// patchbox::ApplyOptions opts;
/// opts.preimages = result.base_dir;  // enables 3-way merges while the session lives
/// opts.undo_dir = "/var/tmp/my-engine/undo-42";
/// patchbox::ApplyReport report = patchbox::apply_patch(project, result.patch, opts);
/// if (!report.ok()) std::cerr << report.text << '\n';  // nothing was written
/// // ... later, if the user changes their mind:
/// patchbox::undo_apply(project, *report.undo_dir);
/// @endcode
#ifndef PATCHBOX_APPLY_HPP
#define PATCHBOX_APPLY_HPP

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "patchbox/error.hpp"

/// patchbox's C++ API.
namespace patchbox {

/// How to apply a patch. The defaults apply for real, refuse on any conflict, record no undo
/// information and strip one leading path component (`a/`, `b/`).
struct ApplyOptions {
  /// Only report what would happen; write nothing (ApplyReport::check_only is then true).
  bool check = false;
  /// A directory holding the original versions of the files under the same relative paths,
  /// e.g. a session's SandboxResult::base_dir: enables 3-way merging when the project has
  /// drifted since the snapshot.
  std::optional<std::filesystem::path> preimages;
  /// Write conflicting text files with conflict markers (and apply the rest) instead of
  /// refusing the whole patch. Conflicts that markers cannot express (binary files, symlinks,
  /// creations over different files, deletions of changed files) still refuse the patch.
  bool conflict_markers = false;
  /// Where to record what the apply replaced, for undo_apply(). Must not exist yet or be an
  /// empty directory. Nothing is recorded when nothing is written.
  std::optional<std::filesystem::path> undo_dir;
  /// Leading path components to strip from the patch's file names (`patch -p`).
  std::size_t strip = 1;
  /// Allow the patch to create symlinks that point outside the project (absolute targets or
  /// too many `..`). Off by default: such a symlink is refused.
  bool allow_outside_symlinks = false;
};

/// What happened (or, in check mode, would happen) to one file.
enum class FileStatus {
  Applied,         ///< Applied with exact context (possibly at an offset).
  Merged,          ///< Applied by a 3-way merge: the project had non-overlapping edits.
  AlreadyApplied,  ///< The project already has the patch's result for this file.
  Conflict,        ///< The patch's changes overlap local changes (see FileReport::conflicts).
  Refused,         ///< Refused for safety or because the change is unsupported (see detail).
};

/// The stable lower-case name of a status, as the report text spells it (`"applied"`,
/// `"merged"`, `"already applied"`, `"conflict"`, `"refused"`).
const char* to_string(FileStatus status) noexcept;

/// One hunk that could not be applied.
struct HunkConflict {
  /// 1-based index of the hunk within its file's patch.
  std::size_t hunk = 0;
  /// The hunk header, `@@ -a,b +c,d @@`.
  std::string header;
  /// Why it conflicts, with line numbers in the project file where known.
  std::string reason;
};

/// The result for one file of the patch.
struct FileReport {
  /// The file, relative to the project (its new path; the old one for a deletion).
  std::filesystem::path path;
  /// The source path of a rename or copy, relative to the project.
  std::optional<std::filesystem::path> old_path;
  /// What happened.
  FileStatus status = FileStatus::Refused;
  /// Human-readable detail: offsets used, merge notes, the reason for a refusal.
  std::string detail;
  /// For FileStatus::Conflict: the conflicting hunks.
  std::vector<HunkConflict> conflicts;
  /// True when the file was (or in check mode would be) written with conflict markers.
  bool markers_written = false;
};

/// The overall result of an apply.
enum class Outcome {
  Applied,               ///< Every file applied or already applied; something was written
                         ///< (in check mode: would be).
  AppliedWithConflicts,  ///< Written, but some text files hold conflict markers
                         ///< (ApplyOptions::conflict_markers).
  AlreadyApplied,        ///< Every file already had the patch's result (or the patch was
                         ///< empty); nothing written.
  Refused,               ///< Nothing was written: some file conflicts or was refused.
};

/// The stable lower-case name of an outcome (`"applied"`, `"applied with conflicts"`,
/// `"already applied"`, `"refused"`).
const char* to_string(Outcome outcome) noexcept;

/// The result of apply_patch(): one FileReport per file of the patch, in patch order.
struct ApplyReport {
  /// Per file of the patch, in order.
  std::vector<FileReport> files;
  /// Overall outcome.
  Outcome outcome = Outcome::Refused;
  /// True when made with ApplyOptions::check: nothing was written.
  bool check_only = false;
  /// The undo record written, if any (absent when nothing was written).
  std::optional<std::filesystem::path> undo_dir;
  /// Non-fatal notes (e.g. a staging directory that could not be cleaned up).
  std::vector<std::string> warnings;
  /// A human-readable summary: one line per file (with its conflicting hunks), the warnings,
  /// and a closing line. The same text as the Rust report's `Display` and the CLI.
  std::string text;
  /// The report as the JSON record `patchbox apply --json` prints (see `docs/json.md`).
  std::string json;

  /// True unless the patch was refused (conflicts without markers, or refused files).
  bool ok() const noexcept { return outcome != Outcome::Refused; }
  /// True when this call modified the project.
  bool wrote() const noexcept {
    return !check_only && (outcome == Outcome::Applied || outcome == Outcome::AppliedWithConflicts);
  }
  /// The number of files with @p status.
  std::size_t count(FileStatus status) const noexcept {
    std::size_t n = 0;
    for (const auto& f : files) n += f.status == status ? 1 : 0;
    return n;
  }
};

/// Parses @p patch (raw bytes, git-style or unified) with ApplyOptions::strip and applies it
/// to @p project_dir, all or nothing, as described in this file's overview.
///
/// Conflicts and refusals are reported in the returned ApplyReport (ApplyReport::ok() is then
/// false and nothing was written); they do not throw.
/// @throws Error ErrorKind::PatchParse for a patch that cannot be read,
///   ErrorKind::Containment for a path with `..` or an absolute path (nothing written),
///   ErrorKind::NotADirectory for a bad @p project_dir, ErrorKind::Io or
///   ErrorKind::ApplyFailed when writing failed (the project has been rolled back).
ApplyReport apply_patch(const std::filesystem::path& project_dir, const std::string& patch,
                        const ApplyOptions& options = {});

/// The result of undo_apply().
struct UndoReport {
  /// Paths restored to their state before the apply, relative to the project.
  std::vector<std::filesystem::path> restored;
  /// Paths that had changed since the apply and were overwritten anyway (`force`).
  std::vector<std::filesystem::path> overwritten;
  /// The record had already been used; nothing was done.
  bool already_undone = false;
  /// Non-fatal notes (e.g. what a recovery run before the undo found).
  std::vector<std::string> warnings;
};

/// Restores @p project_dir to its state before the apply recorded in @p undo_dir (see
/// ApplyOptions::undo_dir). Atomic like an apply. Every path the apply changed must still hold
/// what the apply wrote; otherwise the undo is refused, unless @p force is set (the changes
/// are then overwritten and listed in UndoReport::overwritten). Undoing the same record twice
/// is harmless: the second call reports UndoReport::already_undone.
/// @throws Error ErrorKind::ApplyFailed when files changed since the apply (without
///   @p force) or the record is unusable, ErrorKind::Io, ErrorKind::NotADirectory, …
UndoReport undo_apply(const std::filesystem::path& project_dir,
                      const std::filesystem::path& undo_dir, bool force = false);

/// Applies the pending patch @p id (see `<patchbox/store.hpp>`) to its project, or to
/// @p project when given, merging 3-way against the pre-images stored with it unless
/// @p options names others. Once applied for real (not ApplyOptions::check; Outcome::Applied
/// or Outcome::AlreadyApplied) the pending patch is removed; conflicts and refusals keep it.
/// An empty @p root is the default root.
/// @throws Error ErrorKind::Pending (unknown or ambiguous id), and as apply_patch().
ApplyReport apply_pending(const std::filesystem::path& root, const std::string& id,
                          const ApplyOptions& options = {},
                          const std::optional<std::filesystem::path>& project = std::nullopt);

/// Applies pending patch @p id of the object store @p store_url (see
/// `<patchbox/store.hpp>`, list_stored()) onto @p project — the caller's own copy of the
/// project — merging 3-way against the pre-images stored with it unless @p options names
/// others, with an undo record under @p root (empty: the default root). Once applied for real
/// it is removed from the store; conflicts and refusals keep it.
/// @throws Error ErrorKind::Pending (unknown or ambiguous id), ErrorKind::Store, and as
///   apply_patch().
ApplyReport apply_stored(const std::string& store_url, const std::string& id,
                         const std::filesystem::path& project,
                         const std::filesystem::path& root = {},
                         const ApplyOptions& options = {});

/// Which parts of a pending patch to accept (what `patchbox pending apply` takes as
/// `--only`, `--exclude` and `--hunks`). An empty selection takes everything.
struct Selection {
  /// Only the files under these paths (a file, or a directory's files); all when empty
  /// (and `hunks` is empty too).
  std::vector<std::string> only;
  /// Leave out the files under these paths.
  std::vector<std::string> exclude;
  /// Only these hunks of a file, counted from 1 in the patch: `"PATH:1,3"` or `"PATH:2-4"`.
  std::vector<std::string> hunks;
};

/// What apply_pending_selected() did.
struct PartialApply {
  /// The apply of the chosen part; its `json` also names the pending patch (`pending_id`)
  /// and the rest (`remaining`).
  ApplyReport report;
  /// The new pending patch holding the rest, once the chosen part was applied; absent when
  /// nothing is left, or nothing was applied (check mode, a refusal: the patch stays as is).
  std::optional<std::string> remaining;
};

/// Applies the part of the pending patch @p id that @p selection chooses, atomically and
/// 3-way against the stored pre-images as apply_pending() does, with an undo record (so
/// undo_last_apply() undoes it like any other). The rest stays pending as a new entry, split
/// from this one, with its own pre-images: it applies later, also after the user's edits.
/// @throws Error ErrorKind::Pending (unknown id; a selection that matches no file, a hunk
///   past the file's last, hunks of a binary or renamed file), and as apply_patch().
PartialApply apply_pending_selected(const std::filesystem::path& root, const std::string& id,
                                    const Selection& selection, const ApplyOptions& options = {},
                                    const std::optional<std::filesystem::path>& project =
                                        std::nullopt);

/// An undo record kept in the sandbox root's store (`<root>/undo/`) by apply_recorded(),
/// apply_pending() and `patchbox apply`. The store keeps the newest 50 applied records per
/// project and none older than 30 days.
struct ApplyRecord {
  /// The state of a record.
  enum class State {
    Applied,     ///< Its apply completed: it can be undone.
    Undone,      ///< It has been used.
    Incomplete,  ///< Its apply has not completed (running, or interrupted and not recovered).
  };
  std::string id;                  ///< Its id (a ULID: time-sortable).
  std::filesystem::path dir;       ///< Its directory.
  std::filesystem::path project;   ///< The project it was made for.
  std::uint64_t created = 0;       ///< When the apply started (seconds since the epoch).
  std::size_t paths = 0;           ///< How many paths the apply changed.
  State state = State::Incomplete; ///< Applied, undone or incomplete.
};

/// apply_patch() with an undo record in the store of the sandbox root @p root (an empty
/// path: the default root); ApplyOptions::undo_dir is ignored. The store is pruned after.
/// @throws Error as apply_patch().
ApplyReport apply_recorded(const std::filesystem::path& root,
                           const std::filesystem::path& project_dir, const std::string& patch,
                           const ApplyOptions& options = {});

/// The undo records in @p root's store (of @p project_dir only, when given), oldest first.
/// @throws Error (ErrorKind::Io).
std::vector<ApplyRecord> list_applies(
    const std::filesystem::path& root,
    const std::optional<std::filesystem::path>& project_dir = std::nullopt);

/// Undoes the newest applied record of @p project_dir in @p root's store (after recovering an
/// interrupted apply or undo of the project), then drops the record. See undo_apply() for
/// @p force.
/// @throws Error ErrorKind::Pending (no apply to undo), and as undo_apply().
UndoReport undo_last_apply(const std::filesystem::path& root,
                           const std::filesystem::path& project_dir, bool force = false);

/// Removes the undo record @p id from @p root's store.
/// @throws Error ErrorKind::Pending (unknown id), ErrorKind::Io.
void drop_apply_record(const std::filesystem::path& root, const std::string& id);

}  // namespace patchbox

#endif  // PATCHBOX_APPLY_HPP
