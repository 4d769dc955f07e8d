// Catch2 main for multi-rank [gpu] test executables (MPI bootstrap, one CUDA device per
// rank, e.g. NCCL): initialises MPI; when this node has fewer CUDA devices than there are
// ranks (NCCL refuses two ranks on one GPU), rank 0 prints a visible "SKIPPED" line and
// every rank exits with 77 (mpiexec then returns 77, CTest's SKIP_RETURN_CODE). Otherwise
// it runs the tests on every rank with rank r on device r and fails on every rank when any
// rank failed, as mpi_main.cpp does.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>
#include <catch2/catch.hpp>

#include <cstdio>

#include "herd/core/device.hpp"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Every rank decides from the smallest count any rank sees, so all skip or none does.
  int local = herd::cuda_device_count(), devices = 0;
  MPI_Allreduce(&local, &devices, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (devices < size) {
    if (rank == 0)
      std::printf("SKIPPED: %d CUDA device(s) for %d ranks (one GPU per rank needed): %s\n", devices, size,
                  herd::describe_devices().c_str());
    MPI_Finalize();
    return herd::kSkipReturnCode;
  }
  if (rank == 0) std::printf("%s\n", herd::describe_devices().c_str());
  Catch::Session session;
  int rc = session.applyCommandLine(argc, argv);
  if (rc == 0) rc = session.run();
  int local_fail = rc != 0 ? 1 : 0, any_fail = 0;
  MPI_Allreduce(&local_fail, &any_fail, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_fail && rc == 0) std::fprintf(stderr, "rank %d: another rank failed\n", rank);
  MPI_Finalize();
  return any_fail ? 1 : 0;
}
