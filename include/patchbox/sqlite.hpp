// <patchbox/sqlite.hpp>: SQL statements in a `transaction_rollback` sandbox (C++17).
#ifndef PATCHBOX_SQLITE_HPP
#define PATCHBOX_SQLITE_HPP

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "patchbox/plan.hpp"

namespace patchbox {
namespace plan {

/// One SQL value: SQLite's five storage classes, by variant alternative:
///
/// | alternative              | SQLite   |
/// |--------------------------|----------|
/// | `std::monostate`         | `NULL`   |
/// | `int64_t`                | INTEGER  |
/// | `double`                 | REAL     |
/// | `std::string`            | TEXT (UTF-8; invalid UTF-8 from the database is replaced) |
/// | `std::vector<uint8_t>`   | BLOB     |
///
/// Give an integer as `std::int64_t{7}` (a plain `int` is ambiguous between the alternatives)
/// and text as `std::string("…")`.
using SqlValue =
    std::variant<std::monostate, std::int64_t, double, std::string, std::vector<std::uint8_t>>;

/// What one statement returned.
struct SqlRows {
  /// The result's column names (empty for a statement that returns no rows).
  std::vector<std::string> columns;
  /// The rows, each with one value per column.
  std::vector<std::vector<SqlValue>> rows;
  /// Rows inserted, updated or deleted by the statement (0 for a query).
  std::uint64_t changes = 0;
};

/// Runs one statement, with @p params bound to its parameters (`?1`, `?2`, … or `?` in
/// order), in the open transaction of the `transaction_rollback` sandbox @p sandbox: its
/// writes reach the database when the sandbox commits, and not at all when it rolls back.
/// Makes a created sandbox active.
///
/// The sandbox's diff() has one entry per changed row, `<table>/<primary key>` (a table
/// without a declared PRIMARY KEY is keyed by its rowid). A statement that ends the transaction itself (`COMMIT`,
/// `ROLLBACK`) makes the sandbox Errored.
///
/// @throws SandboxError when @p sandbox is not a library `transaction_rollback` sandbox (other
///         strategy, or a user's own Sandbox subclass), or the statement fails;
///         SandboxStateError when the sandbox is not Created or Active.
SqlRows execute(Sandbox& sandbox, const std::string& sql,
                const std::vector<SqlValue>& params = {});

}  // namespace plan
}  // namespace patchbox

#endif  // PATCHBOX_SQLITE_HPP
