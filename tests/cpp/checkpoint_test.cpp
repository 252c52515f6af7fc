// <patchbox/checkpoint.hpp>: checkpoints of a copy_on_write sandbox (round trip of contents,
// exec bit, symlink, deleted and added files), listing, deletion, `none` and user sandboxes
// refused, keep vs drop; PhaseRunner's Execute and Apply hooks (failing phase, success then
// commit, a conflicting apply, no checkpoint manager). Temporary directories only.
#include <gtest/gtest.h>

#include <unistd.h>

#include <exception>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <patchbox/checkpoint.hpp>
#include <patchbox/plan.hpp>

#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
namespace plan = patchbox::plan;
using testutil::contains;
using testutil::read_file;
using testutil::TempDir;
using testutil::write_file;

/// A project and a root, both temporary.
struct Fixture {
  TempDir root{"patchbox-ckpt-root"};
  TempDir project{"patchbox-ckpt-project"};
  Fixture() {
    write_file(project / "a.txt", "one\n");
    write_file(project / "keep.txt", "kept\n");
    write_file(project / "gone.txt", "to delete\n");
    write_file(project / "bin/run.sh", "#!/bin/sh\necho hi\n");
    fs::permissions(project / "bin/run.sh", fs::perms::owner_all | fs::perms::group_read |
                                                fs::perms::others_read);
  }
};

bool is_exec(const fs::path& p) {
  return (fs::status(p).permissions() & fs::perms::owner_exec) != fs::perms::none;
}

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

TEST(Checkpoint, PhaseNames) {
  EXPECT_STREQ(plan::to_string(plan::Phase::PreExecute), "pre_execute");
  EXPECT_STREQ(plan::to_string(plan::Phase::PostExecute), "post_execute");
  EXPECT_STREQ(plan::to_string(plan::Phase::PreApply), "pre_apply");
}

TEST(Checkpoint, RollbackRestoresEverythingCopyOnWrite) {
  Fixture f;
  auto plans = plan::SandboxManager::open(f.root.path());
  auto sb = plans.get_or_create_sandbox("p", "r", f.project.path(), plan::strategy::copy_on_write);
  auto cm = plan::CheckpointManager::open(f.root.path());

  // A first change, so the checkpoint records something against the base.
  write_file(sb->get_path("a.txt"), "two\n");
  ASSERT_EQ(::symlink("keep.txt", sb->get_path("link").c_str()), 0);
  const auto before = plan::Clock::now() - std::chrono::seconds(1);
  plan::Checkpoint cp = cm.create_checkpoint(sb, "p", plan::Phase::PreExecute, {{"step", "1"}});
  EXPECT_FALSE(cp.checkpoint_id.empty());
  EXPECT_EQ(cp.sandbox_id, sb->sandbox_id());
  EXPECT_EQ(cp.plan_id, "p");
  EXPECT_EQ(cp.phase, "pre_execute");
  EXPECT_EQ(cp.metadata, (std::map<std::string, std::string>{{"step", "1"}}));
  EXPECT_GE(cp.created_at, before);
  EXPECT_LE(cp.created_at, plan::Clock::now());
  EXPECT_TRUE(fs::exists(cp.snapshot_path)) << cp.snapshot_path;
  EXPECT_GT(cm.disk_bytes(sb->sandbox_id()), 0u);

  // Everything a failing phase could do.
  const fs::path run = sb->get_path("bin/run.sh");
  write_file(sb->get_path("a.txt"), "broken\n");
  fs::permissions(run, fs::perms::owner_read | fs::perms::owner_write);
  fs::remove(sb->get_path("link"));
  ASSERT_EQ(::symlink("a.txt", sb->get_path("link").c_str()), 0);
  fs::remove(sb->get_path("gone.txt"));
  write_file(sb->get_path("new/added.txt"), "added\n");
  ASSERT_FALSE(is_exec(run));

  EXPECT_TRUE(cm.rollback_to(cp));
  EXPECT_EQ(read_file(sb->get_path("a.txt")), "two\n");
  EXPECT_TRUE(is_exec(run));
  EXPECT_EQ(read_file(run), "#!/bin/sh\necho hi\n");
  ASSERT_TRUE(fs::is_symlink(sb->get_path("link")));
  EXPECT_EQ(fs::read_symlink(sb->get_path("link")), fs::path("keep.txt"));
  EXPECT_EQ(read_file(sb->get_path("gone.txt")), "to delete\n");
  EXPECT_FALSE(fs::exists(sb->get_path("new/added.txt")));
  // The original was never touched.
  EXPECT_EQ(read_file(f.project / "a.txt"), "one\n");
  EXPECT_FALSE(fs::exists(f.project / "link"));
  plans.cleanup_all("p");
}

