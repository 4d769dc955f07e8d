// A program outside the herd tree, built against an installed herd through find_package.
#include <cstdio>
#include <mutex>

#include <herd/core/communicator.hpp>
#include <herd/core/rng.hpp>
#include <herd/core/thread_pool.hpp>
#include <herd/io/checkpoint.hpp>
#include <herd/io/hdf5.hpp>

int main() {
  const std::uint32_t ctr[4] = {0, 0, 0, 0}, key[2] = {0, 0};
  const herd::RngBlock b = herd::philox4x32_10(ctr, key);
  herd::ThreadPool pool(2);
  long sum = 0;
  std::mutex m;
  pool.parallel_for_each(0, 100, [&](std::size_t i) {
    std::lock_guard<std::mutex> lock(m);
    sum += static_cast<long>(i);
  });
  herd::SelfCommunicator comm;
  double x = 2.5;
  comm.allreduce(std::span<double>(&x, 1), herd::ReduceOp::kSum);
  const char digits[] = "123456789";
  const std::uint32_t crc = herd::io::crc32(std::as_bytes(std::span<const char>(digits, 9)));
  const bool h5 = !herd::io::H5File::is_hdf5("/nonexistent.h5");
  std::printf("philox %08x sum %ld x %.1f crc32 %08x\n", b.v[0], sum, x, crc);
  return (b.v[0] == 0x6627e8d5u && sum == 4950 && x == 2.5 && crc == 0xCBF43926u && h5) ? 0 : 1;
}
