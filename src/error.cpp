#include "herd/core/error.hpp"

namespace herd::detail {

std::string check_message(const char* file, int line, const char* expr, const std::string& msg) {
  return fmt::format("{} ({}:{}: check `{}` failed)", msg, file, line, expr);
}

}  // namespace herd::detail

namespace herd::detail {

void throw_cuda_error(const char* call, const char* error_name, const char* error_string, const char* file, int line) {
  throw CudaError(fmt::format("CUDA: {} failed: {} ({}) at {}:{}", call, error_name, error_string, file, line));
}

}  // namespace herd::detail

namespace herd::detail {

void throw_nccl_error(const char* call, const char* error_string, const char* file, int line) {
  throw CommunicationError(fmt::format("NCCL: {} failed: {} at {}:{}", call, error_string, file, line));
}

}  // namespace herd::detail
