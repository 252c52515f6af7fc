// <patchbox/store.hpp> and apply_pending(): an engine reaches its pending work without a
// shell — list, read, apply, drop pending patches; list and prune sessions.
#include <patchbox/store.hpp>  // first: the header stands alone

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <patchbox/apply.hpp>
#include <patchbox/sandbox.hpp>

#include "expect_error.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using patchbox::Decision;
using patchbox::ErrorKind;
using patchbox::Options;
using patchbox::SandboxManager;
using testutil::contains;
using testutil::read_file;
using testutil::TempDir;
using testutil::write_file;

class Store : public ::testing::Test {
 protected:
  void SetUp() override { write_file(project / "a.txt", "one\n"); }

  Options options() const {
    Options o;
    o.root = root.path();
    return o;
  }

  /// A pending patch of delegation @p id that appends @p line to a.txt.
  void leave_pending(SandboxManager& mgr, const std::string& id, const std::string& line) {
    auto sb = mgr.create_sandbox(id);
    write_file(sb.path / "a.txt", read_file(sb.path / "a.txt") + line);
    auto done = mgr.complete_sandbox(sb, [](const patchbox::SandboxResult&) {
      return Decision::Reject;
    });
    ASSERT_EQ(done.routed, patchbox::Completion::Routed::Pending);
  }

  TempDir project{"pb-store-project"};
  TempDir root{"pb-store-root"};
};

TEST_F(Store, ListReadApplyAndDropPendingPatches) {
  SandboxManager mgr(project.path(), options());
  leave_pending(mgr, "d1", "two\n");
  leave_pending(mgr, "d1", "three\n");  // same id: kept beside the first

  auto list = patchbox::list_pending(root.path());
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].id, mgr.session_id() + "/d1");
  EXPECT_EQ(list[1].id, mgr.session_id() + "/d1.2");
  EXPECT_EQ(list[1].delegation, "d1");
  EXPECT_EQ(list[0].session, mgr.session_id());
  EXPECT_EQ(list[0].project, mgr.project_dir());
  EXPECT_FALSE(list[0].recovered || list[0].abandoned);
  ASSERT_TRUE(list[0].preimages.has_value());
  EXPECT_TRUE(contains(patchbox::read_pending(root.path(), list[0].id), "+two\n"));
  EXPECT_TRUE(contains(patchbox::read_pending(root.path(), list[1].id), "+three\n"));

  // Check mode writes nothing and keeps the patch; a real apply removes it.
  patchbox::ApplyOptions check;
  check.check = true;
  EXPECT_TRUE(patchbox::apply_pending(root.path(), list[0].id, check).ok());
  EXPECT_EQ(read_file(project / "a.txt"), "one\n");
  EXPECT_EQ(patchbox::list_pending(root.path()).size(), 2u);
  EXPECT_TRUE(patchbox::apply_pending(root.path(), list[0].id).ok());
  EXPECT_EQ(read_file(project / "a.txt"), "one\ntwo\n");
  EXPECT_EQ(patchbox::list_pending(root.path()).size(), 1u);

  patchbox::drop_pending(root.path(), list[1].id);
  EXPECT_TRUE(patchbox::list_pending(root.path()).empty());
  EXPECT_PB_ERROR(patchbox::read_pending(root.path(), list[1].id), ErrorKind::Pending);
  EXPECT_PB_ERROR(patchbox::drop_pending(root.path(), "nope"), ErrorKind::Pending);
}

TEST_F(Store, SessionsAreListedAndLiveOnesSurviveAPrune) {
  SandboxManager mgr(project.path(), options());
  auto sb = mgr.create_sandbox("work");
  auto sessions = patchbox::list_sessions(root.path());
  ASSERT_EQ(sessions.size(), 1u);
  EXPECT_EQ(sessions[0].id, mgr.session_id());
  EXPECT_TRUE(sessions[0].live);
  ASSERT_TRUE(sessions[0].project.has_value());
  EXPECT_EQ(*sessions[0].project, mgr.project_dir());
  EXPECT_EQ(sessions[0].sandboxes, std::vector<std::string>{"d-work"});

  patchbox::PruneReport r = patchbox::prune_sessions(root.path());
  EXPECT_EQ(r.live, std::vector<std::string>{mgr.session_id()});
  EXPECT_TRUE(r.pruned.empty() && r.errors.empty());
  EXPECT_TRUE(fs::is_directory(sb.path));
}

// A prune sweeps the shared lower layers: of a project's two layers, the older one (nobody
// holds or names it) goes, the newest stays for the project's next session.
TEST_F(Store, PruneSweepsSupersededSharedLayers) {
  const fs::path store = root.path() / "lowers" / "0123456789abcdef";
  for (const char* layer : {"01M8ZA0000000000000000000A", "01M8ZB0000000000000000000B"}) {
    fs::create_directories(store / layer / "tree");
    std::ofstream(store / layer / "manifest") << "x";
  }
  patchbox::PruneReport r = patchbox::prune_sessions(root.path());
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.shared_layers_removed, 1u);
  EXPECT_FALSE(fs::exists(store / "01M8ZA0000000000000000000A"));
  EXPECT_TRUE(fs::exists(store / "01M8ZB0000000000000000000B" / "manifest"));
  EXPECT_EQ(patchbox::prune_sessions(root.path()).shared_layers_removed, 0u);
}

