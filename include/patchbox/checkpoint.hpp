/// @file patchbox/checkpoint.hpp
/// @brief Checkpoints of plan sandboxes, and the phase hooks that take them: before Execute,
/// after a successful Execute, before Apply — and the rollback to the latest one when a phase
/// fails.
///
/// The C++ face of the Rust `patchbox::plan::checkpoint` and `patchbox::plan::phases`. A
/// checkpoint is not a copy of the sandbox: it records the sandbox's changes against its base
/// (content-addressed, so it costs what changed since the previous checkpoint), and a rollback
/// writes only the paths where the sandbox and the checkpoint differ (contents, modes,
/// symlinks, deleted and added files). Checkpoints live in the sandbox's own directory:
/// cleaning the sandbox up removes them. `none` cannot be checkpointed (its writes went to
/// the original). Errors are those of `<patchbox/plan.hpp>` (patchbox::plan::SandboxError and
/// its subclasses), plus PhaseError from PhaseRunner.
///
/// @code
/// namespace plan = patchbox::plan;
/// auto plans = plan::SandboxManager::open(root);
/// auto sb = plans.get_or_create_sandbox("p", "r", project, plan::strategy::copy_on_write);
/// auto checkpoints = plan::CheckpointManager::open(root);
/// plan::PhaseRunner runner(plans, &checkpoints);
/// try {
///   runner.execute("p", [&] { run_the_actor(sb); });  // throws: its writes are rolled back
/// } catch (const plan::PhaseError& e) {
///   std::cerr << e.what() << '\n';
/// }
/// runner.apply("p");  // commit_all between a pre_apply checkpoint and, on failure, its rollback
/// @endcode
#ifndef PATCHBOX_CHECKPOINT_HPP
#define PATCHBOX_CHECKPOINT_HPP

#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "patchbox/plan.hpp"

