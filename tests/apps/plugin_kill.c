/* A ParaMonte-style plugin for herd-sample's resume tests: a standard normal log density
   that spins for HERD_TEST_SPIN_US microseconds per call (default 0), and SIGKILLs its own
   process at call number HERD_TEST_KILL_AFTER + 1 (never without it): a kill at a known
   proposal, after the checkpoints before it. */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static long calls = 0;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

double getLogFunc(int32_t ndim, double point[]) {
  static long kill_after = -2, spin_us = -1;
  if (kill_after == -2) {
    const char* k = getenv("HERD_TEST_KILL_AFTER");
    kill_after = k ? atol(k) : -1;
    const char* s = getenv("HERD_TEST_SPIN_US");
    spin_us = s ? atol(s) : 0;
  }
  if (kill_after >= 0 && ++calls > kill_after) raise(SIGKILL);
  if (spin_us > 0) {
    const double end = now_us() + (double)spin_us;
    while (now_us() < end) {
    }
  }
  double q = 0.0;
  for (int32_t i = 0; i < ndim; ++i) q += point[i] * point[i];
  return -0.5 * q;
}
