// Rewrite alternative "matvec_as_reduce": a linear primitive that multiplies one vector by a small
// constant matrix, as an elementwise Mul with that matrix and a ReduceSum along its rows.
//
// Why: a squeeze-and-excitation block (MobileNetV3, EfficientNet, RegNetY) applies two 1x1 Convs
// to the [1, C, 1, 1] channel means: matrix-vector products of a few thousand multiply-adds. As
// library calls each costs a call and a fork/join of the threads (2-5 us in mobilenet_v3_small's
// plan, against 0.1-0.3 us for the elementwise kernels beside it), and a linear kernel fuses only
// its epilogue, so the mean, the two products and the activations between them run as 4-5
// kernels. As a Mul and a ReduceSum the product is loop-kernel work: it fuses with the mean before
// it and the activation after it. Whether that wins depends on the sizes and on what fuses, so the
// rule is a choice the orchestrator prices.
//
//   y = Conv(x, W[N, K, 1.., 1])   1x1, stride 1, no padding, one group, no bias input, either
//                                  layout (channels-last too), every spatial dim and the batch 1
//   y = MatMul(x, W[K, N])         x of K elements (every other dim 1), W constant
//   -> y = Reshape(ReduceSum(Mul(Expand(Reshape(x, [1, K]), [N, K]), W'[N, K]), axes [1]), y's shape)
//      W' = W with its output axis first (the Conv's weights as they are; the MatMul's transposed),
//      so the sum runs over the innermost axis, contiguous in W' and in x.
//
// A classifier head at batch 1 is the other case: there the product streams megabytes of weights,
// cold in the model, and a loop kernel reads them at the memory's pace where oneDNN 2.6's GEMV did
// not (efficientvit_b0's 1024x1280 head measured with its weights evicted: 121 us against 248 us on
// the 2-core EPYC VM; bench/results/cold_weights.md).
//
// Matched: float32/float64 operands of one dtype, x not constant, K * N at most kMaxElements (a
// bound on compile time: a larger product is left to the library). Summed in the operand's type:
// the library sums the same products in another order.
#include <fmt/format.h>

#include "rewrite/alternatives.h"
#include "support/error.h"

namespace korch {

namespace {

constexpr int64_t kMaxElements = int64_t{1} << 24;

std::optional<AltMatch> match_matvec(const Graph& g, const UseInfo&, NodeId id) {
  const Node& n = g.nodes[static_cast<size_t>(id)];
  if (!n.domain.empty() || n.outputs.size() != 1 || n.inputs.size() < 2) return std::nullopt;
  const bool conv = n.op_type == "Conv";
  if (!conv && !(n.op_type == "MatMul" && n.inputs.size() == 2)) return std::nullopt;
  const Tensor* w = conv ? pointwise_conv_weight(g, n) : constant_of(g, n.inputs[1]);
  const ValueId x = n.inputs[0], y = n.outputs[0];
  if (w == nullptr || x == kNoValue || constant_of(g, x) != nullptr) return std::nullopt;
  const TensorType xt = g.type(x), yt = g.type(y);
  if ((xt.dtype != DType::kFloat32 && xt.dtype != DType::kFloat64) || w->dtype() != xt.dtype || yt.dtype != xt.dtype)
    return std::nullopt;
  if (!conv && (w->rank() != 2 || xt.rank() < 1)) return std::nullopt;
  const int64_t k = conv ? w->dim(1) : w->dim(0), outs = w->dim(conv ? 0 : 1);
  if (xt.numel() != k || yt.numel() != outs || k < 2 || k * outs > kMaxElements) return std::nullopt;
  AltMatch m;
  m.nodes = {id};
  m.description = fmt::format("{}({}, [{},{}]) -> ReduceSum(Mul(x, W[{},{}]), innermost axis)", n.op_type, type_str(xt),
                              conv ? outs : k, conv ? k : outs, outs, k);
  // W' [N, K]: the Conv's [N, K, 1..] as it is, the MatMul's [K, N] transposed.
  Tensor wt(xt.dtype, {outs, k});
  dispatch_dtype<float, double>(xt.dtype, "matvec_as_reduce", [&](auto tag) {
    using T = decltype(tag);
    const T* s = w->data<T>();
    T* d = wt.data<T>();
    for (int64_t j = 0; j < outs; ++j)
      for (int64_t i = 0; i < k; ++i) d[j * k + i] = conv ? s[j * k + i] : s[i * outs + j];
  });
  m.rewrite = [x, y, k, outs, xt, yt, wt = std::move(wt)](Graph& h) {
    Rewriter rw(h);
    ValueId row = x;
    if (xt.shape != Shape{1, k}) row = rw.append_node("Reshape", {x, rw.int_list({1, k})})[0];
    const ValueId rows = rw.append_node("Expand", {row, rw.int_list({outs, k})})[0];
    const ValueId weights = rw.add_constant("matvec/weights", wt);
    const ValueId products = rw.append_node("Mul", {rows, weights})[0];
    Attributes a;
    a.set("keepdims", int64_t{1});
    std::vector<ValueId> sum_inputs{products};
    if (h.opset < 13)
      a.set("axes", std::vector<int64_t>{1});
    else
      sum_inputs.push_back(rw.int_list({1}));
    const ValueId sum = rw.append_node("ReduceSum", sum_inputs, a)[0];
    const ValueId out = rw.append_node("Reshape", {sum, rw.int_list(yt.shape)})[0];
    KORCH_CHECK(rw.replace(y, out), "matvec_as_reduce: cannot replace {}", type_str(yt));
    rw.finish();
  };
  return m;
}

}  // namespace

const std::vector<AlternativeFamily>& matvec_alternative_families() {
  static const std::vector<AlternativeFamily> f = {{"matvec_as_reduce", match_matvec}};
  return f;
}

}  // namespace korch
