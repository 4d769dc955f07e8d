// ParaDRAM's text chain and sample files (text_chain.hpp).
#include "text_chain.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <span>

#include "herd/core/error.hpp"
#include "herd/core/timer.hpp"
#include "herd/io/output_files.hpp"
#include "herd/mcmc/chain_record.hpp"
#include "outputs.hpp"
#include "real_format.hpp"

namespace herd::mcmc::detail {

namespace fs = std::filesystem;

std::string TextFormat::real(double v) const {
  std::string s;
  append_real(s, v);
  return s;
}

char* TextFormat::write_real(char* p, double v) const {
  if (char* end = format_scientific(p, v, precision)) return pad(p, end);  // the bytes of to_chars below, faster
  if (std::isfinite(v) && precision >= 1 && precision <= 40) {
    const std::to_chars_result r = std::to_chars(p, p + field_bytes(), v, std::chars_format::scientific, precision - 1);
    if (r.ec == std::errc()) return pad(p, r.ptr);
  }
  const std::string s = fmt::format("{:.{}e}", v, precision - 1);  // at most precision + 7 bytes
  return pad(p, std::copy(s.begin(), s.end(), p));
}

void TextFormat::append_real(std::string& out, double v) const {
  char buf[64];
  if (field_bytes() <= sizeof buf) {
    out.append(buf, write_real(buf, v));
    return;
  }
  const std::size_t start = out.size();
  out.resize(start + field_bytes());
  out.resize(static_cast<std::size_t>(write_real(out.data() + start, v) - out.data()));
}

TextFile::TextFile(std::string path, bool append) : path_(std::move(path)) {
  f_ = io::open_output_file(path_, append);  // never through a symbolic link
}

TextFile::~TextFile() {
  if (f_) std::fclose(f_);
}

std::uint64_t TextFile::sync() {
  flush();
  if (::fsync(fileno(f_)) != 0) throw IoError(fmt::format("cannot fsync \"{}\"", path_));
  const long n = std::ftell(f_);
  if (n < 0) throw IoError(fmt::format("cannot tell the length of \"{}\"", path_));
  return static_cast<std::uint64_t>(n);
}

void TextFile::start_writeback() {
  flush();
  const long n = std::ftell(f_);
#if defined(__linux__)
  if (n > static_cast<long>(written_back_))
    (void)::sync_file_range(fileno(f_), static_cast<off_t>(written_back_),
                            static_cast<off_t>(n) - static_cast<off_t>(written_back_), SYNC_FILE_RANGE_WRITE);
#endif
  if (n > 0) written_back_ = static_cast<std::uint64_t>(n);
}

void TextFile::fail(const char* what) const {
  const int e = errno;
  if (e == 0) throw IoError(fmt::format("{} \"{}\"", what, path_));
  std::string why = std::strerror(e);
  if (!why.empty()) why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
  throw IoError(fmt::format("{} \"{}\": {}", what, path_, why));
}

void TextFile::write(std::string_view s) {
  errno = 0;
  if (std::fwrite(s.data(), 1, s.size(), f_) != s.size()) fail("cannot write");
}

void TextFile::flush() {
  errno = 0;
  if (std::fflush(f_) != 0) fail("cannot write");
}

void TextFile::close() {
  errno = 0;
  if (f_ && std::fclose(f_) != 0) {
    f_ = nullptr;
    fail("cannot close");
  }
  f_ = nullptr;
}

std::int64_t RunningBurnin::add(std::int64_t i, double lp) {
  if (max_lp_.empty() || lp > max_lp_.back()) {
    max_idx_.push_back(i);
    max_lp_.push_back(lp);
  }
  // Without the logarithm where the first maximum clears the threshold anyway: L <= log(i + 1)
  // (from i + 1 >= 2^j, ln 2 rounded down) and max - L rounded is at least max - log(i + 1)
  // rounded (the subtraction is monotone), so the search below would return the first row.
  const double lower_log = static_cast<double>(std::bit_width(static_cast<std::uint64_t>(i + 1)) - 1) * 0.6931;
  if (max_lp_.front() >= max_lp_.back() - lower_log) return max_idx_.front();
  const double threshold = max_lp_.back() - std::log(static_cast<double>(i + 1));
  const auto it = std::lower_bound(max_lp_.begin(), max_lp_.end(), threshold);
  return max_idx_[static_cast<std::size_t>(it - max_lp_.begin())];
}

void RunningBurnin::restore(std::vector<std::int64_t> rows, std::vector<double> values) {
  max_idx_ = std::move(rows);
  max_lp_ = std::move(values);
}

std::string chain_header(const SamplerSpecs& specs, const TextFormat& tf) {
  std::string h = "ProcessID" + tf.delim + "DelayedRejectionStage" + tf.delim + "MeanAcceptanceRate" + tf.delim +
                  "AdaptationMeasure" + tf.delim + "BurninLocation" + tf.delim + "SampleWeight" + tf.delim +
                  "SampleLogFunc";
  for (const auto& n : specs.variable_names) h += tf.delim + n;
  return h + "\n";
}

std::string chain_rows(const SamplerSpecs& specs, const TextFormat& tf, RunningBurnin& burnin, std::int64_t i,
                       const ChainRecord& r, int process_id) {
  std::string out;
  append_chain_rows(out, specs, tf, burnin, i, r, process_id);
  return out;
}

std::size_t chain_row_bytes(const TextFormat& tf, int ndim) {
  return static_cast<std::size_t>(std::max(ndim, 0) + 7) * (tf.field_bytes() + tf.delim.size()) + 1;
}

char* write_chain_row(char* p, const TextFormat& tf, RunningBurnin& burnin, std::int64_t i, const ChainRecord& r,
                      std::int64_t weight, int process_id) {
  const std::int64_t b = burnin.add(i, r.log_density) + 1;  // 1-based, as ParaDRAM
  // Mean acceptance rate when this state became current: i acceptances in r.step proposals.
  const double rate = r.step == 0 ? 1.0 : static_cast<double>(i) / static_cast<double>(r.step);
  const char* delim = tf.delim.data();
  const std::size_t dn = tf.delim.size();
  auto sep = [&](char* q) {
    if (dn == 1) {
      *q = *delim;
      return q + 1;
    }
    std::memcpy(q, delim, dn);
    return q + dn;
  };
  // The reals: the formatter of tf.precision called directly, tf.write_real where it
  // declines (near ties, NaN, inf) or pads.
  const ScientificFormatter fast = tf.width == 0 ? scientific_formatter(tf.precision) : nullptr;
  auto real = [&](char* q, double v) {
    if (fast != nullptr)
      if (char* end = fast(q, v)) return end;
    return tf.write_real(q, v);
  };
  p = sep(tf.write_integer(p, process_id));
  // ParaDRAM's DelayedRejectionStage counts the stages from 0: the first stage (and the
  // start point) is 0, the k-th delayed-rejection stage k; the record's dr_stage counts the
  // first stage 1 and keeps 0 for the start point.
  p = sep(tf.write_integer(p, std::max(0, r.dr_stage - 1)));
  p = sep(real(p, rate));
  p = sep(real(p, r.adapt_measure));
  p = sep(tf.write_integer(p, b));
  p = sep(tf.write_integer(p, weight));
  p = real(p, r.log_density);
  for (int k = 0; k < r.ndim; ++k) p = real(sep(p), r.point[k]);
  *p++ = '\n';
  return p;
}

void append_chain_rows(std::string& out, const SamplerSpecs& specs, const TextFormat& tf, RunningBurnin& burnin,
                       std::int64_t i, const ChainRecord& r, int process_id) {
  const bool verbose = specs.chain_file_format == "verbose";
  const std::int64_t reps = verbose ? r.weight : 1;
  const std::size_t start = out.size();
  out.resize(start + chain_row_bytes(tf, r.ndim));
  out.resize(static_cast<std::size_t>(
      write_chain_row(out.data() + start, tf, burnin, i, r, verbose ? 1 : r.weight, process_id) - out.data()));
  if (reps == 1) return;
  const std::size_t len = out.size() - start;
  if (reps < 1) {
    out.resize(start);
    return;
  }
  out.reserve(start + len * static_cast<std::size_t>(reps));  // no reallocation below: the copies read `out`
  for (std::int64_t k = 1; k < reps; ++k) out.append(out.data() + start, len);
}

ChainFileStream::ChainFileStream(std::string path, const SamplerSpecs& specs, const TextFormat& tf)
    : path_(std::move(path)), specs_(specs), tf_(tf), binary_(specs.chain_file_format == "binary") {}

ChainFileStream::~ChainFileStream() {
  try {
    if (cur_ != nullptr && cur_->used > 0) submit();
  } catch (...) {
  }
  stop_writer();
}

void ChainFileStream::begin(std::uint32_t chain_id, int ndim) {
  if (file_) return;
  file_ = std::make_unique<TextFile>(path_);
  if (!binary_) {
    file_->write(chain_header(specs_, tf_));
    return;
  }
  const auto h = binary_chain_header(chain_id, ndim);
  file_->write(std::string_view(reinterpret_cast<const char*>(h.data()), h.size()));
  if (!record_chain_.empty()) copy_record_chain(ndim);
}

void ChainFileStream::copy_record_chain(int ndim) {
  std::FILE* in = std::fopen(record_chain_.c_str(), "rb");
  if (in == nullptr) throw IoError(fmt::format("cannot open the restart record's chain file \"{}\"", record_chain_));
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(in, &std::fclose);
  std::vector<char> buf(std::size_t{1} << 20);
  for (std::uint64_t left = record_bytes_; left > 0;) {
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(left, buf.size()));
    if (std::fread(buf.data(), 1, want, in) != want)
      throw IoError(fmt::format("the restart record's chain file \"{}\" is shorter than its checkpoint's {} bytes",
                                record_chain_, record_bytes_));
    file_->write(std::string_view(buf.data(), want));
    left -= want;
  }
  rows_ = static_cast<std::int64_t>(record_bytes_ / chain_record_bytes(ndim));
  record_chain_.clear();
}

