#include "herd/nn/serialize.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <span>
#include <sstream>

#include "herd/io/atomic_file.hpp"

namespace herd::nn {
namespace {

constexpr char kMagic[8] = {'H', 'E', 'R', 'D', 'N', 'N', '0', '1'};

template <class T>
void put(std::ostream& f, T v) {
  f.write(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
T get(std::ifstream& f, const std::string& path) {
  T v{};
  f.read(reinterpret_cast<char*>(&v), sizeof v);
  if (!f) throw IoError("nn::load_binary: '" + path + "' is truncated");
  return v;
}

}  // namespace

void save_binary(const std::string& path, const std::vector<NamedTensor>& tensors) {
  // Built in memory, then written atomically (a temporary created with O_EXCL in the same
  // folder, renamed over `path`): a link at `path` or at a fixed temporary name is never
  // written through, and a crash leaves the old file or the new one.
  std::ostringstream f(std::ios::binary);
  f.write(kMagic, sizeof kMagic);
  put<std::uint64_t>(f, tensors.size());
  for (const auto& nt : tensors) {
    // Device tensors are written from a host copy.
    const Tensor host = nt.tensor.is_cpu() ? nt.tensor : nt.tensor.to(Device::cpu());
    put<std::uint64_t>(f, nt.name.size());
    f.write(nt.name.data(), static_cast<std::streamsize>(nt.name.size()));
    put<std::uint8_t>(f, static_cast<std::uint8_t>(nt.tensor.dtype()));
    put<std::uint8_t>(f, static_cast<std::uint8_t>(nt.tensor.ndim()));
    for (int i = 0; i < nt.tensor.ndim(); ++i) put<std::int64_t>(f, nt.tensor.dim(i));
    f.write(static_cast<const char*>(host.raw()),
            static_cast<std::streamsize>(static_cast<std::size_t>(nt.tensor.numel()) * dtype_size(nt.tensor.dtype())));
  }
  const std::string bytes = std::move(f).str();
  io::write_file_atomic(path, std::as_bytes(std::span<const char>(bytes.data(), bytes.size())));
}

std::vector<NamedTensor> load_binary(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError("nn::load_binary: cannot open '" + path + "'");
  char magic[8];
  f.read(magic, 8);
  if (!f || !std::equal(magic, magic + 8, kMagic))
    throw IoError("nn::load_binary: '" + path + "' is not a herd nn state file");
  const auto count = get<std::uint64_t>(f, path);
  std::vector<NamedTensor> out;
  for (std::uint64_t k = 0; k < count; ++k) {
    const auto len = get<std::uint64_t>(f, path);
    if (len > (1u << 20)) throw IoError("nn::load_binary: '" + path + "' has a corrupt name length");
    std::string name(len, '\0');
    f.read(name.data(), static_cast<std::streamsize>(len));
    const auto dt = get<std::uint8_t>(f, path);
    const auto nd = get<std::uint8_t>(f, path);
    if (dt > 2 || nd > Shape::kMaxDims)
      throw IoError("nn::load_binary: '" + path + "' has a corrupt header for '" + name + "'");
    std::vector<std::int64_t> dims(nd);
    for (auto& d : dims) {
      d = get<std::int64_t>(f, path);
      if (d < 0) throw IoError("nn::load_binary: '" + path + "' has a negative extent for '" + name + "'");
    }
    Tensor t(Shape(std::span<const std::int64_t>(dims)), static_cast<DType>(dt));
    f.read(static_cast<char*>(t.raw()),
           static_cast<std::streamsize>(static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype())));
    if (!f) throw IoError("nn::load_binary: '" + path + "' is truncated in '" + name + "'");
    out.push_back({std::move(name), std::move(t)});
  }
  return out;
}

}  // namespace herd::nn
