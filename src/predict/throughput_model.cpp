#include "predict/throughput_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/error.h"

namespace memtrain::predict {

namespace {

struct Line {
  double intercept = 0, slope = 0, sse = 0;
};

// Least squares y ≈ intercept + slope·x; x constant gives the mean.
Line fit_line(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    mx += x[i];
    my += y[i];
  }
  mx /= n;
  my /= n;
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  Line l;
  l.slope = sxx > 0 ? sxy / sxx : 0;
  l.intercept = my - l.slope * mx;
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = y[i] - (l.intercept + l.slope * x[i]);
    l.sse += r * r;
  }
  return l;
}

double r_squared(const std::vector<double>& y, double sse) {
  double mean = 0;
  for (double v : y) mean += v;
  mean /= static_cast<double>(y.size());
  double sst = 0;
  for (double v : y) sst += (v - mean) * (v - mean);
  // Constant measurements: a perfect fit explains them fully.
  if (sst <= 0) return sse <= 1e-24 ? 1.0 : 0.0;
  return 1.0 - sse / sst;
}

struct Hinge {
  double level = 0, slope = 0, knee = 0, sse = std::numeric_limits<double>::infinity();
};

// t ≈ level + slope·max(0, b − knee), slope >= 0.
Hinge fit_hinge(const std::vector<double>& b, const std::vector<double>& t, double knee) {
  std::vector<double> x(b.size());
  for (size_t i = 0; i < b.size(); ++i) x[i] = std::max(0.0, b[i] - knee);
  Line l = fit_line(x, t);
  if (l.slope < 0) {  // a falling time is not this model: the flat level alone
    l = fit_line(std::vector<double>(b.size(), 0.0), t);
  }
  return {l.intercept, l.slope, knee, l.sse};
}

}  // namespace

double ThroughputModel::step_seconds(double batch) const { return std::max(a, k * batch) + c; }

double ThroughputModel::saturation_batch() const { return k > 0 ? a / k : std::numeric_limits<double>::infinity(); }

ThroughputModel fit_throughput_model(const std::vector<Measurement>& rows) {
  const std::string method = rows.empty() ? std::string("(none)") : rows.front().method;
  if (rows.size() < 4) {
    throw Error("method " + method + ": " + std::to_string(rows.size()) +
                " measurements are too few to fit memory and a kinked step time; expected at least 4");
  }
  std::set<std::int64_t> distinct;
  std::vector<double> b, m, t;
  for (const Measurement& r : rows) {
    distinct.insert(r.batch);
    b.push_back(static_cast<double>(r.batch));
    m.push_back(static_cast<double>(r.peak_bytes));
    t.push_back(r.step_seconds);
  }
  if (distinct.size() < 2) {
    throw Error("method " + method + ": all " + std::to_string(rows.size()) + " measurements are at batch " +
                std::to_string(*distinct.begin()) + "; expected at least 2 distinct batch sizes");
  }

  ThroughputModel model;
  model.points = static_cast<int>(rows.size());
  model.min_batch = *distinct.begin();
  model.max_batch = *distinct.rbegin();
  const Line mem = fit_line(b, m);
  model.alpha = mem.slope;
  model.beta = mem.intercept;
  model.r2_memory = r_squared(m, mem.sse);

  // Knees: every measured batch, and 16 steps between neighbours (the error
  // is piecewise quadratic in the knee, so this finds the minimum closely).
  const std::vector<double> batches(distinct.begin(), distinct.end());
  Hinge best = fit_hinge(b, t, 0.0);
  for (size_t i = 0; i < batches.size(); ++i) {
    const double next = i + 1 < batches.size() ? batches[i + 1] : batches[i];
    for (int s = 0; s < 16; ++s) {
      const double knee = batches[i] + (next - batches[i]) * s / 16.0;
      const Hinge h = fit_hinge(b, t, knee);
      if (h.sse < best.sse) best = h;
      if (next == batches[i]) break;
    }
  }
  // level + slope·max(0, b − knee) = max(slope·knee, slope·b) + (level − slope·knee)
  model.k = best.slope;
  model.a = best.slope * best.knee;
  model.c = best.level - model.a;
  if (best.slope == 0) {  // flat over the whole range
    model.a = best.level;
    model.c = 0;
  }
  model.r2_time = r_squared(t, best.sse);
  return model;
}

}  // namespace memtrain::predict
