// patchbox::session::Manager seen from C++: patches, chaining, containment, errors, pending
// patches, completion routing, progress, and the destructor's semantics.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <patchbox/sandbox.hpp>

#include "expect_error.hpp"
#include "test_util.hpp"

namespace patchbox {
// Readable ErrorKind values in assertion messages.
inline void PrintTo(ErrorKind k, std::ostream* os) { *os << to_string(k); }
}  // namespace patchbox

namespace {

namespace fs = std::filesystem;
using patchbox::Completion;
using patchbox::Decision;
using patchbox::ErrorKind;
using patchbox::Options;
using patchbox::SandboxInfo;
using patchbox::session::Manager;
using patchbox::SandboxResult;
using testutil::contains;
using testutil::read_file;
using testutil::TempDir;
using testutil::write_file;
using Paths = std::vector<fs::path>;

class Core : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(project / "a.txt", "one\n");
    write_file(project / "b.txt", "bee\n");
    write_file(project / "sub/c.txt", "sea\n");
  }

  Options options() const {
    Options o;
    o.root = root.path();
    o.prune_on_start = false;
    return o;
  }

  Manager make() const { return Manager(project.path(), options()); }

  TempDir project{"pb-project"};
  TempDir root{"pb-root"};
};

TEST_F(Core, SessionAndSandboxLayout) {
  Manager mgr = make();
  EXPECT_EQ(mgr.project_dir(), fs::canonical(project.path()));
  EXPECT_EQ(mgr.session_base().parent_path(), fs::canonical(root.path()));
  EXPECT_EQ(mgr.session_base().filename().string(), mgr.session_id());
  EXPECT_EQ(mgr.session_id().size(), 26u);  // a ULID
  EXPECT_TRUE(fs::is_directory(mgr.session_base()));

  SandboxInfo sb = mgr.create_sandbox("task1");
  EXPECT_EQ(sb.delegation_id, "task1");
  EXPECT_EQ(sb.path, mgr.session_base() / "d-task1");
  EXPECT_EQ(sb.base_dir, mgr.session_base() / "base");
  EXPECT_EQ(read_file(sb.path / "a.txt"), "one\n");
  EXPECT_EQ(read_file(sb.path / "sub/c.txt"), "sea\n");
}

TEST_F(Core, FinalizeReturnsAGitStylePatch) {
  Manager mgr = make();
  SandboxInfo sb = mgr.create_sandbox("task1");
  write_file(sb.path / "a.txt", "two\n");
  fs::remove(sb.path / "b.txt");
  write_file(sb.path / "new.txt", "fresh\n");

  SandboxResult r = mgr.finalize_sandbox(sb);
  EXPECT_TRUE(contains(r.patch, "diff --git a/a.txt b/a.txt\n")) << r.patch;
  EXPECT_TRUE(contains(r.patch, "-one\n+two\n")) << r.patch;
  EXPECT_TRUE(contains(r.patch, "diff --git a/b.txt b/b.txt\ndeleted file mode 100644\n"))
      << r.patch;
  EXPECT_TRUE(contains(r.patch, "diff --git a/new.txt b/new.txt\nnew file mode 100644\n"))
      << r.patch;
  EXPECT_EQ(r.files_touched, (Paths{"a.txt", "b.txt", "new.txt"}));
  EXPECT_EQ(r.added, Paths{"new.txt"});
  EXPECT_EQ(r.modified, Paths{"a.txt"});
  EXPECT_EQ(r.deleted, Paths{"b.txt"});
  EXPECT_TRUE(r.ignored.empty());
  EXPECT_EQ(r.base_dir, sb.base_dir);
  EXPECT_EQ(r.head_dir, sb.path);

  // The project is never written; the sandbox is kept by finalize.
  EXPECT_EQ(read_file(project / "a.txt"), "one\n");
  EXPECT_TRUE(fs::exists(project / "b.txt"));
  EXPECT_FALSE(fs::exists(project / "new.txt"));
  EXPECT_TRUE(fs::exists(sb.path / "new.txt"));
  EXPECT_EQ(mgr.finalize_sandbox(sb).patch, r.patch);
}

