// The C++ glue of <patchbox/store.hpp> over its cxx bridge (src/ffi/store.rs): pending
// patches and sessions under the root.
#include "patchbox/store.hpp"

#include <string>
#include <vector>

#include "patchbox/cpp/glue.h"
#include "patchbox/src/ffi/store.rs.h"
#include "rust/cxx.h"

namespace patchbox {
namespace {

using glue::bytes;
using glue::call;
using glue::path_of;
using glue::paths_of;

std::vector<std::string> strings_of(const rust::Vec<rust::String>& v) {
  std::vector<std::string> out;
  out.reserve(v.size());
  for (const auto& s : v) out.emplace_back(s);
  return out;
}

}  // namespace

std::vector<PendingPatch> list_pending(const std::filesystem::path& root) {
  return call([&] {
    std::vector<PendingPatch> out;
    for (const auto& e : bridge::list_pending(bytes(root))) {
      PendingPatch p;
      p.id = std::string(e.id);
      p.patch_path = path_of(e.patch_path);
      if (e.has_preimages) p.preimages = path_of(e.preimages);
      p.session = std::string(e.session);
      p.delegation = std::string(e.delegation);
      p.project = path_of(e.project);
      p.created = e.created;
      p.recovered = e.recovered;
      p.abandoned = e.abandoned;
      out.push_back(std::move(p));
    }
    return out;
  });
}

std::string read_pending(const std::filesystem::path& root, const std::string& id) {
  return call([&] { return glue::str_of(bridge::read_pending(bytes(root), id)); });
}

void drop_pending(const std::filesystem::path& root, const std::string& id) {
  call([&] { bridge::drop_pending(bytes(root), id); });
}

std::vector<StoredPatch> list_stored(const std::string& store_url) {
  return call([&] {
    std::vector<StoredPatch> out;
    for (const auto& e : bridge::list_stored(store_url)) {
      StoredPatch p;
      p.id = std::string(e.id);
      p.session = std::string(e.session);
      p.delegation = std::string(e.delegation);
      p.name = std::string(e.name);
      p.host = std::string(e.host);
      p.project = path_of(e.project);
      p.created = e.created;
      p.recovered = e.recovered;
      p.abandoned = e.abandoned;
      p.files = e.files;
      p.patch_bytes = e.patch_bytes;
      out.push_back(std::move(p));
    }
    return out;
  });
}

std::string read_stored(const std::string& store_url, const std::string& id) {
  return call([&] { return glue::str_of(bridge::read_stored(store_url, id)); });
}

void drop_stored(const std::string& store_url, const std::string& id) {
  call([&] { bridge::drop_stored(store_url, id); });
}

PushReport push_pending(const std::filesystem::path& root, const std::string& store_url) {
  return call([&] {
    auto r = bridge::push_pending(bytes(root), store_url);
    PushReport out;
    for (const auto& p : r.pushed) out.pushed.emplace_back(std::string(p.local_id), std::string(p.outcome));
    for (const auto& p : r.failed) out.failed.emplace_back(std::string(p.local_id), std::string(p.outcome));
    return out;
  });
}

std::string pending_records_json(const std::filesystem::path& root) {
  return call([&] { return std::string(bridge::pending_records_json(bytes(root))); });
}

std::string pending_record_json(const std::filesystem::path& root, const std::string& id) {
  return call([&] { return std::string(bridge::pending_record_json(bytes(root), id)); });
}

std::string stored_record_json(const std::string& store_url, const std::string& id) {
  return call([&] { return std::string(bridge::stored_record_json(store_url, id)); });
}

std::string sessions_json(const std::filesystem::path& root) {
  return call([&] { return std::string(bridge::sessions_json(bytes(root))); });
}

std::vector<SessionStatus> list_sessions(const std::filesystem::path& root) {
  return call([&] {
    std::vector<SessionStatus> out;
    for (const auto& s : bridge::list_sessions(bytes(root))) {
      SessionStatus st;
      st.id = std::string(s.id);
      st.live = s.live;
      if (!s.project.empty()) st.project = path_of(s.project);
      st.sandboxes = strings_of(s.sandboxes);
      st.pending = s.pending;
      out.push_back(std::move(st));
    }
    return out;
  });
}

PruneReport prune_sessions(const std::filesystem::path& root) {
  return call([&] {
    bridge::FfiPruneReport r = bridge::prune_sessions(bytes(root));
    PruneReport out;
    out.pruned = strings_of(r.pruned);
    out.recovered = paths_of(r.recovered);
    out.live = strings_of(r.live);
    out.errors = strings_of(r.errors);
    out.deferred = strings_of(r.deferred);
    out.shared_layers_removed = r.shared_layers_removed;
    return out;
  });
}

}  // namespace patchbox
