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

// Families.
void register_elementwise_fission(FissionRegistry& r);  // implicit broadcasting, Sum/Mean, Clip, PRelu...
void register_norm_fission(FissionRegistry& r);         // Softmax family, Layer/Instance/Group/Batch norm, LRN...
void register_reduce_fission(FissionRegistry& r);       // ReduceL1/L2/LogSum/..., global pools
void register_linear_fission(FissionRegistry& r);       // Gemm, Conv/ConvTranspose/MatMul bias and broadcasting
void register_layout_fission(FissionRegistry& r);       // Resize/Upsample, Dropout, ...

}  // namespace korch
