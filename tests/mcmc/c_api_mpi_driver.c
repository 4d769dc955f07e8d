/* A ParaMonte-style C program run under `mpiexec -n 2`: runParaDRAM runs the
 * parallelization model over the ranks, initialising MPI when the caller has not and
 * finalising it at the end only as mpiFinalizeRequested says and only when herd
 * initialised it. Usage: c_api_mpi_driver herd|caller|keep <output prefix>
 *   herd:   MPI untouched by the caller; herd initialises it and finalises it at the end.
 *   keep:   the same with mpiFinalizeRequested = false: MPI is still up afterwards.
 *   caller: the caller initialises MPI; herd uses it and leaves it up for the caller.
 *   batched: as keep, with device = 'cpu_batched': the batched run over both ranks (pooled
 *            adaptation and the gathered draws are collective); rank 0 finds <prefix>.h5.
 *   twice:  as herd, then a second runParaDRAM: MPI is finalised and cannot come back, so
 *           it fails with status 1 and one line that names mpiFinalizeRequested.
 *   fail:   as caller, with a log density that returns +inf on rank 1 after 500 calls: the
 *           run ends the job (MPI_Abort, exit code 1) instead of returning; printing
 *           "returned" means the call came back, which it must not.
 * Exit code 0 when everything holds (every rank checks). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "herd/mcmc/paradram.h"

static int g_rank = 0;
static long g_calls = 0;

static double getLogFunc(int32_t ndim, double point[]) {
  double q = 0.0;
  for (int32_t i = 0; i < ndim; ++i) q += point[i] * point[i];
  return -0.5 * q;
}

static double failingLogFunc(int32_t ndim, double point[]) {
  if (g_rank == 1 && ++g_calls > 500) return 1.0 / 0.0;
  return getLogFunc(ndim, point);
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const char* mode = argv[1];
  const int fail = strcmp(mode, "fail") == 0;
  const int caller = strcmp(mode, "caller") == 0 || fail, batched = strcmp(mode, "batched") == 0;
  const int keep = strcmp(mode, "keep") == 0 || batched;
  if (caller) MPI_Init(&argc, &argv);
  char input[1024];
  if (batched)
    snprintf(input, sizeof input,
             "&ParaDRAM device = 'cpu_batched', chains_per_rank = 8, warmup = 200, chainSize = 400, randomSeed = 4, "
             "outputFileName = '%s', overwriteRequested = T, checkpoint_period_seconds = 0, "
             "mpiFinalizeRequested = F /",
             argv[2]);
  else
    snprintf(input, sizeof input,
             "&ParaDRAM chainSize = 2000, randomSeed = 4, outputFileName = '%s', overwriteRequested = T, "
             "parallelizationModel = 'multiChain', checkpoint_period_seconds = 0, mpiFinalizeRequested = %s /",
             argv[2], keep ? "F" : "T");
  if (fail) {
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    runParaDRAM(2, failingLogFunc, input, (int32_t)strlen(input));
    printf("rank %d: runParaDRAM returned status %d\n", g_rank, herd_last_status());
    MPI_Finalize();
    return 1;
  }
  runParaDRAM(2, getLogFunc, input, (int32_t)strlen(input));
  if (strcmp(mode, "twice") == 0) {
    const int first = herd_last_status();
    runParaDRAM(2, getLogFunc, input, (int32_t)strlen(input));
    printf("twice: first status %d, second status %d\n", first, herd_last_status());
    return first == 0 && herd_last_status() == 1 ? 0 : 1;
  }
  int status = herd_last_status(), init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  const int expect_fin = !caller && !keep;
  printf("mode %s: status %d, MPI initialised %d, finalised %d (expected %d)\n", mode, status, init, fin, expect_fin);
  int bad = status != 0 || !init || fin != expect_fin;
  if (!fin) {
    /* MPI still usable: every rank agrees, and rank 0 finds the per-chain files. */
    int rank = 0, size = 0, sum = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0 && batched) {
      char path[1100];
      snprintf(path, sizeof path, "%s.h5", argv[2]);
      FILE* f = fopen(path, "r");
      if (!f) {
        printf("missing %s\n", path);
        bad = 1;
      } else {
        fclose(f);
      }
    } else if (rank == 0) {
      char path[1100];
      for (int k = 1; k <= size; ++k) {
        snprintf(path, sizeof path, "%s_process_%d_chain.txt", argv[2], k);
        FILE* f = fopen(path, "r");
        if (!f) {
          printf("missing %s\n", path);
          bad = 1;
        } else {
          fclose(f);
        }
      }
    }
    MPI_Allreduce(&bad, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    bad = sum != 0 || size != 2;
    if (caller) MPI_Finalize();
  }
  return bad;
}
