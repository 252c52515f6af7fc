// <patchbox/plan.hpp>: the lifecycle table against the Rust one, a copy_on_write sandbox's
// whole life, commit_all (all, and none on a conflict), the exception classes, and one
// manager shared by 8 threads. Temporary directories only.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <patchbox/plan.hpp>

#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
namespace plan = patchbox::plan;
using plan::Status;
using testutil::read_file;
using testutil::TempDir;
using testutil::write_file;

constexpr Status kAll[] = {Status::Pending,    Status::Created,   Status::Active, Status::Committed,
                           Status::RolledBack, Status::CleanedUp, Status::Errored};

/// A project (two directories of files) and a root, both temporary.
struct Fixture {
  TempDir root{"patchbox-plan-root"};
  TempDir project{"patchbox-plan-project"};
  fs::path app = project / "app";
  fs::path docs = project / "docs";
  Fixture() {
    write_file(app / "main.c", "int main() { return 0; }\n");
    write_file(app / "old.txt", "obsolete\n");
    write_file(docs / "README.md", "# one\n");
  }
};

/// Runs @p f and returns the exception of type @p E it throws (fails the test otherwise).
template <class E, class F>
std::optional<E> thrown(F&& f) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception (" << typeid(e).name() << "): " << e.what();
  }
  return std::nullopt;
}

TEST(PlanStatus, TableAgreesWithTheLibrary) {
  std::vector<std::string> names;
  for (Status s : kAll) names.emplace_back(plan::to_string(s));
  EXPECT_EQ(names, plan::library_status_names());
  int allowed = 0;
  for (Status from : kAll) {
    for (Status to : kAll) {
      EXPECT_EQ(plan::can_transition(from, to), plan::library_can_transition(from, to))
          << plan::to_string(from) << " -> " << plan::to_string(to);
      allowed += plan::can_transition(from, to) ? 1 : 0;
    }
  }
  EXPECT_EQ(allowed, 11);
  for (Status s : kAll) EXPECT_EQ(plan::status_from_string(plan::to_string(s)), s);
  EXPECT_FALSE(plan::status_from_string("nonsense").has_value());

  EXPECT_NO_THROW(plan::assert_transition(Status::Active, Status::Committed));
  auto e = thrown<plan::SandboxStateError>(
      [] { plan::assert_transition(Status::Pending, Status::Committed); });
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("pending -> committed"), std::string::npos) << e->what();
  EXPECT_EQ(e->kind(), patchbox::ErrorKind::Plan);
}

TEST(PlanStatus, StrategyAndErrorNamesAgreeWithTheLibrary) {
  EXPECT_EQ(plan::library_strategy_names(),
            (std::vector<std::string>{plan::strategy::none, plan::strategy::copy_on_write,
                                      plan::strategy::overlay, plan::strategy::git_worktree,
                                      plan::strategy::transaction_rollback}));
  // Each kind has its class in the glue; a kind added in Rust fails here until it has one.
  EXPECT_EQ(plan::library_plan_error_kinds(),
            (std::vector<std::string>{"plan_sandbox", "plan_creation", "plan_commit",
                                      "plan_rollback", "plan_state", "plan_atomic_commit",
                                      "plan_unexpected"}));
  EXPECT_STREQ(patchbox::to_string(patchbox::ErrorKind::Plan), "plan");
}

