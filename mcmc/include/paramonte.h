/* paramonte.h: the header name ParaMonte's C drivers include (`#include "paramonte.h"`), for
 * herd's ParaMonte-compatible C interface. It declares what herd/mcmc/paradram.h declares:
 * ParaMonte 1.x's runParaDRAM(ndim, getLogFunc, inputFile, inputFileLen) with
 * double getLogFunc(int32_t ndim, double Point[]), and herd's herd_run_dram and
 * herd_last_status. Link with herd::herd (CMake) or `pkg-config --cflags --libs herd`. */
#ifndef HERD_PARAMONTE_H
#define HERD_PARAMONTE_H

#include "herd/mcmc/paradram.h"

#endif /* HERD_PARAMONTE_H */
