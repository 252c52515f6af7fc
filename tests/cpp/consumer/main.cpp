// Downstream use of patchbox::patchbox: one delegation, its patch, a pending patch; then one
// plan sandbox (<patchbox/plan.hpp>) checkpointed and rolled back to it
// (<patchbox/checkpoint.hpp>), then committed.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include <patchbox/checkpoint.hpp>
#include <patchbox/plan.hpp>
#include <patchbox/sandbox.hpp>
#include <type_traits>

// The names from before the family namespaces are the same types, so code written against
// them keeps compiling.
static_assert(std::is_same_v<patchbox::SandboxManager, patchbox::session::Manager>);
static_assert(std::is_same_v<patchbox::Options, patchbox::session::Options>);
static_assert(std::is_same_v<patchbox::SandboxInfo, patchbox::session::SandboxInfo>);
static_assert(std::is_same_v<patchbox::Completion, patchbox::session::Completion>);
static_assert(std::is_same_v<patchbox::plan::Manager, patchbox::plan::SandboxManager>);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc != 2) return 2;
  const fs::path work = argv[1];
  fs::create_directories(work / "project");
  std::ofstream(work / "project" / "a.txt") << "one\n";

  try {
    namespace session = patchbox::session;
    session::Options options;
    options.root = work / "root";
    session::Manager mgr(work / "project", options);
    session::SandboxInfo sb = mgr.create_sandbox("consumer");
    std::ofstream(sb.path / "a.txt") << "two\n";
    session::Completion done = mgr.complete_sandbox(sb);  // no callback: pending
    if (done.routed != session::Completion::Routed::Pending || !done.pending_path) return 1;
    if (done.result.patch.find("+two\n") == std::string::npos) return 1;
    std::cout << "patch pending at " << done.pending_path->string() << "\n";
    try {
      mgr.create_sandbox("../x");
      return 1;
    } catch (const patchbox::Error& e) {
      if (e.kind() != patchbox::ErrorKind::InvalidId) return 1;
    }
    namespace plan = patchbox::plan;
    auto plans = plan::Manager::open(work / "plan-root");
    auto psb = plans.get_or_create_sandbox("consumer-plan", "project", work / "project",
                                           plan::strategy::copy_on_write);
    std::ofstream(psb->get_path("b.txt")) << "plan\n";
    auto checkpoints = plan::CheckpointManager::open(work / "plan-root");
    plan::Checkpoint cp =
        checkpoints.create_checkpoint(psb, "consumer-plan", plan::Phase::PreApply);
    std::ofstream(psb->get_path("c.txt")) << "undone\n";
    if (!checkpoints.rollback_to(cp) || fs::exists(psb->get_path("c.txt"))) return 1;
    std::vector<plan::CommitResult> results = plans.commit_all("consumer-plan");
    if (results.size() != 1 || !results[0].success) return 1;
    if (!fs::exists(work / "project" / "b.txt")) return 1;
    plans.cleanup_all("consumer-plan");
    std::cout << "plan committed: " << results[0].added_files.size() << " file added\n";
  } catch (const patchbox::Error& e) {
    std::cerr << patchbox::to_string(e.kind()) << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
