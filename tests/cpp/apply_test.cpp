// patchbox::apply_patch / patchbox::undo_apply seen from C++: a delegation's patch applied to
// the project, idempotence, check mode, conflicts (refused, merged with pre-images, written
// with markers), errors, containment and undo.
#include <patchbox/apply.hpp>  // first: the header stands alone

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <patchbox/sandbox.hpp>

#include "expect_error.hpp"
#include "test_util.hpp"

namespace patchbox {
// Readable enum values in assertion messages.
inline void PrintTo(ErrorKind k, std::ostream* os) { *os << to_string(k); }
inline void PrintTo(FileStatus s, std::ostream* os) { *os << to_string(s); }
inline void PrintTo(Outcome o, std::ostream* os) { *os << to_string(o); }
}  // namespace patchbox

namespace {

namespace fs = std::filesystem;
using patchbox::ApplyOptions;
using patchbox::ApplyReport;
using patchbox::ErrorKind;
using patchbox::FileReport;
using patchbox::FileStatus;
using patchbox::Options;
using patchbox::Outcome;
using patchbox::SandboxInfo;
using patchbox::SandboxManager;
using patchbox::SandboxResult;
using patchbox::UndoReport;
using testutil::contains;
using testutil::read_file;
using testutil::TempDir;
using testutil::write_file;
using Paths = std::vector<fs::path>;

/// Everything under @p dir: relative path -> file contents, symlink target ("-> t"), or
/// "<dir>" for a directory. Byte-exact, so two equal trees hold the same files and directories.
std::map<std::string, std::string> tree(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();
       ++it) {
    const fs::path rel = it->path().lexically_relative(dir);
    if (it->is_symlink()) {
      out[rel.native()] = "-> " + fs::read_symlink(it->path()).native();
    } else if (it->is_directory()) {
      out[rel.native()] = "<dir>";
    } else {
      out[rel.native()] = read_file(it->path());
    }
  }
  return out;
}

/// The report entry for @p path, or nullptr.
const FileReport* find(const ApplyReport& r, const fs::path& path) {
  for (const auto& f : r.files) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

/// Lines "1\n" .. "7\n" of sub/c.txt, with line @p n replaced by @p text.
std::string seven(int n = 0, const std::string& text = "") {
  std::string s;
  for (int i = 1; i <= 7; ++i) s += i == n ? text + "\n" : std::to_string(i) + "\n";
  return s;
}

class Apply : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(project / "a.txt", "one\n");
    write_file(project / "b.txt", "bee\n");
    write_file(project / "sub/c.txt", seven());
    mgr.emplace(project.path(), options());
  }

  Options options() const {
    Options o;
    o.root = root.path();
    o.prune_on_start = false;
    return o;
  }

  /// A sandbox where the delegation changed a.txt, deleted b.txt and added sub/deeper/new.txt.
  SandboxResult typical_delegation() {
    SandboxInfo sb = mgr->create_sandbox("typical");
    write_file(sb.path / "a.txt", "two\n");
    fs::remove(sb.path / "b.txt");
    write_file(sb.path / "sub/deeper/new.txt", "fresh\n");
    return mgr->finalize_sandbox(sb);
  }

  /// A sandbox where the delegation changed line 4 of sub/c.txt.
  SandboxResult line_four_delegation() {
    SandboxInfo sb = mgr->create_sandbox("line4");
    write_file(sb.path / "sub/c.txt", seven(4, "four, by the agent"));
    return mgr->finalize_sandbox(sb);
  }

  TempDir project{"pb-apply-project"};
  TempDir root{"pb-apply-root"};
  TempDir records{"pb-apply-undo"};
  std::optional<SandboxManager> mgr;
};

