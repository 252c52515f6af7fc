// The sandbox lifecycle of <patchbox/plan.hpp>: the Status table (names, allowed
// transitions), DiffOp's names, SandboxDiff::paths, and the Rust library's own tables
// (library_status_names, library_can_transition, library_strategy_names) for the tests that
// hold the two sides to each other.
#include <optional>
#include <string>
#include <vector>

#include "patchbox/cpp/plan_internal.h"
#include "patchbox/plan.hpp"
#include "patchbox/src/ffi/plan.rs.h"
#include "rust/cxx.h"

namespace patchbox {
namespace plan {
namespace {

namespace pb = ::patchbox::bridge::plan;

/// Every Status with its name, in the Rust library's order.
struct StatusName {
  Status status;
  const char* name;
};
constexpr StatusName kStatuses[] = {
    {Status::Pending, "pending"},     {Status::Created, "created"},
    {Status::Active, "active"},       {Status::Committed, "committed"},
    {Status::RolledBack, "rolled_back"}, {Status::CleanedUp, "cleaned_up"},
    {Status::Errored, "errored"},
};

}  // namespace

using internal::call;
using internal::strings_of;

bool can_transition(Status from, Status to) noexcept {
  switch (from) {
    case Status::Pending:
      return to == Status::Created;
    case Status::Created:
      return to == Status::Active || to == Status::Errored;
    case Status::Active:
      return to == Status::Committed || to == Status::RolledBack || to == Status::Errored;
    case Status::Committed:
      return to == Status::CleanedUp || to == Status::RolledBack;
    case Status::RolledBack:
      return to == Status::Active || to == Status::CleanedUp;
    case Status::Errored:
      return to == Status::CleanedUp;
    case Status::CleanedUp:
      return false;
  }
  return false;
}

void assert_transition(Status from, Status to) {
  if (!can_transition(from, to)) {
    throw SandboxStateError(std::string("sandbox: invalid transition ") + to_string(from) +
                            " -> " + to_string(to));
  }
}

const char* to_string(Status status) noexcept {
  for (const auto& s : kStatuses) {
    if (s.status == status) return s.name;
  }
  return "unknown";
}

std::optional<Status> status_from_string(const std::string& name) noexcept {
  for (const auto& s : kStatuses) {
    if (name == s.name) return s.status;
  }
  return std::nullopt;
}

std::vector<std::string> library_status_names() {
  return call([] { return strings_of(pb::plan_status_names()); });
}

bool library_can_transition(Status from, Status to) {
  return pb::plan_can_transition(to_string(from), to_string(to));
}

std::vector<std::string> library_strategy_names() {
  return call([] { return strings_of(pb::plan_strategy_names()); });
}

const char* to_string(DiffOp op) noexcept {
  switch (op) {
    case DiffOp::Added:
      return "added";
    case DiffOp::Modified:
      return "modified";
    case DiffOp::Deleted:
      return "deleted";
  }
  return "unknown";
}

std::vector<std::string> SandboxDiff::paths(DiffOp op) const {
  std::vector<std::string> out;
  for (const auto& e : entries) {
    if (e.operation == op) out.push_back(e.path);
  }
  return out;
}

}  // namespace plan
}  // namespace patchbox
