/// @file patchbox/plan.hpp
/// @brief Plan sandboxes from C++: every write of a plan's Execute phase goes to a sandbox per
/// resource, so the Apply phase can review a diff, roll back, or commit every sandbox of the
/// plan all or nothing.
///
/// The C++ face of the Rust `patchbox::plan` layer. A patchbox::plan::SandboxManager over a
/// root (the library's directory, never the project) makes one Sandbox per (plan, resource)
/// lazily; an actor writes through Sandbox::get_path(); SandboxManager::commit_all() brings
/// every sandbox of the plan into its original, or none (a conflict anywhere refuses the whole
/// plan before anything is written; a failed commit rolls back those already committed).
///
/// Strategies are named by strings (see patchbox::plan::strategy): `none`, `copy_on_write`,
/// `overlay`, `git_worktree`, or a CustomStrategy's registered name. A name neither built in
/// nor registered is refused with SandboxError. Every failure throws a subclass of patchbox::plan::SandboxError (itself a
/// patchbox::Error of ErrorKind::Plan), except a bug inside the library (ErrorKind::Internal).
/// Link the CMake target `patchbox::patchbox`. A SandboxManager and its sandboxes may be used
/// from any number of threads at once.
///
/// @code
/// namespace plan = patchbox::plan;
/// auto mgr = plan::SandboxManager::open("/path/to/root");
/// auto sb = mgr.get_or_create_sandbox("plan-1", "docs", "/path/to/project",
///                                     plan::strategy::copy_on_write);
/// std::ofstream(sb->get_path("notes.txt")) << "two\n";  // the project is untouched
/// for (const plan::DiffEntry& e : sb->diff().entries) std::cout << e.path << '\n';
/// std::vector<plan::CommitResult> results = mgr.commit_all("plan-1");  // all or nothing
/// if (!results.empty() && !results[0].success) std::cerr << *results[0].error << '\n';
/// mgr.cleanup_all("plan-1");
/// @endcode
#ifndef PATCHBOX_PLAN_HPP
#define PATCHBOX_PLAN_HPP

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "patchbox/error.hpp"
#include "patchbox/provenance.hpp"

