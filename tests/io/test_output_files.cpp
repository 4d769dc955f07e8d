// herd::io output-file rules (output_files.hpp, atomic_file.hpp): links are refused, never
// written through; the prefix lock excludes a second holder and refuses linked lock files;
// the writability probe; removal of dead processes' temporaries only.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "herd/core/error.hpp"
#include "herd/io/atomic_file.hpp"
#include "herd/io/checkpoint.hpp"
#include "herd/io/output_files.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

fs::path fresh(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("herd_test_output_files_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

/// The pid of a process that has ended (a reaped child).
long dead_pid() {
  const pid_t c = ::fork();
  if (c == 0) ::_exit(0);
  int st = 0;
  ::waitpid(c, &st, 0);
  return static_cast<long>(c);
}

}  // namespace

TEST_CASE("refuse_symlink and open_output_file never write through a link", "[io][files]") {
  const fs::path d = fresh("links");
  write(d / "victim", "precious");
  fs::create_symlink("victim", d / "out.txt");
  fs::create_symlink("missing", d / "dangling.txt");
  CHECK_THROWS_WITH(herd::io::refuse_symlink((d / "out.txt").string()),
                    Contains("out.txt") && Contains("symbolic link") && Contains("victim"));
  CHECK_THROWS_AS(herd::io::refuse_symlink((d / "dangling.txt").string()), herd::InputError);
  CHECK_NOTHROW(herd::io::refuse_symlink((d / "victim").string()));
  CHECK_NOTHROW(herd::io::refuse_symlink((d / "none").string()));
  for (bool append : {false, true}) {
    CHECK_THROWS_AS(herd::io::open_output_file((d / "out.txt").string(), append), herd::InputError);
    CHECK_THROWS_AS(herd::io::open_output_file((d / "dangling.txt").string(), append), herd::InputError);
  }
  CHECK(slurp(d / "victim") == "precious");
  CHECK_FALSE(fs::exists(d / "missing"));
  CHECK_THROWS_AS(herd::io::AppendFile::create((d / "out.txt").string()), herd::IoError);
  CHECK(slurp(d / "victim") == "precious");
  // Atomic files replace the link itself (rename), never its target.
  herd::io::CheckpointWriter w("test", 1);
  w.add_value("x", 1.0);
  w.commit((d / "out.txt").string());
  CHECK(slurp(d / "victim") == "precious");
  CHECK_FALSE(fs::is_symlink(d / "out.txt"));
  // A plain file is created, truncated, appended to.
  std::FILE* f = herd::io::open_output_file((d / "plain.txt").string());
  std::fputs("a", f);
  std::fclose(f);
  f = herd::io::open_output_file((d / "plain.txt").string(), true);
  std::fputs("b", f);
  std::fclose(f);
  CHECK(slurp(d / "plain.txt") == "ab");
}

TEST_CASE("OutputPrefixLock: exclusive, refuses linked lock files, removed at release", "[io][files]") {
  const fs::path d = fresh("lock");
  const std::string prefix = (d / "run").string();
  {
    const herd::io::OutputPrefixLock a(prefix, "herd-test");
    CHECK(slurp(d / "run.lock") == std::to_string(::getpid()) + "\n");
    // flock locks are per open file: a second lock in this process is refused as well.
    CHECK_THROWS_WITH(herd::io::OutputPrefixLock(prefix, "herd-test"),
                      Contains("in use by another herd-test run") && Contains(std::to_string(::getpid())));
  }
  CHECK_FALSE(fs::exists(d / "run.lock"));
  write(d / "victim", "precious");
  fs::create_symlink("victim", d / "run.lock");
  CHECK_THROWS_WITH(herd::io::OutputPrefixLock(prefix), Contains("run.lock") && Contains("symbolic link"));
  fs::remove(d / "run.lock");
  fs::create_hard_link(d / "victim", d / "run.lock");
  CHECK_THROWS_WITH(herd::io::OutputPrefixLock(prefix), Contains("run.lock") && Contains("links to it"));
  CHECK(slurp(d / "victim") == "precious");
}

TEST_CASE("OutputPrefixLock: shared by the processes of one run, removed by the last holder", "[io][files]") {
  // flock locks belong to open files, so separate lock objects in this process stand for the
  // ranks of one run and for a second run.
  const fs::path d = fresh("lock_shared");
  const std::string prefix = (d / "run").string();
  CHECK(herd::io::OutputPrefixLock::join(prefix, "herd-test") == nullptr);  // nothing to join
  auto rank0 = std::make_unique<herd::io::OutputPrefixLock>(prefix, "herd-test");
  // Exclusive until shared: another rank cannot join yet.
  CHECK_THROWS_WITH(herd::io::OutputPrefixLock::join(prefix, "herd-test"), Contains("in use by another herd-test run"));
  rank0->share();
  rank0->share();  // idempotent
  auto rank1 = herd::io::OutputPrefixLock::join(prefix, "herd-test");
  REQUIRE(rank1 != nullptr);
  CHECK(rank1->path() == prefix + ".lock");
  auto rank2 = herd::io::OutputPrefixLock::join(prefix, "herd-test");
  REQUIRE(rank2 != nullptr);
  // A new run is refused while any of them holds it, rank 0 included or not.
  CHECK_THROWS_WITH(herd::io::OutputPrefixLock(prefix, "herd-test"),
                    Contains("in use by another herd-test run (pid " + std::to_string(::getpid())));
  rank0.reset();  // rank 0 ended first (killed, or released out of order): the file stays
  CHECK(fs::exists(d / "run.lock"));
  CHECK_THROWS_WITH(herd::io::OutputPrefixLock(prefix, "herd-test"), Contains("in use by another herd-test run"));
  rank1.reset();
  CHECK(fs::exists(d / "run.lock"));
  CHECK_THROWS(herd::io::OutputPrefixLock(prefix, "herd-test"));
  rank2.reset();  // the last holder removes it
  CHECK_FALSE(fs::exists(d / "run.lock"));
  {
    // Released in order (the others, then rank 0): rank 0 is the last and removes the file.
    herd::io::OutputPrefixLock a(prefix, "herd-test");
    a.share();
    auto b = herd::io::OutputPrefixLock::join(prefix, "herd-test");
    REQUIRE(b != nullptr);
    b.reset();
    CHECK(fs::exists(d / "run.lock"));
  }
  CHECK_FALSE(fs::exists(d / "run.lock"));
  // The pid in the file has ended while another process still holds the lock: the message
  // says so instead of naming a live run.
  const long gone = dead_pid();
  write(d / "run.lock", std::to_string(gone) + "\n");
  {
    const int fd = ::open((d / "run.lock").c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_SH | LOCK_NB) == 0);
    CHECK_THROWS_WITH(herd::io::OutputPrefixLock(prefix, "herd-test"),
                      Contains("its rank 0, pid " + std::to_string(gone) + ", has ended") &&
                          Contains("other processes of that run still hold the lock file"));
    ::close(fd);
  }
  { const herd::io::OutputPrefixLock taken_over(prefix, "herd-test"); }
  CHECK_FALSE(fs::exists(d / "run.lock"));
}

