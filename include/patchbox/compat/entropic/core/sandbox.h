/// @file entropic/core/sandbox.h
/// @brief Drop-in replacement for the reference engine's v2 `entropic/core/sandbox.h`,
/// implemented by patchbox.
///
/// Reachable as `<entropic/core/sandbox.h>` when `<prefix>/include/patchbox/compat` is on the
/// include path; the CMake target `patchbox::entropic_compat` adds it and links patchbox.
/// Engine code written against the reference API compiles unchanged and gets patchbox's
/// behaviour: git-style patches that `git apply` accepts, chained sandboxes with cumulative
/// patches, containment of every removal to the session directory, atomic pending patches,
/// crash recovery, and a manager that is safe to share between threads.
///
/// Nothing here throws: failures return `std::nullopt` (or, for discard_sandbox, do nothing).
/// For error details use the native API in `<patchbox/sandbox.hpp>`, which throws
/// `patchbox::Error`.
#ifndef ENTROPIC_CORE_SANDBOX_H
#define ENTROPIC_CORE_SANDBOX_H

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

/// The reference engine's namespace.
namespace entropic {

/// A delegation's sandbox.
struct SandboxInfo {
  /// The sandbox directory `<session>/d-<id>`: the delegation works here.
  std::filesystem::path path;
  /// The delegation id: 1–128 bytes of `[A-Za-z0-9._-]`, not `.` or `..`.
  std::string delegation_id;
  /// The session's base snapshot the patch is computed against.
  std::filesystem::path base_dir;
};

/// What a delegation changed.
struct SandboxResult {
  /// The git-style patch (raw bytes), empty when nothing changed.
  std::string patch;
  /// Every path the patch touches, relative to the project, sorted.
  std::vector<std::filesystem::path> files_touched;
  /// The base snapshot directory.
  std::filesystem::path base_dir;
  /// The sandbox directory.
  std::filesystem::path head_dir;
};

/// One engine session's sandboxes (see patchbox::session::Manager).
///
/// The sandbox root is `$HOME/.entropic/sandbox` (patchbox's default root, so
/// `$PATCHBOX_ROOT` overrides it as for every patchbox program). Constructing the manager
/// creates the session directory `<root>/<session-id>/` and recovers dead sessions'
/// unfinished work into pending patches; the destructor removes the base snapshot and every
/// sandbox, and the whole session directory when it holds no pending patch.
///
/// Sandboxes are isolated as patchbox's default isolation says (`$PATCHBOX_ISOLATION`:
/// `copy`, `overlay` or `auto`; `auto` when unset: an overlay where one can be mounted, else
/// copies); either way `d-<id>/` is the directory the
/// delegation works in, and the patches are the same.
///
/// If the constructor fails (the project is not a directory, the root cannot be created…)
/// it does not throw: the manager is inert, every later call returns `std::nullopt` (or does
/// nothing), session_base() is empty and project_dir() is the path as given.
///
/// Every member function may be called from any number of threads at once. Move-only.
class SandboxManager {
 public:
  /// Starts a session for @p project_dir. Never throws (see the class comment).
  explicit SandboxManager(const std::filesystem::path& project_dir);
  /// Ends the session (see the class comment).
  ~SandboxManager();
  /// Takes over @p other's session.
  SandboxManager(SandboxManager&& other) noexcept;
  /// Ends this session, then takes over @p other's.
  SandboxManager& operator=(SandboxManager&& other) noexcept;
  SandboxManager(const SandboxManager&) = delete;             ///< Not copyable.
  SandboxManager& operator=(const SandboxManager&) = delete;  ///< Not copyable.

  /// Creates the sandbox `d-<delegation_id>`: a copy of the project snapshot, or of
  /// @p chain_from's current state (its patch is then cumulative against the snapshot).
  /// @return std::nullopt on failure: an invalid id (`"../x"`), an id already used in this
  ///   session, an unknown @p chain_from, an I/O error.
  std::optional<SandboxInfo> create_sandbox(const std::string& delegation_id,
                                            std::optional<SandboxInfo> chain_from = std::nullopt);

  /// Computes the delegation's patch against the snapshot; the sandbox is kept.
  /// @return std::nullopt on failure (e.g. an unknown or discarded sandbox).
  std::optional<SandboxResult> finalize_sandbox(const SandboxInfo& info);

  /// Removes a sandbox of this session. A path that is not one of this session's sandboxes
  /// is refused: nothing is removed, and nothing is thrown.
  void discard_sandbox(const SandboxInfo& info);

  /// Stores @p patch as the pending patch of @p delegation_id, atomically.
  /// @return the patch file, or std::nullopt on failure (e.g. an invalid id).
  std::optional<std::filesystem::path> write_pending_patch(const std::string& delegation_id,
                                                           const std::string& patch);

  /// The project directory, as given to the constructor.
  const std::filesystem::path& project_dir() const;
  /// The session directory `<root>/<session-id>`; empty if the constructor failed.
  const std::filesystem::path& session_base() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// RAII guard: points the engine's tools at a sandbox for a scope, and back (see
/// patchbox::ScopedSandbox). Restores also when the scope is left by an exception; the
/// destructor never throws.
class ScopedSandbox {
 public:
  /// The engine's swap function: re-points its tools at @p path.
  using SwapDirFn = void (*)(const std::filesystem::path& path, void* user_data);

  /// Calls `swap_fn(sandbox_path, user_data)` now and `swap_fn(original_path, user_data)` on
  /// destruction. A null @p swap_fn is a no-op.
  ScopedSandbox(SwapDirFn swap_fn, void* user_data, const std::filesystem::path& sandbox_path,
                const std::filesystem::path& original_path);
  /// Restores the original path; swallows anything the swap function throws.
  ~ScopedSandbox();
  /// Takes over @p other's restore duty.
  ScopedSandbox(ScopedSandbox&& other) noexcept;
  ScopedSandbox& operator=(ScopedSandbox&&) = delete;       ///< Not assignable.
  ScopedSandbox(const ScopedSandbox&) = delete;             ///< Not copyable.
  ScopedSandbox& operator=(const ScopedSandbox&) = delete;  ///< Not copyable.

 private:
  SwapDirFn swap_fn_;
  void* user_data_;
  std::filesystem::path original_path_;
};

}  // namespace entropic

#endif  // ENTROPIC_CORE_SANDBOX_H
