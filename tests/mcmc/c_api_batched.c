/* C drivers of batched runs through herd's C API (compiled as C): a built-in target named
 * by the input (no log function), and a C log function on a batched device, through
 * herd_run_dram and ParaMonte 1's runParaDRAM. */
#include <stdio.h>
#include <string.h>

#include "herd/mcmc/paradram.h"

/* 2-D normal, means (1, -2), standard deviations (1, 3), unnormalised (not thread-safe as far
 * as herd knows: a batched run evaluates it in stage rounds on the calling thread). */
static double batched_log_func(int32_t ndim, double point[]) {
  const double a = point[0] - 1.0, b = (point[1] + 2.0) / 3.0;
  (void)ndim;
  return -0.5 * (a * a + b * b);
}

/* Writes the input of a batched run on `device` to `text` (of `size` bytes); `target`
 * is a `[target]` table or "". */
static void batched_input(char* text, size_t size, const char* prefix, const char* device, const char* target) {
  snprintf(text, size,
           "device = \"%s\"\nchains_per_rank = 32\nwarmup = 2000\nchain_size = 4000\nthin = 2\n"
           "random_seed = 20261202\noverwrite = true\nsilent_mode = true\noutput_prefix = \"%s\"\n%s",
           device, prefix, target);
}

/* A built-in 3-D normal with mean (1, -2, 0.5) and AR(1) correlation 0.5, chosen by the
 * input: herd_run_dram(0, NULL, input). */
int c_batched_builtin(const char* prefix, const char* device) {
  char text[1024];
  batched_input(text, sizeof text, prefix, device,
                "[target]\nbuiltin = \"normal\"\nmean = [1.0, -2.0, 0.5]\nrho = 0.5\n");
  return herd_run_dram(0, NULL, text);
}

/* The C log function on `device` through herd_run_dram. */
int c_batched_log_func(const char* prefix, const char* device) {
  char text[1024];
  batched_input(text, sizeof text, prefix, device, "");
  return herd_run_dram(2, batched_log_func, text);
}

/* The same through ParaMonte 1's entry point (input text, not NUL-terminated by contract). */
int c_batched_paramonte(const char* prefix) {
  char text[1024];
  batched_input(text, sizeof text, prefix, "cpu_batched", "");
  runParaDRAM(2, batched_log_func, text, (int32_t)strlen(text));
  return herd_last_status();
}

/* Input errors of the target keys: a log function and a named target at once, an unknown
 * built-in name, a dimension that is not the target's. */
int c_batched_bad(int which, const char* prefix) {
  char text[1024];
  if (which == 0) {
    batched_input(text, sizeof text, prefix, "cpu_batched", "[target]\nbuiltin = \"normal\"\nndim = 2\n");
    return herd_run_dram(2, batched_log_func, text);
  }
  if (which == 1) {
    batched_input(text, sizeof text, prefix, "cpu_batched", "[target]\nbuiltin = \"norml\"\nndim = 2\n");
    return herd_run_dram(0, NULL, text);
  }
  batched_input(text, sizeof text, prefix, "cpu_batched", "[target]\nbuiltin = \"banana\"\nndim = 2\n");
  return herd_run_dram(3, NULL, text);
}