TEST(PlanSandbox, CopyOnWriteLifecycle) {
  Fixture f;
  auto mgr = plan::SandboxManager::open(f.root.path());
  auto sb = mgr.get_or_create_sandbox("plan-1", "app", f.app, plan::strategy::copy_on_write);
  ASSERT_TRUE(sb);
  EXPECT_EQ(sb->status(), Status::Created);
  EXPECT_EQ(sb->strategy(), "copy_on_write");
  std::optional<plan::SandboxContext> ctx = sb->context();
  ASSERT_TRUE(ctx);
  EXPECT_EQ(ctx->sandbox_id, sb->sandbox_id());
  EXPECT_EQ(ctx->plan_id, "plan-1");
  EXPECT_EQ(ctx->resource_id, "app");
  EXPECT_EQ(fs::canonical(ctx->original_path), fs::canonical(f.app));
  EXPECT_LE(ctx->created_at, plan::Clock::now());
  EXPECT_GT(ctx->created_at, plan::Clock::now() - std::chrono::minutes(5));

  // Edit, add, delete through get_path; the original is untouched.
  fs::path main_c = sb->get_path("main.c");
  EXPECT_EQ(sb->status(), Status::Active);
  EXPECT_EQ(main_c.parent_path().lexically_normal(), ctx->sandbox_path.lexically_normal());
  write_file(main_c, "int main() { return 1; }\n");
  write_file(sb->get_path("src/new.c"), "void f(void) {}\n");
  fs::remove(sb->get_path("old.txt"));
  EXPECT_EQ(read_file(f.app / "main.c"), "int main() { return 0; }\n");
  EXPECT_FALSE(fs::exists(f.app / "src"));

  plan::SandboxDiff d = sb->diff();
  ASSERT_EQ(d.entries.size(), 3u);
  EXPECT_EQ(d.entries[0].path, "main.c");
  EXPECT_EQ(d.entries[0].operation, plan::DiffOp::Modified);
  EXPECT_EQ(d.entries[0].before, std::optional<std::string>("int main() { return 0; }\n"));
  EXPECT_EQ(d.entries[0].after, std::optional<std::string>("int main() { return 1; }\n"));
  EXPECT_EQ(d.entries[1].path, "old.txt");
  EXPECT_EQ(d.entries[1].operation, plan::DiffOp::Deleted);
  EXPECT_FALSE(d.entries[1].after);
  EXPECT_EQ(d.entries[2].path, "src/new.c");
  EXPECT_EQ(d.entries[2].operation, plan::DiffOp::Added);
  EXPECT_FALSE(d.entries[2].before);
  EXPECT_EQ(d.paths(plan::DiffOp::Added), std::vector<std::string>{"src/new.c"});
  EXPECT_NE(d.patch.find("+int main() { return 1; }"), std::string::npos) << d.patch;
  EXPECT_NO_THROW(sb->check_commit());

  // Rollback from Active: the sandbox is the original again.
  sb->rollback();
  EXPECT_EQ(sb->status(), Status::RolledBack);
  EXPECT_TRUE(sb->diff().entries.empty());
  EXPECT_EQ(read_file(sb->get_path("main.c")), "int main() { return 0; }\n");
  EXPECT_EQ(sb->status(), Status::Active);

  // Commit: the original holds the changes.
  write_file(sb->get_path("main.c"), "int main() { return 2; }\n");
  write_file(sb->get_path("src/new.c"), "void f(void) {}\n");
  plan::CommitResult r = sb->commit(std::string("from the C++ test"));
  EXPECT_TRUE(r.success);
  EXPECT_EQ(r.sandbox_id, sb->sandbox_id());
  EXPECT_TRUE(r.commit_ref.has_value());
  EXPECT_FALSE(r.error.has_value());
  EXPECT_EQ(r.changed_files, std::vector<std::string>{"main.c"});
  EXPECT_EQ(r.added_files, std::vector<std::string>{"src/new.c"});
  EXPECT_TRUE(r.deleted_files.empty());
  EXPECT_LE(r.timestamp, plan::Clock::now());
  EXPECT_EQ(sb->status(), Status::Committed);
  EXPECT_EQ(read_file(f.app / "main.c"), "int main() { return 2; }\n");
  EXPECT_EQ(read_file(f.app / "src/new.c"), "void f(void) {}\n");
  EXPECT_EQ(read_file(f.app / "old.txt"), "obsolete\n");

  // Rollback after commit: the undo of the commit.
  sb->rollback();
  EXPECT_EQ(sb->status(), Status::RolledBack);
  EXPECT_EQ(read_file(f.app / "main.c"), "int main() { return 0; }\n");
  EXPECT_FALSE(fs::exists(f.app / "src/new.c"));

  sb->cleanup();
  EXPECT_EQ(sb->status(), Status::CleanedUp);
  EXPECT_FALSE(fs::exists(ctx->sandbox_path));
  EXPECT_NO_THROW(sb->cleanup());  // idempotent
  EXPECT_EQ(read_file(f.app / "main.c"), "int main() { return 0; }\n");
}

