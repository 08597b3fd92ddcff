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

// The schedules of a oneDNN convolution (schedule_variants): oneDNN's direct kernels (the default)
// and, for a 3x3 stride-1 convolution, its Winograd kernels, 2.5-2.9x faster on this EPYC
// (avx512_core, 2 threads: 64 -> 64 channels at 208x208 13.8 -> 5.0 ms, 512 -> 512 at 26x26
// 13.3 -> 5.2 ms) before the reorders to and from their blocked layout, and rounding differently
// (a Winograd step is checked against the reference like any other kernel before it is timed).
constexpr const char* kDirect = "direct";
constexpr const char* kWinograd = "winograd";

// A 2-D float convolution of 3x3 windows, stride 1, no dilation, one group (what oneDNN's
// Winograd kernels take), from its linear-step description.
bool winograd_shape(const nlohmann::json& d) {
  if (d.value("op", "") != "Conv" || d.contains("dtypes")) return false;
  const auto wei = d.at("weights_dims").get<std::vector<int64_t>>();
  const nlohmann::json& c = d.at("conv");
  auto all = [](const nlohmann::json& a, int64_t v) {
    return std::all_of(a.begin(), a.end(), [&](const nlohmann::json& x) { return x.get<int64_t>() == v; });
  };
  return wei.size() == 4 && wei[2] == 3 && wei[3] == 3 && all(c.at("strides"), 1) && all(c.at("dilations"), 0) &&
         c.at("group").get<int64_t>() == 1;
}

}  // namespace

CpuBackend::CpuBackend(int threads, bool flush_denormals)
    : threads_(threads), flush_denormals_(flush_denormals), rules_(cpu_fusion_rules()) {}

CpuBackend::~CpuBackend() = default;

DeviceSpec CpuBackend::analytic_spec() const { return cpu_spec(); }

bool CpuBackend::prefers_channels_last() const { return dnnl_runs_channels_last(); }

std::string CpuBackend::step_revision(const Graph& g, const KernelCandidate& c) const {
  const auto tag = [](const char* step, int revision) {
    return revision == 0 ? std::string() : fmt::format("|{} step r{}", step, revision);
  };
  for (NodeId n : c.nodes)
    if (is_rnn_op(g.nodes[static_cast<size_t>(n)].op_type)) return tag("recurrent", kCpuRecurrentStepRevision);
  return c.linear > 0 ? tag("linear", kCpuLinearStepRevision) : "";
}

int CpuBackend::measured_generator(const Graph& g, const KernelCandidate& c) const {
  return runs_library_call_alone(g, c, rules_) ? 0 : generator_version();
}

EmittedKernel CpuBackend::emit(const Graph& g, const KernelCandidate& c, const std::string& variant) const {
  EmittedKernel k;
  if (!variant.empty() && variant != kDirect && variant != kWinograd) {
    k.reason = fmt::format("the CPU backend's schedules are '{}' and '{}', not '{}'", kDirect, kWinograd, variant);
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
  if (variant == kWinograd) {
    if (!recipe.linear || !winograd_shape(*recipe.linear)) {
      k = EmittedKernel{};
      k.reason = "schedule 'winograd' is for a kernel with a 3x3 stride-1 convolution of one group";
      return k;
    }
    (*recipe.linear)["conv"]["algorithm"] = kWinograd;
  }
  k.variant = variant;
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

std::vector<std::string> CpuBackend::schedule_variants(const Graph& g, const KernelCandidate& c) const {
  const bool has_conv =
      std::any_of(c.nodes.begin(), c.nodes.end(), [&](NodeId id) { return g.nodes[static_cast<size_t>(id)].op_type == "Conv"; });
  if (!has_conv) return {};
  const EmittedKernel k = emit(g, c, kWinograd);
  if (!k.ok) return {};
  try {  // only where oneDNN has a Winograd kernel for it (its channels, its post-ops)
    (void)LinearStep::create(CpuKernelRecipe::from_json(k.recipe).linear.value());
  } catch (const Error&) {
    return {};
  }
  return {kDirect, kWinograd};
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
  if (!device_) device_ = std::make_unique<CpuDevice>(threads_, flush_denormals_);
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
