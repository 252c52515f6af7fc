// <patchbox/fs_utils.hpp>, from the plan executors' "Filesystem Utilities" table, one test per
// documented statement: backup_directory "copy a directory tree preserving permissions,
// timestamps, and symlinks"; safe_restore "rename-based atomic restore (backup -> original)";
// compute_diff "compute a unified diff between two directory trees" (with git apply and GNU
// patch as the oracles that read it).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <patchbox/fs_utils.hpp>

#include "expect_error.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
namespace fs_utils = patchbox::plan::fs_utils;
using patchbox::ErrorKind;
using testutil::contains;
using testutil::read_file;
using testutil::TempDir;
using testutil::write_file;

struct stat lstat_of(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) throw std::runtime_error("lstat " + p.string());
  return st;
}

bool same_time(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/// Sets @p p's modification and access time to @p sec + @p nsec (not following a symlink).
void set_time(const fs::path& p, long sec, long nsec) {
  const struct timespec t[2] = {{sec, nsec}, {sec, nsec}};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), t, AT_SYMLINK_NOFOLLOW), 0) << p;
}

/// A small project: nested directories, an executable, a read-only file, a read-only
/// directory, a relative symlink, a dangling one and one leading out of the tree.
void make_tree(const fs::path& root, const fs::path& outside) {
  write_file(root / "README.md", "hello\n");
  write_file(root / "src/main.c", "int main(void) { return 0; }\n");
  write_file(root / "bin/run.sh", "#!/bin/sh\necho run\n");
  fs::permissions(root / "bin/run.sh", fs::perms(0755));
  write_file(root / "ro/frozen.txt", "do not touch\n");
  fs::permissions(root / "ro/frozen.txt", fs::perms(0444));
  fs::permissions(root / "ro", fs::perms(0555));
  fs::create_symlink("src/main.c", root / "main-link");
  fs::create_symlink("nowhere/at/all", root / "dangling");
  fs::create_symlink(outside, root / "escape");
  set_time(root / "README.md", 1600000000, 123456789);
  set_time(root / "main-link", 1500000000, 987654321);
  set_time(root / "src", 1400000000, 5);
}

/// The trees made by make_tree are read-only in places: made writable before removal.
void make_writable(const fs::path& root) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) {
      fs::permissions(it->path(), fs::perms(0755), ec);
    }
  }
}

int run(const std::string& cmd) { return std::system(cmd.c_str()); }

// ---- backup_directory ------------------------------------------------------------------------

TEST(FsUtils, BackupDirectoryCopiesTheTreePreservingPermissionsTimestampsAndSymlinks) {
  TempDir t("pb-fsu");
  write_file(t / "outside/secret.txt", "outside\n");
  make_tree(t / "src", t / "outside");
  const fs::path dst = fs_utils::backup_directory(t / "src", t / "backup");
  EXPECT_EQ(dst, t / "backup");

  EXPECT_EQ(read_file(t / "backup/README.md"), "hello\n");
  EXPECT_EQ(read_file(t / "backup/src/main.c"), "int main(void) { return 0; }\n");
  // Permissions: the executable, the read-only file and the read-only directory.
  EXPECT_EQ(lstat_of(t / "backup/bin/run.sh").st_mode & 07777, 0755u);
  EXPECT_EQ(lstat_of(t / "backup/ro/frozen.txt").st_mode & 07777, 0444u);
  EXPECT_EQ(lstat_of(t / "backup/ro").st_mode & 07777, 0555u);
  // Timestamps, to the nanosecond: a file, a symlink's own, a directory's.
  EXPECT_TRUE(same_time(lstat_of(t / "backup/README.md").st_mtim, timespec{1600000000, 123456789}));
  EXPECT_TRUE(same_time(lstat_of(t / "backup/main-link").st_mtim, timespec{1500000000, 987654321}));
  EXPECT_TRUE(same_time(lstat_of(t / "backup/src").st_mtim, timespec{1400000000, 5}));
  // Symlinks stay links with their targets, never followed (the one leading out too).
  EXPECT_TRUE(fs::is_symlink(t / "backup/main-link"));
  EXPECT_EQ(fs::read_symlink(t / "backup/main-link"), "src/main.c");
  EXPECT_EQ(fs::read_symlink(t / "backup/dangling"), "nowhere/at/all");
  EXPECT_TRUE(fs::is_symlink(t / "backup/escape"));
  EXPECT_EQ(fs::read_symlink(t / "backup/escape"), t / "outside");
  // The copy is independent of the source.
  write_file(t / "backup/README.md", "changed\n");
  EXPECT_EQ(read_file(t / "src/README.md"), "hello\n");
  make_writable(t.path());
}

