#include "herd/examples/posteriordb.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "herd/core/error.hpp"

namespace herd::examples {

namespace detail {
// Defined in the generated embedded_data.cpp.
const char* embedded_json(const std::string& short_name);
}  // namespace detail

namespace {

using json = nlohmann::json;
constexpr double kLogSqrt2Pi = 0.91893853320467274178032973640562;  // log(sqrt(2 pi))
const double kLog2 = std::log(2.0);
const double kLogPi = std::log(std::numbers::pi);

/// log N(x | m, s)
inline double normal_lpdf(double x, double m, double s) {
  const double z = (x - m) / s;
  return -0.5 * z * z - kLogSqrt2Pi - std::log(s);
}
/// log half-Cauchy(x | 0, s), x > 0
inline double half_cauchy_lpdf(double x, double s) {
  return kLog2 - kLogPi - std::log(s) - std::log1p((x / s) * (x / s));
}
/// log half-Normal(x | 0, s), x > 0
inline double half_normal_lpdf(double x, double s) { return kLog2 + normal_lpdf(x, 0.0, s); }
/// log Gamma(x | shape a, rate b)
inline double gamma_lpdf(double x, double a, double b) {
  return a * std::log(b) - std::lgamma(a) + (a - 1.0) * std::log(x) - b * x;
}
/// log-sum-exp of two terms
inline double log_sum_exp(double a, double b) {
  const double m = std::max(a, b);
  if (m == -INFINITY) return -INFINITY;
  return m + std::log(std::exp(a - m) + std::exp(b - m));
}
/// log of the logistic function, stable for large |u|: log(1/(1+e^-u))
inline double log_logistic(double u) { return u >= 0 ? -std::log1p(std::exp(-u)) : u - std::log1p(std::exp(u)); }

/// The shape of a JSON value as "[8, 1]" ("[]" for a scalar), following first elements.
std::string shape_text(const json& v) {
  std::string s;
  for (const json* cur = &v; cur->is_array(); cur = &(*cur)[0]) {
    s += (s.empty() ? "" : ", ") + std::to_string(cur->size());
    if (cur->empty()) break;
  }
  return "[" + s + "]";
}

/// Data field `key`: a vector of `n` numbers (`n_key` names the size's field).
std::vector<double> vec(const json& data, const char* model, const char* key, std::size_t n, const char* n_key) {
  HERD_REQUIRE(data.contains(key), "{}: data has no field \"{}\"", model, key);
  const json& v = data.at(key);
  bool flat = v.is_array();
  if (flat)
    for (const auto& x : v) flat = flat && x.is_number();
  HERD_REQUIRE(flat && v.size() == n,
               "{}: data field \"{}\" has shape {}{}, but must be a vector of {} = {} numbers (shape [{}])", model, key,
               shape_text(v), v.is_array() && !flat && !v.empty() && !v[0].is_array() ? " with non-numbers" : "", n_key,
               n, n);
  std::vector<double> out;
  out.reserve(v.size());
  for (const auto& x : v) out.push_back(x.get<double>());
  return out;
}

long integer(const json& data, const char* model, const char* key) {
  HERD_REQUIRE(data.contains(key), "{}: data has no field \"{}\"", model, key);
  const json& v = data.at(key);
  HERD_REQUIRE(v.is_number_integer(),
               "{}: data field \"{}\" is {} of shape {}, but must be an integer scalar (shape [])", model, key,
               v.is_number()  ? "a real number"
               : v.is_array() ? "an array"
                              : "not a number",
               shape_text(v));
  const long x = v.get<long>();
  HERD_REQUIRE(x > 0, "{}: data field \"{}\" is {}, but must be positive", model, key, x);
  return x;
}

std::vector<std::string> indexed(const std::string& base, int n) {
  std::vector<std::string> out;
  for (int i = 1; i <= n; ++i) out.push_back(fmt::format("{}[{}]", base, i));
  return out;
}

// ---------------------------------------------------------------------------------------
/// kidiq-kidscore_interaction: linear regression with an interaction term, flat priors on
/// beta, half-Cauchy(0, 2.5) on sigma. u = (beta[1..4], log sigma).
class KidscoreInteraction final : public PosteriorModel {
 public:
  explicit KidscoreInteraction(const json& d) {
    const long n = integer(d, "kidscore_interaction", "N");
    score_ = vec(d, "kidscore_interaction", "kid_score", n, "N");
    hs_ = vec(d, "kidscore_interaction", "mom_hs", n, "N");
    iq_ = vec(d, "kidscore_interaction", "mom_iq", n, "N");
  }
  std::string name() const override { return "kidscore_interaction"; }
  std::string posteriordb_name() const override { return "kidiq-kidscore_interaction"; }
  int dim() const override { return 5; }
  std::vector<std::string> coordinate_names() const override {
    auto v = indexed("beta", 4);
    v.push_back("log_sigma");
    return v;
  }
  std::vector<std::string> quantity_names() const override {
    auto v = indexed("beta", 4);
    v.push_back("sigma");
    return v;
  }
  double log_density(const double* u) const override {
    const double sigma = std::exp(u[4]);
    double ss = 0.0;
    for (std::size_t i = 0; i < score_.size(); ++i) {
      const double m = u[0] + u[1] * hs_[i] + u[2] * iq_[i] + u[3] * hs_[i] * iq_[i];
      const double r = score_[i] - m;
      ss += r * r;
    }
    const double n = static_cast<double>(score_.size());
    return -0.5 * ss / (sigma * sigma) - n * (kLogSqrt2Pi + u[4]) + half_cauchy_lpdf(sigma, 2.5) + u[4];
  }
  void quantities(const double* u, double* q) const override {
    std::copy(u, u + 4, q);
    q[4] = std::exp(u[4]);
  }

