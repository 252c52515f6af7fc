// One SQLite per process, C++ face: built with PATCHBOX_SYSTEM_SQLITE, patchbox uses the
// system's libsqlite3.so.0, so whatever else in the process uses that library (here the
// "engine", which reaches it as a plugin or an embedded interpreter would, through dlopen)
// shares one SQLite with it: the engine's connections and a transaction_rollback sandbox on
// the same file see each other's locks, and closing the engine's connections does not drop
// the sandbox's (POSIX locks belong to the process: with a second SQLite in the process, as
// with patchbox's bundled one, each of these checks fails). Temporary directories only.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <variant>

#include <patchbox/plan.hpp>
#include <patchbox/sqlite.hpp>

#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
namespace plan = patchbox::plan;
using testutil::TempDir;

/// SQLite's RESERVED lock (a writer's): one byte after the PENDING byte at 1 GiB.
constexpr off_t kReservedByte = 0x40000001;

/// Whether a process holds SQLite's write (RESERVED) lock on `db`, asked from a child
/// process: POSIX locks are per process, so only another process sees this one's locks.
bool write_lock_held_by_this_process(const fs::path& db) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(db.c_str(), O_RDWR);
    if (fd < 0) ::_exit(2);
    struct flock lk {};
    lk.l_type = F_WRLCK;
    lk.l_whence = SEEK_SET;
    lk.l_start = kReservedByte;
    lk.l_len = 1;
    if (::fcntl(fd, F_GETLK, &lk) != 0) ::_exit(2);
    ::_exit(lk.l_type == F_UNLCK ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 2) << "the child could not ask";
  return WIFEXITED(status) && WEXITSTATUS(status) == 1;
}

/// The SQLite C API as the engine reaches it: from libsqlite3.so.0, loaded by name.
struct Api {
  void* lib = ::dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_LOCAL);
  template <class F>
  F* get(const char* name) const {
    return reinterpret_cast<F*>(lib ? ::dlsym(lib, name) : nullptr);
  }
  decltype(&sqlite3_open) open = get<decltype(sqlite3_open)>("sqlite3_open");
  decltype(&sqlite3_close) close = get<decltype(sqlite3_close)>("sqlite3_close");
  decltype(&sqlite3_exec) exec = get<decltype(sqlite3_exec)>("sqlite3_exec");
  decltype(&sqlite3_busy_timeout) busy_timeout =
      get<decltype(sqlite3_busy_timeout)>("sqlite3_busy_timeout");
  decltype(&sqlite3_prepare_v2) prepare = get<decltype(sqlite3_prepare_v2)>("sqlite3_prepare_v2");
  decltype(&sqlite3_step) step = get<decltype(sqlite3_step)>("sqlite3_step");
  decltype(&sqlite3_column_int64) column =
      get<decltype(sqlite3_column_int64)>("sqlite3_column_int64");
  decltype(&sqlite3_finalize) finalize = get<decltype(sqlite3_finalize)>("sqlite3_finalize");
  bool ok() const { return open && close && exec && busy_timeout && prepare && step && column && finalize; }
};

const Api& api() {
  static const Api a;
  return a;
}

/// The engine's own connection; never waits for a lock.
struct Engine {
  sqlite3* db = nullptr;
  explicit Engine(const fs::path& p) {
    EXPECT_TRUE(api().ok()) << "libsqlite3.so.0 not loadable";
    EXPECT_EQ(api().open(p.c_str(), &db), SQLITE_OK);
    api().busy_timeout(db, 0);
  }
  ~Engine() { api().close(db); }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  int exec(const std::string& sql) { return api().exec(db, sql.c_str(), nullptr, nullptr, nullptr); }
  std::int64_t count(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    std::int64_t n = -1;
    if (api().prepare(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && api().step(st) == SQLITE_ROW)
      n = api().column(st, 0);
    api().finalize(st);
    return n;
  }
};

fs::path make_db(const TempDir& dir) {
  fs::path db = dir / "app.db";
  Engine e{db};
  EXPECT_EQ(e.exec("PRAGMA journal_mode = DELETE; CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
                   "INSERT INTO t VALUES (1, 'a');"),
            SQLITE_OK);
  return db;
}

TEST(SqliteOneCopy, TheEnginesWriteLockMakesTheSandboxWaitUntilReleased) {
  TempDir root{"patchbox-sqlite1-root"};
  TempDir data{"patchbox-sqlite1-data"};
  const fs::path db = make_db(data);
  auto mgr = plan::SandboxManager::open(root.path());
  Engine engine{db};
  ASSERT_EQ(engine.exec("BEGIN IMMEDIATE; INSERT INTO t VALUES (10, 'engine');"), SQLITE_OK);
  auto sb = mgr.get_or_create_sandbox("p", "db", db, "transaction_rollback");
  plan::execute(*sb, "PRAGMA busy_timeout = 0");
  EXPECT_THROW(plan::execute(*sb, "UPDATE t SET v = 'b' WHERE id = 1"), plan::SandboxError);
  ASSERT_EQ(engine.exec("COMMIT"), SQLITE_OK);
  plan::execute(*sb, "UPDATE t SET v = 'b' WHERE id = 1");
  mgr.commit_all("p");
  EXPECT_EQ(engine.count("SELECT count(*) FROM t WHERE (id, v) IN (VALUES (1, 'b'), (10, 'engine'))"), 2);
  EXPECT_EQ(engine.count("SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
  mgr.cleanup_all("p");
}

TEST(SqliteOneCopy, TheSandboxesWriteLockSurvivesTheEngineClosingItsConnections) {
  TempDir root{"patchbox-sqlite1-root"};
  TempDir data{"patchbox-sqlite1-data"};
  const fs::path db = make_db(data);
  auto mgr = plan::SandboxManager::open(root.path());
  auto sb = mgr.get_or_create_sandbox("p", "db", db, "transaction_rollback");
  plan::execute(*sb, "INSERT INTO t VALUES (2, 'sandbox')");
  EXPECT_TRUE(write_lock_held_by_this_process(db));
  for (int i = 0; i < 3; ++i) {
    Engine engine{db};
    EXPECT_EQ(engine.count("SELECT count(*) FROM t"), 1);
    EXPECT_EQ(engine.exec("INSERT INTO t VALUES (20, 'engine')"), SQLITE_BUSY);
  }  // each closes its connection to the file
  EXPECT_TRUE(write_lock_held_by_this_process(db));
  mgr.commit_all("p");
  EXPECT_FALSE(write_lock_held_by_this_process(db));
  Engine engine{db};
  EXPECT_EQ(engine.exec("INSERT INTO t VALUES (20, 'engine')"), SQLITE_OK);
  EXPECT_EQ(engine.count("SELECT count(*) FROM t WHERE id IN (1, 2, 20)"), 3);
  EXPECT_EQ(engine.count("SELECT count(*) FROM pragma_integrity_check WHERE integrity_check = 'ok'"), 1);
  mgr.cleanup_all("p");
}

}  // namespace
