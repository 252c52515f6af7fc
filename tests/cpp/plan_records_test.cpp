// The plan records from C++, read as a plugin reads them: SandboxManager::plans_json() and
// diff_json() (what `patchbox plan list --json` and `plan diff --json` print) and
// CommitResult::json (one element of `plan commit --json`), parsed with nlohmann/json and
// checked against the manager's own answers and the files on disk. Temporary directories only.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <patchbox/plan.hpp>
#include <patchbox/provenance.hpp>

#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
namespace plan = patchbox::plan;
using nlohmann::json;
using testutil::read_file;
using testutil::TempDir;
using testutil::write_file;

/// Two projects, each in a copy_on_write sandbox of plan "p1": `app` gets a changed and an
/// added file, `docs` a deleted one.
struct Records : ::testing::Test {
  TempDir root{"patchbox-plan-records-root"};
  TempDir project{"patchbox-plan-records-project"};
  fs::path app = project / "app";
  fs::path docs = project / "docs";
  plan::SandboxManager mgr = [this] {
    write_file(app / "main.c", "int main() { return 0; }\n");
    write_file(docs / "old.md", "obsolete\nsoon gone\n");
    return plan::SandboxManager::open(root.path());
  }();

  void edit() {
    auto a = mgr.get_or_create_sandbox("p1", "app", app, "copy_on_write");
    write_file(a->get_path("main.c"), "int main() { return 1; }\n");
    write_file(a->get_path("new.c"), "one\ntwo\n");
    auto d = mgr.get_or_create_sandbox("p1", "docs", docs, "copy_on_write");
    fs::remove(d->get_path("old.md"));
  }
};

TEST_F(Records, PlansJsonListsEveryPlanAndItsSandboxes) {
  edit();
  auto other = mgr.get_or_create_sandbox("p2", "docs", docs, "copy_on_write");
  json all = json::parse(mgr.plans_json());
  ASSERT_TRUE(all.is_array());
  std::set<std::string> plans;
  for (const auto& p : all) plans.insert(p.at("plan").get<std::string>());
  EXPECT_EQ(plans, (std::set<std::string>{"p1", "p2"}));

  json one = json::parse(mgr.plans_json("p1"));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0]["plan"], "p1");
  const json& sbs = one[0]["sandboxes"];
  auto listed = mgr.list_sandboxes("p1");
  ASSERT_EQ(sbs.size(), listed.size());
  for (size_t i = 0; i < listed.size(); ++i) {
    EXPECT_EQ(sbs[i]["sandbox_id"], listed[i]->sandbox_id());
    EXPECT_EQ(sbs[i]["strategy"], "copy_on_write");
    EXPECT_EQ(sbs[i]["status"], "active");
    EXPECT_EQ(sbs[i]["resource_id"], i == 0 ? "app" : "docs");
    EXPECT_EQ(fs::path(sbs[i]["original_path"].get<std::string>()),
              fs::canonical(i == 0 ? app : docs));
    EXPECT_TRUE(fs::is_directory(sbs[i]["sandbox_path"].get<std::string>()));
  }
  // A plan with no sandboxes is a record with none, as the CLI prints it.
  json none = json::parse(mgr.plans_json("nothing"));
  ASSERT_EQ(none.size(), 1u);
  EXPECT_TRUE(none[0]["sandboxes"].empty());
  (void)other;
}

TEST_F(Records, DiffJsonCountsLinesPerFileAndCarriesThePatch) {
  edit();
  json diffs = json::parse(mgr.diff_json("p1"));
  ASSERT_EQ(diffs.size(), 2u);
  EXPECT_EQ(diffs[0]["plan"], "p1");
  EXPECT_EQ(diffs[0]["resource_id"], "app");
  const json& files = diffs[0]["files"];
  ASSERT_EQ(files.size(), 2u);
  for (const auto& f : files) {
    if (f["path"] == "main.c") {
      EXPECT_EQ(f["change"], "modified");
      EXPECT_EQ(f["insertions"], 1);
      EXPECT_EQ(f["deletions"], 1);
    } else {
      EXPECT_EQ(f["path"], "new.c");
      EXPECT_EQ(f["change"], "added");
      EXPECT_EQ(f["insertions"], 2);
      EXPECT_EQ(f["deletions"], 0);
    }
  }
  EXPECT_NE(diffs[0]["patch"].get<std::string>().find("+int main() { return 1; }\n"),
            std::string::npos);
  EXPECT_EQ(diffs[1]["resource_id"], "docs");
  EXPECT_EQ(diffs[1]["files"][0]["change"], "deleted");
  EXPECT_EQ(diffs[1]["files"][0]["deletions"], 2);
  // The patch is the sandbox's own diff.
  EXPECT_EQ(diffs[1]["patch"].get<std::string>(), mgr.list_sandboxes("p1")[1]->diff().patch);

  // Once committed, nothing is left to review.
  mgr.commit_all("p1");
  EXPECT_TRUE(json::parse(mgr.diff_json("p1")).empty());
}

TEST_F(Records, CommitResultJsonIsTheResultAsARecord) {
  edit();
  auto results = mgr.commit_all("p1", patchbox::Provenance{{"agent", "--fix"}, {}, 0, {}, {}});
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(read_file(app / "new.c"), "one\ntwo\n");
  for (const auto& r : results) {
    json j = json::parse(r.json);
    EXPECT_EQ(j["sandbox_id"], r.sandbox_id);
    EXPECT_EQ(j["success"], true);
    EXPECT_EQ(j["commit_ref"], *r.commit_ref);
    EXPECT_EQ(j["changed_files"].get<std::vector<std::string>>(), r.changed_files);
    EXPECT_EQ(j["added_files"].get<std::vector<std::string>>(), r.added_files);
    EXPECT_EQ(j["deleted_files"].get<std::vector<std::string>>(), r.deleted_files);
    EXPECT_TRUE(j["error"].is_null());
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  r.timestamp.time_since_epoch())
                  .count();
    EXPECT_EQ(j["timestamp"].get<long long>(), ms);
    EXPECT_EQ(j["metadata"]["provenance.command"], R"(["agent","--fix"])");
    using Metadata = std::map<std::string, std::string>;
    EXPECT_EQ(j["metadata"].get<Metadata>(), r.metadata);
  }
  EXPECT_EQ(json::parse(results[0].json)["added_files"], json::array({"new.c"}));
  EXPECT_EQ(json::parse(results[1].json)["deleted_files"], json::array({"old.md"}));
}

}  // namespace
