// Private to the library (not installed): what the glue files of the plan bridge share
// (cpp/plan_*.cpp, cpp/checkpoint.cpp, cpp/sqlite.cpp, cpp/strategy_adapter.cpp,
// cpp/strategy_registry.cpp). rethrow is defined in cpp/plan_errors.cpp, the rest in
// cpp/plan_sandbox.cpp.
#ifndef PATCHBOX_CPP_PLAN_INTERNAL_H
#define PATCHBOX_CPP_PLAN_INTERNAL_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "patchbox/plan.hpp"
#include "patchbox/strategy_registry.hpp"
#include "patchbox/src/ffi/plan.rs.h"
#include "rust/cxx.h"

namespace patchbox {
namespace plan {

/// The Rust registry behind a SandboxStrategyRegistry (cpp/strategy_registry.cpp), shared by
/// its copies.
struct SandboxStrategyRegistry::Impl {
  rust::Box<bridge::plan::PlanRegistry> reg;  ///< The Rust half.
};

namespace internal {

/// Throws the exception a plan bridge error stands for (a SandboxError subclass for
/// `plan_<kind>`, patchbox::Error for the rest).
[[noreturn]] void rethrow(const rust::Error& e);

/// Runs @p f; a bridge error leaves as the matching exception class (rethrow), a
/// patchbox::Error as it is, any other std::exception as an Internal patchbox::Error, so
/// that no rust:: type and no foreign exception reaches the caller.
template <class F>
auto call(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const rust::Error& e) {
    rethrow(e);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorKind::Internal, e.what());
  }
}

/// The Rust sandbox behind @p sb when it is the built-in implementation; null for a user's
/// own Sandbox subclass.
const bridge::plan::PlanSandbox* rust_sandbox(const Sandbox& sb) noexcept;

/// The library sandbox over @p sb, of its strategy's class (a built-in Sandbox subclass).
std::shared_ptr<Sandbox> sandbox_of(rust::Box<bridge::plan::PlanSandbox> sb);

/// Bridge strings as std::strings.
std::vector<std::string> strings_of(const rust::Vec<rust::String>& v);

/// A bridge commit result as a CommitResult.
CommitResult result_of(const bridge::plan::FfiCommitResult& r);

/// Milliseconds since the Unix epoch as a time point.
Clock::time_point time_of(std::int64_t ms);

/// Bridge metadata as a map.
std::map<std::string, std::string> meta_of(const rust::Vec<bridge::plan::FfiPlanMeta>& v);

}  // namespace internal
}  // namespace plan
}  // namespace patchbox

#endif  // PATCHBOX_CPP_PLAN_INTERNAL_H
