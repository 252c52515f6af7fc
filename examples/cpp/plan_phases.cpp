// A plan engine with phases and checkpoints (<patchbox/checkpoint.hpp>) over three kinds of
// resource in one plan:
//
//   notes  a directory          copy_on_write
//   repo   a git repository     git_worktree
//   db     a SQLite database    transaction_rollback (<patchbox/sqlite.hpp>)
//
// Every sandbox is made before the Execute phase, so the PhaseRunner's `pre_execute`
// checkpoint covers all three. The first Execute attempt writes to each and then throws: the
// runner rolls every sandbox back to its checkpoint (the SQLite one to a savepoint). The
// second attempt succeeds; Apply commits the three atomically (commit_all) after a
// `pre_apply` checkpoint. The originals change only then.
//
//   patchbox_example_plan_phases                  demo in a generated temp dir
//   patchbox_example_plan_phases --demo WORKDIR   the same in WORKDIR (must be new or empty)
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include <patchbox/checkpoint.hpp>
#include <patchbox/plan.hpp>
#include <patchbox/sqlite.hpp>

namespace fs = std::filesystem;
namespace plan = patchbox::plan;

namespace {

constexpr const char* kTransactionRollback = "transaction_rollback";

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << content;
}

/// Runs a shell command; throws when it fails.
void sh(const std::string& cmd) {
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("command failed: " + cmd);
}

