// The text chain's internals (mcmc/run/, private to herd::mcmc): the streamed chain file
// (ChainFileStream, formatted on a writer thread) against the chain file written from the
// records at the end, its write errors, and the number formatter against std::to_chars.
#include <algorithm>
#include <bit>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/io/checkpoint.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/sampler_specs.hpp"
#include "real_format.hpp"  // mcmc/run/
#include "text_chain.hpp"   // mcmc/run/

using namespace herd::mcmc;
using namespace herd::mcmc::detail;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

fs::path work_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("herd_test_text_chain_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

/// `n` records of a 3-D chain: random points, weights 1..4, stages 0..2, growing steps.
struct Records {
  std::vector<double> points;
  std::vector<ChainRecord> recs;
  Records(std::size_t n, unsigned seed) : points(3 * n), recs(n) {
    std::mt19937_64 g(seed);
    std::normal_distribution<double> z;
    std::uint64_t step = 0;
    for (std::size_t i = 0; i < n; ++i) {
      for (int k = 0; k < 3; ++k) points[3 * i + static_cast<std::size_t>(k)] = z(g) * 3.0;
      ChainRecord& r = recs[i];
      r.step = step;
      r.weight = 1 + static_cast<std::int64_t>(g() % 4);
      step += static_cast<std::uint64_t>(r.weight);
      r.log_density = -0.5 * z(g) * z(g) - static_cast<double>(g() % 8);
      r.dr_stage = static_cast<std::int32_t>(g() % 3);
      r.adapt_measure = std::abs(z(g)) * 1e-3;
      r.point = &points[3 * i];
      r.ndim = 3;
    }
  }
};

SamplerSpecs specs_of(const std::string& format) {
  SamplerSpecs s;
  s.chain_file_format = format;
  s.variable_names = {"x1", "x2", "x3"};
  return s;
}

/// The bytes of std::to_chars(v, scientific, p - 1).
std::string to_chars_bytes(double v, int p) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific, p - 1);
  return {buf, r.ptr};
}

/// format_scientific's bytes, or to_chars' where it declines; counts the declines.
std::string fast_bytes(double v, int p, std::size_t& declined) {
  char buf[64];
  char* end = format_scientific(buf, v, p);
  if (end == nullptr) {
    ++declined;
    return to_chars_bytes(v, p);
  }
  return {buf, end};
}

}  // namespace

TEST_CASE("text chain: streamed on a writer thread, the bytes of the chain file written at the end", "[text_chain]") {
  // 20,000 records of 72 bytes fill 6 hand-over blocks of 256 KiB: blocks are reused. The
  // binary chain too: its header, then the records as the writer got them.
  const Records rs(20000, 7);
  for (const std::string format : {"compact", "verbose", "binary"}) {
    INFO(format);
    const SamplerSpecs specs = specs_of(format);
    for (const int precision : {8, 17}) {
      const TextFormat tf{",", precision, 0};
      const fs::path dir = work_dir(format + std::to_string(precision));
      MemoryChainSink memory;
      memory.begin(0, 3);
      {
        ChainFileStream s((dir / "streamed.txt").string(), specs, tf);
        s.begin(0, 3);
        for (std::size_t i = 0; i < rs.recs.size(); ++i) {
          s.write(rs.recs[i]);
          memory.write(rs.recs[i]);
          if (i == 5000) s.flush();  // a partial block, then more records
        }
        s.flush();
        s.close();
      }
      write_chain_file((dir / "at_end.txt").string(), specs, tf, memory, 1);
      const std::string streamed = slurp(dir / "streamed.txt");
      CHECK(streamed.size() > rs.recs.size() * 40);
      CHECK(streamed == slurp(dir / "at_end.txt"));
      // The destructor alone writes what was handed over (no close).
      {
        ChainFileStream s((dir / "destroyed.txt").string(), specs, tf);
        s.begin(0, 3);
        for (const ChainRecord& r : rs.recs) s.write(r);
      }
      CHECK(slurp(dir / "destroyed.txt") == streamed);
    }
  }
  fs::remove_all(fs::temp_directory_path() / ("herd_test_text_chain_" + std::to_string(::getpid())));
}