/// patchbox's C++ API.
namespace patchbox {
/// Plan sandboxes (the Rust `patchbox::plan` layer).
namespace plan {

/// The phases plan executors checkpoint at. CheckpointManager::create_checkpoint() also
/// accepts any other name as a free-form phase.
enum class Phase {
  PreExecute,   ///< Before the Execute phase (`"pre_execute"`).
  PostExecute,  ///< After a successful Execute phase (`"post_execute"`).
  PreApply,     ///< Before the Apply phase (`"pre_apply"`).
};

/// `"pre_execute"`, `"post_execute"` or `"pre_apply"` (the Rust `Phase::name`).
const char* to_string(Phase phase) noexcept;

/// A point-in-time state of a sandbox.
struct Checkpoint {
  std::string checkpoint_id;  ///< Its id (a ULID: ids sort in creation order).
  std::string sandbox_id;     ///< The sandbox.
  std::string plan_id;        ///< The plan.
  std::string phase;          ///< The phase it was taken at (see to_string(Phase)).
  Clock::time_point created_at;  ///< When (millisecond precision).
  std::map<std::string, std::string> metadata;  ///< The caller's metadata.
  /// Its manifest on disk (the changes it records and where their content is).
  std::filesystem::path snapshot_path;
};

/// Checkpoints of the sandboxes of one SandboxManager's root.
///
/// Thread-safe: checkpoints and rollbacks of one sandbox are serialized, those of different
/// sandboxes run in parallel. On destruction, the checkpoints this manager made are removed
/// unless keep() was called. Only the library's own sandboxes (those a SandboxManager hands
/// out) can be checkpointed. Move-only; a moved-from manager throws Error
/// (ErrorKind::Internal).
class CheckpointManager {
 public:
  /// The checkpoint manager of the sandboxes under @p root (the root the SandboxManager was
  /// opened with; nothing is read or made until the first checkpoint).
  static CheckpointManager open(const std::filesystem::path& root);
  /// open(), with file checkpoints also written to the object store @p store_url
  /// (`s3://bucket/prefix` with the AWS variables, or a directory of the same layout), so
  /// another machine's manager can restore_from_store() them. Stored checkpoints outlive the
  /// manager; delete_checkpoint() and prune_store() remove them.
  /// @throws SandboxError for a store URL that is not understood.
  static CheckpointManager open_with_store(const std::filesystem::path& root,
                                           const std::string& store_url);
  /// A checkpoint manager keeping its checkpoints in a folder of its own under the system temp
  /// folder (`$TMPDIR/patchbox-checkpoints-<ULID>`), as the plan executors' documentation
  /// places them; destroying it removes the folder with every checkpoint (unless keep()).
  static CheckpointManager open();
  /// Removes the checkpoints it made, unless keep() was called.
  ~CheckpointManager();
  /// Move-only.
  CheckpointManager(CheckpointManager&&) noexcept;
  /// Move assignment.
  CheckpointManager& operator=(CheckpointManager&&) noexcept;
  /// Not copyable.
  CheckpointManager(const CheckpointManager&) = delete;
  /// Not copyable.
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  /// Records the state of @p sandbox now. @p phase is `pre_execute`, `post_execute`,
  /// `pre_apply` (to_string(Phase)) or any other name.
  /// @throws SandboxError for `none` (its writes went to the original), for a sandbox that
  ///   is not the library's own (only library sandboxes can be checkpointed by this manager)
  ///   or for I/O; SandboxStateError for a sandbox never created.
  Checkpoint create_checkpoint(const std::shared_ptr<Sandbox>& sandbox, const std::string& plan_id,
                               const std::string& phase,
                               const std::map<std::string, std::string>& metadata = {});
  /// create_checkpoint() at one of the phases of Phase.
  Checkpoint create_checkpoint(const std::shared_ptr<Sandbox>& sandbox, const std::string& plan_id,
                               Phase phase,
                               const std::map<std::string, std::string>& metadata = {});
  /// Makes the checkpoint's sandbox exactly what it was at the checkpoint, in time
  /// proportional to the difference. Uses only the checkpoint's checkpoint_id and sandbox_id.
  /// @returns false when the checkpoint no longer exists (deleted, or its sandbox cleaned up).
  /// @throws SandboxError when this manager does not know the sandbox (attach() it first),
  ///   or for I/O.
  bool rollback_to(const Checkpoint& checkpoint);
  /// Writes into @p dest (a directory that must not exist yet) the whole tree the sandbox had
  /// at @p checkpoint — the documented full-copy snapshot, made on demand — leaving the
  /// sandbox as it is. Only `copy_on_write` and `overlay` checkpoints have a tree.
  /// @returns false when the checkpoint no longer exists.
  /// @throws SandboxError for a native checkpoint (`git_worktree`, SQLite, custom), or for I/O.
  bool materialize(const Checkpoint& checkpoint, const std::filesystem::path& dest);
  /// Makes the manager know @p sandbox (for checkpoints read back from disk after a restart:
  /// list_checkpoints() then finds them).
  /// @throws SandboxError for a sandbox that is not the library's own; SandboxStateError for
  ///   a sandbox never created.
  void attach(const std::shared_ptr<Sandbox>& sandbox);
  /// The checkpoints of a sandbox this manager knows, oldest first (none once the sandbox is
  /// cleaned up: its checkpoints went with it).
  std::vector<Checkpoint> list_checkpoints(const std::string& sandbox_id) const;
  /// Removes a checkpoint (and the content no other checkpoint uses).
  /// @returns false when it was not there.
  bool delete_checkpoint(const std::string& checkpoint_id);
  /// Keeps the checkpoints on disk when the manager is destroyed.
  void keep();
  /// The checkpoints in the object store (open_with_store()), of every plan and sandbox,
  /// oldest first (their snapshot_path is empty).
  /// @throws SandboxError without a store, or when the store fails.
  std::vector<Checkpoint> list_stored() const;
  /// Makes @p sandbox — of a copy of the same project state, on any machine — what the
  /// stored checkpoint @p checkpoint_id recorded; the checkpoint is kept locally too.
  /// @returns it, or std::nullopt when the store has no such checkpoint.
  /// @throws SandboxError without a store, for a committed sandbox or one that cannot
  ///   restore files, or when the store fails.
  std::optional<Checkpoint> restore_from_store(const std::shared_ptr<Sandbox>& sandbox,
                                               const std::string& checkpoint_id);
  /// Removes the store's objects no stored checkpoint refers to and older than
  /// @p grace_seconds (younger ones may belong to an upload running elsewhere).
  /// @returns how many went.
  std::size_t prune_store(std::uint64_t grace_seconds = 3600);
  /// Bytes the checkpoints of a sandbox take on disk (0 for a sandbox it does not know).
  std::uint64_t disk_bytes(const std::string& sandbox_id) const;

 private:
  struct Impl;
  explicit CheckpointManager(std::unique_ptr<Impl> impl);
  Impl& impl() const;
  std::unique_ptr<Impl> impl_;
};

/// A phase that failed, and what the hooks did about it. what() is
/// `"<phase> phase failed: <reason> (rolled back: <ids>); rollback of <id> failed: <why>"`
/// (the last two parts only when they apply), as the Rust `PhaseError` displays.
///
/// PhaseRunner throws it with std::throw_with_nested, so the exception that caused it (the
/// phase's own, a checkpoint's, or the commit's) is also reachable with
/// std::rethrow_if_nested; cause() holds it too.
class PhaseError : public SandboxError {
 public:
  /// The failure of phase @p phase (`"execute"` or `"apply"`) for @p reason.
  PhaseError(std::string phase, std::string reason, std::vector<std::string> restored,
             std::vector<std::pair<std::string, std::string>> rollback_failures,
             std::exception_ptr cause);
  /// Out of line, as the base's.
  ~PhaseError() override;
  /// Copyable.
  PhaseError(const PhaseError&) = default;
  /// Copy assignment.
  PhaseError& operator=(const PhaseError&) = default;
  /// `"execute"` or `"apply"`.
  const std::string& phase() const noexcept { return phase_; }
  /// Why it failed: the phase's exception message, the commit's error, or the checkpoint
  /// error (`"checkpoint <phase>: <error>"`).
  const std::string& reason() const noexcept { return reason_; }
  /// Sandboxes rolled back to their checkpoint, newest checkpoint first.
  const std::vector<std::string>& restored() const noexcept { return restored_; }
  /// Sandboxes whose rollback failed, with why.
  const std::vector<std::pair<std::string, std::string>>& rollback_failures() const noexcept {
    return rollback_failures_;
  }
  /// The exception that caused the failure (null when none was given).
  const std::exception_ptr& cause() const noexcept { return cause_; }

