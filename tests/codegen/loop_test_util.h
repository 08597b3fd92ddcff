// Shared by the loop-kernel tests: a tiny graph builder (types from the op registry's shape
// inference) and a runner that builds every case's loop kernel, emits all of them into a few
// translation units, compiles them in one go and compares each with the reference interpreter.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "orchestrate/kernel_candidate.h"

namespace korch::testing {

class GraphBuilder {
 public:
  explicit GraphBuilder(int opset = 20) { g_.opset = opset; }
  ValueId input(const std::string& name, DType t, Shape s) { return g_.add_input(name, TensorType{t, std::move(s)}); }
  ValueId f32(const std::string& name, Shape s) { return input(name, DType::kFloat32, std::move(s)); }
  ValueId constant(Tensor t);
  ValueId ints(std::vector<int64_t> v) { return constant(Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())})); }
  ValueId scalar(float v) { return constant(Tensor::scalar<float>(v)); }
  // Adds a node; output types come from shape inference. Returns its outputs.
  std::vector<ValueId> node_n(const std::string& op, std::vector<ValueId> inputs, Attributes attrs, int num_outputs,
                              const std::string& domain = "");
  ValueId node(const std::string& op, std::vector<ValueId> inputs, Attributes attrs = {}) {
    return node_n(op, std::move(inputs), std::move(attrs), 1)[0];
  }
  // Reduce* with axes as an input (opset >= 18); empty axes reduce everything.
  ValueId reduce(const std::string& op, ValueId x, std::vector<int64_t> axes, int64_t keepdims = 1) {
    std::vector<ValueId> in{x};
    if (!axes.empty()) in.push_back(ints(std::move(axes)));
    Attributes a;
    a.set("keepdims", keepdims);
    return node(op, std::move(in), std::move(a));
  }
  // Marks graph outputs and returns the graph (all nodes form the kernel).
  Graph finish(std::vector<ValueId> outputs);

 private:
  Graph g_;
  int counter_ = 0;
};

Attributes attrs(std::initializer_list<std::pair<const char*, AttrValue>> list);

struct LoopCase {
  std::string name;
  std::shared_ptr<const Graph> g;  // shared: a model sweep has thousands of cases on one graph
  KernelCandidate c;
};

// A case computing all of g's nodes with g's outputs as kernel outputs.
LoopCase whole_graph_case(std::string name, Graph g);

struct LoopCaseResult {
  std::string name;
  bool built = false;     // build_loop_kernel produced a kernel
  std::string reason;     // why not
  bool ok = false;        // matched the reference within tolerance
  std::string message;
};

// "" when `out` matches `ref` within 1e-4 relative L2 (NaN/Inf positions must agree exactly),
// else what differs.
std::string compare_to_reference(const Tensor& out, const Tensor& ref);

// Builds, emits (batch_size functions per translation unit), compiles and runs every case on
// seeded random inputs, comparing with interpret(kernel_subgraph(...)) at 1e-4 relative L2.
std::vector<LoopCaseResult> run_loop_cases(const std::vector<LoopCase>& cases, size_t batch_size = 200);

// Every candidate of `g` (enumerate_candidates, default options) without a linear primitive.
std::vector<LoopCase> candidate_cases(std::shared_ptr<const Graph> g, const std::string& prefix);

// Counts and the first failures, for a readable test message.
std::string summarize(const std::vector<LoopCaseResult>& results, int* built, int* passed);

}  // namespace korch::testing
