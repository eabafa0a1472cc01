#include "predict/strided_bytes.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "predict/normal_equations.h"

namespace memtrain::predict {

namespace {

// Relative difference within which two byte counts per pixel are one: an
// allocator rounding each block (CUDA's to 512 bytes) moves them that little.
constexpr double kSameRatio = 1e-3;

long double dot(const std::vector<long double>& a, const std::vector<long double>& b) {
  long double d = 0;
  for (size_t j = 0; j < a.size(); ++j) d += a[j] * b[j];
  return d;
}

// Whether `query` lies in the span of `rows` (Gram-Schmidt): sides that keep
// two strides' sides in the same ratio cannot tell those strides apart, yet
// they still determine sides that keep that ratio too.
bool in_span(const std::vector<std::vector<long double>>& rows, const std::vector<long double>& query) {
  std::vector<long double> rest = query;
  std::vector<std::vector<long double>> orthonormal;
  for (std::vector<long double> v : rows) {
    for (const auto& u : orthonormal) {
      const long double d = dot(v, u);
      for (size_t j = 0; j < v.size(); ++j) v[j] -= d * u[j];
    }
    const long double norm = std::sqrt(dot(v, v));
    if (norm <= 1e-9L) continue;
    for (long double& e : v) e /= norm;
    const long double d = dot(rest, v);
    for (size_t j = 0; j < rest.size(); ++j) rest[j] -= d * v[j];
    orthonormal.push_back(std::move(v));
  }
  return std::sqrt(dot(rest, rest)) <= 1e-9L * std::sqrt(dot(query, query));
}

bool is_stride(Stride s) { return s == kConstant || (s > 0 && s <= kLargestStride && (s & (s - 1)) == 0); }

}  // namespace

double pixels(std::int64_t side, Stride s) {
  if (s == kConstant) return 1.0;
  const auto n = static_cast<double>((side + s - 1) / s);
  return n * n;
}

std::vector<Stride> strides_between(Stride a, Stride b) {
  if (!is_stride(a) || !is_stride(b)) return {};
  if (a == kConstant && b == kConstant) return {kConstant};
  if (a == kConstant || b == kConstant) return {a == kConstant ? b : a, kConstant};
  std::vector<Stride> out;
  for (Stride s = std::min(a, b); s <= std::max(a, b); s *= 2) out.push_back(s);
  return out;
}

void StridedBytes::observe(std::int64_t side, double bytes) {
  const auto [it, added] = at_.emplace(side, bytes);
  if (!added) it->second = std::max(it->second, bytes);
}

std::vector<Stride> StridedBytes::consistent_strides() const {
  std::vector<Stride> out;
  if (at_.size() < 2) return out;
  auto proportional = [&](Stride s) {
    double lo = 0, hi = 0;
    bool first = true;
    for (const auto& [side, bytes] : at_) {
      const double r = bytes / pixels(side, s);
      lo = first ? r : std::min(lo, r);
      hi = first ? r : std::max(hi, r);
      first = false;
    }
    return hi - lo <= kSameRatio * std::max(std::fabs(hi), std::fabs(lo));
  };
  for (Stride s = kLargestStride; s >= 1; s /= 2) {
    if (proportional(s)) out.push_back(s);
  }
  if (proportional(kConstant)) out.push_back(kConstant);
  return out;
}

std::optional<double> StridedBytes::fit(const std::vector<Stride>& basis, std::int64_t side) const {
  const int k = static_cast<int>(basis.size());
  if (k == 0 || at_.empty()) return std::nullopt;
  // A side seen whose tensors have the same sides at every stride ran the
  // same shapes: its bytes are the answer, temporaries included, which
  // (a library's workspaces, chosen by shape) need not follow any fit.
  std::optional<double> same_shapes;
  for (const auto& [s, bytes] : at_) {
    const bool same =
        std::all_of(basis.begin(), basis.end(), [&](Stride b) { return pixels(s, b) == pixels(side, b); });
    if (same) same_shapes = std::max(same_shapes.value_or(bytes), bytes);
  }
  if (same_shapes) return same_shapes;

  // Columns scaled to their largest value keep the arithmetic well
  // conditioned when a stride-1 column is thousands of times a stride-32 one.
  std::vector<long double> scale(k, 0.0L);
  for (int j = 0; j < k; ++j) {
    for (const auto& [s, bytes] : at_) scale[j] = std::max<long double>(scale[j], pixels(s, basis[j]));
  }
  auto row_at = [&](std::int64_t s) {
    std::vector<long double> row(k);
    for (int j = 0; j < k; ++j) row[j] = pixels(s, basis[j]) / scale[j];
    return row;
  };
  std::vector<std::vector<long double>> rows;
  for (const auto& [s, bytes] : at_) rows.push_back(row_at(s));
  if (!in_span(rows, row_at(side))) {
    // Not determined. Bytes are a mix of the strides with weights >= 0, so
    // at this side they are at most the largest of the fits that put all
    // the bytes seen at one stride.
    if (k == 1) return std::nullopt;
    std::optional<double> most;
    for (Stride b : basis) {
      const std::optional<double> y = fit({b}, side);
      if (y && (!most || *y > *most)) most = y;
    }
    return most;
  }

  // A least-squares solution from the normal equations (a column the sides
  // seen cannot tell from the others gets 0): any gives the same value at `side`.
  std::vector<std::vector<long double>> a(k, std::vector<long double>(k, 0.0L));
  std::vector<long double> b(k, 0.0L);
  size_t seen = 0;
  for (const auto& [s, bytes] : at_) {
    const std::vector<long double>& row = rows[seen++];
    for (int r = 0; r < k; ++r) {
      for (int c = 0; c < k; ++c) a[r][c] += row[r] * row[c];
      b[r] += row[r] * bytes;
    }
  }
  const std::vector<long double> coef = solve_normal_equations(std::move(a), std::move(b)).x;
  auto fitted = [&](std::int64_t at) { return static_cast<double>(dot(row_at(at), coef)); };
  // Where the fit fell short of a side seen, it may fall as short here.
  double shortfall = 0;
  for (const auto& [s, bytes] : at_) shortfall = std::max(shortfall, bytes - fitted(s));
  return fitted(side) + shortfall;
}

}  // namespace memtrain::predict