ChainFileStream::Block* ChainFileStream::take_block(std::size_t bytes) {
  Block* b = nullptr;
  {
    std::unique_lock lock(m_);
    if (free_.empty() && blocks_.size() < static_cast<std::size_t>(kBlocks)) {
      blocks_.push_back(std::make_unique<Block>());
      b = blocks_.back().get();
    } else {
      to_sampler_.wait(lock, [this] { return !free_.empty(); });
      b = free_.back();
      free_.pop_back();
    }
  }
  const std::size_t cap = std::max(bytes, kBlockBytes);
  if (b->capacity < cap) {
    b->bytes = std::make_unique_for_overwrite<std::byte[]>(cap);
    b->capacity = cap;
  }
  b->used = 0;
  return b;
}

void ChainFileStream::submit() {
  if (cur_ == nullptr || cur_->used == 0) return;
  if (!writer_.joinable()) writer_ = std::thread([this] { writer_loop(); });
  {
    const std::lock_guard lock(m_);
    full_.push_back(cur_);
  }
  cur_ = nullptr;
  want_partial_.store(false, std::memory_order_relaxed);
  to_writer_.notify_one();
}

void ChainFileStream::write(const ChainRecord& r) {
  if (failed_.load(std::memory_order_acquire)) rethrow_error();
  const std::size_t need = chain_record_bytes(std::max(r.ndim, 0));
  if (cur_ != nullptr && (cur_->capacity - cur_->used < need || cur_->ndim != r.ndim)) submit();
  if (cur_ == nullptr) {
    cur_ = take_block(need);
    cur_->ndim = r.ndim;
  }
  encode_chain_record(r, cur_->bytes.get() + cur_->used);
  cur_->used += need;
  // The writer found nothing to do for half a second: hand it this block as it is.
  if (want_partial_.load(std::memory_order_relaxed)) submit();
}

