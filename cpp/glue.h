// Private to the library (not installed): helpers shared by the C++ glue files (sandbox.cpp,
// apply.cpp, error.cpp) over the cxx bridges (src/ffi/): bridge errors -> patchbox::Error, and byte and
// path conversions.
#ifndef PATCHBOX_CPP_GLUE_H
#define PATCHBOX_CPP_GLUE_H

#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "patchbox/error.hpp"
#include "rust/cxx.h"

namespace patchbox {
namespace glue {

using Bytes = rust::Slice<const std::uint8_t>;

/// Separates the kind from the message in a bridge error (see src/ffi/).
constexpr char kKindSeparator = '\x1f';

/// An ErrorKind and its stable name (the Rust `Error::kind()`).
struct KindName {
  ErrorKind kind;
  const char* name;
};

/// Every ErrorKind with its name.
inline constexpr KindName kKinds[] = {
    {ErrorKind::Io, "io"},
    {ErrorKind::Containment, "containment"},
    {ErrorKind::InvalidId, "invalid_id"},
    {ErrorKind::IdInUse, "id_in_use"},
    {ErrorKind::UnknownSandbox, "unknown_sandbox"},
    {ErrorKind::NotADirectory, "not_a_directory"},
    {ErrorKind::Git, "git"},
    {ErrorKind::PatchParse, "patch_parse"},
    {ErrorKind::ApplyFailed, "apply_failed"},
    {ErrorKind::Pending, "pending"},
    {ErrorKind::Callback, "callback"},
    {ErrorKind::Store, "store"},
    {ErrorKind::Internal, "internal"},
    {ErrorKind::Plan, "plan"},
};

// Every ErrorKind (Plan is the last) has its row; the C++ tests check the names before
// Internal against the Rust library's Error::KINDS. The plan bridge's errors (`plan_<kind>`)
// are decoded by cpp/plan_errors.cpp, not by kind_from().
static_assert(sizeof(kKinds) / sizeof(kKinds[0]) == static_cast<std::size_t>(ErrorKind::Plan) + 1,
              "kKinds must list every ErrorKind");

inline ErrorKind kind_from(std::string_view name) {
  for (const auto& k : kKinds) {
    if (name == k.name) return k.kind;
  }
  return ErrorKind::Internal;
}

/// "<kind>\x1f<message>" -> patchbox::Error.
inline Error from_rust(const rust::Error& e) {
  std::string_view what(e.what());
  auto sep = what.find(kKindSeparator);
  if (sep == std::string_view::npos) return Error(ErrorKind::Internal, std::string(what));
  return Error(kind_from(what.substr(0, sep)), std::string(what.substr(sep + 1)));
}

/// Runs @p f; whatever it throws leaves as patchbox::Error.
template <class F>
auto call(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const rust::Error& e) {
    throw from_rust(e);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorKind::Internal, e.what());
  }
}

inline Bytes bytes(const std::string& s) {
  return Bytes(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
}

inline Bytes bytes(const std::filesystem::path& p) { return bytes(p.native()); }

inline rust::Vec<std::uint8_t> to_vec(const std::string& s) {
  rust::Vec<std::uint8_t> v;
  v.reserve(s.size());
  for (char c : s) v.push_back(static_cast<std::uint8_t>(c));
  return v;
}

inline std::string str_of(const rust::Vec<std::uint8_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size());
}

inline std::filesystem::path path_of(const rust::Vec<std::uint8_t>& v) {
  return std::filesystem::path(str_of(v));
}

/// Paths out of a bridge vector of byte paths (`FfiPath`, `FfiRelPath`: any struct with `bytes`).
template <class BytePath>
std::vector<std::filesystem::path> paths_of(const rust::Vec<BytePath>& v) {
  std::vector<std::filesystem::path> out;
  out.reserve(v.size());
  for (const auto& p : v) out.push_back(path_of(p.bytes));
  return out;
}

}  // namespace glue
}  // namespace patchbox

#endif  // PATCHBOX_CPP_GLUE_H