TEST(Checkpoint, ListOldestFirstAndDelete) {
  Fixture f;
  auto plans = plan::SandboxManager::open(f.root.path());
  auto sb = plans.get_or_create_sandbox("p", "r", f.project.path(), plan::strategy::copy_on_write);
  auto cm = plan::CheckpointManager::open(f.root.path());
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    write_file(sb->get_path("a.txt"), "v" + std::to_string(i) + "\n");
    ids.push_back(cm.create_checkpoint(sb, "p", "step-" + std::to_string(i)).checkpoint_id);
  }
  std::vector<plan::Checkpoint> list = cm.list_checkpoints(sb->sandbox_id());
  ASSERT_EQ(list.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(list[i].checkpoint_id, ids[i]);
    EXPECT_EQ(list[i].phase, "step-" + std::to_string(i));
  }
  EXPECT_TRUE(cm.list_checkpoints("no-such-sandbox").empty());

  // Deleting the middle one re-bases the last: it still restores its own state.
  EXPECT_TRUE(cm.delete_checkpoint(ids[1]));
  EXPECT_FALSE(cm.delete_checkpoint(ids[1]));
  EXPECT_FALSE(cm.rollback_to(list[1]));  // gone
  list = cm.list_checkpoints(sb->sandbox_id());
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].checkpoint_id, ids[0]);
  EXPECT_EQ(list[1].checkpoint_id, ids[2]);
  write_file(sb->get_path("a.txt"), "later\n");
  EXPECT_TRUE(cm.rollback_to(list[1]));
  EXPECT_EQ(read_file(sb->get_path("a.txt")), "v2\n");
  EXPECT_TRUE(cm.rollback_to(list[0]));
  EXPECT_EQ(read_file(sb->get_path("a.txt")), "v0\n");

  // Cleaned up: its checkpoints went with it.
  plans.cleanup_all("p");
  EXPECT_TRUE(cm.list_checkpoints(sb->sandbox_id()).empty());
}

TEST(Checkpoint, NoneAndForeignSandboxesAreRefused) {
  Fixture f;
  auto plans = plan::SandboxManager::open(f.root.path());
  auto none = plans.get_or_create_sandbox("p", "r", f.project.path(), plan::strategy::none);
  auto cm = plan::CheckpointManager::open(f.root.path());
  auto e = thrown<plan::SandboxError>([&] { cm.create_checkpoint(none, "p", "pre_execute"); });
  ASSERT_TRUE(e);
  EXPECT_TRUE(contains(e->what(), "cannot be checkpointed")) << e->what();
  EXPECT_EQ(e->sandbox_id(), none->sandbox_id());

  // A user's own Sandbox: not the library's, so this manager cannot checkpoint it.
  struct Mine : plan::Sandbox {
    std::string sandbox_id() const override { return "mine"; }
    std::string strategy() const override { return "custom"; }
    plan::Status status() const override { return plan::Status::Active; }
    std::optional<plan::SandboxContext> context() const override { return std::nullopt; }
    plan::SandboxContext create(const std::string&) override { return {}; }
    fs::path get_path(const fs::path& p) override { return p; }
    plan::SandboxDiff diff() const override { return {}; }
    void check_commit() const override {}
    plan::CommitResult commit(const std::optional<std::string>&) override { return {}; }
    void rollback() override {}
    void cleanup() override {}
  };
  std::shared_ptr<plan::Sandbox> mine = std::make_shared<Mine>();
  e = thrown<plan::SandboxError>([&] { cm.create_checkpoint(mine, "p", "pre_execute"); });
  ASSERT_TRUE(e);
  EXPECT_TRUE(contains(e->what(), "only library sandboxes")) << e->what();
  e = thrown<plan::SandboxError>([&] { cm.attach(mine); });
  ASSERT_TRUE(e);
  EXPECT_TRUE(thrown<plan::SandboxError>([&] { cm.create_checkpoint(nullptr, "p", "x"); }));

  // A checkpoint of a sandbox this manager never saw: attach it first.
  plan::Checkpoint unknown;
  unknown.checkpoint_id = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
  unknown.sandbox_id = "unknown";
  e = thrown<plan::SandboxError>([&] { cm.rollback_to(unknown); });
  ASSERT_TRUE(e);
  EXPECT_TRUE(contains(e->what(), "attach")) << e->what();
  plans.cleanup_all("p");
}

