// The C++ glue of patchbox::session::Manager over its cxx bridge (src/ffi/sandbox.rs): the
// struct conversions, and the callback types the Rust side calls. The helpers shared with
// apply.cpp (byte/path conversions, rust::Error -> patchbox::Error) are in glue.h.
#include "patchbox/sandbox.hpp"

#include <exception>
#include <string>
#include <string_view>
#include <utility>

#include "patchbox/cpp/bridge.h"
#include "patchbox/cpp/glue.h"
#include "patchbox/src/ffi/sandbox.rs.h"
#include "rust/cxx.h"

namespace patchbox {
namespace {

using bridge::FfiCompletion;
using bridge::FfiInfo;
using bridge::FfiResult;
using glue::bytes;
using glue::call;
using glue::path_of;
using glue::paths_of;
using glue::str_of;
using glue::to_vec;

FfiInfo info_in(const SandboxInfo& i) {
  return FfiInfo{to_vec(i.path.native()), to_vec(i.delegation_id), to_vec(i.base_dir.native()),
                 static_cast<std::uint8_t>(i.mode)};
}

SandboxInfo info_out(const FfiInfo& i) {
  IsolationMode mode = i.mode == 1   ? IsolationMode::KernelOverlay
                       : i.mode == 2 ? IsolationMode::FuseOverlay
                                     : IsolationMode::Copy;
  return SandboxInfo{path_of(i.path), str_of(i.delegation_id), path_of(i.base_dir), mode};
}

SandboxResult result_in(const FfiResult& r) {
  SandboxResult out;
  out.patch = str_of(r.patch);
  out.files_touched = paths_of(r.files_touched);
  out.base_dir = path_of(r.base_dir);
  out.head_dir = path_of(r.head_dir);
  out.added = paths_of(r.added);
  out.modified = paths_of(r.modified);
  out.deleted = paths_of(r.deleted);
  out.ignored = paths_of(r.ignored);
  return out;
}

}  // namespace

// ---- the types Rust calls back -------------------------------------------------------------

namespace bridge {

ProgressSink::ProgressSink(std::function<void(const Progress&)> fn) : fn_(std::move(fn)) {}

void ProgressSink::on_progress(std::uint64_t files_done, std::uint64_t files_total,
                               std::uint64_t bytes_done) const noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    if (fn_) fn_(Progress{files_done, files_total, bytes_done});
  } catch (...) {
    // A progress report is advisory: a throwing callback must not fail (or abort) the copy.
  }
}

std::uint8_t Decider::decide(const FfiResult& result) const noexcept {
  if (!fn_) return 1;
  try {
    seen_ = result_in(result);
    return fn_(*seen_) == Decision::Accept ? 0 : 1;
  } catch (...) {
    return 2;
  }
}

}  // namespace bridge

// ---- session::Manager ------------------------------------------------------------------------

