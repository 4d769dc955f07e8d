/* A ParaMonte-style plugin for the fault tests of herd-sample: a standard normal log
   density that fails after HERD_TEST_FAIL_AFTER calls (default 1000) on the rank named by
   HERD_TEST_FAIL_RANK (MPICH's PMI_RANK; 0 without a launcher), in the way named by
   HERD_TEST_FAIL_MODE: "inf" (default: returns +inf, which stops a run), "nan" (returns NaN
   where the first coordinate is above 1, from then on), "exit" (calls
   exit(0)), "hang" (never returns), "stop" (stops its process with SIGSTOP, as a user or
   a scheduler might), "segv" (raises SIGSEGV, as an invalid memory access would), "abort"
   (calls abort()). Without HERD_TEST_FAIL_RANK it never fails.
   With HERD_TEST_LOAD_MARK set, loading the library creates that file (its constructor
   runs): the tests check that herd loads it only after the output checks. */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long calls = 0;

__attribute__((constructor)) static void on_load(void) {
  const char* mark = getenv("HERD_TEST_LOAD_MARK");
  if (mark != NULL) {
    FILE* f = fopen(mark, "a");
    if (f != NULL) fclose(f);
  }
}

double getLogFunc(int32_t ndim, double point[]) {
  const char* fail_rank = getenv("HERD_TEST_FAIL_RANK");
  if (fail_rank != NULL) {
    const char* rank = getenv("PMI_RANK");
    const char* after = getenv("HERD_TEST_FAIL_AFTER");
    if (atoi(rank ? rank : "0") == atoi(fail_rank) && ++calls > (after ? atol(after) : 1000)) {
      const char* mode = getenv("HERD_TEST_FAIL_MODE");
      if (mode != NULL && strcmp(mode, "exit") == 0) exit(0);
      if (mode != NULL && strcmp(mode, "hang") == 0)
        for (;;) pause();
      if (mode != NULL && strcmp(mode, "stop") == 0) raise(SIGSTOP);
      if (mode != NULL && strcmp(mode, "segv") == 0) raise(SIGSEGV);
      if (mode != NULL && strcmp(mode, "abort") == 0) abort();
      if (mode != NULL && strcmp(mode, "nan") == 0) {
        if (point[0] > 1.0) return NAN;
      } else {
        return HUGE_VAL;
      }
    }
  }
  double q = 0.0;
  for (int32_t i = 0; i < ndim; ++i) q += point[i] * point[i];
  return -0.5 * q;
}
