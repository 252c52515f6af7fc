// The C++ glue of <patchbox/strategy_registry.hpp>: SandboxStrategyRegistry over the Rust
// registry (PlanRegistry, src/ffi/plan/registry.rs), shared by its copies; SandboxFactory over
// it and the linked library's built-in strategy names. SandboxManager::open(root, registry) is
// in cpp/plan_manager.cpp (it needs the manager's internals).
#include "patchbox/strategy_registry.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "patchbox/cpp/custom_strategy.h"
#include "patchbox/cpp/glue.h"
#include "patchbox/cpp/plan_internal.h"
#include "patchbox/src/ffi/plan.rs.h"
#include "rust/cxx.h"

namespace patchbox {
namespace plan {
namespace {

namespace pb = ::patchbox::bridge::plan;
using glue::bytes;

using internal::call;

}  // namespace

ProtocolMismatchError::ProtocolMismatchError(const std::string& message,
                                             std::vector<std::string> missing)
    : SandboxError(message), missing_(std::move(missing)) {}

ProtocolMismatchError::~ProtocolMismatchError() = default;

SandboxStrategyRegistry::SandboxStrategyRegistry()
    : impl_(std::make_shared<Impl>(Impl{pb::plan_registry_new()})) {}

SandboxStrategyRegistry::SandboxStrategyRegistry(
    const std::vector<std::filesystem::path>& allowed_prefixes)
    : SandboxStrategyRegistry() {
  for (const auto& p : allowed_prefixes) allow_module_prefix(p);
}

void SandboxStrategyRegistry::allow_module_prefix(const std::filesystem::path& prefix) {
  call([&] { impl_->reg->allow_module_prefix(bytes(prefix)); });
}

std::vector<std::filesystem::path> SandboxStrategyRegistry::allowed_prefixes() const {
  const rust::Vec<std::uint8_t> all = impl_->reg->allowed_prefixes();
  std::vector<std::filesystem::path> out;
  std::string cur;
  for (std::uint8_t b : all) {
    if (b == 0) {
      out.emplace_back(cur);
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(b));
    }
  }
  return out;
}

void SandboxStrategyRegistry::register_module(const std::string& name,
                                              const std::filesystem::path& module,
                                              const std::string& class_name) {
  call([&] { impl_->reg->register_module(name, bytes(module), class_name); });
}

void SandboxStrategyRegistry::register_all_from_config(
    const std::map<std::string, ModuleSpec>& configs) {
  for (const auto& [name, spec] : configs) register_module(name, spec.module, spec.class_name);
}

void SandboxStrategyRegistry::register_strategy(const std::string& name,
                                                std::shared_ptr<CustomStrategy> strategy) {
  call([&] {
    if (!strategy) throw SandboxError("register_strategy(\"" + name + "\"): no strategy");
    impl_->reg->register_strategy(
        name, std::make_unique<pb::CustomStrategyHandle>(std::move(strategy)));
  });
}

bool SandboxStrategyRegistry::has_custom_strategy(const std::string& name) const {
  return impl_->reg->has_custom_strategy(name);
}

std::vector<std::string> SandboxStrategyRegistry::list_strategies() const {
  std::vector<std::string> out;
  for (const auto& n : impl_->reg->names()) out.emplace_back(n);
  return out;
}

SandboxFactory::SandboxFactory(SandboxStrategyRegistry custom_registry)
    : registry_(std::move(custom_registry)) {}

bool SandboxFactory::has_custom_strategy(const std::string& name) const {
  return registry_.has_custom_strategy(name);
}

bool SandboxFactory::has_strategy(const std::string& name) const {
  const std::vector<std::string> built_in = library_strategy_names();
  return std::find(built_in.begin(), built_in.end(), name) != built_in.end() ||
         has_custom_strategy(name);
}

std::vector<std::string> SandboxFactory::available_strategies() const {
  std::vector<std::string> out = library_strategy_names();
  for (auto& n : registry_.list_strategies()) out.push_back(std::move(n));
  return out;
}

}  // namespace plan
}  // namespace patchbox
