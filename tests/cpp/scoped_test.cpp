// patchbox::ScopedSandbox: swap order, restore on unwinding, a destructor that never throws,
// moves, keep(), and a tool run through the guard into a real sandbox.
#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <patchbox/sandbox.hpp>

#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using patchbox::ScopedSandbox;
using Paths = std::vector<fs::path>;

/// An engine's tool runner: the swap function re-points its working directory.
struct ToolRunner {
  fs::path cwd = "/project";
  Paths log;
};

void swap_dir(const fs::path& path, void* user_data) {
  auto* runner = static_cast<ToolRunner*>(user_data);
  runner->cwd = path;
  runner->log.push_back(path);
}

TEST(ScopedSandbox, FunctionPointerSwapsInThenBack) {
  ToolRunner runner;
  {
    ScopedSandbox guard(&swap_dir, &runner, "/sandbox/d-1", "/project");
    EXPECT_EQ(runner.cwd, "/sandbox/d-1");
    EXPECT_EQ(runner.log, Paths{"/sandbox/d-1"});
    EXPECT_EQ(guard.sandbox_path(), "/sandbox/d-1");
    EXPECT_EQ(guard.original_path(), "/project");
  }
  EXPECT_EQ(runner.cwd, "/project");
  EXPECT_EQ(runner.log, (Paths{"/sandbox/d-1", "/project"}));
}

TEST(ScopedSandbox, StdFunctionSwapsInThenBack) {
  Paths log;
  {
    ScopedSandbox guard([&](const fs::path& p) { log.push_back(p); }, "/sb", "/orig");
    EXPECT_EQ(log, Paths{"/sb"});
  }
  EXPECT_EQ(log, (Paths{"/sb", "/orig"}));
}

TEST(ScopedSandbox, ANullOrEmptySwapIsANoOp) {
  { ScopedSandbox guard(nullptr, nullptr, "/sb", "/orig"); }
  { ScopedSandbox guard(std::function<void(const fs::path&)>(), "/sb", "/orig"); }
  SUCCEED();
}

TEST(ScopedSandbox, RestoresDuringExceptionUnwinding) {
  ToolRunner runner;
  try {
    ScopedSandbox guard(&swap_dir, &runner, "/sb", "/project");
    throw std::runtime_error("the tool failed");
  } catch (const std::runtime_error&) {
    EXPECT_EQ(runner.cwd, "/project");  // restored before the handler runs
  }
  EXPECT_EQ(runner.log, (Paths{"/sb", "/project"}));
}

TEST(ScopedSandbox, NestedGuardsRestoreInReverseOrder) {
  ToolRunner runner;
  {
    ScopedSandbox outer(&swap_dir, &runner, "/sb1", "/project");
    {
      ScopedSandbox inner(&swap_dir, &runner, "/sb2", "/sb1");
      EXPECT_EQ(runner.cwd, "/sb2");
    }
    EXPECT_EQ(runner.cwd, "/sb1");
  }
  EXPECT_EQ(runner.log, (Paths{"/sb1", "/sb2", "/sb1", "/project"}));
}

TEST(ScopedSandbox, TheDestructorSwallowsAThrowingRestore) {
  int calls = 0;
  auto swap = [&](const fs::path&) {
    if (++calls == 2) throw std::runtime_error("cannot restore");
  };
  EXPECT_NO_THROW({ ScopedSandbox guard(swap, "/sb", "/orig"); });
  EXPECT_EQ(calls, 2);
  // Also while another exception unwinds: no std::terminate.
  calls = 0;
  EXPECT_THROW(
      {
        ScopedSandbox guard(swap, "/sb", "/orig");
        throw std::logic_error("first");
      },
      std::logic_error);
  EXPECT_EQ(calls, 2);
}

TEST(ScopedSandbox, AThrowingFirstSwapPropagatesAndRestoresNothing) {
  int calls = 0;
  auto swap = [&](const fs::path&) {
    ++calls;
    throw std::runtime_error("cannot enter");
  };
  EXPECT_THROW(ScopedSandbox(swap, "/sb", "/orig"), std::runtime_error);
  EXPECT_EQ(calls, 1);
}

TEST(ScopedSandbox, MovingTransfersTheRestore) {
  ToolRunner runner;
  {
    auto make = [&] { return ScopedSandbox(&swap_dir, &runner, "/sb", "/project"); };
    ScopedSandbox first = make();
    ScopedSandbox second(std::move(first));
    EXPECT_EQ(second.sandbox_path(), "/sb");
  }
  EXPECT_EQ(runner.log, (Paths{"/sb", "/project"}));  // restored exactly once
}

TEST(ScopedSandbox, KeepLeavesTheToolsInTheSandbox) {
  ToolRunner runner;
  {
    ScopedSandbox guard(&swap_dir, &runner, "/sb", "/project");
    guard.keep();
  }
  EXPECT_EQ(runner.cwd, "/sb");
  EXPECT_EQ(runner.log, Paths{"/sb"});
}

TEST(ScopedSandbox, AToolRunThroughTheGuardLandsInTheSandbox) {
  testutil::TempDir project("pb-project");
  testutil::TempDir root("pb-root");
  testutil::write_file(project / "a.txt", "one\n");
  patchbox::Options o;
  o.root = root.path();
  patchbox::SandboxManager mgr(project.path(), o);
  patchbox::SandboxInfo sb = mgr.create_sandbox("tool");

  ToolRunner runner;
  runner.cwd = mgr.project_dir();
  {
    ScopedSandbox guard(&swap_dir, &runner, sb.path, mgr.project_dir());
    testutil::write_file(runner.cwd / "out.txt", "made by the tool\n");  // the "tool"
  }
  EXPECT_EQ(runner.cwd, mgr.project_dir());
  EXPECT_FALSE(fs::exists(project / "out.txt"));
  patchbox::SandboxResult r = mgr.finalize_sandbox(sb);
  EXPECT_EQ(r.files_touched, Paths{"out.txt"});
  EXPECT_EQ(r.added, Paths{"out.txt"});
}

}  // namespace
