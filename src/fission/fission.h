// Operator fission: op graph -> primitive graph (see ir/primitive.h for the primitive kinds).
//
// Before: a graph from the frontend (typed, folded, verified).
// After:  the same function; every node is a primitive (elementwise, broadcast, reduce, layout,
//         linear) or opaque. Operators without a fission rule are kept whole as opaque nodes and
//         listed in the report. Graph input/output names are unchanged.
//
// Rules live in one file per operator family (src/fission/*.cc) and register through
// register_<family>_fission(). A rule receives the node and its inputs already mapped into the
// output graph and returns the output value ids (one per node output; kNoValue for an omitted
// optional output).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fission/fission_builder.h"

namespace korch {

using FissionRule = std::function<std::vector<ValueId>(FissionBuilder& b, const Node& node,
                                                       const std::vector<ValueId>& inputs)>;

class FissionRegistry {
 public:
  static const FissionRegistry& global();
  void add(const std::string& op_type, FissionRule rule);
  const FissionRule* find(const std::string& op_type) const;
  std::vector<std::string> op_types() const;

 private:
  std::map<std::string, FissionRule> rules_;
};

struct FissionReport {
  int operators_in = 0;
  int primitives_out = 0;
  std::map<std::string, int> kept_opaque;  // op type -> count of operators without a rule
};

Graph fission(const Graph& g, FissionReport* report = nullptr);

// Conv / MatMul / Gemm whose activation is DequantizeLinear(int8 x) and whose weights are
// DequantizeLinear(constant int8 w) (the QDQ format of onnxruntime's quantizer) as an integer
// linear primitive on x and w plus one rescaling: Cast(ConvInteger(x, w, x_zero_point), f32) *
// (x_scale * w_scale) + bias. What onnxruntime and OpenVINO run for such a graph; the float
// graph's rounding differs (the integer sum is exact), so results move by float32 rounding, which
// a later QuantizeLinear can turn into one quantum. `mapped` maps an input-graph value into b's
// graph. nullopt: not that pattern (fission/quant.cc).
std::optional<std::vector<ValueId>> integer_linear_from_qdq(FissionBuilder& b, const Graph& g, const Node& n,
                                                           const std::function<ValueId(ValueId)>& mapped);

// Families.
void register_elementwise_fission(FissionRegistry& r);  // implicit broadcasting, Sum/Mean, Clip, PRelu...
void register_norm_fission(FissionRegistry& r);         // Softmax family, Layer/Instance/Group/Batch norm, LRN...
void register_reduce_fission(FissionRegistry& r);       // ReduceL1/L2/LogSum/..., global pools
void register_linear_fission(FissionRegistry& r);       // Gemm, Conv/ConvTranspose/MatMul bias and broadcasting
void register_layout_fission(FissionRegistry& r);       // Resize/Upsample, Dropout, ...
void register_quant_fission(FissionRegistry& r);        // Quantize/DequantizeLinear, QLinearConv, ConvInteger...

}  // namespace korch
