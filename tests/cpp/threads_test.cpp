// One patchbox::SandboxManager shared by 8 engine threads.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <patchbox/sandbox.hpp>

#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using patchbox::Completion;
using patchbox::Decision;
using patchbox::SandboxInfo;
using patchbox::SandboxManager;
using patchbox::SandboxResult;
using testutil::contains;
using Paths = std::vector<fs::path>;

constexpr int kThreads = 8;
constexpr int kRounds = 3;

/// Releases all threads at once, so they race on the manager (and on the lazy base snapshot).
class StartLine {
 public:
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (++arrived_ == kThreads) cv_.notify_all();
    cv_.wait(lock, [&] { return arrived_ >= kThreads; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
};

class Failures {
 public:
  void add(const std::string& s) {
    std::lock_guard<std::mutex> lock(mu_);
    list_.push_back(s);
  }
  std::vector<std::string> list() {
    std::lock_guard<std::mutex> lock(mu_);
    return list_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> list_;
};

TEST(Threads, EightThreadsShareOneManager) {
  testutil::TempDir project("pb-project");
  testutil::TempDir root("pb-root");
  for (int i = 0; i < 50; ++i) {
    testutil::write_file(project / "src" / ("f" + std::to_string(i) + ".txt"), "line\n");
  }
  patchbox::Options o;
  o.root = root.path();
  SandboxManager mgr(project.path(), o);

  StartLine start;
  Failures failures;
  std::atomic<int> pending{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.wait();
      for (int k = 0; k < kRounds; ++k) {
        const std::string id = "t" + std::to_string(t) + "-" + std::to_string(k);
        try {
          SandboxInfo sb = mgr.create_sandbox(id);
          testutil::write_file(sb.path / (id + ".txt"), id + "\n");
          testutil::write_file(sb.path / "src/f0.txt", "edited by " + id + "\n");
          SandboxResult r = mgr.finalize_sandbox(sb);
          if (r.files_touched != Paths{"src/f0.txt", id + ".txt"}) {  // sorted
            failures.add(id + ": wrong files touched");
          }
          if (!contains(r.patch, "+edited by " + id + "\n")) failures.add(id + ": wrong patch");
          // A chained follow-up sees this delegation's state.
          SandboxInfo next = mgr.create_sandbox(id + "-next", sb);
          if (testutil::read_file(next.path / (id + ".txt")) != id + "\n") {
            failures.add(id + ": chain lost the predecessor's work");
          }
          mgr.discard_sandbox(next);
          const bool accept = (t + k) % 2 == 0;
          Completion c = mgr.complete_sandbox(
              sb, [&](const SandboxResult&) { return accept ? Decision::Accept : Decision::Reject; });
          if (c.routed != (accept ? Completion::Routed::Accepted : Completion::Routed::Pending)) {
            failures.add(id + ": wrong routing");
          }
          if (!accept) ++pending;
        } catch (const std::exception& e) {
          failures.add(id + ": " + e.what());
        }
      }
    });
  }
  for (auto& th : threads) th.join();

  EXPECT_EQ(failures.list(), std::vector<std::string>{});
  EXPECT_TRUE(testutil::entries_with_prefix(mgr.session_base(), "d-").empty());
  int patches = 0;
  for (const auto& p : testutil::entries_with_prefix(mgr.session_base() / "pending", "t")) {
    if (p.extension() == ".patch") ++patches;
  }
  EXPECT_EQ(patches, pending.load());
  EXPECT_EQ(testutil::read_file(project / "src/f0.txt"), "line\n");
}

TEST(Threads, ConcurrentFinalizeOfOneSandboxAgrees) {
  testutil::TempDir project("pb-project");
  testutil::TempDir root("pb-root");
  testutil::write_file(project / "a.txt", "one\n");
  patchbox::Options o;
  o.root = root.path();
  SandboxManager mgr(project.path(), o);
  SandboxInfo sb = mgr.create_sandbox("shared");
  testutil::write_file(sb.path / "a.txt", "two\n");
  const std::string expected = mgr.finalize_sandbox(sb).patch;

  StartLine start;
  Failures failures;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      start.wait();
      for (int k = 0; k < 5; ++k) {
        try {
          if (mgr.finalize_sandbox(sb).patch != expected) failures.add("different patch");
          if (mgr.session_base().empty() || mgr.project_dir().empty()) failures.add("paths");
        } catch (const std::exception& e) {
          failures.add(e.what());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.list(), std::vector<std::string>{});
}

}  // namespace