TEST(PlanManager, CommitAllCommitsEverySandbox) {
  Fixture f;
  auto mgr = plan::SandboxManager::open(f.root.path());
  auto app = mgr.get_or_create_sandbox("p", "app", f.app, plan::strategy::copy_on_write);
  auto docs = mgr.get_or_create_sandbox("p", "docs", f.docs, plan::strategy::copy_on_write);
  EXPECT_EQ(mgr.get_or_create_sandbox("p", "app", f.app, plan::strategy::none), app);
  EXPECT_EQ(mgr.get_sandbox("p", "docs"), docs);
  EXPECT_EQ(mgr.get_sandbox("p", "nothing"), nullptr);
  EXPECT_EQ(mgr.get_sandbox("other", "app"), nullptr);
  EXPECT_EQ(mgr.list_plans(), std::vector<std::string>{"p"});
  auto listed = mgr.list_sandboxes("p");
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0], app);
  EXPECT_EQ(listed[1], docs);

  write_file(app->get_path("main.c"), "int main() { return 3; }\n");
  write_file(docs->get_path("README.md"), "# two\n");
  std::vector<plan::CommitResult> results = mgr.commit_all("p");
  ASSERT_EQ(results.size(), 2u);
  for (const auto& r : results) EXPECT_TRUE(r.success) << r.sandbox_id;
  EXPECT_EQ(results[0].sandbox_id, app->sandbox_id());
  EXPECT_EQ(results[1].changed_files, std::vector<std::string>{"README.md"});
  EXPECT_EQ(read_file(f.app / "main.c"), "int main() { return 3; }\n");
  EXPECT_EQ(read_file(f.docs / "README.md"), "# two\n");
  EXPECT_EQ(app->status(), Status::Committed);
  EXPECT_TRUE(mgr.commit_all("p").empty());  // nothing left to commit

  mgr.rollback_all("p");  // undo both commits
  EXPECT_EQ(read_file(f.app / "main.c"), "int main() { return 0; }\n");
  EXPECT_EQ(read_file(f.docs / "README.md"), "# one\n");
  EXPECT_EQ(mgr.cleanup_abandoned(), 2u);
  EXPECT_EQ(docs->status(), Status::CleanedUp);
  mgr.cleanup_all("p");
  EXPECT_TRUE(mgr.list_sandboxes("p").empty());
}

TEST(PlanManager, CommitAllCarriesTheCallersProvenance) {
  Fixture f;
  auto mgr = plan::SandboxManager::open(f.root.path());
  auto app = mgr.get_or_create_sandbox("p", "app", f.app, plan::strategy::copy_on_write);
  write_file(app->get_path("main.c"), "int main() { return 4; }\n");
  patchbox::Provenance prov;
  prov.command = {"agent", "fix \"it\""};
  prov.cwd = f.app;
  prov.exit_status = 0;
  prov.ended_ms = 42;
  auto results = mgr.commit_all("p", prov);
  ASSERT_EQ(results.size(), 1u);
  const auto& m = results[0].metadata;
  EXPECT_EQ(m.at("provenance.command"), "[\"agent\",\"fix \\\"it\\\"\"]");
  EXPECT_EQ(m.at("provenance.cwd"), f.app.string());
  EXPECT_EQ(m.at("provenance.exit_status"), "0");
  EXPECT_EQ(m.at("provenance.ended_ms"), "42");
  EXPECT_EQ(m.count("provenance.started_ms"), 0u);
  EXPECT_EQ(read_file(f.app / "main.c"), "int main() { return 4; }\n");
}

TEST(PlanManager, CommitAllWithAConflictWritesNothing) {
  Fixture f;
  auto mgr = plan::SandboxManager::open(f.root.path());
  auto app = mgr.get_or_create_sandbox("p", "app", f.app, plan::strategy::copy_on_write);
  auto docs = mgr.get_or_create_sandbox("p", "docs", f.docs, plan::strategy::copy_on_write);
  write_file(app->get_path("main.c"), "int main() { return 3; }\n");
  write_file(docs->get_path("README.md"), "# two\n");
  // The user edits the same line of the original meanwhile.
  write_file(f.docs / "README.md", "# three\n");

  EXPECT_THROW(docs->check_commit(), plan::SandboxCommitError);
  // A conflict is a sandbox-level failure: commit_all returns the one failed result.
  std::vector<plan::CommitResult> failed = mgr.commit_all("p");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_FALSE(failed[0].success);
  EXPECT_EQ(failed[0].sandbox_id, docs->sandbox_id());
  ASSERT_TRUE(failed[0].error);
  EXPECT_NE(failed[0].error->find("nothing written"), std::string::npos) << *failed[0].error;
  // The pre-check refused the plan: nothing was committed, so nothing was rolled back.
  EXPECT_EQ(failed[0].metadata.at("rolled_back_ids"), "");
  EXPECT_EQ(read_file(f.app / "main.c"), "int main() { return 0; }\n");
  EXPECT_EQ(read_file(f.docs / "README.md"), "# three\n");
  EXPECT_EQ(app->status(), Status::Active);
  EXPECT_EQ(docs->status(), Status::Active);

  // Resolved (the sandbox takes the user's version): the plan commits.
  write_file(docs->get_path("README.md"), "# three\n");
  auto results = mgr.commit_all("p");
  EXPECT_EQ(results.size(), 2u);
  EXPECT_EQ(read_file(f.app / "main.c"), "int main() { return 3; }\n");
}

