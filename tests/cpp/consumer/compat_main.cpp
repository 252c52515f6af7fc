// Downstream use of patchbox::entropic_compat: engine code written for the reference header.
#include <entropic/core/sandbox.h>

#include <filesystem>
#include <fstream>
#include <iostream>

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc != 2) return 2;
  const fs::path project = fs::path(argv[1]) / "compat-project";
  fs::create_directories(project);
  std::ofstream(project / "a.txt") << "one\n";

  fs::path session;
  {
    entropic::SandboxManager mgr(project);
    session = mgr.session_base();
    auto sb = mgr.create_sandbox("compat");
    if (!sb) return 1;
    std::ofstream(sb->path / "a.txt") << "two\n";
    auto r = mgr.finalize_sandbox(*sb);
    if (!r || r->files_touched.size() != 1) return 1;
    std::cout << r->patch;
    if (mgr.create_sandbox("../x")) return 1;
    mgr.discard_sandbox(*sb);  // not discarded, its work would be kept as abandoned
  }
  return fs::exists(session) ? 1 : 0;  // no pending patch: the session is gone
}