// Overlay isolation gives the copy's patch; the manager says what it got (a copy where no
// overlay can be mounted); destroying the manager leaves nothing mounted.
TEST_F(Core, OverlayIsolationGivesTheCopysPatch) {
  std::string patches[2];
  std::optional<patchbox::IsolationMode> modes[2];
  int i = 0;
  for (patchbox::Isolation iso : {patchbox::Isolation::Copy, patchbox::Isolation::Overlay}) {
    Options o = options();
    o.isolation = iso;
    Manager mgr(project.path(), o);
    SandboxInfo sb = mgr.create_sandbox("task1");
    modes[i] = mgr.isolation_mode();
    ASSERT_TRUE(modes[i].has_value());
    EXPECT_EQ(sb.mode, *modes[i]);
    EXPECT_EQ(sb.path, mgr.session_base() / "d-task1");
    write_file(sb.path / "a.txt", "two\n");
    fs::remove(sb.path / "b.txt");
    write_file(sb.path / "new/x.txt", "x\n");
    SandboxInfo next = mgr.create_sandbox("task2", sb);
    write_file(next.path / "sub/c.txt", "see\n");
    patches[i++] = mgr.finalize_sandbox(next).patch;
  }
  EXPECT_EQ(modes[0], patchbox::IsolationMode::Copy);
  EXPECT_EQ(patches[1], patches[0]);
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mounts, line))
    EXPECT_FALSE(contains(line, fs::canonical(root.path()).string())) << line;
}

TEST_F(Core, PatchAppliesWithGitApply) {
  if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git not installed";
  Manager mgr = make();
  SandboxInfo sb = mgr.create_sandbox("task1");
  write_file(sb.path / "a.txt", "two\n");
  fs::remove(sb.path / "b.txt");
  write_file(sb.path / "sub/deeper/new.txt", "fresh\n");
  SandboxResult r = mgr.finalize_sandbox(sb);

  TempDir work("pb-apply");
  const fs::path tree = work / "tree";
  fs::copy(project.path(), tree, fs::copy_options::recursive);
  write_file(work / "change.patch", r.patch);
  // Its own repository, so git never resolves paths against an enclosing one.
  const std::string cmd =
      "cd '" + tree.string() + "' && git init -q . && git apply ../change.patch";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << r.patch;
  EXPECT_EQ(read_file(tree / "a.txt"), "two\n");
  EXPECT_FALSE(fs::exists(tree / "b.txt"));
  EXPECT_EQ(read_file(tree / "sub/deeper/new.txt"), "fresh\n");
}

TEST_F(Core, SandboxOfAGitProjectIsAPrivateWorkTree) {
  if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git not installed";
  TempDir work("pb-git");
  // git isolated from the machine's configuration.
  const std::string git = "HOME='" + work.path().string() +
                          "' GIT_CONFIG_NOSYSTEM=1 git -c user.name=t -c user.email=t@t "
                          "-c init.defaultBranch=main ";
  const auto in = [](const fs::path& d) { return "cd '" + d.string() + "' && "; };
  ASSERT_EQ(std::system((in(project.path()) + git + "init -q && " + git + "add -A && " + git +
                         "commit -qm first")
                            .c_str()),
            0);
  Manager mgr = make();
  SandboxInfo sb = mgr.create_sandbox("task1");
  ASSERT_TRUE(fs::is_directory(sb.path / ".git"));
  write_file(sb.path / "a.txt", "two\n");
  const fs::path status = work / "status.txt";
  ASSERT_EQ(std::system((in(sb.path) + git + "status --porcelain > '" + status.string() + "'")
                            .c_str()),
            0);
  EXPECT_EQ(read_file(status), " M a.txt\n");
  // A commit in the sandbox stays there; the patch is still the change against the snapshot.
  ASSERT_EQ(std::system((in(sb.path) + git + "commit -qam private").c_str()), 0);
  const fs::path count = work / "count.txt";
  ASSERT_EQ(std::system((in(project.path()) + git + "rev-list --count HEAD > '" +
                         count.string() + "'")
                            .c_str()),
            0);
  EXPECT_EQ(read_file(count), "1\n");
  SandboxResult r = mgr.finalize_sandbox(sb);
  EXPECT_EQ(r.files_touched, Paths{"a.txt"});
  EXPECT_FALSE(contains(r.patch, ".git")) << r.patch;

  Options o = options();
  o.git_repo = false;
  Manager plain(project.path(), o);
  EXPECT_FALSE(fs::exists(plain.create_sandbox("task2").path / ".git"));
}

