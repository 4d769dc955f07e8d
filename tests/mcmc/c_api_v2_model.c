/* A ParaMonte 2-style C model and driver, compiled as C: runParaDRAMF/D/L take the log
 * function first, with arguments (state, ndim), and return 0 on success. */
#include <stdint.h>

#include "herd/mcmc/paradram.h"

/* 2-D normal, means (1, -2), standard deviations (1, 3), in three precisions. */
static double calls_d = 0;
double getLogFuncD(double state[], int32_t ndim) {
  const double a = state[0] - 1.0, b = (state[1] + 2.0) / 3.0;
  (void)ndim;
  calls_d += 1;
  return -0.5 * (a * a + b * b);
}
float getLogFuncF(float state[], int32_t ndim) {
  const float a = state[0] - 1.0f, b = (state[1] + 2.0f) / 3.0f;
  (void)ndim;
  return -0.5f * (a * a + b * b);
}
long double getLogFuncL(long double state[], int32_t ndim) {
  const long double a = state[0] - 1.0L, b = (state[1] + 2.0L) / 3.0L;
  (void)ndim;
  return -0.5L * (a * a + b * b);
}

int32_t c_driver_v2(char kind, const char* input) {
  if (kind == 'F') return runParaDRAMF(getLogFuncF, 2, input);
  if (kind == 'L') return runParaDRAML(getLogFuncL, 2, input);
  return runParaDRAMD(getLogFuncD, 2, input);
}