/// patchbox's C++ API.
namespace patchbox {
/// Plan sandboxes (the Rust `patchbox::plan` layer).
namespace plan {

// ---- lifecycle -------------------------------------------------------------------------------

/// Where a sandbox is in its lifecycle. Every Sandbox operation checks its step against
/// can_transition() first, so an operation refused for its status has changed nothing.
///
/// @code
/// Pending -> Created -> Active -> Committed -> CleanedUp
///               |          |          `-> RolledBack  (undo of the commit)
///               |          `-> RolledBack -> Active | CleanedUp
///               `-> Errored <- Active;  Errored -> CleanedUp
/// @endcode
enum class Status {
  Pending,     ///< The sandbox object exists; nothing is on disk yet.
  Created,     ///< The sandbox environment exists; no write routed to it yet.
  Active,      ///< Writes are routed here (the first get_path() activates a created sandbox).
  Committed,   ///< Its changes are in the original resource.
  RolledBack,  ///< Its changes were discarded, or its commit undone; may become Active again.
  CleanedUp,   ///< Every artefact is removed. Terminal.
  Errored,     ///< An unrecoverable error occurred; only cleanup remains.
};

/// The plan executors' documented name of Status.
using SandboxStatus = Status;

/// Whether a sandbox in @p from may move to @p to: the whole lifecycle in one table (the same
/// as the Rust `Status::can_transition`, which the tests check pair by pair).
bool can_transition(Status from, Status to) noexcept;

/// can_transition() as an exception.
/// @throws SandboxStateError naming both statuses when the step is not allowed.
void assert_transition(Status from, Status to);

/// The snake_case name (`"pending"`, `"created"`, `"active"`, `"committed"`, `"rolled_back"`,
/// `"cleaned_up"`, `"errored"`), as the Rust library, its state files and the CLI spell it.
const char* to_string(Status status) noexcept;

/// The status named @p name (see to_string(Status)); nullopt for an unknown name.
std::optional<Status> status_from_string(const std::string& name) noexcept;

/// The status names of the linked Rust library, in its order (the tests check Status agrees).
std::vector<std::string> library_status_names();

/// The linked Rust library's own transition table, by name (for the tests' comparison with
/// can_transition(); use can_transition()).
bool library_can_transition(Status from, Status to);

// ---- strategies ------------------------------------------------------------------------------

/// Strategy names. A strategy is a `std::string` so that one added to the Rust library is
/// usable without a header change; these are the built-in ones.
namespace strategy {
/// Pass-through: writes go to the original at once; cannot be rolled back.
inline constexpr const char* none = "none";
/// A copy of the resource; committed through the atomic 3-way apply.
inline constexpr const char* copy_on_write = "copy_on_write";
/// An OverlayFS view over a snapshot (falls back to copy_on_write); committed like it.
inline constexpr const char* overlay = "overlay";
/// A git worktree of the resource's repository, on a branch of its own.
inline constexpr const char* git_worktree = "git_worktree";
/// A transaction on a SQLite database; committed last by commit_all.
inline constexpr const char* transaction_rollback = "transaction_rollback";
}  // namespace strategy

/// The strategy names the linked library knows, in its order.
std::vector<std::string> library_strategy_names();

// ---- values ----------------------------------------------------------------------------------

/// Clock of every time point of this header.
using Clock = std::chrono::system_clock;

/// What a created sandbox is: where its files are and what they stand for.
struct SandboxContext {
  std::string sandbox_id;              ///< The sandbox's id (a ULID).
  std::filesystem::path sandbox_path;  ///< Where the sandboxed files are (`none`: the original).
  std::filesystem::path original_path;  ///< The original resource.
  std::string resource_id;             ///< The resource's id.
  std::string plan_id;                 ///< The plan that owns the sandbox.
  Clock::time_point created_at;        ///< When it was created (millisecond precision).
  std::map<std::string, std::string> metadata;  ///< Strategy-specific facts (`git.branch`, …).
};

/// The outcome of one commit.
struct CommitResult {
  std::string sandbox_id;                 ///< The sandbox committed.
  bool success = false;                   ///< Whether the original now holds its changes.
  /// What names the commit: the undo record (`copy_on_write`, `overlay`), the commit id
  /// (`git_worktree`); none for `none`.
  std::optional<std::string> commit_ref;
  std::vector<std::string> changed_files;  ///< Files modified, relative to the original.
  std::vector<std::string> added_files;    ///< Files created, relative to the original.
  std::vector<std::string> deleted_files;  ///< Files removed, relative to the original.
  std::optional<std::string> error;        ///< The error when success is false.
  Clock::time_point timestamp;             ///< When the commit happened (millisecond precision).
  std::map<std::string, std::string> metadata;  ///< Strategy-specific facts.
  /// The result as the JSON record `patchbox plan commit --json` prints one of per sandbox
  /// (see `docs/json.md`); filled in by the library, empty in a result a custom strategy
  /// builds.
  std::string json;
};

/// What happened to one path of a diff.
enum class DiffOp {
  Added,     ///< Not in the original, in the sandbox.
  Modified,  ///< In both, different (content, mode or type).
  Deleted,   ///< In the original, not in the sandbox.
};

/// `"added"`, `"modified"` or `"deleted"`.
const char* to_string(DiffOp op) noexcept;

/// One path of a diff, with its content on both sides (a symlink's content is its target).
struct DiffEntry {
  std::string path;                   ///< Relative to the resource, `/`-separated.
  DiffOp operation = DiffOp::Modified;  ///< What happened to it.
  std::optional<std::string> before;  ///< The bytes before (none when added).
  std::optional<std::string> after;   ///< The bytes after (none when deleted).
};

/// A sandbox's changes against what it was created from.
struct SandboxDiff {
  std::vector<DiffEntry> entries;  ///< One entry per changed path, sorted by path.
  std::string patch;               ///< The same changes as a patch `git apply` accepts (bytes).
  /// The paths with operation @p op.
  std::vector<std::string> paths(DiffOp op) const;
};

// ---- errors ----------------------------------------------------------------------------------

/// The base of every plan-layer error: a patchbox::Error of ErrorKind::Plan, so a handler of
/// patchbox::Error catches it too. Thrown as such for a failure that is none of the subclasses
/// (bad input such as an unknown strategy or plan id, a path leaving the sandbox, I/O).
class SandboxError : public Error {
 public:
  /// An error about @p sandbox_id (empty: none) whose what() is @p message.
  explicit SandboxError(const std::string& message, std::string sandbox_id = {});
  /// Out of line: anchors the vtable and type info in the library.
  ~SandboxError() override;
  /// Copyable, as every exception type.
  SandboxError(const SandboxError&) = default;
  /// Copy assignment.
  SandboxError& operator=(const SandboxError&) = default;
  /// The sandbox concerned (for an atomic commit: the one whose check or commit failed);
  /// empty when none or unknown.
  const std::string& sandbox_id() const noexcept { return sandbox_id_; }

