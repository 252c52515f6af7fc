// The plan executors' documented usage, ported to C++: the documented names
// (SandboxStatus, SandboxCheckpoint, PlanExecutor, PlanApplyService, a class per strategy), commit_all's documented
// outcomes (the one failed result for a sandbox-level failure), a CheckpointManager opened
// without a root (under the system temp folder, removed with its checkpoints), and a plan_id
// that is not the sandbox's refused. Temporary directories only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <patchbox/checkpoint.hpp>
#include <patchbox/plan.hpp>

#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
namespace plan = patchbox::plan;
using testutil::read_file;
using testutil::TempDir;
using testutil::write_file;

static_assert(std::is_same_v<plan::SandboxStatus, plan::Status>);
static_assert(std::is_same_v<plan::SandboxCheckpoint, plan::Checkpoint>);

/// Points TMPDIR (the system temp folder the library uses) at a directory of the test.
struct TmpdirScope {
  TempDir dir{"patchbox-docs-tmp"};
  std::string saved;
  bool had = false;
  TmpdirScope() {
    if (const char* t = std::getenv("TMPDIR")) {
      saved = t;
      had = true;
    }
    ::setenv("TMPDIR", dir.path().c_str(), 1);
  }
  ~TmpdirScope() {
    if (had) {
      ::setenv("TMPDIR", saved.c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
  }
};

/// Everything under @p d, relative, sorted.
std::vector<std::string> entries(const fs::path& d) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(d)) out.push_back(fs::relative(e.path(), d).string());
  std::sort(out.begin(), out.end());
  return out;
}

struct Docs {
  TempDir root{"patchbox-docs-root"};
  TempDir project{"patchbox-docs-project"};
  TempDir other{"patchbox-docs-other"};
  plan::SandboxManager plans = plan::SandboxManager::open(root.path());
  std::shared_ptr<plan::Sandbox> a, b;
  Docs() {
    write_file(project / "notes.txt", "one\n");
    write_file(other / "x.txt", "x\n");
    a = plans.get_or_create_sandbox("p", "other", other.path(), plan::strategy::copy_on_write);
    b = plans.get_or_create_sandbox("p", "docs", project.path(), plan::strategy::copy_on_write);
  }
  ~Docs() {
    try {
      plans.cleanup_all("p");
    } catch (...) {
    }
  }
};

TEST(Docs, EachStrategyHasItsClass) {
  Docs f;
  TempDir passthrough{"patchbox-docs-none"};
  auto none = f.plans.get_or_create_sandbox("q", "n", passthrough.path(), plan::strategy::none);
  auto overlay = f.plans.get_or_create_sandbox("q", "o", f.project.path(), plan::strategy::overlay);
  EXPECT_TRUE(std::dynamic_pointer_cast<plan::CopyOnWriteSandbox>(f.b));
  EXPECT_FALSE(std::dynamic_pointer_cast<plan::OverlaySandbox>(f.b));
  EXPECT_TRUE(std::dynamic_pointer_cast<plan::NoSandbox>(none));
  EXPECT_FALSE(std::dynamic_pointer_cast<plan::CopyOnWriteSandbox>(none));
  EXPECT_TRUE(std::dynamic_pointer_cast<plan::OverlaySandbox>(overlay));
  // Still the library's own: checkpoints take them.
  auto cm = plan::CheckpointManager::open(f.root.path());
  EXPECT_EQ(cm.create_checkpoint(overlay, "q", plan::Phase::PreExecute).sandbox_id, overlay->sandbox_id());
  f.plans.cleanup_all("q");
}

TEST(Docs, ASandboxLevelFailureIsTheOneFailedResult) {
  Docs f;
  write_file(f.a->get_path("x.txt"), "X\n");
  write_file(f.b->get_path("notes.txt"), "sandbox\n");
  write_file(f.project / "notes.txt", "user's edit\n");  // a conflict: a SandboxError
  std::vector<plan::CommitResult> results = f.plans.commit_all("p");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].success);
  EXPECT_EQ(results[0].sandbox_id, f.b->sandbox_id());
  ASSERT_TRUE(results[0].error);
  EXPECT_NE(results[0].error->find("notes.txt"), std::string::npos) << *results[0].error;
  EXPECT_EQ(read_file(f.other / "x.txt"), "x\n");
  EXPECT_EQ(read_file(f.project / "notes.txt"), "user's edit\n");
}

