#pragma once
/// @file batched_sample.hpp
/// A whole batched run (`device = "cpu_batched" | "cuda"`; docs/batched.md "Using it from
/// herd-sample"), as herd-sample and the C/Fortran API run it: the batched DRAM sampler over
/// the ranks of a communicator, chains with global ids rank * chains_per_rank + i, the engine
/// chosen by device and target (`run_batched` for built-in targets, the thread pool for a
/// thread-safe point log density, stage rounds on one thread otherwise), thinned draws
/// gathered block by block to rank 0 and streamed into one `<prefix>.h5`
/// (`BatchedGatherSink`), then `<prefix>_report.txt`, `_report.html` and the summary table
/// (batched_outputs.hpp). With checkpoints the run's record is kept in `<prefix>_restart/`
/// (batched_record.hpp) and a run of the same input resumes from it.

#include <memory>

#include "herd/core/communicator.hpp"
#include "herd/mcmc/batched_run.hpp"
#include "herd/mcmc/paradram_run.hpp"
#include "herd/mcmc/sampler_specs.hpp"

namespace herd::mcmc {

/// The batched sampler's options for this rank: `num_chains = chains_per_rank`,
/// `first_chain_id = rank * chains_per_rank`, start points `[M, d]` from `to_dram_options`
/// of each global chain id's `start_point_chain` among the `ranks` x chains_per_rank chains
/// (so random start points depend on the chain id, or with random_start_point_scope =
/// "superchain" on its superchain), the proposal, delayed-rejection, domain, seed and
/// adaptation settings of `specs`, `steps = chain_size`.
/// @throws herd::InputError (e.g. too many chains for 32-bit chain ids).
BatchedDramOptions batched_options(const SamplerSpecs& specs, int ndim, int rank, int ranks);

/// Throws herd::InputError (exit code 2 in herd-sample) when `specs.device` cannot run
/// the target (dimension `ndim`) on `ranks` processes: cuda needs a device-callable built-in
/// target (`batched` non-null: not the mixture, a posteriordb model or a plugin) and a CUDA
/// build with a usable device; the batched options must be valid (checked on a one-chain
/// probe, e.g. delayed_rejection_count <= 4) and the global chain ids must fit 32 bits. Does
/// nothing for device "cpu". Call while resolving the input (nothing written).
void check_batched_device(const SamplerSpecs& specs, const BatchedTarget* batched, int ndim, int ranks);

/// Runs the batched sampler on every rank of `comm` (collective; every rank runs the same
/// number of chains, so the blocks of draws are gathered in lock-step). Rank 0 writes
/// `<prefix>.h5` (atomically), `<prefix>_report.txt`, `<prefix>_report.html`, and prints the
/// summary table unless quiet. `batched` is the device-callable form of a built-in target, or
/// null (the point log density of `target` is then evaluated on the host: with the thread
/// pool when `target.thread_safe`, else in stage rounds on the calling thread). Under CUDA
/// the device is local rank mod device count (the rank among `comm`'s ranks on the same
/// node, `node_local_rank`: MPI_Comm_split_type shared memory).
/// Checkpoints (when a checkpoint period is > 0): at segment boundaries (after an adaptive
/// update, after a block of draws) once the period has passed (`BatchedRestartRecord`).
/// `resuming` (the program's run record is of this input): every rank restarts from
/// `batched.ckpt` when there is one, rank 0 cuts draws.bin back to its length and replays it
/// into the new `.h5`; the outputs are byte-identical to an uninterrupted run's. Call
/// `prepare_outputs` and manage `run.ckpt` around it (`run_sampler_program` with
/// `SamplerProgramInput::run_restartable`; `use_batched_run` sets that up).
/// @throws herd::InputError (also: a record of another layout), herd::NumericalError,
/// herd::IoError (as `run_batched`).
void run_batched_sample(const SamplerSpecs& specs, const SampleTarget& target,
                        const std::shared_ptr<const BatchedTarget>& batched, const SampleRunOptions& options,
                        Communicator& comm, bool resuming = false);

/// Makes `in` a batched run when `in.specs.device` is "cpu_batched" or "cuda" (else does
/// nothing): checks the device (`check_batched_device` on `comm.size()` ranks), sets
/// `in.run` to `run_batched_sample` with `batched` and `in.run_restartable`. Call while
/// resolving the input, after the specifications and the target. @throws herd::InputError
void use_batched_run(SamplerProgramInput& in, std::shared_ptr<const BatchedTarget> batched, const Communicator& comm);

}  // namespace herd::mcmc
