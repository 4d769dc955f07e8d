#include "herd/rl/spaces.hpp"

#include <cmath>

#include <fmt/format.h>

#include "herd/core/error.hpp"

namespace herd::rl {

Space Space::box(std::vector<double> low, std::vector<double> high) {
  HERD_REQUIRE(!low.empty() && low.size() == high.size(),
               "Space::box: low has {} and high {} components, but both must have the same "
               "positive number",
               low.size(), high.size());
  for (std::size_t i = 0; i < low.size(); ++i) {
    HERD_REQUIRE(low[i] <= high[i],
                 "Space::box: low[{}] is {} and high[{}] is {}, but low must "
                 "not exceed high (nor be NaN)",
                 i, low[i], i, high[i]);
  }
  Space s;
  s.kind_ = SpaceKind::kBox;
  s.low_ = std::move(low);
  s.high_ = std::move(high);
  s.shape_ = {static_cast<std::int64_t>(s.low_.size())};
  return s;
}

Space Space::box(std::vector<double> low, std::vector<double> high, std::vector<std::int64_t> shape, BoxValues values) {
  Space s = box(std::move(low), std::move(high));
  std::int64_t n = shape.empty() ? 0 : 1;
  for (const std::int64_t d : shape) {
    HERD_REQUIRE(d >= 1, "Space::box: shape [{}] has a dimension {}, but each must be at least 1",
                 fmt::join(shape, ", "), d);
    n *= d;
  }
  HERD_REQUIRE(n == static_cast<std::int64_t>(s.low_.size()),
               "Space::box: shape [{}] holds {} components, but low and high have {}", fmt::join(shape, ", "), n,
               s.low_.size());
  s.shape_ = std::move(shape);
  s.values_ = values;
  return s;
}

Space Space::discrete(std::int64_t n, std::int64_t start) {
  HERD_REQUIRE(n >= 1, "Space::discrete: n is {}, but must be at least 1", n);
  Space s;
  s.kind_ = SpaceKind::kDiscrete;
  s.n_ = n;
  s.start_ = start;
  return s;
}

bool Space::contains(const double* x) const {
  if (kind_ == SpaceKind::kDiscrete) {
    const double v = x[0];
    if (!(v == std::floor(v))) return false;  // NaN, Inf-safe below
    return v >= static_cast<double>(start_) && v < static_cast<double>(start_ + n_);
  }
  for (std::size_t i = 0; i < low_.size(); ++i) {
    if (!(x[i] >= low_[i] && x[i] <= high_[i])) return false;
  }
  return true;
}

std::string Space::to_string() const {
  if (kind_ == SpaceKind::kDiscrete) {
    return start_ == 0 ? fmt::format("Discrete({})", n_) : fmt::format("Discrete({}, start={})", n_, start_);
  }
  if (shape_.size() > 1) {
    return fmt::format("Box(low=[{}], high=[{}], shape=({}))", fmt::join(low_, ", "), fmt::join(high_, ", "),
                       fmt::join(shape_, ", "));
  }
  return fmt::format("Box(low=[{}], high=[{}])", fmt::join(low_, ", "), fmt::join(high_, ", "));
}

}  // namespace herd::rl
