// The C++ glue of <patchbox/checkpoint.hpp>: CheckpointManager over the plan bridge's
// PlanCheckpoints (src/ffi/plan/checkpoint.rs), and PhaseRunner, written here over its calls
// with the semantics of the Rust src/plan/phases.rs.
#include "patchbox/checkpoint.hpp"

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "patchbox/cpp/glue.h"
#include "patchbox/cpp/plan_internal.h"
#include "patchbox/src/ffi/plan.rs.h"
#include "rust/cxx.h"

namespace patchbox {
namespace plan {
namespace {

namespace pb = ::patchbox::bridge::plan;
using glue::bytes;
using glue::path_of;

using internal::call;

Checkpoint checkpoint_of(const pb::FfiCheckpoint& c) {
  Checkpoint out;
  out.checkpoint_id = std::string(c.checkpoint_id);
  out.sandbox_id = std::string(c.sandbox_id);
  out.plan_id = std::string(c.plan_id);
  out.phase = std::string(c.phase);
  out.created_at = internal::time_of(c.created_at_ms);
  out.metadata = internal::meta_of(c.metadata);
  out.snapshot_path = path_of(c.snapshot_path);
  return out;
}

/// The Rust sandbox behind @p sb. @throws SandboxError for null or a user's own Sandbox.
const pb::PlanSandbox& library_sandbox(const std::shared_ptr<Sandbox>& sb) {
  if (!sb) throw SandboxError("checkpoint: no sandbox (null shared_ptr)");
  const pb::PlanSandbox* rs = internal::rust_sandbox(*sb);
  if (!rs) {
    throw SandboxError("sandbox " + sb->sandbox_id() +
                           ": only library sandboxes (from a patchbox::plan::SandboxManager) "
                           "can be checkpointed by this manager",
                       sb->sandbox_id());
  }
  return *rs;
}

/// What the exception in flight says (for a PhaseError's reason).
std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception (not a std::exception)";
  }
}

/// The Rust `PhaseError`'s Display.
std::string phase_message(const std::string& phase, const std::string& reason,
                          const std::vector<std::string>& restored,
                          const std::vector<std::pair<std::string, std::string>>& failures) {
  std::string out = phase + " phase failed: " + reason;
  if (!restored.empty()) {
    out += " (rolled back: ";
    for (std::size_t i = 0; i < restored.size(); ++i) {
      if (i) out += ", ";
      out += restored[i];
    }
    out += ")";
  }
  for (const auto& f : failures) out += "; rollback of " + f.first + " failed: " + f.second;
  return out;
}

}  // namespace

const char* to_string(Phase phase) noexcept {
  switch (phase) {
    case Phase::PreExecute:
      return "pre_execute";
    case Phase::PostExecute:
      return "post_execute";
    case Phase::PreApply:
      return "pre_apply";
  }
  return "unknown";
}

// ---- CheckpointManager -----------------------------------------------------------------------