TEST_F(Apply, SandboxPatchMakesTheProjectEqualTheSandbox) {
  SandboxResult r = typical_delegation();
  ASSERT_FALSE(r.patch.empty());

  ApplyReport rep = patchbox::apply_patch(project.path(), r.patch);
  EXPECT_EQ(rep.outcome, Outcome::Applied) << rep.text;
  EXPECT_TRUE(rep.ok());
  EXPECT_TRUE(rep.wrote());
  EXPECT_FALSE(rep.check_only);
  EXPECT_FALSE(rep.undo_dir.has_value());
  EXPECT_TRUE(rep.warnings.empty());
  ASSERT_EQ(rep.files.size(), 3u) << rep.text;
  Paths paths;
  for (const auto& f : rep.files) {
    paths.push_back(f.path);
    EXPECT_EQ(f.status, FileStatus::Applied) << f.path << ": " << f.detail;
    EXPECT_FALSE(f.old_path.has_value());
    EXPECT_TRUE(f.conflicts.empty());
    EXPECT_FALSE(f.markers_written);
  }
  EXPECT_EQ(paths, (Paths{"a.txt", "b.txt", "sub/deeper/new.txt"}));
  EXPECT_EQ(rep.count(FileStatus::Applied), 3u);
  EXPECT_TRUE(contains(rep.text, "patch was applied: 3 applied, 0 merged, 0 already applied"))
      << rep.text;

  EXPECT_EQ(tree(project.path()), tree(r.head_dir));
  EXPECT_EQ(read_file(project / "a.txt"), "two\n");
  EXPECT_FALSE(fs::exists(project / "b.txt"));
}

TEST_F(Apply, ApplyingTwiceIsAlreadyAppliedAndChangesNothing) {
  SandboxResult r = typical_delegation();
  ASSERT_EQ(patchbox::apply_patch(project.path(), r.patch).outcome, Outcome::Applied);
  const auto after_first = tree(project.path());
  const auto mtime = fs::last_write_time(project / "a.txt");

  ApplyReport again = patchbox::apply_patch(project.path(), r.patch);
  EXPECT_EQ(again.outcome, Outcome::AlreadyApplied) << again.text;
  EXPECT_TRUE(again.ok());
  EXPECT_FALSE(again.wrote());
  ASSERT_EQ(again.files.size(), 3u);
  for (const auto& f : again.files) EXPECT_EQ(f.status, FileStatus::AlreadyApplied) << f.path;
  EXPECT_TRUE(contains(again.text, "patch already applied: nothing to do")) << again.text;
  EXPECT_EQ(tree(project.path()), after_first);
  EXPECT_EQ(fs::last_write_time(project / "a.txt"), mtime);
}

TEST_F(Apply, CheckModeWritesNothing) {
  SandboxResult r = typical_delegation();
  const auto before = tree(project.path());
  ApplyOptions o;
  o.check = true;
  o.undo_dir = records / "never";
  ApplyReport rep = patchbox::apply_patch(project.path(), r.patch, o);
  EXPECT_EQ(rep.outcome, Outcome::Applied) << rep.text;
  EXPECT_TRUE(rep.check_only);
  EXPECT_TRUE(rep.ok());
  EXPECT_FALSE(rep.wrote());
  EXPECT_EQ(rep.count(FileStatus::Applied), 3u);
  EXPECT_FALSE(rep.undo_dir.has_value());
  EXPECT_TRUE(contains(rep.text, "patch would be applied")) << rep.text;
  EXPECT_EQ(tree(project.path()), before);
  EXPECT_FALSE(fs::exists(records / "never"));
}

