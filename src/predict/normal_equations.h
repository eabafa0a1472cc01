// The predictors' one linear solver: the normal equations a·x = b of a
// least-squares fit (a symmetric and positive semi-definite, k x k), by
// Gaussian elimination with partial pivoting, in long double.
//
// A column whose pivot falls to at most 1e-12 of its own diagonal entry is
// one the data cannot tell from the columns before it: it gets 0, and x is
// one of the least-squares solutions (all give the same fitted value at a
// point in the span of the data). `determined` says whether no column did,
// so that x is the only solution. Relative to each column's own scale, so
// unscaled features (bytes beside counts) are judged alike.
#pragma once

#include <vector>

namespace memtrain::predict {

struct NormalSolution {
  std::vector<long double> x;
  bool determined = true;
};

NormalSolution solve_normal_equations(std::vector<std::vector<long double>> a, std::vector<long double> b);

}  // namespace memtrain::predict