 private:
  std::vector<double> score_, hs_, iq_;
};

/// arK-arK: AR(K) regression; alpha, beta ~ N(0, 10); sigma ~ half-Cauchy(0, 2.5).
/// u = (alpha, beta[1..K], log sigma).
class ArK final : public PosteriorModel {
 public:
  explicit ArK(const json& d) {
    k_ = static_cast<int>(integer(d, "arK", "K"));
    const long t = integer(d, "arK", "T");
    y_ = vec(d, "arK", "y", t, "T");
    HERD_REQUIRE(t > k_, "arK: T is {}, but must exceed K = {}", t, k_);
  }
  std::string name() const override { return "arK"; }
  std::string posteriordb_name() const override { return "arK-arK"; }
  int dim() const override { return k_ + 2; }
  std::vector<std::string> coordinate_names() const override {
    std::vector<std::string> v{"alpha"};
    for (auto& s : indexed("beta", k_)) v.push_back(s);
    v.push_back("log_sigma");
    return v;
  }
  std::vector<std::string> quantity_names() const override {
    std::vector<std::string> v{"alpha"};
    for (auto& s : indexed("beta", k_)) v.push_back(s);
    v.push_back("sigma");
    return v;
  }
  double log_density(const double* u) const override {
    const double alpha = u[0];
    const double* beta = u + 1;
    const double log_sigma = u[k_ + 1];
    const double sigma = std::exp(log_sigma);
    double lp = normal_lpdf(alpha, 0.0, 10.0);
    for (int j = 0; j < k_; ++j) lp += normal_lpdf(beta[j], 0.0, 10.0);
    lp += half_cauchy_lpdf(sigma, 2.5) + log_sigma;
    double ss = 0.0;
    const std::size_t t_count = y_.size();
    for (std::size_t t = static_cast<std::size_t>(k_); t < t_count; ++t) {
      double mu = alpha;
      for (int j = 0; j < k_; ++j) mu += beta[j] * y_[t - 1 - j];
      const double r = y_[t] - mu;
      ss += r * r;
    }
    const double n = static_cast<double>(t_count - k_);
    return lp - 0.5 * ss / (sigma * sigma) - n * (kLogSqrt2Pi + log_sigma);
  }
  void quantities(const double* u, double* q) const override {
    std::copy(u, u + k_ + 1, q);
    q[k_ + 1] = std::exp(u[k_ + 1]);
  }