TEST_F(Core, UnchangedSandboxHasAnEmptyPatch) {
  Manager mgr = make();
  SandboxInfo sb = mgr.create_sandbox("idle");
  SandboxResult r = mgr.finalize_sandbox(sb);
  EXPECT_TRUE(r.patch.empty());
  EXPECT_TRUE(r.files_touched.empty());
}

TEST_F(Core, PatchIsRawBytes) {
  write_file(project / "latin1.txt", "caf\xe9\n");
  Manager mgr = make();
  SandboxInfo sb = mgr.create_sandbox("bytes");
  write_file(sb.path / "latin1.txt", "th\xe9\n");
  SandboxResult r = mgr.finalize_sandbox(sb);
  EXPECT_TRUE(contains(r.patch, "-caf\xe9\n+th\xe9\n")) << r.patch;
  EXPECT_FALSE(contains(r.patch, "\xef\xbf\xbd"));  // no U+FFFD replacement anywhere
}

TEST(CorePaths, NonUtf8PathsRoundTrip) {
  TempDir base("pb-bytes");
  const fs::path project = base / "proj-\xff";
  const fs::path root = base / "root-\xfe";
  write_file(project / "f\xfd.txt", "x\n");
  Options o;
  o.root = root;
  o.prune_on_start = false;
  Manager mgr(project, o);
  EXPECT_EQ(mgr.project_dir(), fs::canonical(project));
  EXPECT_EQ(mgr.session_base().parent_path(), fs::canonical(root));

  SandboxInfo sb = mgr.create_sandbox("bytes");
  ASSERT_TRUE(fs::exists(sb.path / "f\xfd.txt"));
  write_file(sb.path / "f\xfd.txt", "y\n");
  write_file(sb.path / "n\xfc.bin", "new\n");
  SandboxResult r = mgr.finalize_sandbox(sb);
  EXPECT_EQ(r.files_touched, (Paths{"f\xfd.txt", "n\xfc.bin"}));
  EXPECT_EQ(r.files_touched[0].native(), "f\xfd.txt");
  EXPECT_EQ(r.head_dir, sb.path);
  mgr.discard_sandbox(sb);
  EXPECT_FALSE(fs::exists(sb.path));
}

TEST_F(Core, ChainedSandboxStartsFromItsPredecessorAndIsCumulative) {
  Manager mgr = make();
  SandboxInfo first = mgr.create_sandbox("first");
  write_file(first.path / "a.txt", "two\n");
  SandboxInfo second = mgr.create_sandbox("second", first);
  EXPECT_EQ(read_file(second.path / "a.txt"), "two\n");
  EXPECT_EQ(second.base_dir, first.base_dir);
  write_file(second.path / "b.txt", "bee2\n");

  SandboxResult r = mgr.finalize_sandbox(second);
  EXPECT_EQ(r.files_touched, (Paths{"a.txt", "b.txt"}));
  EXPECT_TRUE(contains(r.patch, "+two\n"));
  EXPECT_TRUE(contains(r.patch, "+bee2\n"));
  // The predecessor is unaffected by its successor.
  EXPECT_EQ(mgr.finalize_sandbox(first).files_touched, Paths{"a.txt"});
}

TEST_F(Core, ChainingFromAnUnknownSandboxThrows) {
  Manager mgr = make();
  SandboxInfo ghost{mgr.session_base() / "d-ghost", "ghost", mgr.session_base() / "base"};
  EXPECT_PB_ERROR(mgr.create_sandbox("next", ghost), ErrorKind::UnknownSandbox);
  // The failed id is free again.
  EXPECT_NO_THROW(mgr.create_sandbox("next"));
}

TEST_F(Core, InvalidIdsThrowAndCreateNothing) {
  Manager mgr = make();
  for (const std::string& id : {std::string("../x"), std::string(""), std::string("a/b"),
                                std::string("."), std::string(".."), std::string(129, 'a'),
                                std::string("x\xff"), std::string("/abs")}) {
    SCOPED_TRACE(id);
    EXPECT_PB_ERROR(mgr.create_sandbox(id), ErrorKind::InvalidId);
  }
  EXPECT_TRUE(testutil::entries_with_prefix(mgr.session_base(), "d-").empty());
  EXPECT_FALSE(fs::exists(mgr.session_base().parent_path() / "x"));
  EXPECT_FALSE(fs::exists(mgr.session_base() / "x"));
}

