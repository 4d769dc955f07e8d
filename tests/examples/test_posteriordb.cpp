// The posteriordb models reproduce the validation data's log-density check points.
#include <cmath>
#include <fstream>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "herd/core/error.hpp"
#include "herd/examples/posteriordb.hpp"

using nlohmann::json;

namespace {
json load_reference(const std::string& full_name) {
  std::ifstream in(std::string(HERD_TEST_DATA_DIR) + "/posteriordb/" + full_name + ".json");
  REQUIRE(in.good());
  return json::parse(in);
}
}  // namespace

TEST_CASE("posteriordb models match the reference log densities", "[examples]") {
  const auto names = herd::examples::model_names();
  REQUIRE(names.size() == 6);
  for (const auto& name : names) {
    auto m = herd::examples::make_model(name);
    INFO(name);
    const json ref = load_reference(m->posteriordb_name());
    CHECK(m->dim() == ref.at("dim").get<int>());
    CHECK(m->quantity_names() == ref.at("param_names").get<std::vector<std::string>>());
    CHECK(static_cast<int>(m->coordinate_names().size()) == m->dim());
    for (const auto& p : ref.at("logp_checks").at("points")) {
      const auto u = p.at("u").get<std::vector<double>>();
      REQUIRE(static_cast<int>(u.size()) == m->dim());
      const double expect = p.at("logp").get<double>();
      CHECK(m->log_density(u.data()) == Approx(expect).epsilon(1e-10));
      std::vector<double> q(m->quantity_names().size());
      m->quantities(u.data(), q.data());
      for (double x : q) CHECK(std::isfinite(x));
    }
  }
}

TEST_CASE("posteriordb models: names, data errors", "[examples]") {
  CHECK(herd::examples::make_model("kidiq-kidscore_interaction")->name() == "kidscore_interaction");
  CHECK_THROWS_WITH(herd::examples::make_model("kidscore"),
                    Catch::Contains("model is \"kidscore\"") && Catch::Contains("arK"));
  json d = json::parse(herd::examples::embedded_data("arK"));
  d["y"].erase(0);
  CHECK_THROWS_AS(herd::examples::make_model("arK", d), herd::InputError);
  CHECK_THROWS_WITH(herd::examples::make_model("arK", json::parse(R"({"K": 5})")),
                    Catch::Contains("arK: data has no field \"T\""));
  // Shapes: a [T, 1] matrix where a vector is needed, an array where a scalar is.
  json col = json::parse(herd::examples::embedded_data("arK"));
  json nested = json::array();
  for (const auto& v : col["y"]) nested.push_back(json::array({v}));
  const auto t = col["y"].size();
  col["y"] = nested;
  CHECK_THROWS_WITH(
      herd::examples::make_model("arK", col),
      Catch::Contains(fmt::format("arK: data field \"y\" has shape [{}, 1], but must be a vector of T = {} "
                                  "numbers (shape [{}])",
                                  t, t, t)));
  json arr = json::parse(herd::examples::embedded_data("arK"));
  arr["K"] = json::array({arr["K"]});
  CHECK_THROWS_WITH(herd::examples::make_model("arK", arr),
                    Catch::Contains("arK: data field \"K\" is an array of shape [1], but must be an integer scalar"));
  // Quantities of eight schools are derived: theta = mu + tau * theta_trans.
  auto m = herd::examples::make_model("eight_schools_noncentered");
  std::vector<double> u(10, 0.5), q(10);
  u[8] = 1.0;
  u[9] = std::log(2.0);
  m->quantities(u.data(), q.data());
  CHECK(q[0] == Approx(2.0));
  CHECK(q[9] == Approx(2.0));
}