 private:
  int k_;
  std::vector<double> y_;
};

/// eight_schools-eight_schools_noncentered: theta = mu + tau * theta_trans;
/// u = (theta_trans[1..J], mu, log tau); quantities (theta[1..J], mu, tau).
class EightSchoolsNoncentered final : public PosteriorModel {
 public:
  explicit EightSchoolsNoncentered(const json& d) {
    j_ = static_cast<int>(integer(d, "eight_schools_noncentered", "J"));
    y_ = vec(d, "eight_schools_noncentered", "y", j_, "J");
    sigma_ = vec(d, "eight_schools_noncentered", "sigma", j_, "J");
    for (double s : sigma_) HERD_REQUIRE(s > 0, "eight_schools_noncentered: sigma has {}, but must be positive", s);
  }
  std::string name() const override { return "eight_schools_noncentered"; }
  std::string posteriordb_name() const override { return "eight_schools-eight_schools_noncentered"; }
  int dim() const override { return j_ + 2; }
  std::vector<std::string> coordinate_names() const override {
    auto v = indexed("theta_trans", j_);
    v.push_back("mu");
    v.push_back("log_tau");
    return v;
  }
  std::vector<std::string> quantity_names() const override {
    auto v = indexed("theta", j_);
    v.push_back("mu");
    v.push_back("tau");
    return v;
  }
  double log_density(const double* u) const override {
    const double mu = u[j_], log_tau = u[j_ + 1], tau = std::exp(log_tau);
    double lp = normal_lpdf(mu, 0.0, 5.0) + half_cauchy_lpdf(tau, 5.0) + log_tau;
    for (int j = 0; j < j_; ++j) {
      lp += normal_lpdf(u[j], 0.0, 1.0);
      lp += normal_lpdf(y_[j], mu + tau * u[j], sigma_[j]);
    }
    return lp;
  }
  void quantities(const double* u, double* q) const override {
    const double mu = u[j_], tau = std::exp(u[j_ + 1]);
    for (int j = 0; j < j_; ++j) q[j] = mu + tau * u[j];
    q[j_] = mu;
    q[j_ + 1] = tau;
  }

 private:
  int j_;
  std::vector<double> y_, sigma_;
};

/// garch-garch11: GARCH(1,1) with flat priors; u = (mu, log alpha0, logit alpha1,
/// logit(beta1 / (1 - alpha1))).
class Garch11 final : public PosteriorModel {
 public:
  explicit Garch11(const json& d) {
    const long t = integer(d, "garch11", "T");
    y_ = vec(d, "garch11", "y", t, "T");
    HERD_REQUIRE(d.contains("sigma1") && d.at("sigma1").is_number(), "garch11: data field \"sigma1\" must be a number");
    sigma1_ = d.at("sigma1").get<double>();
  }
  std::string name() const override { return "garch11"; }
  std::string posteriordb_name() const override { return "garch-garch11"; }
  int dim() const override { return 4; }
  std::vector<std::string> coordinate_names() const override {
    return {"mu", "log_alpha0", "logit_alpha1", "logit_beta1_share"};
  }
  std::vector<std::string> quantity_names() const override { return {"mu", "alpha0", "alpha1", "beta1"}; }
  double log_density(const double* u) const override {
    const double mu = u[0], alpha0 = std::exp(u[1]);
    const double log_a1 = log_logistic(u[2]), log_1ma1 = log_logistic(-u[2]);
    const double log_s = log_logistic(u[3]), log_1ms = log_logistic(-u[3]);
    const double alpha1 = std::exp(log_a1);
    const double beta1 = std::exp(log_1ma1 + log_s);
    double lp = u[1] + log_a1 + log_1ma1 + log_1ma1 + log_s + log_1ms;
    double sigma2 = sigma1_ * sigma1_;
    const std::size_t n = y_.size();
    for (std::size_t t = 0; t < n; ++t) {
      if (t > 0) {
        const double e = y_[t - 1] - mu;
        sigma2 = alpha0 + alpha1 * e * e + beta1 * sigma2;
      }
      const double r = y_[t] - mu;
      lp += -0.5 * r * r / sigma2 - kLogSqrt2Pi - 0.5 * std::log(sigma2);
    }
    return lp;
  }
  void quantities(const double* u, double* q) const override {
    const double alpha1 = 1.0 / (1.0 + std::exp(-u[2]));
    const double s = 1.0 / (1.0 + std::exp(-u[3]));
    q[0] = u[0];
    q[1] = std::exp(u[1]);
    q[2] = alpha1;
    q[3] = (1.0 - alpha1) * s;
  }

