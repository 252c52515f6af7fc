// Review and accept from C++, as an IDE plugin would: the pending store's JSON records, part of
// a pending patch accepted (some hunks), the rest applied later, both undone.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <patchbox/apply.hpp>
#include <patchbox/sandbox.hpp>
#include <patchbox/store.hpp>

#include "expect_error.hpp"
#include "test_util.hpp"

namespace {

namespace fs = std::filesystem;
using patchbox::ErrorKind;
using testutil::contains;
using testutil::read_file;
using testutil::TempDir;
using testutil::write_file;

std::string numbered(int n) {
  std::string s;
  for (int i = 1; i <= n; ++i) s += std::to_string(i) + "\n";
  return s;
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto at = s.find(from);
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

class Review : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(project / "a.txt", numbered(30));
    write_file(project / "b.txt", "hi\n");
  }

  /// A pending patch with two hunks in a.txt (lines 2 and 28) and one in b.txt.
  std::string leave_pending() {
    patchbox::Options o;
    o.root = root.path();
    patchbox::SandboxManager mgr(project.path(), o);
    auto sb = mgr.create_sandbox("task");
    std::string a = replace(replace(numbered(30), "\n2\n", "\ntwo\n"), "\n28\n", "\ntwenty-eight\n");
    write_file(sb.path / "a.txt", a);
    write_file(sb.path / "b.txt", "hi\nthere\n");
    auto done = mgr.complete_sandbox(sb, [](const patchbox::SandboxResult&) {
      return patchbox::Decision::Reject;
    });
    EXPECT_EQ(done.routed, patchbox::Completion::Routed::Pending);
    return mgr.session_id() + "/task";
  }

  TempDir project{"pb-review-project"};
  TempDir root{"pb-review-root"};
};

TEST_F(Review, RecordsAreTheCliJson) {
  std::string id = leave_pending();
  std::string list = patchbox::pending_records_json(root.path());
  EXPECT_EQ(list.front(), '[');
  EXPECT_TRUE(contains(list, "\"id\": \"" + id + "\"")) << list;
  EXPECT_TRUE(contains(list, "\"origin\": \"delegation\"")) << list;
  EXPECT_TRUE(contains(list, "\"path\": \"a.txt\"")) << list;
  EXPECT_TRUE(contains(list, "\"change\": \"modified\"")) << list;
  EXPECT_TRUE(contains(list, "\"hunks\": 2")) << list;
  std::string one = patchbox::pending_record_json(root.path(), id);
  EXPECT_TRUE(contains(one, "\"patch\": \"diff --git a/a.txt b/a.txt\\n")) << one;
  EXPECT_TRUE(contains(patchbox::sessions_json(root.path()), "\"pending\": 1"));
  EXPECT_PB_ERROR(patchbox::pending_record_json(root.path(), "nope"), ErrorKind::Pending);
}

TEST_F(Review, SomeHunksNowTheRestLaterThenUndo) {
  std::string id = leave_pending();
  patchbox::Selection sel;
  sel.hunks = {"a.txt:2"};
  auto part = patchbox::apply_pending_selected(root.path(), id, sel);
  ASSERT_TRUE(part.report.ok()) << part.report.text;
  ASSERT_TRUE(part.remaining.has_value());
  EXPECT_TRUE(contains(part.report.json, "\"remaining\": \"" + *part.remaining + "\""))
      << part.report.json;
  std::string a = read_file(project / "a.txt");
  EXPECT_TRUE(contains(a, "\n2\n") && contains(a, "\ntwenty-eight\n")) << a;
  EXPECT_EQ(read_file(project / "b.txt"), "hi\n");

  // The rest: the other hunk of a.txt and b.txt, applicable later.
  auto rest = patchbox::apply_pending(root.path(), *part.remaining);
  ASSERT_TRUE(rest.ok()) << rest.text;
  EXPECT_TRUE(contains(read_file(project / "a.txt"), "\ntwo\n"));
  EXPECT_EQ(read_file(project / "b.txt"), "hi\nthere\n");
  EXPECT_TRUE(patchbox::list_pending(root.path()).empty());

  patchbox::undo_last_apply(root.path(), project.path());
  patchbox::undo_last_apply(root.path(), project.path());
  EXPECT_EQ(read_file(project / "a.txt"), numbered(30));
  EXPECT_EQ(read_file(project / "b.txt"), "hi\n");
}

TEST_F(Review, ABadSelectionIsAPendingErrorAndChangesNothing) {
  std::string id = leave_pending();
  patchbox::Selection sel;
  sel.only = {"nope.txt"};
  EXPECT_PB_ERROR(patchbox::apply_pending_selected(root.path(), id, sel), ErrorKind::Pending);
  sel.only.clear();
  sel.hunks = {"a.txt:9"};
  EXPECT_PB_ERROR(patchbox::apply_pending_selected(root.path(), id, sel), ErrorKind::Pending);
  EXPECT_EQ(read_file(project / "a.txt"), numbered(30));
  EXPECT_EQ(patchbox::list_pending(root.path()).size(), 1u);
}

TEST_F(Review, ProvenanceIsKeptAndInTheRecord) {
  patchbox::Options o;
  o.root = root.path();
  patchbox::SandboxManager mgr(project.path(), o);
  auto sb = mgr.create_sandbox("tool");
  write_file(sb.path / "b.txt", "hi\nagain\n");
  auto result = mgr.finalize_sandbox(sb);
  patchbox::Provenance p;
  p.command = {"agent", "--say", "it's \"quoted\""};
  p.cwd = project.path();
  p.exit_status = 3;
  p.started_ms = 100;
  p.ended_ms = 250;
  mgr.write_pending_patch("tool", result.patch, p);
  mgr.discard_sandbox(sb);
  std::string rec = patchbox::pending_record_json(root.path(), "tool");
  EXPECT_TRUE(contains(rec, "\"it's \\\"quoted\\\"\"")) << rec;
  EXPECT_TRUE(contains(rec, "\"exit_status\": 3")) << rec;
  EXPECT_TRUE(contains(rec, "\"started_ms\": 100")) << rec;
  EXPECT_TRUE(contains(rec, "\"ended_ms\": 250")) << rec;
  EXPECT_TRUE(contains(rec, "\"cwd\": \"" + project.path().string() + "\"")) << rec;
}

}  // namespace
