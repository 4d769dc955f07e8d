/* herd/mcmc/paradram.h: the C interface of herd's DRAM sampler, compatible with ParaMonte 1.x.
 *
 * An existing ParaMonte C model and driver relink unchanged: `runParaDRAM` has ParaMonte's
 * exact signature. The input is a ParaMonte `&ParaDRAM ... /` namelist (v1 and v2 names) or
 * a herd TOML file; outputs are `<outputFileName>_chain.txt`, `_sample.txt`, `_report.txt`,
 * `_report.html`, `_progress.txt` and `<outputFileName>.h5` (with parallelizationModel =
 * 'multi chain', `_process_<k>_chain.txt` and `_process_<k>_sample.txt` per chain, k from 1;
 * the batched devices write the `.h5` and the reports only), and while the run lasts the
 * restart record `<outputFileName>_restart/` (only its run.ckpt stays at the end: rerunning
 * a complete run reports it and returns 0) and the lock `<outputFileName>.lock`. Without outputFileName the
 * prefix is `out/herd_sample`. Missing folders are created; existing outputs are never
 * overwritten unless `overwrite = true` (`overwriteRequested`); an interrupted run (killed,
 * SIGINT) resumes from its last checkpoint when the same program runs the same input again,
 * with the outputs of an uninterrupted run; `h5_posterior = 'compact'` in the input keeps the
 * `.h5`'s draws once, in its `chain_compact` group, without the verbose `posterior`.
 *
 * The log density is called from the calling thread only, with a private copy of the point
 * (it may scribble on it). One run at a time per process (HDF5 is serial): a call from
 * another thread while a run is in progress waits for it to end, then runs (two threads'
 * calls ran at once and could crash the program); a call from inside the log density of a
 * run in progress is refused with status 2 and one line. herd_last_status() is shared by
 * all threads.
 * Reference: Shahmoradi & Bagheri (2020), ParaMonte's C interface.
 */
#ifndef HERD_MCMC_PARADRAM_H
#define HERD_MCMC_PARADRAM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ParaMonte's C log-density signature: natural log of the (unnormalised) target at
 * `point[0..ndim)`. */
typedef double (*herd_log_func)(int32_t ndim, double point[]);

/* Runs DRAM on `logfunc` in `ndim` dimensions. `input` is a path to an input file, or the
 * namelist or TOML text itself, or NULL/"" for the defaults: one line naming an existing file
 * (blanks around it ignored; any characters in its name, '=' included) is that file; other
 * text is a namelist when a line opens a group (`&ParaDRAM`, any case, comment lines before
 * it allowed), else TOML. Returns 0 on success, 2 on bad
 * input (nothing written; the reason is printed to stderr in one line), 1 when the run fails
 * (e.g. +inf log density; what was sampled is flushed).
 *
 * A target of herd's registry instead of a log function: `logfunc` NULL and `ndim` 0 (or the
 * target's dimension), the input naming it in a `[target]` table as herd-sample's inputs do
 * (`builtin = "normal"` with `ndim`, `mean`, ...; `library = "plugin.so"`; `model = ...` when
 * the program registered the posteriordb models).
 *
 * Devices (key `device`): "cpu" (default), the serial DRAM kernel and ParaDRAM's outputs;
 * "cpu_batched", many chains in lock-step on the host (`chains_per_rank`, `warmup`, `thin`;
 * outputs `<prefix>.h5`, `_report.txt`, `_report.html`; docs/batched.md), where a C log
 * function is evaluated in stage rounds on the calling thread; "cuda", the same on a CUDA
 * device for the built-in targets but the mixture (status 2 with one line saying why when
 * the build has no CUDA or no device is usable).
 *
 * MPI (docs/parallel.md, "C API and MPI"): under an MPI launcher, or after the caller's
 * MPI_Init, the call is collective over MPI_COMM_WORLD: every rank calls it with the same
 * input and log function. Bad input (status 2) is returned on every rank. A run that fails
 * on any rank of several (e.g. +inf log density, an exception in herd) does not return: that
 * rank prints `herd: rank R of N failed: <reason> (ending all ranks)` and calls
 * MPI_Abort(MPI_COMM_WORLD, 1), which ends the whole job, the caller's program included, with
 * exit code 1 (the restart record is kept: rerunning the program resumes). With one process
 * it returns 1. The same holds for every entry point below. */
int herd_run_dram(int32_t ndim, herd_log_func logfunc, const char* input);

/* ParaMonte 1.x's entry point: `inputFile` (of length `inputFileLen`, not necessarily
 * NUL-terminated) is a path or the namelist text. Errors are printed to stderr; the status
 * is available from `herd_last_status()`. */
void runParaDRAM(int32_t ndim, double (*getLogFunc)(int32_t ndim, double Point[]), char* inputFile,
                 int32_t inputFileLen);

/* ParaMonte 2.x's entry points (pm_sampling.h): note the argument order, the log function
 * first, and its arguments `(state, ndim)`, the reverse of ParaMonte 1's. `input` is a
 * NUL-terminated path to an input file or the `&ParaDRAM ... /` namelist text itself (or
 * NULL/"" for the defaults); ParaMonte 2's specification names are accepted (outputStatus,
 * domainBall*, domainErrCount, parallelismNumThread, ...; docs/dram.md). The F and L forms
 * take the point as float / long double (converted from herd's double state, which the
 * chain keeps); the result is converted to double. Returns 0 if and only if the run succeeded
 * (else 2 for bad input, 1 for a failed run, as herd_run_dram). */
int32_t runParaDRAMF(float (*getLogFunc)(float state[], int32_t ndim), const int32_t ndim, const char* input);
int32_t runParaDRAMD(double (*getLogFunc)(double state[], int32_t ndim), const int32_t ndim, const char* input);
int32_t runParaDRAML(long double (*getLogFunc)(long double state[], int32_t ndim), const int32_t ndim,
                     const char* input);

/* Status of the last run in this process, by any entry point of this header (`runParaDRAM`,
 * which returns nothing, `herd_run_dram`, `runParaDRAMF/D/L`): 0 done, 1 failed, 2 bad input;
 * 0 before any run. Not thread-safe against a run in progress on another thread: with runs
 * on several threads, use the return values of herd_run_dram / runParaDRAMF/D/L. */
int herd_last_status(void);

#ifdef __cplusplus
}
#endif

#endif /* HERD_MCMC_PARADRAM_H */