TEST(FsUtils, BackupDirectoryRefusesAMissingSourceAndAnExistingDestination) {
  TempDir t("pb-fsu");
  write_file(t / "src/a.txt", "a\n");
  write_file(t / "file.txt", "not a dir\n");
  EXPECT_PB_ERROR(fs_utils::backup_directory(t / "absent", t / "b1"), ErrorKind::NotADirectory);
  EXPECT_PB_ERROR(fs_utils::backup_directory(t / "file.txt", t / "b2"), ErrorKind::NotADirectory);
  fs::create_directory(t / "taken");
  EXPECT_PB_ERROR(fs_utils::backup_directory(t / "src", t / "taken"), ErrorKind::Io);
  EXPECT_TRUE(fs::is_empty(t / "taken"));
  EXPECT_FALSE(fs::exists(t / "b1"));
  // A plan error handler catches it too: every failure is a patchbox::Error.
  try {
    fs_utils::backup_directory(t / "src", t / "taken");
    ADD_FAILURE() << "no exception";
  } catch (const patchbox::Error& e) {
    EXPECT_TRUE(contains(e.what(), (t / "taken").string())) << e.what();
  }
}

// ---- safe_restore ----------------------------------------------------------------------------

TEST(FsUtils, SafeRestorePutsTheBackupInPlaceByRenames) {
  TempDir t("pb-fsu");
  write_file(t / "work/notes.txt", "one\n");
  write_file(t / "work/keep/a.txt", "a\n");
  fs_utils::backup_directory(t / "work", t / "backup");
  const ino_t backup_inode = lstat_of(t / "backup").st_ino;
  // A failed step: a file changed, one added, one deleted.
  write_file(t / "work/notes.txt", "broken\n");
  write_file(t / "work/stray.txt", "stray\n");
  fs::remove(t / "work/keep/a.txt");

  fs_utils::safe_restore(t / "backup", t / "work");
  EXPECT_EQ(read_file(t / "work/notes.txt"), "one\n");
  EXPECT_EQ(read_file(t / "work/keep/a.txt"), "a\n");
  EXPECT_FALSE(fs::exists(t / "work/stray.txt"));
  // Renamed, not copied: the original is now the backup's very directory; the backup is
  // consumed and nothing is left beside the original.
  EXPECT_EQ(lstat_of(t / "work").st_ino, backup_inode);
  EXPECT_FALSE(fs::exists(t / "backup"));
  EXPECT_TRUE(testutil::entries_with_prefix(t.path(), ".work").empty());
}

TEST(FsUtils, SafeRestoreOfAMissingOriginalCreatesIt) {
  TempDir t("pb-fsu");
  write_file(t / "backup/a.txt", "a\n");
  fs_utils::safe_restore(t / "backup", t / "restored");
  EXPECT_EQ(read_file(t / "restored/a.txt"), "a\n");
  EXPECT_FALSE(fs::exists(t / "backup"));
}

TEST(FsUtils, SafeRestoreRefusesABackupThatIsNotADirectoryAndLeavesTheOriginal) {
  TempDir t("pb-fsu");
  write_file(t / "work/notes.txt", "one\n");
  write_file(t / "file.txt", "x\n");
  EXPECT_PB_ERROR(fs_utils::safe_restore(t / "absent", t / "work"), ErrorKind::NotADirectory);
  EXPECT_PB_ERROR(fs_utils::safe_restore(t / "file.txt", t / "work"), ErrorKind::NotADirectory);
  EXPECT_EQ(read_file(t / "work/notes.txt"), "one\n");
}

TEST(FsUtils, SafeRestoreAcrossFilesystemsCopiesNextToTheOriginalFirst) {
  // /dev/shm is a tmpfs on Linux: another filesystem than the temporary directory, usually.
  TempDir t("pb-fsu");
  std::error_code ec;
  if (!fs::is_directory("/dev/shm", ec) || ::access("/dev/shm", W_OK) != 0) {
    GTEST_SKIP() << "no writable /dev/shm";
  }
  const fs::path shm = fs::path("/dev/shm") / ("pb-fsu-" + std::to_string(::getpid()));
  fs::remove_all(shm, ec);
  write_file(shm / "backup/a.txt", "from the other filesystem\n");
  if (lstat_of(shm).st_dev == lstat_of(t.path()).st_dev) {
    fs::remove_all(shm, ec);
    GTEST_SKIP() << "/dev/shm is on the temporary directory's filesystem";
  }
  write_file(t / "work/a.txt", "old\n");
  fs_utils::safe_restore(shm / "backup", t / "work");
  EXPECT_EQ(read_file(t / "work/a.txt"), "from the other filesystem\n");
  EXPECT_FALSE(fs::exists(shm / "backup"));
  EXPECT_TRUE(testutil::entries_with_prefix(t.path(), ".work").empty());
  fs::remove_all(shm, ec);
}

