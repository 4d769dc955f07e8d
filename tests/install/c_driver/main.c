/* A ParaMonte 1.x C driver as ParaMonte's examples write it (`#include "paramonte.h"`,
 * runParaDRAM on ./paramonte.in), built outside herd: by CMake in a `LANGUAGES C` project and
 * by a plain Makefile through pkg-config. It then checks herd's status and the mean of the
 * sample file against the target's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paramonte.h"

#define NDIM 2

/* Normal target: means (1, -2), standard deviations (1, 3), unnormalised. */
static double getLogFunc(int32_t ndim, double Point[]) {
  const double a = Point[0] - 1.0, b = (Point[1] + 2.0) / 3.0;
  (void)ndim;
  return -0.5 * (a * a + b * b);
}

int main(void) {
  char inputFile[] = "./paramonte.in";
  runParaDRAM(NDIM, &getLogFunc, inputFile, (int32_t)strlen(inputFile));
  if (herd_last_status() != 0) {
    fprintf(stderr, "c_driver: runParaDRAM status %d\n", herd_last_status());
    return 1;
  }
  /* The sample file: a header line, then rows "logFunc,x1,x2" (refined, unweighted). */
  FILE* f = fopen("./out/mvn_sample.txt", "r");
  if (!f) {
    fprintf(stderr, "c_driver: no ./out/mvn_sample.txt\n");
    return 1;
  }
  char line[4096];
  double sum[NDIM] = {0, 0};
  long n = 0;
  if (!fgets(line, sizeof line, f)) return 1;
  while (fgets(line, sizeof line, f)) {
    double v[NDIM + 1];
    char* p = line;
    for (int i = 0; i <= NDIM; ++i) {
      char* end;
      v[i] = strtod(p, &end);
      if (end == p) {
        fprintf(stderr, "c_driver: unreadable sample row: %s", line);
        return 1;
      }
      p = end + strspn(end, ", \t");
    }
    sum[0] += v[1];
    sum[1] += v[2];
    ++n;
  }
  fclose(f);
  const double m0 = sum[0] / (double)n, m1 = sum[1] / (double)n;
  printf("c_driver: %ld sample rows, mean (%.3f, %.3f), target (1, -2)\n", n, m0, m1);
  return (n >= 100 && fabs(m0 - 1.0) < 0.3 && fabs(m1 + 2.0) < 0.9) ? 0 : 1;
}