struct CheckpointManager::Impl {
  explicit Impl(rust::Box<pb::PlanCheckpoints> c) : cps(std::move(c)) {}
  // The Rust drop (checkpoints removed unless kept) runs here, under catch_unwind.
  ~Impl() { cps->close(); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  rust::Box<pb::PlanCheckpoints> cps;
};

CheckpointManager::CheckpointManager(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CheckpointManager::~CheckpointManager() = default;
CheckpointManager::CheckpointManager(CheckpointManager&&) noexcept = default;
CheckpointManager& CheckpointManager::operator=(CheckpointManager&&) noexcept = default;

CheckpointManager::Impl& CheckpointManager::impl() const {
  if (!impl_) {
    throw Error(ErrorKind::Internal, "use of a moved-from patchbox::plan::CheckpointManager");
  }
  return *impl_;
}

CheckpointManager CheckpointManager::open(const std::filesystem::path& root) {
  if (root.empty()) throw SandboxError("CheckpointManager::open: the root is empty", "");
  return call([&] {
    return CheckpointManager(std::make_unique<Impl>(pb::plan_checkpoints_new(bytes(root))));
  });
}

CheckpointManager CheckpointManager::open_with_store(const std::filesystem::path& root,
                                                     const std::string& store_url) {
  return call([&] {
    return CheckpointManager(
        std::make_unique<Impl>(pb::plan_checkpoints_with_store(bytes(root), store_url)));
  });
}

std::vector<Checkpoint> CheckpointManager::list_stored() const {
  return call([&] {
    std::vector<Checkpoint> out;
    for (const auto& c : impl().cps->list_stored()) out.push_back(checkpoint_of(c));
    return out;
  });
}

std::optional<Checkpoint> CheckpointManager::restore_from_store(
    const std::shared_ptr<Sandbox>& sandbox, const std::string& checkpoint_id) {
  const pb::PlanSandbox& rs = library_sandbox(sandbox);
  return call([&]() -> std::optional<Checkpoint> {
    auto c = impl().cps->restore_from_store(rs, checkpoint_id);
    if (c.checkpoint_id.empty()) return std::nullopt;
    return checkpoint_of(c);
  });
}

std::size_t CheckpointManager::prune_store(std::uint64_t grace_seconds) {
  return call([&] { return impl().cps->prune_store(grace_seconds); });
}

CheckpointManager CheckpointManager::open() {
  // The bridge reads an empty root as "a folder of its own under the system temp folder".
  return call([&] {
    return CheckpointManager(std::make_unique<Impl>(pb::plan_checkpoints_new(bytes(std::string()))));
  });
}

Checkpoint CheckpointManager::create_checkpoint(
    const std::shared_ptr<Sandbox>& sandbox, const std::string& plan_id, const std::string& phase,
    const std::map<std::string, std::string>& metadata) {
  const pb::PlanSandbox& rs = library_sandbox(sandbox);
  return call([&] {
    std::vector<pb::FfiPlanMeta> meta;
    meta.reserve(metadata.size());
    for (const auto& kv : metadata) meta.push_back(pb::FfiPlanMeta{kv.first, kv.second});
    return checkpoint_of(impl().cps->create_checkpoint(
        rs, plan_id, phase, rust::Slice<const pb::FfiPlanMeta>(meta.data(), meta.size())));
  });
}

Checkpoint CheckpointManager::create_checkpoint(
    const std::shared_ptr<Sandbox>& sandbox, const std::string& plan_id, Phase phase,
    const std::map<std::string, std::string>& metadata) {
  return create_checkpoint(sandbox, plan_id, std::string(to_string(phase)), metadata);
}

bool CheckpointManager::rollback_to(const Checkpoint& checkpoint) {
  return call(
      [&] { return impl().cps->rollback_to(checkpoint.checkpoint_id, checkpoint.sandbox_id); });
}

bool CheckpointManager::materialize(const Checkpoint& checkpoint, const std::filesystem::path& dest) {
  return call([&] {
    return impl().cps->materialize(checkpoint.checkpoint_id, checkpoint.sandbox_id, bytes(dest));
  });
}

void CheckpointManager::attach(const std::shared_ptr<Sandbox>& sandbox) {
  const pb::PlanSandbox& rs = library_sandbox(sandbox);
  call([&] { impl().cps->attach(rs); });
}

std::vector<Checkpoint> CheckpointManager::list_checkpoints(const std::string& sandbox_id) const {
  return call([&] {
    std::vector<Checkpoint> out;
    for (const auto& c : impl().cps->list_checkpoints(sandbox_id)) out.push_back(checkpoint_of(c));
    return out;
  });
}

bool CheckpointManager::delete_checkpoint(const std::string& checkpoint_id) {
  return call([&] { return impl().cps->delete_checkpoint(checkpoint_id); });
}

void CheckpointManager::keep() {
  call([&] { impl().cps->keep(); });
}

std::uint64_t CheckpointManager::disk_bytes(const std::string& sandbox_id) const {
  return call([&] { return impl().cps->disk_bytes(sandbox_id); });
}

// ---- PhaseError ------------------------------------------------------------------------------

PhaseError::PhaseError(std::string phase, std::string reason, std::vector<std::string> restored,
                       std::vector<std::pair<std::string, std::string>> rollback_failures,
                       std::exception_ptr cause)
    : SandboxError(phase_message(phase, reason, restored, rollback_failures)),
      phase_(std::move(phase)),
      reason_(std::move(reason)),
      restored_(std::move(restored)),
      rollback_failures_(std::move(rollback_failures)),
      cause_(std::move(cause)) {}
PhaseError::~PhaseError() = default;

// ---- PhaseRunner -----------------------------------------------------------------------------

namespace {

/// The checkpoints a phase took, per sandbox, in the order taken.
using Taken = std::vector<std::pair<std::shared_ptr<Sandbox>, Checkpoint>>;

/// Whether the phase hooks checkpoint @p sb: Created or Active, and checkpointable (the
/// library's `checkpoint_support` is not `unsupported`; for a user's own Sandbox, not
/// `none`, so that create_checkpoint() refuses it loudly).
bool checkpointable(const Sandbox& sb) {
  Status s = sb.status();
  if (s != Status::Created && s != Status::Active) return false;
  if (const pb::PlanSandbox* rs = internal::rust_sandbox(sb)) {
    return std::string(rs->checkpoint_support()) != "unsupported";
  }
  return sb.strategy() != strategy::none;
}

/// Throws PhaseError, with the exception being handled nested in it.
[[noreturn]] void fail(const std::string& phase, std::string reason,
                       std::vector<std::string> restored = {},
                       std::vector<std::pair<std::string, std::string>> failures = {}) {
  std::throw_with_nested(PhaseError(phase, std::move(reason), std::move(restored),
                                    std::move(failures), std::current_exception()));
}

Taken checkpoint_all(SandboxManager& plans, CheckpointManager* cm, const std::string& plan_id,
                     Phase phase, const std::string& which) {
  Taken out;
  if (!cm) return out;
  for (auto& sb : plans.list_sandboxes(plan_id)) {
    if (!checkpointable(*sb)) continue;
    try {
      Checkpoint cp = cm->create_checkpoint(sb, plan_id, phase);
      out.emplace_back(std::move(sb), std::move(cp));
    } catch (...) {
      fail(which, std::string("checkpoint ") + to_string(phase) + ": " +
                      message_of(std::current_exception()));
    }
  }
  return out;
}

/// Rolls every sandbox of @p taken back to its checkpoint, newest first; never throws.
void roll_back(CheckpointManager* cm, const Taken& taken, std::vector<std::string>& restored,
               std::vector<std::pair<std::string, std::string>>& failures) {
  if (!cm) return;
  for (auto it = taken.rbegin(); it != taken.rend(); ++it) {
    const std::string id = it->first->sandbox_id();
    try {
      cm->rollback_to(it->second);
      restored.push_back(id);
    } catch (...) {
      failures.emplace_back(id, message_of(std::current_exception()));
    }
  }
}

}  // namespace

PhaseRunner::PhaseRunner(SandboxManager& plans, CheckpointManager* checkpoints)
    : plans_(&plans), checkpoints_(checkpoints) {}

void PhaseRunner::execute(const std::string& plan_id, const std::function<void()>& phase) {
  Taken taken = checkpoint_all(*plans_, checkpoints_, plan_id, Phase::PreExecute, "execute");
  try {
    phase();
  } catch (...) {
    std::vector<std::string> restored;
    std::vector<std::pair<std::string, std::string>> failures;
    roll_back(checkpoints_, taken, restored, failures);
    fail("execute", message_of(std::current_exception()), std::move(restored),
         std::move(failures));
  }
  checkpoint_all(*plans_, checkpoints_, plan_id, Phase::PostExecute, "execute");
}

std::vector<CommitResult> PhaseRunner::apply(const std::string& plan_id) {
  Taken taken = checkpoint_all(*plans_, checkpoints_, plan_id, Phase::PreApply, "apply");
  try {
    std::vector<CommitResult> results = plans_->commit_all(plan_id);
    for (const CommitResult& r : results) {
      // commit_all's sandbox-level failure (it rolled the plan back already): the phase
      // fails with it, as a commit error of that sandbox.
      if (!r.success) throw SandboxCommitError(r.error.value_or("commit failed"), r.sandbox_id);
    }
    return results;
  } catch (...) {
    std::vector<std::string> restored;
    std::vector<std::pair<std::string, std::string>> failures;
    roll_back(checkpoints_, taken, restored, failures);
    fail("apply", message_of(std::current_exception()), std::move(restored), std::move(failures));
  }
}

// ---- PlanExecutor, PlanApplyService ------------------------------------------------------

namespace {

/// The documented hooks' checkpoints: like checkpoint_all, but a failure is the checkpoint's
/// own exception (no PhaseError around it).
Taken take(SandboxManager& plans, CheckpointManager* cm, const std::string& plan_id, Phase phase,
           const std::map<std::string, std::string>& metadata) {
  Taken out;
  if (!cm) return out;
  for (auto& sb : plans.list_sandboxes(plan_id)) {
    if (!checkpointable(*sb)) continue;
    Checkpoint cp = cm->create_checkpoint(sb, plan_id, to_string(phase), metadata);
    out.emplace_back(std::move(sb), std::move(cp));
  }
  return out;
}

}  // namespace

PlanExecutor::PlanExecutor(SandboxManager& plans, CheckpointManager* checkpoint_manager)
    : plans_(&plans), checkpoints_(checkpoint_manager) {}

void PlanExecutor::run_execute(const std::string& plan_id, const std::function<void()>& execute) {
  Taken taken = take(*plans_, checkpoints_, plan_id, Phase::PreExecute, {});
  try {
    execute();
  } catch (...) {
    std::vector<std::string> restored;
    std::vector<std::pair<std::string, std::string>> failures;
    roll_back(checkpoints_, taken, restored, failures);
    throw;
  }
  take(*plans_, checkpoints_, plan_id, Phase::PostExecute, {{"status", "success"}});
}

PlanApplyService::PlanApplyService(SandboxManager& plans, CheckpointManager* checkpoint_manager)
    : plans_(&plans), checkpoints_(checkpoint_manager) {}

std::vector<CommitResult> PlanApplyService::apply(const std::string& plan_id) {
  Taken taken = take(*plans_, checkpoints_, plan_id, Phase::PreApply, {});
  std::vector<std::string> restored;
  std::vector<std::pair<std::string, std::string>> failures;
  std::vector<CommitResult> results;
  try {
    results = plans_->commit_all(plan_id);
  } catch (...) {
    roll_back(checkpoints_, taken, restored, failures);
    throw;
  }
  for (const CommitResult& r : results) {
    if (!r.success) {
      roll_back(checkpoints_, taken, restored, failures);
      break;
    }
  }
  return results;
}

}  // namespace plan
}  // namespace patchbox
