// The C++ side of a user's CustomStrategy under the plan bridge (src/ffi/plan/custom.rs):
// CustomStrategyHandle's methods, which the Rust side calls, each turning whatever the
// strategy throws into an error message (the handle is declared in cpp/custom_strategy.h).
#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "patchbox/cpp/custom_strategy.h"
#include "patchbox/cpp/glue.h"
#include "patchbox/cpp/plan_internal.h"
#include "patchbox/plan.hpp"
#include "patchbox/src/ffi/plan.rs.h"
#include "rust/cxx.h"

namespace patchbox {
namespace plan {

CustomStrategy::~CustomStrategy() = default;

}  // namespace plan

// ---- the Rust side's calls into a CustomStrategy ---------------------------------------------

namespace bridge {
namespace plan {
namespace {

namespace pp = ::patchbox::plan;

pp::SandboxRef ref_of(const FfiSandboxRef& r) {
  pp::SandboxRef out;
  out.sandbox_id = std::string(r.sandbox_id);
  out.plan_id = std::string(r.plan_id);
  out.resource_id = std::string(r.resource_id);
  out.created_at = pp::internal::time_of(r.created_at_ms);
  out.metadata = pp::internal::meta_of(r.metadata);
  return out;
}

std::string string_of(rust::Slice<const std::uint8_t> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

/// Marks, at the start of @p err, a failure that is not a sandbox-level one (read by the
/// bridge: `commit_all` raises AtomicCommitError for it instead of returning a failed result).
constexpr const char* kUnexpected = "\x1funexpected\x1f";

/// Runs @p f; whatever it throws is caught, its message put in @p err, and false returned. A
/// plan::SandboxError is the strategy's own, anticipated failure; anything else is marked
/// unexpected.
template <class F>
bool guard(rust::String& err, F&& f) noexcept {
  try {
    f();
    return true;
  } catch (const pp::SandboxError& e) {
    try {
      err = rust::String::lossy(e.what());
    } catch (...) {
    }
  } catch (const std::exception& e) {
    try {
      err = rust::String::lossy(std::string(kUnexpected) + e.what());
    } catch (...) {
    }
  } catch (...) {
    try {
      err = std::string(kUnexpected) +
            "the C++ strategy threw an exception that is not a std::exception";
    } catch (...) {
    }
  }
  return false;
}

}  // namespace

bool CustomStrategyHandle::create(const FfiSandboxRef& sandbox,
                                  rust::Slice<const std::uint8_t> original,
                                  rust::Vec<FfiPlanMeta>& metadata, rust::String& err) const noexcept {
  return guard(err, [&] {
    auto m = s_->create(ref_of(sandbox), std::filesystem::path(string_of(original)));
    for (const auto& [k, v] : m) metadata.push_back(FfiPlanMeta{k, v});
  });
}

bool CustomStrategyHandle::read(const FfiSandboxRef& sandbox, rust::Str path, bool& found,
                                rust::Vec<std::uint8_t>& data, rust::String& err) const noexcept {
  return guard(err, [&] {
    auto d = s_->read(ref_of(sandbox), std::string(path));
    found = d.has_value();
    if (d) data = glue::to_vec(*d);
  });
}

bool CustomStrategyHandle::write(const FfiSandboxRef& sandbox, rust::Str path,
                                 rust::Slice<const std::uint8_t> data,
                                 rust::String& err) const noexcept {
  return guard(err, [&] { s_->write(ref_of(sandbox), std::string(path), string_of(data)); });
}

bool CustomStrategyHandle::diff(const FfiSandboxRef& sandbox, FfiDiffView& view,
                                rust::String& err) const noexcept {
  return guard(err, [&] {
    pp::DiffView v = s_->diff(ref_of(sandbox));
    view.sandbox_id = v.sandbox_id;
    view.summary = v.summary;
    for (const auto& e : v.entries) {
      FfiDiffEntry f;
      f.path = e.path;
      f.operation = pp::to_string(e.operation);
      f.has_before = e.before.has_value();
      if (e.before) f.before = glue::to_vec(*e.before);
      f.has_after = e.after.has_value();
      if (e.after) f.after = glue::to_vec(*e.after);
      view.entries.push_back(std::move(f));
    }
  });
}

bool CustomStrategyHandle::commit(const FfiSandboxRef& sandbox, bool has_message, rust::Str message,
                                  bool& has_ref, rust::String& commit_ref,
                                  rust::String& err) const noexcept {
  return guard(err, [&] {
    std::optional<std::string> msg;
    if (has_message) msg = std::string(message);
    auto r = s_->commit(ref_of(sandbox), msg);
    has_ref = r.has_value();
    if (r) commit_ref = *r;
  });
}

bool CustomStrategyHandle::rollback(const FfiSandboxRef& sandbox, bool after_commit,
                                    rust::String& err) const noexcept {
  return guard(err, [&] { s_->rollback(ref_of(sandbox), after_commit); });
}

bool CustomStrategyHandle::checkpoint(const FfiSandboxRef& sandbox, rust::Str checkpoint_id,
                                      rust::String& err) const noexcept {
  return guard(err, [&] { s_->checkpoint(ref_of(sandbox), std::string(checkpoint_id)); });
}

bool CustomStrategyHandle::restore_checkpoint(const FfiSandboxRef& sandbox,
                                              rust::Str checkpoint_id,
                                              rust::String& err) const noexcept {
  return guard(err, [&] { s_->restore_checkpoint(ref_of(sandbox), std::string(checkpoint_id)); });
}

bool CustomStrategyHandle::cleanup(const FfiSandboxRef& sandbox, rust::String& err) const noexcept {
  return guard(err, [&] { s_->cleanup(ref_of(sandbox)); });
}

bool CustomStrategyHandle::is_rollbackable() const noexcept {
  try {
    return s_->is_rollbackable();
  } catch (...) {
    return false;
  }
}

}  // namespace plan
}  // namespace bridge
}  // namespace patchbox
