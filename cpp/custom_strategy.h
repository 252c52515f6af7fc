// Private to the library (not installed): the C++ side of a custom strategy for the plan
// bridge (src/ffi/plan.rs). The generated header `patchbox/src/ffi/plan.rs.h` includes this
// file before it defines the shared structs, so they are only forward-declared here; the
// methods are defined in cpp/plan_custom_strategy.cpp.
#ifndef PATCHBOX_CPP_CUSTOM_STRATEGY_H
#define PATCHBOX_CPP_CUSTOM_STRATEGY_H

#include <cstdint>
#include <memory>

#include "patchbox/plan.hpp"
#include "rust/cxx.h"

namespace patchbox {
namespace bridge {
namespace plan {

struct FfiSandboxRef;
struct FfiDiffView;
struct FfiPlanMeta;

/// Holds a user's patchbox::plan::CustomStrategy for the Rust side. Every method is noexcept:
/// whatever the strategy throws is caught, its message put in @p err, and false returned, so
/// no exception ever unwinds into Rust.
class CustomStrategyHandle {
 public:
  explicit CustomStrategyHandle(std::shared_ptr<::patchbox::plan::CustomStrategy> s)
      : s_(std::move(s)) {}
  bool create(const FfiSandboxRef& sandbox, rust::Slice<const std::uint8_t> original,
              rust::Vec<FfiPlanMeta>& metadata, rust::String& err) const noexcept;
  bool read(const FfiSandboxRef& sandbox, rust::Str path, bool& found,
            rust::Vec<std::uint8_t>& data, rust::String& err) const noexcept;
  bool write(const FfiSandboxRef& sandbox, rust::Str path, rust::Slice<const std::uint8_t> data,
             rust::String& err) const noexcept;
  bool diff(const FfiSandboxRef& sandbox, FfiDiffView& view, rust::String& err) const noexcept;
  bool commit(const FfiSandboxRef& sandbox, bool has_message, rust::Str message, bool& has_ref,
              rust::String& commit_ref, rust::String& err) const noexcept;
  bool rollback(const FfiSandboxRef& sandbox, bool after_commit, rust::String& err) const noexcept;
  bool checkpoint(const FfiSandboxRef& sandbox, rust::Str checkpoint_id,
                  rust::String& err) const noexcept;
  bool restore_checkpoint(const FfiSandboxRef& sandbox, rust::Str checkpoint_id,
                          rust::String& err) const noexcept;
  bool cleanup(const FfiSandboxRef& sandbox, rust::String& err) const noexcept;
  bool is_rollbackable() const noexcept;

 private:
  std::shared_ptr<::patchbox::plan::CustomStrategy> s_;
};

}  // namespace plan
}  // namespace bridge
}  // namespace patchbox

#endif  // PATCHBOX_CPP_CUSTOM_STRATEGY_H
