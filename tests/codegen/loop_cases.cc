// The loop-kernel test cases shared by the CPU tests (loop_ops_test.cc, loop_chains_test.cc) and
// the CUDA tests (cuda_loop_test.cc): both backends run the same table.
#include "loop_cases.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>

namespace korch::testing {

namespace {

using I = std::vector<int64_t>;

LoopCase unary(const std::string& op, Attributes a = {}, Shape s = {2, 3, 5, 7}) {
  GraphBuilder b;
  ValueId x = b.f32("x", s);
  ValueId y = b.node(op, {x}, std::move(a));
  return whole_graph_case(op, b.finish({y}));
}

LoopCase binary(const std::string& op, Shape s = {4, 33}) {
  GraphBuilder b;
  ValueId x = b.f32("x", s), y = b.f32("y", s);
  return whole_graph_case(op, b.finish({b.node(op, {x, y})}));
}

LoopCase single(const std::string& name, Shape s, const std::function<ValueId(GraphBuilder&, ValueId)>& f,
                DType t = DType::kFloat32) {
  GraphBuilder b;
  ValueId x = b.input("x", t, s);
  ValueId y = f(b, x);
  return whole_graph_case(name, b.finish({y}));
}

}  // namespace

ValueId expand_to(GraphBuilder& b, ValueId v, const Shape& s) { return b.node("Expand", {v, b.ints(s)}); }

// Softmax over the last axis as fission writes it.
ValueId softmax(GraphBuilder& b, ValueId x, const Shape& s) {
  ValueId m = b.reduce("ReduceMax", x, {-1});
  ValueId e = b.node("Exp", {b.node("Sub", {x, expand_to(b, m, s)})});
  ValueId sum = b.reduce("ReduceSum", e, {-1});
  return b.node("Div", {e, expand_to(b, sum, s)});
}

std::vector<LoopCase> op_cases() {
  std::vector<LoopCase> cs;
  for (const char* op : {"Relu", "Sigmoid", "Reciprocal", "Tanh", "Softplus", "Erf", "HardSwish", "Exp",
                         "Neg", "Abs", "Floor", "Ceil", "Round", "Sin", "Cos", "Identity", "Mish", "Elu", "Selu",
                         "Softsign", "Sign", "Atan"})
    cs.push_back(unary(op));
  cs.push_back(single("Sqrt", {3, 40}, [](GraphBuilder& b, ValueId x) { return b.node("Sqrt", {b.node("Abs", {x})}); }));
  cs.push_back(single("Log", {3, 40}, [](GraphBuilder& b, ValueId x) { return b.node("Log", {b.node("Abs", {x})}); }));
  // The inverse hyperbolics inside their domains; IsInf on 1/round(x) (x rounds to 0 often: +-inf).
  cs.push_back(unary("Asinh", {}, {3, 40}));
  cs.push_back(single("Asinh_wide", {3, 40}, [](GraphBuilder& b, ValueId x) {
    return b.node("Asinh", {b.node("Mul", {x, b.scalar(1e4f)})});
  }));
  cs.push_back(single("Acosh", {3, 40}, [](GraphBuilder& b, ValueId x) {
    return b.node("Acosh", {b.node("Add", {b.node("Abs", {x}), b.scalar(1.f)})});
  }));
  cs.push_back(single("Atanh", {3, 40}, [](GraphBuilder& b, ValueId x) {
    return b.node("Atanh", {b.node("Mul", {b.node("Tanh", {x}), b.scalar(0.9f)})});
  }));
  for (int64_t neg : {0, 1})
    cs.push_back(single(neg ? "IsInf" : "IsInf_positive", {3, 40}, [neg](GraphBuilder& b, ValueId x) {
      ValueId r = b.node("Reciprocal", {b.node("Round", {x})});
      ValueId i = b.node("IsInf", {r}, attrs({{"detect_negative", neg}}));
      return b.node("Cast", {i}, attrs({{"to", int64_t{1}}}));
    }));
  // Sigmoid's exp (korch_exp_negabs on the CPU) over its whole range (inputs are uniform in
  // [-1, 1]): wide inputs (results under 2^-126, the clamp at -104), +-inf (1/round(x)) and NaN
  // (sqrt of negatives); the log of a Sigmoid of inputs down to -95 weighs the tiny results
  // (log(sigmoid(-90)) is -90: a result flushed to 0 would make it -inf).
  cs.push_back(single("Sigmoid_wide", {3, 200}, [](GraphBuilder& b, ValueId x) {
    return b.node("Sigmoid", {b.node("Mul", {x, b.scalar(120.f)})});
  }));
  cs.push_back(single("Log_Sigmoid_wide", {3, 200}, [](GraphBuilder& b, ValueId x) {
    return b.node("Log", {b.node("Sigmoid", {b.node("Mul", {x, b.scalar(95.f)})})});
  }));
  cs.push_back(single("Sigmoid_inf_nan", {3, 40}, [](GraphBuilder& b, ValueId x) {
    ValueId inf = b.node("Sigmoid", {b.node("Reciprocal", {b.node("Round", {x})})});
    return b.node("Add", {inf, b.node("Sigmoid", {b.node("Sqrt", {x})})});
  }));
  // Any other exp (korch_exp on the CPU) over its whole range: results past FLT_MAX (inf) and under
  // 2^-126 (inputs over [-100, 100]), the log of tiny ones (log(exp(-95)) is -95, not -inf), +-inf
  // (1/round(x)) and NaN (sqrt of negatives).
  cs.push_back(single("Exp_wide", {3, 200}, [](GraphBuilder& b, ValueId x) {
    return b.node("Exp", {b.node("Mul", {x, b.scalar(100.f)})});
  }));
  cs.push_back(single("Log_Exp_wide", {3, 200}, [](GraphBuilder& b, ValueId x) {
    return b.node("Log", {b.node("Exp", {b.node("Mul", {x, b.scalar(95.f)})})});
  }));
  cs.push_back(single("Exp_inf_nan", {3, 40}, [](GraphBuilder& b, ValueId x) {
    ValueId inf = b.node("Exp", {b.node("Reciprocal", {b.node("Round", {x})})});
    return b.node("Add", {inf, b.node("Exp", {b.node("Sqrt", {x})})});
  }));
  cs.push_back(unary("LeakyRelu", attrs({{"alpha", 0.1f}})));
  cs.push_back(unary("HardSigmoid", attrs({{"alpha", 0.3f}, {"beta", 0.4f}})));
  cs.push_back(unary("Gelu", {}, {3, 50}));
  cs.push_back(unary("Gelu", attrs({{"approximate", std::string("tanh")}}), {3, 50}));
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"}) cs.push_back(binary(op));
  cs.push_back(single("Clip", {5, 9}, [](GraphBuilder& b, ValueId x) {
    return b.node("Clip", {x, b.scalar(-0.3f), b.scalar(0.5f)});
  }));
  cs.push_back(single("Clip_max_only", {5, 9}, [](GraphBuilder& b, ValueId x) {
    return b.node("Clip", {x, kNoValue, b.scalar(0.5f)});
  }));
  // Per-tensor quantization: saturation at both ends (x scaled past the range), ties rounded to
  // even, the zero point added after rounding; and back.
  cs.push_back(single("QuantizeLinear_uint8", {6, 40}, [](GraphBuilder& b, ValueId x) {
    return b.node("QuantizeLinear", {b.node("Mul", {x, b.scalar(12.f)}), b.scalar(0.05f),
                                     b.constant(Tensor::scalar<uint8_t>(131))});
  }));
  cs.push_back(single("QuantizeLinear_ties_int8_Dequantize", {6, 40}, [](GraphBuilder& b, ValueId x) {
    // Round(x * 8) / 4 is a multiple of 0.25: x / 0.5 lands on .5 ties.
    ValueId t = b.node("Div", {b.node("Round", {b.node("Mul", {x, b.scalar(8.f)})}), b.scalar(4.f)});
    ValueId q = b.node("QuantizeLinear", {t, b.scalar(0.5f), b.constant(Tensor::scalar<int8_t>(-3))});
    return b.node("DequantizeLinear", {q, b.scalar(0.5f), b.constant(Tensor::scalar<int8_t>(-3))});
  }));
  cs.push_back(single("Add_scalar_const", {5, 9}, [](GraphBuilder& b, ValueId x) { return b.node("Add", {x, b.scalar(2.5f)}); }));
  cs.push_back(single("Where_Less_Cast", {6, 7}, [](GraphBuilder& b, ValueId x) {
    ValueId c = b.node("Less", {x, b.scalar(0.f)});
    ValueId n = b.node("Neg", {x});
    ValueId w = b.node("Where", {c, n, x});
    ValueId i = b.node("Cast", {c}, attrs({{"to", int64_t{7}}}));
    ValueId f = b.node("Cast", {i}, attrs({{"to", int64_t{1}}}));
    return b.node("Add", {w, f});
  }));
  cs.push_back(single("Equal_int_Not", {4, 5}, [](GraphBuilder& b, ValueId x) {
    ValueId e = b.node("Equal", {x, b.constant(Tensor::scalar<int64_t>(3))});
    ValueId n = b.node("Not", {e});
    return b.node("Cast", {n}, attrs({{"to", int64_t{1}}}));
  }, DType::kInt64));
  cs.push_back(single("f64_math_and_back", {4, 9}, [](GraphBuilder& b, ValueId x) {
    ValueId d = b.node("Cast", {x}, attrs({{"to", int64_t{11}}}));
    ValueId e = b.node("Tanh", {b.node("Exp", {d})});
    return b.node("Cast", {b.node("Mul", {e, d})}, attrs({{"to", int64_t{1}}}));
  }));
  cs.push_back(single("i32_where_max", {4, 9}, [](GraphBuilder& b, ValueId x) {
    ValueId big = b.node("Greater", {x, b.constant(Tensor::scalar<int32_t>(4))});
    ValueId m = b.node("Max", {x, b.node("Neg", {x})});
    return b.node("Where", {big, m, b.node("Mul", {x, x})});
  }, DType::kInt32));
  cs.push_back(single("bool_logic", {4, 9}, [](GraphBuilder& b, ValueId x) {
    ValueId y = b.node("Not", {x});
    ValueId z = b.node("Xor", {b.node("And", {x, y}), b.node("Or", {x, y})});
    return b.node("Cast", {z}, attrs({{"to", int64_t{1}}}));
  }, DType::kBool));
  cs.push_back(single("Cast_f32_i64", {4, 5}, [](GraphBuilder& b, ValueId x) {
    return b.node("Cast", {b.node("Mul", {x, b.scalar(10.f)})}, attrs({{"to", int64_t{7}}}));
  }));
  // Broadcast.
  cs.push_back(single("Expand_channel", {1, 6, 1, 1}, [](GraphBuilder& b, ValueId x) {
    return b.node("Expand", {x, b.ints({2, 6, 5, 7})});
  }));
  cs.push_back(single("Expand_rank_up", {7}, [](GraphBuilder& b, ValueId x) { return b.node("Expand", {x, b.ints({3, 4, 7})}); }));
  // Layout.
  cs.push_back(single("Reshape", {2, 3, 4}, [](GraphBuilder& b, ValueId x) { return b.node("Reshape", {x, b.ints({4, 6})}); }));
  cs.push_back(single("Flatten", {2, 3, 4}, [](GraphBuilder& b, ValueId x) { return b.node("Flatten", {x}, attrs({{"axis", int64_t{2}}})); }));
  cs.push_back(single("Squeeze", {2, 1, 4}, [](GraphBuilder& b, ValueId x) { return b.node("Squeeze", {x, b.ints({1})}); }));
  cs.push_back(single("Unsqueeze", {2, 4}, [](GraphBuilder& b, ValueId x) { return b.node("Unsqueeze", {x, b.ints({0, 2})}); }));
  for (I perm : {I{1, 0, 2}, I{0, 2, 3, 1}, I{3, 2, 1, 0}, I{0, 2, 1, 3}}) {
    Shape s = perm.size() == 3 ? Shape{3, 5, 7} : Shape{2, 3, 5, 7};
    cs.push_back(single(fmt::format("Transpose_{}", fmt::join(perm, "")), s,
                        [perm](GraphBuilder& b, ValueId x) { return b.node("Transpose", {x}, attrs({{"perm", perm}})); }));
  }
  // Transposes long enough for the CPU printer's tiles (loop::find_transpose_tile), with extents
  // that are not multiples of the tile: a matrix, NCHW -> NHWC, NHWC -> NCHW (a loop between the
  // tile's rows and columns), and a channel Concat read back channels-last (one tile per piece).
  cs.push_back(single("Transpose_tiled_10", {40, 70}, [](GraphBuilder& b, ValueId x) {
    return b.node("Transpose", {x}, attrs({{"perm", I{1, 0}}}));
  }));
  cs.push_back(single("Transpose_tiled_0231", {2, 40, 5, 36}, [](GraphBuilder& b, ValueId x) {
    return b.node("Transpose", {x}, attrs({{"perm", I{0, 2, 3, 1}}}));
  }));
  cs.push_back(single("Transpose_tiled_0312", {2, 5, 36, 40}, [](GraphBuilder& b, ValueId x) {
    return b.node("Transpose", {x}, attrs({{"perm", I{0, 3, 1, 2}}}));
  }));
  // An image read channels-last (3 channels: an innermost loop too short to vectorize, unrolled,
  // the pixel loop around it the simd loop), and a sigmoid of a batch of 16 of them (a math call in
  // the unrolled loop; the batch is the parallel loop).
  cs.push_back(single("Transpose_short_inner_0231", {2, 3, 9, 7}, [](GraphBuilder& b, ValueId x) {
    return b.node("Transpose", {x}, attrs({{"perm", I{0, 2, 3, 1}}}));
  }));
  cs.push_back(single("Sigmoid_of_short_inner_0231", {16, 3, 16, 17}, [](GraphBuilder& b, ValueId x) {
    return b.node("Sigmoid", {b.node("Transpose", {x}, attrs({{"perm", I{0, 2, 3, 1}}}))});
  }));
  cs.push_back(single("Concat_channels_then_channels_last", {1, 40, 6, 36}, [](GraphBuilder& b, ValueId x) {
    ValueId c = b.node("Concat", {b.node("Relu", {x}), x}, attrs({{"axis", int64_t{1}}}));
    return b.node("Transpose", {c}, attrs({{"perm", I{0, 2, 3, 1}}}));
  }));
  // A dense block's Concat: many inputs along the channels (an outer axis), of unequal widths,
  // with an elementwise op on some of them (the CPU printer unswitches one loop copy per input).
  {
    GraphBuilder b;
    std::vector<ValueId> parts;
    for (int i = 0; i < 12; ++i) {
      ValueId x = b.f32(fmt::format("x{}", i), {1, i % 3 + 1, 5, 21});
      parts.push_back(i % 4 == 0 ? b.node("Relu", {x}) : x);
    }
    cs.push_back(whole_graph_case("Concat_12_inputs_axis1", b.finish({b.node("Concat", parts, attrs({{"axis", int64_t{1}}}))})));
  }
  // The same block channels-last: 20 inputs along the innermost axis, then a per-channel scale and
  // shift (index-set splitting: one piece per input).
  {
    GraphBuilder b;
    std::vector<ValueId> parts;
    int64_t width = 0;
    for (int i = 0; i < 20; ++i) {
      const int64_t w = i % 3 + 2;
      ValueId x = b.f32(fmt::format("x{}", i), {1, 3, 5, w});
      parts.push_back(i % 4 == 0 ? b.node("Relu", {x}) : x);
      width += w;
    }
    ValueId c = b.node("Concat", parts, attrs({{"axis", int64_t{3}}}));
    auto per_channel = [&](const char* name) { return b.node("Expand", {b.f32(name, {width}), b.ints({1, 3, 5, width})}); };
    ValueId y = b.node("Add", {b.node("Mul", {c, per_channel("scale")}), per_channel("shift")});
    cs.push_back(whole_graph_case("Concat_20_inputs_innermost_scale_shift", b.finish({y})));
  }
  cs.push_back(single("Slice_basic", {6, 10}, [](GraphBuilder& b, ValueId x) {
    return b.node("Slice", {x, b.ints({1, 2}), b.ints({5, 9})});
  }));
  cs.push_back(single("Slice_steps", {6, 10}, [](GraphBuilder& b, ValueId x) {
    return b.node("Slice", {x, b.ints({0, 1}), b.ints({6, 10}), b.ints({0, 1}), b.ints({2, 3})});
  }));
  cs.push_back(single("Slice_negative", {6, 10}, [](GraphBuilder& b, ValueId x) {
    return b.node("Slice", {x, b.ints({-1, -2}), b.ints({-100, 0}), b.ints({1, 0}), b.ints({-1, -2})});
  }));
  cs.push_back(single("Slice_axis_end", {4, 6, 8}, [](GraphBuilder& b, ValueId x) {
    return b.node("Slice", {x, b.ints({2}), b.ints({1000}), b.ints({-1})});
  }));
  for (int64_t axis : {0, 1, 2}) {
    cs.push_back(single(fmt::format("Concat_axis{}", axis), {3, 4, 5}, [axis](GraphBuilder& b, ValueId x) {
      ValueId y = b.node("Neg", {x});
      ValueId z = b.node("Exp", {x});
      return b.node("Concat", {x, y, z}, attrs({{"axis", axis}}));
    }));
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {2, 3, 4}), y = b.f32("y", {2, 5, 4});
    cs.push_back(whole_graph_case("Concat_two_inputs", b.finish({b.node("Concat", {x, y}, attrs({{"axis", int64_t{1}}}))})));
  }
  cs.push_back(single("Gather_axis0", {5, 6}, [](GraphBuilder& b, ValueId x) {
    return b.node("Gather", {x, b.constant(Tensor::from_vector<int64_t>({4, 0, -1, 2}, {2, 2}))});
  }));
  cs.push_back(single("Gather_axis1", {5, 6}, [](GraphBuilder& b, ValueId x) {
    return b.node("Gather", {x, b.constant(Tensor::from_vector<int64_t>({5, 1, 1}, {3}))}, attrs({{"axis", int64_t{1}}}));
  }));
  cs.push_back(single("Gather_scalar", {5, 6}, [](GraphBuilder& b, ValueId x) {
    return b.node("Gather", {x, b.constant(Tensor::scalar<int64_t>(-2))}, attrs({{"axis", int64_t{1}}}));
  }));
  cs.push_back(single("Pad_constant", {2, 3, 4, 5}, [](GraphBuilder& b, ValueId x) {
    return b.node("Pad", {x, b.ints({0, 0, 1, 2, 0, 1, 2, 0}), b.scalar(0.5f)});
  }));
  cs.push_back(single("Pad_negative", {2, 3, 6, 5}, [](GraphBuilder& b, ValueId x) {
    return b.node("Pad", {x, b.ints({0, 0, -1, 2, 0, 0, 1, -2})});
  }));
  cs.push_back(single("Pad_reflect", {2, 3, 6, 5}, [](GraphBuilder& b, ValueId x) {
    return b.node("Pad", {x, b.ints({0, 0, 2, 1, 0, 0, 3, 2})}, attrs({{"mode", std::string("reflect")}}));
  }));
  cs.push_back(single("Pad_edge", {2, 3, 6, 5}, [](GraphBuilder& b, ValueId x) {
    return b.node("Pad", {x, b.ints({0, 0, 2, 1, 0, 0, 3, 2})}, attrs({{"mode", std::string("edge")}}));
  }));
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {4, 12, 3});
    auto outs = b.node_n("Split", {x, b.ints({2, 4, 6})}, attrs({{"axis", int64_t{1}}}), 3);
    cs.push_back(whole_graph_case("Split", b.finish({outs[2], outs[0]})));
  }
  cs.push_back(single("DepthToSpace_DCR", {2, 8, 3, 4}, [](GraphBuilder& b, ValueId x) {
    return b.node("DepthToSpace", {x}, attrs({{"blocksize", int64_t{2}}}));
  }));
  cs.push_back(single("DepthToSpace_CRD", {2, 8, 3, 4}, [](GraphBuilder& b, ValueId x) {
    return b.node("DepthToSpace", {x}, attrs({{"blocksize", int64_t{2}}, {"mode", std::string("CRD")}}));
  }));
  cs.push_back(single("SpaceToDepth", {2, 3, 4, 6}, [](GraphBuilder& b, ValueId x) {
    return b.node("SpaceToDepth", {x}, attrs({{"blocksize", int64_t{2}}}));
  }));
  cs.push_back(single("Tile", {2, 3, 4}, [](GraphBuilder& b, ValueId x) { return b.node("Tile", {x, b.ints({2, 1, 3})}); }));
  // Reductions.
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"}) {
    for (I axes : {I{-1}, I{1}, I{0, 2}, I{}}) {
      for (int64_t keep : {0, 1}) {
        std::string name = fmt::format("{}_axes{}_keep{}", op, fmt::join(axes, "_"), keep);
        cs.push_back(single(name, {3, 4, 5}, [=](GraphBuilder& b, ValueId x) {
          ValueId in = std::string(op) == "ReduceProd" ? b.node("Add", {x, b.scalar(1.f)}) : x;
          return b.reduce(op, in, axes, keep);
        }));
      }
    }
  }
  // A middle axis with a long output row: the kept-inner schedule.
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"})
    cs.push_back(single(fmt::format("{}_middle_axis_long_row", op), {2, 7, 33}, [=](GraphBuilder& b, ValueId x) {
      return b.reduce(op, std::string(op) == "ReduceProd" ? b.node("Add", {x, b.scalar(1.f)}) : x, {1}, 0);
    }));
  // A channels-last global pool: the reduce loop cut into parts on the threads (partial rows).
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"})
    cs.push_back(single(fmt::format("{}_global_pool_channels_last", op), {1, 3001, 24},
                        [=](GraphBuilder& b, ValueId x) { return b.reduce(op, x, {1}); }));
  // Layer-norm rows whose mean is 1e4 times their spread: the centring needs the reference's
  // mean to its last bits, which f32 accumulators do not give (tried 2026-12-07: 8e-4 to 1.2e-3
  // relative L2 here on the CUDA printer's schedules, 1.45e-3 for a LayerNormalization model on
  // the CPU; 1e-5 at 100 times). So f32 sums accumulate in f64 (loop_kernel.cc).
  cs.push_back(single("layernorm_offset_rows", {4, 768}, [](GraphBuilder& b, ValueId x) {
    const Shape s{4, 768};
    ValueId xo = b.node("Add", {x, b.scalar(1e4f)});
    ValueId mean = b.reduce("ReduceMean", xo, {-1});
    ValueId xm = b.node("Sub", {xo, expand_to(b, mean, s)});
    ValueId var = b.reduce("ReduceMean", b.node("Mul", {xm, xm}), {-1});
    return b.node("Div", {xm, expand_to(b, b.node("Sqrt", {b.node("Add", {var, b.scalar(1e-5f)})}), s)});
  }));
  for (const char* op : {"ArgMax", "ArgMin"})
    for (int64_t axis : {0, 2})
      for (int64_t last : {0, 1})
        cs.push_back(single(fmt::format("{}_axis{}_last{}", op, axis, last), {3, 4, 5}, [=](GraphBuilder& b, ValueId x) {
          return b.node(op, {x}, attrs({{"axis", axis}, {"keepdims", int64_t{0}}, {"select_last_index", last}}));
        }));
  // Pools.
  struct PoolCfg { const char* name; Shape s; I k, st, pads, dil; int64_t ceil, cip; };
  for (const PoolCfg& p : {PoolCfg{"2d_k3s2p1", {2, 3, 9, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0, 0},
                           PoolCfg{"2d_k2s2", {1, 4, 8, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 0, 0},
                           PoolCfg{"2d_ceil", {1, 2, 8, 7}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, 0},
                           PoolCfg{"2d_ceil_pad_cip", {1, 2, 8, 7}, {3, 2}, {2, 2}, {1, 0, 1, 1}, {1, 1}, 1, 1},
                           PoolCfg{"2d_dil", {1, 2, 10, 10}, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 0, 1},
                           PoolCfg{"2d_rows_ceil", {1, 3, 20, 21}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, 0},
                           PoolCfg{"2d_rows_s1", {1, 2, 13, 17}, {3, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 0, 1},  // not separable_max_pool
                           // The two passes of a separable MaxPool (fission, ir/primitive.h).
                           PoolCfg{"2d_cols_k13", {1, 3, 19, 19}, {13, 1}, {1, 1}, {6, 0, 6, 0}, {1, 1}, 0, 0},
                           PoolCfg{"2d_rows_k13", {1, 3, 19, 19}, {1, 13}, {1, 1}, {0, 6, 0, 6}, {1, 1}, 0, 0},
                           PoolCfg{"2d_cols_k5s2_ceil", {1, 2, 12, 9}, {5, 1}, {2, 1}, {2, 0, 1, 0}, {1, 1}, 1, 0},
                           // Row-inner with a peeled interior: asymmetric pads, dilation, ceil_mode.
                           PoolCfg{"2d_rows_dil_asym_ceil", {1, 2, 14, 23}, {3, 3}, {2, 2}, {0, 2, 1, 0}, {2, 2}, 1, 0},
                           PoolCfg{"1d", {2, 3, 11}, {4}, {3}, {1, 2}, {1}, 0, 0},
                           PoolCfg{"3d", {1, 2, 5, 6, 7}, {2, 3, 3}, {1, 2, 2}, {0, 1, 1, 1, 1, 0}, {1, 1, 1}, 0, 0}}) {
    for (const char* op : {"MaxPool", "AveragePool"}) {
      cs.push_back(single(fmt::format("{}_{}", op, p.name), p.s, [=](GraphBuilder& b, ValueId x) {
        Attributes a = attrs({{"kernel_shape", p.k}, {"strides", p.st}, {"pads", p.pads}, {"ceil_mode", p.ceil}});
        if (std::string(op) == "MaxPool") a.set("dilations", p.dil);
        else a.set("count_include_pad", p.cip);
        if (std::string(op) == "AveragePool" && p.dil != I(p.dil.size(), 1)) a.set("dilations", p.dil);
        return b.node(op, {x}, a);
      }));
      // The channels-last form the layout pass writes (rewrite/channels_last.h): [N, spatial.., C].
      const std::string name = p.name;
      if (name != "2d_k3s2p1" && name != "2d_ceil_pad_cip" && name != "2d_rows_dil_asym_ceil" && name != "2d_cols_k13" &&
          name != "1d" && name != "3d")
        continue;
      const Shape cl = permute_shape(p.s, channels_last_perm(static_cast<int64_t>(p.s.size())));
      cs.push_back(single(fmt::format("{}_{}_channels_last", op, p.name), cl, [=](GraphBuilder& b, ValueId x) {
        Attributes a = attrs({{"kernel_shape", p.k}, {"strides", p.st}, {"pads", p.pads}, {"ceil_mode", p.ceil},
                              {"channels_last", int64_t{1}}});
        if (std::string(op) == "MaxPool" || p.dil != I(p.dil.size(), 1)) a.set("dilations", p.dil);
        if (std::string(op) == "AveragePool") a.set("count_include_pad", p.cip);
        return b.node(op, {x}, a);
      }));
    }
  }
  return cs;
}

std::vector<LoopCase> chain_cases() {
  std::vector<LoopCase> cs;
  {
    GraphBuilder b;
    Shape s{2, 3, 17};
    ValueId x = b.f32("x", s);
    cs.push_back(whole_graph_case("softmax", b.finish({softmax(b, x, s)})));
  }
  {  // Rows with +inf (inf - inf: NaN), -inf (exp of -inf: 0) and both: the exp of x - max(x) is
     // printed as one of a value known to be at most 0 (loop_kernel_elementwise.cc).
    GraphBuilder b;
    Shape s{4, 40};
    ValueId x = b.f32("x", s);
    ValueId inf = b.node("Reciprocal", {b.node("Round", {b.node("Mul", {x, b.scalar(3.f)})})});
    cs.push_back(whole_graph_case("softmax_inf_nan", b.finish({softmax(b, inf, s)})));
  }
  {  // A softmax transposed: the output reads the exp at another element than it writes, so the
     // exp is not written ahead into it (AFusedSoftmaxComputesEachExpOnce).
    GraphBuilder b;
    Shape s{24, 24};
    ValueId x = b.f32("x", s);
    ValueId t = b.node("Transpose", {softmax(b, x, s)}, attrs({{"perm", std::vector<int64_t>{1, 0}}}));
    cs.push_back(whole_graph_case("softmax_then_transpose", b.finish({t})));
  }
  {  // A softmax whose max another kernel took (x - max an argument): the exp written ahead in
     // rows, summed and divided in place.
    GraphBuilder b;
    Shape s{24, 40};
    ValueId d = b.f32("d", s);
    ValueId e = b.node("Exp", {d});
    ValueId sum = b.reduce("ReduceSum", e, {-1});
    cs.push_back(whole_graph_case("exp_sum_div_of_an_argument", b.finish({b.node("Div", {e, expand_to(b, sum, s)})})));
  }
  {  // A squeeze-and-excitation block with its 1x1 Convs as matvec_as_reduce writes them (Mul by the
     // weights, output axis first, and a ReduceSum over the innermost axis), on a channels-last map.
    GraphBuilder b;
    const Shape s{1, 5, 7, 24};
    ValueId x = b.f32("x", s);
    auto weights = [&](int64_t rows, int64_t cols, float phase) {
      std::vector<float> w(static_cast<size_t>(rows * cols));
      for (size_t i = 0; i < w.size(); ++i) w[i] = 0.4f * std::sin(0.7f * static_cast<float>(i) + phase);
      return b.constant(Tensor::from_vector<float>(w, {rows, cols}));
    };
    auto matvec = [&](ValueId v, int64_t k, int64_t n, float phase) {
      ValueId row = b.node("Reshape", {v, b.ints({1, k})});
      ValueId prod = b.node("Mul", {b.node("Expand", {row, b.ints({n, k})}), weights(n, k, phase)});
      return b.node("Reshape", {b.reduce("ReduceSum", prod, {1}), b.ints({1, 1, 1, n})});
    };
    ValueId mean = b.reduce("ReduceMean", x, {1, 2});
    ValueId h = b.node("Relu", {b.node("Add", {matvec(mean, 24, 6, 0.f), b.scalar(0.1f)})});
    ValueId gate = b.node("Sigmoid", {matvec(h, 6, 24, 1.f)});
    cs.push_back(whole_graph_case("squeeze_excite_as_reduce", b.finish({b.node("Mul", {x, expand_to(b, gate, s)})})));
  }
  {  // Two outputs read the exp written ahead into the first: both before either is stored.
    GraphBuilder b;
    Shape s{20, 36};
    ValueId x = b.f32("x", s);
    ValueId m = b.reduce("ReduceMax", x, {-1});
    ValueId e = b.node("Exp", {b.node("Sub", {x, expand_to(b, m, s)})});
    ValueId sum = b.reduce("ReduceSum", e, {-1});
    ValueId sm = b.node("Div", {e, expand_to(b, sum, s)});
    ValueId scaled = b.node("Mul", {e, b.scalar(0.5f)});
    cs.push_back(whole_graph_case("softmax_and_scaled_exp", b.finish({sm, scaled})));
  }
  {
    // A separable MaxPool's two passes in one kernel (the column pool a scratch stage of the row pool).
    GraphBuilder b;
    ValueId x = b.f32("x", {1, 3, 15, 14});
    ValueId c = b.node("MaxPool", {x}, attrs({{"kernel_shape", I{9, 1}}, {"pads", I{4, 0, 4, 0}}}));
    ValueId r = b.node("MaxPool", {c}, attrs({{"kernel_shape", I{1, 9}}, {"pads", I{0, 4, 0, 4}}}));
    cs.push_back(whole_graph_case("separable_maxpool_9x9", b.finish({r})));
  }
  {
    GraphBuilder b;
    Shape s{2, 5, 24};
    ValueId x = b.f32("x", s), gamma = b.f32("gamma", {24}), beta = b.f32("beta", {24});
    ValueId mean = b.reduce("ReduceMean", x, {-1});
    ValueId xm = b.node("Sub", {x, expand_to(b, mean, s)});
    ValueId var = b.reduce("ReduceMean", b.node("Mul", {xm, xm}), {-1});
    ValueId sd = b.node("Sqrt", {b.node("Add", {var, b.scalar(1e-5f)})});
    ValueId n = b.node("Div", {xm, expand_to(b, sd, s)});
    ValueId y = b.node("Add", {b.node("Mul", {n, expand_to(b, gamma, s)}), expand_to(b, beta, s)});
    cs.push_back(whole_graph_case("layernorm", b.finish({y})));
  }
  {
    GraphBuilder b;
    Shape s{4, 64};
    ValueId x = b.f32("x", s), bias = b.f32("bias", {64});
    ValueId y = b.node("Add", {x, expand_to(b, bias, s)});
    ValueId er = b.node("Erf", {b.node("Div", {y, b.scalar(1.41421356f)})});
    ValueId gl = b.node("Mul", {b.node("Mul", {y, b.node("Add", {er, b.scalar(1.f)})}), b.scalar(0.5f)});
    cs.push_back(whole_graph_case("bias_gelu", b.finish({gl})));
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {2, 8, 24});
    ValueId h = b.node("Reshape", {x, b.ints({2, 8, 4, 6})});
    ValueId t = b.node("Transpose", {h}, attrs({{"perm", I{0, 2, 1, 3}}}));
    ValueId r = b.node("Reshape", {t, b.ints({8, 8, 6})});
    cs.push_back(whole_graph_case("heads_split", b.finish({r})));
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {2, 3, 4, 5});
    ValueId r = b.node("Reshape", {x, b.ints({2, 3, 20})});
    ValueId t = b.node("Transpose", {r}, attrs({{"perm", I{0, 2, 1}}}));
    ValueId y = b.node("Reshape", {t, b.ints({2, 60})});
    ValueId z = b.node("Reshape", {b.node("Relu", {y}), b.ints({2, 20, 3})});
    cs.push_back(whole_graph_case("transpose_reshape_chain", b.finish({z})));
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {2, 4, 6}), y = b.f32("y", {2, 3, 6});
    ValueId c = b.node("Concat", {x, y}, attrs({{"axis", int64_t{1}}}));
    ValueId s = b.node("Slice", {c, b.ints({2}), b.ints({6}), b.ints({1})});
    cs.push_back(whole_graph_case("concat_slice", b.finish({s})));
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {1, 3, 8, 8});
    ValueId p = b.node("Pad", {x, b.ints({0, 0, 1, 1, 0, 0, 1, 1}), b.scalar(-1e9f)});
    ValueId m = b.node("MaxPool", {p}, attrs({{"kernel_shape", I{3, 3}}, {"strides", I{2, 2}}}));
    cs.push_back(whole_graph_case("pad_maxpool", b.finish({m})));
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {3, 40});
    ValueId a = b.node("Relu", {x});
    ValueId s = b.node("Sigmoid", {a});
    cs.push_back(whole_graph_case("two_outputs", b.finish({a, s})));
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {3, 40});
    ValueId m = b.reduce("ReduceMean", x, {1}, 0);
    ValueId e = b.node("Exp", {x});
    cs.push_back(whole_graph_case("outputs_of_two_shapes", b.finish({e, m})));
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {5, 6}), y = b.f32("y", {5, 6});
    ValueId a = b.node("Add", {x, y});
    ValueId m = b.node("Mul", {a, a});
    cs.push_back(whole_graph_case("output_also_read_inside", b.finish({a, m})));
  }
  {
    GraphBuilder b;
    Shape s{2, 8, 5, 5};
    ValueId x = b.f32("x", s), bias = b.f32("bias", {1, 8, 1, 1});
    ValueId y = b.node("Relu", {b.node("Add", {x, expand_to(b, bias, s)})});
    cs.push_back(whole_graph_case("channel_bias_relu", b.finish({y})));
  }
  {
    GraphBuilder b;
    Shape s{2, 4, 6, 6};
    ValueId x = b.f32("x", s);
    ValueId mean = b.reduce("ReduceMean", x, {2, 3});
    ValueId y = b.node("Sub", {x, expand_to(b, mean, s)});
    ValueId gap = b.node("Flatten", {mean});
    cs.push_back(whole_graph_case("instance_center_and_gap", b.finish({y, gap})));
  }
  {
    GraphBuilder b;
    Shape s{2, 6, 5};
    ValueId x = b.f32("x", s);
    ValueId m = b.reduce("ReduceMean", x, {1});  // a middle axis
    ValueId sm = softmax(b, b.node("Sub", {x, expand_to(b, m, s)}), s);
    cs.push_back(whole_graph_case("middle_axis_mean_then_softmax", b.finish({sm})));
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {1, 8, 4, 4});
    auto parts = b.node_n("Split", {x, b.ints({2, 6})}, attrs({{"axis", int64_t{1}}}), 2);
    ValueId s0 = b.node("Sigmoid", {parts[0]});
    ValueId c = b.node("Concat", {b.node("Mul", {parts[1], b.scalar(2.f)}), s0}, attrs({{"axis", int64_t{1}}}));
    ValueId d = b.node("DepthToSpace", {c}, attrs({{"blocksize", int64_t{2}}}));
    cs.push_back(whole_graph_case("split_concat_d2s", b.finish({d})));
  }
  {
    // The reduction reads x strided (kept-inner schedule over the 64 rows) and the next stage
    // shares its row loop: row fusion must leave the kept-inner stage alone.
    GraphBuilder b;
    Shape s{1, 64, 32};
    ValueId x = b.f32("x", {1, 32, 64}), bias = b.f32("bias", {32});
    ValueId t = b.node("Add", {b.node("Transpose", {x}, attrs({{"perm", I{0, 2, 1}}})), expand_to(b, bias, s)});
    ValueId m = b.reduce("ReduceMean", t, {-1});
    ValueId y = b.node("Sub", {t, expand_to(b, m, s)});
    cs.push_back(whole_graph_case("transposed_mean_center", b.finish({m, y})));
  }
  {
    GraphBuilder b;
    Shape s{12, 197, 197};
    ValueId x = b.f32("x", s);
    cs.push_back(whole_graph_case("softmax_12x197x197", b.finish({softmax(b, x, s)})));
  }
  {
    // An exponential written whole as an output, then summed per row (the sum's stage reads the
    // row the first stage wrote: row fusion over whole rows).
    GraphBuilder b;
    Shape s{20, 33};
    ValueId x = b.f32("x", s), m = b.f32("m", {20, 1});
    ValueId e = b.node("Exp", {b.node("Sub", {x, expand_to(b, m, s)})});
    cs.push_back(whole_graph_case("exp_output_then_row_sum", b.finish({e, b.reduce("ReduceSum", e, {-1})})));
  }
  {
    // Windowed attention's softmax with a bias shared by the windows: the loops stay [windows,
    // heads x rows, columns] and the row maxima live one loop deeper (row fusion over two loops;
    // enough work for the collapsed parallel loop).
    GraphBuilder b;
    Shape s{32, 3, 16, 16};
    ValueId x = b.f32("x", s), bias = b.f32("bias", {1, 3, 16, 16});
    ValueId sm = softmax(b, b.node("Add", {x, expand_to(b, bias, s)}), s);
    cs.push_back(whole_graph_case("windowed_softmax_with_bias", b.finish({sm})));
  }
  return cs;
}

}  // namespace korch::testing
