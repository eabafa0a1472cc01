#include "predict/quadratic_model.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "predict/normal_equations.h"

namespace memtrain::predict {

void QuadraticModel::observe(double x, double y) {
  if (count_ == 0) {
    scale_ = x != 0 ? std::fabs(x) : 1.0;
    min_x_ = max_x_ = x;
  }
  min_x_ = std::min(min_x_, x);
  max_x_ = std::max(max_x_, x);
  if (distinct_ < 3 && std::find(seen_, seen_ + distinct_, x) == seen_ + distinct_) {
    seen_[distinct_++] = x;
  }
  const long double t = x / scale_;
  long double tk = 1;
  for (int k = 0; k < 5; ++k) {
    st_[k] += tk;
    if (k < 3) sty_[k] += tk * y;
    tk *= t;
  }
  syy_ += static_cast<long double>(y) * y;
  ++count_;
  dirty_ = true;
}

long double QuadraticModel::residual_sum_of_squares(const std::array<long double, 3>& c) const {
  // Σy² - 2 Σ c_k Σt^k y + Σ_jk c_j c_k Σ t^(j+k), from the running sums.
  long double rss = syy_;
  for (int j = 0; j < 3; ++j) {
    rss -= 2 * c[j] * sty_[j];
    for (int k = 0; k < 3; ++k) rss += c[j] * c[k] * st_[j + k];
  }
  return rss;
}

void QuadraticModel::refit() const {
  dirty_ = false;
  coef_ = {0, 0, 0};
  const int degree = std::min(distinct_, 3) - 1;  // 2 distinct points: a line
  if (degree < 1) return;
  const int k = degree + 1;
  // The least-squares fit on the coefficients in `mask` (the others 0);
  // false when singular or, with nonnegative_, when one comes out negative.
  auto fit = [&](int mask, std::array<long double, 3>& out, long double& rss) {
    int terms[3], m = 0;
    for (int r = 0; r < k; ++r) {
      if (mask & (1 << r)) terms[m++] = r;
    }
    std::vector<std::vector<long double>> a(m, std::vector<long double>(m));
    std::vector<long double> b(m);
    for (int r = 0; r < m; ++r) {
      for (int j = 0; j < m; ++j) a[r][j] = st_[terms[r] + terms[j]];
      b[r] = sty_[terms[r]];
    }
    const NormalSolution c = solve_normal_equations(std::move(a), std::move(b));
    if (!c.determined) return false;
    out = {0, 0, 0};
    for (int r = 0; r < m; ++r) {
      if (nonnegative_ && c.x[r] < 0) return false;
      out[terms[r]] = c.x[r];
    }
    rss = residual_sum_of_squares(out);
    return true;
  };
  const int all = (1 << k) - 1;
  long double rss = 0;
  std::array<long double, 3> c{};
  if (fit(all, c, rss) || !nonnegative_) {
    coef_ = c;
    return;
  }
  // A coefficient wants to be negative: the best fit with some of them 0.
  long double best = -1;
  for (int mask = 1; mask < all; ++mask) {
    if (fit(mask, c, rss) && (best < 0 || rss < best)) {
      best = rss;
      coef_ = c;
    }
  }
}

double QuadraticModel::predict(double x) const {
  if (count_ == 0) return 0;
  if (distinct_ == 1) {
    const double y1 = static_cast<double>(sty_[0] / st_[0]);  // the mean at the one x
    return x <= seen_[0] || seen_[0] <= 0 ? y1 : y1 * x / seen_[0];
  }
  if (dirty_) refit();
  const long double t = x / scale_;
  return static_cast<double>(coef_[0] + t * (coef_[1] + t * coef_[2]));
}

double QuadraticModel::predict_growing(double x) const {
  const double y = predict(x);
  if (count_ == 0 || (x >= min_x_ && x <= max_x_)) return y;
  const double edge = x < min_x_ ? min_x_ : max_x_;
  return edge > 0 ? std::max(y, predict(edge) * x / edge) : y;
}

double QuadraticModel::rms_residual() const {
  if (count_ == 0) return 0;
  if (distinct_ < 2) {
    const long double mean = sty_[0] / st_[0];
    return static_cast<double>(std::sqrt(std::max(0.0L, syy_ / count_ - mean * mean)));
  }
  if (dirty_) refit();
  return static_cast<double>(std::sqrt(std::max(0.0L, residual_sum_of_squares(coef_) / count_)));
}

}  // namespace memtrain::predict