 private:
  std::string sandbox_id_;
};

/// The sandbox could not be made; nothing of it is left on disk.
class SandboxCreationError : public SandboxError {
 public:
  /// An error about @p sandbox_id (empty: unknown) whose what() is @p message.
  using SandboxError::SandboxError;
  /// Out of line, as the base's.
  ~SandboxCreationError() override;
  /// Copyable.
  SandboxCreationError(const SandboxCreationError&) = default;
  /// Copy assignment.
  SandboxCreationError& operator=(const SandboxCreationError&) = default;
};

/// A commit was refused or failed; the original is as it was.
class SandboxCommitError : public SandboxError {
 public:
  /// An error about @p sandbox_id naming @p files.
  SandboxCommitError(const std::string& message, std::string sandbox_id,
                     std::vector<std::string> files = {});
  /// Out of line, as the base's.
  ~SandboxCommitError() override;
  /// Copyable.
  SandboxCommitError(const SandboxCommitError&) = default;
  /// Copy assignment.
  SandboxCommitError& operator=(const SandboxCommitError&) = default;
  /// The files concerned (conflicts, files the user changed meanwhile), if any.
  const std::vector<std::string>& files() const noexcept { return files_; }

 private:
  std::vector<std::string> files_;
};

/// A rollback was refused or failed.
class SandboxRollbackError : public SandboxError {
 public:
  /// An error about @p sandbox_id naming @p files.
  SandboxRollbackError(const std::string& message, std::string sandbox_id,
                       std::vector<std::string> files = {});
  /// Out of line, as the base's.
  ~SandboxRollbackError() override;
  /// Copyable.
  SandboxRollbackError(const SandboxRollbackError&) = default;
  /// Copy assignment.
  SandboxRollbackError& operator=(const SandboxRollbackError&) = default;
  /// The files concerned (for an undo of a commit: those changed since), if any.
  const std::vector<std::string>& files() const noexcept { return files_; }

