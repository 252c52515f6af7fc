/// @file patchbox/sandbox.hpp
/// @brief patchbox's C++17 API: session sandboxes for agent engines.
///
/// An engine session snapshots the user's project into `<root>/<session>/base/`; each delegated
/// sub-agent works in its own copy `<root>/<session>/d-<id>/`; its work comes back as a
/// git-style patch that `git apply` accepts, or waits in `pending/<id>.patch` for review. The
/// user's project is never written by a session::Manager.
///
/// Applying a patch to the project, once the user consents, is the consumer side:
/// patchbox::apply_patch() and patchbox::undo_apply() in `<patchbox/apply.hpp>` (include it
/// where you apply). This header includes `<patchbox/error.hpp>`, home of patchbox::Error.
///
/// Link the CMake target `patchbox::patchbox`. Every failure throws patchbox::Error. One
/// session::Manager may be used from any number of threads at once.
///
/// @code
/// namespace session = patchbox::session;
/// session::Manager mgr("/path/to/project");
/// auto sb = mgr.create_sandbox("fix-tests");
/// // ... the delegation edits files under sb.path ...
/// auto done = mgr.complete_sandbox(sb, [](const session::SandboxResult& r) {
///   return r.files_touched.size() < 10 ? session::Decision::Accept : session::Decision::Reject;
/// });
/// @endcode
#ifndef PATCHBOX_SANDBOX_HPP
#define PATCHBOX_SANDBOX_HPP

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "patchbox/error.hpp"
#include "patchbox/provenance.hpp"