 private:
  std::vector<double> y_;
  double sigma1_;
};

/// gp_pois_regr-gp_pois_regr: latent GP (non-centred) with a Poisson likelihood;
/// u = (log rho, log alpha, f_tilde[1..N]); quantities (rho, alpha, f[1..N]), f = L f_tilde.
class GpPoisRegr final : public PosteriorModel {
 public:
  explicit GpPoisRegr(const json& d) {
    const long n = integer(d, "gp_pois_regr", "N");
    x_ = vec(d, "gp_pois_regr", "x", n, "N");
    k_ = vec(d, "gp_pois_regr", "k", n, "N");
    log_k_factorial_ = 0.0;
    for (double k : k_) log_k_factorial_ += std::lgamma(k + 1.0);
    sum_k_ = 0.0;
  }
  std::string name() const override { return "gp_pois_regr"; }
  std::string posteriordb_name() const override { return "gp_pois_regr-gp_pois_regr"; }
  int dim() const override { return static_cast<int>(x_.size()) + 2; }
  std::vector<std::string> coordinate_names() const override {
    std::vector<std::string> v{"log_rho", "log_alpha"};
    for (auto& s : indexed("f_tilde", static_cast<int>(x_.size()))) v.push_back(s);
    return v;
  }
  std::vector<std::string> quantity_names() const override {
    std::vector<std::string> v{"rho", "alpha"};
    for (auto& s : indexed("f", static_cast<int>(x_.size()))) v.push_back(s);
    return v;
  }
  double log_density(const double* u) const override {
    const int n = static_cast<int>(x_.size());
    std::vector<double> f(n);
    if (!latent(u, f.data())) return -INFINITY;
    const double rho = std::exp(u[0]), alpha = std::exp(u[1]);
    double lp = gamma_lpdf(rho, 25.0, 4.0) + half_normal_lpdf(alpha, 2.0) + u[0] + u[1];
    for (int i = 0; i < n; ++i) {
      lp += normal_lpdf(u[2 + i], 0.0, 1.0);
      lp += k_[i] * f[i] - std::exp(f[i]);
    }
    return lp - log_k_factorial_;
  }
  void quantities(const double* u, double* q) const override {
    q[0] = std::exp(u[0]);
    q[1] = std::exp(u[1]);
    if (!latent(u, q + 2)) std::fill(q + 2, q + 2 + x_.size(), NAN);
  }

 private:
  /// f = L f_tilde with L = chol(K); false when K is not positive definite numerically.
  bool latent(const double* u, double* f) const {
    const int n = static_cast<int>(x_.size());
    const double rho = std::exp(u[0]), alpha = std::exp(u[1]);
    std::vector<double> l(static_cast<std::size_t>(n) * n, 0.0);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j <= i; ++j) {
        const double dx = x_[i] - x_[j];
        double s = alpha * alpha * std::exp(-dx * dx / (2.0 * rho * rho)) + (i == j ? 1e-10 : 0.0);
        for (int k = 0; k < j; ++k) s -= l[i * n + k] * l[j * n + k];
        if (i == j) {
          if (!(s > 0.0)) return false;
          l[i * n + i] = std::sqrt(s);
        } else {
          l[i * n + j] = s / l[j * n + j];
        }
      }
    }
    for (int i = 0; i < n; ++i) {
      double s = 0.0;
      for (int k = 0; k <= i; ++k) s += l[i * n + k] * u[2 + k];
      f[i] = s;
    }
    return true;
  }
  std::vector<double> x_, k_;
  double log_k_factorial_, sum_k_;
};

