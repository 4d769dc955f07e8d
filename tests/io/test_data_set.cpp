// Model data from JSON and from HDF5 datasets.
#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/io/data_set.hpp"
#include "herd/io/hdf5.hpp"
#include "temp_dir.hpp"

using namespace herd::io;

namespace {
std::string error_of(std::string_view text) {
  try {
    parse_json_data(text, "data.json");
  } catch (const herd::InputError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("data: JSON numbers and rectangular arrays", "[io]") {
  const DataSet d = parse_json_data(R"({"N": 3, "y": [1.5, 2, 0.25], "X": [[1, 2, 3], [4, 5, 6]],
                                        "empty": [], "big": 9007199254740992, "neg": -4})",
                                    "data.json");
  CHECK(d.integer("N") == 3);
  CHECK(d.at("N").shape.empty());
  CHECK(d.vector("y") == std::vector<double>{1.5, 2, 0.25});
  CHECK_FALSE(d.at("y").integer);
  CHECK(d.at("X").shape == std::vector<std::size_t>{2, 3});
  CHECK(d.at("X").values == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(d.at("X").integer);
  CHECK(d.at("empty").shape == std::vector<std::size_t>{0});
  CHECK(d.scalar("big") == 9007199254740992.0);
  CHECK(d.integer("neg") == -4);
  CHECK(d.names() == std::vector<std::string>{"N", "X", "big", "empty", "neg", "y"});
  CHECK_THROWS_WITH(d.at("z"), Catch::Contains("no data named \"z\""));
  CHECK_THROWS_WITH(d.scalar("y"), Catch::Contains("3 elements, but a scalar"));
  CHECK_THROWS_WITH(d.integer("y"), Catch::Contains("scalar"));
  CHECK_THROWS_WITH(d.vector("X"), Catch::Contains("rank 2"));
  const DataSet huge = parse_json_data(R"({"u": 18446744073709551615})", "data.json");
  CHECK_THROWS_WITH(huge.integer("u"), Catch::Contains("but a 64-bit integer was expected"));
}

TEST_CASE("data: JSON mistakes are one-line errors", "[io]") {
  CHECK(error_of("{\"y\": [1, 2], \"X\": [[1, 2], [3]]}") ==
        "data.json: \"X[1]\" (indices from 0) is ragged: 1 elements, but must have 2 (model data arrays are "
        "rectangular; the first "
        "elements give shape [2, 2])");
  CHECK(error_of("{\"y\": [1, \"a\"]}") ==
        "data.json: \"y[1]\" (indices from 0) is a string, but model data must be numbers or rectangular arrays of "
        "numbers");
  CHECK(error_of("{\"y\": true}") ==
        "data.json: \"y\" is a boolean, but model data must be numbers or rectangular arrays of numbers");
  CHECK(error_of("{\"y\": [[1], 2]}") ==
        "data.json: \"y[1]\" (indices from 0) is a number where an array of 1 was expected (ragged nesting)");
  CHECK(error_of("{\"y\": [1.5, [2, 8], [4, 0]]}") ==
        "data.json: \"y[1]\" (indices from 0) is an array where a number was expected (ragged nesting)");
  CHECK(error_of("{\"y\": [[], [1]]}") ==
        "data.json: \"y[1]\" (indices from 0) is ragged: 1 elements, but must have 0 (model data arrays are "
        "rectangular; the first "
        "elements give shape [2, 0])");
  CHECK(error_of("[1, 2]") == "data.json: JSON model data must be an object of named arrays, not an array");
  CHECK(error_of("{\"y\": [1, 2,\n]}").rfind("data.json:2: JSON syntax error:", 0) == 0);
  CHECK(error_of("").rfind("data.json:1: JSON syntax error:", 0) == 0);
  CHECK(error_of("{\"big\": 1e305808}") == "data.json: JSON error: number overflow parsing '1e305808'");
  // A member named twice (nlohmann keeps the last, silently); the same name in two objects
  // is fine.
  CHECK(error_of("{\"J\": 8, \"y\": [1], \"J\": 7}") ==
        "data.json: \"J\" is given twice in one object, but JSON model data must name each member once");
  CHECK(error_of("{\"a\": {\"J\": 1}, \"b\": {\"J\": 2}}").find("twice") == std::string::npos);
}

TEST_CASE("data: HDF5 datasets as data", "[io]") {
  herd::test::TempDir tmp;
  const std::string path = tmp.file("data.h5");
  {
    H5File f = H5File::create(path);
    H5Group g = f.require_group("data");
    g.write_scalar("N", std::int64_t{3});
    g.write("y", std::vector<double>{1, 2, 3});
    g.write("X", std::vector<float>{1, 2, 3, 4}, {2, 2});
    g.write_strings("names", {"a", "b"});
  }
  const DataSet d = read_h5_data(path, "data");
  CHECK(d.integer("N") == 3);
  CHECK(d.vector("y") == std::vector<double>{1, 2, 3});
  CHECK(d.at("X").shape == std::vector<std::size_t>{2, 2});
  CHECK_FALSE(d.at("X").integer);
  CHECK_FALSE(d.has("names"));
  CHECK(d.skipped() == std::vector<std::string>{"names"});
  CHECK_THROWS_AS(read_h5_data(path, "missing"), herd::IoError);
}