/// patchbox's C++ API.
namespace patchbox {

/// Progress of a snapshot or sandbox copy.
struct Progress {
  std::uint64_t files_done = 0;   ///< Files and symlinks copied so far.
  std::uint64_t files_total = 0;  ///< Files and symlinks to copy in all.
  std::uint64_t bytes_done = 0;   ///< Bytes copied so far.
};

/// The session family: one engine session snapshots the project once; each delegation gets
/// its own sandbox, whose work comes back as a patch. Rust: `patchbox::session`; Python:
/// `patchbox.session`. The plan family lives in patchbox::plan.
namespace session {

/// How a session's sandboxes are isolated (Options::isolation).
enum class Isolation {
  /// Every sandbox is a copy of the session snapshot (reflinked where the filesystem can).
  Copy,
  /// Every sandbox is an overlay mount over one materialized copy of the snapshot: the
  /// kernel's OverlayFS when the process may mount, else `fuse-overlayfs` when installed and
  /// `/dev/fuse` is usable, else a copy. Manager::isolation_mode() says which.
  Overlay,
  /// Overlay when it can be had, else copy.
  Auto,
};

/// The isolation a session's sandboxes got (Manager::isolation_mode, SandboxInfo::mode).
enum class IsolationMode {
  Copy,           ///< Copies of the snapshot.
  KernelOverlay,  ///< Kernel OverlayFS mounts.
  FuseOverlay,    ///< `fuse-overlayfs` mounts.
};

/// Settings for a Manager.
struct Options {
  /// The sandbox root. Empty: `$PATCHBOX_ROOT` if set, else `$HOME/.entropic/sandbox`.
  std::filesystem::path root;
  /// Called with copy progress while the base snapshot or a sandbox is copied. It runs on the
  /// library's copy threads, never concurrently with itself for one manager (calls are
  /// serialized by a mutex), and anything it throws is swallowed. It must not call back into
  /// the same manager.
  std::function<void(const Progress&)> progress;
  /// Recover dead sessions under the root when the manager starts: their unfinished
  /// delegations become pending patches marked "recovered".
  bool prune_on_start = true;
  /// Make each sandbox of a git project a work tree of its own private repository: a `.git`
  /// whose `HEAD` and index are the session's snapshot and whose objects are the user's,
  /// reached read-only. `git status`, `git diff`, `git log`, `git grep` and `git blame` in
  /// the sandbox then show the delegation's changes against the snapshot; what a tool
  /// commits, stages or tags stays in the private repository, which is in no patch and goes
  /// with the sandbox. `false`: sandboxes without `.git`. A project outside git never gets one.
  bool git_repo = true;
  /// How sandboxes are isolated. Empty: `$PATCHBOX_ISOLATION` (`copy`, `overlay`, `auto`) if
  /// set, else Isolation::Auto (an overlay where one can be mounted, else copies).
  std::optional<Isolation> isolation;
  /// Where Manager::deliver_pending_patch() stores pending patches: an object store
  /// shared with other machines, `s3://bucket/prefix` (endpoint, region and credentials from
  /// the AWS variables: `AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`,
  /// `AWS_SECRET_ACCESS_KEY`, `AWS_ALLOW_HTTP`) or a directory of the same layout. Empty: the
  /// local pending store under the root, and no network is touched.
  std::string store;
};

/// Where Manager::deliver_pending_patch() put a pending patch.
struct PendingDelivery {
  /// Which store took it.
  enum class Place {
    Local,   ///< The local pending store (no Options::store): #path is the patch file.
    Stored,  ///< The object store: #id there, in #url.
    Kept,    ///< The object store failed (#error); kept locally at #path, to be pushed later
             ///< (patchbox::push_pending(), `patchbox pending push --store URL`).
  };
  Place place = Place::Local;          ///< Which store took it.
  std::filesystem::path path;          ///< The local patch file (Local, Kept).
  std::string id;                      ///< Its id in the object store (Stored).
  std::string url;                     ///< The object store's URL (Stored).
  std::string error;                   ///< Why the object store failed (Kept).
};

/// A delegation's sandbox, as handed to the engine.
struct SandboxInfo {
  /// The sandbox directory `<session>/d-<id>`: the delegation works here.
  std::filesystem::path path;
  /// The delegation id.
  std::string delegation_id;
  /// The session's base snapshot the patch is computed against (a chained sandbox keeps its
  /// predecessor's, so its patch is cumulative).
  std::filesystem::path base_dir;
  /// How it is isolated: a copy, or an overlay mounted on `path`.
  IsolationMode mode = IsolationMode::Copy;
};

/// What a delegation changed.
struct SandboxResult {
  /// The git-style patch, empty when nothing changed. Raw bytes: file contents need not be
  /// UTF-8 (and `std::string` holds any bytes).
  std::string patch;
  /// Every path the patch touches, relative to the project, sorted.
  std::vector<std::filesystem::path> files_touched;
  /// The base snapshot directory.
  std::filesystem::path base_dir;
  /// The sandbox directory.
  std::filesystem::path head_dir;
  /// Paths the delegation added.
  std::vector<std::filesystem::path> added;
  /// Paths whose content, mode or type changed.
  std::vector<std::filesystem::path> modified;
  /// Paths the delegation deleted.
  std::vector<std::filesystem::path> deleted;
  /// New paths matching the project's ignore rules (build outputs…): not in the patch.
  std::vector<std::filesystem::path> ignored;
};

/// The consumer's answer when a delegation completes.
enum class Decision {
  Accept,  ///< The consumer takes the patch (and applies it itself).
  Reject,  ///< The patch goes to the pending store.
};

/// The outcome of Manager::complete_sandbox.
struct Completion {
  /// Where a completed delegation's work went.
  enum class Routed {
    Accepted,  ///< Accepted: the patch is in `result`.
    Pending,   ///< Stored as a pending patch at `pending_path`.
    Unchanged, ///< The delegation changed nothing; there was nothing to route.
  };
  /// What the delegation changed.
  SandboxResult result;
  /// Where it went.
  Routed routed = Routed::Unchanged;
  /// The pending patch file when `routed == Routed::Pending`.
  std::optional<std::filesystem::path> pending_path;
};

/// One engine session's sandboxes.
///
/// Constructing it creates and locks the session directory `<root>/<session-id>/`;
/// destroying it removes the base snapshot and every sandbox, keeps pending patches, and
/// removes the session directory when no pending patch is left in it. Dead sessions (a
/// crashed engine) are recovered into pending patches by the next manager (see
/// Options::prune_on_start).
///
/// Thread safety: every member function may be called from any number of threads at once
/// on one manager. Move-only; a moved-from manager throws Error (ErrorKind::Internal) from
/// every operation and returns empty paths.
class Manager {
 public:
  /// A manager for @p project_dir with the default Options.
  /// @throws Error (e.g. ErrorKind::NotADirectory, ErrorKind::Io).
  explicit Manager(const std::filesystem::path& project_dir);
  /// A manager for @p project_dir with explicit @p options.
  /// @throws Error (e.g. ErrorKind::NotADirectory, ErrorKind::Io).
  Manager(const std::filesystem::path& project_dir, const Options& options);
  /// Ends the session as described on the class. Never throws; a cleanup failure leaves
  /// files that the next prune recovers.
  ~Manager();
  /// Takes over @p other's session.
  Manager(Manager&& other) noexcept;
  /// Ends this manager's session, then takes over @p other's.
  Manager& operator=(Manager&& other) noexcept;
  Manager(const Manager&) = delete;             ///< Not copyable.
  Manager& operator=(const Manager&) = delete;  ///< Not copyable.

