// The built-in Sandbox of <patchbox/plan.hpp>: the C++ object over a Rust sandbox of the
// plan bridge (src/ffi/plan.rs), one class per strategy (internal::sandbox_of), the bridge's
// values as C++ values (contexts, diffs, commit results, metadata, times), and the Sandbox
// base class's default read/write over get_path().
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "patchbox/cpp/glue.h"
#include "patchbox/cpp/plan_internal.h"
#include "patchbox/plan.hpp"
#include "patchbox/src/ffi/plan.rs.h"
#include "rust/cxx.h"

namespace patchbox {
namespace plan {

namespace pb = ::patchbox::bridge::plan;

// ---- the bridge's values as C++ values (shared through cpp/plan_internal.h) -----------------

namespace internal {

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

}  // namespace internal

namespace {

using glue::bytes;
using glue::path_of;
using glue::str_of;
using internal::call;
using internal::meta_of;
using internal::result_of;
using internal::time_of;

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

}  // namespace

namespace internal {

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

const pb::PlanSandbox* rust_sandbox(const Sandbox& sb) noexcept {
  const auto* builtin = dynamic_cast<const RustBacked*>(&sb);
  return builtin ? &builtin->rust_sandbox() : nullptr;
}

}  // namespace internal

// ---- the Sandbox base class ------------------------------------------------------------------

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

}  // namespace plan
}  // namespace patchbox