TEST(Docs, CheckpointManagerWithoutARootUsesTheSystemTempFolder) {
  Docs f;                               // its folders under the usual TMPDIR
  TempDir out{"patchbox-docs-tree"};    // so is this one
  TmpdirScope tmp;                      // the checkpoint manager's under this one
  write_file(f.b->get_path("notes.txt"), "two\n");
  {
    auto cm = plan::CheckpointManager::open();
    plan::SandboxCheckpoint cp = cm.create_checkpoint(f.b, "p", plan::Phase::PreExecute);
    EXPECT_EQ(cp.snapshot_path.string().rfind(tmp.dir.path().string(), 0), 0u) << cp.snapshot_path;
    write_file(f.b->get_path("notes.txt"), "broken\n");
    EXPECT_TRUE(cm.rollback_to(cp));
    EXPECT_EQ(read_file(f.b->get_path("notes.txt")), "two\n");
    // The full copy, on demand; the sandbox stays as it is.
    write_file(f.b->get_path("notes.txt"), "three\n");
    EXPECT_TRUE(cm.materialize(cp, out / "tree"));
    EXPECT_EQ(read_file(out / "tree" / "notes.txt"), "two\n");
    EXPECT_EQ(read_file(f.b->get_path("notes.txt")), "three\n");
    EXPECT_TRUE(cm.delete_checkpoint(cp.checkpoint_id));
    // The checkpoint's folders went with it: only the manager's (empty) folder is left.
    std::vector<std::string> left = entries(tmp.dir.path());
    ASSERT_EQ(left.size(), 1u) << left.size();
    cm.create_checkpoint(f.b, "p", plan::Phase::PreApply);
  }
  EXPECT_TRUE(entries(tmp.dir.path()).empty());  // destroyed: nothing left
}

TEST(Docs, APlanIdThatIsNotTheSandboxsIsRefused) {
  Docs f;
  auto cm = plan::CheckpointManager::open(f.root.path());
  try {
    cm.create_checkpoint(f.b, "another-plan", plan::Phase::PreExecute);
    ADD_FAILURE() << "no exception";
  } catch (const plan::SandboxError& e) {
    EXPECT_NE(std::string(e.what()).find("another-plan"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(cm.list_checkpoints(f.b->sandbox_id()).empty());
}

TEST(Docs, PlanExecutorRollsBackAFailedExecuteAndRethrows) {
  Docs f;
  auto cm = plan::CheckpointManager::open(f.root.path());
  plan::PlanExecutor executor(f.plans, &cm);
  EXPECT_THROW(executor.run_execute("p",
                                    [&] {
                                      write_file(f.b->get_path("notes.txt"), "half\n");
                                      throw std::runtime_error("the model gave up");
                                    }),
               std::runtime_error);
  EXPECT_EQ(read_file(f.b->get_path("notes.txt")), "one\n");
  executor.run_execute("p", [&] { write_file(f.b->get_path("notes.txt"), "done\n"); });
  std::vector<plan::Checkpoint> cps = cm.list_checkpoints(f.b->sandbox_id());
  ASSERT_EQ(cps.size(), 3u);
  EXPECT_EQ(cps[0].phase, "pre_execute");
  EXPECT_EQ(cps[1].phase, "pre_execute");
  EXPECT_EQ(cps[2].phase, "post_execute");
  EXPECT_EQ(cps[2].metadata.at("status"), "success");
  // Without a checkpoint manager, the hooks are skipped: nothing is rolled back.
  plan::PlanExecutor bare(f.plans);
  EXPECT_THROW(bare.run_execute("p",
                                [&] {
                                  write_file(f.b->get_path("notes.txt"), "kept\n");
                                  throw std::runtime_error("no hooks");
                                }),
               std::runtime_error);
  EXPECT_EQ(read_file(f.b->get_path("notes.txt")), "kept\n");
}

TEST(Docs, PlanApplyServiceRollsBackToPreApplyOnFailure) {
  Docs f;
  write_file(f.b->get_path("notes.txt"), "sandbox\n");
  write_file(f.project / "notes.txt", "user's edit\n");
  auto cm = plan::CheckpointManager::open(f.root.path());
  plan::PlanApplyService service(f.plans, &cm);
  std::vector<plan::CommitResult> results = service.apply("p");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].success);
  EXPECT_EQ(cm.list_checkpoints(f.b->sandbox_id()).back().phase, "pre_apply");
  EXPECT_EQ(read_file(f.b->get_path("notes.txt")), "sandbox\n");
  EXPECT_EQ(read_file(f.project / "notes.txt"), "user's edit\n");
  // Resolved: the apply goes through.
  write_file(f.project / "notes.txt", "one\n");
  results = service.apply("p");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results[0].success && results[1].success);
  EXPECT_EQ(read_file(f.project / "notes.txt"), "sandbox\n");
}

}  // namespace
