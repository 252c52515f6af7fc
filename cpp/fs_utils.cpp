// The C++ glue of <patchbox/fs_utils.hpp>: backup_directory and safe_restore are plain
// std::filesystem and POSIX work (lstat for the nanosecond timestamps, utimensat to set them
// on symlinks too); compute_diff is the Rust library's, over its cxx bridge
// (src/ffi/fs_utils.rs).
#include "patchbox/fs_utils.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "patchbox/cpp/glue.h"
#include "patchbox/src/ffi/fs_utils.rs.h"
#include "rust/cxx.h"

namespace patchbox {
namespace plan {
namespace fs_utils {
namespace {

namespace fs = std::filesystem;

/// An ErrorKind::Io error naming the operation, the path and the reason.
Error io_error(const char* op, const fs::path& path, const std::string& reason) {
  return Error(ErrorKind::Io, std::string(op) + " " + path.string() + ": " + reason);
}

Error errno_error(const char* op, const fs::path& path, int err) {
  return io_error(op, path, std::strerror(err));
}

struct stat lstat_of(const char* op, const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) throw errno_error(op, p, errno);
  return st;
}

/// Sets @p to's access and modification times to @p from's (never following a symlink).
void copy_times(const fs::path& to, const struct stat& from) {
  const struct timespec times[2] = {from.st_atim, from.st_mtim};
  if (::utimensat(AT_FDCWD, to.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
    throw errno_error("backup_directory: set times of", to, errno);
  }
}

void set_mode(const fs::path& to, const struct stat& from) {
  if (::chmod(to.c_str(), from.st_mode & 07777) != 0) {
    throw errno_error("backup_directory: set permissions of", to, errno);
  }
}

/// Copies the node @p from (whose lstat is @p st) to @p to, which does not exist.
void copy_node(const fs::path& from, const fs::path& to, const struct stat& st) {
  std::error_code ec;
  if (S_ISDIR(st.st_mode)) {
    // Made writable for the copy; its own mode is set once it is filled (a read-only
    // directory is copied too), and its times last, as filling it changed them.
    if (::mkdir(to.c_str(), 0700) != 0) throw errno_error("backup_directory: create", to, errno);
    fs::directory_iterator it(from, ec), end;
    if (ec) throw io_error("backup_directory: list", from, ec.message());
    for (; it != end; it.increment(ec)) {
      if (ec) break;
      const fs::path child = it->path();
      copy_node(child, to / child.filename(), lstat_of("backup_directory: stat", child));
    }
    if (ec) throw io_error("backup_directory: list", from, ec.message());
    set_mode(to, st);
    copy_times(to, st);
  } else if (S_ISREG(st.st_mode)) {
    if (!fs::copy_file(from, to, fs::copy_options::none, ec) || ec) {
      throw io_error("backup_directory: copy", from, ec ? ec.message() : "not copied");
    }
    set_mode(to, st);
    copy_times(to, st);
  } else if (S_ISLNK(st.st_mode)) {
    const fs::path target = fs::read_symlink(from, ec);
    if (ec) throw io_error("backup_directory: read link", from, ec.message());
    fs::create_symlink(target, to, ec);
    if (ec) throw io_error("backup_directory: create link", to, ec.message());
    copy_times(to, st);
  } else {
    throw io_error("backup_directory: copy", from,
                   "not a regular file, directory or symlink (sockets, devices and FIFOs are "
                   "not copied)");
  }
}

/// A short random tag for the names of the temporary trees next to an original.
std::string random_tag() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<std::uint64_t>(rd()) << 32) ^ rd());
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 12; ++i) out.push_back(kHex[gen() % 16]);
  return out;
}

/// @p p when it names something (a dangling symlink included).
bool lexists(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

void remove_tree(const char* op, const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) throw io_error(op, p, ec.message());
}

}  // namespace

fs::path backup_directory(const fs::path& src, const fs::path& dst) {
  std::error_code ec;
  if (!fs::is_directory(src, ec)) {
    throw Error(ErrorKind::NotADirectory,
                "backup_directory: " + src.string() + " is not a directory");
  }
  if (lexists(dst)) throw io_error("backup_directory: create", dst, "it already exists");
  struct stat st {};
  // The source itself may be a link to a directory: its tree is copied, as its own.
  if (::stat(src.c_str(), &st) != 0) throw errno_error("backup_directory: stat", src, errno);
  copy_node(src, dst, st);
  return dst;
}

void safe_restore(const fs::path& backup, const fs::path& original) {
  std::error_code ec;
  if (!fs::is_directory(backup, ec)) {
    throw Error(ErrorKind::NotADirectory,
                "safe_restore: backup " + backup.string() + " is not a directory");
  }
  const fs::path name = original.filename();
  const fs::path parent = original.has_parent_path() ? original.parent_path() : fs::path(".");
  const std::string tag = random_tag();
  struct stat bst {}, pst {};
  if (::stat(backup.c_str(), &bst) != 0) throw errno_error("safe_restore: stat", backup, errno);
  if (::stat(parent.c_str(), &pst) != 0) throw errno_error("safe_restore: stat", parent, errno);
  fs::path source = backup;
  if (bst.st_dev != pst.st_dev) {
    // A rename cannot cross filesystems: the backup is copied next to the original first.
    source = parent / ("." + name.string() + ".restore-" + tag);
    try {
      backup_directory(backup, source);
    } catch (...) {
      // A partial copy is not left beside the original (the original was not touched).
      std::error_code ignored;
      fs::remove_all(source, ignored);
      throw;
    }
  }
  fs::path aside;
  if (lexists(original)) {
    aside = parent / ("." + name.string() + ".old-" + tag);
    if (::rename(original.c_str(), aside.c_str()) != 0) {
      const int err = errno;
      if (source != backup) remove_tree("safe_restore: remove", source);
      throw errno_error("safe_restore: move aside", original, err);
    }
  }
  if (::rename(source.c_str(), original.c_str()) != 0) {
    const int err = errno;
    if (!aside.empty() && ::rename(aside.c_str(), original.c_str()) != 0) {
      throw io_error("safe_restore: put back", original,
                     std::string(std::strerror(err)) + "; the old tree is at " + aside.string());
    }
    if (source != backup) remove_tree("safe_restore: remove", source);
    throw errno_error("safe_restore: rename backup to", original, err);
  }
  if (!aside.empty()) remove_tree("safe_restore: remove old tree", aside);
  if (source != backup) remove_tree("safe_restore: remove backup", backup);
}

std::string compute_diff(const fs::path& original, const fs::path& modified) {
  return glue::call([&] {
    return glue::str_of(bridge::fs_compute_diff(glue::bytes(original), glue::bytes(modified)));
  });
}

}  // namespace fs_utils
}  // namespace plan
}  // namespace patchbox
