// The drop-in <entropic/core/sandbox.h>: the reference engine's v2 API on patchbox. This
// executable runs with HOME set to a directory in the build tree (CTest ENVIRONMENT); every
// test refuses to run with any other HOME, so the real $HOME is never touched.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <entropic/core/sandbox.h>

#include "test_util.hpp"

std::string engine_like_session(const std::filesystem::path& project,
                                std::filesystem::path* session);

namespace {

namespace fs = std::filesystem;
using entropic::SandboxInfo;
using entropic::SandboxManager;
using entropic::SandboxResult;
using entropic::ScopedSandbox;
using testutil::read_file;
using testutil::write_file;
using Paths = std::vector<fs::path>;

class Compat : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* home = std::getenv("HOME");
    ASSERT_TRUE(home != nullptr && std::string(home) == PATCHBOX_TEST_HOME)
        << "refusing to run with HOME=" << (home ? home : "(unset)")
        << ": run through ctest, which sets HOME=" << PATCHBOX_TEST_HOME;
    ::unsetenv("PATCHBOX_ROOT");  // the compat root is $HOME/.entropic/sandbox
    write_file(project / "a.txt", "one\n");
    write_file(project / "README.md", "readme\n");
  }

  static fs::path root() { return fs::path(PATCHBOX_TEST_HOME) / ".entropic" / "sandbox"; }

  testutil::TempDir project{"pb-compat-project"};
};

TEST_F(Compat, EngineCodeWrittenForTheReferenceApiWorksUnchanged) {
  fs::path session;
  EXPECT_EQ(engine_like_session(project.path(), &session), "");
  // The session kept its pending patch; clean it up (it lives in the test HOME).
  EXPECT_TRUE(fs::exists(session / "pending" / "delegation-1.patch"));
  fs::remove_all(session);
}

TEST_F(Compat, TheSessionLivesUnderHomeEntropicSandbox) {
  SandboxManager mgr(project.path());
  ASSERT_FALSE(mgr.session_base().empty());
  EXPECT_EQ(mgr.session_base().parent_path(), fs::canonical(root()));
  EXPECT_TRUE(fs::is_directory(mgr.session_base()));
  EXPECT_EQ(mgr.project_dir(), project.path());
}

TEST_F(Compat, TheDestructorRemovesTheSessionWithoutPendingPatches) {
  fs::path session;
  {
    SandboxManager mgr(project.path());
    session = mgr.session_base();
    std::optional<SandboxInfo> sb = mgr.create_sandbox("d1");
    ASSERT_TRUE(sb);
    write_file(sb->path / "a.txt", "two\n");
    ASSERT_TRUE(mgr.finalize_sandbox(*sb));
    mgr.discard_sandbox(*sb);
  }
  EXPECT_FALSE(fs::exists(session));
}

// A sandbox neither discarded nor stored when the manager goes keeps its work as a pending
// patch (marked abandoned), as a crash would.
TEST_F(Compat, TheDestructorKeepsAbandonedWork) {
  fs::path session;
  {
    SandboxManager mgr(project.path());
    session = mgr.session_base();
    std::optional<SandboxInfo> sb = mgr.create_sandbox("d1");
    ASSERT_TRUE(sb);
    write_file(sb->path / "a.txt", "two\n");
  }
  ASSERT_TRUE(fs::exists(session / "pending" / "d1.patch"));
  EXPECT_NE(read_file(session / "pending" / "d1.patch").find("+two"), std::string::npos);
  EXPECT_NE(read_file(session / "pending" / "d1.meta").find("abandoned=true"), std::string::npos);
  fs::remove_all(session);
}

// The reference engine names every top-level delegation "d1": two default-deny delegations
// of one session both keep their patches, under distinct names.
TEST_F(Compat, TwoPendingPatchesOfOneIdBothSurvive) {
  fs::path session;
  std::vector<fs::path> stored;
  {
    SandboxManager mgr(project.path());
    session = mgr.session_base();
    for (const char* text : {"first\n", "second\n"}) {
      std::optional<SandboxInfo> sb = mgr.create_sandbox("d1");
      ASSERT_TRUE(sb);
      write_file(sb->path / "a.txt", text);
      std::optional<SandboxResult> r = mgr.finalize_sandbox(*sb);
      ASSERT_TRUE(r);
      std::optional<fs::path> p = mgr.write_pending_patch("d1", r->patch);
      ASSERT_TRUE(p);
      stored.push_back(*p);
      mgr.discard_sandbox(*sb);
    }
  }
  ASSERT_EQ(stored.size(), 2u);
  EXPECT_EQ(stored[0], session / "pending" / "d1.patch");
  EXPECT_EQ(stored[1], session / "pending" / "d1.2.patch");
  EXPECT_NE(read_file(stored[0]).find("+first"), std::string::npos);
  EXPECT_NE(read_file(stored[1]).find("+second"), std::string::npos);
  fs::remove_all(session);
}

TEST_F(Compat, TheDestructorKeepsPendingPatches) {
  fs::path session, pending;
  {
    SandboxManager mgr(project.path());
    session = mgr.session_base();
    std::optional<SandboxInfo> sb = mgr.create_sandbox("d1");
    ASSERT_TRUE(sb);
    write_file(sb->path / "a.txt", "two\n");
    std::optional<SandboxResult> r = mgr.finalize_sandbox(*sb);
    ASSERT_TRUE(r);
    std::optional<fs::path> p = mgr.write_pending_patch("d1", r->patch);
    ASSERT_TRUE(p);
    pending = *p;
  }
  EXPECT_TRUE(fs::exists(pending));
  EXPECT_FALSE(fs::exists(session / "d-d1"));
  EXPECT_FALSE(fs::exists(session / "base"));
  fs::remove_all(session);
}

