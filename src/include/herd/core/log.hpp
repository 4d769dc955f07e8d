#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file log.hpp
/// Logging on spdlog: one logger named "herd", levels, and a rank prefix in MPI runs.
/// By default rank 0 logs at info and other ranks at warn, so an N-rank run prints one copy
/// of each progress line but every rank's warnings and errors.
/// Thread-safety: the logger is spdlog's multi-threaded stderr sink; `configure_logging`
/// must be called before threads log.

#include <string_view>

#include <spdlog/spdlog.h>

namespace herd {

/// Log levels, in increasing severity.
enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

/// Parses "trace", "debug", "info", "warn", "error", "off". @throws InputError otherwise.
LogLevel parse_log_level(std::string_view name);

/// Sets the pattern (with "[rank r/n]" when `size > 1`) and the level of the herd logger:
/// `level` on rank 0, max(`level`, warn) on other ranks unless `all_ranks` is true.
void configure_logging(int rank, int size, LogLevel level = LogLevel::kInfo, bool all_ranks = false);

/// The herd logger (created on first use with rank 0 of 1, level info).
spdlog::logger& logger();

}  // namespace herd

#define HERD_LOG_DEBUG(...) ::herd::logger().debug(__VA_ARGS__)
#define HERD_LOG_INFO(...) ::herd::logger().info(__VA_ARGS__)
#define HERD_LOG_WARN(...) ::herd::logger().warn(__VA_ARGS__)
#define HERD_LOG_ERROR(...) ::herd::logger().error(__VA_ARGS__)
