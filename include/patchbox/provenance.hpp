/// @file patchbox/provenance.hpp
/// @brief What produced a piece of work — the command, its directory, exit status and times —
/// as kept with a pending patch (session::Manager::write_pending_patch()) and put in a plan
/// commit's CommitResult::metadata (plan::SandboxManager::commit_all()).
#ifndef PATCHBOX_PROVENANCE_HPP
#define PATCHBOX_PROVENANCE_HPP

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

/// patchbox's C++ API.
namespace patchbox {

/// What produced a delegation's work. Every field is optional; in JSON records and plan
/// metadata it is `provenance` (see `docs/json.md`).
struct Provenance {
  std::vector<std::string> command;          ///< The program and its arguments.
  std::optional<std::filesystem::path> cwd;  ///< The directory it was started from.
  std::optional<int> exit_status;            ///< Its exit status (128 + signal when killed).
  std::optional<std::uint64_t> started_ms;   ///< Start, milliseconds since the Unix epoch.
  std::optional<std::uint64_t> ended_ms;     ///< End, milliseconds since the Unix epoch.
};

}  // namespace patchbox

#endif  // PATCHBOX_PROVENANCE_HPP
