#include "ir/primitive.h"

#include <set>

#include "ir/dtype.h"

namespace korch {

namespace {

const std::set<std::string>& elementwise_ops() {
  static const std::set<std::string> s = {
      "Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "Tan",
      "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Erf", "Relu", "Sigmoid", "Tanh",
      "LeakyRelu", "Elu", "Selu", "Celu", "ThresholdedRelu", "HardSigmoid", "HardSwish", "Mish", "Softplus",
      "Softsign", "Gelu", "Shrink", "IsNaN", "IsInf", "Not", "Cast", "CastLike", "Add", "Sub", "Mul", "Div", "Pow",
      "Mod", "Max", "Min", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Where",
      "PRelu", "Clip", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "Sum", "Mean",
      "QuantizeLinear", "DequantizeLinear"};
  return s;
}
const std::set<std::string>& reduce_ops() {
  static const std::set<std::string> s = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                                          "ArgMax",    "ArgMin",     "MaxPool",   "AveragePool", "LpPool"};
  return s;
}
const std::set<std::string>& layout_ops() {
  static const std::set<std::string> s = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Slice",
                                          "Concat", "Split", "Pad", "DepthToSpace", "SpaceToDepth", "Tile",
                                          "Identity", "ReverseSequence", "CenterCropPad"};
  return s;
}
const std::set<std::string>& linear_ops() {
  static const std::set<std::string> s = {"MatMul", "Conv", "ConvTranspose", "Einsum", "MatMulInteger", "ConvInteger"};
  return s;
}
// Operators that fission must split (they are not primitives under any shape condition).
const std::set<std::string>& composite_ops() {
  static const std::set<std::string> s = {
      "Softmax", "LogSoftmax", "Hardmax", "LayerNormalization", "InstanceNormalization", "GroupNormalization",
      "BatchNormalization", "LpNormalization", "MeanVarianceNormalization", "LRN", "Gemm", "ReduceL1", "ReduceL2",
      "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool",
      "Resize", "Upsample", "Dropout", "Constant", "Shape", "Size", "ConstantOfShape", "Range",
      "DynamicQuantizeLinear", "QLinearConv", "QLinearMatMul"};
  return s;
}

bool operands_match_output(const Graph& g, const Node& n) {
  if (n.outputs.empty() || n.outputs[0] == kNoValue) return false;
  const Shape& out = g.type(n.outputs[0]).shape;
  for (ValueId v : n.inputs) {
    if (v == kNoValue) continue;
    const Value& val = g.value(v);
    if (val.type.shape == out) continue;
    if (val.is_constant() && val.type.numel() == 1) continue;  // scalar constant: part of the expression
    return false;
  }
  return true;
}

// QuantizeLinear / DequantizeLinear per tensor (scalar constant scale and zero point) between
// float32 and 8/16-bit integers: one elementwise expression in the loop kernels. Other layouts and
// types are operators (fission/quant.cc splits or keeps them), and so are quantized constants
// (weights), which fission folds.
bool quantize_elementwise(const Graph& g, const Node& n) {
  if (!operands_match_output(g, n) || n.attrs.get_int("block_size", 0) > 0 || n.inputs.size() < 2) return false;
  bool all_constant = true;
  for (ValueId v : n.inputs) all_constant &= v == kNoValue || g.value(v).is_constant();
  const DType x = g.type(n.inputs[0]).dtype, y = g.type(n.outputs[0]).dtype, s = g.type(n.inputs[1]).dtype;
  if (all_constant || s != DType::kFloat32 || !g.value(n.inputs[1]).is_constant()) return false;
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue && !g.value(n.inputs[2]).is_constant()) return false;
  return n.op_type == "QuantizeLinear" ? x == DType::kFloat32 && quantized_range(y) : quantized_range(x) && y == DType::kFloat32;
}

}  // namespace

bool weight_zero_point_is_zero(const Graph& g, const Node& n) {
  if (n.inputs.size() < 4 || n.inputs[3] == kNoValue) return true;
  const Value& zp = g.value(n.inputs[3]);
  if (!zp.is_constant()) return false;
  for (int64_t v : zp.constant->to_int_vector())
    if (v != 0) return false;
  return true;
}

const std::set<std::string>& elementwise_primitive_ops() { return elementwise_ops(); }

const char* primitive_kind_name(PrimitiveKind k) {
  switch (k) {
    case PrimitiveKind::kElementwise: return "elementwise";
    case PrimitiveKind::kBroadcast: return "broadcast";
    case PrimitiveKind::kReduce: return "reduce";
    case PrimitiveKind::kLayout: return "layout";
    case PrimitiveKind::kLinear: return "linear";
    case PrimitiveKind::kOpaque: return "opaque";
    case PrimitiveKind::kOperator: return "operator";
  }
  return "?";
}

