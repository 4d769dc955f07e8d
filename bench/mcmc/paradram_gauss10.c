/* The whole-run benchmark's program against ParaMonte's ParaDRAM (bench_vs_paradram.sh): one
 * C file, compiled once per side and linked either to herd's libherd.so or to ParaMonte's
 * C-callable library (PyPI paramonte 2.5.2's libparamonte_python_linux_x64_gnu_release_shared_heap.so),
 * both of which export ParaMonte 1.x's `runParaDRAM(ndim, getLogFunc, inputFile, len)`.
 *
 * Target: a 10-D Gaussian, zero mean, unit variances, AR(1) correlation rho = 0.5
 * (Sigma_ij = rho^|i-j|), unnormalised: log p(x) = -(x_1^2 + sum_{i>1} (x_i - rho x_{i-1})^2
 * / (1 - rho^2)) / 2, the AR(1) factorisation (O(d), no matrix).
 *
 * Usage: paradram_gauss10 INPUT   INPUT: a `&ParaDRAM ... /` namelist file (same for both sides)
 * Exit status: 0, or 3 when the log density was never called (the library did not run). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define NDIM 10
#define RHO 0.5

/* ParaMonte 1.x's C entry point (herd/mcmc/paradram.h declares it void; ParaMonte's Python
 * package calls it with an int32 result, which this program does not read). */
void runParaDRAM(int32_t ndim, double (*getLogFunc)(int32_t ndim, double Point[]), char* inputFile,
                 int32_t inputFileLen);

static long long calls = 0;

static double getLogFunc(int32_t ndim, double point[]) {
  const double inv = 1.0 / (1.0 - RHO * RHO);
  double s = point[0] * point[0];
  for (int32_t i = 1; i < ndim; ++i) {
    const double r = point[i] - RHO * point[i - 1];
    s += r * r * inv;
  }
  ++calls;
  return -0.5 * s;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s INPUT (a &ParaDRAM namelist file)\n", argv[0]);
    return 2;
  }
  runParaDRAM(NDIM, getLogFunc, argv[1], (int32_t)strlen(argv[1]));
  fprintf(stderr, "paradram_gauss10: log density calls: %lld\n", calls);
  return calls > 0 ? 0 : 3;
}