 private:
  std::vector<std::string> files_;
};

/// The operation is not valid in the sandbox's status (see can_transition()).
class SandboxStateError : public SandboxError {
 public:
  /// An error about @p sandbox_id (empty: unknown) whose what() is @p message.
  using SandboxError::SandboxError;
  /// Out of line, as the base's.
  ~SandboxStateError() override;
  /// Copyable.
  SandboxStateError(const SandboxStateError&) = default;
  /// Copy assignment.
  SandboxStateError& operator=(const SandboxStateError&) = default;
};

/// SandboxManager::commit_all() failed other than at the sandbox level (a sandbox-level
/// failure is returned as the one failed CommitResult), or its rollback failed. The sandboxes
/// it had committed were rolled back, newest first (rolled_back_ids()); those whose rollback
/// failed still hold their commit in the original (failed_rollback_ids()).
class AtomicCommitError : public SandboxError {
 public:
  /// The error of a plan's commit_all; @p failed_sandbox_id is the sandbox that failed.
  AtomicCommitError(const std::string& message, std::string failed_sandbox_id,
                    std::vector<std::string> rolled_back_ids,
                    std::vector<std::string> failed_rollback_ids);
  /// Out of line, as the base's.
  ~AtomicCommitError() override;
  /// Copyable.
  AtomicCommitError(const AtomicCommitError&) = default;
  /// Copy assignment.
  AtomicCommitError& operator=(const AtomicCommitError&) = default;
  /// Sandboxes whose commit was undone, in the order they were undone.
  const std::vector<std::string>& rolled_back_ids() const noexcept { return rolled_back_; }
  /// Sandboxes whose commit could not be undone.
  const std::vector<std::string>& failed_rollback_ids() const noexcept { return failed_; }

 private:
  std::vector<std::string> rolled_back_;
  std::vector<std::string> failed_;
};

/// The plan error kinds of the linked library (`plan_sandbox`, `plan_creation`, …), each of
/// which the glue maps to one class above (the tests check none is missing).
std::vector<std::string> library_plan_error_kinds();

// ---- sandboxes -------------------------------------------------------------------------------

/// One resource's sandbox in one plan. Every method checks its step against the lifecycle
/// first: a refused step throws SandboxStateError and changes nothing.
///
/// The manager hands out the built-in implementation (over the Rust sandbox); the class is
/// abstract so an engine can put its own (a test double, a remote resource) behind the same
/// interface. Implementations must be thread-safe: sandboxes are shared as shared_ptr.
class Sandbox {
 public:
  /// Destroys the sandbox object (not its files: see cleanup()).
  virtual ~Sandbox();
  /// Its id (a ULID for the built-in strategies).
  virtual std::string sandbox_id() const = 0;
  /// The name of the strategy it implements (see patchbox::plan::strategy).
  virtual std::string strategy() const = 0;
  /// Its status now.
  virtual Status status() const = 0;
  /// Its context; nullopt before create().
  virtual std::optional<SandboxContext> context() const = 0;
  /// Makes the sandbox environment (Pending → Created). The manager's sandboxes are created
  /// already. @throws SandboxCreationError (nothing left on disk), SandboxStateError.
  virtual SandboxContext create(const std::string& plan_id) = 0;
  /// Where @p resource_relative lives in the sandbox; makes a created sandbox active.
  /// @throws SandboxError for an absolute path, `..`, or a path through a symlink out of it.
  virtual std::filesystem::path get_path(const std::filesystem::path& resource_relative) = 0;
  /// Its changes against what it was made from (per file, and as a patch).
  virtual SandboxDiff diff() const = 0;
  /// Checks, writing nothing, that commit() would succeed now.
  /// @throws SandboxCommitError naming the conflicting files.
  virtual void check_commit() const = 0;
  /// Brings its changes into the original (Active → Committed).
  /// @throws SandboxCommitError (the original is unchanged), SandboxStateError.
  virtual CommitResult commit(const std::optional<std::string>& message = std::nullopt) = 0;
  /// From Active: discards its changes. From Committed: undoes the commit in the original
  /// (refused, naming the files, when they changed since).
  /// @throws SandboxRollbackError, SandboxStateError.
  virtual void rollback() = 0;
  /// Removes every artefact (→ CleanedUp); an active sandbox's changes are discarded.
  /// Idempotent.
  virtual void cleanup() = 0;
  /// The content of @p resource_relative in the sandbox; nullopt when it does not exist there.
  /// The only way into a custom strategy's sandbox (its get_path() refuses file paths).
  /// Default: reads the file at get_path().
  /// @throws SandboxError (bad path, the strategy failed), SandboxStateError.
  virtual std::optional<std::string> read(const std::filesystem::path& resource_relative);
  /// Sets the content of @p resource_relative in the sandbox (making a created sandbox
  /// active). Default: writes the file at get_path(), making its directories.
  /// @throws SandboxError (bad path, the strategy failed), SandboxStateError.
  virtual void write(const std::filesystem::path& resource_relative, const std::string& data);

