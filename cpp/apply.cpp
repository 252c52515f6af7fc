// The C++ glue of patchbox::apply_patch / patchbox::undo_apply (include/patchbox/apply.hpp)
// over its cxx bridge (src/ffi/apply.rs): options in, reports out, rust::Error -> patchbox::Error.
#include "patchbox/apply.hpp"

#include <utility>

#include "patchbox/cpp/glue.h"
#include "patchbox/src/ffi/apply.rs.h"
#include "rust/cxx.h"

namespace patchbox {
namespace {

using glue::bytes;
using glue::call;
using glue::path_of;
using glue::paths_of;
using glue::to_vec;

bridge::FfiApplyOptions options_in(const ApplyOptions& o) {
  bridge::FfiApplyOptions out;
  out.check = o.check;
  out.has_preimages = o.preimages.has_value();
  if (o.preimages) out.preimages = to_vec(o.preimages->native());
  out.conflict_markers = o.conflict_markers;
  out.has_undo_dir = o.undo_dir.has_value();
  if (o.undo_dir) out.undo_dir = to_vec(o.undo_dir->native());
  out.strip = o.strip;
  out.allow_outside_symlinks = o.allow_outside_symlinks;
  return out;
}

FileStatus status_of(bridge::FfiFileStatus s) {
  switch (s) {
    case bridge::FfiFileStatus::Applied:
      return FileStatus::Applied;
    case bridge::FfiFileStatus::Merged:
      return FileStatus::Merged;
    case bridge::FfiFileStatus::AlreadyApplied:
      return FileStatus::AlreadyApplied;
    case bridge::FfiFileStatus::Conflict:
      return FileStatus::Conflict;
    case bridge::FfiFileStatus::Refused:
      return FileStatus::Refused;
  }
  throw Error(ErrorKind::Internal, "unknown file status from the Rust side");
}

Outcome outcome_of(bridge::FfiOutcome o) {
  switch (o) {
    case bridge::FfiOutcome::Applied:
      return Outcome::Applied;
    case bridge::FfiOutcome::AppliedWithConflicts:
      return Outcome::AppliedWithConflicts;
    case bridge::FfiOutcome::AlreadyApplied:
      return Outcome::AlreadyApplied;
    case bridge::FfiOutcome::Refused:
      return Outcome::Refused;
  }
  throw Error(ErrorKind::Internal, "unknown outcome from the Rust side");
}

FileReport file_report_of(const bridge::FfiFileReport& f) {
  FileReport out;
  out.path = path_of(f.path);
  if (f.has_old_path) out.old_path = path_of(f.old_path);
  out.status = status_of(f.status);
  out.detail = std::string(f.detail);
  out.conflicts.reserve(f.conflicts.size());
  for (const auto& c : f.conflicts) {
    out.conflicts.push_back(HunkConflict{c.hunk, std::string(c.header), std::string(c.reason)});
  }
  out.markers_written = f.markers_written;
  return out;
}

ApplyReport report_of(const bridge::FfiApplyReport& r) {
  ApplyReport out;
  out.files.reserve(r.files.size());
  for (const auto& f : r.files) out.files.push_back(file_report_of(f));
  out.outcome = outcome_of(r.outcome);
  out.check_only = r.check_only;
  if (r.has_undo_dir) out.undo_dir = path_of(r.undo_dir);
  out.warnings.reserve(r.warnings.size());
  for (const auto& w : r.warnings) out.warnings.emplace_back(w);
  out.text = std::string(r.text);
  out.json = std::string(r.json);
  return out;
}

UndoReport undo_report_of(const bridge::FfiUndoReport& r) {
  UndoReport out;
  out.restored = paths_of(r.restored);
  out.overwritten = paths_of(r.overwritten);
  out.already_undone = r.already_undone;
  for (const auto& w : r.warnings) out.warnings.emplace_back(w);
  return out;
}

}  // namespace

const char* to_string(FileStatus status) noexcept {
  switch (status) {
    case FileStatus::Applied:
      return "applied";
    case FileStatus::Merged:
      return "merged";
    case FileStatus::AlreadyApplied:
      return "already applied";
    case FileStatus::Conflict:
      return "conflict";
    case FileStatus::Refused:
      return "refused";
  }
  return "refused";
}

const char* to_string(Outcome outcome) noexcept {
  switch (outcome) {
    case Outcome::Applied:
      return "applied";
    case Outcome::AppliedWithConflicts:
      return "applied with conflicts";
    case Outcome::AlreadyApplied:
      return "already applied";
    case Outcome::Refused:
      return "refused";
  }
  return "refused";
}

ApplyReport apply_patch(const std::filesystem::path& project_dir, const std::string& patch,
                        const ApplyOptions& options) {
  return call([&] {
    return report_of(bridge::apply_patch(bytes(project_dir), bytes(patch), options_in(options)));
  });
}

UndoReport undo_apply(const std::filesystem::path& project_dir,
                      const std::filesystem::path& undo_dir, bool force) {
  return call([&] {
    return undo_report_of(bridge::undo_apply(bytes(project_dir), bytes(undo_dir), force));
  });
}

ApplyReport apply_pending(const std::filesystem::path& root, const std::string& id,
                          const ApplyOptions& options,
                          const std::optional<std::filesystem::path>& project) {
  return call([&] {
    static const std::filesystem::path kNone;
    return report_of(bridge::apply_pending(bytes(root), id, bytes(project ? *project : kNone),
                                           options_in(options)));
  });
}

ApplyReport apply_stored(const std::string& store_url, const std::string& id,
                         const std::filesystem::path& project, const std::filesystem::path& root,
                         const ApplyOptions& options) {
  return call([&] {
    return report_of(
        bridge::apply_stored(store_url, id, bytes(project), bytes(root), options_in(options)));
  });
}

PartialApply apply_pending_selected(const std::filesystem::path& root, const std::string& id,
                                    const Selection& selection, const ApplyOptions& options,
                                    const std::optional<std::filesystem::path>& project) {
  return call([&] {
    static const std::filesystem::path kNone;
    auto strings = [](const std::vector<std::string>& v) {
      rust::Vec<rust::String> out;
      out.reserve(v.size());
      for (const auto& s : v) out.push_back(rust::String(s));
      return out;
    };
    auto r = bridge::apply_pending_selected(bytes(root), id, bytes(project ? *project : kNone),
                                            options_in(options), strings(selection.only),
                                            strings(selection.exclude), strings(selection.hunks));
    PartialApply out;
    out.report = report_of(r.report);
    if (r.has_remaining) out.remaining = std::string(r.remaining);
    return out;
  });
}

ApplyReport apply_recorded(const std::filesystem::path& root,
                           const std::filesystem::path& project_dir, const std::string& patch,
                           const ApplyOptions& options) {
  return call([&] {
    return report_of(
        bridge::apply_recorded(bytes(root), bytes(project_dir), bytes(patch), options_in(options)));
  });
}

std::vector<ApplyRecord> list_applies(const std::filesystem::path& root,
                                      const std::optional<std::filesystem::path>& project_dir) {
  return call([&] {
    static const std::filesystem::path kAll;
    std::vector<ApplyRecord> out;
    for (const auto& r : bridge::list_applies(bytes(root), bytes(project_dir ? *project_dir : kAll))) {
      ApplyRecord a;
      a.id = std::string(r.id);
      a.dir = path_of(r.dir);
      a.project = path_of(r.project);
      a.created = r.created;
      a.paths = r.paths;
      switch (r.state) {
        case bridge::FfiRecordState::Applied:
          a.state = ApplyRecord::State::Applied;
          break;
        case bridge::FfiRecordState::Undone:
          a.state = ApplyRecord::State::Undone;
          break;
        default:
          a.state = ApplyRecord::State::Incomplete;
          break;
      }
      out.push_back(std::move(a));
    }
    return out;
  });
}

UndoReport undo_last_apply(const std::filesystem::path& root,
                           const std::filesystem::path& project_dir, bool force) {
  return call([&] {
    return undo_report_of(bridge::undo_last_apply(bytes(root), bytes(project_dir), force));
  });
}

void drop_apply_record(const std::filesystem::path& root, const std::string& id) {
  call([&] { bridge::drop_apply_record(bytes(root), id); });
}

}  // namespace patchbox
