#include "predict/all_reduce_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "predict/normal_equations.h"

namespace memtrain::predict {

namespace {

using Features = std::array<double, 3>;  // 1, tensors, bytes

Features features_of(const AllReducePoint& p) {
  return {1.0, static_cast<double>(p.tensors), static_cast<double>(p.bytes)};
}

}  // namespace

Seconds AllReduceModel::seconds(double bytes, double tensors) const {
  return latency + per_tensor * tensors + seconds_per_byte * bytes;
}

AllReduceModel fit_all_reduce_model(const std::vector<AllReducePoint>& points, int ranks) {
  std::set<Bytes> sizes;
  for (const AllReducePoint& p : points) {
    if (!(p.seconds > 0) || p.bytes < 0 || p.tensors < 1)
      throw Error("all-reduce fit: a measurement needs seconds > 0, bytes >= 0 and tensors >= 1");
    sizes.insert(p.bytes);
  }
  if (points.size() < 3 || sizes.size() < 2) {
    throw Error("all-reduce fit over " + std::to_string(ranks) +
                " ranks: needs at least 3 measurements of 2 sizes, got " + std::to_string(points.size()) + " of " +
                std::to_string(sizes.size()));
  }
  // Every subset of the three terms, weighted least squares on relative
  // error; the best whose coefficients are all >= 0.
  double best_rss = INFINITY;
  Features best{0, 0, 0};
  for (int mask = 1; mask < 8; ++mask) {
    int terms[3], k = 0;
    for (int t = 0; t < 3; ++t) {
      if (mask & (1 << t)) terms[k++] = t;
    }
    std::vector<std::vector<long double>> a(k, std::vector<long double>(k, 0.0L));
    std::vector<long double> b(k, 0.0L);
    for (const AllReducePoint& p : points) {
      const Features f = features_of(p);
      const long double w = 1.0L / (static_cast<long double>(p.seconds) * p.seconds);
      for (int i = 0; i < k; ++i) {
        b[i] += w * f[terms[i]] * p.seconds;
        for (int j = 0; j < k; ++j) a[i][j] += w * f[terms[i]] * f[terms[j]];
      }
    }
    const NormalSolution solution = solve_normal_equations(std::move(a), std::move(b));
    if (!solution.determined) continue;
    const std::vector<long double>& x = solution.x;
    Features c{0, 0, 0};
    bool nonnegative = true;
    for (int i = 0; i < k; ++i) {
      c[terms[i]] = static_cast<double>(x[i]);
      if (c[terms[i]] < 0) nonnegative = false;
    }
    if (!nonnegative) continue;
    double rss = 0;
    for (const AllReducePoint& p : points) {
      const Features f = features_of(p);
      const double predicted = c[0] * f[0] + c[1] * f[1] + c[2] * f[2];
      rss += std::pow((predicted - p.seconds) / p.seconds, 2);
    }
    if (rss < best_rss) {
      best_rss = rss;
      best = c;
    }
  }
  AllReduceModel m;
  m.ranks = ranks;
  m.latency = best[0];
  m.per_tensor = best[1];
  m.seconds_per_byte = best[2];
  m.points = static_cast<int>(points.size());
  double mean = 0;
  for (const AllReducePoint& p : points) mean += p.seconds;
  mean /= static_cast<double>(points.size());
  double total = 0, residual = 0;
  for (const AllReducePoint& p : points) {
    total += (p.seconds - mean) * (p.seconds - mean);
    residual += std::pow(p.seconds - m.seconds(static_cast<double>(p.bytes), static_cast<double>(p.tensors)), 2);
  }
  m.r2 = total > 0 ? 1 - residual / total : 1;
  return m;
}

}  // namespace memtrain::predict
