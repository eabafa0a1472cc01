// y ≈ c0 + c1·x + c2·x², fitted online by least squares from running sums,
// so observing costs O(1) and memory does not grow with the number of steps.
// Mimose's observation: a stage's activation bytes are quadratic in the
// input's scalar size (attention is quadratic in sequence length).
#pragma once

#include <array>

namespace memtrain::predict {

class QuadraticModel {
 public:
  // Times, unlike byte counts, are noisy: a free quadratic through a few
  // noisy sizes can bend down and predict a small input slower than a large
  // one. With this set, the fit is the least-squares one among those whose
  // coefficients are all >= 0, so it never decreases in x >= 0.
  void require_nonnegative_coefficients() {
    nonnegative_ = true;
    dirty_ = true;
  }
  void observe(double x, double y);

  // With 3+ distinct x: the quadratic fit. With 2: the line through them.
  // With 1 point (x1, y1): y1 for x <= x1 and y1·x/x1 above, which is safe
  // for quantities that grow with size. With none: 0.
  double predict(double x) const;
  // For quantities that grow with x, such as byte counts: outside the
  // observed range, no less than the fit at the nearest observed x scaled in
  // proportion to x. Where strides round tensor sides, bytes are a staircase
  // in x, and a quadratic through a few close sizes of it can bend to 0 a
  // little outside them.
  double predict_growing(double x) const;

  long count() const { return count_; }
  int distinct_x() const { return distinct_; }
  double min_x() const { return min_x_; }
  double max_x() const { return max_x_; }
  // Root mean square of the fit's residuals over the observations, in y's unit.
  double rms_residual() const;

 private:
  void refit() const;
  // Of the fit with coefficients `c` (in t) over every observation.
  long double residual_sum_of_squares(const std::array<long double, 3>& c) const;

  long count_ = 0;
  int distinct_ = 0;  // capped at 3: that is all the fit needs to know
  double seen_[3] = {0, 0, 0};
  double min_x_ = 0, max_x_ = 0;
  double scale_ = 1;  // x is fitted as t = x / scale_ to keep sums well conditioned
  // Σ t^k for k = 0..4 and Σ t^k·y for k = 0..2, and Σ y².
  std::array<long double, 5> st_{};
  std::array<long double, 3> sty_{};
  long double syy_ = 0;
  bool nonnegative_ = false;
  mutable bool dirty_ = true;
  mutable std::array<long double, 3> coef_{};  // in t
};

}  // namespace memtrain::predict