 protected:
  /// For implementations.
  Sandbox() = default;
  /// For implementations (protected: no slicing copy through the interface).
  Sandbox(const Sandbox&) = default;
  /// For implementations (protected: no slicing assignment through the interface).
  Sandbox& operator=(const Sandbox&) = default;
};

/// A sandbox of the `none` strategy. The manager hands out every sandbox as an instance of its
/// strategy's class (the plan executors' documented names), so
/// `std::dynamic_pointer_cast<plan::CopyOnWriteSandbox>(sb)` tells a strategy's sandboxes
/// apart; the classes add nothing to Sandbox, and only the library makes them.
class NoSandbox : public Sandbox {
 protected:
  /// For the library.
  NoSandbox() = default;
};

/// A sandbox of the `copy_on_write` strategy (see NoSandbox).
class CopyOnWriteSandbox : public Sandbox {
 protected:
  /// For the library.
  CopyOnWriteSandbox() = default;
};

/// A sandbox of the `overlay` strategy (see NoSandbox).
class OverlaySandbox : public Sandbox {
 protected:
  /// For the library.
  OverlaySandbox() = default;
};

/// A sandbox of the `git_worktree` strategy (see NoSandbox).
class GitWorktreeSandbox : public Sandbox {
 protected:
  /// For the library.
  GitWorktreeSandbox() = default;
};

/// A sandbox of the `transaction_rollback` strategy (see NoSandbox).
class TransactionSandbox : public Sandbox {
 protected:
  /// For the library.
  TransactionSandbox() = default;
};

/// A sandbox of a registered CustomStrategy (see NoSandbox).
class CustomSandbox : public Sandbox {
 protected:
  /// For the library.
  CustomSandbox() = default;
};

// ---- custom strategies ---------------------------------------------------------------------

/// Which sandbox a CustomStrategy operation is about.
struct SandboxRef {
  std::string sandbox_id;   ///< The library's id of the sandbox (a ULID; stable across restarts).
  std::string plan_id;      ///< The plan that owns it.
  std::string resource_id;  ///< The resource it isolates.
  Clock::time_point created_at;  ///< When it was created (millisecond precision).
  /// What create() returned, plus `original_path` and `strategy`, which the library sets.
  std::map<std::string, std::string> metadata;
};

/// A custom sandbox's changes, as its strategy reports them.
struct DiffView {
  std::string sandbox_id;          ///< The sandbox.
  std::vector<DiffEntry> entries;  ///< One entry per changed path (the library sorts them).
  std::string summary;  ///< One line; empty: the library counts (`1 added, 2 modified`).
};

/// An isolation strategy written in C++: the nine operations, each about one sandbox.
///
/// Register an instance with SandboxManager::register_strategy(); then
/// get_or_create_sandbox(plan, resource, path, name) makes sandboxes of it, and commit_all(),
/// rollback_all(), cleanup_all() drive them with the built-in ones (all or nothing). The
/// library keeps the lifecycle (status checks, state on disk); the strategy keeps the content.
/// Actors reach it with Sandbox::read() / Sandbox::write().
///
/// The library calls one operation of a sandbox at a time, but one instance serves every
/// sandbox of its name, possibly from several threads: implementations must be thread-safe.
/// Whatever an operation throws becomes the error of the step. A commit() throwing a
/// plan::SandboxError (SandboxCommitError, …) is a sandbox-level failure: alone a
/// SandboxCommitError, inside commit_all() the one failed CommitResult with the others rolled
/// back. Anything else it throws is unexpected: alone a SandboxError of the base class,
/// inside commit_all() an AtomicCommitError with the others rolled back;
/// no exception ever reaches the Rust side. All nine are pure virtual, so a strategy lacking
/// one does not compile (the C++ form of the registry's protocol check).
class CustomStrategy {
 public:
  /// Destroyed when the last manager using it is.
  virtual ~CustomStrategy();
  /// Makes the sandbox over @p original (Pending → Created); returns metadata to keep with it.
  virtual std::map<std::string, std::string> create(const SandboxRef& sandbox,
                                                    const std::filesystem::path& original) = 0;
  /// The content of @p path (resource-relative, `/`-separated); nullopt when absent.
  virtual std::optional<std::string> read(const SandboxRef& sandbox, const std::string& path) = 0;
  /// Sets the content of @p path in the sandbox (never in the original).
  virtual void write(const SandboxRef& sandbox, const std::string& path,
                     const std::string& data) = 0;
  /// The sandbox's changes against what it was made from.
  virtual DiffView diff(const SandboxRef& sandbox) = 0;
  /// Brings the changes into the original; returns what names the commit, if anything.
  virtual std::optional<std::string> commit(const SandboxRef& sandbox,
                                            const std::optional<std::string>& message) = 0;
  /// @p after_commit false: discards the changes. True: undoes the commit in the original
  /// (keeping the changes in the sandbox, so the plan may commit again).
  virtual void rollback(const SandboxRef& sandbox, bool after_commit) = 0;
  /// Records the sandbox's state now under @p checkpoint_id.
  virtual void checkpoint(const SandboxRef& sandbox, const std::string& checkpoint_id) = 0;
  /// Makes the sandbox what it was at @p checkpoint_id.
  virtual void restore_checkpoint(const SandboxRef& sandbox,
                                  const std::string& checkpoint_id) = 0;
  /// Removes everything made for the sandbox.
  virtual void cleanup(const SandboxRef& sandbox) = 0;
  /// Whether rollback() after a commit works (commit_all commits the others last). Default: yes.
  virtual bool is_rollbackable() const { return true; }

