// Catch2 main for MPI test executables: initialises MPI, runs the tests on every rank,
// and fails on every rank when any rank failed (so mpiexec's exit code is meaningful).
#define CATCH_CONFIG_RUNNER
#include <mpi.h>
#include <catch2/catch.hpp>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Catch::Session session;
  int rc = session.applyCommandLine(argc, argv);
  if (rc == 0) rc = session.run();
  int local_fail = rc != 0 ? 1 : 0, any_fail = 0;
  MPI_Allreduce(&local_fail, &any_fail, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_fail && rc == 0) std::fprintf(stderr, "rank %d: another rank failed\n", rank);
  MPI_Finalize();
  return any_fail ? 1 : 0;
}
