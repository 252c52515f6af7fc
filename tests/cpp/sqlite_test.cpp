// <patchbox/sqlite.hpp>: statements in a transaction_rollback sandbox over a new (empty)
// database file — values both ways, the per-row diff, isolation until commit_all, the undo of
// a commit — and the refusal of a sandbox of another strategy. Temporary directories only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include <patchbox/plan.hpp>
#include <patchbox/sqlite.hpp>

#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
namespace plan = patchbox::plan;
using plan::SqlValue;
using testutil::TempDir;
using testutil::write_file;

constexpr const char* kTransactionRollback = "transaction_rollback";

/// The rows of `SELECT count(*) FROM t` seen by another connection (a sandbox of a plan of its
/// own, removed before returning); -1 when the query fails (no table yet).
std::int64_t committed_rows(plan::SandboxManager& mgr, const fs::path& db) {
  std::int64_t n = -1;
  {
    auto reader = mgr.get_or_create_sandbox("reader", "db", db, kTransactionRollback);
    try {
      plan::SqlRows r = plan::execute(*reader, "SELECT count(*) FROM t");
      n = std::get<std::int64_t>(r.rows.at(0).at(0));
    } catch (const plan::SandboxError&) {
    }
  }
  mgr.cleanup_all("reader");
  return n;
}

TEST(Sqlite, ExecuteDiffCommitAndUndo) {
  TempDir root{"patchbox-sqlite-root"};
  TempDir data{"patchbox-sqlite-data"};
  const fs::path db = data / "app.db";
  write_file(db, "");  // an empty file is an empty database; the sandbox does not create one

  auto mgr = plan::SandboxManager::open(root.path());
  auto sb = mgr.get_or_create_sandbox("p1", "db", db, kTransactionRollback);
  EXPECT_EQ(sb->strategy(), kTransactionRollback);

  plan::SqlRows created = plan::execute(
      *sb, "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score REAL, data BLOB)");
  EXPECT_TRUE(created.columns.empty());
  EXPECT_EQ(created.changes, 0u);

  const std::vector<std::uint8_t> blob{0x00, 0x01, 0xff};
  plan::SqlRows ins = plan::execute(*sb, "INSERT INTO t VALUES (?1, ?2, ?3, ?4)",
                                    {SqlValue(std::int64_t{1}), SqlValue(std::string("ada")),
                                     SqlValue(1.5), SqlValue(blob)});
  EXPECT_EQ(ins.changes, 1u);
  EXPECT_EQ(plan::execute(*sb, "INSERT INTO t(id, name) VALUES (?, ?)",
                          {SqlValue(std::int64_t{2}), SqlValue()})
                .changes,
            1u);
  EXPECT_EQ(sb->status(), plan::Status::Active);

  plan::SqlRows sel = plan::execute(*sb, "SELECT id, name, score, data FROM t ORDER BY id");
  ASSERT_EQ(sel.columns, (std::vector<std::string>{"id", "name", "score", "data"}));
  ASSERT_EQ(sel.rows.size(), 2u);
  EXPECT_EQ(std::get<std::int64_t>(sel.rows[0][0]), 1);
  EXPECT_EQ(std::get<std::string>(sel.rows[0][1]), "ada");
  EXPECT_DOUBLE_EQ(std::get<double>(sel.rows[0][2]), 1.5);
  EXPECT_EQ(std::get<std::vector<std::uint8_t>>(sel.rows[0][3]), blob);
  EXPECT_EQ(std::get<std::int64_t>(sel.rows[1][0]), 2);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(sel.rows[1][1]));
  EXPECT_TRUE(std::holds_alternative<std::monostate>(sel.rows[1][3]));
  EXPECT_EQ(sel.changes, 0u);

  plan::SandboxDiff diff = sb->diff();
  std::vector<std::string> added = diff.paths(plan::DiffOp::Added);
  EXPECT_EQ(added, (std::vector<std::string>{"t/1", "t/2"}));

  EXPECT_EQ(committed_rows(mgr, db), -1) << "the table is not visible before the commit";

  std::vector<plan::CommitResult> results = mgr.commit_all("p1");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].success);
  EXPECT_EQ(sb->status(), plan::Status::Committed);
  EXPECT_EQ(committed_rows(mgr, db), 2);

  sb->rollback();  // after the commit: the inverted changeset (rows only; the table stays)
  EXPECT_EQ(sb->status(), plan::Status::RolledBack);
  EXPECT_EQ(committed_rows(mgr, db), 0);
  mgr.cleanup_all("p1");
}

TEST(Sqlite, RollbackDiscardsTheTransaction) {
  TempDir root{"patchbox-sqlite-root"};
  TempDir data{"patchbox-sqlite-data"};
  const fs::path db = data / "app.db";
  write_file(db, "");
  auto mgr = plan::SandboxManager::open(root.path());
  auto sb = mgr.get_or_create_sandbox("p1", "db", db, kTransactionRollback);
  plan::execute(*sb, "CREATE TABLE t(id INTEGER PRIMARY KEY)");
  plan::execute(*sb, "INSERT INTO t VALUES (1)");
  sb->rollback();
  EXPECT_EQ(sb->status(), plan::Status::RolledBack);
  EXPECT_EQ(committed_rows(mgr, db), -1);
  mgr.cleanup_all("p1");
}

TEST(Sqlite, BadStatementIsASandboxError) {
  TempDir root{"patchbox-sqlite-root"};
  TempDir data{"patchbox-sqlite-data"};
  const fs::path db = data / "app.db";
  write_file(db, "");
  auto mgr = plan::SandboxManager::open(root.path());
  auto sb = mgr.get_or_create_sandbox("p1", "db", db, kTransactionRollback);
  EXPECT_THROW(plan::execute(*sb, "SELECT * FROM no_such_table"), plan::SandboxError);
  mgr.cleanup_all("p1");
}

TEST(Sqlite, OtherStrategiesAreRefused) {
  TempDir root{"patchbox-sqlite-root"};
  TempDir project{"patchbox-sqlite-project"};
  write_file(project / "a.txt", "a\n");
  auto mgr = plan::SandboxManager::open(root.path());
  auto sb = mgr.get_or_create_sandbox("p1", "dir", project.path(), plan::strategy::copy_on_write);
  try {
    plan::execute(*sb, "SELECT 1");
    ADD_FAILURE() << "no exception";
  } catch (const plan::SandboxError& e) {
    EXPECT_EQ(e.sandbox_id(), sb->sandbox_id());
    EXPECT_NE(std::string(e.what()).find("not a SQLite sandbox"), std::string::npos) << e.what();
  }
  mgr.cleanup_all("p1");
}

}  // namespace
