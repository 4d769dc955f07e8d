#include "herd/nn/hdf5_state.hpp"

#include <fmt/format.h>

#include "herd/core/error.hpp"

namespace herd::nn {

void write_state(io::H5Group& group, const std::vector<NamedTensor>& tensors) {
  std::vector<std::string> names;
  for (const auto& nt : tensors) {
    const Tensor& t = nt.tensor;
    HERD_REQUIRE(t.defined(), "nn::write_state: tensor \"{}\" is undefined", nt.name);
    HERD_REQUIRE(!nt.name.empty() && nt.name.find('/') == std::string::npos,
                 "nn::write_state: tensor name \"{}\" must be non-empty and contain no '/'", nt.name);
    std::vector<hsize_t> shape;
    for (auto d : t.shape().dims()) shape.push_back(static_cast<hsize_t>(d));
    // Contiguous host copy of a possible view (device tensors are copied to the host).
    const Tensor c = t.is_cpu() ? t.clone() : t.to(Device::cpu());
    io::H5Dataset ds;
    switch (t.dtype()) {
      case DType::kFloat32: {
        ds = group.create_dataset<float>(nt.name, shape);
        ds.write(std::span<const float>(c.data<float>(), static_cast<std::size_t>(c.numel())));
        break;
      }
      case DType::kFloat64: {
        ds = group.create_dataset<double>(nt.name, shape);
        ds.write(std::span<const double>(c.data<double>(), static_cast<std::size_t>(c.numel())));
        break;
      }
      case DType::kInt64: {
        ds = group.create_dataset<std::int64_t>(nt.name, shape);
        ds.write(std::span<const std::int64_t>(c.data<std::int64_t>(), static_cast<std::size_t>(c.numel())));
        break;
      }
    }
    ds.set_attribute("dtype", dtype_name(t.dtype()));
    names.push_back(nt.name);
  }
  group.set_attribute("names", names);
}

std::vector<NamedTensor> read_state(const io::H5Group& group) {
  std::vector<NamedTensor> out;
  if (!group.has_attribute("names")) return out;
  for (const auto& name : group.attribute_strings("names")) {
    if (!group.is_dataset(name))
      throw IoError(fmt::format("{}: the state lists \"{}\", but has no such dataset", group.path(), name));
    const io::H5Dataset ds = group.open_dataset(name);
    std::vector<std::int64_t> dims;
    for (auto d : ds.shape()) dims.push_back(static_cast<std::int64_t>(d));
    const Shape shape{std::span<const std::int64_t>(dims)};
    const std::string dt = ds.has_attribute("dtype") ? ds.attribute_string("dtype") : std::string("float32");
    Tensor t;
    if (dt == "float32") {
      t = Tensor(shape, DType::kFloat32);
      const auto v = ds.read<float>();
      std::copy(v.begin(), v.end(), t.data<float>());
    } else if (dt == "float64") {
      t = Tensor(shape, DType::kFloat64);
      const auto v = ds.read<double>();
      std::copy(v.begin(), v.end(), t.data<double>());
    } else if (dt == "int64") {
      t = Tensor(shape, DType::kInt64);
      const auto v = ds.read<std::int64_t>();
      std::copy(v.begin(), v.end(), t.data<std::int64_t>());
    } else {
      throw IoError(
          fmt::format("{}/{}: dtype is \"{}\", but must be float32, float64 or int64", group.path(), name, dt));
    }
    out.push_back({name, std::move(t)});
  }
  return out;
}

void save_hdf5(const std::string& path, const std::vector<NamedTensor>& parameters,
               const std::vector<NamedTensor>& optimizer_state) {
  io::H5File f = io::H5File::create_atomic(path);
  io::H5Group p = f.root().create_group("parameters");
  write_state(p, parameters);
  if (!optimizer_state.empty()) {
    io::H5Group o = f.root().create_group("optimizer");
    write_state(o, optimizer_state);
  }
  f.commit();
}

Hdf5State load_hdf5(const std::string& path) {
  const io::H5File f = io::H5File::open(path);
  if (!f.root().is_group("parameters"))
    throw IoError(fmt::format("{}: no \"parameters\" group: not a herd nn state file", path));
  Hdf5State s;
  s.parameters = read_state(f.open_group("parameters"));
  if (f.root().is_group("optimizer")) s.optimizer = read_state(f.open_group("optimizer"));
  return s;
}

}  // namespace herd::nn
