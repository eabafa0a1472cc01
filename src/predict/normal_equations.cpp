#include "predict/normal_equations.h"

#include <cmath>
#include <utility>

#include "core/error.h"

namespace memtrain::predict {

NormalSolution solve_normal_equations(std::vector<std::vector<long double>> a, std::vector<long double> b) {
  const int k = static_cast<int>(b.size());
  MEMTRAIN_ASSERT(static_cast<int>(a.size()) == k, "normal equations: a is k x k, b has k entries");
  std::vector<long double> scale(k);
  for (int r = 0; r < k; ++r) {
    MEMTRAIN_ASSERT(static_cast<int>(a[r].size()) == k, "normal equations: a is k x k");
    scale[r] = std::fabs(a[r][r]);
  }
  NormalSolution s;
  s.x.assign(k, 0.0L);
  int row = 0;
  std::vector<int> pivot_column;
  for (int col = 0; col < k; ++col) {
    int pivot = row;
    for (int r = row + 1; r < k; ++r) {
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    }
    if (std::fabs(a[pivot][col]) <= 1e-12L * scale[col]) {
      s.determined = false;
      continue;
    }
    std::swap(a[row], a[pivot]);
    std::swap(b[row], b[pivot]);
    for (int r = row + 1; r < k; ++r) {
      const long double f = a[r][col] / a[row][col];
      for (int j = col; j < k; ++j) a[r][j] -= f * a[row][j];
      b[r] -= f * b[row];
    }
    pivot_column.push_back(col);
    ++row;
  }
  for (int r = static_cast<int>(pivot_column.size()) - 1; r >= 0; --r) {
    const int col = pivot_column[r];
    long double v = b[r];
    for (int j = col + 1; j < k; ++j) v -= a[r][j] * s.x[j];
    s.x[col] = v / a[r][col];
  }
  return s;
}

}  // namespace memtrain::predict
