/// @file patchbox/store.hpp
/// @brief What patchbox keeps under its root, reached without a shell: pending patches
/// (list, read, drop) and sessions (list, prune). Applying a pending patch is
/// patchbox::apply_pending() in `<patchbox/apply.hpp>`.
///
/// Every function takes the sandbox root; an empty path means the default root
/// (`$PATCHBOX_ROOT`, else `$HOME/.entropic/sandbox`). Pending patches are named
/// `<session-id>/<name>`, where the name is the delegation id, or `<id>.2`, `<id>.3`, … for
/// later patches of the same id in one session; a bare name that only one pending patch has
/// works too. Failures throw patchbox::Error (e.g. ErrorKind::Pending for an unknown or
/// ambiguous id). Thread-safe; safe against engines working under the same root at once.
///
/// @code
/// for (const patchbox::PendingPatch& p : patchbox::list_pending({})) {
///   std::cout << p.id << (p.recovered ? " (recovered)" : "") << '\n';
///   std::string text = patchbox::read_pending({}, p.id);
/// }
/// patchbox::PruneReport r = patchbox::prune_sessions({});  // recover dead sessions' work
/// @endcode
#ifndef PATCHBOX_STORE_HPP
#define PATCHBOX_STORE_HPP

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "patchbox/error.hpp"