 protected:
  /// For implementations.
  CustomStrategy() = default;
  /// For implementations (protected: no slicing copy through the interface).
  CustomStrategy(const CustomStrategy&) = default;
  /// For implementations (protected: no slicing assignment through the interface).
  CustomStrategy& operator=(const CustomStrategy&) = default;
};

/// The plan executors' documented name of CustomStrategy (their nine-method
/// `SandboxStrategyProtocol`; in C++ an abstract class, so a strategy lacking an operation
/// does not compile).
using SandboxStrategyProtocol = CustomStrategy;

// ---- boundaries ------------------------------------------------------------------------------

/// A resource of a plan, for the boundary functions of SandboxManager.
struct Resource {
  std::string id;              ///< Its id.
  /// What it is: `"git_repository"`, `"directory"`, `"file"`, `"database"`, or another name.
  std::string kind = "directory";
  std::filesystem::path path;  ///< Where it is.
  std::optional<std::string> parent;  ///< The resource it belongs to, if declared.
  /// The strategy of its sandbox when it is a boundary (default: `git_worktree` for a
  /// repository, `copy_on_write` otherwise).
  std::optional<std::string> strategy;
};

/// The resources of a plan. A parent must be added before its children. Plain data: the
/// registry is checked (duplicate ids, unknown parents) where a SandboxManager uses it.
struct ResourceRegistry {
  std::vector<Resource> resources;  ///< In the order added.
  /// Appends @p r.
  ResourceRegistry& add(Resource r) {
    resources.push_back(std::move(r));
    return *this;
  }
};

/// A resource's view of its boundary's sandbox.
struct ResourceSandbox {
  std::shared_ptr<Sandbox> sandbox;  ///< The boundary's sandbox, shared by its resources.
  std::filesystem::path prefix;      ///< The resource's place under its boundary.
  /// Where @p resource_relative (relative to the resource) lives in the sandbox.
  std::filesystem::path get_path(const std::filesystem::path& resource_relative) const {
    return sandbox->get_path(prefix / resource_relative);
  }
};

// ---- the manager -----------------------------------------------------------------------------

/// The registry of custom strategies (declared in `<patchbox/strategy_registry.hpp>`).
class SandboxStrategyRegistry;

/// One plan executor's sandboxes, under one root (`<root>/plans`).
///
/// Thread-safe: one manager may be used from any number of threads; concurrent first calls of
/// get_or_create_sandbox() for one (plan, resource) make one sandbox, and every call returns
/// the same Sandbox object while someone holds it. Sandbox state is on disk, so a manager
/// opened over the same root after a crash finds the sandboxes again, and an interrupted
/// commit_all() is rolled back when it opens. On destruction, sandboxes holding no
/// uncommitted work are cleaned up; an active sandbox with changes is kept for the next
/// manager. Move-only; a moved-from manager throws Error (ErrorKind::Internal).
class SandboxManager {
 public:
  /// Opens the manager of @p root (empty: `$PATCHBOX_ROOT`, else `$HOME/.entropic/sandbox`).
  /// @throws SandboxError when the root cannot be made or read.
  static SandboxManager open(const std::filesystem::path& root);
  /// Opens the manager of @p root (empty: as open(root)) whose custom strategies are those of
  /// @p registry (shared: strategies registered there later are seen too, and
  /// register_strategy() registers into it). Include `<patchbox/strategy_registry.hpp>`.
  /// @throws SandboxError when the root cannot be made or read.
  static SandboxManager open(const std::filesystem::path& root,
                             const SandboxStrategyRegistry& registry);
  /// Closes the manager (see the class notes: sandboxes without work are cleaned up).
  ~SandboxManager();
  /// Move-only.
  SandboxManager(SandboxManager&&) noexcept;
  /// Move assignment.
  SandboxManager& operator=(SandboxManager&&) noexcept;
  /// Not copyable.
  SandboxManager(const SandboxManager&) = delete;
  /// Not copyable.
  SandboxManager& operator=(const SandboxManager&) = delete;

