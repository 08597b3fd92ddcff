// The operator table: for every supported ONNX operator, its opset range, its static shape/dtype
// inference and its reference implementation (the interpreter's kernel).
//
// Operator families live in src/ir/ops/<family>.cc, each exposing one register_<family>_ops()
// function; register_all_ops() (ops/all_ops.cc) calls them all once. Explicit registration instead
// of static initialisers: static libraries drop unreferenced object files, silently losing ops.
//
// Contract for an op's functions:
//  - infer(ctx) returns one TensorType per node output (for omitted optional outputs anything).
//    It may read compile-time constant inputs through ctx.constant(i) (Reshape's shape, Slice's
//    starts...) and must fail (korch::fail / fail_unsupported) when a value it needs is not
//    constant. It never sees node names; the frontend adds them to the message.
//  - eval(ctx) computes the outputs from input tensors. Output types were already inferred
//    (ctx.output_type(i)), so eval only computes values. Reference semantics: plain loops,
//    fp32 math for fp32 (accumulate in double where it costs nothing, e.g. reductions).
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace korch {

constexpr int kMinOpset = 7;   // oldest default-domain opset Korch accepts
constexpr int kMaxOpset = 22;  // newest default-domain opset Korch accepts

struct OpInferContext {
  const Node& node;
  int opset;
  std::vector<const TensorType*> input_types;  // nullptr for omitted inputs
  std::vector<const Tensor*> input_constants;  // nullptr when not a compile-time constant

  const Attributes& attrs() const { return node.attrs; }
  int num_inputs() const { return static_cast<int>(input_types.size()); }
  bool has_input(int i) const { return i < num_inputs() && input_types[static_cast<size_t>(i)] != nullptr; }
  // Type of a required input; fails when it is missing.
  const TensorType& input(int i) const;
  // The constant value of input i, or nullptr (also when the input is omitted).
  const Tensor* constant(int i) const { return has_input(i) ? input_constants[static_cast<size_t>(i)] : nullptr; }
  // The constant value of input i; fails with "<what> must be a constant" when it is not.
  const Tensor& require_constant(int i, const char* what) const;
  int num_outputs() const { return static_cast<int>(node.outputs.size()); }
};

struct OpEvalContext {
  const Node& node;
  int opset;
  std::vector<const Tensor*> inputs;       // nullptr for omitted inputs
  std::vector<TensorType> output_types;    // from inference

  const Attributes& attrs() const { return node.attrs; }
  int num_inputs() const { return static_cast<int>(inputs.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs[static_cast<size_t>(i)] != nullptr; }
  const Tensor& input(int i) const;
  const TensorType& output_type(int i) const { return output_types.at(static_cast<size_t>(i)); }
  int num_outputs() const { return static_cast<int>(output_types.size()); }
};

using InferFn = std::function<std::vector<TensorType>(const OpInferContext&)>;
using EvalFn = std::function<std::vector<Tensor>(const OpEvalContext&)>;

struct OpDef {
  std::string op_type;
  int min_opset = 1;          // first default-domain opset with this op (as Korch implements it)
  int max_opset = kMaxOpset;  // last opset whose semantics Korch implements
  InferFn infer;
  EvalFn eval;
  // False for ops whose outputs must not be precomputed even when inputs are constant
  // (RandomNormal...). Everything deterministic is foldable.
  bool foldable = true;
  // For ops whose outputs depend only on input *types* (Shape, Size): computes the outputs without
  // input values, so the frontend folds them even when the input is not a constant.
  std::function<std::vector<Tensor>(const OpInferContext&)> fold_from_types;
  // "" for the default ONNX domain; otherwise the one domain the op is accepted from (for example
  // "com.microsoft" for onnxruntime's contrib ops). Op type names are unique across domains.
  std::string domain;
};

class OpRegistry {
 public:
  static const OpRegistry& global();  // filled by register_all_ops() on first use
  void add(OpDef def);
  // nullptr when the op type is unknown.
  const OpDef* find(const std::string& op_type) const;
  // nullptr when the op type is unknown or registered for another domain ("" and "ai.onnx" are
  // the default domain).
  const OpDef* find(const std::string& domain, const std::string& op_type) const;
  std::vector<const OpDef*> all() const;  // sorted by name

 private:
  std::map<std::string, OpDef> ops_;
};

// The types of eval-time inputs (nullptr for omitted ones), kept in `storage`: what make-config
// code written against OpInferContext::input_types needs at eval time.
std::vector<const TensorType*> input_types_of(const std::vector<const Tensor*>& inputs, std::vector<TensorType>& storage);

// auto_pad SAME_UPPER / SAME_LOWER along one spatial axis of a convolution or pooling window of
// `extent` (dilated kernel size) and `stride`, whose output extent is `out` (ceil(in / stride)):
// the padding that takes, split with the odd element after (UPPER) or before (LOWER).
struct AxisPads {
  int64_t before = 0, after = 0;
};
inline AxisPads same_auto_pads(int64_t in, int64_t out, int64_t stride, int64_t extent, bool upper) {
  const int64_t total = std::max<int64_t>(0, (out - 1) * stride + extent - in);
  const int64_t before = upper ? total / 2 : total - total / 2;
  return {before, total - before};
}

// Korch's channels-last form of Conv, ConvInteger, MaxPool and AveragePool (attribute
// channels_last = 1, written only by the layout pass, rewrite/channels_last.h): activations are
// [N, spatial.., C] instead of [N, C, spatial..].
inline bool channels_last_layout(const Attributes& attrs) { return attrs.get_int("channels_last", 0) != 0; }

// Looks up the op for `node` at `opset`; throws kUnsupported when unknown, registered for another
// domain than the node's, or (default domain) outside the implemented opset range.
const OpDef& lookup_op(const Node& node, int opset);

// Runs an op's inference / evaluation on concrete tensors (used by the interpreter, constant
// folding and tests). Errors carry no node context; callers add it.
std::vector<TensorType> infer_node(const Node& node, int opset, const std::vector<const TensorType*>& types,
                                   const std::vector<const Tensor*>& constants);
std::vector<Tensor> eval_node(const Node& node, int opset, const std::vector<const Tensor*>& inputs);
// infer_node for a node whose inputs are values of `g` (their recorded types and constants), at
// g.opset; `node` need not be in g.nodes yet.
std::vector<TensorType> infer_node(const Graph& g, const Node& node);

// "node 'conv1' (Conv, opset 17)" — the standard prefix of node-level errors.
std::string node_label(const Node& node, int opset);

void register_all_ops(OpRegistry& r);
// Families (src/ir/ops/*.cc).
void register_elementwise_ops(OpRegistry& r);  // unary/binary math, activations, compare, logic, Cast, Where, Clip
void register_linear_ops(OpRegistry& r);       // MatMul, Gemm, Conv, ConvTranspose, Einsum
void register_pool_ops(OpRegistry& r);         // MaxPool, AveragePool, Global*Pool, LpPool
void register_reduce_ops(OpRegistry& r);       // Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax, CumSum, TopK
void register_norm_ops(OpRegistry& r);         // Batch/Instance/Layer/Group normalization, LpNormalization
void register_layout_ops(OpRegistry& r);       // Reshape, Flatten, Transpose, (Un)Squeeze, Concat, Split, Slice,
                                               // Gather*, Expand, Tile, DepthToSpace, SpaceToDepth, Pad
void register_resize_ops(OpRegistry& r);       // Resize, Upsample
void register_misc_ops(OpRegistry& r);         // Constant, Identity, Dropout, Shape, Size, ConstantOfShape, Range,
                                               // EyeLike, Trilu, NonZero(const) ...
void register_rnn_ops(OpRegistry& r);          // LSTM, GRU, RNN
void register_quantized_rnn_ops(OpRegistry& r);  // DynamicQuantizeLSTM (com.microsoft)
void register_sampling_ops(OpRegistry& r);     // GridSample, AffineGrid, RoiAlign, MaxUnpool, CenterCropPad, Col2Im
void register_quant_ops(OpRegistry& r);        // QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
void register_quant_linear_ops(OpRegistry& r); // MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv

}  // namespace korch
