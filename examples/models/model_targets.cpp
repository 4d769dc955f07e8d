// The posteriordb models as target registry entries (herd/examples/model_targets.hpp).
#include "herd/examples/model_targets.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "herd/core/error.hpp"
#include "herd/examples/posteriordb.hpp"
#include "herd/io/data_set.hpp"
#include "herd/io/hdf5.hpp"

namespace herd::examples {

namespace {

/// One data array as nested JSON arrays of its own shape (row-major), so that a model
/// rejects a [3, 1] matrix where it needs a vector instead of reading it flattened.
nlohmann::json nested(const io::DataArray& a) {
  std::size_t next = 0;
  auto nest = [&](auto&& self, std::size_t depth) -> nlohmann::json {
    nlohmann::json v = nlohmann::json::array();
    for (std::size_t i = 0; i < a.shape[depth]; ++i) {
      if (depth + 1 < a.shape.size()) {
        v.push_back(self(self, depth + 1));
      } else {
        const double x = a.values[next++];
        if (a.integer) v.push_back(static_cast<std::int64_t>(x));
        else v.push_back(x);
      }
    }
    return v;
  };
  return nest(nest, 0);
}

/// The model `name` from the settings: with `data.file` when given, else its embedded data.
mcmc::MadeTarget make_model_target(const std::string& name, const io::Settings& st) {
  std::shared_ptr<PosteriorModel> m;
  // data.group names a group of an HDF5 data file: given without one it would be ignored
  // (a data.file that cannot be read is reported by load_model_data).
  if (!st.is_default("data.group")) {
    if (!st.has("data.file"))
      throw InputError(
          fmt::format("{}: key \"data.group\" is set, but data.file is not given (the model's embedded "
                      "data has no groups)",
                      st.origin("data.group")));
    const std::string path = st.get_path("data.file");
    if (std::filesystem::is_regular_file(path) && !io::H5File::is_hdf5(path))
      throw InputError(
          fmt::format("{}: key \"data.group\" is set, but data.file \"{}\" is not an HDF5 file (a JSON "
                      "data file has no groups)",
                      st.origin("data.group"), path));
  }
  if (st.has("data.file")) {
    const std::string path = st.get_path("data.file");
    std::vector<std::string> non_numeric;
    const nlohmann::json data =
        load_model_data(path, st.get_string("data.group"), st.origin("data.file"), &non_numeric);
    try {
      m = make_model(name, data);
    } catch (const InputError& e) {
      // A field the model misses may be in the file as text, which model data cannot be.
      std::string why = e.what();
      for (const std::string& n : non_numeric)
        if (why.find("no field \"" + n + "\"") != std::string::npos)
          why += fmt::format(" (the file has a dataset \"{}\", but it holds text, not numbers)", n);
      throw InputError(fmt::format("{}: data.file \"{}\": {}", st.origin("data.file"), path, why));
    }
  } else {
    m = make_model(name);
  }
  mcmc::MadeTarget made;
  mcmc::SampleTarget& t = made.target;
  t.ndim = m->dim();
  t.log_density = [m](const double* x, int) { return m->log_density(x); };
  t.thread_safe = true;
  t.names = m->coordinate_names();
  t.quantity_names = m->quantity_names();
  t.quantities = [m](const double* x, double* q) { m->quantities(x, q); };
  t.description = fmt::format("posteriordb model {} ({})", m->name(), m->posteriordb_name());
  return made;
}

}  // namespace

nlohmann::json load_model_data(const std::string& path, const std::string& group, const std::string& origin,
                               std::vector<std::string>* non_numeric) {
  try {
    const io::DataSet ds = io::H5File::is_hdf5(path) ? io::read_h5_data(path, group) : io::read_json_data(path);
    if (non_numeric) *non_numeric = ds.skipped();
    nlohmann::json j = nlohmann::json::object();
    for (const auto& name : ds.names()) {
      const io::DataArray& a = ds.at(name);
      if (a.shape.empty()) {
        if (a.integer) j[name] = static_cast<std::int64_t>(a.values[0]);
        else j[name] = a.values[0];
      } else {
        j[name] = nested(a);
      }
    }
    return j;
  } catch (const Error& e) {
    throw InputError(fmt::format("{}: data.file \"{}\": {}", origin, path, e.what()));
  }
}

void register_models(mcmc::TargetRegistry& registry) {
  for (const auto& name : model_names()) {
    const std::string full = make_model(name)->posteriordb_name();
    registry.add({name,
                  mcmc::TargetRegistry::Family::kModel,
                  "posteriordb model " + full,
                  {full},
                  [name](const io::Settings& st) { return make_model_target(name, st); },
                  std::vector<std::string>{"data.file", "data.group"}});
  }
}

}  // namespace herd::examples
