// The C++ glue of <patchbox/strategy_adapter.hpp>: BuiltInSandboxStrategyAdapter over the
// Rust BuiltInAdapter (PlanAdapter, src/ffi/plan/adapter.rs), with the references and diffs
// converted at the boundary.
#include "patchbox/strategy_adapter.hpp"

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <utility>

#include "patchbox/cpp/glue.h"
#include "patchbox/cpp/plan_internal.h"
#include "patchbox/src/ffi/plan.rs.h"
#include "rust/cxx.h"

namespace patchbox {
namespace plan {
namespace {

namespace pb = ::patchbox::bridge::plan;
using glue::bytes;
using glue::str_of;

using internal::call;

pb::FfiSandboxRef ref_in(const SandboxRef& r) {
  pb::FfiSandboxRef out;
  out.sandbox_id = r.sandbox_id;
  out.plan_id = r.plan_id;
  out.resource_id = r.resource_id;
  out.created_at_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(r.created_at.time_since_epoch())
          .count();
  for (const auto& [k, v] : r.metadata) out.metadata.push_back(pb::FfiPlanMeta{k, v});
  return out;
}

SandboxRef ref_of(const pb::FfiSandboxRef& r) {
  SandboxRef out;
  out.sandbox_id = std::string(r.sandbox_id);
  out.plan_id = std::string(r.plan_id);
  out.resource_id = std::string(r.resource_id);
  out.created_at = internal::time_of(r.created_at_ms);
  out.metadata = internal::meta_of(r.metadata);
  return out;
}

DiffEntry entry_of(const pb::FfiDiffEntry& e) {
  DiffEntry out;
  out.path = std::string(e.path);
  const std::string_view op(e.operation.data(), e.operation.size());
  out.operation = op == "added"     ? DiffOp::Added
                  : op == "deleted" ? DiffOp::Deleted
                                    : DiffOp::Modified;
  if (e.has_before) out.before = str_of(e.before);
  if (e.has_after) out.after = str_of(e.after);
  return out;
}

}  // namespace

struct BuiltInSandboxStrategyAdapter::Impl {
  rust::Box<pb::PlanAdapter> adapter;  ///< The Rust half.
};

BuiltInSandboxStrategyAdapter::BuiltInSandboxStrategyAdapter(const std::string& strategy_name,
                                                             const std::filesystem::path& root)
    : impl_(call([&] {
        return std::make_unique<Impl>(Impl{pb::plan_adapter_new(bytes(root), strategy_name)});
      })) {}

BuiltInSandboxStrategyAdapter::~BuiltInSandboxStrategyAdapter() = default;
BuiltInSandboxStrategyAdapter::BuiltInSandboxStrategyAdapter(
    BuiltInSandboxStrategyAdapter&&) noexcept = default;
BuiltInSandboxStrategyAdapter& BuiltInSandboxStrategyAdapter::operator=(
    BuiltInSandboxStrategyAdapter&&) noexcept = default;

BuiltInSandboxStrategyAdapter::Impl& BuiltInSandboxStrategyAdapter::impl() const {
  if (!impl_) throw Error(ErrorKind::Internal, "use of a moved-from BuiltInSandboxStrategyAdapter");
  return *impl_;
}

std::string BuiltInSandboxStrategyAdapter::strategy_name() const {
  return std::string(impl().adapter->strategy_name());
}

SandboxRef BuiltInSandboxStrategyAdapter::create(const std::string& plan_id,
                                                 const Resource& resource) {
  return call([&] {
    return ref_of(impl().adapter->create(plan_id, resource.id, bytes(resource.path)));
  });
}

std::optional<std::string> BuiltInSandboxStrategyAdapter::read(const SandboxRef& ref,
                                                               const std::string& path) {
  return call([&]() -> std::optional<std::string> {
    bool found = false;
    rust::Vec<std::uint8_t> data = impl().adapter->read(ref_in(ref), path, found);
    if (!found) return std::nullopt;
    return str_of(data);
  });
}

DiffEntry BuiltInSandboxStrategyAdapter::write(const SandboxRef& ref, const std::string& path,
                                               const std::string& content) {
  return call([&] { return entry_of(impl().adapter->write(ref_in(ref), path, bytes(content))); });
}

DiffView BuiltInSandboxStrategyAdapter::diff(const SandboxRef& ref) {
  return call([&] {
    pb::FfiDiffView v = impl().adapter->diff(ref_in(ref));
    DiffView out;
    out.sandbox_id = std::string(v.sandbox_id);
    out.summary = std::string(v.summary);
    for (const auto& e : v.entries) out.entries.push_back(entry_of(e));
    return out;
  });
}

std::optional<std::string> BuiltInSandboxStrategyAdapter::commit(
    const SandboxRef& ref, const std::optional<std::string>& message) {
  return call([&]() -> std::optional<std::string> {
    bool has_ref = false;
    rust::String c =
        impl().adapter->commit(ref_in(ref), message.has_value(), message.value_or(""), has_ref);
    if (!has_ref) return std::nullopt;
    return std::string(c);
  });
}

void BuiltInSandboxStrategyAdapter::rollback(const SandboxRef& ref, bool after_commit) {
  call([&] { impl().adapter->rollback(ref_in(ref), after_commit); });
}

void BuiltInSandboxStrategyAdapter::checkpoint(const SandboxRef& ref,
                                               const std::string& checkpoint_id) {
  call([&] { impl().adapter->checkpoint(ref_in(ref), checkpoint_id); });
}

void BuiltInSandboxStrategyAdapter::restore_checkpoint(const SandboxRef& ref,
                                                       const std::string& checkpoint_id) {
  call([&] { impl().adapter->restore_checkpoint(ref_in(ref), checkpoint_id); });
}

void BuiltInSandboxStrategyAdapter::cleanup(const SandboxRef& ref) {
  call([&] { impl().adapter->cleanup(ref_in(ref)); });
}

bool BuiltInSandboxStrategyAdapter::is_rollbackable() const {
  return impl().adapter->is_rollbackable();
}

}  // namespace plan
}  // namespace patchbox