  /// Creates the sandbox `d-<delegation_id>`: a copy of the base snapshot (taken by the first
  /// call), or of @p chain_from's current state. A chained sandbox keeps its predecessor's
  /// `base_dir`, so its patch is cumulative against the session snapshot.
  /// @throws Error ErrorKind::InvalidId (e.g. `"../x"`), ErrorKind::IdInUse,
  ///   ErrorKind::UnknownSandbox (an unknown @p chain_from), ErrorKind::Io, …
  SandboxInfo create_sandbox(const std::string& delegation_id,
                             const std::optional<SandboxInfo>& chain_from = std::nullopt);

  /// Computes what the delegation changed: the patch against the base snapshot and the
  /// touched paths. The sandbox is kept.
  /// @throws Error ErrorKind::UnknownSandbox, ErrorKind::Io, …
  SandboxResult finalize_sandbox(const SandboxInfo& info);

  /// Removes a sandbox. Idempotent for this session's sandboxes.
  /// @throws Error ErrorKind::Containment when @p info is not a sandbox of this session (a
  ///   path outside the session base, or not `<session>/d-<id>`): nothing is removed.
  void discard_sandbox(const SandboxInfo& info);

  /// Stores @p patch (raw bytes) as the pending patch of @p delegation_id, atomically; returns
  /// the patch file. When the delegation was finalized by this manager, the base versions
  /// of the files it touched are kept beside it for 3-way merging.
  /// @throws Error ErrorKind::InvalidId, ErrorKind::Io, …
  std::filesystem::path write_pending_patch(const std::string& delegation_id,
                                            const std::string& patch);

  /// Stores @p patch as a pending patch of @p delegation_id where Options::store says, with
  /// the base versions of the files it touched (for a 3-way apply on another machine).
  /// Without a store this is write_pending_patch(). A failure of the store keeps the patch
  /// locally (PendingDelivery::Place::Kept); Error is thrown only when it could be kept
  /// nowhere.
  /// @throws Error ErrorKind::InvalidId, ErrorKind::Io, …
  PendingDelivery deliver_pending_patch(const std::string& delegation_id,
                                        const std::string& patch);

  /// deliver_pending_patch() with what produced the work — the command, its directory, exit
  /// status and times — kept in the store's record (or beside the patch kept locally):
  /// `patchbox pending show --store URL` prints it, and stored_record_json()
  /// (`<patchbox/store.hpp>`) carries it as `provenance`.
  /// @throws Error as deliver_pending_patch().
  PendingDelivery deliver_pending_patch(const std::string& delegation_id,
                                        const std::string& patch,
                                        const Provenance& provenance);

  /// write_pending_patch() with what produced the work — the command, its directory, exit
  /// status and times — kept beside the patch for review: `patchbox pending show` prints it,
  /// and pending_records_json() (`<patchbox/store.hpp>`) carries it as `provenance`.
  /// @throws Error as write_pending_patch().
  std::filesystem::path write_pending_patch(const std::string& delegation_id,
                                            const std::string& patch,
                                            const Provenance& provenance);

  /// Finalizes the sandbox, asks @p decide whether to accept the patch, then discards the
  /// sandbox. Reject, an empty @p decide and a @p decide that throws all send the patch to the
  /// pending store (default deny); an unchanged sandbox is not routed. @p decide runs on the
  /// calling thread. If storing the pending patch fails the sandbox is kept and Error thrown.
  /// @throws Error ErrorKind::UnknownSandbox, ErrorKind::Io, …
  Completion complete_sandbox(const SandboxInfo& info,
                              std::function<Decision(const SandboxResult&)> decide = {});