TEST_CASE("text chain: a write error of the writer thread reaches the sampler's next call", "[text_chain]") {
  if (!fs::exists("/dev/full")) {
    WARN("no /dev/full: skipped");
    return;
  }
  const Records rs(50000, 9);
  const SamplerSpecs specs = specs_of("compact");
  const TextFormat tf{",", 17, 0};
  const std::string expected = "cannot write \"/dev/full\": no space left on device";
  {
    // Many blocks: a later write throws (the sampler never waits forever for a block).
    ChainFileStream s("/dev/full", specs, tf);
    s.begin(0, 3);
    std::string msg;
    std::size_t at = 0;
    try {
      for (; at < rs.recs.size(); ++at) s.write(rs.recs[at]);
    } catch (const herd::IoError& e) {
      msg = e.what();
    }
    CHECK(msg == expected);
    CHECK(at < rs.recs.size());
    CHECK_THROWS_WITH(s.flush(), expected);
    CHECK_THROWS_WITH(s.close(), expected);
  }
  {
    // Less than a block: the flush throws.
    ChainFileStream s("/dev/full", specs, tf);
    s.begin(0, 3);
    for (std::size_t i = 0; i < 100; ++i) s.write(rs.recs[i]);
    CHECK_THROWS_WITH(s.flush(), expected);
  }
}

TEST_CASE("format_scientific: the bytes of std::to_chars at every precision 1..17", "[text_chain]") {
  std::mt19937_64 g(2024);
  std::normal_distribution<double> z;
  std::size_t declined = 0;
  std::size_t count = 0;
  std::size_t mismatches = 0;
  auto check = [&](double v) {
    for (int p = 1; p <= 17; ++p) {
      ++count;
      const std::string want = to_chars_bytes(v, p);
      const std::string got = fast_bytes(v, p, declined);
      if (got != want && ++mismatches <= 10)
        FAIL_CHECK(std::hexfloat << v << " p " << p << ": " << got << " vs " << want);
    }
  };
  // Random bit patterns (every exponent, subnormals included) and normals over 21 decades.
  for (int i = 0; i < 100000; ++i) {
    const auto v = std::bit_cast<double>(g());
    if (std::isfinite(v)) check(v);
    check(z(g) * std::pow(10.0, static_cast<int>(g() % 21) - 10));
  }
  const std::size_t declined_random = declined;
  const std::size_t count_random = count;
  // Edge cases: extremes, zeros, powers of 2 and 10 and their neighbours, exact decimal
  // ties, and 9.99.. that round up to the next power of ten.
  std::vector<double> edge = {DBL_MAX,
                              DBL_MIN,
                              DBL_TRUE_MIN,
                              -0.0,
                              0.0,
                              0.5,
                              1.25,
                              2.5e-3,
                              0.125,
                              0.375,
                              2.5,
                              9.5,
                              95.0,
                              0.95,
                              1e23,
                              0.1,
                              0.3,
                              1.0 / 3.0,
                              4503599627370496.5,
                              9007199254740993.0};
  for (int k = -1074; k <= 1023; ++k) {
    const double t = std::ldexp(1.0, k);
    edge.insert(edge.end(), {t, std::nextafter(t, 0.0), std::nextafter(t, INFINITY), 1.5 * t, 1.25 * t});
  }
  for (int k = -324; k <= 308; ++k) {
    const double t = std::pow(10.0, k);
    edge.insert(edge.end(), {t, std::nextafter(t, 0.0), std::nextafter(t, INFINITY)});
    for (int p = 1; p <= 17; ++p) {
      const double x = (10.0 - 5.0 * std::pow(10.0, -p)) * t;  // about 9.99..95 e k
      edge.insert(edge.end(), {x, std::nextafter(x, 0.0), std::nextafter(x, INFINITY)});
    }
  }
  for (int a = 1; a < 4000; a += 2) edge.insert(edge.end(), {a / 2.0, a / 8.0, a / 1024.0, a * 0.5e-3});
  for (const double v : edge) {
    check(v);
    check(-v);
  }
  CHECK(mismatches == 0);
  INFO(declined << " of " << count << " declined (" << declined_random << " of " << count_random << " random)");
  // The fast path does the work: it declines only near ties.
  CHECK(declined_random * 1000 < count_random);
  // TextFormat pads to the width as before.
  const TextFormat tf{",", 5, 14};
  std::string s;
  tf.append_real(s, -1.0 / 3.0);
  CHECK(s == "   -3.3333e-01");
  s.clear();
  tf.append_real(s, std::numeric_limits<double>::quiet_NaN());
  CHECK(s == std::string(14 - 3, ' ') + "nan");
}

