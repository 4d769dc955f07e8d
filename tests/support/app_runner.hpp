#pragma once
// Running an executable as a user would, for the end-to-end tests of apps/: a fresh work
// folder, the command run there through the shell with stdout and stderr in files, and the
// exit status.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace herd::testing {

/// Exit status and output of one run.
struct AppRun {
  int rc;           ///< exit code (-1 when killed by a signal)
  std::string out;  ///< standard output
  std::string err;  ///< standard error
};

/// A whole file as a string (empty when missing).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// `root / name`, emptied and created.
inline std::filesystem::path fresh_dir(const std::filesystem::path& root, const std::string& name) {
  const std::filesystem::path d = root / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

/// Runs the shell command line `cmd` in `dir`; stdout and stderr go to dir/stdout.txt and
/// dir/stderr.txt.
inline AppRun run_shell(const std::filesystem::path& dir, const std::string& cmd) {
  // Appended, not `"..." + std::string`: g++ 12 -O3 reports a false -Wrestrict on that
  // operator+ in some inlining contexts.
  std::string line = "cd '";
  line.append(dir.string()).append("' && ").append(cmd).append(" > stdout.txt 2> stderr.txt");
  const int status = std::system(line.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir / "stdout.txt"), slurp(dir / "stderr.txt")};
}

/// Runs `exe args` in `dir` (`run_shell`).
inline AppRun run_app(const std::string& exe, const std::filesystem::path& dir, const std::string& args) {
  std::string cmd(1, '\'');
  cmd.append(exe).append("' ").append(args);
  return run_shell(dir, cmd);
}

}  // namespace herd::testing
