#include "herd/core/log.hpp"

#include <algorithm>
#include <memory>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "herd/core/error.hpp"

namespace herd {

namespace {

std::shared_ptr<spdlog::logger> make_logger() {
  auto l = spdlog::stderr_color_mt("herd");
  l->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  l->set_level(spdlog::level::info);
  return l;
}

spdlog::level::level_enum to_spd(LogLevel l) {
  switch (l) {
    case LogLevel::kTrace:
      return spdlog::level::trace;
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
    case LogLevel::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

}  // namespace

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> l = make_logger();
  return *l;
}

LogLevel parse_log_level(std::string_view name) {
  if (name == "trace") return LogLevel::kTrace;
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warn" || name == "warning") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  if (name == "off") return LogLevel::kOff;
  throw InputError(fmt::format("log level is \"{}\", but must be one of trace, debug, info, warn, error, off", name));
}

void configure_logging(int rank, int size, LogLevel level, bool all_ranks) {
  auto& l = logger();
  if (size > 1) {
    l.set_pattern(fmt::format("[%H:%M:%S.%e] [rank {}/{}] [%^%l%$] %v", rank, size));
  } else {
    l.set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  }
  LogLevel eff = level;
  if (rank != 0 && !all_ranks) eff = std::max(level, LogLevel::kWarn);
  l.set_level(to_spd(eff));
}

}  // namespace herd
