// The C++ face of the object store against a real S3-compatible server (SeaweedFS's `weed
// server -s3`, started by each test; without the binary the test skips and says why): an agent
// "machine" delivers pending patches with their provenance to a bucket, a reviewer machine
// (another root, another HOME, its own copies of the project) lists, reads, applies — onto a
// plain copy and, 3-way against the stored pre-images, onto a copy that moved on — and drops
// them; checkpoints taken on one machine are restored into a sandbox under another root.
// Provenance given to deliver_pending_patch() without a store, or kept when the store fails,
// is checked without a server.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <patchbox/apply.hpp>
#include <patchbox/checkpoint.hpp>
#include <patchbox/plan.hpp>
#include <patchbox/provenance.hpp>
#include <patchbox/sandbox.hpp>
#include <patchbox/store.hpp>

#include "expect_error.hpp"
#include "test_util.hpp"
#include "weed.hpp"

namespace {

namespace fs = std::filesystem;
namespace plan = patchbox::plan;
using patchbox::ErrorKind;
using patchbox::Options;
using patchbox::PendingDelivery;
using patchbox::Provenance;
using patchbox::SandboxManager;
using testutil::contains;
using testutil::read_file;
using testutil::TempDir;
using testutil::Weed;
using testutil::write_file;

/// Twenty numbered lines: a hunk in the middle has context on both sides.
std::string numbered() {
  std::string s;
  for (int i = 1; i <= 20; ++i) s += "line " + std::to_string(i) + "\n";
  return s;
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  s.replace(s.find(from), from.size(), to);
  return s;
}

/// A machine: its own HOME and sandbox root (set as HOME while it works).
struct Machine {
  explicit Machine(const std::string& name) : home("pb-fleet-" + name + "-home"), root("pb-fleet-" + name + "-root") {}
  void enter() const { ::setenv("HOME", home.path().c_str(), 1); }
  TempDir home;
  TempDir root;
};

Provenance agent_provenance(const fs::path& cwd) {
  Provenance p;
  p.command = {"agent", "--task", "fix line 10"};
  p.cwd = cwd;
  p.exit_status = 3;
  p.started_ms = 1700000000000;
  p.ended_ms = 1700000004200;
  return p;
}

class Fleet : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("PATCHBOX_ROOT");
    write_file(project / "big.txt", numbered());
    write_file(project / "notes.txt", "one\n");
  }

  /// Starts the server (or skips the test).
  bool start_server() {
    std::string why;
    weed = Weed::start(server.path(), "fleet", why);
    if (!weed) std::cerr << "skipped: " << why << '\n';
    return weed.has_value();
  }

  TempDir project{"pb-fleet-project"};
  TempDir server{"pb-fleet-weed"};
  std::optional<Weed> weed;
};