TEST(PlanManager, AFailedCommitRollsBackTheCommittedOnes) {
  Fixture f;
  auto mgr = plan::SandboxManager::open(f.root.path());
  auto app = mgr.get_or_create_sandbox("p", "app", f.app, plan::strategy::copy_on_write);
  auto docs = mgr.get_or_create_sandbox("p", "docs", f.docs, plan::strategy::copy_on_write);
  write_file(app->get_path("main.c"), "int main() { return 3; }\n");
  write_file(docs->get_path("README.md"), "# two\n");
  // The second commit fails after the first went in: the first is undone, and the failure
  // (a sandbox-level one) is the one failed result.
  std::vector<plan::CommitResult> failed = mgr.commit_all_failing_at("p", 1);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_FALSE(failed[0].success);
  EXPECT_EQ(failed[0].sandbox_id, docs->sandbox_id());
  EXPECT_EQ(failed[0].metadata.at("rolled_back_ids"), app->sandbox_id());
  EXPECT_EQ(failed[0].metadata.at("plan_id"), "p");
  ASSERT_TRUE(failed[0].error);
  EXPECT_NE(failed[0].error->find("injected failure"), std::string::npos) << *failed[0].error;
  EXPECT_EQ(read_file(f.app / "main.c"), "int main() { return 0; }\n");
  EXPECT_EQ(read_file(f.docs / "README.md"), "# one\n");
  // Compensation, not abandonment: the undone sandbox keeps its changes and is active again.
  EXPECT_EQ(app->status(), Status::Active);
  EXPECT_EQ(docs->status(), Status::Active);
  // A failure at the first commit: nothing to undo.
  failed = mgr.commit_all_failing_at("p", 0);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].sandbox_id, app->sandbox_id());
  EXPECT_EQ(failed[0].metadata.at("rolled_back_ids"), "");
}

