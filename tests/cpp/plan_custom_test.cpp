// <patchbox/plan.hpp> custom strategies: a C++ in-memory key-value strategy registered with
// SandboxManager::register_strategy() and driven through create/write/diff/commit_all/rollback
// beside a copy_on_write sandbox; a throwing commit() inside commit_all (the other sandbox
// rolled back; AtomicCommitError for an unexpected exception, the one failed result for a
// plan::SandboxCommitError); exceptions that are not std::exception; registration refusals.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include <patchbox/plan.hpp>

#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
namespace plan = patchbox::plan;
using plan::Status;
using testutil::read_file;
using testutil::TempDir;
using testutil::write_file;

/// Keys in memory per sandbox; `published` is the "original" a commit writes to.
class KvStrategy : public plan::CustomStrategy {
 public:
  std::map<std::string, std::string> create(const plan::SandboxRef& sb,
                                            const fs::path& original) override {
    std::lock_guard<std::mutex> l(mu);
    staged[sb.sandbox_id];
    originals[sb.sandbox_id] = original;
    return {{"kv.engine", "memory"}};
  }
  std::optional<std::string> read(const plan::SandboxRef& sb, const std::string& k) override {
    std::lock_guard<std::mutex> l(mu);
    auto& s = staged.at(sb.sandbox_id);
    auto it = s.find(k);
    if (it == s.end()) return std::nullopt;
    return it->second;
  }
  void write(const plan::SandboxRef& sb, const std::string& k, const std::string& v) override {
    if (k == "throw-int") throw 42;
    std::lock_guard<std::mutex> l(mu);
    staged.at(sb.sandbox_id)[k] = v;
  }
  plan::DiffView diff(const plan::SandboxRef& sb) override {
    std::lock_guard<std::mutex> l(mu);
    plan::DiffView v;
    v.sandbox_id = sb.sandbox_id;
    for (const auto& [k, val] : staged.at(sb.sandbox_id)) {
      plan::DiffEntry e;
      e.path = k;
      auto p = published.find(k);
      e.operation = p == published.end() ? plan::DiffOp::Added : plan::DiffOp::Modified;
      if (p != published.end()) e.before = p->second;
      e.after = val;
      v.entries.push_back(e);
    }
    return v;
  }
  std::optional<std::string> commit(const plan::SandboxRef& sb,
                                    const std::optional<std::string>&) override {
    if (fail_commit) throw std::runtime_error("kv store is read-only");
    if (refuse_commit) throw plan::SandboxCommitError("quota exceeded", sb.sandbox_id);
    std::lock_guard<std::mutex> l(mu);
    undo[sb.sandbox_id] = published;
    for (const auto& [k, v] : staged.at(sb.sandbox_id)) published[k] = v;
    return "kv:" + sb.sandbox_id;
  }
  void rollback(const plan::SandboxRef& sb, bool after_commit) override {
    std::lock_guard<std::mutex> l(mu);
    if (after_commit) {
      published = undo.at(sb.sandbox_id);
    } else {
      staged.at(sb.sandbox_id).clear();
    }
  }
  void checkpoint(const plan::SandboxRef& sb, const std::string& id) override {
    std::lock_guard<std::mutex> l(mu);
    checkpoints[sb.sandbox_id + "/" + id] = staged.at(sb.sandbox_id);
  }
  void restore_checkpoint(const plan::SandboxRef& sb, const std::string& id) override {
    std::lock_guard<std::mutex> l(mu);
    staged.at(sb.sandbox_id) = checkpoints.at(sb.sandbox_id + "/" + id);
  }
  void cleanup(const plan::SandboxRef& sb) override {
    std::lock_guard<std::mutex> l(mu);
    staged.erase(sb.sandbox_id);
    ++cleanups;
  }

