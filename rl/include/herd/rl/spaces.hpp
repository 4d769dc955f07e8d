#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file spaces.hpp
/// Observation and action spaces of environments: `Box` (a float32 hyper-rectangle) and
/// `Discrete` ({start, ..., start + n - 1}), as Gymnasium 1.4.0's `gymnasium.spaces`.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace herd::rl {

/// The kind of a `Space`.
enum class SpaceKind : std::uint8_t {
  kBox,       ///< real vector with per-component bounds (Gymnasium `Box`)
  kDiscrete,  ///< one integer in {start, ..., start + n - 1} (Gymnasium `Discrete`)
};

/// What the components of a `Box` hold (Gymnasium's `Box.dtype`): any real numbers
/// (float32 observations: positions, normalised features), or integers only (Gymnasium's
/// integer and bool dtypes: MinAtar's 0/1 grids, image pixels). The bounds alone do not tell:
/// `Box(0, 1)` may hold 0.25.
enum class BoxValues : std::uint8_t {
  kReal,     ///< any value within the bounds (the default)
  kInteger,  ///< integral values only (the environment guarantees it)
};

/// A space: `Box` or `Discrete`. An immutable value; thread-safe to read.
///
/// Layouts: a `Box` of dimension d is a flat vector of d components (Gymnasium's shape
/// `(d,)`); a `Discrete` value occupies one component. Bounds of a `Box` are stored as
/// doubles holding float32 values (Gymnasium stores them as float32); +-infinity means
/// unbounded.
class Space {
 public:
  /// A `Box` with bounds `low[i] <= x[i] <= high[i]`.
  /// @throws herd::InputError when the sizes differ, are 0, or low[i] > high[i] or is NaN.
  static Space box(std::vector<double> low, std::vector<double> high);
  /// A `Box` whose flat vector of `low.size()` components is the row-major (C order) layout
  /// of an array of `shape` (Gymnasium's `Box.shape`), e.g. `{channels, height, width}` for an
  /// image observation; networks read the shape to choose convolutional layers.
  /// `values` declares what the components hold (`BoxValues`; DQN's replay buffer stores
  /// integer observations within [0, 255] as bytes).
  /// @throws herd::InputError as `box(low, high)`, and when a dimension of `shape` is < 1 or
  /// the product of `shape` is not `low.size()`.
  static Space box(std::vector<double> low, std::vector<double> high, std::vector<std::int64_t> shape,
                   BoxValues values = BoxValues::kReal);
  /// A `Discrete` space {start, ..., start + n - 1}.
  /// @throws herd::InputError when n < 1.
  static Space discrete(std::int64_t n, std::int64_t start = 0);

  /// `kBox` or `kDiscrete`.
  SpaceKind kind() const { return kind_; }
  /// Whether this is a `Box`.
  bool is_box() const { return kind_ == SpaceKind::kBox; }
  /// Whether this is a `Discrete`.
  bool is_discrete() const { return kind_ == SpaceKind::kDiscrete; }
  /// Number of components of one value: d for a `Box`, 1 for a `Discrete`.
  std::size_t dim() const { return kind_ == SpaceKind::kBox ? low_.size() : 1; }
  /// What the components of a `Box` hold (`kReal` for a `Discrete`, whose one component is
  /// an integer by definition).
  BoxValues values() const { return values_; }
  /// Number of values of a `Discrete` space (0 for a `Box`).
  std::int64_t n() const { return n_; }
  /// First value of a `Discrete` space (0 for a `Box`).
  std::int64_t start() const { return start_; }
  /// Array shape of a `Box` (product = `dim()`): `{dim()}` unless given to `box`; `{}` for
  /// a `Discrete`.
  const std::vector<std::int64_t>& shape() const { return shape_; }
  /// Lower bounds of a `Box`, `[dim]` (empty for a `Discrete`).
  const std::vector<double>& low() const { return low_; }
  /// Upper bounds of a `Box`, `[dim]` (empty for a `Discrete`).
  const std::vector<double>& high() const { return high_; }
  /// Whether `x[0..dim)` lies in the space (a `Discrete` value must be integral and in
  /// range; a `Box` value in its bounds; NaN never does).
  bool contains(const double* x) const;
  /// "Box(low=[...], high=[...])" or "Discrete(n)" for messages.
  std::string to_string() const;

 private:
  SpaceKind kind_ = SpaceKind::kDiscrete;
  std::int64_t n_ = 0, start_ = 0;
  std::vector<double> low_, high_;
  std::vector<std::int64_t> shape_;
  BoxValues values_ = BoxValues::kReal;
};

}  // namespace herd::rl
