// Catch2 main for [gpu] test executables: exits with 77 (CTest "Skipped") and a visible
// message when no CUDA device is present (DESIGN.md §5).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "herd/core/device.hpp"

int main(int argc, char** argv) {
  if (herd::cuda_device_count() == 0) {
    std::printf("SKIPPED: no CUDA device: %s\n", herd::describe_devices().c_str());
    return herd::kSkipReturnCode;
  }
  std::printf("%s\n", herd::describe_devices().c_str());
  return Catch::Session().run(argc, argv);
}
