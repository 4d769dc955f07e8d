#include "herd/io/data_set.hpp"

#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "herd/core/error.hpp"
#include "herd/io/atomic_file.hpp"
#include "herd/io/hdf5.hpp"

namespace herd::io {

const DataArray& DataSet::at(std::string_view name) const {
  auto it = arrays_.find(name);
  if (it == arrays_.end()) {
    std::string have;
    for (const auto& [n, a] : arrays_) have += (have.empty() ? "" : ", ") + n;
    throw InputError(fmt::format("{}: no data named \"{}\" (have: {})", source_, name, have.empty() ? "none" : have));
  }
  return it->second;
}

double DataSet::scalar(std::string_view name) const {
  const DataArray& a = at(name);
  if (a.values.size() != 1)
    throw InputError(
        fmt::format("{}: \"{}\" has {} elements, but a scalar was expected", source_, name, a.values.size()));
  return a.values[0];
}

std::int64_t DataSet::integer(std::string_view name) const {
  const DataArray& a = at(name);
  const double x = scalar(name);
  if (!a.integer || !(x >= -9.2e18 && x <= 9.2e18))
    throw InputError(fmt::format("{}: \"{}\" is {}, but a 64-bit integer was expected", source_, name, x));
  return static_cast<std::int64_t>(x);
}

std::vector<double> DataSet::vector(std::string_view name) const {
  const DataArray& a = at(name);
  if (a.shape.size() > 1)
    throw InputError(fmt::format("{}: \"{}\" has rank {}, but a vector was expected", source_, name, a.shape.size()));
  return a.values;
}

std::vector<std::string> DataSet::names() const {
  std::vector<std::string> out;
  for (const auto& [n, a] : arrays_) out.push_back(n);
  return out;
}

namespace {

using nlohmann::json;

const char* json_kind(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    default:
      return "a number";
  }
}

int line_of(std::string_view text, std::size_t byte) {
  int line = 1;
  for (std::size_t i = 0; i < byte && i < text.size(); ++i) line += text[i] == '\n';
  return line;
}

/// The shape implied by the first elements: descend through first elements while arrays.
std::vector<std::size_t> shape_of(const json& j, const std::string& where, const std::string& name) {
  std::vector<std::size_t> shape;
  const json* cur = &j;
  while (cur->is_array()) {
    if (shape.size() >= 32) throw InputError(fmt::format("{}: \"{}\" is nested deeper than 32 levels", where, name));
    shape.push_back(cur->size());
    if (cur->empty()) break;
    cur = &(*cur)[0];
  }
  return shape;
}

/// `path` (a member and its element indices, e.g. `sigma[7]`) for messages: JSON's indices
/// count from 0, which a Stan or Fortran user would read as the next element.
std::string element(const std::string& path) {
  return path.find('[') == std::string::npos ? "\"" + path + "\"" : "\"" + path + "\" (indices from 0)";
}

/// Flattens row-major, checking that every sub-array matches `shape`.
void flatten(const json& j, std::size_t depth, const std::vector<std::size_t>& shape, DataArray& out,
             const std::string& where, const std::string& path) {
  if (depth < shape.size()) {
    if (!j.is_array())
      throw InputError(fmt::format("{}: {} is {} where an array of {} was expected (ragged nesting)", where,
                                   element(path), json_kind(j), shape[depth]));
    if (j.size() != shape[depth]) {
      std::string sh;
      for (auto n : shape) sh += (sh.empty() ? "" : ", ") + std::to_string(n);
      throw InputError(
          fmt::format("{}: {} is ragged: {} elements, but must have {} (model data arrays are "
                      "rectangular; the first elements give shape [{}])",
                      where, element(path), j.size(), shape[depth], sh));
    }
    for (std::size_t i = 0; i < j.size(); ++i)
      flatten(j[i], depth + 1, shape, out, where, fmt::format("{}[{}]", path, i));
    return;
  }
  if (j.is_array())
    throw InputError(
        fmt::format("{}: {} is an array where a number was expected (ragged nesting)", where, element(path)));
  if (!j.is_number())
    throw InputError(fmt::format("{}: {} is {}, but model data must be numbers or rectangular arrays of numbers", where,
                                 element(path), json_kind(j)));
  if (j.is_number_float()) out.integer = false;
  out.values.push_back(j.get<double>());
}

}  // namespace

DataSet parse_json_data(std::string_view text, const std::string& source) {
  json doc;
  // A member named twice in one object: nlohmann keeps the last, silently; refused instead.
  std::vector<std::set<std::string>> members;  // of each object being parsed, innermost last
  const json::parser_callback_t once = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) members.emplace_back();
    else if (event == json::parse_event_t::object_end && !members.empty()) members.pop_back();
    else if (event == json::parse_event_t::key && !members.empty() &&
             !members.back().insert(parsed.get<std::string>()).second)
      throw InputError(
          fmt::format("{}: \"{}\" is given twice in one object, but JSON model data must name each member "
                      "once",
                      source, parsed.get<std::string>()));
    return true;
  };
  try {
    doc = json::parse(text.begin(), text.end(), once);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> keep the tail.
    const auto colon = what.find(": ");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    throw InputError(
        fmt::format("{}:{}: JSON syntax error: {}", source, line_of(text, e.byte == 0 ? 0 : e.byte - 1), what));
  } catch (const json::exception& e) {
    // For example out_of_range.406, a number that overflows a double.
    std::string what = e.what();
    const auto bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    throw InputError(fmt::format("{}: JSON error: {}", source, what));
  }
  if (!doc.is_object())
    throw InputError(
        fmt::format("{}: JSON model data must be an object of named arrays, not {}", source, json_kind(doc)));
  DataSet out(source);
  for (const auto& [name, value] : doc.items()) {
    DataArray a;
    a.shape = shape_of(value, source, name);
    flatten(value, 0, a.shape, a, source, name);
    out.set(name, std::move(a));
  }
  return out;
}

DataSet read_json_data(const std::string& path) {
  const auto bytes = read_file_bytes(path);
  return parse_json_data(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path);
}

DataSet read_h5_data(const std::string& path, const std::string& group) {
  H5File f = H5File::open(path);
  H5Group g = group == "/" || group.empty() ? f.root() : f.open_group(group);
  DataSet out(group == "/" || group.empty() ? path : path + ":" + group);
  for (const auto& name : g.members()) {
    if (!g.is_dataset(name)) continue;
    H5Dataset ds = g.open_dataset(name);
    const H5Kind k = ds.kind();
    if (k != H5Kind::kInteger && k != H5Kind::kFloat) {
      out.skip(name);
      continue;
    }
    DataArray a;
    a.integer = k == H5Kind::kInteger;
    for (auto d : ds.shape()) a.shape.push_back(static_cast<std::size_t>(d));
    a.values = ds.read<double>();
    out.set(name, std::move(a));
  }
  return out;
}

}  // namespace herd::io
