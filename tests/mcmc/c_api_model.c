/* A ParaMonte-style C model and driver, compiled as C: proves herd/mcmc/paradram.h is a C
 * header and that a ParaMonte C driver links unchanged. */
#include <string.h>

#include "herd/mcmc/paradram.h"

/* 2-D normal, means (1, -2), standard deviations (1, 3), unnormalised. */
double getLogFunc(int32_t ndim, double point[]) {
  const double a = point[0] - 1.0, b = (point[1] + 2.0) / 3.0;
  (void)ndim;
  return -0.5 * (a * a + b * b);
}

/* The ParaMonte 1.x way: runParaDRAM(ndim, getLogFunc, inputFile, strlen(inputFile)). */
int c_driver_paramonte(char* input_file) {
  runParaDRAM(2, getLogFunc, input_file, (int32_t)strlen(input_file));
  return herd_last_status();
}

int c_driver_herd(const char* input) { return herd_run_dram(2, getLogFunc, input); }