  /// The project directory (canonical).
  const std::filesystem::path& project_dir() const;
  /// The session directory `<root>/<session-id>` (canonical).
  const std::filesystem::path& session_base() const;
  /// The session id (a ULID: unique and time-sortable).
  const std::string& session_id() const;
  /// How this session's sandboxes are isolated; empty until the first create_sandbox decided
  /// it (with Isolation::Copy, always IsolationMode::Copy). Empty on a moved-from manager.
  std::optional<IsolationMode> isolation_mode() const;

 private:
  struct Impl;
  const Impl& impl() const;  // throws Error on a moved-from manager
  std::unique_ptr<Impl> impl_;
};

}  // namespace session

/// @name Names from before the family namespaces
/// The session family under the names it had at `patchbox::` before it moved into
/// patchbox::session; existing code keeps compiling. New code names `patchbox::session::…`.
/// @{
using SandboxManager = session::Manager;  ///< patchbox::session::Manager.
using session::Completion;
using session::Decision;
using session::Isolation;
using session::IsolationMode;
using session::Options;
using session::PendingDelivery;
using session::SandboxInfo;
using session::SandboxResult;
/// @}

/// RAII guard that points an engine's tools at a sandbox for a scope, and back.
///
/// The library never changes the process's working directory (it is process-wide and an
/// engine is threaded). Instead the engine gives a swap function that re-points its own tool
/// root: the guard calls it with the sandbox path when constructed, and with the original
/// path when destroyed — also when the scope is left by an exception.
///
/// @code
/// struct ToolRunner { std::filesystem::path cwd; } runner{project};
/// {
///   patchbox::ScopedSandbox guard([&](const std::filesystem::path& p) { runner.cwd = p; },
///                                 sb.path, project);
///   run_tool(runner);  // runs in sb.path
/// }                    // runner.cwd == project again
/// @endcode
///
/// Not copyable; movable (the moved-from guard restores nothing).
class ScopedSandbox {
 public:
  /// A C-style swap function: called with the path to switch to and the @p user_data given.
  using SwapDirFn = void (*)(const std::filesystem::path& path, void* user_data);

  /// Calls `swap_fn(sandbox_path, user_data)` now and `swap_fn(original_path, user_data)` on
  /// destruction. A null @p swap_fn makes the guard a no-op. What the first call throws
  /// propagates (and nothing is restored).
  ScopedSandbox(SwapDirFn swap_fn, void* user_data, const std::filesystem::path& sandbox_path,
                const std::filesystem::path& original_path);

  /// Calls `swap(sandbox_path)` now and `swap(original_path)` on destruction. An empty
  /// @p swap makes the guard a no-op. What the first call throws propagates (and nothing is
  /// restored).
  ScopedSandbox(std::function<void(const std::filesystem::path&)> swap,
                const std::filesystem::path& sandbox_path,
                const std::filesystem::path& original_path);

  /// Restores the original path. Never throws: an exception from the swap function is
  /// swallowed (throwing during unwinding would terminate the process).
  ~ScopedSandbox();

  /// Takes over @p other's restore duty.
  ScopedSandbox(ScopedSandbox&& other) noexcept;
  ScopedSandbox& operator=(ScopedSandbox&&) = delete;       ///< Not assignable.
  ScopedSandbox(const ScopedSandbox&) = delete;             ///< Not copyable.
  ScopedSandbox& operator=(const ScopedSandbox&) = delete;  ///< Not copyable.

  /// The sandbox path the tools point at.
  const std::filesystem::path& sandbox_path() const noexcept { return sandbox_; }
  /// The path restored on destruction.
  const std::filesystem::path& original_path() const noexcept { return original_; }
  /// Leaves the tools pointing at the sandbox: the destructor will not restore.
  void keep() noexcept;

 private:
  std::function<void(const std::filesystem::path&)> swap_;
  std::filesystem::path sandbox_;
  std::filesystem::path original_;
};

}  // namespace patchbox

#endif  // PATCHBOX_SANDBOX_HPP
