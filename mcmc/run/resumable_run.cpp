// One chain with an append-only chain file and atomic checkpoints (parallel.hpp,
// `run_resumable`, `read_resumable_chain`), and the chain record that the resumable
// fork-join run shares (checkpoint_format.hpp).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "checkpoint_format.hpp"
#include "herd/core/error.hpp"
#include "herd/core/timer.hpp"

namespace herd::mcmc {

namespace detail {

ChainFileState open_record(const ResumableOptions& files, std::uint64_t hash) {
  ChainFileState out;
  if (files.overwrite || !std::filesystem::exists(files.checkpoint_path)) return out;
  io::CheckpointReader r(files.checkpoint_path);
  r.expect_kind("herd-dram-chain", 1);
  HERD_REQUIRE(r.value<std::uint64_t>("options_hash") == hash,
               "the checkpoint \"{}\" belongs to a run with other options; give overwrite = true to start "
               "afresh, or restore the original input",
               files.checkpoint_path);
  out.resumed = true;
  // Records written before the elapsed time was kept have none: 0.
  out.seconds_before = r.has("elapsed_seconds") ? r.value<double>("elapsed_seconds") : 0.0;
  if (r.value<std::uint8_t>("complete") != 0) {
    out.complete = true;
    out.result = load_result(r);
    out.proposals_before = static_cast<std::uint64_t>(out.result.proposals);
    return out;
  }
  out.state = std::make_unique<DramState>(load_dram_state(r));
  out.proposals_before = out.state->proposal_number;
  out.chain_bytes = r.value<std::uint64_t>("chain_bytes");
  out.checksums = load_chain_checksums(r, files.checkpoint_path);
  if (files.on_resume) files.on_resume(r);
  return out;
}

void append_chain(io::AppendFile& file, io::BlockChecksums& sums, std::vector<std::byte>& buf) {
  if (buf.empty()) return;
  file.append(std::span<const std::byte>(buf));
  sums.add(std::span<const std::byte>(buf));
  buf.clear();
}

void commit_record(const ResumableOptions& files, std::uint64_t hash, io::AppendFile& file, io::BlockChecksums& sums,
                   ByteSink& sink, const DramState& state, const DramResult* final_result, double elapsed_seconds) {
  append_chain(file, sums, sink.buf);
  file.sync();
  io::CheckpointWriter w("herd-dram-chain", 1);
  w.add_value("options_hash", hash);
  w.add_value("chain_bytes", file.size());
  w.add("chain_crc32", sums.crcs);
  w.add_value("complete", static_cast<std::uint8_t>(final_result ? 1 : 0));
  w.add_value("elapsed_seconds", elapsed_seconds);  // sampling time of all invocations so far
  save_dram_state(w, state);
  if (final_result) save_result(w, *final_result);
  if (files.on_checkpoint) files.on_checkpoint(w);
  w.commit(files.checkpoint_path);
}

}  // namespace detail

using detail::append_chain;
using detail::ByteSink;
using detail::ChainFileState;
using detail::commit_record;
using detail::kAppendChunk;
using detail::kInf;
using detail::open_record;

// --- restart ------------------------------------------------------------------------------

namespace {

/// Reads the chain file `path` into `c` (in memory or file-backed).
MemoryChainSink read_chain_into(const std::string& path, int ndim, MemoryChainSink c);

}  // namespace

MemoryChainSink read_resumable_chain(const std::string& path, int ndim, const std::string& checkpoint_path,
                                     const std::optional<std::string>& scratch_dir) {
  {
    io::CheckpointReader r(checkpoint_path);
    r.expect_kind("herd-dram-chain", 1);
    detail::load_chain_checksums(r, checkpoint_path).verify(path, "the chain file");
  }
  return read_chain_into(path, ndim, scratch_dir ? MemoryChainSink(*scratch_dir) : MemoryChainSink());
}

MemoryChainSink read_resumable_chain(const std::string& path, int ndim) {
  return read_chain_into(path, ndim, MemoryChainSink());
}

MemoryChainSink read_sampled_chain(const std::string& path, int ndim, const std::optional<std::string>& scratch_dir) {
  return read_chain_into(path, ndim, scratch_dir ? MemoryChainSink(*scratch_dir) : MemoryChainSink());
}

namespace {

MemoryChainSink read_chain_into(const std::string& path, int ndim, MemoryChainSink c) {
  // Read in blocks of whole records into columns reserved to their final size (in memory:
  // the chain is held once, no copy of the file, no spare capacity).
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw IoError(fmt::format("cannot open the chain file \"{}\"", path));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, &std::fclose);
  const std::size_t rb = chain_record_bytes(ndim);
  std::error_code ec;
  const auto file_bytes = static_cast<std::size_t>(std::filesystem::file_size(path, ec));
  if (ec) throw IoError(fmt::format("cannot read the size of the chain file \"{}\": {}", path, ec.message()));
  if (file_bytes % rb != 0)
    throw IoError(
        fmt::format("the chain file \"{}\" has {} bytes, not a whole number of {}-byte records", path, file_bytes, rb));
  const std::size_t records = file_bytes / rb;
  if (!c.file_backed()) {
    c.step.reserve(records);
    c.weight.reserve(records);
    c.log_density.reserve(records);
    c.dr_stage.reserve(records);
    c.accept_prob.reserve(records);
    c.adapt_measure.reserve(records);
    c.points.reserve(records * static_cast<std::size_t>(ndim));
  }
  std::vector<double> pt(static_cast<std::size_t>(ndim));
  const std::size_t per_block = std::max<std::size_t>(1, (std::size_t{1} << 20) / rb);
  std::vector<std::byte> data(per_block * rb);
  std::span<const std::byte> block;  // the records of `data` not decoded yet
  for (std::size_t i = 0; i < records; ++i) {
    if (i % per_block == 0) {
      const std::size_t want = std::min(per_block, records - i) * rb;
      if (std::fread(data.data(), 1, want, f) != want)
        throw IoError(fmt::format("cannot read the chain file \"{}\" (record {} of {}): it changed while read", path, i,
                                  records));
      block = std::span<const std::byte>(data.data(), want);
    }
    const ChainRecord r = decode_chain_record(block, ndim, pt.data());
    block = block.subspan(rb);
    if (i == 0) c.begin(r.chain_id, ndim);
    c.write(r);
  }
  if (c.size() == 0) c.ndim = ndim;
  return c;
}

}  // namespace

