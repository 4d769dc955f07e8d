#pragma once
// Internal to herd::mcmc (not installed): what the DRAM kernel (dram.cpp) shares with the run
// layer's checkpoint format (run/checkpoint_format.cpp).

#include "herd/mcmc/dram.hpp"

namespace herd::mcmc::detail {

/// The counters of a chain's result as its state `s` holds them: chain id, proposals
/// (`s.proposal_number`), chain size (`s.records_written`), acceptance rate (accepted /
/// proposals, 0 before the first proposal), per-stage acceptances, evaluations, NaN and
/// out-of-domain counts, adaptive updates (attempted, deferred) and Cholesky failures. The
/// burn-in, the covariances and `seconds` keep their defaults (`DramSampler::finish` computes
/// them; the checkpoint of a finished run stores them). Pure; thread-safe.
DramResult dram_result_counters(const DramState& s);

}  // namespace herd::mcmc::detail