  /// The root (canonical).
  const std::filesystem::path& root() const;

  /// The sandbox of (@p plan_id, @p resource_id), made and created on first use with
  /// @p strategy over @p original_path (a directory). Later calls return the same sandbox,
  /// whatever strategy they name.
  /// @throws SandboxError (bad id, unknown strategy), SandboxCreationError.
  std::shared_ptr<Sandbox> get_or_create_sandbox(const std::string& plan_id,
                                                 const std::string& resource_id,
                                                 const std::filesystem::path& original_path,
                                                 const std::string& strategy);
  /// The sandbox of (@p plan_id, @p resource_id), or nullptr if none was made.
  std::shared_ptr<Sandbox> get_sandbox(const std::string& plan_id,
                                       const std::string& resource_id) const;
  /// Every sandbox of @p plan_id, in creation order.
  std::vector<std::shared_ptr<Sandbox>> list_sandboxes(const std::string& plan_id) const;
  /// The ids of every plan with sandboxes.
  std::vector<std::string> list_plans() const;
  /// The plans and their sandboxes as JSON: the array of plan records `patchbox plan list
  /// --json` prints (see `docs/json.md`) — every plan, or only @p plan_id when given (a plan
  /// with no sandboxes gets a record with none).
  std::string plans_json(const std::optional<std::string>& plan_id = std::nullopt) const;
  /// The changes of the plan's Created and Active sandboxes as JSON: the array of plan diff
  /// records `patchbox plan diff --json` prints (files with their change kind and line
  /// counts, and the patch text; see `docs/json.md`).
  /// @throws SandboxError when a sandbox's diff cannot be computed.
  std::string diff_json(const std::string& plan_id) const;

