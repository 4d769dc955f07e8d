#include "herd/core/communicator.hpp"

#include <cstdlib>
#include <cstring>

#include "herd/core/error.hpp"

namespace herd {

std::size_t data_type_size(DataType t) {
  switch (t) {
    case DataType::kFloat64:
      return 8;
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
      return 8;
    case DataType::kInt32:
      return 4;
    case DataType::kUint8:
      return 1;
  }
  return 1;
}

void Communicator::broadcast_string(std::string& s, int root) {
  std::int64_t n = static_cast<std::int64_t>(s.size());
  broadcast(&n, 1, DataType::kInt64, root);
  s.resize(static_cast<std::size_t>(n));
  if (n > 0) broadcast(s.data(), static_cast<std::size_t>(n), DataType::kUint8, root);
}

namespace {
class DoneRequest final : public CommRequest {
 public:
  void wait() override {}
  bool test() override { return true; }
};
}  // namespace

void SelfCommunicator::broadcast(void*, std::size_t, DataType, int root) {
  HERD_REQUIRE(root == 0, "SelfCommunicator::broadcast: root is {}, but must be 0", root);
}

std::unique_ptr<CommRequest> SelfCommunicator::allreduce_async(void*, std::size_t, DataType, ReduceOp) {
  return std::make_unique<DoneRequest>();
}

void SelfCommunicator::allgather(const void* send, void* recv, std::size_t count, DataType type) {
  if (count > 0 && send != recv) std::memmove(recv, send, count * data_type_size(type));
}

void SelfCommunicator::gather(const void* send, void* recv, std::size_t count, DataType type, int root) {
  HERD_REQUIRE(root == 0, "SelfCommunicator::gather: root is {}, but must be 0", root);
  allgather(send, recv, count, type);
}

void SelfCommunicator::abort(int code) { std::_Exit(code); }

}  // namespace herd