TEST_F(Core, ErrorsCarryTheirMessage) {
  Manager mgr = make();
  try {
    mgr.create_sandbox("../x");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {  // patchbox::Error is a std::runtime_error
    EXPECT_TRUE(contains(e.what(), "../x")) << e.what();
    EXPECT_FALSE(contains(e.what(), "\x1f")) << e.what();
    EXPECT_FALSE(contains(e.what(), "invalid_id\x1f")) << e.what();
  }
}

TEST_F(Core, AnIdInUseThrows) {
  Manager mgr = make();
  SandboxInfo sb = mgr.create_sandbox("dup");
  EXPECT_PB_ERROR(mgr.create_sandbox("dup"), ErrorKind::IdInUse);
  mgr.discard_sandbox(sb);
  EXPECT_NO_THROW(mgr.create_sandbox("dup"));
}

TEST_F(Core, FinalizingAnUnknownOrDiscardedSandboxThrows) {
  Manager mgr = make();
  SandboxInfo sb = mgr.create_sandbox("gone");
  mgr.discard_sandbox(sb);
  EXPECT_PB_ERROR(mgr.finalize_sandbox(sb), ErrorKind::UnknownSandbox);
  SandboxInfo never{mgr.session_base() / "d-never", "never", sb.base_dir};
  EXPECT_PB_ERROR(mgr.finalize_sandbox(never), ErrorKind::UnknownSandbox);
}

TEST_F(Core, DiscardRemovesTheSandboxAndIsIdempotent) {
  Manager mgr = make();
  SandboxInfo sb = mgr.create_sandbox("bye");
  write_file(sb.path / "x.txt", "x\n");
  mgr.discard_sandbox(sb);
  EXPECT_FALSE(fs::exists(sb.path));
  EXPECT_NO_THROW(mgr.discard_sandbox(sb));
  EXPECT_TRUE(fs::exists(project / "a.txt"));
}

TEST_F(Core, DiscardOutsideTheSessionThrowsAndRemovesNothing) {
  Manager mgr = make();
  SandboxInfo sb = mgr.create_sandbox("task");
  TempDir victim("pb-victim");
  write_file(victim / "precious.txt", "keep me\n");

  const std::vector<SandboxInfo> refused = {
      {victim.path(), "task", sb.base_dir},                              // outside
      {mgr.session_base() / ".." / victim.path().filename(), "x", sb.base_dir},  // via ..
      {project.path(), "task", sb.base_dir},                             // the project
      {mgr.session_base() / "base", "task", sb.base_dir},                // the base snapshot
      {mgr.session_base(), "task", sb.base_dir},                         // the session itself
      {sb.path, "other", sb.base_dir},                                   // id does not match
      {sb.path, "../task", sb.base_dir},                                 // invalid id
  };
  for (const SandboxInfo& info : refused) {
    SCOPED_TRACE(info.path.string() + " / " + info.delegation_id);
    EXPECT_PB_ERROR(mgr.discard_sandbox(info), ErrorKind::Containment);
  }
  EXPECT_EQ(read_file(victim / "precious.txt"), "keep me\n");
  EXPECT_EQ(read_file(project / "a.txt"), "one\n");
  EXPECT_TRUE(fs::is_directory(mgr.session_base() / "base"));
  EXPECT_TRUE(fs::is_directory(sb.path));
  EXPECT_NO_THROW(mgr.finalize_sandbox(sb));
}

TEST_F(Core, AMissingProjectThrowsNotADirectory) {
  Options o = options();
  EXPECT_PB_ERROR(Manager(project / "missing", o), ErrorKind::NotADirectory);
  EXPECT_PB_ERROR(Manager(project / "a.txt", o), ErrorKind::NotADirectory);
}

TEST_F(Core, WritePendingPatchStoresTheBytesAtomically) {
  Manager mgr = make();
  const std::string patch("diff --git a/x b/x\n\0binary\xff\n", 28);
  fs::path p = mgr.write_pending_patch("task1", patch);
  EXPECT_EQ(p, mgr.session_base() / "pending" / "task1.patch");
  EXPECT_EQ(read_file(p), patch);
  EXPECT_PB_ERROR(mgr.write_pending_patch("../x", patch), ErrorKind::InvalidId);
}

TEST_F(Core, DestructorRemovesSandboxesAndKeepsPendingPatches) {
  fs::path session;
  fs::path pending;
  {
    Manager mgr = make();
    session = mgr.session_base();
    SandboxInfo a = mgr.create_sandbox("a");
    SandboxInfo b = mgr.create_sandbox("b", a);
    write_file(a.path / "a.txt", "changed\n");
    pending = mgr.write_pending_patch("a", mgr.finalize_sandbox(a).patch);
  }
  EXPECT_TRUE(fs::is_directory(session));
  EXPECT_FALSE(fs::exists(session / "base"));
  EXPECT_TRUE(testutil::entries_with_prefix(session, "d-").empty());
  EXPECT_TRUE(contains(read_file(pending), "+changed\n"));
  EXPECT_EQ(read_file(project / "a.txt"), "one\n");
}

TEST_F(Core, DestructorRemovesTheWholeSessionWithoutPendingPatches) {
  fs::path session;
  {
    Manager mgr = make();
    session = mgr.session_base();
    SandboxInfo a = mgr.create_sandbox("a");
    write_file(a.path / "a.txt", "changed\n");
    mgr.finalize_sandbox(a);
    mgr.discard_sandbox(a);  // not discarded, its work would be kept as abandoned
  }
  EXPECT_FALSE(fs::exists(session));
  EXPECT_TRUE(fs::is_empty(root.path()));
}

TEST_F(Core, MovingTransfersTheSession) {
  Manager first = make();
  const fs::path session = first.session_base();
  SandboxInfo sb = first.create_sandbox("moved");

  Manager second(std::move(first));
  EXPECT_EQ(second.session_base(), session);
  EXPECT_NO_THROW(second.finalize_sandbox(sb));
  // NOLINTNEXTLINE(bugprone-use-after-move): the moved-from state is specified.
  EXPECT_TRUE(first.session_base().empty());
  EXPECT_PB_ERROR(first.create_sandbox("x"), ErrorKind::Internal);

  Manager third = make();
  const fs::path third_session = third.session_base();
  third = std::move(second);  // ends third's own (empty) session
  EXPECT_FALSE(fs::exists(third_session));
  EXPECT_EQ(third.session_base(), session);
  EXPECT_TRUE(fs::is_directory(sb.path));
}

TEST_F(Core, ProgressReachesTheCallback) {
  for (int i = 0; i < 100; ++i) write_file(project / "many" / (std::to_string(i) + ".txt"), "x\n");
  std::mutex mu;
  std::uint64_t calls = 0, max_done = 0, total = 0, bytes = 0;
  Options o = options();
  o.progress = [&](const patchbox::Progress& p) {
    std::lock_guard<std::mutex> lock(mu);
    ++calls;
    max_done = std::max(max_done, p.files_done);
    total = p.files_total;
    bytes = std::max(bytes, p.bytes_done);
  };
  Manager mgr(project.path(), o);
  mgr.create_sandbox("p");
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_GE(calls, 2u);  // the base snapshot, then the sandbox
  EXPECT_EQ(total, 103u);
  EXPECT_EQ(max_done, total);
  EXPECT_GT(bytes, 0u);
}

TEST_F(Core, AThrowingProgressCallbackIsSwallowed) {
  Options o = options();
  std::atomic<int> calls{0};
  o.progress = [&](const patchbox::Progress&) {
    ++calls;
    throw std::runtime_error("progress UI is gone");
  };
  Manager mgr(project.path(), o);
  SandboxInfo sb;
  EXPECT_NO_THROW(sb = mgr.create_sandbox("p"));
  EXPECT_GT(calls.load(), 0);
  EXPECT_EQ(read_file(sb.path / "a.txt"), "one\n");
}

TEST_F(Core, CompleteSandboxRoutesByDecision) {
  Manager mgr = make();
  auto changed = [&](const std::string& id) {
    SandboxInfo sb = mgr.create_sandbox(id);
    write_file(sb.path / "a.txt", id + "\n");
    return sb;
  };

  // Accept: the caller has the patch; nothing pending.
  SandboxInfo acc = changed("acc");
  int seen = 0;
  Completion c = mgr.complete_sandbox(acc, [&](const SandboxResult& r) {
    ++seen;
    EXPECT_EQ(r.files_touched, Paths{"a.txt"});
    return Decision::Accept;
  });
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(c.routed, Completion::Routed::Accepted);
  EXPECT_FALSE(c.pending_path.has_value());
  EXPECT_TRUE(contains(c.result.patch, "+acc\n"));
  EXPECT_FALSE(fs::exists(acc.path));
  EXPECT_FALSE(fs::exists(mgr.session_base() / "pending" / "acc.patch"));

  // Reject, no callback, and callbacks that throw: all pending (default deny).
  struct Case {
    std::string id;
    std::function<Decision(const SandboxResult&)> decide;
  };
  const std::vector<Case> denied = {
      {"rej", [](const SandboxResult&) { return Decision::Reject; }},
      {"none", {}},
      {"throws", [](const SandboxResult&) -> Decision { throw std::runtime_error("no"); }},
      {"throws-int", [](const SandboxResult&) -> Decision { throw 42; }},
  };
  for (const Case& k : denied) {
    SCOPED_TRACE(k.id);
    SandboxInfo sb = changed(k.id);
    Completion d = mgr.complete_sandbox(sb, k.decide);
    EXPECT_EQ(d.routed, Completion::Routed::Pending);
    ASSERT_TRUE(d.pending_path.has_value());
    EXPECT_EQ(*d.pending_path, mgr.session_base() / "pending" / (k.id + ".patch"));
    EXPECT_EQ(read_file(*d.pending_path), d.result.patch);
    EXPECT_TRUE(contains(d.result.patch, "+" + k.id + "\n"));
    EXPECT_FALSE(fs::exists(sb.path));
  }

  // Unchanged: not routed, the callback is not asked.
  SandboxInfo same = mgr.create_sandbox("same");
  bool asked = false;
  Completion u = mgr.complete_sandbox(same, [&](const SandboxResult&) {
    asked = true;
    return Decision::Accept;
  });
  EXPECT_FALSE(asked);
  EXPECT_EQ(u.routed, Completion::Routed::Unchanged);
  EXPECT_TRUE(u.result.patch.empty());
  EXPECT_FALSE(fs::exists(same.path));

  EXPECT_PB_ERROR(mgr.complete_sandbox(same), ErrorKind::UnknownSandbox);
}

TEST(ErrorKinds, HaveStableNames) {
  const std::vector<std::pair<ErrorKind, std::string>> names = {
      {ErrorKind::Io, "io"},
      {ErrorKind::Containment, "containment"},
      {ErrorKind::InvalidId, "invalid_id"},
      {ErrorKind::IdInUse, "id_in_use"},
      {ErrorKind::UnknownSandbox, "unknown_sandbox"},
      {ErrorKind::NotADirectory, "not_a_directory"},
      {ErrorKind::Git, "git"},
      {ErrorKind::PatchParse, "patch_parse"},
      {ErrorKind::ApplyFailed, "apply_failed"},
      {ErrorKind::Pending, "pending"},
      {ErrorKind::Callback, "callback"},
      {ErrorKind::Internal, "internal"},
  };
  for (const auto& [kind, name] : names) EXPECT_EQ(patchbox::to_string(kind), name);
  patchbox::Error e(ErrorKind::Io, "boom");
  EXPECT_EQ(e.kind(), ErrorKind::Io);
  EXPECT_STREQ(e.what(), "boom");
}

// The kinds are defined once, by the Rust library (Error::KINDS); ErrorKind must mirror them:
// every value before Internal names one library kind, in the same order, and none is missing.
TEST(ErrorKinds, AgreeWithTheLibrary) {
  const std::vector<std::string> library = patchbox::library_error_kinds();
  std::vector<std::string> header;
  for (int k = 0; k < static_cast<int>(ErrorKind::Internal); ++k) {
    header.emplace_back(patchbox::to_string(static_cast<ErrorKind>(k)));
  }
  EXPECT_EQ(header, library);
  EXPECT_STREQ(patchbox::to_string(ErrorKind::Internal), "internal");
}

}  // namespace