  /// Commits every Created/Active sandbox of the plan, all or nothing: every one is checked
  /// first (a conflict refuses the plan, nothing written); then each commits (rollbackable
  /// strategies first), and when one fails the committed ones are rolled back newest first.
  /// @return every result (all successful); or, after a sandbox-level failure (a conflict, a
  ///   refused lock, a custom strategy throwing a plan::SandboxError) and its rollback, the
  ///   one failed result: `success == false`, `error` the reason, `metadata["rolled_back_ids"]`
  ///   the ids undone (comma-separated), `metadata["plan_id"]`.
  /// @throws AtomicCommitError for any other failure (a custom strategy throwing something
  ///   else, commits that could not be made durable) or when a rollback failed, with the ids
  ///   rolled back and those that could not be.
  std::vector<CommitResult> commit_all(const std::string& plan_id);
  /// commit_all() with what produced the work: each CommitResult::metadata carries it under
  /// `provenance.command` (a JSON array), `provenance.cwd`, `provenance.exit_status`,
  /// `provenance.started_ms` and `provenance.ended_ms` (the fields that are set).
  /// @throws AtomicCommitError as commit_all().
  std::vector<CommitResult> commit_all(const std::string& plan_id, const Provenance& provenance);
  /// Rolls back every Active and Committed sandbox of the plan; the first error is thrown
  /// after trying them all.
  void rollback_all(const std::string& plan_id);
  /// Cleans up every sandbox of the plan and forgets them; the first error is thrown after
  /// trying them all.
  void cleanup_all(const std::string& plan_id);
  /// Cleans up sandboxes whose work is over (Committed, RolledBack, Errored) and remains of
  /// interrupted creations; returns how many were removed.
  std::size_t cleanup_abandoned();

  /// The boundary key of resource @p resource_id of @p registry: the id of the resource whose
  /// sandbox it shares (nearest repository, else outermost declared directory, else itself).
  /// Cached per resource id until clear_boundary_cache().
  /// @throws SandboxError (unknown resource, a bad registry).
  std::string resolve_sandbox_key(const std::string& resource_id,
                                  const ResourceRegistry& registry);
  /// The sandbox of the boundary resource @p resource_id belongs to, with its place there.
  /// @throws SandboxError, SandboxCreationError.
  ResourceSandbox get_or_create_sandbox_for_resource(const std::string& plan_id,
                                                     const std::string& resource_id,
                                                     const ResourceRegistry& registry);
  /// Drops the boundary cache (call when the registry changes).
  void clear_boundary_cache();

  /// Registers @p strategy under @p name (1 to 64 of `A-Z a-z 0-9 _ - .`), for this manager:
  /// get_or_create_sandbox(plan, resource, path, name) then makes sandboxes of it. Sandboxes of
  /// @p name found on disk (a restart) are reopened now.
  /// @throws SandboxError when the name is a built-in strategy's, already registered, or
  /// malformed, or @p strategy is null.
  void register_strategy(const std::string& name, std::shared_ptr<CustomStrategy> strategy);
  /// Whether a custom strategy is registered under @p name.
  bool has_custom_strategy(const std::string& name) const;

 private:
  struct Impl;
  explicit SandboxManager(std::unique_ptr<Impl> impl);
  Impl& impl() const;
  std::unique_ptr<Impl> impl_;
};

/// The plan family's manager under the one naming rule: each family is a namespace with its
/// `Manager` (patchbox::session::Manager, patchbox::plan::Manager; in Rust
/// `patchbox::plan::Manager`, in Python `patchbox.plan.Manager`). SandboxManager is the plan
/// executors' documented name, and the same type.
using Manager = SandboxManager;

}  // namespace plan
}  // namespace patchbox

#endif  // PATCHBOX_PLAN_HPP
