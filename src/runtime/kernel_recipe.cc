#include "runtime/kernel_recipe.h"

#include <cstring>

#include "ir/dtype.h"
#include "ir/interpreter.h"
#include "ir/text_format.h"
#include "support/error.h"

namespace korch::runtime {

nlohmann::json tensor_type_json(const TensorType& t) {
  return {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}};
}

TensorType tensor_type_from_json(const nlohmann::json& j) {
  TensorType t;
  auto d = dtype_from_name(j.at("dtype").get<std::string>());
  if (!d) fail("unknown dtype '{}' in a kernel recipe", j.at("dtype").get<std::string>());
  t.dtype = *d;
  t.shape = j.at("shape").get<Shape>();
  return t;
}

void KernelRecipeBase::write_json(nlohmann::json& j) const {
  if (linear) j["linear"] = *linear;
  j["inputs"] = nlohmann::json::array();
  for (const auto& t : inputs) j["inputs"].push_back(tensor_type_json(t));
  j["outputs"] = nlohmann::json::array();
  for (const auto& t : outputs) j["outputs"].push_back(tensor_type_json(t));
  j["scratch_bytes"] = scratch_bytes;
  if (!reference_graph.empty()) j["reference_graph"] = reference_graph;
  if (!in_place.empty()) j["in_place"] = in_place;
}

void KernelRecipeBase::read_json(const nlohmann::json& j) {
  try {
    inputs.clear();
    outputs.clear();
    for (const auto& t : j.at("inputs")) inputs.push_back(tensor_type_from_json(t));
    for (const auto& t : j.at("outputs")) outputs.push_back(tensor_type_from_json(t));
    scratch_bytes = j.at("scratch_bytes").get<std::vector<int64_t>>();
    for (int64_t b : scratch_bytes)
      if (b < 0) fail("negative scratch size in a kernel recipe");
    linear.reset();
    if (j.contains("linear")) linear = j.at("linear");
    reference_graph = j.value("reference_graph", std::string());
    in_place = j.value("in_place", std::vector<int64_t>());
  } catch (const nlohmann::json::exception& e) {
    fail("malformed kernel recipe: {}", e.what());
  }
}

InPlaceStep::InPlaceStep(const KernelRecipeBase& r) : offsets_(r.in_place) {
  if (r.outputs.size() != 1 || r.inputs.size() != offsets_.size())
    fail("in-place recipe: {} offsets for {} inputs and {} outputs (one wanted)", offsets_.size(), r.inputs.size(),
         r.outputs.size());
  for (size_t i = 0; i < offsets_.size(); ++i) {
    bytes_.push_back(r.inputs[i].byte_size());
    if (offsets_[i] < 0 || offsets_[i] + bytes_[i] > r.outputs[0].byte_size())
      fail("in-place recipe: input {} ({} bytes at offset {}) does not fit the {}-byte output", i, bytes_[i],
           offsets_[i], r.outputs[0].byte_size());
  }
}

void InPlaceStep::run_on_host(const void* const* inputs, void* const* outputs) const {
  run(inputs, outputs, [](void* to, const void* from, int64_t n) { std::memcpy(to, from, static_cast<size_t>(n)); });
}

ReferenceStep::ReferenceStep(const std::string& graph_text, const KernelRecipeBase& io)
    : graph_(parse_graph(graph_text)), inputs_(io.inputs), outputs_(io.outputs) {
  if (graph_.inputs.size() != inputs_.size() || graph_.outputs.size() != outputs_.size())
    fail("reference kernel: its graph has {} inputs / {} outputs, the recipe {} / {}", graph_.inputs.size(),
         graph_.outputs.size(), inputs_.size(), outputs_.size());
}

void ReferenceStep::run(const void* const* inputs, void* const* outputs) const {
  std::vector<Tensor> in;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    in.emplace_back(inputs_[i]);
    if (in.back().nbytes()) std::memcpy(in.back().raw(), inputs[i], in.back().nbytes());
  }
  std::vector<Tensor> out = interpret(graph_, in);
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (out[i].nbytes()) std::memcpy(outputs[i], out[i].raw(), out[i].nbytes());
}

}  // namespace korch::runtime