TEST_F(Apply, ConflictOnTheSameLineRefusesAndWritesNothing) {
  SandboxInfo sb = mgr->create_sandbox("clash");
  write_file(sb.path / "sub/c.txt", seven(4, "four, by the agent"));
  write_file(sb.path / "a.txt", "two\n");
  SandboxResult r = mgr->finalize_sandbox(sb);
  write_file(project / "sub/c.txt", seven(4, "four, by the user"));
  const auto before = tree(project.path());

  for (bool with_preimages : {false, true}) {
    SCOPED_TRACE(with_preimages ? "with preimages" : "without preimages");
    ApplyOptions o;
    if (with_preimages) o.preimages = r.base_dir;
    o.undo_dir = records / "unused";
    ApplyReport rep = patchbox::apply_patch(project.path(), r.patch, o);
    EXPECT_EQ(rep.outcome, Outcome::Refused) << rep.text;
    EXPECT_FALSE(rep.ok());
    EXPECT_FALSE(rep.wrote());
    EXPECT_FALSE(rep.undo_dir.has_value());
    const FileReport* c = find(rep, "sub/c.txt");
    ASSERT_NE(c, nullptr) << rep.text;
    EXPECT_EQ(c->status, FileStatus::Conflict) << rep.text;
    ASSERT_FALSE(c->conflicts.empty());
    EXPECT_EQ(c->conflicts[0].hunk, 1u);
    EXPECT_EQ(c->conflicts[0].header.rfind("@@ -", 0), 0u) << c->conflicts[0].header;
    EXPECT_FALSE(c->conflicts[0].reason.empty());
    EXPECT_FALSE(c->markers_written);
    EXPECT_EQ(rep.count(FileStatus::Conflict), 1u);
    EXPECT_TRUE(contains(rep.text, "sub/c.txt")) << rep.text;
    EXPECT_TRUE(contains(rep.text, "nothing was written")) << rep.text;
    // All or nothing: a.txt, which would apply, was not written either.
    EXPECT_EQ(tree(project.path()), before);
    EXPECT_FALSE(fs::exists(records / "unused"));
  }
}

TEST_F(Apply, ConflictMarkersAreWrittenOnRequest) {
  SandboxResult r = line_four_delegation();
  write_file(project / "sub/c.txt", seven(4, "four, by the user"));
  ApplyOptions o;
  o.conflict_markers = true;
  o.preimages = r.base_dir;
  ApplyReport rep = patchbox::apply_patch(project.path(), r.patch, o);
  EXPECT_EQ(rep.outcome, Outcome::AppliedWithConflicts) << rep.text;
  EXPECT_TRUE(rep.ok());
  EXPECT_TRUE(rep.wrote());
  ASSERT_EQ(rep.files.size(), 1u);
  EXPECT_EQ(rep.files[0].status, FileStatus::Conflict);
  EXPECT_TRUE(rep.files[0].markers_written);
  const std::string c = read_file(project / "sub/c.txt");
  EXPECT_TRUE(contains(c, "<<<<<<<")) << c;
  EXPECT_TRUE(contains(c, "four, by the user")) << c;
  EXPECT_TRUE(contains(c, "four, by the agent")) << c;
}

TEST_F(Apply, PreimagesMergeANonOverlappingUserEdit) {
  SandboxResult r = line_four_delegation();
  // The user edited line 2, inside the hunk's context but not the agent's line.
  write_file(project / "sub/c.txt", seven(2, "two, by the user"));

  // Without the pre-image the changed context is a conflict; nothing is written.
  ApplyReport plain = patchbox::apply_patch(project.path(), r.patch);
  EXPECT_EQ(plain.outcome, Outcome::Refused) << plain.text;
  EXPECT_EQ(read_file(project / "sub/c.txt"), seven(2, "two, by the user"));

  ApplyOptions o;
  o.preimages = r.base_dir;
  ApplyReport rep = patchbox::apply_patch(project.path(), r.patch, o);
  EXPECT_EQ(rep.outcome, Outcome::Applied) << rep.text;
  ASSERT_EQ(rep.files.size(), 1u);
  EXPECT_EQ(rep.files[0].path, fs::path("sub/c.txt"));
  EXPECT_EQ(rep.files[0].status, FileStatus::Merged) << rep.text;
  EXPECT_EQ(rep.count(FileStatus::Merged), 1u);
  EXPECT_TRUE(contains(rep.text, "merged")) << rep.text;
  std::string want = seven(2, "two, by the user");
  want.replace(want.find("4\n"), 2, "four, by the agent\n");
  EXPECT_EQ(read_file(project / "sub/c.txt"), want);
}

TEST_F(Apply, GarbagePatchThrowsPatchParse) {
  const auto before = tree(project.path());
  EXPECT_PB_ERROR(patchbox::apply_patch(project.path(), "hello\nthis is not a patch\n"),
                  ErrorKind::PatchParse);
  // A truncated hunk.
  EXPECT_PB_ERROR(patchbox::apply_patch(project.path(),
                                        "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n"
                                        "@@ -1,2 +1,2 @@\n-one\n"),
                  ErrorKind::PatchParse);
  EXPECT_EQ(tree(project.path()), before);
}