  std::mutex mu;
  std::map<std::string, std::map<std::string, std::string>> staged;
  std::map<std::string, std::map<std::string, std::string>> checkpoints;
  std::map<std::string, std::map<std::string, std::string>> undo;
  std::map<std::string, fs::path> originals;
  std::map<std::string, std::string> published;
  std::atomic<bool> fail_commit{false};
  std::atomic<bool> refuse_commit{false};  ///< commit() throws plan::SandboxCommitError
  int cleanups = 0;
};

struct Fixture {
  TempDir root{"patchbox-custom-root"};
  TempDir project{"patchbox-custom-project"};
  fs::path files = project / "files";
  fs::path cache = project / "cache";
  std::shared_ptr<KvStrategy> kv = std::make_shared<KvStrategy>();
  plan::SandboxManager mgr = plan::SandboxManager::open(root.path());
  Fixture() {
    write_file(files / "a.txt", "one\n");
    fs::create_directories(cache);
    mgr.register_strategy("kv", kv);
  }
};

TEST(PlanCustom, DrivenThroughCommitAllAndRollback) {
  Fixture f;
  EXPECT_TRUE(f.mgr.has_custom_strategy("kv"));
  auto cow = f.mgr.get_or_create_sandbox("p", "files", f.files, plan::strategy::copy_on_write);
  auto sb = f.mgr.get_or_create_sandbox("p", "cache", f.cache, "kv");
  EXPECT_EQ(sb->strategy(), "kv");
  EXPECT_EQ(sb->status(), Status::Created);
  ASSERT_TRUE(sb->context());
  EXPECT_EQ(sb->context()->metadata.at("kv.engine"), "memory");
  EXPECT_EQ(sb->context()->metadata.at("strategy"), "kv");

  sb->write("greeting", "hello");
  cow->write("a.txt", "two\n");
  EXPECT_EQ(sb->status(), Status::Active);
  EXPECT_EQ(sb->read("greeting").value_or(""), "hello");
  EXPECT_FALSE(sb->read("absent").has_value());
  EXPECT_THROW(sb->get_path("greeting"), plan::SandboxError);  // read/write only
  EXPECT_THROW(sb->write("../escape", "x"), plan::SandboxError);

  plan::SandboxDiff d = sb->diff();
  ASSERT_EQ(d.entries.size(), 1u);
  EXPECT_EQ(d.entries[0].path, "greeting");
  EXPECT_EQ(d.entries[0].operation, plan::DiffOp::Added);
  EXPECT_EQ(d.entries[0].after.value_or(""), "hello");
  EXPECT_NE(d.patch.find("+++ b/greeting"), std::string::npos);

  std::vector<plan::CommitResult> results = f.mgr.commit_all("p");
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(read_file(f.files / "a.txt"), "two\n");
  EXPECT_EQ(f.kv->published.at("greeting"), "hello");
  for (const auto& r : results) {
    if (r.sandbox_id != sb->sandbox_id()) continue;
    EXPECT_EQ(r.commit_ref.value_or(""), "kv:" + sb->sandbox_id());
    EXPECT_EQ(r.added_files, std::vector<std::string>{"greeting"});
  }
  EXPECT_EQ(sb->status(), Status::Committed);

  f.mgr.rollback_all("p");
  EXPECT_TRUE(f.kv->published.empty());
  EXPECT_EQ(read_file(f.files / "a.txt"), "one\n");
  f.mgr.cleanup_all("p");
  EXPECT_EQ(f.kv->cleanups, 1);
  EXPECT_TRUE(f.kv->staged.empty());
}