/// low_dim_gauss_mix-low_dim_gauss_mix: two-component normal mixture with ordered means;
/// u = (mu1, log(mu2 - mu1), log sigma1, log sigma2, logit theta).
class LowDimGaussMix final : public PosteriorModel {
 public:
  explicit LowDimGaussMix(const json& d) {
    const long n = integer(d, "low_dim_gauss_mix", "N");
    y_ = vec(d, "low_dim_gauss_mix", "y", n, "N");
  }
  std::string name() const override { return "low_dim_gauss_mix"; }
  std::string posteriordb_name() const override { return "low_dim_gauss_mix-low_dim_gauss_mix"; }
  int dim() const override { return 5; }
  std::vector<std::string> coordinate_names() const override {
    return {"mu[1]", "log_mu_gap", "log_sigma[1]", "log_sigma[2]", "logit_theta"};
  }
  std::vector<std::string> quantity_names() const override {
    return {"mu[1]", "mu[2]", "sigma[1]", "sigma[2]", "theta"};
  }
  double log_density(const double* u) const override {
    const double mu1 = u[0], mu2 = u[0] + std::exp(u[1]);
    const double s1 = std::exp(u[2]), s2 = std::exp(u[3]);
    const double log_t = log_logistic(u[4]), log_1mt = log_logistic(-u[4]);
    // Beta(5, 5): log B(5, 5) = log(4! 4! / 9!)
    const double log_beta55 = std::lgamma(5.0) + std::lgamma(5.0) - std::lgamma(10.0);
    double lp = half_normal_lpdf(s1, 2.0) + half_normal_lpdf(s2, 2.0) + normal_lpdf(mu1, 0.0, 2.0) +
                normal_lpdf(mu2, 0.0, 2.0) + 4.0 * log_t + 4.0 * log_1mt - log_beta55 + u[1] + u[2] + u[3] + log_t +
                log_1mt;
    const double c1 = log_t - kLogSqrt2Pi - u[2], c2 = log_1mt - kLogSqrt2Pi - u[3];
    const double inv1 = 1.0 / s1, inv2 = 1.0 / s2;
    for (double y : y_) {
      const double z1 = (y - mu1) * inv1, z2 = (y - mu2) * inv2;
      lp += log_sum_exp(c1 - 0.5 * z1 * z1, c2 - 0.5 * z2 * z2);
    }
    return lp;
  }
  void quantities(const double* u, double* q) const override {
    q[0] = u[0];
    q[1] = u[0] + std::exp(u[1]);
    q[2] = std::exp(u[2]);
    q[3] = std::exp(u[3]);
    q[4] = 1.0 / (1.0 + std::exp(-u[4]));
  }

 private:
  std::vector<double> y_;
};

struct Entry {
  const char* short_name;
  const char* full_name;
  std::unique_ptr<PosteriorModel> (*make)(const json&);
};

template <class M>
std::unique_ptr<PosteriorModel> make_as(const json& d) {
  return std::make_unique<M>(d);
}

const Entry kModels[] = {
    {"kidscore_interaction", "kidiq-kidscore_interaction", make_as<KidscoreInteraction>},
    {"arK", "arK-arK", make_as<ArK>},
    {"eight_schools_noncentered", "eight_schools-eight_schools_noncentered", make_as<EightSchoolsNoncentered>},
    {"garch11", "garch-garch11", make_as<Garch11>},
    {"gp_pois_regr", "gp_pois_regr-gp_pois_regr", make_as<GpPoisRegr>},
    {"low_dim_gauss_mix", "low_dim_gauss_mix-low_dim_gauss_mix", make_as<LowDimGaussMix>},
};

const Entry& find(const std::string& name) {
  for (const auto& e : kModels) {
    if (name == e.short_name || name == e.full_name) return e;
  }
  std::string valid;
  for (const auto& e : kModels) valid += (valid.empty() ? "" : ", ") + std::string(e.short_name);
  throw InputError(fmt::format("model is \"{}\", but must be one of {}", name, valid));
}

}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> out;
  for (const auto& e : kModels) out.emplace_back(e.short_name);
  return out;
}

std::string embedded_data(const std::string& name) { return detail::embedded_json(find(name).short_name); }

std::unique_ptr<PosteriorModel> make_model(const std::string& name, const nlohmann::json& data) {
  const Entry& e = find(name);
  HERD_REQUIRE(data.is_object(), "{}: data must be a JSON object", e.short_name);
  return e.make(data);
}

std::unique_ptr<PosteriorModel> make_model(const std::string& name) {
  const Entry& e = find(name);
  return e.make(json::parse(detail::embedded_json(e.short_name)));
}

}  // namespace herd::examples
