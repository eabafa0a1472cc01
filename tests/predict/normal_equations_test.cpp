#include "predict/normal_equations.h"

#include <gtest/gtest.h>

#include <vector>

namespace memtrain::predict {
namespace {

using Matrix = std::vector<std::vector<long double>>;

// The normal equations of fitting y = sum c_j f_j(point) to `rows` (each a
// point's features) and `y`.
NormalSolution fit(const Matrix& rows, const std::vector<long double>& y) {
  const size_t k = rows.front().size();
  Matrix a(k, std::vector<long double>(k, 0.0L));
  std::vector<long double> b(k, 0.0L);
  for (size_t p = 0; p < rows.size(); ++p) {
    for (size_t r = 0; r < k; ++r) {
      b[r] += rows[p][r] * y[p];
      for (size_t c = 0; c < k; ++c) a[r][c] += rows[p][r] * rows[p][c];
    }
  }
  return solve_normal_equations(a, b);
}

TEST(NormalEquations, AFullRankFitRecoversItsCoefficients) {
  // y = 3 + 2x + 0.5x^2 at four points: exact.
  Matrix rows;
  std::vector<long double> y;
  for (long double x : {1.0L, 2.0L, 4.0L, 7.0L}) {
    rows.push_back({1, x, x * x});
    y.push_back(3 + 2 * x + 0.5L * x * x);
  }
  const NormalSolution s = fit(rows, y);
  ASSERT_TRUE(s.determined);
  EXPECT_NEAR(static_cast<double>(s.x[0]), 3, 1e-9);
  EXPECT_NEAR(static_cast<double>(s.x[1]), 2, 1e-9);
  EXPECT_NEAR(static_cast<double>(s.x[2]), 0.5, 1e-9);
}

TEST(NormalEquations, AColumnTheDataCannotTellApartGetsZero) {
  // The third feature is twice the second at every point: not determined;
  // it gets 0, and the fit still reproduces the data.
  Matrix rows;
  std::vector<long double> y;
  for (long double x : {1.0L, 3.0L, 5.0L}) {
    rows.push_back({1, x, 2 * x});
    y.push_back(1 + 4 * x);
  }
  const NormalSolution s = fit(rows, y);
  EXPECT_FALSE(s.determined);
  EXPECT_EQ(s.x[2], 0.0L);
  for (size_t p = 0; p < rows.size(); ++p) {
    const long double fitted = s.x[0] * rows[p][0] + s.x[1] * rows[p][1] + s.x[2] * rows[p][2];
    EXPECT_NEAR(static_cast<double>(fitted), static_cast<double>(y[p]), 1e-9);
  }
}

TEST(NormalEquations, ColumnsOfVeryDifferentScalesAreJudgedEachOnItsOwn) {
  // seconds = 1e-5 + 1e-6 per tensor + 1e-10 per byte, with bytes near 1e9
  // beside counts near 1: a threshold on the largest diagonal would take the
  // small columns for dependent ones.
  Matrix rows;
  std::vector<long double> y;
  for (const auto& [tensors, bytes] :
       std::vector<std::pair<long double, long double>>{{1, 1e8L}, {4, 2e8L}, {2, 9e8L}, {8, 4e8L}}) {
    rows.push_back({1, tensors, bytes});
    y.push_back(1e-5L + 1e-6L * tensors + 1e-10L * bytes);
  }
  const NormalSolution s = fit(rows, y);
  ASSERT_TRUE(s.determined);
  EXPECT_NEAR(static_cast<double>(s.x[0] / 1e-5L), 1, 1e-6);
  EXPECT_NEAR(static_cast<double>(s.x[1] / 1e-6L), 1, 1e-6);
  EXPECT_NEAR(static_cast<double>(s.x[2] / 1e-10L), 1, 1e-6);
}

}  // namespace
}  // namespace memtrain::predict