TEST_F(Fleet, PendingPatchesTravelThroughAnS3BucketToAnotherMachine) {
  if (!start_server()) GTEST_SKIP() << "no weed server (PATCHBOX_WEED)";
  const std::string url = "s3://fleet/app";
  Machine agent{"agent"}, reviewer{"reviewer"};

  // The agent machine: three delegations, each delivered to the bucket.
  agent.enter();
  std::string session;
  {
    Options o;
    o.root = agent.root.path();
    o.store = url;
    SandboxManager mgr(project.path(), o);
    session = mgr.session_id();
    auto deliver = [&](const std::string& id, const fs::path& file, const std::string& text) {
      auto sb = mgr.create_sandbox(id);
      write_file(sb.path / file, text);
      auto d = mgr.deliver_pending_patch(id, mgr.finalize_sandbox(sb).patch,
                                         agent_provenance(project.path()));
      mgr.discard_sandbox(sb);
      EXPECT_EQ(d.place, PendingDelivery::Place::Stored) << d.error;
      EXPECT_EQ(d.id, session + "/" + id);
    };
    deliver("fix", "big.txt", replaced(numbered(), "line 10\n", "line ten\n"));
    deliver("notes", "notes.txt", "one\ntwo\n");
    deliver("unwanted", "notes.txt", "rewritten\n");
  }
  EXPECT_TRUE(patchbox::list_pending(agent.root.path()).empty());  // nothing stayed local

  // The reviewer machine sees them, with who made them and how.
  reviewer.enter();
  auto list = patchbox::list_stored(url);
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].id, session + "/fix");
  EXPECT_EQ(list[0].files, 1u);
  EXPECT_EQ(list[0].project, fs::canonical(project.path()));
  EXPECT_TRUE(contains(patchbox::read_stored(url, session + "/fix"), "+line ten\n"));
  // `pending show --json --store URL`'s record; a bare name will do.
  const auto record = nlohmann::json::parse(patchbox::stored_record_json(url, "fix"));
  EXPECT_EQ(record["id"], session + "/fix");
  EXPECT_EQ(record["provenance"]["command"],
            nlohmann::json::array({"agent", "--task", "fix line 10"}));
  EXPECT_EQ(record["provenance"]["cwd"], project.path().string());
  EXPECT_EQ(record["provenance"]["exit_status"], 3);
  EXPECT_EQ(record["provenance"]["started_ms"], 1700000000000ULL);
  EXPECT_EQ(record["provenance"]["ended_ms"], 1700000004200ULL);
  EXPECT_EQ(record["files"][0]["path"], "big.txt");
  EXPECT_EQ(record["patch_file"].get<std::string>().rfind("s3://fleet/app/pending/patches/", 0), 0u);
  EXPECT_TRUE(contains(record["patch"].get<std::string>(), "+line ten\n"));

  // Onto the reviewer's own copy as it was.
  TempDir copy{"pb-fleet-copy"};
  fs::copy(project.path(), copy.path(), fs::copy_options::recursive);
  EXPECT_TRUE(patchbox::apply_stored(url, session + "/notes", copy.path(), reviewer.root.path()).ok());
  EXPECT_EQ(read_file(copy / "notes.txt"), "one\ntwo\n");

  // Onto a copy that moved on around the hunk: only the stored pre-image lets it merge.
  TempDir moved{"pb-fleet-moved"};
  const std::string moved_text =
      replaced(replaced(numbered(), "line 8\n", "line eight\n"), "line 12\n", "line twelve\n");
  write_file(moved / "big.txt", moved_text);
  auto report = patchbox::apply_stored(url, session + "/fix", moved.path(), reviewer.root.path());
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(read_file(moved / "big.txt"), replaced(moved_text, "line 10\n", "line ten\n"));
  EXPECT_EQ(read_file(project / "big.txt"), numbered());  // the agent's project untouched

  // Applied patches left the store; the unwanted one is dropped.
  list = patchbox::list_stored(url);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].id, session + "/unwanted");
  patchbox::drop_stored(url, list[0].id);
  EXPECT_TRUE(patchbox::list_stored(url).empty());
  EXPECT_PB_ERROR(patchbox::read_stored(url, session + "/unwanted"), ErrorKind::Pending);
}

