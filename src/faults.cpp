#include "herd/core/faults.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "herd/core/error.hpp"

namespace herd {

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return (end && *end == '\0' && x > 0 && x < (1L << 30)) ? static_cast<int>(x) : 0;
}

}  // namespace

int launcher_process_count() {
  return std::max({env_int("PMI_SIZE"), env_int("OMPI_COMM_WORLD_SIZE"), env_int("MV2_COMM_WORLD_SIZE")});
}

void check_launch(int mpi_size) {
  const int n = launcher_process_count();
  if (mpi_size == 1 && n > 1)
    throw InputError(fmt::format(
        "the launcher started {} processes, but MPI reports this process alone (size 1): every process "
        "would do the same work and write the same files. The program was probably launched with the mpiexec of another MPI "
        "library (herd is built with MPICH: use its mpiexec, e.g. mpiexec.mpich), or built without MPI",
        n));
}

void check_same_input(Communicator& comm, std::uint64_t hash, std::string_view what) {
  if (comm.size() == 1) return;
  const auto v = static_cast<std::int64_t>(hash);
  const std::vector<std::int64_t> all = comm.allgather(std::span<const std::int64_t>(&v, 1));
  std::string bad;
  for (std::size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) bad += (bad.empty() ? "" : ", ") + std::to_string(r);
  if (!bad.empty())
    throw InputError(fmt::format("the {} differs between ranks: rank(s) {} differ from rank 0; every rank "
                                 "must read the same input",
                                 what, bad));
}

void abort_all_on_error(Communicator& comm, const std::function<void()>& body, int code) {
  if (comm.size() == 1) {
    body();
    return;
  }
  std::string msg;
  try {
    body();
    return;
  } catch (const std::exception& e) {
    msg = e.what();
  } catch (...) {
    msg = "unknown exception";
  }
  std::fprintf(stderr, "herd: rank %d of %d failed: %s\nherd: ending all ranks\n", comm.rank(), comm.size(),
               msg.c_str());
  std::fflush(stderr);
  comm.abort(code);
}

}  // namespace herd