TEST_F(Compat, FailuresReturnNulloptInsteadOfThrowing) {
  SandboxManager mgr(project.path());
  EXPECT_FALSE(mgr.create_sandbox("../x"));
  EXPECT_FALSE(mgr.create_sandbox(""));
  std::optional<SandboxInfo> sb = mgr.create_sandbox("dup");
  ASSERT_TRUE(sb);
  EXPECT_FALSE(mgr.create_sandbox("dup"));  // id in use
  SandboxInfo ghost{mgr.session_base() / "d-ghost", "ghost", sb->base_dir};
  EXPECT_FALSE(mgr.create_sandbox("next", ghost));  // unknown predecessor
  EXPECT_FALSE(mgr.finalize_sandbox(ghost));
  EXPECT_FALSE(mgr.write_pending_patch("../x", "patch"));
  EXPECT_FALSE(fs::exists(mgr.session_base().parent_path() / "x"));
}

TEST_F(Compat, ARefusedDiscardRemovesNothingAndDoesNotThrow) {
  SandboxManager mgr(project.path());
  std::optional<SandboxInfo> sb = mgr.create_sandbox("task");
  ASSERT_TRUE(sb);
  testutil::TempDir victim("pb-victim");
  write_file(victim / "precious.txt", "keep\n");
  EXPECT_NO_THROW(mgr.discard_sandbox(SandboxInfo{victim.path(), "task", sb->base_dir}));
  EXPECT_NO_THROW(mgr.discard_sandbox(SandboxInfo{project.path(), "task", sb->base_dir}));
  EXPECT_NO_THROW(mgr.discard_sandbox(SandboxInfo{mgr.session_base() / "base", "x", {}}));
  EXPECT_NO_THROW(mgr.discard_sandbox(SandboxInfo{sb->path, "../task", {}}));
  EXPECT_EQ(read_file(victim / "precious.txt"), "keep\n");
  EXPECT_EQ(read_file(project / "a.txt"), "one\n");
  EXPECT_TRUE(fs::is_directory(mgr.session_base() / "base"));
  EXPECT_TRUE(fs::is_directory(sb->path));
  mgr.discard_sandbox(*sb);
  EXPECT_FALSE(fs::exists(sb->path));
}

TEST_F(Compat, AFailedConstructorGivesAnInertManager) {
  const fs::path missing = project / "missing";
  SandboxManager mgr(missing);  // does not throw
  EXPECT_EQ(mgr.project_dir(), missing);
  EXPECT_TRUE(mgr.session_base().empty());
  EXPECT_FALSE(mgr.create_sandbox("d1"));
  SandboxInfo any{project.path(), "d1", project.path()};
  EXPECT_FALSE(mgr.finalize_sandbox(any));
  EXPECT_FALSE(mgr.write_pending_patch("d1", "x"));
  EXPECT_NO_THROW(mgr.discard_sandbox(any));
  EXPECT_TRUE(fs::exists(project / "a.txt"));
  SandboxManager moved(std::move(mgr));
  EXPECT_FALSE(moved.create_sandbox("d1"));
}

TEST_F(Compat, ChainedSandboxesAreCumulative) {
  SandboxManager mgr(project.path());
  std::optional<SandboxInfo> first = mgr.create_sandbox("first");
  ASSERT_TRUE(first);
  write_file(first->path / "a.txt", "two\n");
  std::optional<SandboxInfo> second = mgr.create_sandbox("second", first);
  ASSERT_TRUE(second);
  write_file(second->path / "README.md", "new readme\n");
  std::optional<SandboxResult> r = mgr.finalize_sandbox(*second);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->files_touched, (Paths{"README.md", "a.txt"}));
  EXPECT_EQ(r->base_dir, first->base_dir);
}

void record(const fs::path& p, void* user_data) {
  static_cast<Paths*>(user_data)->push_back(p);
}

TEST_F(Compat, ScopedSandboxSwapsRestoresAndToleratesANullFunction) {
  Paths log;
  try {
    ScopedSandbox guard(&record, &log, "/sb", "/project");
    EXPECT_EQ(log, Paths{"/sb"});
    throw std::runtime_error("tool failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(log, (Paths{"/sb", "/project"}));
  { ScopedSandbox guard(nullptr, &log, "/sb", "/project"); }
  EXPECT_EQ(log.size(), 2u);
  auto throwing = [](const fs::path& p, void*) {
    if (p == "/project") throw std::runtime_error("restore failed");
  };
  EXPECT_NO_THROW({ ScopedSandbox guard(throwing, nullptr, "/sb", "/project"); });
}

TEST_F(Compat, OneManagerServesEightThreads) {
  SandboxManager mgr(project.path());
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const std::string id = "t" + std::to_string(t);
      std::optional<SandboxInfo> sb = mgr.create_sandbox(id);
      if (!sb) return;
      write_file(sb->path / (id + ".txt"), id + "\n");
      std::optional<SandboxResult> r = mgr.finalize_sandbox(*sb);
      if (!r || r->files_touched != Paths{id + ".txt"}) return;
      mgr.discard_sandbox(*sb);
      ok[t] = fs::exists(sb->path) ? 0 : 1;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, std::vector<int>(8, 1));
}

}  // namespace