void ChainFileStream::writer_loop() {
  for (;;) {
    Block* b = nullptr;
    {
      std::unique_lock lock(m_);
      while (full_.empty() && !stop_)
        if (to_writer_.wait_for(lock, std::chrono::milliseconds(500)) == std::cv_status::timeout && full_.empty())
          want_partial_.store(true, std::memory_order_relaxed);
      if (full_.empty()) return;  // stopped, everything written
      b = full_.front();
      full_.pop_front();
      busy_ = true;
    }
    if (!failed_.load(std::memory_order_relaxed)) {
      try {
        write_block(*b);
      } catch (...) {
        error_ = std::current_exception();
        failed_.store(true, std::memory_order_release);
      }
    }
    {
      const std::lock_guard lock(m_);
      b->used = 0;
      free_.push_back(b);
      busy_ = false;
    }
    to_sampler_.notify_all();
  }
}

void ChainFileStream::write_block(const Block& b) {
  if (!file_) throw IoError(fmt::format("the chain file \"{}\" was not opened before its rows", path_));
  const std::size_t rb = chain_record_bytes(b.ndim);
  if (binary_) {  // the records as they are (the binary chain's layout)
    emit(std::string_view(reinterpret_cast<const char*>(b.bytes.get()), b.used));
    rows_ += static_cast<std::int64_t>(b.used / rb);
    return;
  }
  // Rows are formatted in place into a buffer of kChunk bytes (plus a row) and written when
  // it holds kChunk bytes or the block ends.
  constexpr std::size_t kChunk = std::size_t{64} << 10;
  const std::size_t row_max = chain_row_bytes(tf_, b.ndim);
  if (text_capacity_ < kChunk + row_max) {
    text_ = std::make_unique_for_overwrite<char[]>(kChunk + row_max);
    text_capacity_ = kChunk + row_max;
  }
  const bool verbose = specs_.chain_file_format == "verbose";
  point_.resize(static_cast<std::size_t>(b.ndim));
  for (std::size_t at = 0; at < b.used; at += rb) {
    const ChainRecord r =
        decode_chain_record(std::span<const std::byte>(b.bytes.get() + at, b.used - at), b.ndim, point_.data());
    char* row = text_.get() + text_used_;
    const char* end = write_chain_row(row, tf_, burnin_, rows_++, r, verbose ? 1 : r.weight, 1);
    const auto len = static_cast<std::size_t>(end - row);
    text_used_ += len;
    if (verbose && r.weight != 1) {
      if (r.weight < 1) {
        text_used_ -= len;
      } else {
        repeat_.assign(row, len);
        for (std::int64_t k = 1; k < r.weight; ++k) {
          if (text_used_ >= kChunk) write_text();
          std::memcpy(text_.get() + text_used_, repeat_.data(), len);
          text_used_ += len;
        }
      }
    }
    if (text_used_ >= kChunk) write_text();
  }
  write_text();
}