struct session::Manager::Impl {
  explicit Impl(rust::Box<bridge::Manager> m)
      : mgr(std::move(m)),
        project_dir(path_of(mgr->project_dir())),
        session_base(path_of(mgr->session_base())),
        session_id(std::string(mgr->session_id())) {}
  // The Rust drop (remove sandboxes, keep pending, unlock) runs here, under catch_unwind.
  ~Impl() { mgr->close(); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  rust::Box<bridge::Manager> mgr;
  const std::filesystem::path project_dir;
  const std::filesystem::path session_base;
  const std::string session_id;
};

const session::Manager::Impl& session::Manager::impl() const {
  if (!impl_) throw Error(ErrorKind::Internal, "use of a moved-from patchbox::session::Manager");
  return *impl_;
}

namespace {

const std::filesystem::path kEmptyPath;
const std::string kEmptyString;

}  // namespace

session::Manager::Manager(const std::filesystem::path& project_dir)
    : Manager(project_dir, Options{}) {}

session::Manager::Manager(const std::filesystem::path& project_dir, const Options& options) {
  impl_ = call([&] {
    std::unique_ptr<bridge::ProgressSink> sink;
    if (options.progress) sink = std::make_unique<bridge::ProgressSink>(options.progress);
    std::uint8_t isolation = 0;
    if (options.isolation) isolation = static_cast<std::uint8_t>(*options.isolation) + 1;
    auto mgr = bridge::new_manager(bytes(project_dir), bytes(options.root), std::move(sink),
                                   options.prune_on_start, options.git_repo, isolation,
                                   options.store);
    return std::make_unique<Impl>(std::move(mgr));
  });
}

session::Manager::~Manager() = default;
session::Manager::Manager(session::Manager&& other) noexcept = default;
session::Manager& session::Manager::operator=(session::Manager&& other) noexcept = default;

SandboxInfo session::Manager::create_sandbox(const std::string& delegation_id,
                                           const std::optional<SandboxInfo>& chain_from) {
  return call([&] {
    const Impl& im = impl();
    FfiInfo chain = chain_from ? info_in(*chain_from) : FfiInfo{};
    return info_out(im.mgr->create_sandbox(bytes(delegation_id), chain, chain_from.has_value()));
  });
}

SandboxResult session::Manager::finalize_sandbox(const SandboxInfo& info) {
  return call([&] { return result_in(impl().mgr->finalize_sandbox(info_in(info))); });
}

void session::Manager::discard_sandbox(const SandboxInfo& info) {
  call([&] { impl().mgr->discard_sandbox(info_in(info)); });
}

std::filesystem::path session::Manager::write_pending_patch(const std::string& delegation_id,
                                                          const std::string& patch) {
  return call([&] {
    return path_of(impl().mgr->write_pending_patch(bytes(delegation_id), bytes(patch)));
  });
}

namespace {

// The provenance as the bridge carries it (an absent value has its `has_*` flag false).
bridge::FfiProvenance provenance_in(const Provenance& provenance) {
  bridge::FfiProvenance p;
  for (const auto& w : provenance.command) p.command.push_back(rust::String(w));
  p.has_cwd = provenance.cwd.has_value();
  if (provenance.cwd) p.cwd = glue::to_vec(provenance.cwd->native());
  p.has_exit_status = provenance.exit_status.has_value();
  p.exit_status = provenance.exit_status.value_or(0);
  p.has_started = provenance.started_ms.has_value();
  p.started_ms = provenance.started_ms.value_or(0);
  p.has_ended = provenance.ended_ms.has_value();
  p.ended_ms = provenance.ended_ms.value_or(0);
  return p;
}

PendingDelivery delivery_of(const bridge::FfiDelivery& d) {
  PendingDelivery out;
  out.place = d.place == 1   ? PendingDelivery::Place::Stored
              : d.place == 2 ? PendingDelivery::Place::Kept
                             : PendingDelivery::Place::Local;
  out.path = path_of(d.path);
  out.id = std::string(d.id);
  out.url = std::string(d.url);
  out.error = std::string(d.error);
  return out;
}

}  // namespace

PendingDelivery session::Manager::deliver_pending_patch(const std::string& delegation_id,
                                                      const std::string& patch) {
  return call([&] {
    return delivery_of(impl().mgr->deliver_pending_patch(bytes(delegation_id), bytes(patch)));
  });
}

PendingDelivery session::Manager::deliver_pending_patch(const std::string& delegation_id,
                                                      const std::string& patch,
                                                      const Provenance& provenance) {
  return call([&] {
    return delivery_of(impl().mgr->deliver_pending_patch_with(bytes(delegation_id), bytes(patch),
                                                              provenance_in(provenance)));
  });
}

std::filesystem::path session::Manager::write_pending_patch(const std::string& delegation_id,
                                                          const std::string& patch,
                                                          const Provenance& provenance) {
  return call([&] {
    return path_of(impl().mgr->write_pending_patch_with(bytes(delegation_id), bytes(patch),
                                                        provenance_in(provenance)));
  });
}

Completion session::Manager::complete_sandbox(const SandboxInfo& info,
                                            std::function<Decision(const SandboxResult&)> decide) {
  return call([&] {
    const Impl& im = impl();
    bridge::Decider decider(decide);
    FfiCompletion c = im.mgr->complete_sandbox(info_in(info), decider);
    Completion out;
    auto seen = decider.take_seen();
    out.result = seen ? std::move(*seen) : result_in(c.result);
    switch (c.routed) {
      case bridge::FfiRouted::Accepted:
        out.routed = Completion::Routed::Accepted;
        break;
      case bridge::FfiRouted::Pending:
        out.routed = Completion::Routed::Pending;
        out.pending_path = path_of(c.pending_path);
        break;
      case bridge::FfiRouted::Unchanged:
        out.routed = Completion::Routed::Unchanged;
        break;
      default:
        throw Error(ErrorKind::Internal, "unknown routing from the library");
    }
    return out;
  });
}

const std::filesystem::path& session::Manager::project_dir() const {
  return impl_ ? impl_->project_dir : kEmptyPath;
}

const std::filesystem::path& session::Manager::session_base() const {
  return impl_ ? impl_->session_base : kEmptyPath;
}

std::optional<IsolationMode> session::Manager::isolation_mode() const {
  if (!impl_) return std::nullopt;
  switch (impl_->mgr->isolation_mode()) {
    case 1: return IsolationMode::Copy;
    case 2: return IsolationMode::KernelOverlay;
    case 3: return IsolationMode::FuseOverlay;
    default: return std::nullopt;
  }
}

const std::string& session::Manager::session_id() const {
  return impl_ ? impl_->session_id : kEmptyString;
}

// ---- ScopedSandbox -------------------------------------------------------------------------

ScopedSandbox::ScopedSandbox(SwapDirFn swap_fn, void* user_data,
                             const std::filesystem::path& sandbox_path,
                             const std::filesystem::path& original_path)
    : ScopedSandbox(swap_fn ? std::function<void(const std::filesystem::path&)>(
                                  [swap_fn, user_data](const std::filesystem::path& p) {
                                    swap_fn(p, user_data);
                                  })
                            : std::function<void(const std::filesystem::path&)>(),
                    sandbox_path, original_path) {}

ScopedSandbox::ScopedSandbox(std::function<void(const std::filesystem::path&)> swap,
                             const std::filesystem::path& sandbox_path,
                             const std::filesystem::path& original_path)
    : swap_(std::move(swap)), sandbox_(sandbox_path), original_(original_path) {
  if (swap_) swap_(sandbox_);
}

ScopedSandbox::~ScopedSandbox() {
  if (!swap_) return;
  try {
    swap_(original_);
  } catch (...) {
    // A destructor must not throw: during unwinding that would terminate the process.
  }
}

ScopedSandbox::ScopedSandbox(ScopedSandbox&& other) noexcept
    : swap_(std::move(other.swap_)),
      sandbox_(std::move(other.sandbox_)),
      original_(std::move(other.original_)) {
  other.swap_ = nullptr;
}

void ScopedSandbox::keep() noexcept { swap_ = nullptr; }

}  // namespace patchbox
