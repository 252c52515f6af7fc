// The C++ glue of <patchbox/plan.hpp> over its cxx bridge (src/ffi/plan.rs): the lifecycle
// table, the plan error classes (decoded from the bridge's "plan_<kind>" error strings), the
// built-in Sandbox over the Rust sandbox, and SandboxManager.
#include "patchbox/plan.hpp"

#include <cstdint>
#include <exception>
#include <fstream>
#include <iterator>
#include <mutex>
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
using glue::path_of;
using glue::str_of;

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

/// Throws the exception a bridge error stands for: a plan error class for `plan_<kind>`,
/// patchbox::Error for the rest (`internal`, core kinds).
[[noreturn]] void rethrow(const rust::Error& e) {
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

using internal::call;

std::vector<std::string> strings_of(const rust::Vec<rust::String>& v) {
  std::vector<std::string> out;
  out.reserve(v.size());
  for (const auto& s : v) out.emplace_back(s);
  return out;
}

Clock::time_point time_of(std::int64_t ms) {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::milliseconds(ms)));
}

std::map<std::string, std::string> meta_of(const rust::Vec<pb::FfiPlanMeta>& v) {
  std::map<std::string, std::string> out;
  for (const auto& m : v) out.emplace(std::string(m.key), std::string(m.value));
  return out;
}

SandboxContext context_of(const pb::FfiPlanContext& c) {
  SandboxContext out;
  out.sandbox_id = std::string(c.sandbox_id);
  out.sandbox_path = path_of(c.sandbox_path);
  out.original_path = path_of(c.original_path);
  out.resource_id = std::string(c.resource_id);
  out.plan_id = std::string(c.plan_id);
  out.created_at = time_of(c.created_at_ms);
  out.metadata = meta_of(c.metadata);
  return out;
}

CommitResult result_of(const pb::FfiCommitResult& r) {
  CommitResult out;
  out.sandbox_id = std::string(r.sandbox_id);
  out.success = r.success;
  if (r.has_commit_ref) out.commit_ref = std::string(r.commit_ref);
  out.changed_files = strings_of(r.changed_files);
  out.added_files = strings_of(r.added_files);
  out.deleted_files = strings_of(r.deleted_files);
  if (r.has_error) out.error = std::string(r.error);
  out.timestamp = time_of(r.timestamp_ms);
  out.metadata = meta_of(r.metadata);
  out.json = std::string(r.json);
  return out;
}

DiffOp op_of(const rust::String& name) {
  std::string_view n(name.data(), name.size());
  if (n == "added") return DiffOp::Added;
  if (n == "deleted") return DiffOp::Deleted;
  if (n == "modified") return DiffOp::Modified;
  throw Error(ErrorKind::Internal, "unknown diff operation from the library: " + std::string(n));
}

SandboxDiff diff_of(const pb::FfiDiff& d) {
  SandboxDiff out;
  out.entries.reserve(d.entries.size());
  for (const auto& e : d.entries) {
    DiffEntry entry;
    entry.path = std::string(e.path);
    entry.operation = op_of(e.operation);
    if (e.has_before) entry.before = str_of(e.before);
    if (e.has_after) entry.after = str_of(e.after);
    out.entries.push_back(std::move(entry));
  }
  out.patch = str_of(d.patch);
  return out;
}

Status status_of(const rust::String& name) {
  auto s = status_from_string(std::string(name));
  if (!s) throw Error(ErrorKind::Internal, "unknown sandbox status from the library: " + std::string(name));
  return *s;
}

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

/// What every library sandbox is besides its strategy's class: the Rust sandbox behind it
/// (for cpp/checkpoint.cpp and cpp/sqlite.cpp, through internal::rust_sandbox).
class RustBacked {
 public:
  virtual ~RustBacked() = default;
  /// The Rust sandbox.
  virtual const pb::PlanSandbox& rust_sandbox() const noexcept = 0;
};

/// The built-in Sandbox, of the strategy class @p Base: the Rust sandbox (an
/// `Arc<dyn Sandbox>`) behind the bridge. Every bridge method takes `&self`; the Rust sandbox
/// serializes its own operations.
template <class Base>
class BuiltinSandbox final : public Base, public RustBacked {
 public:
  explicit BuiltinSandbox(rust::Box<pb::PlanSandbox> sb)
      : sb_(std::move(sb)), id_(std::string(sb_->sandbox_id())) {}

