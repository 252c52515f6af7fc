// <patchbox/strategy_adapter.hpp>, from the plan executors' "Built-In Strategy Adapter"
// section: the documented snippet (create, write, read, cleanup) on copy_on_write, and the
// other operations of the protocol through it (diff, commit into the original, rollback after
// commit, checkpoint and restore), each asserting what is on disk.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>

#include <patchbox/strategy_adapter.hpp>

#include "expect_error.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
namespace plan = patchbox::plan;
using testutil::read_file;
using testutil::TempDir;
using testutil::write_file;

plan::Resource directory(const fs::path& p) {
  plan::Resource r;
  r.id = "docs";
  r.kind = "directory";
  r.path = p;
  return r;
}

TEST(StrategyAdapter, TheDocumentedSnippetRunsOnCopyOnWrite) {
  TempDir root("pb-adapter-root"), project("pb-adapter-proj");
  write_file(project / "README.md", "hello\n");
  plan::BuiltInSandboxStrategyAdapter adapter(plan::strategy::copy_on_write, root.path());
  EXPECT_EQ(adapter.strategy_name(), "copy_on_write");
  const plan::SandboxRef ref = adapter.create("plan-001", directory(project.path()));
  EXPECT_EQ(ref.plan_id, "plan-001");
  EXPECT_EQ(ref.resource_id, "docs");
  EXPECT_EQ(ref.metadata.at("original_path"), project.path().string());
  EXPECT_FALSE(ref.metadata.at("builtin.sandbox_id").empty());

  // write returns its DiffEntry: an added file, then a modified one.
  const plan::DiffEntry added = adapter.write(ref, "file.txt", "content");
  EXPECT_EQ(added.path, "file.txt");
  EXPECT_EQ(added.operation, plan::DiffOp::Added);
  EXPECT_FALSE(added.before.has_value());
  EXPECT_EQ(added.after, std::optional<std::string>("content"));
  const plan::DiffEntry modified = adapter.write(ref, "README.md", "hello there\n");
  EXPECT_EQ(modified.operation, plan::DiffOp::Modified);
  EXPECT_EQ(modified.before, std::optional<std::string>("hello\n"));

  EXPECT_EQ(adapter.read(ref, "file.txt"), std::optional<std::string>("content"));
  EXPECT_EQ(adapter.read(ref, "absent.txt"), std::nullopt);
  // The original is untouched by the writes.
  EXPECT_FALSE(fs::exists(project / "file.txt"));
  EXPECT_EQ(read_file(project / "README.md"), "hello\n");
  adapter.cleanup(ref);
  EXPECT_FALSE(fs::exists(project / "file.txt"));
}

TEST(StrategyAdapter, DiffCommitAndRollbackAfterCommitReachTheOriginal) {
  TempDir root("pb-adapter-root"), project("pb-adapter-proj");
  write_file(project / "notes.txt", "one\n");
  plan::BuiltInSandboxStrategyAdapter adapter(plan::strategy::copy_on_write, root.path());
  EXPECT_TRUE(adapter.is_rollbackable());
  const plan::SandboxRef ref = adapter.create("plan-001", directory(project.path()));
  adapter.write(ref, "notes.txt", "two\n");
  const plan::DiffView view = adapter.diff(ref);
  ASSERT_EQ(view.entries.size(), 1u);
  EXPECT_EQ(view.entries[0].path, "notes.txt");
  EXPECT_EQ(view.entries[0].operation, plan::DiffOp::Modified);

  const std::optional<std::string> commit_ref = adapter.commit(ref, std::string("edit notes"));
  EXPECT_TRUE(commit_ref.has_value());
  EXPECT_EQ(read_file(project / "notes.txt"), "two\n");
  adapter.rollback(ref, /*after_commit=*/true);
  EXPECT_EQ(read_file(project / "notes.txt"), "one\n");
  adapter.cleanup(ref);
}

TEST(StrategyAdapter, CheckpointAndRestoreThroughTheProtocol) {
  TempDir root("pb-adapter-root"), project("pb-adapter-proj");
  write_file(project / "notes.txt", "one\n");
  plan::BuiltInSandboxStrategyAdapter adapter(plan::strategy::copy_on_write, root.path());
  const plan::SandboxRef ref = adapter.create("plan-001", directory(project.path()));
  adapter.write(ref, "notes.txt", "checkpointed\n");
  adapter.checkpoint(ref, "cp-1");
  adapter.write(ref, "notes.txt", "later\n");
  adapter.write(ref, "extra.txt", "x\n");
  adapter.restore_checkpoint(ref, "cp-1");
  EXPECT_EQ(adapter.read(ref, "notes.txt"), std::optional<std::string>("checkpointed\n"));
  EXPECT_EQ(adapter.read(ref, "extra.txt"), std::nullopt);
  EXPECT_THROW(adapter.restore_checkpoint(ref, "never-taken"), plan::SandboxError);
  adapter.cleanup(ref);
}

TEST(StrategyAdapter, OnlyBuiltInStrategiesAreAdaptedAndNoneCannotBeUndone) {
  TempDir root("pb-adapter-root");
  EXPECT_PB_ERROR(plan::BuiltInSandboxStrategyAdapter("no_such_strategy", root.path()),
                  patchbox::ErrorKind::Plan);
  plan::BuiltInSandboxStrategyAdapter none(plan::strategy::none, root / "none");
  EXPECT_FALSE(none.is_rollbackable());
}

}  // namespace
