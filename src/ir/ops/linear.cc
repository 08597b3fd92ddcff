// Linear-algebra operators, part 1: MatMul and Gemm, the f16/bf16 wrapper the family shares, and
// the family's registration entry point. The GEMM kernel is in gemm.cc, Conv/ConvTranspose in
// conv.cc, Einsum in einsum.cc.
#include <algorithm>

#include "ir/ops/gemm.h"
#include "ir/ops/linear_internal.h"
#include "ir/ops/op_util.h"

namespace korch {
namespace linear_detail {

Tensor to_f32_tensor(const Tensor& t) {
  Tensor out(DType::kFloat32, t.shape());
  float* o = out.data<float>();
  const int64_t n = t.numel();
  if (t.dtype() == DType::kFloat16) {
    const Float16* s = t.data<Float16>();
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(s[i]);
  } else {
    const BFloat16* s = t.data<BFloat16>();
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(s[i]);
  }
  return out;
}

Tensor from_f32_tensor(const Tensor& t, DType dt) {
  Tensor out(dt, t.shape());
  const float* s = t.data<float>();
  const int64_t n = t.numel();
  if (dt == DType::kFloat16) {
    Float16* o = out.data<Float16>();
    for (int64_t i = 0; i < n; ++i) o[i] = Float16(s[i]);
  } else {
    BFloat16* o = out.data<BFloat16>();
    for (int64_t i = 0; i < n; ++i) o[i] = BFloat16(s[i]);
  }
  return out;
}

std::vector<Tensor> eval_via_f32(const OpEvalContext& ctx, const EvalFn& f32_eval) {
  std::vector<Tensor> conv;
  conv.reserve(ctx.inputs.size());
  std::vector<const Tensor*> ins;
  for (const Tensor* t : ctx.inputs) {
    if (t && ops::is_half(t->dtype())) {
      conv.push_back(to_f32_tensor(*t));
      ins.push_back(&conv.back());
    } else {
      ins.push_back(t);
    }
  }
  std::vector<TensorType> types = ctx.output_types;
  for (TensorType& t : types)
    if (ops::is_half(t.dtype)) t.dtype = DType::kFloat32;
  OpEvalContext c2{ctx.node, ctx.opset, ins, types};
  std::vector<Tensor> outs = f32_eval(c2);
  for (size_t i = 0; i < outs.size() && i < ctx.output_types.size(); ++i)
    if (ops::is_half(ctx.output_types[i].dtype) && outs[i].defined()) outs[i] = from_f32_tensor(outs[i], ctx.output_types[i].dtype);
  return outs;
}

}  // namespace linear_detail

namespace {

using linear_detail::GemmArgs;

// ---------------------------------------------------------------------------------------------
// MatMul

struct MatMulShape {
  Shape batch, out;
  int64_t M = 0, K = 0, N = 0;
  Shape a_batch, b_batch;
};

MatMulShape matmul_shape(const Shape& a, const Shape& b, const char* op = "MatMul") {
  if (a.empty() || b.empty()) fail("{} operands must have rank >= 1, got {} and {}", op, shape_str(a), shape_str(b));
  MatMulShape s;
  Shape a2 = a, b2 = b;
  if (a2.size() == 1) a2.insert(a2.begin(), 1);
  if (b2.size() == 1) b2.push_back(1);
  s.M = a2[a2.size() - 2];
  s.K = a2.back();
  s.N = b2.back();
  if (b2[b2.size() - 2] != s.K)
    fail("{} inner dimensions differ: {} x {} ({} vs {})", op, shape_str(a), shape_str(b), s.K, b2[b2.size() - 2]);
  s.a_batch.assign(a2.begin(), a2.end() - 2);
  s.b_batch.assign(b2.begin(), b2.end() - 2);
  s.batch = broadcast_shapes(s.a_batch, s.b_batch);
  s.out = s.batch;
  if (a.size() != 1) s.out.push_back(s.M);
  if (b.size() != 1) s.out.push_back(s.N);
  return s;
}

std::vector<TensorType> infer_matmul(const OpInferContext& ctx) {
  const TensorType& a = ctx.input(0);
  const TensorType& b = ctx.input(1);
  if (a.dtype != b.dtype) fail("MatMul operands have different types {} and {}", dtype_name(a.dtype), dtype_name(b.dtype));
  return ops::one(a.dtype, matmul_shape(a.shape, b.shape).out);
}

// Batched matmul over broadcast batch dims of row-major operands.
template <typename T>
void run_matmul(const T* a, const T* b, T* c, const MatMulShape& s) {
  const int64_t nb = shape_numel(s.batch);
  GemmArgs<T> g;
  g.M = s.M;
  g.N = s.N;
  g.K = s.K;
  g.lda = s.K;
  g.ldb = s.N;
  g.ldc = s.N;
  g.A = a;
  g.B = b;
  g.C = c;
  if (shape_numel(s.b_batch) == 1 && shape_numel(s.a_batch) == nb) {
    // B shared by every batch: one tall GEMM.
    g.M = s.M * nb;
    linear_detail::gemm(g);
    return;
  }
  std::vector<int64_t> ao(static_cast<size_t>(nb)), bo(static_cast<size_t>(nb));
  auto as = ops::broadcast_strides(s.a_batch, s.batch), bs = ops::broadcast_strides(s.b_batch, s.batch);
  ops::for_each_broadcast(s.batch, {as, bs}, [&](int64_t i, const std::vector<int64_t>& off) {
    ao[static_cast<size_t>(i)] = off[0] * s.M * s.K;
    bo[static_cast<size_t>(i)] = off[1] * s.K * s.N;
  });
  g.batch = nb;
  g.a_offsets = ao.data();
  g.b_offsets = bo.data();
  g.c_stride = s.M * s.N;
  linear_detail::gemm(g);
}

std::vector<Tensor> eval_matmul(const OpEvalContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (ops::is_half(a.dtype())) return linear_detail::eval_via_f32(ctx, eval_matmul);
  MatMulShape s = matmul_shape(a.shape(), b.shape());
  Tensor out(ctx.output_type(0));
  dispatch_dtype<KORCH_NUMERIC_TYPES>(a.dtype(), "MatMul", [&](auto tag) {
    using T = decltype(tag);
    run_matmul<T>(a.data<T>(), b.data<T>(), out.data<T>(), s);
  });
  return {out};
}

// ---------------------------------------------------------------------------------------------
// Gemm: Y = alpha * A' * B' + beta * C

std::vector<TensorType> infer_gemm(const OpInferContext& ctx) {
  const TensorType& a = ctx.input(0);
  const TensorType& b = ctx.input(1);
  if (a.rank() != 2 || b.rank() != 2) fail("Gemm inputs A and B must be 2-D, got {} and {}", shape_str(a.shape), shape_str(b.shape));
  if (a.dtype != b.dtype) fail("Gemm inputs have different types {} and {}", dtype_name(a.dtype), dtype_name(b.dtype));
  const bool ta = ctx.attrs().get_int("transA", 0) != 0, tb = ctx.attrs().get_int("transB", 0) != 0;
  const int64_t M = ta ? a.shape[1] : a.shape[0], K = ta ? a.shape[0] : a.shape[1];
  const int64_t Kb = tb ? b.shape[1] : b.shape[0], N = tb ? b.shape[0] : b.shape[1];
  if (K != Kb) fail("Gemm inner dimensions differ: A' is {}x{}, B' is {}x{}", M, K, Kb, N);
  if (ctx.has_input(2)) {
    const TensorType& c = ctx.input(2);
    if (c.dtype != a.dtype) fail("Gemm input C has type {}, expected {}", dtype_name(c.dtype), dtype_name(a.dtype));
    if (c.rank() > 2) fail("Gemm input C must have rank <= 2, got {}", shape_str(c.shape));
    Shape y{M, N};
    for (size_t i = 0; i < c.shape.size(); ++i) {
      int64_t d = c.shape[c.shape.size() - 1 - i];
      if (d != 1 && d != y[1 - i]) fail("Gemm input C {} cannot be broadcast to [{},{}]", shape_str(c.shape), M, N);
    }
  } else if (ctx.opset < 11) {
    fail("Gemm input C is required before opset 11");
  }
  return ops::one(a.dtype, {M, N});
}

template <typename T>
void transpose2d(const T* in, int64_t rows, int64_t cols, T* out) {
  for (int64_t i0 = 0; i0 < rows; i0 += 32)
    for (int64_t j0 = 0; j0 < cols; j0 += 32)
      for (int64_t i = i0; i < std::min(rows, i0 + 32); ++i)
        for (int64_t j = j0; j < std::min(cols, j0 + 32); ++j) out[j * rows + i] = in[i * cols + j];
}

std::vector<Tensor> eval_gemm(const OpEvalContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (ops::is_half(a.dtype())) return linear_detail::eval_via_f32(ctx, eval_gemm);
  const bool ta = ctx.attrs().get_int("transA", 0) != 0, tb = ctx.attrs().get_int("transB", 0) != 0;
  const double alpha = ctx.attrs().get_float("alpha", 1.0f), beta = ctx.attrs().get_float("beta", 1.0f);
  const Tensor* c = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  Tensor out(ctx.output_type(0));
  const int64_t M = out.dim(0), N = out.dim(1);
  const int64_t K = ta ? a.dim(0) : a.dim(1);
  dispatch_dtype<float, double, int32_t, int64_t, uint32_t, uint64_t>(a.dtype(), "Gemm", [&](auto tag) {
    using T = decltype(tag);
    const T* A = a.data<T>();
    const T* B = b.data<T>();
    std::vector<T> at, bt;
    if (ta) {
      at.resize(static_cast<size_t>(M * K));
      transpose2d(A, K, M, at.data());
      A = at.data();
    }
    if (tb) {
      bt.resize(static_cast<size_t>(K * N));
      transpose2d(B, N, K, bt.data());
      B = bt.data();
    }
    T* Y = out.data<T>();
    GemmArgs<T> g;
    g.M = M;
    g.N = N;
    g.K = K;
    g.A = A;
    g.lda = K;
    g.B = B;
    g.ldb = N;
    g.C = Y;
    g.ldc = N;
    linear_detail::gemm(g);
    const bool has_c = c && beta != 0.0;
    if (alpha == 1.0 && !has_c) return;
    const T* C = c ? c->data<T>() : nullptr;
    int64_t cs0 = 0, cs1 = 0;  // C strides over (M, N) after broadcasting
    if (c) {
      const Shape& cs = c->shape();
      if (cs.size() == 2) {
        cs0 = cs[0] == 1 ? 0 : cs[1];
        cs1 = cs[1] == 1 ? 0 : 1;
      } else if (cs.size() == 1) {
        cs1 = cs[0] == 1 ? 0 : 1;
      }
    }
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double v = alpha * static_cast<double>(Y[i * N + j]);
        if (has_c) v += beta * static_cast<double>(C[i * cs0 + j * cs1]);
        Y[i * N + j] = static_cast<T>(v);
      }
  });
  return {out};
}

}  // namespace

Shape linear_detail::matmul_output_shape(const Shape& a, const Shape& b, const char* op) {
  return matmul_shape(a, b, op).out;
}

Tensor linear_detail::matmul_int32(const Tensor& a, const Tensor& b, const char* op) {
  MatMulShape s = matmul_shape(a.shape(), b.shape(), op);
  Tensor out(DType::kInt32, s.out);
  run_matmul<int32_t>(a.data<int32_t>(), b.data<int32_t>(), out.data<int32_t>(), s);
  return out;
}

void register_linear_ops(OpRegistry& r) {
  r.add(OpDef{"MatMul", 1, kMaxOpset, infer_matmul, eval_matmul});
  r.add(OpDef{"Gemm", 1, kMaxOpset, infer_gemm, eval_gemm});
  linear_detail::register_einsum_ops(r);
  linear_detail::register_conv_ops(r);
}

}  // namespace korch
