/// @file patchbox/error.hpp
/// @brief patchbox::Error, the one exception type of patchbox's C++ API, and its ErrorKind.
///
/// Included by `<patchbox/sandbox.hpp>` and `<patchbox/apply.hpp>`; there is no need to
/// include it directly. The kinds mirror the Rust `patchbox::Error` variants one to one (see
/// library_error_kinds()).
#ifndef PATCHBOX_ERROR_HPP
#define PATCHBOX_ERROR_HPP

#include <stdexcept>
#include <string>
#include <vector>

/// patchbox's C++ API.
namespace patchbox {

/// What went wrong: one value per variant of the Rust `patchbox::Error` (the values before
/// Internal, in its order), then Internal and Plan, the C++ side's own.
enum class ErrorKind {
  Io,              ///< A system call failed; the message names the operation and the path.
  Containment,     ///< A path would leave the session directory (or the project, for an
                   ///< apply); nothing was touched.
  InvalidId,       ///< A delegation id that is not 1–128 bytes of `[A-Za-z0-9._-]`, or is `.`/`..`.
  IdInUse,         ///< The delegation id is already used in this session.
  UnknownSandbox,  ///< A sandbox this manager does not know (never created, or discarded).
  NotADirectory,   ///< The project directory is missing or not a directory.
  Git,             ///< A git file (index, config) of the project could not be understood.
  PatchParse,      ///< A patch could not be parsed.
  ApplyFailed,     ///< A patch or an undo could not be carried out; the project was left as
                   ///< it was (rolled back).
  Pending,         ///< A pending patch id that matches nothing, or more than one patch.
  Callback,        ///< A callback supplied by the caller failed.
  Store,           ///< An object store (`s3://…` or a store directory) failed or holds
                   ///< something damaged; the message names the store, operation and key.
  Internal,        ///< A bug or resource exhaustion inside the library (e.g. a Rust panic).
  Plan,            ///< A plan-layer error: patchbox::plan::SandboxError or a subclass of it
                   ///< (`<patchbox/plan.hpp>`; the Rust `patchbox::plan::SandboxError`, a
                   ///< type of its own, not a variant of `patchbox::Error`).
};

/// The stable lower-case name of a kind, as the Rust `Error::kind()` and the CLI spell it
/// (`"io"`, `"containment"`, `"invalid_id"`, …, `"internal"`).
const char* to_string(ErrorKind kind) noexcept;

/// The kind names the linked Rust library can report (its `Error::KINDS`), in its order.
///
/// Each has an ErrorKind whose to_string() is that name; ErrorKind::Internal and
/// ErrorKind::Plan (`"plan"`) are the C++ side's own. The library's tests check the two lists
/// agree, so a kind added on one side only fails them.
std::vector<std::string> library_error_kinds();

/// The one exception type patchbox throws.
class Error : public std::runtime_error {
 public:
  /// An error of @p kind; what() returns @p message.
  Error(ErrorKind kind, const std::string& message);
  /// Out of line: anchors the vtable and type info in the library.
  ~Error() override;
  /// Copyable, as every exception type.
  Error(const Error&) = default;
  /// Copy assignment.
  Error& operator=(const Error&) = default;
  /// What went wrong; the message (what()) has the details.
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace patchbox

#endif  // PATCHBOX_ERROR_HPP