TEST_CASE("format_scientific: zeros, powers of ten and their neighbours at every precision", "[text_chain]") {
  // Zero and negative zero are formatted (no longer handed to to_chars); the powers of ten
  // and the doubles next to them are where the exponent estimate and the P + 1 digit
  // rounding meet; the halfway cases 10^k (1 - 5 10^-p) decide between 9.99.. and 1.00...
  for (int p = 1; p <= 17; ++p) {
    INFO("precision " << p);
    char buf[64];
    for (const double z : {0.0, -0.0}) {
      char* end = format_scientific(buf, z, p);
      REQUIRE(end != nullptr);
      CHECK(std::string(buf, end) == to_chars_bytes(z, p));
    }
    std::size_t declined = 0;
    std::size_t count = 0;
    for (int k = -323; k <= 308; ++k) {
      const double t = std::pow(10.0, k);
      double x = t;
      for (int step = 0; step < 4; ++step) x = std::nextafter(x, 0.0);
      for (int step = 0; step < 9; ++step, x = std::nextafter(x, INFINITY)) {
        for (const double v : {x, -x, (1.0 - 5.0 * std::pow(10.0, -p)) * x}) {
          ++count;
          CHECK(fast_bytes(v, p, declined) == to_chars_bytes(v, p));
        }
      }
    }
    CHECK(declined * 20 < count);
  }
  // Subnormals at every precision (the exponent estimate's other end).
  std::mt19937_64 g(77);
  for (int i = 0; i < 20000; ++i) {
    const double v = std::bit_cast<double>(g() & ((std::uint64_t{1} << 52) - 1));
    for (int p = 1; p <= 17; ++p) {
      std::size_t declined = 0;
      CHECK(fast_bytes(v, p, declined) == to_chars_bytes(v, p));
    }
  }
  // NaN and infinities: declined (to_chars writes them).
  char buf[64];
  for (const double v : {std::numeric_limits<double>::quiet_NaN(), double{INFINITY}, -double{INFINITY}}) {
    CHECK(format_scientific(buf, v, 8) == nullptr);
    CHECK(scientific_formatter(8)(buf, v) == nullptr);
  }
  CHECK(scientific_formatter(0) == nullptr);
  CHECK(scientific_formatter(18) == nullptr);
  CHECK(format_scientific(buf, 1.0, 18) == nullptr);
}