// ---- compute_diff ----------------------------------------------------------------------------

TEST(FsUtils, ComputeDiffIsEmptyForTheSameTrees) {
  TempDir t("pb-fsu");
  write_file(t / "a/x.txt", "same\n");
  write_file(t / "b/x.txt", "same\n");
  EXPECT_EQ(fs_utils::compute_diff(t / "a", t / "b"), "");
  EXPECT_EQ(fs_utils::compute_diff(t / "a", t / "a"), "");
}

TEST(FsUtils, ComputeDiffIsAUnifiedDiffThatGitApplyTurnsTheOriginalIntoTheModified) {
  if (run("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git not installed";
  TempDir t("pb-fsu");
  write_file(t / "orig/README.md", "hello\nworld\n");
  write_file(t / "orig/gone.txt", "bye\n");
  write_file(t / "orig/src/main.c", "int main(void) { return 0; }\n");
  write_file(t / "orig/run.sh", "echo\n");
  fs_utils::backup_directory(t / "orig", t / "mod");
  write_file(t / "mod/README.md", "hello\nthere\nworld\n");
  fs::remove(t / "mod/gone.txt");
  write_file(t / "mod/src/new.h", "#pragma once\n");
  fs::permissions(t / "mod/run.sh", fs::perms(0755));
  write_file(t / "mod/data.bin", std::string("\0\x01\x02\xff", 4));
  fs::create_symlink("src/main.c", t / "mod/main-link");

  const std::string patch = fs_utils::compute_diff(t / "orig", t / "mod");
  EXPECT_TRUE(contains(patch, "--- a/README.md\n+++ b/README.md\n")) << patch;
  EXPECT_TRUE(contains(patch, " hello\n+there\n world\n")) << patch;
  EXPECT_TRUE(contains(patch, "--- a/gone.txt\n+++ /dev/null\n")) << patch;
  EXPECT_TRUE(contains(patch, "--- /dev/null\n+++ b/src/new.h\n")) << patch;
  EXPECT_TRUE(contains(patch, "old mode 100644\nnew mode 100755\n")) << patch;
  // Sorted by path.
  EXPECT_LT(patch.find("a/README.md"), patch.find("b/data.bin"));
  EXPECT_LT(patch.find("b/data.bin"), patch.find("a/gone.txt"));
  EXPECT_LT(patch.find("a/gone.txt"), patch.find("b/src/new.h"));

  // The oracle: git apply on a copy of the original gives the modified tree.
  fs_utils::backup_directory(t / "orig", t / "applied");
  write_file(t / "change.patch", patch);
  ASSERT_EQ(run("cd '" + (t / "applied").string() +
                "' && git init -q . && git apply ../change.patch && rm -rf .git"),
            0)
      << patch;
  EXPECT_EQ(fs_utils::compute_diff(t / "applied", t / "mod"), "");
}

TEST(FsUtils, ComputeDiffOfTextChangesIsReadByGnuPatch) {
  if (run("patch --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "patch not installed";
  TempDir t("pb-fsu");
  write_file(t / "orig/a.txt", "1\n2\n3\n");
  write_file(t / "orig/dir/b.txt", "b\n");
  write_file(t / "orig/old.txt", "old\n");
  fs_utils::backup_directory(t / "orig", t / "mod");
  write_file(t / "mod/a.txt", "1\ntwo\n3\n");
  write_file(t / "mod/dir/c.txt", "c\n");
  fs::remove(t / "mod/old.txt");
  const std::string patch = fs_utils::compute_diff(t / "orig", t / "mod");

  fs_utils::backup_directory(t / "orig", t / "patched");
  write_file(t / "change.patch", patch);
  ASSERT_EQ(run("cd '" + (t / "patched").string() +
                "' && patch -p1 -s -E < ../change.patch"),
            0)
      << patch;
  EXPECT_EQ(fs_utils::compute_diff(t / "patched", t / "mod"), "");
}

TEST(FsUtils, ComputeDiffAgainstAMissingTreeAddsEveryFileAndRefusesAFile) {
  TempDir t("pb-fsu");
  write_file(t / "mod/a.txt", "a\n");
  write_file(t / "file.txt", "x\n");
  const std::string patch = fs_utils::compute_diff(t / "absent", t / "mod");
  EXPECT_TRUE(contains(patch, "diff --git a/a.txt b/a.txt\nnew file mode 100644\n")) << patch;
  EXPECT_PB_ERROR(fs_utils::compute_diff(t / "file.txt", t / "mod"), ErrorKind::Io);
}

}  // namespace
