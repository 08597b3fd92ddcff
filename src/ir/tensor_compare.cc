#include "ir/tensor_compare.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "ir/dtype.h"

namespace korch {

namespace {

struct Diff {
  double num = 0, den = 0;
  int64_t bad = -1;  // first element whose non-finite value does not match
};

template <typename Get>
Diff diff_elements(int64_t n, Get get) {
  Diff d;
  for (int64_t i = 0; i < n; ++i) {
    auto [a, e] = get(i);
    if (!std::isfinite(e) || !std::isfinite(a)) {
      bool same = (std::isnan(e) && std::isnan(a)) || a == e;
      if (!same) {
        d.bad = i;
        return d;
      }
      continue;
    }
    d.num += (a - e) * (a - e);
    d.den += e * e;
  }
  return d;
}

Diff diff(const Tensor& got, const Tensor& want) {
  if (got.dtype() == DType::kFloat32) {
    const float* a = got.data<float>();
    const float* e = want.data<float>();
    return diff_elements(want.numel(), [&](int64_t i) {
      return std::pair<double, double>(a[i], e[i]);
    });
  }
  return diff_elements(want.numel(), [&](int64_t i) {
    return std::pair<double, double>(got.get_as_double(i), want.get_as_double(i));
  });
}

}  // namespace

double rel_l2_error(const Tensor& got, const Tensor& want) {
  if (got.type() != want.type()) return std::numeric_limits<double>::infinity();
  Diff d = diff(got, want);
  if (d.bad >= 0) return std::numeric_limits<double>::infinity();
  if (!is_float(want.dtype())) return d.num == 0 ? 0 : std::numeric_limits<double>::infinity();
  return d.den == 0 ? std::sqrt(d.num) : std::sqrt(d.num / d.den);
}

std::string rel_l2_diff(const Tensor& got, const Tensor& want, double tol) {
  if (got.type() != want.type()) return fmt::format("type {} != {}", type_str(got.type()), type_str(want.type()));
  Diff d = diff(got, want);
  if (d.bad >= 0)
    return fmt::format("element {}: {} where the reference gives {}", d.bad, got.get_as_double(d.bad),
                       want.get_as_double(d.bad));
  if (!is_float(want.dtype())) return d.num == 0 ? "" : "integer values differ";
  double rel = d.den == 0 ? std::sqrt(d.num) : std::sqrt(d.num / d.den);
  return rel <= tol ? "" : fmt::format("relative L2 error {:.3g} > {:.0e}", rel, tol);
}

}  // namespace korch