TEST_CASE("text chain rows: written in place, the bytes of std::to_chars' fields", "[text_chain]") {
  // write_chain_row against the row built field by field from std::to_chars, padded, over
  // precisions, widths and delimiters, with NaN, inf, zeros and near-tie values (the slow
  // paths inside a row).
  Records rs(2000, 11);
  std::vector<double> special = {
      0.0, -0.0, 0.125, 2.5, std::numeric_limits<double>::quiet_NaN(), INFINITY, -INFINITY, 1e-310, 9.9999999999e99};
  for (std::size_t i = 0; i < special.size(); ++i) {
    rs.points[3 * i] = special[i];
    rs.recs[i].log_density = special[(i + 3) % special.size()];
    rs.recs[i].adapt_measure = special[(i + 5) % special.size()];
  }
  for (const int precision : {1, 2, 8, 17}) {
    for (const int width : {0, 9, 30}) {
      for (const std::string delim : {",", " ; "}) {
        INFO("precision " << precision << " width " << width << " delimiter '" << delim << "'");
        const TextFormat tf{delim, precision, width};
        RunningBurnin b1;
        RunningBurnin b2;
        for (std::size_t i = 0; i < rs.recs.size(); ++i) {
          const ChainRecord& r = rs.recs[i];
          const auto row_index = static_cast<std::int64_t>(i);
          // The fields by std::to_chars, padded on the left.
          std::string want;
          auto field = [&](const std::string& f, bool last = false) {
            if (f.size() < static_cast<std::size_t>(width))
              want.append(static_cast<std::size_t>(width) - f.size(), ' ');
            want += f;
            if (!last) want += delim;
          };
          field("1");
          field(std::to_string(std::max(0, r.dr_stage - 1)));  // ParaDRAM's: the first stage is 0
          field(to_chars_bytes(r.step == 0 ? 1.0 : static_cast<double>(i) / static_cast<double>(r.step), precision));
          field(to_chars_bytes(r.adapt_measure, precision));
          field(std::to_string(b1.add(row_index, r.log_density) + 1));
          field(std::to_string(r.weight));
          field(to_chars_bytes(r.log_density, precision), r.ndim == 0);
          for (int k = 0; k < r.ndim; ++k) field(to_chars_bytes(r.point[k], precision), k + 1 == r.ndim);
          want += '\n';
          std::vector<char> buf(chain_row_bytes(tf, r.ndim));
          char* end = write_chain_row(buf.data(), tf, b2, row_index, r, r.weight, 1);
          REQUIRE(std::string(buf.data(), end) == want);
        }
      }
    }
  }
}

TEST_CASE("RunningBurnin: the first row within log(i + 1) of the running maximum", "[text_chain]") {
  // Against the definition, with long plateaus (the first maximum clears the threshold
  // without the logarithm) and late new maxima that move the burn-in row.
  std::mt19937_64 g(5);
  std::normal_distribution<double> z;
  for (const double drift : {0.0, 1e-3, 3e-2}) {
    RunningBurnin b;
    std::vector<double> lp;
    double max = -INFINITY;
    for (std::int64_t i = 0; i < 20000; ++i) {
      const double v = z(g) + drift * static_cast<double>(i) - (i == 0 ? 30.0 : 0.0);
      lp.push_back(v);
      max = std::max(max, v);
      const double threshold = max - std::log(static_cast<double>(i + 1));
      std::int64_t want = 0;
      while (!(lp[static_cast<std::size_t>(want)] >= threshold)) ++want;
      REQUIRE(b.add(i, v) == want);
    }
  }
}

TEST_CASE("text chain: verbose rows repeated across the writer's 64 KiB pieces", "[text_chain]") {
  // Weights up to 3000 (a row repeated over several 64 KiB pieces) streamed against the
  // file written at the end.
  Records rs(300, 13);
  for (std::size_t i = 0; i < rs.recs.size(); ++i)
    rs.recs[i].weight = i % 7 == 0 ? 3000 : 1 + static_cast<std::int64_t>(i % 3);
  const SamplerSpecs specs = specs_of("verbose");
  const TextFormat tf{",", 17, 0};
  const fs::path dir = work_dir("verbose_repeats");
  MemoryChainSink memory;
  memory.begin(0, 3);
  {
    ChainFileStream s((dir / "streamed.txt").string(), specs, tf);
    s.begin(0, 3);
    for (const ChainRecord& r : rs.recs) {
      s.write(r);
      memory.write(r);
    }
    s.close();
  }
  write_chain_file((dir / "at_end.txt").string(), specs, tf, memory, 1);
  const std::string streamed = slurp(dir / "streamed.txt");
  CHECK(streamed.size() > (std::size_t{4} << 20));
  CHECK(streamed == slurp(dir / "at_end.txt"));
  fs::remove_all(fs::temp_directory_path() / ("herd_test_text_chain_" + std::to_string(::getpid())));
}