TEST(PlanCustom, AThrowingCommitRollsBackTheOthers) {
  Fixture f;
  auto cow = f.mgr.get_or_create_sandbox("p", "files", f.files, plan::strategy::copy_on_write);
  auto sb = f.mgr.get_or_create_sandbox("p", "cache", f.cache, "kv");
  EXPECT_TRUE(std::dynamic_pointer_cast<plan::CustomSandbox>(sb));  // the custom class
  cow->write("a.txt", "two\n");
  sb->write("k", "v");
  f.kv->fail_commit = true;
  try {
    f.mgr.commit_all("p");
    ADD_FAILURE() << "commit_all succeeded";
  } catch (const plan::AtomicCommitError& e) {
    EXPECT_EQ(e.sandbox_id(), sb->sandbox_id());
    EXPECT_EQ(e.rolled_back_ids(), std::vector<std::string>{cow->sandbox_id()});
    EXPECT_TRUE(e.failed_rollback_ids().empty());
    EXPECT_NE(std::string(e.what()).find("kv store is read-only"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file(f.files / "a.txt"), "one\n");
  EXPECT_TRUE(f.kv->published.empty());
  EXPECT_EQ(sb->status(), Status::Active);
  // Alone, a commit throwing what is not a plan::SandboxError is a plan::SandboxError of the
  // base class (not a sandbox-level commit failure).
  try {
    sb->commit();
    ADD_FAILURE() << "commit succeeded";
  } catch (const plan::SandboxCommitError&) {
    ADD_FAILURE() << "an unexpected exception is not a SandboxCommitError";
  } catch (const plan::SandboxError& e) {
    EXPECT_NE(std::string(e.what()).find("kv store is read-only"), std::string::npos) << e.what();
  }
  // A commit throwing plan::SandboxCommitError is a sandbox-level failure: commit_all rolls
  // the others back and returns the one failed result.
  f.kv->fail_commit = false;
  f.kv->refuse_commit = true;
  std::vector<plan::CommitResult> failed = f.mgr.commit_all("p");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_FALSE(failed[0].success);
  EXPECT_EQ(failed[0].sandbox_id, sb->sandbox_id());
  EXPECT_EQ(failed[0].metadata.at("rolled_back_ids"), cow->sandbox_id());
  ASSERT_TRUE(failed[0].error);
  EXPECT_NE(failed[0].error->find("quota exceeded"), std::string::npos) << *failed[0].error;
  EXPECT_EQ(read_file(f.files / "a.txt"), "one\n");
  f.kv->refuse_commit = false;
  f.kv->fail_commit = false;
  EXPECT_EQ(f.mgr.commit_all("p").size(), 2u);
  EXPECT_EQ(f.kv->published.at("k"), "v");
  f.mgr.cleanup_all("p");
}

TEST(PlanCustom, ForeignExceptionsBecomeErrors) {
  Fixture f;
  auto sb = f.mgr.get_or_create_sandbox("p", "cache", f.cache, "kv");
  try {
    sb->write("throw-int", "x");
    ADD_FAILURE() << "no exception";
  } catch (const plan::SandboxError& e) {
    EXPECT_NE(std::string(e.what()).find("not a std::exception"), std::string::npos) << e.what();
  }
  // The sandbox is still usable.
  sb->write("k", "v");
  EXPECT_EQ(sb->read("k").value_or(""), "v");
  f.mgr.cleanup_all("p");
}

TEST(PlanCustom, RegistrationRefusals) {
  Fixture f;
  EXPECT_THROW(f.mgr.register_strategy("kv", f.kv), plan::SandboxError);  // taken
  EXPECT_THROW(f.mgr.register_strategy("copy_on_write", f.kv), plan::SandboxError);
  EXPECT_THROW(f.mgr.register_strategy("a/b", f.kv), plan::SandboxError);
  EXPECT_THROW(f.mgr.register_strategy("other", nullptr), plan::SandboxError);
  EXPECT_FALSE(f.mgr.has_custom_strategy("other"));
  try {
    f.mgr.get_or_create_sandbox("p", "cache", f.cache, "unregistered");
    ADD_FAILURE() << "no exception";
  } catch (const plan::SandboxError& e) {
    std::string w = e.what();
    EXPECT_NE(w.find("registered: [kv]"), std::string::npos) << w;
    EXPECT_NE(w.find("copy_on_write"), std::string::npos) << w;
  }
}

}  // namespace