  std::string sandbox_id() const override { return id_; }
  std::string strategy() const override { return std::string(sb_->strategy()); }
  Status status() const override { return status_of(sb_->status()); }
  std::optional<SandboxContext> context() const override {
    pb::FfiPlanContextOpt c = sb_->context();
    if (!c.present) return std::nullopt;
    return context_of(c.context);
  }
  SandboxContext create(const std::string& plan_id) override {
    return call([&] { return context_of(sb_->create(plan_id)); });
  }
  std::filesystem::path get_path(const std::filesystem::path& resource_relative) override {
    return call([&] { return path_of(sb_->get_path(bytes(resource_relative))); });
  }
  std::optional<std::string> read(const std::filesystem::path& resource_relative) override {
    return call([&]() -> std::optional<std::string> {
      bool found = false;
      rust::Vec<std::uint8_t> data = sb_->read(bytes(resource_relative), found);
      if (!found) return std::nullopt;
      return str_of(data);
    });
  }
  void write(const std::filesystem::path& resource_relative, const std::string& data) override {
    call([&] { sb_->write(bytes(resource_relative), bytes(data)); });
  }
  SandboxDiff diff() const override {
    return call([&] { return diff_of(sb_->diff()); });
  }
  void check_commit() const override {
    call([&] { sb_->check_commit(); });
  }
  CommitResult commit(const std::optional<std::string>& message) override {
    return call([&] {
      return result_of(sb_->commit(message.has_value(), message ? *message : std::string()));
    });
  }
  void rollback() override {
    call([&] { sb_->rollback(); });
  }
  void cleanup() override {
    call([&] { sb_->cleanup(); });
  }
  const pb::PlanSandbox& rust_sandbox() const noexcept override { return *sb_; }

 private:
  rust::Box<pb::PlanSandbox> sb_;
  const std::string id_;
};

/// The library sandbox over @p sb, of its strategy's class.
std::shared_ptr<Sandbox> sandbox_of(rust::Box<pb::PlanSandbox> sb) {
  const std::string s(sb->strategy());
  if (s == strategy::none) return std::make_shared<BuiltinSandbox<NoSandbox>>(std::move(sb));
  if (s == strategy::copy_on_write) {
    return std::make_shared<BuiltinSandbox<CopyOnWriteSandbox>>(std::move(sb));
  }
  if (s == strategy::overlay) return std::make_shared<BuiltinSandbox<OverlaySandbox>>(std::move(sb));
  if (s == strategy::git_worktree) {
    return std::make_shared<BuiltinSandbox<GitWorktreeSandbox>>(std::move(sb));
  }
  if (s == strategy::transaction_rollback) {
    return std::make_shared<BuiltinSandbox<TransactionSandbox>>(std::move(sb));
  }
  return std::make_shared<BuiltinSandbox<CustomSandbox>>(std::move(sb));
}

}  // namespace

// ---- lifecycle -------------------------------------------------------------------------------

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

// ---- errors ----------------------------------------------------------------------------------

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

Sandbox::~Sandbox() = default;

std::optional<std::string> Sandbox::read(const std::filesystem::path& resource_relative) {
  std::filesystem::path p = get_path(resource_relative);
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) return std::nullopt;
  std::ifstream in(p, std::ios::binary);
  if (!in) throw SandboxError("cannot read " + p.string(), sandbox_id());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void Sandbox::write(const std::filesystem::path& resource_relative, const std::string& data) {
  std::filesystem::path p = get_path(resource_relative);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out) throw SandboxError("cannot write " + p.string(), sandbox_id());
}

CustomStrategy::~CustomStrategy() = default;

// ---- SandboxManager --------------------------------------------------------------------------

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

// ---- shared with the other plan glue files (cpp/plan_internal.h) ----------------------------

namespace internal {

void rethrow(const rust::Error& e) { ::patchbox::plan::rethrow(e); }

const pb::PlanSandbox* rust_sandbox(const Sandbox& sb) noexcept {
  const auto* builtin = dynamic_cast<const RustBacked*>(&sb);
  return builtin ? &builtin->rust_sandbox() : nullptr;
}

Clock::time_point time_of(std::int64_t ms) { return ::patchbox::plan::time_of(ms); }

std::map<std::string, std::string> meta_of(const rust::Vec<pb::FfiPlanMeta>& v) {
  return ::patchbox::plan::meta_of(v);
}

}  // namespace internal

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
  out.created_at = pp::time_of(r.created_at_ms);
  out.metadata = pp::meta_of(r.metadata);
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
