// The C++ glue of patchbox::Error (include/patchbox/error.hpp): the kind names, and the list
// of kinds the linked Rust library reports, over its cxx bridge (src/ffi/error.rs).
#include "patchbox/error.hpp"

#include <string>
#include <vector>

#include "patchbox/cpp/glue.h"
#include "patchbox/src/ffi/error.rs.h"
#include "rust/cxx.h"

namespace patchbox {

const char* to_string(ErrorKind kind) noexcept {
  for (const auto& k : glue::kKinds) {
    if (k.kind == kind) return k.name;
  }
  return "internal";
}

Error::Error(ErrorKind kind, const std::string& message)
    : std::runtime_error(message), kind_(kind) {}

Error::~Error() = default;

std::vector<std::string> library_error_kinds() {
  std::vector<std::string> out;
  for (const auto& k : bridge::error_kinds()) out.emplace_back(k);
  return out;
}

}  // namespace patchbox