TEST(Checkpoint, DroppedUnlessKept) {
  Fixture f;
  auto plans = plan::SandboxManager::open(f.root.path());
  auto sb = plans.get_or_create_sandbox("p", "r", f.project.path(), plan::strategy::copy_on_write);
  write_file(sb->get_path("a.txt"), "two\n");
  fs::path dropped, kept;
  std::string kept_id;
  {
    auto cm = plan::CheckpointManager::open(f.root.path());
    dropped = cm.create_checkpoint(sb, "p", "pre_execute").snapshot_path;
    ASSERT_TRUE(fs::exists(dropped));
  }
  EXPECT_FALSE(fs::exists(dropped));
  {
    auto cm = plan::CheckpointManager::open(f.root.path());
    plan::Checkpoint cp = cm.create_checkpoint(sb, "p", "pre_execute");
    kept = cp.snapshot_path;
    kept_id = cp.checkpoint_id;
    cm.keep();
    // Moved: the manager's state goes with it; the moved-from one is unusable.
    plan::CheckpointManager moved = std::move(cm);
    EXPECT_THROW(cm.keep(), patchbox::Error);  // NOLINT(bugprone-use-after-move)
  }
  EXPECT_TRUE(fs::exists(kept));
  // After a restart: attach, then the kept checkpoint is found and usable.
  auto again = plan::CheckpointManager::open(f.root.path());
  again.attach(sb);
  std::vector<plan::Checkpoint> list = again.list_checkpoints(sb->sandbox_id());
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].checkpoint_id, kept_id);
  write_file(sb->get_path("a.txt"), "three\n");
  EXPECT_TRUE(again.rollback_to(list[0]));
  EXPECT_EQ(read_file(sb->get_path("a.txt")), "two\n");
  plans.cleanup_all("p");
}

// ---- PhaseRunner -----------------------------------------------------------------------------

/// Two copy_on_write sandboxes and a `none` one (skipped by the hooks) in plan "p".
struct PlanFixture : Fixture {
  TempDir other{"patchbox-ckpt-other"};
  TempDir passthrough{"patchbox-ckpt-none"};
  plan::SandboxManager plans = plan::SandboxManager::open(root.path());
  std::shared_ptr<plan::Sandbox> a, b, none;
  PlanFixture() {
    write_file(other / "b.txt", "bee\n");
    write_file(passthrough / "n.txt", "n\n");
    a = plans.get_or_create_sandbox("p", "a", project.path(), plan::strategy::copy_on_write);
    b = plans.get_or_create_sandbox("p", "b", other.path(), plan::strategy::copy_on_write);
    none = plans.get_or_create_sandbox("p", "n", passthrough.path(), plan::strategy::none);
  }
  ~PlanFixture() {
    try {
      plans.cleanup_all("p");
    } catch (...) {
    }
  }
};

