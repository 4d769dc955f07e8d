#include "herd/core/memory.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "herd/core/error.hpp"

namespace herd {

std::size_t checked_count(std::initializer_list<std::int64_t> factors, std::string_view what) {
  constexpr std::uint64_t kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::uint64_t n = 1;
  bool overflow = false;
  std::string shown;
  for (const std::int64_t f : factors) {
    shown += (shown.empty() ? "" : " x ") + std::to_string(f);
    if (f < 0) overflow = true;
    if (overflow) continue;
    const auto u = static_cast<std::uint64_t>(f);
    if (u != 0 && n > kMax / u) overflow = true;
    else n *= u;
  }
  if (overflow || n > std::numeric_limits<std::size_t>::max() / sizeof(double))
    throw InputError(fmt::format("{}: {} is too large (an element count must stay below 2^63 / 8)", what, shown));
  return static_cast<std::size_t>(n);
}

namespace {

/// The first number of a file (a cgroup limit, or "max"); empty when unreadable or "max".
std::optional<std::uint64_t> read_number(const char* path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s == "max") return std::nullopt;
  std::uint64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<std::uint64_t> available_memory_bytes() {
  std::optional<std::uint64_t> avail;
  {
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("MemAvailable:", 0) != 0) continue;
      std::istringstream ls(line.substr(13));
      std::uint64_t kb = 0;
      if (ls >> kb) avail = kb * 1024;
      break;
    }
  }
  // A container's limit is below the machine's memory: room left under it.
  for (const auto& [limit, usage] :
       {std::pair<const char*, const char*>{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
        {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    const auto lim = read_number(limit);
    if (!lim || *lim >= (std::uint64_t{1} << 60)) continue;  // v1 writes a huge number for "no limit"
    const std::uint64_t used = read_number(usage).value_or(0);
    const std::uint64_t room = *lim > used ? *lim - used : 0;
    avail = avail ? std::min(*avail, room) : room;
    break;
  }
  return avail;
}

std::uint64_t parse_memory_size(std::string_view text) {
  auto fail = [&]() -> std::uint64_t {
    throw InputError(
        fmt::format("\"{}\" is not a memory size: must be a number with an optional unit, such as "
                    "\"16GiB\", \"500 MB\" or \"0\" (no limit)",
                    text));
  };
  std::size_t i = 0;
  while (i < text.size() && text[i] == ' ') ++i;
  std::size_t j = i;
  while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.' || text[j] == 'e' ||
                             text[j] == 'E' || text[j] == '+'))
    ++j;
  if (i == text.size()) return 0;
  double v = 0;
  const auto [p, ec] = std::from_chars(text.data() + i, text.data() + j, v);
  if (ec != std::errc() || p != text.data() + j || !std::isfinite(v) || v < 0) return fail();
  std::string unit;
  for (std::size_t k = j; k < text.size(); ++k)
    if (text[k] != ' ') unit.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(text[k]))));
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "kb") scale = 1e3;
  else if (unit == "mb") scale = 1e6;
  else if (unit == "gb") scale = 1e9;
  else if (unit == "tb") scale = 1e12;
  else if (unit == "kib") scale = 1024.0;
  else if (unit == "mib") scale = 1024.0 * 1024;
  else if (unit == "gib") scale = 1024.0 * 1024 * 1024;
  else if (unit == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  else return fail();
  const double bytes = v * scale;
  if (bytes >= 9.2e18) return fail();
  return static_cast<std::uint64_t>(bytes);
}

std::string format_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 6) {
    bytes /= 1024.0;
    ++u;
  }
  // Three significant digits, except from 999.5 up (1000-1023.99 of a unit, or beyond the
  // largest unit), where %g would switch to an exponent ("1.02e+03 MiB"): whole units there.
  if (u == 0 || bytes >= 999.5) return fmt::format("{:.0f} {}", bytes, kUnits[u]);
  return fmt::format("{:.3g} {}", bytes, kUnits[u]);
}

void check_memory_need(double need_bytes, std::uint64_t max_memory, std::string_view what, std::string_view hint,
                       std::string_view setting) {
  if (max_memory > 0) {
    if (need_bytes > static_cast<double>(max_memory))
      throw InputError(fmt::format("{} needs about {} of memory, but {} is {}; {}", what, format_bytes(need_bytes),
                                   setting, format_bytes(static_cast<double>(max_memory)), hint));
    return;
  }
  const auto avail = available_memory_bytes();
  if (avail && need_bytes > static_cast<double>(*avail))
    throw InputError(
        fmt::format("{} needs about {} of memory, but this machine has {} available; {} (or set "
                    "{} to allow more)",
                    what, format_bytes(need_bytes), format_bytes(static_cast<double>(*avail)), hint, setting));
}

std::string error_text(const std::exception& e, std::string_view doing) {
  const bool alloc = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
  const bool length = dynamic_cast<const std::length_error*>(&e) != nullptr;
  if (!alloc && !length) return e.what();
  const auto avail = available_memory_bytes();
  return fmt::format(
      "out of memory while {} ({}){}; use smaller sizes, or set max_memory to have the need "
      "checked before the run",
      doing, alloc ? std::string("std::bad_alloc") : fmt::format("std::length_error: {}", e.what()),
      avail ? fmt::format("; {} are available", format_bytes(static_cast<double>(*avail))) : "");
}

}  // namespace herd