void ChainFileStream::write_text() {
  if (text_used_ == 0) return;
  emit(std::string_view(text_.get(), text_used_));
  text_used_ = 0;
}

void ChainFileStream::emit(std::string_view bytes) {
  file_->write(bytes);
  pending_ += bytes.size();
  if (durable_ && pending_ >= (std::size_t{1} << 20)) {
    // Start the disk writes now, so that the checkpoint's fsync waits less (as for the
    // binary record); the time counts as checkpoint time.
    Timer t;
    file_->start_writeback();
    pending_ = 0;
    writeback_seconds += t.seconds();
  }
}

void ChainFileStream::drain() {
  submit();
  if (writer_.joinable()) {
    std::unique_lock lock(m_);
    to_sampler_.wait(lock, [this] { return full_.empty() && !busy_; });
  }
  if (failed_.load(std::memory_order_acquire)) rethrow_error();
}

void ChainFileStream::stop_writer() noexcept {
  if (!writer_.joinable()) return;
  {
    const std::lock_guard lock(m_);
    stop_ = true;
  }
  to_writer_.notify_one();
  writer_.join();
  stop_ = false;
}

void ChainFileStream::rethrow_error() const { std::rethrow_exception(error_); }

void ChainFileStream::flush() {
  drain();
  if (file_) file_->flush();
}