TEST(PhaseRunner, ThrowingExecuteIsRolledBack) {
  PlanFixture f;
  auto cm = plan::CheckpointManager::open(f.root.path());
  plan::PhaseRunner runner(f.plans, &cm);
  try {
    runner.execute("p", [&] {
      write_file(f.a->get_path("a.txt"), "half done\n");
      fs::remove(f.b->get_path("b.txt"));
      throw std::runtime_error("the model gave up");
    });
    FAIL() << "no exception";
  } catch (const plan::PhaseError& e) {
    EXPECT_EQ(e.phase(), "execute");
    EXPECT_EQ(e.reason(), "the model gave up");
    // Newest checkpoint first: b was checkpointed after a.
    EXPECT_EQ(e.restored(), (std::vector<std::string>{f.b->sandbox_id(), f.a->sandbox_id()}));
    EXPECT_TRUE(e.rollback_failures().empty());
    EXPECT_TRUE(contains(e.what(), "execute phase failed: the model gave up (rolled back: "))
        << e.what();
    EXPECT_EQ(e.kind(), patchbox::ErrorKind::Plan);
    // The original exception, both ways.
    ASSERT_TRUE(e.cause());
    EXPECT_THROW(std::rethrow_exception(e.cause()), std::runtime_error);
    EXPECT_THROW(std::rethrow_if_nested(e), std::runtime_error);
  }
  EXPECT_EQ(read_file(f.a->get_path("a.txt")), "one\n");
  EXPECT_EQ(read_file(f.b->get_path("b.txt")), "bee\n");
  // pre_execute only, for the two checkpointable sandboxes; none for `none`.
  ASSERT_EQ(cm.list_checkpoints(f.a->sandbox_id()).size(), 1u);
  EXPECT_EQ(cm.list_checkpoints(f.a->sandbox_id())[0].phase, "pre_execute");
  EXPECT_TRUE(cm.list_checkpoints(f.none->sandbox_id()).empty());

  // Not a std::exception: caught all the same.
  auto e = thrown<plan::PhaseError>([&] {
    runner.execute("p", [&] {
      write_file(f.a->get_path("a.txt"), "again\n");
      throw 42;
    });
  });
  ASSERT_TRUE(e);
  EXPECT_TRUE(contains(e->reason(), "unknown exception")) << e->reason();
  EXPECT_EQ(read_file(f.a->get_path("a.txt")), "one\n");
}

TEST(PhaseRunner, SuccessfulExecuteThenApplyCommits) {
  PlanFixture f;
  auto cm = plan::CheckpointManager::open(f.root.path());
  plan::PhaseRunner runner(f.plans, &cm);
  runner.execute("p", [&] {
    write_file(f.a->get_path("a.txt"), "two\n");
    write_file(f.b->get_path("c.txt"), "sea\n");
  });
  std::vector<plan::Checkpoint> list = cm.list_checkpoints(f.a->sandbox_id());
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].phase, "pre_execute");
  EXPECT_EQ(list[1].phase, "post_execute");

  std::vector<plan::CommitResult> results = runner.apply("p");
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) EXPECT_TRUE(r.success) << r.sandbox_id;
  EXPECT_EQ(read_file(f.project / "a.txt"), "two\n");
  EXPECT_EQ(read_file(f.other / "c.txt"), "sea\n");
  EXPECT_EQ(f.a->status(), plan::Status::Committed);
  list = cm.list_checkpoints(f.a->sandbox_id());
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[2].phase, "pre_apply");
}

TEST(PhaseRunner, ConflictingApplyIsRolledBackAndTheOriginalUntouched) {
  PlanFixture f;
  auto cm = plan::CheckpointManager::open(f.root.path());
  plan::PhaseRunner runner(f.plans, &cm);
  runner.execute("p", [&] {
    write_file(f.a->get_path("a.txt"), "two\n");
    write_file(f.b->get_path("b.txt"), "bee 2\n");
  });
  write_file(f.project / "a.txt", "the user's own edit\n");  // the conflict
  try {
    runner.apply("p");
    FAIL() << "no exception";
  } catch (const plan::PhaseError& e) {
    EXPECT_EQ(e.phase(), "apply");
    EXPECT_EQ(e.restored(), (std::vector<std::string>{f.b->sandbox_id(), f.a->sandbox_id()}));
    EXPECT_TRUE(e.rollback_failures().empty());
    try {
      std::rethrow_if_nested(e);
      ADD_FAILURE() << "nothing nested";
    } catch (const plan::SandboxCommitError& inner) {
      // commit_all's failed result (the conflict, refused before anything was written).
      EXPECT_EQ(e.reason(), inner.what());
      EXPECT_EQ(inner.sandbox_id(), f.a->sandbox_id());
      EXPECT_NE(e.reason().find("nothing written"), std::string::npos) << e.reason();
    }
  }
  EXPECT_EQ(read_file(f.project / "a.txt"), "the user's own edit\n");
  EXPECT_EQ(read_file(f.other / "b.txt"), "bee\n");
  // The sandboxes are as they were before Apply.
  EXPECT_EQ(read_file(f.a->get_path("a.txt")), "two\n");
  EXPECT_EQ(read_file(f.b->get_path("b.txt")), "bee 2\n");
  EXPECT_EQ(f.a->status(), plan::Status::Active);
}