TEST_F(Apply, EmptyPatchIsAlreadyApplied) {
  ApplyReport rep = patchbox::apply_patch(project.path(), "");
  EXPECT_EQ(rep.outcome, Outcome::AlreadyApplied) << rep.text;
  EXPECT_TRUE(rep.files.empty());
}

TEST(ApplyContainment, PathsOutsideTheProjectAreRefusedAndNothingIsWritten) {
  TempDir outer("pb-apply-outer");
  const fs::path project = outer / "project";
  write_file(project / "a.txt", "one\n");
  const auto before = tree(outer.path());

  const std::string dotdot =
      "diff --git a/../escape.txt b/../escape.txt\nnew file mode 100644\n"
      "--- /dev/null\n+++ b/../escape.txt\n@@ -0,0 +1 @@\n+pwned\n";
  EXPECT_PB_ERROR(patchbox::apply_patch(project, dotdot), ErrorKind::Containment);
  // The same name reached through a plain unified diff and -p0.
  ApplyOptions p0;
  p0.strip = 0;
  EXPECT_PB_ERROR(patchbox::apply_patch(project,
                                        "--- /dev/null\n+++ sub/../../escape.txt\n"
                                        "@@ -0,0 +1 @@\n+pwned\n",
                                        p0),
                  ErrorKind::Containment);
  // An absolute name.
  const std::string absolute = "--- /dev/null\n+++ " + (outer / "abs.txt").string() +
                               "\n@@ -0,0 +1 @@\n+pwned\n";
  EXPECT_PB_ERROR(patchbox::apply_patch(project, absolute, p0), ErrorKind::Containment);
  // A legitimate file next to the hostile one does not get written either.
  EXPECT_PB_ERROR(patchbox::apply_patch(project,
                                        "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n"
                                        "@@ -1 +1 @@\n-one\n+two\n" +
                                            dotdot),
                  ErrorKind::Containment);

  EXPECT_EQ(tree(outer.path()), before);
  EXPECT_FALSE(fs::exists(outer / "escape.txt"));
  EXPECT_FALSE(fs::exists(outer / "abs.txt"));
}

TEST(ApplyContainment, WritesThroughSymlinksAndIntoGitAreRefused) {
  TempDir outer("pb-apply-outer");
  const fs::path project = outer / "project";
  write_file(project / "a.txt", "one\n");
  fs::create_directories(outer / "elsewhere");
  fs::create_directory_symlink(outer / "elsewhere", project / "link");
  fs::create_directories(project / ".git");
  const auto before = tree(outer.path());

  ApplyReport rep = patchbox::apply_patch(
      project,
      "diff --git a/link/x.txt b/link/x.txt\nnew file mode 100644\n"
      "--- /dev/null\n+++ b/link/x.txt\n@@ -0,0 +1 @@\n+pwned\n"
      "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n");
  EXPECT_EQ(rep.outcome, Outcome::Refused) << rep.text;
  const FileReport* f = find(rep, "link/x.txt");
  ASSERT_NE(f, nullptr) << rep.text;
  EXPECT_EQ(f->status, FileStatus::Refused);
  EXPECT_FALSE(f->detail.empty());

  // A .git component (in any letter case) is refused in the report.
  ApplyReport git = patchbox::apply_patch(
      project,
      "diff --git a/.GIT/hooks/post-checkout b/.GIT/hooks/post-checkout\n"
      "new file mode 100755\n--- /dev/null\n+++ b/.GIT/hooks/post-checkout\n"
      "@@ -0,0 +1 @@\n+pwned\n");
  EXPECT_EQ(git.outcome, Outcome::Refused) << git.text;
  ASSERT_EQ(git.files.size(), 1u);
  EXPECT_EQ(git.files[0].status, FileStatus::Refused) << git.text;

  EXPECT_EQ(tree(outer.path()), before);
  EXPECT_TRUE(fs::is_empty(outer / "elsewhere"));
}

