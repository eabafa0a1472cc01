#include "predict/throughput_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/error.h"

namespace memtrain::predict {

namespace {

struct Line {
  double intercept = 0, slope = 0, sse = 0;  // sse: weighted
};

// Weighted least squares y ≈ intercept + slope·x; x constant gives the mean.
Line fit_line(const std::vector<double>& x, const std::vector<double>& y, const std::vector<double>& w) {
  double sw = 0, mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sw += w[i];
    mx += w[i] * x[i];
    my += w[i] * y[i];
  }
  mx /= sw;
  my /= sw;
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxx += w[i] * (x[i] - mx) * (x[i] - mx);
    sxy += w[i] * (x[i] - mx) * (y[i] - my);
  }
  Line l;
  l.slope = sxx > 0 ? sxy / sxx : 0;
  l.intercept = my - l.slope * mx;
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = y[i] - (l.intercept + l.slope * x[i]);
    l.sse += w[i] * r * r;
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

// y ≈ level + slope·max(0, b − knee), slope >= 0.
struct Hinge {
  double level = 0, slope = 0, knee = 0, sse = std::numeric_limits<double>::infinity();
  double at(double b) const { return level + slope * std::max(0.0, b - knee); }
};

Hinge fit_hinge_at(const std::vector<double>& b, const std::vector<double>& y, const std::vector<double>& w,
                   double knee) {
  std::vector<double> x(b.size());
  for (size_t i = 0; i < b.size(); ++i) x[i] = std::max(0.0, b[i] - knee);
  Line l = fit_line(x, y, w);
  if (l.slope < 0) l = fit_line(std::vector<double>(b.size(), 0.0), y, w);  // falling is not this model: flat
  return {l.intercept, l.slope, knee, l.sse};
}

// The best hinge over knees at every distinct batch and 16 steps between
// neighbours (the error is piecewise quadratic in the knee, so this finds the
// minimum closely); a knee at or below the smallest batch is a plain line.
Hinge fit_hinge(const std::vector<double>& b, const std::vector<double>& y, const std::vector<double>& w,
                const std::vector<double>& batches) {
  Hinge best = fit_hinge_at(b, y, w, 0.0);
  for (size_t i = 0; i < batches.size(); ++i) {
    const double next = i + 1 < batches.size() ? batches[i + 1] : batches[i];
    for (int s = 0; s < 16; ++s) {
      const Hinge h = fit_hinge_at(b, y, w, batches[i] + (next - batches[i]) * s / 16.0);
      if (h.sse < best.sse) best = h;
      if (next == batches[i]) break;
    }
  }
  return best;
}

double sse_of(const Hinge& h, const std::vector<double>& b, const std::vector<double>& y) {
  double sse = 0;
  for (size_t i = 0; i < b.size(); ++i) sse += (y[i] - h.at(b[i])) * (y[i] - h.at(b[i]));
  return sse;
}

}  // namespace

double ThroughputModel::peak_bytes(double batch) const { return std::max(memory_floor, alpha * batch + beta); }

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
  const std::vector<double> batches(distinct.begin(), distinct.end());

  // Memory: a line, with a floor where something that does not grow with the
  // batch (the optimizer update) sets the peak of the smallest batches.
  const Hinge mem = fit_hinge(b, m, std::vector<double>(b.size(), 1.0), batches);
  model.alpha = mem.slope;
  model.beta = mem.level - mem.slope * mem.knee;
  model.memory_floor = mem.knee > static_cast<double>(model.min_batch) ? mem.level : 0;
  model.r2_memory = r_squared(m, sse_of(mem, b, m));

  // Time: least squares of the relative error (weights 1/t²), so the small
  // batches, where the knee is, count as much as the large ones.
  std::vector<double> w(t.size());
  for (size_t i = 0; i < t.size(); ++i) w[i] = 1 / (t[i] * t[i]);
  const Hinge time = fit_hinge(b, t, w, batches);
  // level + slope·max(0, b − knee) = max(slope·knee, slope·b) + (level − slope·knee)
  model.k = time.slope;
  model.a = time.slope * time.knee;
  model.c = time.level - model.a;
  if (time.slope == 0) {  // flat over the whole range
    model.a = time.level;
    model.c = 0;
  }
  model.r2_time = r_squared(t, sse_of(time, b, t));
  return model;
}

}  // namespace memtrain::predict
