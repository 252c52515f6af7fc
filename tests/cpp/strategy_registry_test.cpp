// <patchbox/strategy_registry.hpp>, from the plan executors' custom-strategy page, one test
// per documented statement: config-driven registration (single and batch), factory
// integration, protocol validation at registration, and the security rule (modules load only
// from under an allowed prefix). The module is tests/fixtures/custom_strategy.c, built by CMake
// into a directory of its own (PATCHBOX_TEST_STRATEGY_MODULE): its class `full` has the nine
// operations (a fixed diff, commit ref `c-1`), `partial` lacks diff and checkpoint.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <patchbox/plan.hpp>
#include <patchbox/strategy_registry.hpp>

#include "test_util.hpp"

#ifndef PATCHBOX_TEST_STRATEGY_MODULE
#error "PATCHBOX_TEST_STRATEGY_MODULE (the fixture module's path) must be defined"
#endif

namespace {

namespace fs = std::filesystem;
namespace plan = patchbox::plan;
using testutil::contains;
using testutil::TempDir;

const fs::path kModule = PATCHBOX_TEST_STRATEGY_MODULE;

fs::path module_dir() { return fs::canonical(kModule).parent_path(); }

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

/// A strategy object of the host's own (no module): keys in memory.
class MemoryStrategy : public plan::CustomStrategy {
 public:
  std::map<std::string, std::string> create(const plan::SandboxRef&, const fs::path&) override {
    return {};
  }
  std::optional<std::string> read(const plan::SandboxRef&, const std::string& k) override {
    auto it = data.find(k);
    if (it == data.end()) return std::nullopt;
    return it->second;
  }
  void write(const plan::SandboxRef&, const std::string& k, const std::string& v) override {
    data[k] = v;
  }
  plan::DiffView diff(const plan::SandboxRef& sb) override {
    plan::DiffView v;
    v.sandbox_id = sb.sandbox_id;
    return v;
  }
  std::optional<std::string> commit(const plan::SandboxRef&,
                                    const std::optional<std::string>&) override {
    return "memory";
  }
  void rollback(const plan::SandboxRef&, bool) override {}
  void checkpoint(const plan::SandboxRef&, const std::string&) override {}
  void restore_checkpoint(const plan::SandboxRef&, const std::string&) override {}
  void cleanup(const plan::SandboxRef&) override {}
  std::map<std::string, std::string> data;
};

// ---- Security: "Module imports are restricted to a configurable prefix allowlist" -----------

TEST(StrategyRegistry, ByDefaultNoModuleIsAllowedAndNothingIsLoaded) {
  plan::SandboxStrategyRegistry registry;
  EXPECT_TRUE(registry.allowed_prefixes().empty());
  try {
    registry.register_module("my_strategy", kModule, "full");
    ADD_FAILURE() << "a registry that allows nothing loaded a module";
  } catch (const plan::SandboxError& e) {
    EXPECT_TRUE(contains(e.what(), "not allowed")) << e.what();
  }
  EXPECT_FALSE(registry.has_custom_strategy("my_strategy"));
}

TEST(StrategyRegistry, OnlyModulesUnderAnAllowedPrefixAreLoaded) {
  TempDir elsewhere("pb-reg");
  plan::SandboxStrategyRegistry registry({elsewhere.path()});
  EXPECT_EQ(registry.allowed_prefixes(), std::vector<fs::path>{fs::canonical(elsewhere.path())});
  try {
    registry.register_module("my_strategy", kModule, "full");
    ADD_FAILURE() << "a module outside the allowed prefixes was loaded";
  } catch (const plan::SandboxError& e) {
    EXPECT_TRUE(contains(e.what(), "not allowed")) << e.what();
    EXPECT_TRUE(contains(e.what(), fs::canonical(elsewhere.path()).string())) << e.what();
  }
  // A link inside the allowed directory leading to the module outside it is still outside:
  // prefixes are compared on canonical paths.
  fs::create_symlink(kModule, elsewhere / "libcustom.so");
  EXPECT_THROW(registry.register_module("linked", elsewhere / "libcustom.so", "full"),
               plan::SandboxError);
  EXPECT_TRUE(registry.list_strategies().empty());

  registry.allow_module_prefix(module_dir());
  registry.register_module("my_strategy", kModule, "full");
  EXPECT_TRUE(registry.has_custom_strategy("my_strategy"));
}

// ---- Config-driven registration ---------------------------------------------------------------

TEST(StrategyRegistry, SingleRegistrationMakesTheNameAvailable) {
  plan::SandboxStrategyRegistry registry({module_dir()});
  registry.register_module("my_strategy", kModule, "full");
  EXPECT_TRUE(registry.has_custom_strategy("my_strategy"));
  EXPECT_EQ(registry.list_strategies(), std::vector<std::string>{"my_strategy"});
  // A class the module does not export is refused, naming its symbol.
  try {
    registry.register_module("ghost", kModule, "NoSuchClass");
    ADD_FAILURE() << "no exception";
  } catch (const plan::SandboxError& e) {
    EXPECT_TRUE(contains(e.what(), "patchbox_strategy_NoSuchClass")) << e.what();
  }
  // The name is taken now, and a built-in strategy's name never is available.
  EXPECT_THROW(registry.register_module("my_strategy", kModule, "full"), plan::SandboxError);
  EXPECT_THROW(registry.register_module("copy_on_write", kModule, "full"), plan::SandboxError);
}

TEST(StrategyRegistry, BatchRegistrationFromConfigRegistersEveryEntry) {
  plan::SandboxStrategyRegistry registry({module_dir()});
  registry.register_all_from_config({
      {"redis_sandbox", {kModule, "full"}},
      {"s3_sandbox", {kModule, "full"}},
  });
  EXPECT_EQ(registry.list_strategies(), (std::vector<std::string>{"redis_sandbox", "s3_sandbox"}));
}

TEST(StrategyRegistry, BatchRegistrationStopsAtTheFirstErrorKeepingThoseBefore) {
  plan::SandboxStrategyRegistry registry({module_dir()});
  // Name order: "a_ok" is registered, "b_bad" fails, "c_never" is not reached.
  EXPECT_THROW(registry.register_all_from_config({
                   {"a_ok", {kModule, "full"}},
                   {"b_bad", {kModule, "partial"}},
                   {"c_never", {kModule, "full"}},
               }),
               plan::ProtocolMismatchError);
  EXPECT_EQ(registry.list_strategies(), std::vector<std::string>{"a_ok"});
}

// ---- Protocol validation ------------------------------------------------------------------------

TEST(StrategyRegistry, AClassLackingOperationsRaisesProtocolMismatchErrorNamingThem) {
  plan::SandboxStrategyRegistry registry({module_dir()});
  try {
    registry.register_module("bad", kModule, "partial");
    ADD_FAILURE() << "an incomplete strategy was registered";
  } catch (const plan::ProtocolMismatchError& e) {
    EXPECT_EQ(e.missing(), (std::vector<std::string>{"diff", "checkpoint"}));
    EXPECT_TRUE(contains(e.what(), "diff, checkpoint")) << e.what();
    // One of the plan layer's errors, so their handlers take it.
    const plan::SandboxError& base = e;
    const patchbox::Error& root = base;
    EXPECT_EQ(root.kind(), patchbox::ErrorKind::Plan);
  }
  EXPECT_FALSE(registry.has_custom_strategy("bad"));
}

/// A host strategy lacking `diff` (and so abstract).
class LacksDiff : public plan::SandboxStrategyProtocol {
 public:
  std::map<std::string, std::string> create(const plan::SandboxRef&, const fs::path&) override {
    return {};
  }
  std::optional<std::string> read(const plan::SandboxRef&, const std::string&) override {
    return std::nullopt;
  }
  void write(const plan::SandboxRef&, const std::string&, const std::string&) override {}
  std::optional<std::string> commit(const plan::SandboxRef&,
                                    const std::optional<std::string>&) override {
    return std::nullopt;
  }
  void rollback(const plan::SandboxRef&, bool) override {}
  void checkpoint(const plan::SandboxRef&, const std::string&) override {}
  void restore_checkpoint(const plan::SandboxRef&, const std::string&) override {}
  void cleanup(const plan::SandboxRef&) override {}
};

TEST(StrategyRegistry, AHostClassLackingAnOperationCannotEvenBeMade) {
  // The protocol's C++ name, and its check for host objects: at compile time.
  static_assert(std::is_same_v<plan::SandboxStrategyProtocol, plan::CustomStrategy>);
  static_assert(std::is_abstract_v<LacksDiff>);
  static_assert(!std::is_constructible_v<LacksDiff>);
  static_assert(std::is_constructible_v<MemoryStrategy>);
  SUCCEED();
}

// ---- Factory integration ----------------------------------------------------------------------

TEST(StrategyRegistry, AFactoryWithTheRegistryKnowsItsCustomStrategies) {
  plan::SandboxStrategyRegistry registry({module_dir()});
  plan::SandboxFactory factory(registry);
  EXPECT_FALSE(factory.has_custom_strategy("redis_sandbox"));
  // The factory shares the registry: a later registration is seen.
  registry.register_module("redis_sandbox", kModule, "full");
  EXPECT_TRUE(factory.has_custom_strategy("redis_sandbox"));
  EXPECT_TRUE(factory.has_strategy("redis_sandbox"));
  EXPECT_TRUE(factory.has_strategy("copy_on_write"));
  EXPECT_FALSE(factory.has_custom_strategy("copy_on_write"));
  EXPECT_FALSE(factory.has_strategy("nothing"));
  const std::vector<std::string> all = factory.available_strategies();
  for (const auto& name : plan::library_strategy_names()) EXPECT_TRUE(has(all, name)) << name;
  EXPECT_EQ(all.back(), "redis_sandbox");
  // Without a registry: the built-in strategies only.
  EXPECT_EQ(plan::SandboxFactory().available_strategies(), plan::library_strategy_names());
}

// ---- A manager over the registry -------------------------------------------------------------

TEST(StrategyRegistry, AManagerOpenedOverTheRegistryMakesAndCommitsItsStrategysSandboxes) {
  TempDir root("pb-reg-root"), original("pb-reg-orig");
  plan::SandboxStrategyRegistry registry({module_dir()});
  registry.register_module("my_strategy", kModule, "full");
  auto mgr = plan::SandboxManager::open(root.path(), registry);
  EXPECT_TRUE(mgr.has_custom_strategy("my_strategy"));
  auto sb = mgr.get_or_create_sandbox("plan-1", "cache", original.path(), "my_strategy");
  EXPECT_TRUE(std::dynamic_pointer_cast<plan::CustomSandbox>(sb));
  EXPECT_EQ(sb->strategy(), "my_strategy");
  ASSERT_TRUE(sb->context());
  EXPECT_EQ(sb->context()->metadata.at("module"), "c");  // what the module's create returned
  const plan::SandboxDiff d = sb->diff();
  ASSERT_EQ(d.entries.size(), 1u);
  EXPECT_EQ(d.entries[0].path, "k");
  EXPECT_EQ(d.entries[0].operation, plan::DiffOp::Added);
  const std::vector<plan::CommitResult> results = mgr.commit_all("plan-1");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].success);
  EXPECT_EQ(results[0].commit_ref, std::optional<std::string>("c-1"));
  mgr.cleanup_all("plan-1");
}

TEST(StrategyRegistry, HostObjectsRegisterWithoutAPrefixAndCopiesShareTheRegistry) {
  TempDir root("pb-reg-root"), original("pb-reg-orig");
  plan::SandboxStrategyRegistry registry;  // allows no module; objects need none
  plan::SandboxStrategyRegistry copy = registry;
  auto strategy = std::make_shared<MemoryStrategy>();
  copy.register_strategy("memory", strategy);
  EXPECT_TRUE(registry.has_custom_strategy("memory"));
  EXPECT_THROW(registry.register_strategy("memory", strategy), plan::SandboxError);
  EXPECT_THROW(registry.register_strategy("other", nullptr), plan::SandboxError);

  auto mgr = plan::SandboxManager::open(root.path(), registry);
  auto sb = mgr.get_or_create_sandbox("plan-1", "kv", original.path(), "memory");
  sb->write("greeting", "hello");
  EXPECT_EQ(strategy->data.at("greeting"), "hello");
  // The manager's own register_strategy registers into the shared registry.
  mgr.register_strategy("second", std::make_shared<MemoryStrategy>());
  EXPECT_TRUE(registry.has_custom_strategy("second"));
  mgr.cleanup_all("plan-1");
}

}  // namespace
