// entropic/core/sandbox.h (the reference engine's v2 API) on top of patchbox::session::Manager:
// the same operations, exceptions turned into std::nullopt.
#include <entropic/core/sandbox.h>

#include <utility>

#include "patchbox/sandbox.hpp"

namespace entropic {
namespace {

patchbox::session::SandboxInfo to_core(const SandboxInfo& i) {
  return patchbox::session::SandboxInfo{i.path, i.delegation_id, i.base_dir};
}

SandboxInfo from_core(patchbox::session::SandboxInfo i) {
  return SandboxInfo{std::move(i.path), std::move(i.delegation_id), std::move(i.base_dir)};
}

const std::filesystem::path kEmptyPath;

}  // namespace

struct SandboxManager::Impl {
  std::filesystem::path project_dir;           // as given
  std::optional<patchbox::session::Manager> mgr;  // empty when the constructor failed
};

SandboxManager::SandboxManager(const std::filesystem::path& project_dir) {
  try {
    impl_ = std::make_unique<Impl>();
    impl_->project_dir = project_dir;
    impl_->mgr.emplace(project_dir);
  } catch (...) {
    // Inert manager: every call returns std::nullopt (documented in the header).
  }
}

SandboxManager::~SandboxManager() = default;
SandboxManager::SandboxManager(SandboxManager&& other) noexcept = default;
SandboxManager& SandboxManager::operator=(SandboxManager&& other) noexcept = default;

std::optional<SandboxInfo> SandboxManager::create_sandbox(const std::string& delegation_id,
                                                          std::optional<SandboxInfo> chain_from) {
  if (!impl_ || !impl_->mgr) return std::nullopt;
  try {
    std::optional<patchbox::session::SandboxInfo> chain;
    if (chain_from) chain = to_core(*chain_from);
    return from_core(impl_->mgr->create_sandbox(delegation_id, chain));
  } catch (...) {
    return std::nullopt;
  }
}

std::optional<SandboxResult> SandboxManager::finalize_sandbox(const SandboxInfo& info) {
  if (!impl_ || !impl_->mgr) return std::nullopt;
  try {
    patchbox::session::SandboxResult r = impl_->mgr->finalize_sandbox(to_core(info));
    return SandboxResult{std::move(r.patch), std::move(r.files_touched), std::move(r.base_dir),
                         std::move(r.head_dir)};
  } catch (...) {
    return std::nullopt;
  }
}

void SandboxManager::discard_sandbox(const SandboxInfo& info) {
  if (!impl_ || !impl_->mgr) return;
  try {
    impl_->mgr->discard_sandbox(to_core(info));
  } catch (...) {
    // A refusal (containment) or a failure: nothing was removed; the reference API is void.
  }
}

std::optional<std::filesystem::path> SandboxManager::write_pending_patch(
    const std::string& delegation_id, const std::string& patch) {
  if (!impl_ || !impl_->mgr) return std::nullopt;
  try {
    return impl_->mgr->write_pending_patch(delegation_id, patch);
  } catch (...) {
    return std::nullopt;
  }
}

const std::filesystem::path& SandboxManager::project_dir() const {
  return impl_ ? impl_->project_dir : kEmptyPath;
}

const std::filesystem::path& SandboxManager::session_base() const {
  return impl_ && impl_->mgr ? impl_->mgr->session_base() : kEmptyPath;
}

ScopedSandbox::ScopedSandbox(SwapDirFn swap_fn, void* user_data,
                             const std::filesystem::path& sandbox_path,
                             const std::filesystem::path& original_path)
    : swap_fn_(swap_fn), user_data_(user_data), original_path_(original_path) {
  if (swap_fn_) swap_fn_(sandbox_path, user_data_);
}

ScopedSandbox::~ScopedSandbox() {
  if (!swap_fn_) return;
  try {
    swap_fn_(original_path_, user_data_);
  } catch (...) {
    // Never throw from a destructor: during unwinding that would terminate the process.
  }
}

ScopedSandbox::ScopedSandbox(ScopedSandbox&& other) noexcept
    : swap_fn_(std::exchange(other.swap_fn_, nullptr)),
      user_data_(other.user_data_),
      original_path_(std::move(other.original_path_)) {}

}  // namespace entropic