TEST_F(Fleet, CheckpointsInAnS3BucketAreRestoredUnderAnotherRoot) {
  if (!start_server()) GTEST_SKIP() << "no weed server (PATCHBOX_WEED)";
  const std::string url = "s3://fleet/ckpt";
  Machine agent{"agent"}, reviewer{"reviewer"};
  TempDir other_project{"pb-fleet-project2"};
  fs::copy(project.path(), other_project.path(), fs::copy_options::recursive);

  agent.enter();
  std::string checkpoint_id;
  {
    auto plans = plan::SandboxManager::open(agent.root.path());
    auto sb = plans.get_or_create_sandbox("p", "app", project.path(), plan::strategy::copy_on_write);
    auto cm = plan::CheckpointManager::open_with_store(agent.root.path(), url);
    write_file(sb->get_path("notes.txt"), "step 1\n");
    write_file(sb->get_path("new/added.txt"), "added\n");
    fs::remove(sb->get_path("big.txt"));
    checkpoint_id = cm.create_checkpoint(sb, "p", plan::Phase::PostExecute).checkpoint_id;
    plans.cleanup_all("p");
  }  // the agent's local copies are gone with its manager

  reviewer.enter();
  auto plans = plan::SandboxManager::open(reviewer.root.path());
  auto sb = plans.get_or_create_sandbox("p", "app", other_project.path(), plan::strategy::copy_on_write);
  auto cm = plan::CheckpointManager::open_with_store(reviewer.root.path(), url);
  auto stored = cm.list_stored();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].checkpoint_id, checkpoint_id);
  EXPECT_EQ(stored[0].plan_id, "p");
  auto restored = cm.restore_from_store(sb, checkpoint_id);
  ASSERT_TRUE(restored.has_value());
  EXPECT_EQ(read_file(sb->get_path("notes.txt")), "step 1\n");
  EXPECT_EQ(read_file(sb->get_path("new/added.txt")), "added\n");
  EXPECT_FALSE(fs::exists(sb->get_path("big.txt")));
  EXPECT_EQ(read_file(other_project / "notes.txt"), "one\n");  // the original untouched

  // Deleted from the store with what nothing references any more.
  EXPECT_TRUE(cm.delete_checkpoint(checkpoint_id));
  EXPECT_TRUE(cm.list_stored().empty());
  EXPECT_FALSE(cm.restore_from_store(sb, checkpoint_id).has_value());
  plans.cleanup_all("p");
}

// Without a store the provenance goes with the local pending patch.
TEST_F(Fleet, ProvenanceGivenToDeliverIsInTheLocalRecord) {
  TempDir root{"pb-fleet-root"};
  Options o;
  o.root = root.path();
  SandboxManager mgr(project.path(), o);
  auto sb = mgr.create_sandbox("d1");
  write_file(sb.path / "notes.txt", "changed\n");
  auto d = mgr.deliver_pending_patch("d1", mgr.finalize_sandbox(sb).patch,
                                     agent_provenance(project.path()));
  EXPECT_EQ(d.place, PendingDelivery::Place::Local);
  const auto record = nlohmann::json::parse(patchbox::pending_record_json(root.path(), "d1"));
  EXPECT_EQ(record["provenance"]["command"][2], "fix line 10");
  EXPECT_EQ(record["provenance"]["exit_status"], 3);
  EXPECT_EQ(record["provenance"]["ended_ms"], 1700000004200ULL);
}

// A store that cannot be reached keeps the patch locally, provenance included, and a push
// carries it into the store's record.
TEST_F(Fleet, ProvenanceSurvivesAFailedStoreAndThePushAfterIt) {
  TempDir root{"pb-fleet-root"};
  ::setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9", 1);  // nothing listens there
  ::setenv("AWS_ALLOW_HTTP", "true", 1);
  ::setenv("AWS_ACCESS_KEY_ID", "k", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "s", 1);
  Options o;
  o.root = root.path();
  o.store = "s3://fleet/x";
  SandboxManager mgr(project.path(), o);
  auto sb = mgr.create_sandbox("d1");
  write_file(sb.path / "notes.txt", "changed\n");
  auto d = mgr.deliver_pending_patch("d1", mgr.finalize_sandbox(sb).patch,
                                     agent_provenance(project.path()));
  EXPECT_EQ(d.place, PendingDelivery::Place::Kept);
  EXPECT_EQ(nlohmann::json::parse(patchbox::pending_record_json(root.path(), "d1"))["provenance"]
                ["exit_status"],
            3);

  TempDir shared{"pb-fleet-shared"};
  auto r = patchbox::push_pending(root.path(), shared.path().string());
  ASSERT_EQ(r.pushed.size(), 1u);
  const auto record =
      nlohmann::json::parse(patchbox::stored_record_json(shared.path().string(), r.pushed[0].second));
  EXPECT_EQ(record["provenance"]["command"][0], "agent");
  EXPECT_EQ(record["provenance"]["exit_status"], 3);
}

}  // namespace