 private:
  std::string phase_;
  std::string reason_;
  std::vector<std::string> restored_;
  std::vector<std::pair<std::string, std::string>> rollback_failures_;
  std::exception_ptr cause_;
};

/// Runs the phases of plans with checkpoint hooks (the Rust `PhaseRunner`).
///
/// Execute: a `pre_execute` checkpoint of every Created or Active sandbox of the plan that can
/// be checkpointed (not `none`), the phase, then a `post_execute` checkpoint on success; when
/// the phase throws (anything: it is caught), every sandbox is rolled back to its
/// `pre_execute` checkpoint, newest first, and PhaseError is thrown. Apply: a `pre_apply`
/// checkpoint, then SandboxManager::commit_all() (atomic: a failure leaves every original as
/// it was); on failure the sandboxes are rolled back to `pre_apply`. A checkpoint that fails
/// is a PhaseError too (nothing rolled back). With no CheckpointManager the hooks are skipped:
/// the phase runs, and Apply is commit_all(), their failures still PhaseError.
///
/// Holds references: @p plans and @p checkpoints must outlive the runner.
class PhaseRunner {
 public:
  /// A runner over @p plans; with @p checkpoints null the hooks are skipped.
  PhaseRunner(SandboxManager& plans, CheckpointManager* checkpoints);
  /// Runs the Execute phase @p phase of @p plan_id (see the class notes).
  /// @throws PhaseError (phase `"execute"`) when a checkpoint fails or @p phase throws.
  void execute(const std::string& plan_id, const std::function<void()>& phase);
  /// Runs the Apply phase of @p plan_id: commit_all() between a `pre_apply` checkpoint and, on
  /// failure, the rollback to it. @returns commit_all()'s results.
  /// @throws PhaseError (phase `"apply"`) when a checkpoint or the commit fails.
  std::vector<CommitResult> apply(const std::string& plan_id);

 private:
  SandboxManager* plans_;
  CheckpointManager* checkpoints_;
};

/// The plan executors' documented name of Checkpoint.
using SandboxCheckpoint = Checkpoint;

/// The Execute phase with the checkpoint hooks, as the plan executors' documentation names it
/// (`PlanExecutor(checkpoint_manager=...)`): before run_execute()'s phase a `pre_execute`
/// checkpoint of each Created or Active sandbox of the plan that can be checkpointed; after it
/// succeeds a `post_execute` checkpoint (metadata `status: success`); when it throws, each
/// sandbox is rolled back to its `pre_execute` checkpoint, newest first, and the phase's own
/// exception propagates unchanged. With no CheckpointManager every hook is skipped.
///
/// Holds references: @p plans and @p checkpoint_manager must outlive it.
class PlanExecutor {
 public:
  /// An executor over @p plans; with @p checkpoint_manager null the hooks are skipped.
  explicit PlanExecutor(SandboxManager& plans, CheckpointManager* checkpoint_manager = nullptr);
  /// Runs @p execute as the Execute phase of @p plan_id (see the class notes).
  /// @throws whatever @p execute throws (after the rollback), or SandboxError when a
  ///   checkpoint cannot be taken.
  void run_execute(const std::string& plan_id, const std::function<void()>& execute);

 private:
  SandboxManager* plans_;
  CheckpointManager* checkpoints_;
};

/// The Apply phase with the checkpoint hook, as the plan executors' documentation names it
/// (`PlanApplyService(checkpoint_manager=...)`): a `pre_apply` checkpoint of each sandbox, then
/// SandboxManager::commit_all(); when the apply fails (commit_all throws, or returns the
/// failed result of a sandbox-level failure), each sandbox is rolled back to its `pre_apply`
/// checkpoint. With no CheckpointManager the hook is skipped.
///
/// Holds references: @p plans and @p checkpoint_manager must outlive it.
class PlanApplyService {
 public:
  /// A service over @p plans; with @p checkpoint_manager null the hook is skipped.
  explicit PlanApplyService(SandboxManager& plans, CheckpointManager* checkpoint_manager = nullptr);
  /// Commits the plan between the `pre_apply` checkpoint and, on failure, the rollback to it.
  /// @returns commit_all()'s results (the one failed result after a sandbox-level failure).
  /// @throws AtomicCommitError as commit_all() does (after the rollback), or SandboxError
  ///   when a checkpoint cannot be taken.
  std::vector<CommitResult> apply(const std::string& plan_id);

 private:
  SandboxManager* plans_;
  CheckpointManager* checkpoints_;
};

}  // namespace plan
}  // namespace patchbox

#endif  // PATCHBOX_CHECKPOINT_HPP
