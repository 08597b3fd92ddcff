#include "pipeline/micro_batch.h"

#include <fmt/format.h>

#include <cstring>
#include <set>

#include "frontend/shape_inference.h"
#include "ir/interpreter.h"
#include "ir/random.h"
#include "ir/tensor_compare.h"
#include "support/error.h"

namespace korch {

namespace {

// Sample `i` of a tensor whose leading dimension holds the samples.
Tensor sample(const Tensor& t, int64_t i, int64_t batches) {
  Shape s = t.shape();
  s[0] = 1;
  Tensor out(t.dtype(), s);
  const size_t bytes = t.nbytes() / static_cast<size_t>(batches);
  std::memcpy(out.raw(), t.raw() + static_cast<size_t>(i) * bytes, bytes);
  return out;
}

}  // namespace

BatchSplit split_batch(const Graph& model, uint64_t seed) {
  BatchSplit r;
  if (model.inputs.empty()) {
    r.why_not = "the model has no inputs";
    return r;
  }
  const auto leading = [&](ValueId v) -> int64_t {
    const Shape& s = model.type(v).shape;
    return s.empty() ? -1 : s[0];
  };
  const int64_t n = leading(model.inputs[0]);
  for (ValueId v : model.inputs)
    if (leading(v) != n || n <= 1) {
      r.why_not = n <= 1 ? fmt::format("input '{}' has no batch above 1", model.value(v).name)
                         : "the inputs do not share a leading (batch) dimension";
      return r;
    }
  for (ValueId v : model.outputs)
    if (leading(v) != n) {
      r.why_not = fmt::format("output '{}' ({}) does not lead with the batch of {}", model.value(v).name,
                              type_str(model.type(v)), n);
      return r;
    }
  r.batches = n;

  // The same graph at batch 1: inputs re-typed, every computed value's type inferred again.
  Graph g = model;
  g.name = model.name + " at batch 1";
  for (ValueId v : g.inputs) g.value(v).type.shape[0] = 1;
  for (Node& node : g.nodes) {
    for (ValueId v : node.outputs)
      if (v != kNoValue) g.value(v).type = {};
    if (node.op_type != "Reshape" || node.inputs.size() < 2) continue;
    const Value& target = g.value(node.inputs[1]);
    if (!target.is_constant() || target.constant->dtype() != DType::kInt64 || target.constant->numel() == 0 ||
        model.type(node.inputs[0]).shape.empty() || model.type(node.inputs[0]).shape[0] != n ||
        target.constant->data<int64_t>()[0] != n)
      continue;
    Tensor one = target.constant->clone();  // copies share their data
    one.data<int64_t>()[0] = 1;
    node.inputs[1] = g.add_constant(target.name + "/batch1", std::move(one));
  }
  try {
    infer_shapes_and_fold(g, g.name);
  } catch (const Error& e) {
    r.why_not = fmt::format("its shapes do not follow the batch ({})", e.what());
    return r;
  }
  g.remove_dead_code();  // the Reshape targets replaced above
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    Shape want = model.type(model.outputs[o]).shape;
    want[0] = 1;
    if (g.type(g.outputs[o]).shape != want) {
      r.why_not = fmt::format("output '{}' is {} at batch 1, not {}", model.value(model.outputs[o]).name,
                              type_str(g.type(g.outputs[o])), shape_str(want));
      return r;
    }
  }

  // The same function: the whole batch against each sample alone, on the reference interpreter.
  const std::vector<Tensor> inputs = random_inputs(model, seed);
  std::vector<Tensor> whole;
  try {
    whole = interpret(model, inputs);
  } catch (const Error& e) {
    r.why_not = fmt::format("the reference interpreter cannot run it ({})", e.what());
    return r;
  }
  // A few samples (the first, the last, two between) alone: mixing shows in every sample it touches.
  for (int64_t i : std::set<int64_t>{0, n / 3, 2 * n / 3, n - 1}) {
    std::vector<Tensor> in;
    for (const Tensor& t : inputs) in.push_back(sample(t, i, n));
    std::vector<Tensor> out;
    try {
      out = interpret(g, in);
    } catch (const Error& e) {
      r.why_not = fmt::format("its batch-1 graph does not run ({})", e.what());
      return r;
    }
    for (size_t o = 0; o < out.size(); ++o) {
      const std::string diff = rel_l2_diff(out[o], sample(whole[o], i, n), 1e-5);
      if (!diff.empty()) {
        r.why_not = fmt::format(
            "its samples are not independent: output '{}' of sample {} differs when computed "
            "alone ({})",
            model.value(model.outputs[o]).name, i, diff);
        return r;
      }
    }
  }
  r.one = std::move(g);
  return r;
}

}  // namespace korch
