/* A tiny ParaMonte-style plugin for test_dram_plugin: a standard normal log density,
   unnormalised, with ParaMonte's C signature. It scribbles on its input to check that
   herd passes a copy. */
#include <stdint.h>

double getLogFunc(int32_t ndim, double point[]) {
  double q = 0.0;
  for (int32_t i = 0; i < ndim; ++i) {
    q += point[i] * point[i];
    point[i] = 1e300;
  }
  return -0.5 * q;
}

/* A data object, for the test that such a symbol is refused as the log density. */
int herd_test_not_a_function = 3;