TEST_CASE("check_folder_writable and remove_stale_temporaries", "[io][files]") {
  const fs::path d = fresh("folder");
  CHECK_NOTHROW(herd::io::check_folder_writable(d.string(), "output_prefix \"x\""));
  CHECK(fs::is_empty(d));
  CHECK_THROWS_WITH(herd::io::check_folder_writable((d / "missing").string(), "output_prefix \"x\""),
                    Contains("output_prefix \"x\"") && Contains("not writable"));
  const long dead = dead_pid();
  const std::string mine = std::to_string(::getpid());
  write(d / ("run.ckpt.tmp." + std::to_string(dead) + ".0"), "x");
  write(d / ("run.ckpt.tmp." + mine + ".0"), "x");
  write(d / ("other.tmp." + std::to_string(dead) + ".0"), "x");
  write(d / "run.ckpt.tmp.notapid.0", "x");
  herd::io::remove_stale_temporaries(d.string(), {"run.ckpt"});
  CHECK_FALSE(fs::exists(d / ("run.ckpt.tmp." + std::to_string(dead) + ".0")));
  CHECK(fs::exists(d / ("run.ckpt.tmp." + mine + ".0")));
  CHECK(fs::exists(d / ("other.tmp." + std::to_string(dead) + ".0")));  // not one of the names
  CHECK(fs::exists(d / "run.ckpt.tmp.notapid.0"));
  herd::io::remove_stale_temporaries(d.string(), {});
  CHECK_FALSE(fs::exists(d / ("other.tmp." + std::to_string(dead) + ".0")));
  fs::remove_all(d.parent_path());
}

TEST_CASE("write_file_atomic into a missing folder names the file asked for, writes nothing", "[io][files]") {
  const fs::path dir = fs::temp_directory_path() / "herd_atomic_missing_folder" / "not_there";
  fs::remove_all(dir.parent_path());
  const std::string path = (dir / "report.html").string();
  const std::byte b[1] = {std::byte{1}};
  CHECK_THROWS_WITH(herd::io::write_file_atomic(path, b),
                    Contains(path + ": create (as the temporary ") && Contains("No such file or directory"));
  CHECK_FALSE(fs::exists(dir));
}
