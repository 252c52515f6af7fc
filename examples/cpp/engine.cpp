// A small C++ "engine" on patchbox: it delegates two tasks, runs each task's tool inside a
// ScopedSandbox (the swap function re-points the engine's ToolRunner, never the process's
// cwd), reviews what each delegation changed, asks a decision callback, and leaves the
// rejected patch pending for the user.
//
//   patchbox_example_engine                  demo on a generated project in a temp dir
//   patchbox_example_engine --demo WORKDIR   the same in WORKDIR (must be new or empty)
//   patchbox_example_engine PROJECT [ROOT]   on your project (ROOT: the sandbox root)
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <patchbox/sandbox.hpp>

namespace fs = std::filesystem;

/// How the engine runs tools: in `cwd`, which the ScopedSandbox swap re-points.
struct ToolRunner {
  fs::path cwd;

  /// Runs argv[0] with its working directory at `cwd` (fork, chdir, exec); returns its exit
  /// status. The engine process itself never changes directory: other threads are unaffected.
  int run(const std::vector<std::string>& argv) const {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::cout.flush();
    pid_t pid = ::fork();
    if (pid < 0) return -1;
    if (pid == 0) {
      if (::chdir(cwd.c_str()) != 0) ::_exit(126);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    int status = 0;
    if (::waitpid(pid, &status, 0) < 0) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

/// The ScopedSandbox swap function: points the engine's tools at `path`.
static void point_tools_at(const fs::path& path, void* user_data) {
  static_cast<ToolRunner*>(user_data)->cwd = path;
}

static void make_demo_project(const fs::path& project) {
  fs::create_directories(project / "src");
  std::ofstream(project / "README.md") << "# demo\n\nA project an agent works on.\n";
  std::ofstream(project / "src" / "main.c")
      << "#include <stdio.h>\n\nint main(void) { puts(\"old greeting\"); return 0; }\n";
}

/// The user's policy: documentation changes are accepted, anything else waits for review.
static patchbox::Decision review(const patchbox::SandboxResult& result) {
  for (const auto& p : result.files_touched) {
    if (p.extension() != ".md") return patchbox::Decision::Reject;
  }
  return patchbox::Decision::Accept;
}

int main(int argc, char** argv) {
  fs::path project, root;
  const bool demo = argc == 1 || (argc == 3 && std::strcmp(argv[1], "--demo") == 0);
  if (demo) {
    fs::path work;
    if (argc == 3) {
      work = argv[2];
      if (fs::exists(work) && !fs::is_empty(work)) {
        std::cerr << work << " exists and is not empty\n";
        return 2;
      }
      fs::create_directories(work);
    } else {
      std::string tmpl = (fs::temp_directory_path() / "patchbox-engine-XXXXXX").string();
      if (!::mkdtemp(tmpl.data())) return 2;
      work = tmpl;
    }
    project = work / "project";
    root = work / "sandboxes";
    make_demo_project(project);
  } else if (argc == 2 || argc == 3) {
    project = argv[1];
    if (argc == 3) root = argv[2];
  } else {
    std::cerr << "usage: " << argv[0] << " [--demo WORKDIR | PROJECT [ROOT]]\n";
    return 2;
  }

  try {
    patchbox::Options options;
    options.root = root;  // empty: $PATCHBOX_ROOT or $HOME/.entropic/sandbox
    options.progress = [](const patchbox::Progress& p) {
      if (p.files_done == p.files_total) {
        std::cout << "  copied " << p.files_total << " files\n";
      }
    };
    patchbox::SandboxManager mgr(project, options);
    std::cout << "session " << mgr.session_id() << " in " << mgr.session_base() << "\n";

    ToolRunner tools{mgr.project_dir()};
    struct Task {
      std::string id;
      std::vector<std::string> tool;
    };
    const std::vector<Task> tasks = {
        {"docs-fix", {"sh", "-c", "printf '\\nUsage: run ./demo\\n' >> README.md"}},
        {"refactor",
         {"sh", "-c",
          "sed -i 's/old greeting/new greeting/' src/main.c && "
          "printf '/* generated */\\n' > src/generated.c"}},
    };

    for (const Task& task : tasks) {
      patchbox::SandboxInfo sb = mgr.create_sandbox(task.id);
      int status;
      {
        patchbox::ScopedSandbox in_sandbox(&point_tools_at, &tools, sb.path, mgr.project_dir());
        status = tools.run(task.tool);  // runs in sb.path
      }  // tools.cwd is the project again, also if run() had thrown
      std::cout << task.id << ": tool exited " << status << "\n";

      patchbox::SandboxResult preview = mgr.finalize_sandbox(sb);
      std::cout << "  touched:";
      for (const auto& p : preview.files_touched) std::cout << " " << p.string();
      std::cout << "\n";

      patchbox::Completion done = mgr.complete_sandbox(sb, review);
      switch (done.routed) {
        case patchbox::Completion::Routed::Accepted:
          std::cout << "  accepted; apply it with `git apply`:\n" << done.result.patch;
          break;
        case patchbox::Completion::Routed::Pending:
          std::cout << "  rejected; left pending at " << done.pending_path->string() << "\n";
          break;
        case patchbox::Completion::Routed::Unchanged:
          std::cout << "  changed nothing\n";
          break;
      }
    }
  } catch (const patchbox::Error& e) {
    std::cerr << "patchbox error (" << patchbox::to_string(e.kind()) << "): " << e.what() << "\n";
    return 1;
  }
  std::cout << "done: sandboxes and snapshot removed, pending patches kept\n";
  return 0;
}