ResumableRun run_resumable(const DramOptions& options, const PointLogDensity& log_density,
                           const ResumableOptions& files) {
  HERD_REQUIRE(!files.chain_path.empty() && !files.checkpoint_path.empty(),
               "run_resumable: chain_path and checkpoint_path must be given");
  HERD_REQUIRE(files.period_steps >= 0 && files.period_seconds >= 0,
               "run_resumable: the checkpoint period must be >= 0");
  Timer timer;
  ResumableRun out;
  const std::uint64_t hash = dram_options_hash(options);
  ChainFileState rec = open_record(files, hash);
  out.resumed = rec.resumed;
  out.seconds_before = rec.seconds_before;
  out.proposals_before = rec.proposals_before;
  if (rec.complete) {  // reported, not redone: the log density is not called
    out.already_complete = true;
    out.result = std::move(rec.result);
    out.result.seconds = 0.0;
    return out;
  }
  DramSampler sampler(options, log_density);
  io::AppendFile file;
  const bool resumed = rec.state != nullptr;
  if (resumed) {
    sampler.set_state(std::move(*rec.state));
    // The recorded part of the chain file is checked before anything is appended to it.
    rec.checksums.verify(files.chain_path, "the chain file");
    file = io::AppendFile::resume(files.chain_path, rec.chain_bytes);
  } else {
    file = io::AppendFile::create(files.chain_path);
  }
  ByteSink sink(files.tee);
  if (resumed) sink.resume_at(sampler.state().proposal_number, sampler.state().records_written);
  sink.begin(sampler.state().chain_id, sampler.ndim());
  auto commit = [&](const DramResult* final_result) {
    Timer t;
    commit_record(files, hash, file, rec.checksums, sink, sampler.state(), final_result,
                  rec.seconds_before + timer.seconds());
    ++out.checkpoints;
    out.checkpoint_seconds += t.seconds();
  };
  std::uint64_t next = files.period_steps > 0
                           ? sampler.state().proposal_number + static_cast<std::uint64_t>(files.period_steps)
                           : std::numeric_limits<std::uint64_t>::max();
  double next_time = files.period_seconds > 0 ? files.period_seconds : kInf;
  try {
    while (!sampler.finished()) {
      sampler.step(sink);
      if (sink.buf.size() >= kAppendChunk) {  // bounded memory; synced at the next checkpoint
        append_chain(file, rec.checksums, sink.buf);
        // The disk writes while we sample, so the checkpoint's fsync waits less; the call
        // can block when the disk falls behind, so it counts as checkpoint time.
        Timer t;
        file.start_writeback();
        out.checkpoint_seconds += t.seconds();
      }
      const std::uint64_t k = sampler.state().proposal_number;
      if (k >= next) {
        commit(nullptr);
        next = k + static_cast<std::uint64_t>(files.period_steps);
      } else if (next_time < kInf && (k & 63) == 0 && timer.seconds() >= next_time) {
        commit(nullptr);
        next_time = timer.seconds() + files.period_seconds;
      }
    }
  } catch (...) {
    if (files.tee) {
      try {
        files.tee->flush();
      } catch (...) {
      }
    }
    throw;
  }
  out.result = sampler.finish(sink, timer.seconds());
  commit(&out.result);
  return out;
}

}  // namespace herd::mcmc