bool separable_max_pool(const Graph& g, const Node& n) {
  if (n.op_type != "MaxPool" || n.inputs.empty() || n.inputs[0] == kNoValue || n.outputs.empty()) return false;
  if (n.outputs.size() > 1 && n.outputs[1] != kNoValue) return false;  // Indices: one 2-D argmax
  const std::string ap = n.attrs.get_string("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID" && !ap.empty()) return false;
  const Shape& x = g.type(n.inputs[0]).shape;
  const Shape& y = g.type(n.outputs[0]).shape;
  if (x.size() != 4 || y.size() != 4) return false;
  const std::vector<int64_t> k = n.attrs.get_ints("kernel_shape");
  if (k.size() != 2 || k[0] < 2 || k[1] < 2) return false;
  const int64_t oh = y[2], ow = y[3], w = x[3];
  return 2 * (k[0] * oh * w + k[1] * oh * ow) <= k[0] * k[1] * oh * ow;
}

bool patch_conv_transpose(const Attributes& a, const TensorType& xt, const Shape& w) {
  const Shape& x = xt.shape;
  const size_t spatial = x.size() >= 3 ? x.size() - 2 : 0;
  if (spatial == 0 || w.size() != x.size() || a.get_int("group", 1) != 1 || !is_float(xt.dtype)) return false;
  const std::string ap = a.get_string("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "VALID" && !ap.empty()) return false;
  const std::vector<int64_t> strides = a.get_ints("strides"), dil = a.get_ints("dilations");
  const std::vector<int64_t> out_shape = a.get_ints("output_shape");
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t k = w[2 + i];
    if ((strides.size() > i ? strides[i] : 1) != k || (dil.size() > i ? dil[i] : 1) != 1) return false;
    // output_shape, when given, must be the tiling itself (it would otherwise imply padding).
    if (!out_shape.empty() && out_shape[out_shape.size() - spatial + i] != x[2 + i] * k) return false;
  }
  for (int64_t v : a.get_ints("pads"))
    if (v != 0) return false;
  for (int64_t v : a.get_ints("output_padding"))
    if (v != 0) return false;
  return true;
}

bool patch_conv_transpose(const Graph& g, const Node& n) {
  if (n.op_type != "ConvTranspose" || n.inputs.size() < 2 || n.inputs[0] == kNoValue || n.inputs[1] == kNoValue)
    return false;
  return patch_conv_transpose(n.attrs, g.type(n.inputs[0]), g.type(n.inputs[1]).shape);
}

PrimitiveKind primitive_kind(const Graph& g, const Node& n) {
  const std::string& op = n.op_type;
  if (separable_max_pool(g, n) || patch_conv_transpose(g, n)) return PrimitiveKind::kOperator;
  if (op == "QuantizeLinear" || op == "DequantizeLinear")
    return quantize_elementwise(g, n) ? PrimitiveKind::kElementwise : PrimitiveKind::kOperator;
  if (elementwise_ops().count(op))
    return operands_match_output(g, n) ? PrimitiveKind::kElementwise : PrimitiveKind::kOperator;
  if (op == "Expand") return PrimitiveKind::kBroadcast;
  if (reduce_ops().count(op)) return PrimitiveKind::kReduce;
  if (layout_ops().count(op)) return PrimitiveKind::kLayout;
  if (op == "Gather" || op == "GatherElements" || op == "GatherND" || op == "Compress") {
    // Index remapping when the indices are known at compile time.
    bool const_indices = n.inputs.size() > 1 && n.inputs[1] != kNoValue && g.value(n.inputs[1]).is_constant();
    return const_indices ? PrimitiveKind::kLayout : PrimitiveKind::kOpaque;
  }
  if (linear_ops().count(op)) {
    // A bias makes Conv/ConvTranspose affine, not linear: fission splits off the bias Add.
    bool bias = (op == "Conv" || op == "ConvTranspose") && n.inputs.size() > 2 && n.inputs[2] != kNoValue;
    // ConvInteger / MatMulInteger are linear in (x - x_zero_point) and w; a nonzero weight zero
    // point makes them operators: fission folds it into constant weights.
    if (op == "ConvInteger" || op == "MatMulInteger") return weight_zero_point_is_zero(g, n) ? PrimitiveKind::kLinear
                                                                                            : PrimitiveKind::kOperator;
    return bias ? PrimitiveKind::kOperator : PrimitiveKind::kLinear;
  }
  if (composite_ops().count(op)) return PrimitiveKind::kOperator;
  return PrimitiveKind::kOpaque;
}

std::map<std::string, int> primitive_counts(const Graph& g) {
  std::map<std::string, int> counts;
  for (const Node& n : g.nodes) counts[primitive_kind_name(primitive_kind(g, n))]++;
  return counts;
}

}  // namespace korch
