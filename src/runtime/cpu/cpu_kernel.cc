#include "runtime/cpu/cpu_kernel.h"

#include <cstdlib>
#include <cstring>

#include "runtime/cpu/cpu_linear_step.h"
#include "runtime/kernel_recipe.h"
#include "support/error.h"
#include "support/shared_library.h"

namespace korch::cpu {

nlohmann::json CpuKernelRecipe::to_json() const {
  nlohmann::json j;
  j["symbol"] = symbol;
  write_json(j);
  return j;
}

CpuKernelRecipe CpuKernelRecipe::from_json(const nlohmann::json& j) {
  try {
    CpuKernelRecipe r;
    r.symbol = j.at("symbol").get<std::string>();
    r.read_json(j);
    return r;
  } catch (const nlohmann::json::exception& e) {
    fail("malformed kernel recipe: {}", e.what());
  }
}

CpuKernel::CpuKernel(CpuKernelRecipe recipe, std::shared_ptr<SharedLibrary> lib)
    : recipe_(std::move(recipe)), lib_(std::move(lib)) {
  if (!recipe_.reference_graph.empty())
    reference_ = std::make_unique<runtime::ReferenceStep>(recipe_.reference_graph, recipe_);
  if (!recipe_.in_place.empty()) in_place_ = std::make_unique<runtime::InPlaceStep>(recipe_);
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

runtime::ReorderStats CpuKernel::reorders_per_run() const { return linear_ ? linear_->reorders_per_run() : runtime::ReorderStats{}; }

std::vector<std::pair<const void*, int64_t>> CpuKernel::constant_copies() const {
  return linear_ ? linear_->constant_copies() : std::vector<std::pair<const void*, int64_t>>{};
}

void CpuKernel::FreeDeleter::operator()(void* p) const { std::free(p); }

void CpuKernel::run(const void* const* inputs, void* const* outputs) {
  if (reference_) {
    reference_->run(inputs, outputs);
    return;
  }
  if (in_place_) {
    in_place_->run_on_host(inputs, outputs);
    return;
  }
  size_t ni = recipe_.inputs.size(), no = recipe_.outputs.size();
  for (size_t i = 0; i < ni; ++i) args_[i] = const_cast<void*>(inputs[i]);
  for (size_t i = 0; i < no; ++i) args_[ni + i] = outputs[i];
  if (linear_) linear_->run(args_.data());
  if (fn_) fn_(args_.data());
}

}  // namespace korch::cpu
