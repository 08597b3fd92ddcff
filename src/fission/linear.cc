// Fission of the affine linear-algebra operators into linear primitives (MatMul, bias-free
// Conv/ConvTranspose) plus layout, broadcast and elementwise primitives. A linear primitive is
// linear in each input, so every bias, alpha, beta becomes an explicit elementwise step.
//
//   Gemm   A: f32[K,M] (transA=1), B: f32[N,K] (transB=1), C: f32[N], alpha=2, beta=0.5 ->
//            At = Transpose(A, perm=[1,0])            (folded when A is a constant)
//            Bt = Transpose(B, perm=[1,0])            (folded when B is a constant: weights)
//            Y  = MatMul(At, Bt)                      f32[M,N]
//            Y  = Mul(Y, 2)                           (only when alpha != 1)
//            Cb = Mul(C, 0.5)                         (only when beta != 1; folded for constant C)
//            Y  = Add(Y, Expand(Cb, [M,N]))           (no C, or beta = 0: no Add)
//          Integer Gemm with a non-integral alpha or beta runs the scaling in f64 between Casts
//          (the reference scales in double and truncates once).
//   Conv   X: f32[N,C,H,W], W: f32[M,C/g,kh,kw], B: f32[M] ->
//            Y = Conv(X, W)                           same attributes, no bias: linear
//            Y = Add(Y, Expand(Reshape(B, [1,M,1,1]), shape(Y)))
//          (the Reshape of a constant bias folds); without B the rule emits the bias-free Conv as is.
//   ConvTranspose: the same with ConvTranspose. One whose windows tile the output
//   (patch_conv_transpose: stride = kernel, no padding), X: f32[N,C,H,W], W: f32[C,M,kh,kw] ->
//            P = MatMul(Transpose(X, [0,2,3,1]), Reshape(W, [C, M*kh*kw]))     f32[N,H,W,M*kh*kw]
//            Y = Reshape(Transpose(Reshape(P, [N,H,W,M,kh,kw]), [0,3,1,4,2,5]), [N,M,H*kh,W*kw])
//          (any number of spatial dims; the bias as above).
//
// Note: primitive_kind classifies Conv/ConvTranspose with a bias input as an operator (they are
// affine, not linear), so these rules are reached only for biased convolutions.
#include "fission/fission.h"
#include "ir/primitive.h"

#include <cmath>

namespace korch {

namespace {

ValueId transpose(FissionBuilder& b, ValueId v, std::vector<int64_t> perm) {
  Attributes a;
  a.set("perm", std::move(perm));
  return b.add1("Transpose", {v}, std::move(a));
}

ValueId transpose2d(FissionBuilder& b, ValueId v) { return transpose(b, v, {1, 0}); }

std::vector<ValueId> gemm_rule(FissionBuilder& b, const Node& n, const std::vector<ValueId>& in) {
  const bool ta = n.attrs.get_int("transA", 0) != 0, tb = n.attrs.get_int("transB", 0) != 0;
  const double alpha = n.attrs.get_float("alpha", 1.0f), beta = n.attrs.get_float("beta", 1.0f);
  ValueId a = ta ? transpose2d(b, in[0]) : in[0];
  ValueId bm = tb ? transpose2d(b, in[1]) : in[1];
  ValueId y = b.add1("MatMul", {a, bm});
  const DType dt = b.type(y).dtype;
  const bool has_c = in.size() > 2 && in[2] != kNoValue && beta != 0.0;
  // Scalars that the output dtype cannot hold exactly (alpha = 0.5 on an integer Gemm) are applied in f64.
  const bool exact = is_float(dt) || (alpha == std::trunc(alpha) && (!has_c || beta == std::trunc(beta)));
  const DType work = exact ? dt : DType::kFloat64;
  y = b.cast(y, work);
  if (alpha != 1.0) y = b.add1("Mul", {y, b.scalar(alpha, work)});
  if (has_c) {
    ValueId c = b.cast(in[2], work);
    if (beta != 1.0) c = b.add1("Mul", {c, b.scalar(beta, work)});
    y = b.elementwise("Add", {y, c});
  }
  return {b.cast(y, dt)};
}

// A ConvTranspose whose windows tile the output (patch_conv_transpose) as one MatMul per input
// pixel and a layout step placing each pixel's kh x kw (x ...) patch.
ValueId patch_conv_transpose_rule(FissionBuilder& b, ValueId x, ValueId w) {
  const Shape xs = b.type(x).shape, ws = b.type(w).shape;
  const int64_t s = static_cast<int64_t>(xs.size()) - 2, m = ws[1];
  int64_t patch = 1;
  for (int64_t i = 0; i < s; ++i) patch *= ws[static_cast<size_t>(2 + i)];
  std::vector<int64_t> to_last = {0};  // [N, spatial.., C]
  for (int64_t i = 0; i < s; ++i) to_last.push_back(2 + i);
  to_last.push_back(1);
  ValueId p = b.add1("MatMul", {transpose(b, x, to_last), b.reshape(w, {ws[0], m * patch})});
  Shape split = {xs[0]};  // [N, spatial.., M, k..]
  for (int64_t i = 0; i < s; ++i) split.push_back(xs[static_cast<size_t>(2 + i)]);
  split.push_back(m);
  for (int64_t i = 0; i < s; ++i) split.push_back(ws[static_cast<size_t>(2 + i)]);
  std::vector<int64_t> perm = {0, s + 1};  // [N, M, (spatial_i, k_i)..]
  Shape y = {xs[0], m};
  for (int64_t i = 0; i < s; ++i) {
    perm.push_back(1 + i);
    perm.push_back(s + 2 + i);
    y.push_back(xs[static_cast<size_t>(2 + i)] * ws[static_cast<size_t>(2 + i)]);
  }
  return b.reshape(transpose(b, b.reshape(p, split), perm), y);
}

FissionRule conv_rule(const std::string& op) {
  return [op](FissionBuilder& b, const Node& n, const std::vector<ValueId>& in) {
    const bool patch = op == "ConvTranspose" && patch_conv_transpose(n.attrs, b.type(in[0]), b.type(in[1]).shape);
    ValueId y = patch ? patch_conv_transpose_rule(b, in[0], in[1]) : b.add1(op, {in[0], in[1]}, n.attrs);
    if (in.size() < 3 || in[2] == kNoValue) return std::vector<ValueId>{y};
    const Shape& ys = b.type(y).shape;
    Shape bias_shape(ys.size(), 1);
    bias_shape[1] = ys[1];
    ValueId bias = b.reshape(in[2], bias_shape);
    return std::vector<ValueId>{b.elementwise("Add", {y, bias})};
  };
}

}  // namespace

void register_linear_fission(FissionRegistry& r) {
  r.add("Gemm", gemm_rule);
  r.add("Conv", conv_rule("Conv"));
  r.add("ConvTranspose", conv_rule("ConvTranspose"));
}

}  // namespace korch