/// A shell command's first line of output.
std::string sh_line(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    if (std::fgets(buf, sizeof buf, p)) out = buf;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

/// The number of entries of each sandbox's diff, as `notes=N repo=N db=N`.
std::string diff_sizes(const std::vector<std::pair<std::string, std::shared_ptr<plan::Sandbox>>>&
                           sandboxes) {
  std::string out;
  for (const auto& [name, sb] : sandboxes) {
    if (!out.empty()) out += " ";
    out += name + "=" + std::to_string(sb->diff().entries.size());
  }
  return out;
}

/// `SELECT count(*) FROM tasks` as another connection sees it (a throwaway plan's sandbox).
std::int64_t committed_tasks(plan::SandboxManager& mgr, const fs::path& db) {
  std::int64_t n = -1;
  {
    auto reader = mgr.get_or_create_sandbox("reader", "db", db, kTransactionRollback);
    plan::SqlRows r = plan::execute(*reader, "SELECT count(*) FROM tasks");
    n = std::get<std::int64_t>(r.rows.at(0).at(0));
  }
  mgr.cleanup_all("reader");
  return n;
}

int run(const fs::path& work) {
  // ---- the resources ----
  const fs::path notes = work / "notes";
  const fs::path repo = work / "repo";
  const fs::path db = work / "data" / "app.db";
  write(notes / "README.txt", "notes\n");
  write(repo / "README.md", "# repo\n");
  ::setenv("GIT_AUTHOR_NAME", "demo", 1);
  ::setenv("GIT_AUTHOR_EMAIL", "demo@example.com", 1);
  ::setenv("GIT_COMMITTER_NAME", "demo", 1);
  ::setenv("GIT_COMMITTER_EMAIL", "demo@example.com", 1);
  sh("git -C " + quoted(repo) + " init -q && git -C " + quoted(repo) +
     " add -A && git -C " + quoted(repo) + " commit -q -m initial");
  write(db, "");  // an empty file is an empty SQLite database

  plan::SandboxManager mgr = plan::SandboxManager::open(work / "root");
  plan::CheckpointManager checkpoints = plan::CheckpointManager::open(work / "root");

  // The database's schema, committed by a setup plan of its own.
  {
    auto setup = mgr.get_or_create_sandbox("setup", "db", db, kTransactionRollback);
    plan::execute(*setup, "CREATE TABLE tasks(id INTEGER PRIMARY KEY, title TEXT NOT NULL)");
  }
  mgr.commit_all("setup");
  mgr.cleanup_all("setup");
  std::cout << "setup: notes/, git repo, app.db with table tasks\n";

  // ---- the plan: one sandbox per resource, made before the Execute phase ----
  const std::string plan_id = "release-2";
  std::vector<std::pair<std::string, std::shared_ptr<plan::Sandbox>>> sandboxes = {
      {"notes", mgr.get_or_create_sandbox(plan_id, "notes", notes, plan::strategy::copy_on_write)},
      {"repo", mgr.get_or_create_sandbox(plan_id, "repo", repo, plan::strategy::git_worktree)},
      {"db", mgr.get_or_create_sandbox(plan_id, "db", db, kTransactionRollback)},
  };
  plan::Sandbox& notes_sb = *sandboxes[0].second;
  plan::Sandbox& repo_sb = *sandboxes[1].second;
  plan::Sandbox& db_sb = *sandboxes[2].second;
  for (const auto& [name, sb] : sandboxes) {
    std::cout << "sandbox " << name << ": " << sb->strategy() << "\n";
  }

  plan::PhaseRunner runner(mgr, &checkpoints);

  // ---- Execute, attempt 1: writes everywhere, then fails ----
  try {
    runner.execute(plan_id, [&] {
      write(notes_sb.get_path("draft.txt"), "a wrong draft\n");
      write(repo_sb.get_path("wrong.txt"), "wrong\n");
      plan::execute(db_sb, "INSERT INTO tasks VALUES (?1, ?2)",
                    {plan::SqlValue(std::int64_t{99}), plan::SqlValue(std::string("wrong"))});
      std::cout << "execute #1 wrote: " << diff_sizes(sandboxes) << "\n";
      throw std::runtime_error("the model produced an invalid step");
    });
    std::cout << "execute #1 succeeded (unexpected)\n";
    return 1;
  } catch (const plan::PhaseError& e) {
    std::cout << "execute #1 failed (" << e.phase() << "): " << e.reason() << "\n";
    std::cout << "rolled back to pre_execute: " << e.restored().size() << " sandboxes, "
              << e.rollback_failures().size() << " failures\n";
    for (const auto& [id, why] : e.rollback_failures()) {
      std::cout << "  " << id << ": " << why << "\n";
    }
  }
  std::cout << "after rollback: " << diff_sizes(sandboxes) << "\n";

  // ---- Execute, attempt 2 ----
  runner.execute(plan_id, [&] {
    write(notes_sb.get_path("release.txt"), "release 2 notes\n");
    write(repo_sb.get_path("feature.txt"), "the feature\n");
    plan::execute(db_sb, "INSERT INTO tasks VALUES (?1, ?2), (?3, ?4)",
                  {plan::SqlValue(std::int64_t{1}), plan::SqlValue(std::string("ship")),
                   plan::SqlValue(std::int64_t{2}), plan::SqlValue(std::string("announce"))});
  });
  std::cout << "execute #2 succeeded: " << diff_sizes(sandboxes) << "\n";
  for (const auto& [name, sb] : sandboxes) {
    for (const plan::DiffEntry& e : sb->diff().entries) {
      std::cout << "  " << name << ": " << plan::to_string(e.operation) << " " << e.path << "\n";
    }
  }
  std::cout << "originals untouched: "
            << (!fs::exists(notes / "release.txt") && !fs::exists(repo / "feature.txt") &&
                        committed_tasks(mgr, db) == 0
                    ? "yes"
                    : "no")
            << "\n";

  // ---- Apply ----
  std::vector<plan::CommitResult> results = runner.apply(plan_id);
  std::cout << "apply: " << results.size() << " sandboxes committed\n";
  std::cout << "notes/release.txt: " << read(notes / "release.txt");
  std::cout << "repo HEAD: " << sh_line("git -C " + quoted(repo) + " log -1 --format=%s")
            << "; feature.txt in HEAD: "
            << (sh_line("git -C " + quoted(repo) + " ls-tree --name-only HEAD feature.txt") ==
                        "feature.txt"
                    ? "yes"
                    : "no")
            << "\n";
  std::cout << "db tasks: " << committed_tasks(mgr, db) << "\n";
  mgr.cleanup_all(plan_id);
  std::cout << "plan " << plan_id << " cleaned up\n";
  return 0;
}

}  // namespace

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
    std::string tmpl = (fs::temp_directory_path() / "patchbox-phases-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) return 2;
    work = tmpl;
  } else {
    std::cerr << "usage: " << argv[0] << " [--demo WORKDIR]\n";
    return 2;
  }
  int rc = 0;
  try {
    rc = run(work);
  } catch (const patchbox::Error& e) {
    std::cerr << "patchbox error (" << patchbox::to_string(e.kind()) << "): " << e.what() << "\n";
    rc = 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    rc = 1;
  }
  if (argc == 1) fs::remove_all(work);
  return rc;
}
