#pragma once
/// @file faults.hpp
/// Start-up checks and failure handling for programs run on several processes (MPI ranks),
/// shared by herd-sample, herd-rl and the C API (DESIGN.md §4).

#include <cstdint>
#include <functional>
#include <string_view>

#include "herd/core/communicator.hpp"

namespace herd {

/// The launcher's claimed number of processes from its environment (`PMI_SIZE` of
/// MPICH's Hydra and Intel MPI, `OMPI_COMM_WORLD_SIZE` of Open MPI, `MV2_COMM_WORLD_SIZE`
/// of MVAPICH; the largest), or 0 when none is set. Thread-safe (reads the environment).
int launcher_process_count();

/// Detects a launch where every process believes it is alone: the launcher says more
/// than one process but MPI reports `mpi_size` == 1 (for example Open MPI's `mpiexec` with
/// an MPICH build), which would otherwise make N processes do the same work and write the
/// same files. @throws herd::InputError with the launcher's count and a hint.
void check_launch(int mpi_size);

/// Compares `hash` (of the resolved input) across ranks at start-up. Collective.
/// @throws herd::InputError on every rank, naming the ranks whose `what` differs from
///   rank 0's.
void check_same_input(Communicator& comm, std::uint64_t hash, std::string_view what = "input");

/// Runs `body`; when it throws on a run with more than one rank, prints
/// "herd: rank R of N failed: <message>" to stderr and ends every rank with
/// `comm.abort(code)` (MPI_Abort), so no rank waits for it in a collective. With one rank
/// the exception propagates. Files written atomically (checkpoints) are never left half
/// written by the abort. Returns normally only when `body` does.
void abort_all_on_error(Communicator& comm, const std::function<void()>& body, int code = 1);

}  // namespace herd