TEST_CASE("binary chain: streamed, checkpointed and resumed, the bytes of the file written at the end",
          "[text_chain]") {
  Records rs(9000, 21);
  for (ChainRecord& r : rs.recs) r.chain_id = 4;  // the header's and every record's
  const SamplerSpecs specs = specs_of("binary");
  const TextFormat tf{",", 17, 0};
  const fs::path dir = work_dir("binary_resume");
  MemoryChainSink memory;
  memory.begin(4, 3);
  for (const ChainRecord& r : rs.recs) memory.write(r);
  write_chain_file((dir / "at_end.bin").string(), specs, tf, memory, 1);
  const std::string at_end = slurp(dir / "at_end.bin");
  REQUIRE(at_end.size() == kBinaryChainHeaderBytes + rs.recs.size() * chain_record_bytes(3));
  const std::size_t cut = 5000;  // records before the checkpoint
  // The restart record's chain: the first `cut` records' bytes (no header).
  const std::string record_chain = (dir / "chain_0.chain").string();
  {
    std::ofstream f(record_chain, std::ios::binary);
    f << at_end.substr(kBinaryChainHeaderBytes, cut * chain_record_bytes(3));
  }
  // A resumed run from the checkpoint `ckpt`: the records after the cut, then the file.
  const auto resume_to_end = [&](const std::string& ckpt) {
    ChainFileStream s((dir / "streamed.bin").string(), specs, tf);
    s.resume(herd::io::CheckpointReader(ckpt), record_chain);
    s.begin(4, 3);
    for (std::size_t i = cut; i < rs.recs.size(); ++i) s.write(rs.recs[i]);
    s.close();
    return slurp(dir / "streamed.bin");
  };
  SECTION("a checkpoint of this version: the file cut back to its length") {
    const std::string ckpt = (dir / "a.ckpt").string();
    {
      ChainFileStream s((dir / "streamed.bin").string(), specs, tf);
      s.set_durable();
      s.begin(4, 3);
      for (std::size_t i = 0; i < cut; ++i) s.write(rs.recs[i]);
      herd::io::CheckpointWriter w("test", 1);
      w.add_value("chain_bytes", static_cast<std::uint64_t>(cut * chain_record_bytes(3)));
      s.checkpoint(w);
      w.commit(ckpt);
      for (std::size_t i = cut; i < cut + 700; ++i) s.write(rs.recs[i]);  // lost by the "crash"
      s.close();
    }
    CHECK(resume_to_end(ckpt) == at_end);
  }
  SECTION("a checkpoint without the file's length: the file made again from the record's chain") {
    const std::string ckpt = (dir / "b.ckpt").string();
    {
      herd::io::CheckpointWriter w("test", 1);
      w.add_value("chain_bytes", static_cast<std::uint64_t>(cut * chain_record_bytes(3)));
      w.commit(ckpt);
    }
    {
      std::ofstream f(dir / "streamed.bin", std::ios::binary);
      f << "partial bytes of an earlier file";
    }
    CHECK(resume_to_end(ckpt) == at_end);
    // A record chain shorter than the checkpoint says: one line naming the file.
    fs::resize_file(record_chain, 1000);
    ChainFileStream t((dir / "again.bin").string(), specs, tf);
    t.resume(herd::io::CheckpointReader(ckpt), record_chain);
    CHECK_THROWS_WITH(t.begin(4, 3), Catch::Contains("chain_0.chain\" is shorter than its checkpoint's 360000 bytes"));
  }
  fs::remove_all(fs::temp_directory_path() / ("herd_test_text_chain_" + std::to_string(::getpid())));
}