TEST_F(Apply, SymlinksOutOfTheProjectNeedAllowOutsideSymlinks) {
  const std::string target = (records / "outside.txt").string();
  const std::string patch = "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n"
                            "@@ -0,0 +1 @@\n+" +
                            target + "\n\\ No newline at end of file\n";
  ApplyReport refused = patchbox::apply_patch(project.path(), patch);
  EXPECT_EQ(refused.outcome, Outcome::Refused) << refused.text;
  ASSERT_EQ(refused.files.size(), 1u);
  EXPECT_EQ(refused.files[0].status, FileStatus::Refused);
  EXPECT_FALSE(fs::exists(fs::symlink_status(project / "l")));

  ApplyOptions o;
  o.allow_outside_symlinks = true;
  ApplyReport rep = patchbox::apply_patch(project.path(), patch, o);
  EXPECT_EQ(rep.outcome, Outcome::Applied) << rep.text;
  ASSERT_TRUE(fs::is_symlink(project / "l"));
  EXPECT_EQ(fs::read_symlink(project / "l").native(), target);
}

TEST_F(Apply, UndoRestoresTheProject) {
  SandboxResult r = typical_delegation();
  const auto before = tree(project.path());
  ApplyOptions o;
  o.undo_dir = records / "undo-1";
  ApplyReport rep = patchbox::apply_patch(project.path(), r.patch, o);
  ASSERT_EQ(rep.outcome, Outcome::Applied) << rep.text;
  ASSERT_TRUE(rep.undo_dir.has_value());
  EXPECT_EQ(*rep.undo_dir, records / "undo-1");
  EXPECT_TRUE(fs::is_directory(records / "undo-1"));
  EXPECT_EQ(tree(project.path()), tree(r.head_dir));

  UndoReport u = patchbox::undo_apply(project.path(), *rep.undo_dir);
  EXPECT_FALSE(u.already_undone);
  EXPECT_TRUE(u.overwritten.empty());
  Paths restored = u.restored;
  std::sort(restored.begin(), restored.end());
  EXPECT_EQ(restored, (Paths{"a.txt", "b.txt", "sub/deeper/new.txt"}));
  EXPECT_EQ(tree(project.path()), before);

  UndoReport again = patchbox::undo_apply(project.path(), *rep.undo_dir);
  EXPECT_TRUE(again.already_undone);
  EXPECT_TRUE(again.restored.empty());
  EXPECT_EQ(tree(project.path()), before);
}

TEST_F(Apply, UndoRefusesChangedFilesUnlessForced) {
  SandboxResult r = typical_delegation();
  const auto before = tree(project.path());
  ApplyOptions o;
  o.undo_dir = records / "undo-2";
  ASSERT_TRUE(patchbox::apply_patch(project.path(), r.patch, o).wrote());
  write_file(project / "a.txt", "three, by the user\n");
  const auto edited = tree(project.path());

  EXPECT_PB_ERROR(patchbox::undo_apply(project.path(), records / "undo-2"),
                  ErrorKind::ApplyFailed);
  EXPECT_EQ(tree(project.path()), edited);

  UndoReport u = patchbox::undo_apply(project.path(), records / "undo-2", /*force=*/true);
  EXPECT_EQ(u.overwritten, Paths{"a.txt"});
  EXPECT_EQ(tree(project.path()), before);
}

TEST_F(Apply, UndoOfAMissingRecordThrows) {
  EXPECT_PB_ERROR(patchbox::undo_apply(project.path(), records / "nope"), ErrorKind::Io);
}

TEST_F(Apply, ProjectMustBeADirectory) {
  SandboxResult r = typical_delegation();
  EXPECT_PB_ERROR(patchbox::apply_patch(project / "a.txt", r.patch), ErrorKind::NotADirectory);
}

