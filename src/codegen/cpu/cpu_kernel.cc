#include "codegen/cpu/cpu_kernel.h"

#include "codegen/cpu/cpu_compiler.h"
#include "codegen/cpu/cpu_linear.h"
#include "ir/dtype.h"
#include "ir/interpreter.h"
#include "ir/text_format.h"
#include "support/error.h"

#include <cstdlib>
#include <cstring>

namespace korch::cpu {

namespace {

nlohmann::json type_json(const TensorType& t) {
  return {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}};
}

TensorType type_from_json(const nlohmann::json& j) {
  TensorType t;
  auto d = dtype_from_name(j.at("dtype").get<std::string>());
  if (!d) fail("unknown dtype '{}' in a kernel recipe", j.at("dtype").get<std::string>());
  t.dtype = *d;
  t.shape = j.at("shape").get<Shape>();
  return t;
}

}  // namespace

nlohmann::json CpuKernelRecipe::to_json() const {
  nlohmann::json j;
  j["symbol"] = symbol;
  if (linear) j["linear"] = *linear;
  j["inputs"] = nlohmann::json::array();
  for (const auto& t : inputs) j["inputs"].push_back(type_json(t));
  j["outputs"] = nlohmann::json::array();
  for (const auto& t : outputs) j["outputs"].push_back(type_json(t));
  j["scratch_bytes"] = scratch_bytes;
  if (!reference_graph.empty()) j["reference_graph"] = reference_graph;
  return j;
}

CpuKernelRecipe CpuKernelRecipe::from_json(const nlohmann::json& j) {
  try {
    CpuKernelRecipe r;
    r.symbol = j.at("symbol").get<std::string>();
    if (j.contains("linear")) r.linear = j.at("linear");
    for (const auto& t : j.at("inputs")) r.inputs.push_back(type_from_json(t));
    for (const auto& t : j.at("outputs")) r.outputs.push_back(type_from_json(t));
    r.scratch_bytes = j.at("scratch_bytes").get<std::vector<int64_t>>();
    r.reference_graph = j.value("reference_graph", std::string());
    return r;
  } catch (const nlohmann::json::exception& e) {
    fail("malformed kernel recipe: {}", e.what());
  }
}

struct ReferenceStep {
  Graph graph;
};

CpuKernel::CpuKernel(CpuKernelRecipe recipe, std::shared_ptr<KernelLibrary> lib)
    : recipe_(std::move(recipe)), lib_(std::move(lib)) {
  if (!recipe_.reference_graph.empty()) {
    reference_ = std::make_unique<ReferenceStep>();
    reference_->graph = parse_graph(recipe_.reference_graph);
    if (reference_->graph.inputs.size() != recipe_.inputs.size() ||
        reference_->graph.outputs.size() != recipe_.outputs.size())
      fail("reference kernel: its graph has {} inputs / {} outputs, the recipe {} / {}", reference_->graph.inputs.size(),
           reference_->graph.outputs.size(), recipe_.inputs.size(), recipe_.outputs.size());
  }
  if (!recipe_.symbol.empty()) {
    if (!lib_) fail("kernel {} needs a kernel library", recipe_.symbol);
    fn_ = reinterpret_cast<LoopFn>(lib_->symbol(recipe_.symbol));
    if (!fn_) fail_io("kernel library {} has no symbol {}", lib_->path(), recipe_.symbol);
  }
  if (recipe_.linear) linear_ = LinearStep::create(*recipe_.linear);
  size_t n = recipe_.inputs.size() + recipe_.outputs.size();
  args_.assign(n, nullptr);
  for (int64_t bytes : recipe_.scratch_bytes) {
    // 64-byte aligned: vector loads and oneDNN like it.
    size_t size = (static_cast<size_t>(std::max<int64_t>(bytes, 64)) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, size);
    if (!p) fail_io("out of memory: {} bytes of kernel scratch", size);
    scratch_.emplace_back(p);
    args_.push_back(scratch_.back().get());
  }
}

CpuKernel::~CpuKernel() = default;

void CpuKernel::FreeDeleter::operator()(void* p) const { std::free(p); }

void CpuKernel::run(const void* const* inputs, void* const* outputs) {
  size_t ni = recipe_.inputs.size(), no = recipe_.outputs.size();
  for (size_t i = 0; i < ni; ++i) args_[i] = const_cast<void*>(inputs[i]);
  for (size_t i = 0; i < no; ++i) args_[ni + i] = outputs[i];
  if (reference_) {
    std::vector<Tensor> in;
    for (size_t i = 0; i < ni; ++i) {
      in.emplace_back(recipe_.inputs[i]);
      if (in.back().nbytes()) std::memcpy(in.back().raw(), inputs[i], in.back().nbytes());
    }
    std::vector<Tensor> out = interpret(reference_->graph, in);
    for (size_t i = 0; i < no; ++i)
      if (out[i].nbytes()) std::memcpy(outputs[i], out[i].raw(), out[i].nbytes());
    return;
  }
  if (linear_) linear_->run(args_.data());
  if (fn_) fn_(args_.data());
}

}  // namespace korch::cpu
