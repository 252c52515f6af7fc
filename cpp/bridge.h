// Private to the library (not installed): the C++ types the Rust side of the cxx bridge
// (src/ffi/) calls into. The generated header `patchbox/src/ffi/mod.rs.h` includes this file
// before it defines the shared structs, so they are only forward-declared here.
#ifndef PATCHBOX_CPP_BRIDGE_H
#define PATCHBOX_CPP_BRIDGE_H

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>

#include "patchbox/sandbox.hpp"

namespace patchbox {
namespace bridge {

struct FfiResult;

/// Forwards copy progress from Rust's copy threads to Options::progress: serialized by a
/// mutex, exceptions swallowed (an exception must never reach Rust).
class ProgressSink {
 public:
  explicit ProgressSink(std::function<void(const Progress&)> fn);
  void on_progress(std::uint64_t files_done, std::uint64_t files_total,
                   std::uint64_t bytes_done) const noexcept;

 private:
  std::function<void(const Progress&)> fn_;
  mutable std::mutex mu_;
};

/// Asks the C++ decision callback of complete_sandbox, on the calling thread. Keeps the
/// converted result so the Completion need not convert it again.
class Decider {
 public:
  explicit Decider(const std::function<Decision(const SandboxResult&)>& fn) : fn_(fn) {}
  /// 0 accept, 1 reject (also for an empty callback), 2 the callback threw.
  std::uint8_t decide(const FfiResult& result) const noexcept;
  /// The result as the callback saw it, if it was called.
  std::optional<SandboxResult> take_seen() { return std::move(seen_); }

 private:
  const std::function<Decision(const SandboxResult&)>& fn_;
  mutable std::optional<SandboxResult> seen_;
};

}  // namespace bridge
}  // namespace patchbox

#endif  // PATCHBOX_CPP_BRIDGE_H