TEST(PlanErrors, StateErrorOnACleanedUpSandbox) {
  Fixture f;
  auto mgr = plan::SandboxManager::open(f.root.path());
  auto sb = mgr.get_or_create_sandbox("p", "app", f.app, plan::strategy::copy_on_write);
  const std::string id = sb->sandbox_id();
  sb->cleanup();
  auto e = thrown<plan::SandboxStateError>([&] { sb->get_path("main.c"); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->sandbox_id(), id);
  EXPECT_NE(std::string(e->what()).find("cleaned_up"), std::string::npos) << e->what();
  EXPECT_THROW(sb->commit(), plan::SandboxStateError);
  EXPECT_THROW(sb->rollback(), plan::SandboxStateError);
  EXPECT_THROW(sb->create("p"), plan::SandboxStateError);
  // A cleaned-up sandbox is replaced by a new one on the next get_or_create.
  auto again = mgr.get_or_create_sandbox("p", "app", f.app, plan::strategy::copy_on_write);
  EXPECT_NE(again->sandbox_id(), id);
  EXPECT_EQ(again->status(), Status::Created);
}

TEST(PlanErrors, EveryErrorIsAPatchboxError) {
  Fixture f;
  auto mgr = plan::SandboxManager::open(f.root.path());
  auto kind_of = [](auto&& fn) -> std::optional<patchbox::ErrorKind> {
    try {
      fn();
    } catch (const patchbox::Error& e) {
      return e.kind();
    }
    return std::nullopt;
  };
  // Unknown strategy and bad plan id: the base class itself.
  EXPECT_EQ(kind_of([&] { mgr.get_or_create_sandbox("p", "app", f.app, "teleport"); }),
            patchbox::ErrorKind::Plan);
  auto unknown = thrown<plan::SandboxError>(
      [&] { mgr.get_or_create_sandbox("p", "app", f.app, "teleport"); });
  ASSERT_TRUE(unknown);
  EXPECT_NE(std::string(unknown->what()).find("copy_on_write"), std::string::npos);
  EXPECT_THROW(mgr.get_or_create_sandbox("../x", "app", f.app, plan::strategy::none),
               plan::SandboxError);
  // Not a directory: creation.
  EXPECT_THROW(mgr.get_or_create_sandbox("p", "gone", f.project / "missing",
                                         plan::strategy::copy_on_write),
               plan::SandboxCreationError);
  EXPECT_EQ(kind_of([&] {
              mgr.get_or_create_sandbox("p", "gone", f.project / "missing",
                                        plan::strategy::copy_on_write);
            }),
            patchbox::ErrorKind::Plan);
  // A path out of the sandbox.
  auto sb = mgr.get_or_create_sandbox("p", "app", f.app, plan::strategy::copy_on_write);
  EXPECT_THROW(sb->get_path("../escape"), plan::SandboxError);
  EXPECT_THROW(sb->get_path("/etc/passwd"), plan::SandboxError);
  // A commit that conflicts: SandboxCommitError naming the file.
  write_file(sb->get_path("main.c"), "int main() { return 5; }\n");
  write_file(f.app / "main.c", "int main() { return 6; }\n");
  auto c = thrown<plan::SandboxCommitError>([&] { sb->commit(); });
  ASSERT_TRUE(c);
  EXPECT_EQ(c->sandbox_id(), sb->sandbox_id());
  EXPECT_EQ(c->files(), std::vector<std::string>{"main.c"});
  EXPECT_EQ(read_file(f.app / "main.c"), "int main() { return 6; }\n");
  EXPECT_EQ(kind_of([&] { sb->commit(); }), patchbox::ErrorKind::Plan);
  // A moved-from manager.
  plan::SandboxManager moved = std::move(mgr);
  EXPECT_EQ(kind_of([&] { mgr.list_plans(); }), patchbox::ErrorKind::Internal);
  EXPECT_EQ(moved.list_plans(), std::vector<std::string>{"p"});
}

TEST(PlanThreads, EightThreadsGetTheSameSandbox) {
  constexpr int kThreads = 8;
  Fixture f;
  auto mgr = plan::SandboxManager::open(f.root.path());
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  std::vector<std::shared_ptr<plan::Sandbox>> got(kThreads);
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      {
        std::unique_lock<std::mutex> lock(mu);
        if (++arrived == kThreads) cv.notify_all();
        cv.wait(lock, [&] { return arrived >= kThreads; });
      }
      try {
        got[i] = mgr.get_or_create_sandbox("p", "app", f.app, plan::strategy::copy_on_write);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        errors.emplace_back(e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(errors.empty()) << errors.front();
  ASSERT_TRUE(got[0]);
  for (int i = 1; i < kThreads; ++i) {
    EXPECT_EQ(got[i], got[0]);
    EXPECT_EQ(got[i]->sandbox_id(), got[0]->sandbox_id());
  }
  EXPECT_EQ(mgr.list_sandboxes("p").size(), 1u);
  // One sandbox directory under the plan (<root>/plans/plan-<id>/<sandbox id>/).
  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(f.root / "plans" / "plan-p")) {
    if (e.is_directory()) dirs.push_back(e.path().filename().string());
  }
  EXPECT_EQ(dirs, std::vector<std::string>{got[0]->sandbox_id()});
}

TEST(PlanBoundary, ResourcesShareTheirBoundarysSandbox) {
  Fixture f;
  auto mgr = plan::SandboxManager::open(f.root.path());
  plan::ResourceRegistry reg;
  reg.add({"project", "directory", f.project.path(), std::nullopt, std::nullopt})
      .add({"app", "directory", f.app, std::string("project"), std::nullopt})
      .add({"readme", "file", f.docs / "README.md", std::nullopt, std::nullopt});
  EXPECT_EQ(mgr.resolve_sandbox_key("app", reg), "project");
  EXPECT_EQ(mgr.resolve_sandbox_key("readme", reg), "readme");
  EXPECT_THROW(mgr.resolve_sandbox_key("nothing", reg), plan::SandboxError);

  plan::ResourceSandbox app = mgr.get_or_create_sandbox_for_resource("p", "app", reg);
  EXPECT_EQ(app.prefix, fs::path("app"));
  EXPECT_EQ(app.sandbox, mgr.get_sandbox("p", "project"));
  write_file(app.get_path("main.c"), "int main() { return 7; }\n");
  EXPECT_EQ(app.sandbox->diff().paths(plan::DiffOp::Modified),
            std::vector<std::string>{"app/main.c"});
  mgr.clear_boundary_cache();
  plan::ResourceRegistry bad;
  bad.add({"a", "directory", f.app, std::string("missing-parent"), std::nullopt});
  EXPECT_THROW(mgr.resolve_sandbox_key("a", bad), plan::SandboxError);
}

}  // namespace
