// The plan error classes of <patchbox/plan.hpp> (SandboxError and its subclasses) and the
// decoding of the plan bridge's "plan_<kind>" error strings (src/ffi/plan.rs) into them
// (internal::rethrow, used by internal::call in cpp/plan_internal.h).
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "patchbox/cpp/glue.h"
#include "patchbox/cpp/plan_internal.h"
#include "patchbox/plan.hpp"
#include "patchbox/src/ffi/plan.rs.h"
#include "rust/cxx.h"

namespace patchbox {
namespace plan {
namespace {

namespace pb = ::patchbox::bridge::plan;

/// Separates the message from the details in a plan bridge error (see src/ffi/plan.rs).
constexpr char kDetailSeparator = '\x1e';

std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  std::size_t start = 0;
  for (;;) {
    std::size_t at = s.find(glue::kKindSeparator, start);
    out.emplace_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos
                                                                   : at - start));
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return out;
}

}  // namespace

namespace internal {

/// Throws the exception a bridge error stands for: a plan error class for `plan_<kind>`,
/// patchbox::Error for the rest (`internal`, core kinds).
void rethrow(const rust::Error& e) {
  std::string_view what(e.what());
  std::size_t sep = what.find(glue::kKindSeparator);
  if (sep == std::string_view::npos || what.substr(0, 5) != "plan_") throw glue::from_rust(e);
  std::string_view kind = what.substr(5, sep - 5);
  std::string_view rest = what.substr(sep + 1);
  // Four detail fields, taken from the right so that a message holding the separator parses.
  std::string_view fields[4];
  for (int i = 3; i >= 0; --i) {
    std::size_t at = rest.rfind(kDetailSeparator);
    if (at == std::string_view::npos) throw Error(ErrorKind::Internal, std::string(what));
    fields[i] = rest.substr(at + 1);
    rest = rest.substr(0, at);
  }
  std::string message(rest);
  std::string id(fields[0]);
  if (kind == "creation") throw SandboxCreationError(message, id);
  if (kind == "commit") throw SandboxCommitError(message, id, split_list(fields[1]));
  if (kind == "rollback") throw SandboxRollbackError(message, id, split_list(fields[1]));
  if (kind == "state") throw SandboxStateError(message, id);
  // A registry's (cpp/strategy_registry.cpp): the missing operations in the files field.
  if (kind == "protocol_mismatch") throw ProtocolMismatchError(message, split_list(fields[1]));
  if (kind == "atomic_commit") {
    throw AtomicCommitError(message, id, split_list(fields[2]), split_list(fields[3]));
  }
  // "unexpected" (a failure that is not sandbox-level, e.g. a custom strategy's foreign
  // exception): the base class on purpose, so that no sandbox-level handler takes it for its
  // own. Also "sandbox", and any kind newer than this glue.
  throw SandboxError(message, id);
}

}  // namespace internal

using internal::call;
using internal::strings_of;

SandboxError::SandboxError(const std::string& message, std::string sandbox_id)
    : Error(ErrorKind::Plan, message), sandbox_id_(std::move(sandbox_id)) {}
SandboxError::~SandboxError() = default;

SandboxCreationError::~SandboxCreationError() = default;

SandboxCommitError::SandboxCommitError(const std::string& message, std::string sandbox_id,
                                       std::vector<std::string> files)
    : SandboxError(message, std::move(sandbox_id)), files_(std::move(files)) {}
SandboxCommitError::~SandboxCommitError() = default;

SandboxRollbackError::SandboxRollbackError(const std::string& message, std::string sandbox_id,
                                           std::vector<std::string> files)
    : SandboxError(message, std::move(sandbox_id)), files_(std::move(files)) {}
SandboxRollbackError::~SandboxRollbackError() = default;

SandboxStateError::~SandboxStateError() = default;

AtomicCommitError::AtomicCommitError(const std::string& message, std::string failed_sandbox_id,
                                     std::vector<std::string> rolled_back_ids,
                                     std::vector<std::string> failed_rollback_ids)
    : SandboxError(message, std::move(failed_sandbox_id)),
      rolled_back_(std::move(rolled_back_ids)),
      failed_(std::move(failed_rollback_ids)) {}
AtomicCommitError::~AtomicCommitError() = default;

std::vector<std::string> library_plan_error_kinds() {
  return call([] { return strings_of(pb::plan_error_kinds()); });
}

}  // namespace plan
}  // namespace patchbox
