#include "codegen/cpu/cpu_backend.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "codegen/cpu/cpu_loop_emitter.h"
#include "codegen/kernel_parts.h"
#include "codegen/kernel_signature.h"
#include "codegen/rnn_match.h"
#include "runtime/cpu/cpu_linear_step.h"
#include "runtime/cpu/cpu_device.h"
#include "runtime/cpu/cpu_kernel.h"
#include "runtime/cpu/cpu_module.h"
#include "support/code_writer.h"

namespace korch::cpu {

namespace {

FusionRules cpu_fusion_rules() {
  FusionRules r;  // the defaults are oneDNN's epilogue rules
  r.name = "cpu: oneDNN post-ops";
  r.library_rnn = true;  // oneDNN's LSTM / GRU / RNN primitives
  return r;
}

}  // namespace

CpuBackend::CpuBackend(int threads) : threads_(threads), rules_(cpu_fusion_rules()) {}

CpuBackend::~CpuBackend() = default;

DeviceSpec CpuBackend::analytic_spec() const { return cpu_spec(); }

bool CpuBackend::prefers_channels_last() const { return dnnl_runs_channels_last(); }

EmittedKernel CpuBackend::emit(const Graph& g, const KernelCandidate& c, const std::string& variant) const {
  EmittedKernel k;
  if (!variant.empty()) {
    k.reason = "the CPU backend has one schedule per kernel, not '" + variant + "'";
    return k;
  }
  CpuKernelRecipe recipe;
  KernelParts parts = start_emit(g, c, rules_, k, recipe);
  if (!k.reason.empty()) return k;
  // A recurrent node is a oneDNN call only if oneDNN creates the primitive for it here; otherwise
  // it runs in the interpreter (with no other candidate for the node, a call that failed later,
  // at the correctness gate, would leave no plan at all).
  if (recipe.linear && is_rnn_op(recipe.linear->value("op", ""))) {
    try {
      (void)LinearStep::create(*recipe.linear);
    } catch (const Error&) {
      FusionRules interpreted = rules_;
      interpreted.library_rnn = false;
      k = EmittedKernel{};
      recipe = CpuKernelRecipe{};
      parts = start_emit(g, c, interpreted, k, recipe);
      if (!k.reason.empty()) return k;
    }
  }
  if (parts.loop) {
    recipe.symbol = "korch_k_" + k.hash;
    CodeWriter w;
    w.line("// " + std::to_string(c.nodes.size()) + " primitives; signature " + k.hash);
    emit_cpu_loop_kernel(*parts.loop, recipe.symbol, parts.loop_input_slots, parts.loop_output_slots,
                         parts.loop_first_scratch, w);
    k.source = w.take();
    k.entry = recipe.symbol;
  }
  k.ok = true;
  k.recipe = recipe.to_json();
  return k;
}

std::string CpuBackend::translation_unit(const std::vector<const EmittedKernel*>& kernels) const {
  std::string tu = cpu_prelude();
  std::set<std::string> seen;
  for (const EmittedKernel* k : kernels) {
    if (k->source.empty() || !seen.insert(k->entry).second) continue;
    tu += "\n" + k->source;
  }
  return tu;
}

std::vector<CompiledUnit> CpuBackend::compile(const std::vector<std::string>& units, runtime::Device& device,
                                              const std::function<void(bool cached)>& on_unit) {
  KORCH_CHECK(device.name() == "cpu", "the CPU backend compiles for the CPU, not {}", device.name());
  std::vector<CompiledUnit> out;
  for (CompiledLibrary& lib : compile_libraries(units, default_cpu_compiler(), on_unit))
    out.push_back({lib.source_path, lib.cached, std::make_shared<CpuModule>(lib.library)});
  return out;
}

runtime::Device* CpuBackend::timing_device() {
  if (!device_) device_ = std::make_unique<CpuDevice>(threads_);
  return device_.get();
}

nlohmann::json CpuBackend::write_module(const std::string& dir, const std::vector<const EmittedKernel*>& kernels) {
  // kernels.cc: each loop function once (kernels with one signature share one symbol).
  std::string source = cpu_prelude() + "\n";
  std::map<std::string, const std::string*> functions;
  for (const EmittedKernel* k : kernels) {
    if (k->entry.empty()) continue;
    auto [it, fresh] = functions.emplace(k->entry, &k->source);
    KORCH_CHECK(fresh || *it->second == k->source, "two different functions named {}:\n{}\n---\n{}", k->entry,
                *it->second, k->source);
    if (fresh) source += k->source + "\n";
  }
  nlohmann::json m;
  m["generator_version"] = kCpuGeneratorVersion;
  m["compiler"] = write_cpu_module(dir, source, !functions.empty(), default_cpu_compiler());
  return m;
}

}  // namespace korch::cpu
