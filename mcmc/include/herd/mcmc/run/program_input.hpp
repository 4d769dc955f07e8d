#pragma once
/// @file program_input.hpp
/// What herd-sample and the C/Fortran API do alike with a resolved input before a run
/// (`run_sampler_program` then runs it): the target from the registry or the caller, the
/// sampler specifications, the domain, the memory check, the device (serial kernel or the
/// batched run, `use_batched_run`), the kernel options probe and the run options.

#include <memory>
#include <string>

#include "herd/core/communicator.hpp"
#include "herd/io/schema.hpp"
#include "herd/mcmc/paradram_run.hpp"
#include "herd/mcmc/run/target_registry.hpp"

namespace herd::mcmc {

/// Fills `in` from `settings` (resolved with `schema`, which declares the sampler
/// specifications and, where the program takes one, the target keys) for a run on
/// `comm.size()` ranks, given its target `made` (from `TargetRegistry::make` or the
/// caller's log density): `in.target`, `in.load_target`, `in.specs`
/// (`resolve_sampler_specs`), the target restricted to the domain, `check_sampler_memory`,
/// `use_batched_run` for `device = "cpu_batched" | "cuda"`, `in.seed_given`, and the run
/// options' resolved input, `input_source` = `origin` and input attributes (every key of
/// `schema` with a value). The kernel options are probed on the target (a `DramSampler` is
/// built), a plugin's start point once it is loaded (inside `in.load_target`); a probe's
/// message is prefixed with `origin`. Not collective.
/// @throws herd::InputError (exit code 2) naming the key and value.
void complete_program_input(SamplerProgramInput& in, MadeTarget made, const io::Schema& schema,
                            const io::Settings& settings, const Communicator& comm, const std::string& origin);

}  // namespace herd::mcmc
