// SandboxManager of <patchbox/plan.hpp> over the plan bridge's manager (src/ffi/plan.rs):
// one C++ sandbox object per Rust sandbox while someone holds it, and the plan-wide
// operations (commit_all, rollback_all, cleanup_all, resource boundaries, custom strategies).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
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
using glue::bytes;
using glue::path_of;
using internal::call;
using internal::result_of;
using internal::sandbox_of;
using internal::strings_of;

/// @p reg as the bridge's resources.
std::vector<pb::FfiResource> registry_in(const ResourceRegistry& reg) {
  std::vector<pb::FfiResource> out;
  out.reserve(reg.resources.size());
  for (const Resource& r : reg.resources) {
    pb::FfiResource f;
    f.id = r.id;
    f.kind = r.kind;
    f.path = glue::to_vec(r.path.native());
    f.has_parent = r.parent.has_value();
    f.parent = r.parent.value_or("");
    f.has_strategy = r.strategy.has_value();
    f.strategy = r.strategy.value_or("");
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

struct SandboxManager::Impl {
  explicit Impl(rust::Box<pb::PlanMgr> m) : mgr(std::move(m)), root(path_of(mgr->root())) {}
  // The Rust drop (sandboxes without work cleaned up) runs here, under catch_unwind.
  ~Impl() { mgr->close(); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  /// One C++ object per Rust sandbox while someone holds it: the same shared_ptr for every
  /// caller (get_or_create_sandbox from many threads, get_sandbox, list_sandboxes).
  std::shared_ptr<Sandbox> wrap(rust::Box<pb::PlanSandbox> sb) {
    if (!sb->is_some()) return nullptr;
    std::string id(sb->sandbox_id());
    std::lock_guard<std::mutex> lock(mu);
    std::weak_ptr<Sandbox>& slot = wrappers[id];
    if (auto held = slot.lock()) return held;
    std::shared_ptr<Sandbox> made = sandbox_of(std::move(sb));
    slot = made;
    // Forget the wrappers nobody holds any more (the map stays as small as the live set).
    for (auto it = wrappers.begin(); it != wrappers.end();) {
      it = it->second.expired() ? wrappers.erase(it) : std::next(it);
    }
    return made;
  }

  rust::Box<pb::PlanMgr> mgr;
  const std::filesystem::path root;
  std::mutex mu;
  std::map<std::string, std::weak_ptr<Sandbox>> wrappers;
};

SandboxManager::SandboxManager(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SandboxManager::~SandboxManager() = default;
SandboxManager::SandboxManager(SandboxManager&&) noexcept = default;
SandboxManager& SandboxManager::operator=(SandboxManager&&) noexcept = default;

SandboxManager::Impl& SandboxManager::impl() const {
  if (!impl_) throw Error(ErrorKind::Internal, "use of a moved-from patchbox::plan::SandboxManager");
  return *impl_;
}

SandboxManager SandboxManager::open(const std::filesystem::path& root) {
  return call([&] { return SandboxManager(std::make_unique<Impl>(pb::plan_open(bytes(root)))); });
}

SandboxManager SandboxManager::open(const std::filesystem::path& root,
                                    const SandboxStrategyRegistry& registry) {
  return call([&] {
    return SandboxManager(
        std::make_unique<Impl>(pb::plan_open_with_registry(bytes(root), *registry.impl_->reg)));
  });
}

const std::filesystem::path& SandboxManager::root() const { return impl().root; }

std::shared_ptr<Sandbox> SandboxManager::get_or_create_sandbox(
    const std::string& plan_id, const std::string& resource_id,
    const std::filesystem::path& original_path, const std::string& strategy) {
  return call([&] {
    Impl& im = impl();
    return im.wrap(
        im.mgr->get_or_create_sandbox(plan_id, resource_id, bytes(original_path), strategy));
  });
}

std::shared_ptr<Sandbox> SandboxManager::get_sandbox(const std::string& plan_id,
                                                     const std::string& resource_id) const {
  return call([&] {
    Impl& im = impl();
    return im.wrap(im.mgr->get_sandbox(plan_id, resource_id));
  });
}

std::vector<std::shared_ptr<Sandbox>> SandboxManager::list_sandboxes(
    const std::string& plan_id) const {
  return call([&] {
    Impl& im = impl();
    rust::Box<pb::PlanSandboxList> list = im.mgr->list_sandboxes(plan_id);
    std::vector<std::shared_ptr<Sandbox>> out;
    out.reserve(list->len());
    for (std::size_t i = 0; i < list->len(); ++i) {
      if (auto sb = im.wrap(list->get(i))) out.push_back(std::move(sb));
    }
    return out;
  });
}

std::vector<std::string> SandboxManager::list_plans() const {
  return call([&] { return strings_of(impl().mgr->list_plans()); });
}

std::string SandboxManager::plans_json(const std::optional<std::string>& plan_id) const {
  return call([&] {
    return std::string(impl().mgr->plans_json(plan_id.has_value(), plan_id.value_or("")));
  });
}

std::string SandboxManager::diff_json(const std::string& plan_id) const {
  return call([&] { return std::string(impl().mgr->diff_json(plan_id)); });
}

std::vector<CommitResult> SandboxManager::commit_all(const std::string& plan_id) {
  return call([&] {
    std::vector<CommitResult> out;
    for (const auto& r : impl().mgr->commit_all(plan_id)) out.push_back(result_of(r));
    return out;
  });
}

std::vector<CommitResult> SandboxManager::commit_all(const std::string& plan_id,
                                                     const Provenance& provenance) {
  return call([&] {
    pb::FfiCommitProvenance p;
    for (const auto& w : provenance.command) p.command.push_back(rust::String(w));
    p.has_cwd = provenance.cwd.has_value();
    if (provenance.cwd) {
      const std::string& c = provenance.cwd->native();
      for (char ch : c) p.cwd.push_back(static_cast<std::uint8_t>(ch));
    }
    p.has_exit_status = provenance.exit_status.has_value();
    p.exit_status = provenance.exit_status.value_or(0);
    p.has_started = provenance.started_ms.has_value();
    p.started_ms = provenance.started_ms.value_or(0);
    p.has_ended = provenance.ended_ms.has_value();
    p.ended_ms = provenance.ended_ms.value_or(0);
    std::vector<CommitResult> out;
    for (const auto& r : impl().mgr->commit_all_as(plan_id, p)) out.push_back(result_of(r));
    return out;
  });
}

void SandboxManager::rollback_all(const std::string& plan_id) {
  call([&] { impl().mgr->rollback_all(plan_id); });
}

void SandboxManager::cleanup_all(const std::string& plan_id) {
  call([&] { impl().mgr->cleanup_all(plan_id); });
}

std::size_t SandboxManager::cleanup_abandoned() {
  return call([&] { return impl().mgr->cleanup_abandoned(); });
}

std::string SandboxManager::resolve_sandbox_key(const std::string& resource_id,
                                                const ResourceRegistry& registry) {
  return call([&] {
    std::vector<pb::FfiResource> reg = registry_in(registry);
    return std::string(impl().mgr->resolve_sandbox_key(
        resource_id, rust::Slice<const pb::FfiResource>(reg.data(), reg.size())));
  });
}

ResourceSandbox SandboxManager::get_or_create_sandbox_for_resource(
    const std::string& plan_id, const std::string& resource_id, const ResourceRegistry& registry) {
  return call([&] {
    Impl& im = impl();
    std::vector<pb::FfiResource> reg = registry_in(registry);
    rust::Vec<std::uint8_t> prefix;
    auto sb = im.mgr->get_or_create_sandbox_for_resource(
        plan_id, resource_id, rust::Slice<const pb::FfiResource>(reg.data(), reg.size()), prefix);
    ResourceSandbox out;
    out.sandbox = im.wrap(std::move(sb));
    out.prefix = path_of(prefix);
    return out;
  });
}

void SandboxManager::clear_boundary_cache() { impl().mgr->clear_boundary_cache(); }

void SandboxManager::register_strategy(const std::string& name,
                                       std::shared_ptr<CustomStrategy> strategy) {
  call([&] {
    if (!strategy) throw SandboxError("register_strategy(\"" + name + "\"): no strategy");
    impl().mgr->register_strategy(
        name, std::make_unique<pb::CustomStrategyHandle>(std::move(strategy)));
  });
}

bool SandboxManager::has_custom_strategy(const std::string& name) const {
  return impl().mgr->has_custom_strategy(name);
}

}  // namespace plan
}  // namespace patchbox
