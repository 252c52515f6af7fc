// Engine code written against the reference engine's v2 API. This translation unit includes
// nothing but <entropic/core/sandbox.h> and the standard library, and uses the API exactly as
// an engine does: it must compile unchanged against patchbox's drop-in header. The
// static_asserts pin the reference API's exact signatures.
#include <entropic/core/sandbox.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;
using entropic::SandboxInfo;
using entropic::SandboxManager;
using entropic::SandboxResult;
using entropic::ScopedSandbox;

// ---- the reference API's shape -------------------------------------------------------------
static_assert(std::is_same_v<decltype(SandboxInfo::path), fs::path>);
static_assert(std::is_same_v<decltype(SandboxInfo::delegation_id), std::string>);
static_assert(std::is_same_v<decltype(SandboxInfo::base_dir), fs::path>);
static_assert(std::is_same_v<decltype(SandboxResult::patch), std::string>);
static_assert(std::is_same_v<decltype(SandboxResult::files_touched), std::vector<fs::path>>);
static_assert(std::is_same_v<decltype(SandboxResult::base_dir), fs::path>);
static_assert(std::is_same_v<decltype(SandboxResult::head_dir), fs::path>);

static_assert(std::is_constructible_v<SandboxManager, const fs::path&>);
static_assert(!std::is_convertible_v<const fs::path&, SandboxManager>, "explicit");
static_assert(!std::is_copy_constructible_v<SandboxManager>);
static_assert(!std::is_copy_assignable_v<SandboxManager>);
static_assert(std::is_nothrow_move_constructible_v<SandboxManager>);
static_assert(std::is_nothrow_move_assignable_v<SandboxManager>);

static_assert(std::is_same_v<decltype(&SandboxManager::create_sandbox),
                             std::optional<SandboxInfo> (SandboxManager::*)(
                                 const std::string&, std::optional<SandboxInfo>)>);
static_assert(std::is_same_v<decltype(&SandboxManager::finalize_sandbox),
                             std::optional<SandboxResult> (SandboxManager::*)(const SandboxInfo&)>);
static_assert(std::is_same_v<decltype(&SandboxManager::discard_sandbox),
                             void (SandboxManager::*)(const SandboxInfo&)>);
static_assert(std::is_same_v<decltype(&SandboxManager::write_pending_patch),
                             std::optional<fs::path> (SandboxManager::*)(const std::string&,
                                                                        const std::string&)>);
static_assert(std::is_same_v<decltype(&SandboxManager::project_dir),
                             const fs::path& (SandboxManager::*)() const>);
static_assert(std::is_same_v<decltype(&SandboxManager::session_base),
                             const fs::path& (SandboxManager::*)() const>);

static_assert(std::is_same_v<ScopedSandbox::SwapDirFn, void (*)(const fs::path&, void*)>);
static_assert(std::is_constructible_v<ScopedSandbox, ScopedSandbox::SwapDirFn, void*,
                                      const fs::path&, const fs::path&>);
static_assert(!std::is_copy_constructible_v<ScopedSandbox>);

// ---- an engine's tool plumbing -------------------------------------------------------------
struct ToolContext {
  fs::path cwd;
  int runs = 0;
};

void swap_tool_dir(const fs::path& path, void* user_data) {
  static_cast<ToolContext*>(user_data)->cwd = path;
}

void run_tool(ToolContext& ctx, const std::string& file, const std::string& content) {
  std::ofstream(ctx.cwd / file) << content;
  ++ctx.runs;
}

}  // namespace

/// Runs one engine session on @p project the way an engine does. Returns "" when everything
/// behaved as the reference API promises, else what went wrong. @p session receives the
/// session directory (it keeps one pending patch).
std::string engine_like_session(const fs::path& project, fs::path* session) {
  SandboxManager manager(project);
  *session = manager.session_base();
  if (manager.session_base().empty()) return "no session was created";
  ToolContext ctx{manager.project_dir()};

  std::optional<SandboxInfo> sandbox = manager.create_sandbox("delegation-1");
  if (!sandbox) return "create_sandbox failed";
  {
    ScopedSandbox scope(&swap_tool_dir, &ctx, sandbox->path, manager.project_dir());
    if (ctx.cwd != sandbox->path) return "the swap did not enter the sandbox";
    run_tool(ctx, "README.md", "edited by the delegation\n");
  }
  if (ctx.cwd != manager.project_dir()) return "the swap did not restore";

  std::optional<SandboxResult> result = manager.finalize_sandbox(*sandbox);
  if (!result) return "finalize_sandbox failed";
  if (result->patch.find("+edited by the delegation\n") == std::string::npos) {
    return "the patch lacks the edit: " + result->patch;
  }
  if (result->files_touched != std::vector<fs::path>{"README.md"}) return "wrong files_touched";
  if (result->head_dir != sandbox->path || result->base_dir != sandbox->base_dir) {
    return "wrong head_dir/base_dir";
  }

  // A follow-up delegation chained on the first one's state.
  std::optional<SandboxInfo> follow_up = manager.create_sandbox("delegation-2", sandbox);
  if (!follow_up) return "chained create_sandbox failed";
  { ScopedSandbox no_op(nullptr, nullptr, follow_up->path, manager.project_dir()); }
  std::optional<SandboxResult> cumulative = manager.finalize_sandbox(*follow_up);
  if (!cumulative || cumulative->files_touched != result->files_touched) {
    return "the chained patch is not cumulative";
  }

  std::optional<fs::path> pending =
      manager.write_pending_patch(sandbox->delegation_id, result->patch);
  if (!pending || !fs::exists(*pending)) return "write_pending_patch failed";

  manager.discard_sandbox(*sandbox);
  manager.discard_sandbox(*follow_up);
  if (fs::exists(sandbox->path)) return "discard_sandbox left the sandbox";

  // Failures are std::nullopt, never exceptions.
  if (manager.create_sandbox("../escape")) return "an invalid id was accepted";
  if (manager.finalize_sandbox(*sandbox)) return "a discarded sandbox was finalized";
  if (manager.write_pending_patch("../escape", "x")) return "an invalid pending id was accepted";
  manager.discard_sandbox(SandboxInfo{project, "delegation-1", sandbox->base_dir});
  if (!fs::exists(project)) return "discard_sandbox removed the project";

  // Move-only: managers live in containers.
  std::vector<SandboxManager> managers;
  managers.push_back(std::move(manager));
  if (managers.back().session_base() != *session) return "moving lost the session";
  return "";
}