void ChainFileStream::checkpoint(io::CheckpointWriter& w) {
  drain();
  w.add_value("text.bytes", file_->sync());
  w.add_value("text.rows", rows_);
  w.add("text.burnin_rows", burnin_.rows());
  w.add("text.burnin_values", burnin_.values());
}

void ChainFileStream::resume(const io::CheckpointReader& r, const std::string& record_chain) {
  drain();
  if (binary_ && !r.has("text.bytes")) {
    record_chain_ = record_chain;
    record_bytes_ = r.value<std::uint64_t>("chain_bytes");
    return;
  }
  const auto bytes = r.value<std::uint64_t>("text.bytes");
  std::error_code ec;
  const auto size = fs::file_size(path_, ec);
  if (ec || size < bytes)
    throw IoError(
        fmt::format("the chain file \"{}\" is shorter than its checkpoint records ({} bytes); set "
                    "overwrite = true to start afresh",
                    path_, bytes));
  fs::resize_file(path_, bytes);
  rows_ = r.value<std::int64_t>("text.rows");
  burnin_.restore(r.get<std::int64_t>("text.burnin_rows"), r.get<double>("text.burnin_values"));
  file_ = std::make_unique<TextFile>(path_, true);
}

void ChainFileStream::close() {
  try {
    drain();
  } catch (...) {
    stop_writer();
    file_.reset();
    throw;
  }
  stop_writer();
  if (file_) file_->close();
  file_.reset();
}

void write_chain_file(const std::string& path, const SamplerSpecs& specs, const TextFormat& tf,
                      const MemoryChainSink& c, int process_id) {
  if (specs.chain_file_format == "binary") {
    BinaryChainSink b(path);
    b.begin(c.chain_id, c.ndim);
    ChainReader rd(c, kAllColumns);
    for (std::size_t i = 0; i < c.size(); ++i) b.write(rd.record(i));
    b.flush();
    return;
  }
  TextFile f(path);
  f.write(chain_header(specs, tf));
  RunningBurnin burnin;
  ChainReader rd(c, kAllColumns);
  for (std::size_t idx = 0; idx < c.size(); ++idx)
    f.write(chain_rows(specs, tf, burnin, static_cast<std::int64_t>(idx), rd.record(idx), process_id));
  f.close();
}

void write_sample_file(const std::string& path, const SamplerSpecs& specs, const TextFormat& tf,
                       const MemoryChainSink& c, int ndim, const SampleRows& rows) {
  TextFile f(path);
  std::string h = "SampleLogFunc";
  for (const auto& name : specs.variable_names) h += tf.delim + name;
  f.write(h + "\n");
  ChainReader rd(c, kLogDensityColumn | kPointColumns);  // the rows are in increasing order
  rows.for_each(c, [&](std::size_t r) {
    std::string row;
    tf.append_real(row, rd.log_density(r));
    const double* x = rd.point(r);
    for (int j = 0; j < ndim; ++j) {
      row += tf.delim;
      tf.append_real(row, x[j]);
    }
    f.write(row + "\n");
  });
  f.close();
}

}  // namespace herd::mcmc::detail
