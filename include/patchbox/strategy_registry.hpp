/// @file patchbox/strategy_registry.hpp
/// @brief The registry of custom sandbox strategies with its module allow-list, and the
/// factory over it: the plan executors' `SandboxStrategyRegistry` and `SandboxFactory`.
///
/// A strategy comes from the host (a patchbox::plan::CustomStrategy object,
/// register_strategy()) or from a shared library (register_module(), the C++ form of the
/// documented `register(name, module, class)`): the library is loaded only when its canonical
/// path is under one of the registry's allowed prefixes (directories; none by default, so a
/// registry loads no code unless the host says where from), and its table must have all nine
/// operations of the protocol, else ProtocolMismatchError names the missing ones. The C ABI a
/// module exports (`patchbox_strategy_<class>`) is described in `docs/plan.md` ("Custom
/// strategies") and the Rust docs of `patchbox::plan::custom::native`.
/// A SandboxManager opened over a registry (SandboxManager::open(root, registry)) makes
/// sandboxes of its strategies.
///
/// @code
/// namespace plan = patchbox::plan;
/// const std::filesystem::path lib = "/opt/mycompany/strategies";
/// plan::SandboxStrategyRegistry registry({"/opt/cleveragents/strategies", lib});
/// registry.register_module("my_strategy", lib / "libcustom.so", "MyCustomSandbox");
/// registry.register_all_from_config({
///     {"redis_sandbox", {lib / "libredis.so", "RedisSandbox"}},
///     {"s3_sandbox", {lib / "libs3.so", "S3Sandbox"}},
/// });
/// plan::SandboxFactory factory(registry);
/// if (factory.has_custom_strategy("redis_sandbox")) { /* ... */ }
/// auto mgr = plan::SandboxManager::open(root, registry);
/// auto sb = mgr.get_or_create_sandbox("plan-1", "cache", "/srv/cache", "redis_sandbox");
/// @endcode
#ifndef PATCHBOX_STRATEGY_REGISTRY_HPP
#define PATCHBOX_STRATEGY_REGISTRY_HPP

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "patchbox/plan.hpp"

/// patchbox's C++ API.
namespace patchbox {
/// Plan sandboxes (the Rust `patchbox::plan` layer).
namespace plan {

/// A strategy lacks operations of the nine-operation protocol; nothing was registered.
class ProtocolMismatchError : public SandboxError {
 public:
  /// The error whose what() is @p message, naming the @p missing operations.
  ProtocolMismatchError(const std::string& message, std::vector<std::string> missing);
  /// Out of line, as the base's.
  ~ProtocolMismatchError() override;
  /// Copyable.
  ProtocolMismatchError(const ProtocolMismatchError&) = default;
  /// Copy assignment.
  ProtocolMismatchError& operator=(const ProtocolMismatchError&) = default;
  /// The operations the strategy lacks, in protocol order (`create`, `read`, `write`, `diff`,
  /// `commit`, `rollback`, `checkpoint`, `restore_checkpoint`, `cleanup`).
  const std::vector<std::string>& missing() const noexcept { return missing_; }

 private:
  std::vector<std::string> missing_;
};

/// Where a strategy of a configuration comes from (register_all_from_config()): the
/// documented `{"module": ..., "class": ...}`.
struct ModuleSpec {
  std::filesystem::path module;  ///< The shared library.
  std::string class_name;        ///< The class: the library exports `patchbox_strategy_<class>`.
};

/// Custom strategies by name, and the directories their shared libraries may be loaded from.
///
/// Copies share one registry (a registration through any copy is seen by all, and by the
/// managers opened over it). Thread-safe. Names are 1 to 64 of `A-Z a-z 0-9 _ - .`, neither a
/// built-in strategy's nor registered before.
class SandboxStrategyRegistry {
 public:
  /// A registry that allows no module (strategy objects can still be registered).
  SandboxStrategyRegistry();
  /// A registry that loads modules only from under @p allowed_prefixes (each canonicalized,
  /// so a symlink or `..` in a module's path cannot lead out of it).
  /// @throws SandboxError when a prefix cannot be resolved.
  explicit SandboxStrategyRegistry(const std::vector<std::filesystem::path>& allowed_prefixes);

  /// Allows modules under @p prefix too.
  /// @throws SandboxError when @p prefix cannot be resolved.
  void allow_module_prefix(const std::filesystem::path& prefix);
  /// The allowed prefixes (canonical), in the order allowed.
  std::vector<std::filesystem::path> allowed_prefixes() const;

  /// Registers the strategy @p class_name of the shared library @p module as @p name: the
  /// documented `register(name, module, class)` (`register` is a C++ keyword).
  /// @throws SandboxError when @p module is under no allowed prefix (nothing is loaded), cannot
  ///   be loaded or lacks `patchbox_strategy_<class_name>`, or @p name is taken or malformed;
  ///   ProtocolMismatchError when its table lacks operations.
  void register_module(const std::string& name, const std::filesystem::path& module,
                       const std::string& class_name);
  /// Registers every `name -> {module, class_name}` of @p configs, in name order; stops at the
  /// first error, which it throws (those registered before it stay registered).
  /// @throws as register_module().
  void register_all_from_config(const std::map<std::string, ModuleSpec>& configs);
  /// Registers @p strategy (a host object; no module, so no prefix check) as @p name; it
  /// serves every sandbox of the strategy.
  /// @throws SandboxError when @p name is taken or malformed, or @p strategy is null.
  void register_strategy(const std::string& name, std::shared_ptr<CustomStrategy> strategy);

  /// Whether a strategy is registered under @p name.
  bool has_custom_strategy(const std::string& name) const;
  /// The registered names, sorted.
  std::vector<std::string> list_strategies() const;

 private:
  friend class SandboxManager;
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

/// The strategies a manager can make: the built-in ones and a registry's custom ones (the
/// documented `SandboxFactory(custom_registry=registry)`).
class SandboxFactory {
 public:
  /// A factory over @p custom_registry (shared; default: an empty registry of its own).
  explicit SandboxFactory(SandboxStrategyRegistry custom_registry = SandboxStrategyRegistry());
  /// Whether @p name is a custom strategy of the registry.
  bool has_custom_strategy(const std::string& name) const;
  /// Whether @p name is a strategy a manager over the registry can make (built in or custom).
  bool has_strategy(const std::string& name) const;
  /// The built-in strategies (the linked library's, in its order), then the custom ones,
  /// sorted.
  std::vector<std::string> available_strategies() const;
  /// The registry.
  const SandboxStrategyRegistry& custom_registry() const noexcept { return registry_; }

 private:
  SandboxStrategyRegistry registry_;
};

}  // namespace plan
}  // namespace patchbox

#endif  // PATCHBOX_STRATEGY_REGISTRY_HPP