TEST(PhaseRunner, WithoutCheckpointManagerTheHooksAreSkipped) {
  PlanFixture f;
  plan::PhaseRunner runner(f.plans, nullptr);
  auto e = thrown<plan::PhaseError>([&] {
    runner.execute("p", [&] {
      write_file(f.a->get_path("a.txt"), "half done\n");
      throw std::runtime_error("boom");
    });
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->reason(), "boom");
  EXPECT_TRUE(e->restored().empty());
  EXPECT_EQ(read_file(f.a->get_path("a.txt")), "half done\n");  // nothing rolled back

  bool ran = false;
  runner.execute("p", [&] {
    ran = true;
    write_file(f.a->get_path("a.txt"), "two\n");
  });
  EXPECT_TRUE(ran);
  std::vector<plan::CommitResult> results = runner.apply("p");
  EXPECT_EQ(results.size(), 3u);
  EXPECT_EQ(read_file(f.project / "a.txt"), "two\n");
  // Nothing was checkpointed: a manager opened now finds no checkpoint.
  auto cm = plan::CheckpointManager::open(f.root.path());
  cm.attach(f.a);
  EXPECT_TRUE(cm.list_checkpoints(f.a->sandbox_id()).empty());
}

// Checkpoints in an object store (a store directory here: the layout a bucket holds) are
// restored into a sandbox under another root, over another copy of the project.
TEST(Checkpoint, StoredCheckpointsAreRestoredUnderAnotherRoot) {
  Fixture a;
  Fixture b;
  TempDir store{"patchbox-ckpt-store"};
  std::string checkpoint_id;
  {
    auto plans = plan::SandboxManager::open(a.root.path());
    auto sb = plans.get_or_create_sandbox("p", "r", a.project.path(), plan::strategy::copy_on_write);
    auto cm = plan::CheckpointManager::open_with_store(a.root.path(), store.path().string());
    write_file(sb->get_path("a.txt"), "two\n");
    fs::remove(sb->get_path("gone.txt"));
    write_file(sb->get_path("new/added.txt"), "added\n");
    checkpoint_id = cm.create_checkpoint(sb, "p", plan::Phase::PostExecute).checkpoint_id;
    plans.cleanup_all("p");
  }
  auto plans = plan::SandboxManager::open(b.root.path());
  auto sb = plans.get_or_create_sandbox("p", "r", b.project.path(), plan::strategy::copy_on_write);
  auto cm = plan::CheckpointManager::open_with_store(b.root.path(), store.path().string());
  auto stored = cm.list_stored();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].checkpoint_id, checkpoint_id);
  auto restored = cm.restore_from_store(sb, checkpoint_id);
  ASSERT_TRUE(restored.has_value());
  EXPECT_EQ(read_file(sb->get_path("a.txt")), "two\n");
  EXPECT_FALSE(fs::exists(sb->get_path("gone.txt")));
  EXPECT_EQ(read_file(sb->get_path("new/added.txt")), "added\n");
  EXPECT_TRUE(is_exec(sb->get_path("bin/run.sh")));
  EXPECT_EQ(read_file(b.project / "a.txt"), "one\n");  // the original untouched

  EXPECT_TRUE(cm.delete_checkpoint(checkpoint_id));
  EXPECT_TRUE(cm.list_stored().empty());
  EXPECT_FALSE(cm.restore_from_store(sb, checkpoint_id).has_value());
  EXPECT_GE(cm.prune_store(0), 1u);
  auto plain = plan::CheckpointManager::open(b.root.path());
  EXPECT_TRUE(thrown<plan::SandboxError>([&] { plain.list_stored(); }).has_value());
  plans.cleanup_all("p");
}

}  // namespace
