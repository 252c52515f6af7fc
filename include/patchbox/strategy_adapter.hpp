/// @file patchbox/strategy_adapter.hpp
/// @brief A built-in strategy behind the nine-operation strategy protocol: the plan
/// executors' `BuiltInSandboxStrategyAdapter`.
///
/// Code written against the protocol (create a sandbox of a resource, read, write, diff,
/// commit, rollback, checkpoint, restore, cleanup) drives `copy_on_write`, `overlay`,
/// `git_worktree` or `none` with it as it drives a custom strategy. The adapter's sandboxes
/// live in a plan manager of its own, under the root it is made with (give it a directory no
/// other manager uses). Every failure throws the class of its step: SandboxCreationError from
/// create(), SandboxCommitError from commit(), SandboxRollbackError from rollback(),
/// SandboxError otherwise (all patchbox::Error of ErrorKind::Plan).
///
/// @code
/// namespace plan = patchbox::plan;
/// plan::BuiltInSandboxStrategyAdapter adapter(plan::strategy::copy_on_write, root);
/// plan::SandboxRef ref = adapter.create("plan-001", resource);
/// plan::DiffEntry change = adapter.write(ref, "file.txt", "content");  // Added
/// std::optional<std::string> data = adapter.read(ref, "file.txt");
/// adapter.cleanup(ref);
/// @endcode
#ifndef PATCHBOX_STRATEGY_ADAPTER_HPP
#define PATCHBOX_STRATEGY_ADAPTER_HPP

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "patchbox/plan.hpp"

/// patchbox's C++ API.
namespace patchbox {
/// Plan sandboxes (the Rust `patchbox::plan` layer).
namespace plan {

/// A built-in strategy through the strategy protocol (the Rust `BuiltInAdapter`).
///
/// Thread-safe (one operation of a sandbox at a time is the caller's to keep, as for any
/// strategy). Move-only; a moved-from adapter throws Error (ErrorKind::Internal).
class BuiltInSandboxStrategyAdapter {
 public:
  /// The adapter of the built-in strategy @p strategy_name (see patchbox::plan::strategy),
  /// its sandboxes under @p root (empty: `adapter/` under the default root,
  /// `$PATCHBOX_ROOT` else `$HOME/.entropic/sandbox`).
  /// @throws SandboxError for a name that is not a built-in strategy, or a root that cannot
  ///   be made.
  explicit BuiltInSandboxStrategyAdapter(const std::string& strategy_name,
                                         const std::filesystem::path& root = {});
  /// Closes the adapter's manager (its sandboxes' files stay until cleanup()).
  ~BuiltInSandboxStrategyAdapter();
  /// Move-only.
  BuiltInSandboxStrategyAdapter(BuiltInSandboxStrategyAdapter&&) noexcept;
  /// Move assignment.
  BuiltInSandboxStrategyAdapter& operator=(BuiltInSandboxStrategyAdapter&&) noexcept;
  /// Not copyable.
  BuiltInSandboxStrategyAdapter(const BuiltInSandboxStrategyAdapter&) = delete;
  /// Not copyable.
  BuiltInSandboxStrategyAdapter& operator=(const BuiltInSandboxStrategyAdapter&) = delete;

  /// The adapted strategy's name.
  std::string strategy_name() const;
  /// Makes a sandbox of @p resource (over its path) for @p plan_id; returns its reference,
  /// which every other operation takes. Its metadata names the built-in sandbox
  /// (`builtin.sandbox_id`) and the original (`original_path`).
  /// @throws SandboxCreationError.
  SandboxRef create(const std::string& plan_id, const Resource& resource);
  /// The content of @p path (resource-relative) in the sandbox; nullopt when absent.
  /// @throws SandboxError (a path leaving the sandbox, an unknown reference).
  std::optional<std::string> read(const SandboxRef& ref, const std::string& path);
  /// Sets the content of @p path in the sandbox (never in the original).
  /// @return the change: DiffOp::Added (no `before`) or DiffOp::Modified (`before` the old
  ///   content), `after` @p content.
  /// @throws SandboxError.
  DiffEntry write(const SandboxRef& ref, const std::string& path, const std::string& content);
  /// The sandbox's changes against its original.
  /// @throws SandboxError.
  DiffView diff(const SandboxRef& ref);
  /// Brings the changes into the original; returns what names the commit, if anything.
  /// @throws SandboxCommitError (a conflict, the user's concurrent edit of the same lines).
  std::optional<std::string> commit(const SandboxRef& ref,
                                    const std::optional<std::string>& message = std::nullopt);
  /// @p after_commit false: discards the sandbox's changes; true: undoes its commit in the
  /// original.
  /// @throws SandboxRollbackError.
  void rollback(const SandboxRef& ref, bool after_commit = false);
  /// Records the sandbox's state now under @p checkpoint_id (not for `none`).
  /// @throws SandboxError.
  void checkpoint(const SandboxRef& ref, const std::string& checkpoint_id);
  /// Makes the sandbox what it was at @p checkpoint_id.
  /// @throws SandboxError (an unknown checkpoint).
  void restore_checkpoint(const SandboxRef& ref, const std::string& checkpoint_id);
  /// Removes the sandbox and everything made for it.
  /// @throws SandboxError.
  void cleanup(const SandboxRef& ref);
  /// Whether rollback() after a commit works for the adapted strategy (not for `none`).
  bool is_rollbackable() const;

 private:
  struct Impl;
  Impl& impl() const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace plan
}  // namespace patchbox

#endif  // PATCHBOX_STRATEGY_ADAPTER_HPP