/// patchbox's C++ API.
namespace patchbox {

/// A pending patch: a delegation's work waiting for the user's review.
struct PendingPatch {
  std::string id;                       ///< `<session-id>/<name>`, unique under the root.
  std::filesystem::path patch_path;     ///< The patch file.
  /// The base versions of the files it touches (for 3-way merging), when stored.
  std::optional<std::filesystem::path> preimages;
  std::string session;                  ///< The session that produced it.
  std::string delegation;               ///< The delegation that produced it.
  std::filesystem::path project;        ///< The project it applies to.
  std::uint64_t created = 0;            ///< When it was stored (seconds since the epoch).
  bool recovered = false;  ///< Recovered from a session that died before finishing.
  bool abandoned = false;  ///< Kept when its manager ended with the sandbox still open.
};

/// Every pending patch under @p root, oldest session first.
/// @throws Error (ErrorKind::Io when the root cannot be read).
std::vector<PendingPatch> list_pending(const std::filesystem::path& root);

/// The bytes of the pending patch @p id.
/// @throws Error ErrorKind::Pending (unknown or ambiguous id), ErrorKind::Io.
std::string read_pending(const std::filesystem::path& root, const std::string& id);

/// Removes the pending patch @p id (with its pre-images); the session directory goes too
/// when nothing else is left in it.
/// @throws Error ErrorKind::Pending (unknown or ambiguous id), ErrorKind::Io.
void drop_pending(const std::filesystem::path& root, const std::string& id);

/// A pending patch in an object store shared by many machines (`s3://bucket/prefix`, or a
/// directory of the same layout; endpoint and credentials from the AWS variables). Stored by
/// session::Manager::deliver_pending_patch() with Options::store, or by push_pending().
struct StoredPatch {
  std::string id;                 ///< `<session-id>/<name>`, unique in the store.
  std::string session;            ///< The session that produced it.
  std::string delegation;         ///< The delegation that produced it.
  std::string name;               ///< Its name in the session (`<id>`, `<id>.2`, …).
  std::string host;               ///< The machine that stored it.
  std::filesystem::path project;  ///< The project it was made from, on that machine.
  std::uint64_t created = 0;      ///< When it was stored (seconds since the epoch).
  bool recovered = false;         ///< Recovered from a session that died before finishing.
  bool abandoned = false;         ///< Kept when its manager ended with the sandbox open.
  std::uint64_t files = 0;        ///< Files it touches.
  std::uint64_t patch_bytes = 0;  ///< Size of the patch.
};

/// Every pending patch in the object store @p store_url, by session then name.
/// @throws Error ErrorKind::Store (unreachable, refused, damaged).
std::vector<StoredPatch> list_stored(const std::string& store_url);

/// The bytes of pending patch @p id in the object store (checked against its record).
/// @throws Error ErrorKind::Pending (unknown or ambiguous id), ErrorKind::Store.
std::string read_stored(const std::string& store_url, const std::string& id);

/// Removes pending patch @p id from the object store (its record, then its patch; shared
/// pre-images stay for other patches).
/// @throws Error ErrorKind::Pending, ErrorKind::Store.
void drop_stored(const std::string& store_url, const std::string& id);

/// What push_pending() did.
struct PushReport {
  /// (local id, id in the store) of each pending patch sent and removed locally.
  std::vector<std::pair<std::string, std::string>> pushed;
  /// (local id, error) of each pending patch that stays local.
  std::vector<std::pair<std::string, std::string>> failed;
};

/// Sends every local pending patch under @p root (empty: the default root) to the object
/// store, with its pre-images, removing each locally once stored; for work kept locally when
/// the store failed. Sending one twice stores it once.
/// @throws Error ErrorKind::Io (the root cannot be read), ErrorKind::Store (a bad URL).
PushReport push_pending(const std::filesystem::path& root, const std::string& store_url);

/// A session found under the root.
struct SessionStatus {
  std::string id;  ///< The session id (a ULID).
  bool live = false;  ///< Whether its engine still holds it.
  std::optional<std::filesystem::path> project;  ///< The project it snapshots, if known.
  std::vector<std::string> sandboxes;  ///< Its sandboxes (`d-<id>`).
  std::size_t pending = 0;             ///< How many pending patches it holds.
};

/// The sessions under @p root and whether each is alive.
/// @throws Error (ErrorKind::Io).
std::vector<SessionStatus> list_sessions(const std::filesystem::path& root);

/// What prune_sessions() did.
struct PruneReport {
  std::vector<std::string> pruned;  ///< Dead sessions whose sandboxes were removed.
  std::vector<std::filesystem::path> recovered;  ///< Pending patches written from their work.
  std::vector<std::string> live;    ///< Sessions left alone because they are alive.
  std::vector<std::string> errors;  ///< Problems met; the affected sandboxes stay.
  std::vector<std::string> deferred;  ///< Dead sessions left for a later prune.
  /// Shared lower layers removed: superseded ones no process holds and no session names,
  /// and ones a dead process was writing (the newest layer of each project stays).
  std::size_t shared_layers_removed = 0;
};

/// Recovers every dead session under @p root (its unfinished delegations become pending
/// patches marked recovered), then removes its sandboxes. Live sessions are untouched.
/// @throws Error (ErrorKind::Io).
PruneReport prune_sessions(const std::filesystem::path& root);

/// Every pending patch's record as JSON: the array `patchbox pending list --json` prints
/// (ids, project, origin, times, provenance — the command, its directory, exit status —
/// and the files with their change kind and line counts; see `docs/json.md`).
/// @throws Error (ErrorKind::Io).
std::string pending_records_json(const std::filesystem::path& root);

/// One pending patch's record as JSON, its patch text included, as `patchbox pending show
/// --json` prints it.
/// @throws Error ErrorKind::Pending (unknown or ambiguous id), ErrorKind::Io.
std::string pending_record_json(const std::filesystem::path& root, const std::string& id);

/// One pending patch's record in the object store @p store_url as JSON, its patch text
/// included, as `patchbox pending show --json --store URL` prints it (its `provenance` is
/// what session::Manager::deliver_pending_patch() was given).
/// @throws Error ErrorKind::Pending (unknown or ambiguous id), ErrorKind::Store.
std::string stored_record_json(const std::string& store_url, const std::string& id);

/// The sessions under the root as JSON, as `patchbox sessions --json` prints them.
/// @throws Error (ErrorKind::Io).
std::string sessions_json(const std::filesystem::path& root);

}  // namespace patchbox

#endif  // PATCHBOX_STORE_HPP