TEST_F(Apply, StripAppliesToPlainUnifiedDiffs) {
  const std::string patch = "--- a.txt\n+++ a.txt\n@@ -1 +1 @@\n-one\n+uno\n";
  ApplyOptions p0;
  p0.strip = 0;
  ApplyReport rep = patchbox::apply_patch(project.path(), patch, p0);
  EXPECT_EQ(rep.outcome, Outcome::Applied) << rep.text;
  EXPECT_EQ(read_file(project / "a.txt"), "uno\n");
}

TEST_F(Apply, RenamesReportTheirOldPath) {
  SandboxInfo sb = mgr->create_sandbox("rename");
  fs::rename(sb.path / "b.txt", sb.path / "sub/b-moved.txt");
  SandboxResult r = mgr->finalize_sandbox(sb);
  // Whatever form the delegation's patch takes, hand-write a git rename too.
  const std::string rename =
      "diff --git a/a.txt b/sub/a-moved.txt\nsimilarity index 100%\n"
      "rename from a.txt\nrename to sub/a-moved.txt\n";
  ApplyReport rep = patchbox::apply_patch(project.path(), rename);
  ASSERT_EQ(rep.outcome, Outcome::Applied) << rep.text;
  ASSERT_EQ(rep.files.size(), 1u);
  EXPECT_EQ(rep.files[0].path, fs::path("sub/a-moved.txt"));
  ASSERT_TRUE(rep.files[0].old_path.has_value());
  EXPECT_EQ(*rep.files[0].old_path, fs::path("a.txt"));
  EXPECT_TRUE(contains(rep.text, "a.txt => sub/a-moved.txt")) << rep.text;
  EXPECT_EQ(read_file(project / "sub/a-moved.txt"), "one\n");
  EXPECT_FALSE(fs::exists(project / "a.txt"));

  ASSERT_EQ(patchbox::apply_patch(project.path(), r.patch).outcome, Outcome::Applied);
  EXPECT_EQ(read_file(project / "sub/b-moved.txt"), "bee\n");
  EXPECT_FALSE(fs::exists(project / "b.txt"));
}

TEST(ApplyPaths, NonUtf8PathsRoundTrip) {
  TempDir base("pb-apply-bytes");
  const fs::path project = base / "proj-\xff";
  write_file(project / "f\xfd.txt", "x\n");
  const std::string patch =
      "--- a/f\xfd.txt\n+++ b/f\xfd.txt\n@@ -1 +1 @@\n-x\n+y\n";
  ApplyOptions o;
  o.undo_dir = base / "undo-\xfe";
  ApplyReport rep = patchbox::apply_patch(project, patch, o);
  ASSERT_EQ(rep.outcome, Outcome::Applied) << rep.text;
  ASSERT_EQ(rep.files.size(), 1u);
  EXPECT_EQ(rep.files[0].path.native(), "f\xfd.txt");
  ASSERT_TRUE(rep.undo_dir.has_value());
  EXPECT_EQ(rep.undo_dir->native(), (base / "undo-\xfe").native());
  EXPECT_EQ(read_file(project / "f\xfd.txt"), "y\n");
  UndoReport u = patchbox::undo_apply(project, *rep.undo_dir);
  ASSERT_EQ(u.restored.size(), 1u);
  EXPECT_EQ(u.restored[0].native(), "f\xfd.txt");
  EXPECT_EQ(read_file(project / "f\xfd.txt"), "x\n");
}

TEST(ApplyNames, StatusAndOutcomeNames) {
  EXPECT_STREQ(to_string(FileStatus::Applied), "applied");
  EXPECT_STREQ(to_string(FileStatus::Merged), "merged");
  EXPECT_STREQ(to_string(FileStatus::AlreadyApplied), "already applied");
  EXPECT_STREQ(to_string(FileStatus::Conflict), "conflict");
  EXPECT_STREQ(to_string(FileStatus::Refused), "refused");
  EXPECT_STREQ(to_string(Outcome::Applied), "applied");
  EXPECT_STREQ(to_string(Outcome::AppliedWithConflicts), "applied with conflicts");
  EXPECT_STREQ(to_string(Outcome::AlreadyApplied), "already applied");
  EXPECT_STREQ(to_string(Outcome::Refused), "refused");
}

}  // namespace
