/* A ParaMonte-style plugin for the fault tests of herd-sample (issue #7): a standard
   normal log density that returns +inf (which stops a run) after HERD_TEST_FAIL_AFTER
   calls on the rank named by HERD_TEST_FAIL_RANK (MPICH's PMI_RANK; 0 without a
   launcher). Without HERD_TEST_FAIL_RANK it never fails. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static long calls = 0;

double getLogFunc(int32_t ndim, double point[]) {
  const char* fail_rank = getenv("HERD_TEST_FAIL_RANK");
  if (fail_rank != NULL) {
    const char* rank = getenv("PMI_RANK");
    const char* after = getenv("HERD_TEST_FAIL_AFTER");
    if (atoi(rank ? rank : "0") == atoi(fail_rank) && ++calls > (after ? atol(after) : 1000)) return HUGE_VAL;
  }
  double q = 0.0;
  for (int32_t i = 0; i < ndim; ++i) q += point[i] * point[i];
  return -0.5 * q;
}
