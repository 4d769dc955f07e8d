#pragma once
/// @file app_main.hpp
/// The `main` shared by herd's programs (herd-sample, herd-rl, herd-diagnose).

#include <cstdio>
#include <exception>

namespace herd::apps {

/// Runs `body(argc, argv)` and returns its exit status. What escapes the program's own handlers
/// (std::bad_alloc, say) becomes one line "<app>: error: <what>" on stderr and exit status 1
/// rather than std::terminate. Call from `main` only; throws nothing.
inline int guarded_main(const char* app, int (*body)(int, char**), int argc, char** argv) noexcept {
  try {
    return body(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", app, e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: error: unknown exception\n", app);
  }
  return 1;
}

}  // namespace herd::apps
