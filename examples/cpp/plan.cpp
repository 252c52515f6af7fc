// A small plan executor on <patchbox/plan.hpp>: a plan touches two directories of a project;
// its Execute phase writes every change through a copy_on_write sandbox per directory (the
// project stays untouched), its Review phase prints each sandbox's diff, and its Apply phase
// commits the whole plan at once with commit_all() — all or nothing.
//
//   patchbox_example_plan                  demo on a generated project in a temp dir
//   patchbox_example_plan --demo WORKDIR   the same in WORKDIR (must be new or empty)
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include <patchbox/plan.hpp>

namespace fs = std::filesystem;
namespace plan = patchbox::plan;

/// One write of a plan: a file of a resource (a directory), and its new content.
struct Step {
  std::string resource_id;
  fs::path resource_dir;
  fs::path file;  // relative to the resource
  std::string content;
};

/// Runs plans: each resource gets its sandbox on first use, every write goes there.
class PlanExecutor {
 public:
  explicit PlanExecutor(const fs::path& root) : mgr_(plan::SandboxManager::open(root)) {}

  /// Execute: writes every step into its resource's sandbox, never into the project.
  void execute(const std::string& plan_id, const std::vector<Step>& steps) {
    for (const Step& s : steps) {
      std::shared_ptr<plan::Sandbox> sb = mgr_.get_or_create_sandbox(
          plan_id, s.resource_id, s.resource_dir, plan::strategy::copy_on_write);
      const fs::path target = sb->get_path(s.file);  // the sandbox's copy of the file
      fs::create_directories(target.parent_path());
      std::ofstream(target, std::ios::binary | std::ios::trunc) << s.content;
    }
  }

  /// Review: each sandbox's changes, per file and as a patch.
  void review(const std::string& plan_id) const {
    for (const auto& sb : mgr_.list_sandboxes(plan_id)) {
      const std::string resource = sb->context() ? sb->context()->resource_id : sb->sandbox_id();
      plan::SandboxDiff diff = sb->diff();
      for (const plan::DiffEntry& e : diff.entries) {
        std::cout << resource << ": " << plan::to_string(e.operation) << " " << e.path << "\n";
      }
      std::cout << diff.patch;
    }
  }

  /// Apply: every sandbox of the plan into its original, or none of them.
  bool apply(const std::string& plan_id) {
    try {
      std::vector<plan::CommitResult> results = mgr_.commit_all(plan_id);
      if (!results.empty() && !results[0].success) {
        // A sandbox-level failure (a conflict): the committed ones were rolled back.
        std::cout << "commit_all refused: " << results[0].error.value_or("") << "\n";
        mgr_.rollback_all(plan_id);  // discard the plan's work
        return false;
      }
      std::cout << "commit_all: " << results.size() << " sandboxes committed\n";
      for (const plan::CommitResult& r : results) {
        std::cout << "  " << r.sandbox_id << ": " << r.changed_files.size() << " changed, "
                  << r.added_files.size() << " added, " << r.deleted_files.size()
                  << " deleted (undo record " << r.commit_ref.value_or("-") << ")\n";
      }
      return true;
    } catch (const plan::AtomicCommitError& e) {
      std::cout << "commit_all refused: " << e.what() << "\n  rolled back:";
      for (const auto& id : e.rolled_back_ids()) std::cout << " " << id;
      std::cout << "\n";
      mgr_.rollback_all(plan_id);  // discard the plan's work
      return false;
    }
  }

  /// Removes every sandbox of the plan.
  void finish(const std::string& plan_id) {
    mgr_.cleanup_all(plan_id);
    std::cout << "plan " << plan_id << " cleaned up\n";
  }

 private:
  plan::SandboxManager mgr_;
};

static std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int main(int argc, char** argv) {
  fs::path work;
  if (argc == 3 && std::strcmp(argv[1], "--demo") == 0) {
    work = argv[2];
    if (fs::exists(work) && !fs::is_empty(work)) {
      std::cerr << work << " exists and is not empty\n";
      return 2;
    }
    fs::create_directories(work);
  } else if (argc == 1) {
    std::string tmpl = (fs::temp_directory_path() / "patchbox-plan-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) return 2;
    work = tmpl;
  } else {
    std::cerr << "usage: " << argv[0] << " [--demo WORKDIR]\n";
    return 2;
  }
  const fs::path app = work / "project" / "app";
  const fs::path docs = work / "project" / "docs";
  fs::create_directories(app / "src");
  fs::create_directories(docs);
  std::ofstream(app / "src" / "main.c") << "int main(void) { return 1; }\n";
  std::ofstream(docs / "README.md") << "# app\n";

  try {
    PlanExecutor executor(work / "root");  // the library's root, outside the project
    const std::string plan_id = "release-1";
    executor.execute(plan_id, {
                                  {"app", app, "src/main.c", "int main(void) { return 0; }\n"},
                                  {"docs", docs, "CHANGELOG.md", "# 1.0\n\n* main returns 0\n"},
                              });
    std::cout << "project untouched: "
              << (read(app / "src" / "main.c") == "int main(void) { return 1; }\n" ? "yes" : "no")
              << "\n";
    executor.review(plan_id);
    if (!executor.apply(plan_id)) return 1;
    std::cout << "project now: app/src/main.c = " << read(app / "src" / "main.c")
              << "             docs/CHANGELOG.md exists: "
              << (fs::exists(docs / "CHANGELOG.md") ? "yes" : "no") << "\n";
    executor.finish(plan_id);
  } catch (const patchbox::Error& e) {
    std::cerr << "patchbox error (" << patchbox::to_string(e.kind()) << "): " << e.what() << "\n";
    return 1;
  }
  if (argc == 1) fs::remove_all(work);  // the generated demo directory
  return 0;
}
