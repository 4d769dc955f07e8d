#pragma once
/// @file sample_batched.hpp
/// herd-sample's batched devices (`device = "cpu_batched" | "cuda"`,
/// docs/batched.md "Using it from herd-sample"): the batched DRAM sampler over the ranks of
/// a communicator, chains with global ids rank * chains_per_rank + i, thinned draws gathered
/// block by block to rank 0 and streamed into one `<prefix>.h5`, plus `<prefix>_report.txt`
/// and the summary table. With checkpoints (`checkpoint_period`, `checkpoint_period_seconds`)
/// the run's record is kept in `<prefix>_restart/` (`batched.ckpt` + `draws.bin`) and a run of
/// the same input resumes from it (docs/batched.md "Restart").

#include <memory>
#include <string>

#include "herd/core/communicator.hpp"
#include "herd/mcmc/batched_run.hpp"
#include "herd/mcmc/paradram_run.hpp"

namespace herd::apps {

/// The batched sampler's options for this rank: `num_chains = chains_per_rank`,
/// `first_chain_id = rank * chains_per_rank`, start points `[M, d]` from `to_dram_options`
/// of each global chain id's `start_point_chain` among the `ranks` x chains_per_rank chains
/// (so random start points depend on the chain id, or with random_start_point_scope =
/// "superchain" on its superchain), the proposal, delayed-rejection, domain, seed and
/// adaptation settings of `specs`, `steps = chain_size`.
/// @throws herd::InputError (e.g. too many chains for 32-bit chain ids).
mcmc::BatchedDramOptions batched_options(const mcmc::SamplerSpecs& specs, int ndim, int rank, int ranks);

/// Throws herd::InputError (exit code 2 in herd-sample) when `specs.device` cannot run
/// `target` (dimension `ndim`) on `ranks` processes: cuda needs a built-in target other than
/// the mixture (`batched` non-null) and a CUDA build with a usable device; the batched
/// options must be valid (checked on a one-chain probe, e.g. delayed_rejection_count <= 4)
/// and the global chain ids must fit 32 bits. Call while resolving the input (nothing
/// written).
void check_batched_device(const mcmc::SamplerSpecs& specs, const mcmc::BatchedTarget* batched, int ndim, int ranks);

/// Runs the batched sampler on every rank of `comm` (collective; every rank runs the same
/// number of chains, so the blocks of draws are gathered in lock-step). Rank 0 writes
/// `<prefix>.h5` (atomically: `posterior/<variable>` `[chain, draw]`, `sample_stats/lp`
/// `[chain, draw]`, netCDF scales `chain` (global ids) and `draw`, the resolved input as
/// attributes of `input`), `<prefix>_report.txt`, and prints the summary table unless quiet.
/// `batched` is the device-callable form of a built-in target, or null (the point log
/// density of `target` is then evaluated on the host: with the thread pool when
/// `target.thread_safe`, else on the calling thread). Under CUDA the device is
/// local rank mod device count (the rank among `comm`'s ranks on the same node,
/// `node_local_rank`: MPI_Comm_split_type shared memory).
/// Checkpoints (when a checkpoint period is > 0): at segment boundaries (after an adaptive
/// update, after a block of draws) once the period has passed, rank 0 appends every gathered
/// block to `<prefix>_restart/draws.bin` and atomically writes `batched.ckpt` (every rank's
/// chains, the adaptation state, the proposal index, the draws recorded, the length of
/// draws.bin, `options.input_hash`). `resuming` (the program's run record is of this input):
/// every rank restarts from `batched.ckpt` when there is one, rank 0 cuts draws.bin back to
/// its length and replays it into the new `.h5`; the outputs are byte-identical to an
/// uninterrupted run's. Call `mcmc::prepare_outputs` and manage `run.ckpt` around it
/// (`mcmc::run_sampler_program` with `run_restartable`).
/// @throws herd::InputError (also: a record of another layout), herd::NumericalError,
/// herd::IoError (as `run_batched`).
void run_batched_sample(const mcmc::SamplerSpecs& specs, const mcmc::SampleTarget& target,
                        const std::shared_ptr<const mcmc::BatchedTarget>& batched,
                        const mcmc::SampleRunOptions& options, Communicator& comm, bool resuming = false);

}  // namespace herd::apps
