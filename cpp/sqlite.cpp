// The C++ glue of <patchbox/sqlite.hpp>: patchbox::plan::execute over the plan bridge's
// PlanSandbox::sqlite_execute (src/ffi/plan/sqlite.rs).
#include "patchbox/sqlite.hpp"

#include <cstddef>
#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "patchbox/cpp/plan_internal.h"
#include "patchbox/src/ffi/plan.rs.h"
#include "rust/cxx.h"

namespace patchbox {
namespace plan {
namespace {

namespace pb = ::patchbox::bridge::plan;

pb::FfiSqlValue value_in(const SqlValue& v) {
  pb::FfiSqlValue out{};
  out.kind = 0;
  out.integer = 0;
  out.real = 0.0;
  std::visit(
      [&out](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::int64_t>) {
          out.kind = 1;
          out.integer = x;
        } else if constexpr (std::is_same_v<T, double>) {
          out.kind = 2;
          out.real = x;
        } else if constexpr (std::is_same_v<T, std::string>) {
          out.kind = 3;
          out.text = rust::String(x.data(), x.size());
        } else if constexpr (std::is_same_v<T, std::vector<std::uint8_t>>) {
          out.kind = 4;
          out.blob.reserve(x.size());
          for (std::uint8_t b : x) out.blob.push_back(b);
        }
      },
      v);
  return out;
}

SqlValue value_out(const pb::FfiSqlValue& v) {
  switch (v.kind) {
    case 1:
      return SqlValue(std::in_place_type<std::int64_t>, v.integer);
    case 2:
      return SqlValue(std::in_place_type<double>, v.real);
    case 3:
      return SqlValue(std::in_place_type<std::string>, std::string(v.text));
    case 4:
      return SqlValue(std::in_place_type<std::vector<std::uint8_t>>, v.blob.begin(),
                      v.blob.end());
    default:
      return SqlValue();
  }
}

}  // namespace

SqlRows execute(Sandbox& sandbox, const std::string& sql, const std::vector<SqlValue>& params) {
  const pb::PlanSandbox* rs = internal::rust_sandbox(sandbox);
  if (!rs) {
    const std::string id = sandbox.sandbox_id();
    throw SandboxError("sandbox " + id +
                           ": SQL statements run only in a library transaction_rollback "
                           "sandbox (from a patchbox::plan::SandboxManager)",
                       id);
  }
  rust::Vec<pb::FfiSqlValue> in;
  in.reserve(params.size());
  for (const SqlValue& p : params) in.push_back(value_in(p));
  try {
    pb::FfiSqlRows r = rs->sqlite_execute(rust::Str(sql.data(), sql.size()), std::move(in));
    SqlRows out;
    out.changes = r.changes;
    out.columns.reserve(r.columns.size());
    for (const rust::String& c : r.columns) out.columns.emplace_back(std::string(c));
    const std::size_t width = r.width;
    if (width > 0) {
      out.rows.reserve(r.values.size() / width);
      for (std::size_t i = 0; i + width <= r.values.size(); i += width) {
        std::vector<SqlValue> row;
        row.reserve(width);
        for (std::size_t j = 0; j < width; ++j) row.push_back(value_out(r.values[i + j]));
        out.rows.push_back(std::move(row));
      }
    }
    return out;
  } catch (const rust::Error& e) {
    internal::rethrow(e);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorKind::Internal, e.what());
  }
}

}  // namespace plan
}  // namespace patchbox