// Applies recorded in the root's store: listed, undone (the newest first), dropped — what
// `patchbox apply --list-undo / --undo / --drop-undo` do, without a shell.
TEST_F(Store, RecordedAppliesAreListedUndoneAndDropped) {
  SandboxManager mgr(project.path(), options());
  leave_pending(mgr, "d1", "two\n");
  const std::string id = patchbox::list_pending(root.path()).at(0).id;
  ASSERT_TRUE(patchbox::apply_pending(root.path(), id).ok());  // recorded in the store
  const std::string more = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,3 @@\n one\n two\n+three\n";
  ASSERT_TRUE(patchbox::apply_recorded(root.path(), project.path(), more).ok());
  EXPECT_EQ(read_file(project / "a.txt"), "one\ntwo\nthree\n");

  auto records = patchbox::list_applies(root.path(), project.path());
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].state, patchbox::ApplyRecord::State::Applied);
  EXPECT_EQ(records[1].paths, 1u);
  EXPECT_EQ(records[0].project, fs::canonical(project.path()));

  patchbox::UndoReport u = patchbox::undo_last_apply(root.path(), project.path());
  EXPECT_EQ(u.restored, std::vector<fs::path>{"a.txt"});
  EXPECT_EQ(read_file(project / "a.txt"), "one\ntwo\n");
  records = patchbox::list_applies(root.path());
  ASSERT_EQ(records.size(), 1u);
  patchbox::drop_apply_record(root.path(), records[0].id);
  EXPECT_TRUE(patchbox::list_applies(root.path()).empty());
  EXPECT_PB_ERROR(patchbox::undo_last_apply(root.path(), project.path()), ErrorKind::Pending);
  EXPECT_EQ(read_file(project / "a.txt"), "one\ntwo\n");
}

// Pending patches in an object store shared by machines (here a store directory, the same
// layout as in a bucket): delivered by one manager, listed, read, applied onto another copy
// of the project and dropped by anyone holding the URL.
TEST_F(Store, PendingPatchesInAnObjectStoreAreSharedAcrossRoots) {
  TempDir shared{"pb-store-shared"};
  TempDir other_root{"pb-store-root2"};
  TempDir copy{"pb-store-copy"};
  write_file(copy / "a.txt", "one\n");
  const std::string url = shared.path().string();
  Options o = options();
  o.store = url;
  SandboxManager mgr(project.path(), o);
  for (const char* line : {"two\n", "three\n"}) {
    auto sb = mgr.create_sandbox("d1");
    write_file(sb.path / "a.txt", read_file(sb.path / "a.txt") + line);
    auto res = mgr.finalize_sandbox(sb);
    auto d = mgr.deliver_pending_patch("d1", res.patch);
    EXPECT_EQ(d.place, patchbox::PendingDelivery::Place::Stored);
    EXPECT_EQ(d.url, url);
    mgr.discard_sandbox(sb);
  }
  EXPECT_TRUE(patchbox::list_pending(root.path()).empty());  // nothing local

  auto list = patchbox::list_stored(url);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].id, mgr.session_id() + "/d1");
  EXPECT_EQ(list[1].id, mgr.session_id() + "/d1.2");  // same id: kept beside the first
  EXPECT_EQ(list[1].delegation, "d1");
  EXPECT_EQ(list[0].files, 1u);
  EXPECT_EQ(list[0].project, mgr.project_dir());
  EXPECT_TRUE(contains(patchbox::read_stored(url, list[0].id), "+two\n"));

  // Applied onto another copy of the project, with its undo record in another root.
  EXPECT_TRUE(patchbox::apply_stored(url, list[0].id, copy.path(), other_root.path()).ok());
  EXPECT_EQ(read_file(copy / "a.txt"), "one\ntwo\n");
  EXPECT_EQ(read_file(project / "a.txt"), "one\n");
  EXPECT_EQ(patchbox::list_stored(url).size(), 1u);
  patchbox::drop_stored(url, list[1].id);
  EXPECT_TRUE(patchbox::list_stored(url).empty());
  EXPECT_PB_ERROR(patchbox::read_stored(url, list[1].id), ErrorKind::Pending);
  EXPECT_PB_ERROR(patchbox::list_stored("gs://bucket/x"), ErrorKind::Store);
}

// A store that cannot be reached keeps the work locally; push_pending() sends it later.
TEST_F(Store, AnUnreachableStoreKeepsThePatchLocallyUntilPushed) {
  // Nothing listens on port 9 of the loopback address (discard is not run here).
  ::setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9", 1);
  ::setenv("AWS_ALLOW_HTTP", "true", 1);
  ::setenv("AWS_ACCESS_KEY_ID", "k", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "s", 1);
  Options o = options();
  o.store = "s3://fleet/x";
  SandboxManager mgr(project.path(), o);
  auto sb = mgr.create_sandbox("d1");
  write_file(sb.path / "a.txt", "changed\n");
  auto d = mgr.deliver_pending_patch("d1", mgr.finalize_sandbox(sb).patch);
  for (const char* v : {"AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP", "AWS_ACCESS_KEY_ID",
                        "AWS_SECRET_ACCESS_KEY"}) {
    ::unsetenv(v);
  }
  EXPECT_EQ(d.place, patchbox::PendingDelivery::Place::Kept);
  EXPECT_FALSE(d.error.empty());
  EXPECT_TRUE(fs::exists(d.path));
  ASSERT_EQ(patchbox::list_pending(root.path()).size(), 1u);

  TempDir shared{"pb-store-shared"};
  patchbox::PushReport r = patchbox::push_pending(root.path(), shared.path().string());
  ASSERT_EQ(r.pushed.size(), 1u);
  EXPECT_TRUE(r.failed.empty());
  EXPECT_EQ(r.pushed[0].first, mgr.session_id() + "/d1");
  EXPECT_TRUE(patchbox::list_pending(root.path()).empty());
  auto stored = patchbox::list_stored(shared.path().string());
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_TRUE(contains(patchbox::read_stored(shared.path().string(), stored[0].id), "+changed"));
}

}  // namespace
