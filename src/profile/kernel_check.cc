#include "profile/kernel_check.h"

#include <fmt/format.h>

#include "ir/interpreter.h"
#include "ir/random.h"
#include "ir/tensor_compare.h"

namespace korch {

std::vector<Tensor> reference_values(const Graph& g, uint64_t seed) {
  std::vector<Tensor> values(g.values.size());
  std::vector<Tensor> inputs = random_inputs(g, seed);
  for (size_t i = 0; i < g.inputs.size(); ++i) values[static_cast<size_t>(g.inputs[i])] = inputs[i];
  InterpreterOptions io;
  io.on_node = [&](NodeId n, const std::vector<Tensor>& outs) {
    const Node& node = g.nodes[static_cast<size_t>(n)];
    for (size_t o = 0; o < outs.size() && o < node.outputs.size(); ++o)
      if (node.outputs[o] != kNoValue) values[static_cast<size_t>(node.outputs[o])] = outs[o];
  };
  interpret(g, inputs, io);
  for (size_t v = 0; v < g.values.size(); ++v)
    if (g.values[v].is_constant()) values[v] = *g.values[v].constant;
  return values;
}

int64_t constant_input_bytes(const Graph& g, const std::vector<ValueId>& arg_inputs) {
  int64_t bytes = 0;
  for (ValueId v : arg_inputs)
    if (g.value(v).is_constant()) bytes += static_cast<int64_t>(g.value(v).constant->nbytes());
  return bytes;
}

KernelProbe::KernelProbe(runtime::Device& device, runtime::DeviceKernel& kernel, const EmittedKernel& k, const Graph& g,
                         const std::vector<Tensor>& values, bool cold_constants)
    : dev_(device), kernel_(kernel), k_(k), g_(g), values_(values) {
  for (ValueId v : k.arg_inputs) {
    const Tensor& t = values[static_cast<size_t>(v)];
    if (dev_.host_memory()) {
      in_.push_back(t.raw());
    } else {
      void* p = dev_.alloc(static_cast<int64_t>(t.nbytes()));
      owned_.push_back(p);
      dev_.upload(p, t.raw(), static_cast<int64_t>(t.nbytes()));
      in_.push_back(p);
    }
    if (cold_constants && g.value(v).is_constant())
      constants_.emplace_back(in_.back(), static_cast<int64_t>(t.nbytes()));
  }
  for (ValueId v : k.outputs) {
    host_out_.emplace_back(g.type(v));
    if (dev_.host_memory()) {
      out_.push_back(host_out_.back().raw());
    } else {
      void* p = dev_.alloc(static_cast<int64_t>(host_out_.back().nbytes()));
      owned_.push_back(p);
      out_.push_back(p);
    }
  }
}

KernelProbe::~KernelProbe() {
  for (void* p : owned_) dev_.free(p);
}

void KernelProbe::run() { kernel_.run(in_.data(), out_.data()); }

void KernelProbe::evict_constants() {
  if (constants_.empty()) return;
  for (const auto& [data, bytes] : constants_) dev_.evict(data, bytes);
  for (const auto& [data, bytes] : kernel_.constant_copies()) dev_.evict(data, bytes);
}

std::string KernelProbe::check(double tolerance) {
  run();
  if (!dev_.host_memory())
    for (size_t o = 0; o < host_out_.size(); ++o)
      dev_.download(host_out_[o].raw(), out_[o], static_cast<int64_t>(host_out_[o].nbytes()));
  dev_.synchronize();
  for (size_t o = 0; o < host_out_.size(); ++o) {
    std::string d = rel_l2_diff(host_out_[o], values_[static_cast<size_t>(k_.outputs[o])], tolerance);
    if (!d.empty()) return fmt::format("output '{}': {}", g_.value(k_.outputs[o]).name, d);
  }
  return "";
}

CompiledKernels compile_kernels(Backend& backend, runtime::Device& device, const std::vector<const EmittedKernel*>& kernels,
                                int per_unit, const std::function<void(bool cached)>& on_unit) {
  CompiledKernels out;
  out.module.resize(kernels.size());
  out.source_path.resize(kernels.size());
  out.error.resize(kernels.size());
  std::vector<std::vector<size_t>> units;
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (kernels[i]->source.empty()) continue;  // a library call or a reference op alone
    if (units.empty() || units.back().size() >= static_cast<size_t>(std::max(per_unit, 1))) units.emplace_back();
    units.back().push_back(i);
  }
  auto unit_source = [&](const std::vector<size_t>& u) {
    std::vector<const EmittedKernel*> ks;
    for (size_t i : u) ks.push_back(kernels[i]);
    return backend.translation_unit(ks);
  };
  std::vector<std::string> sources;
  for (const auto& u : units) sources.push_back(unit_source(u));
  try {
    std::vector<CompiledUnit> compiled = backend.compile(sources, device, on_unit);
    for (size_t u = 0; u < units.size(); ++u) {
      (compiled[u].cached ? out.units_cached : out.units_compiled)++;
      for (size_t i : units[u]) {
        out.module[i] = compiled[u].module;
        out.source_path[i] = compiled[u].source_path;
      }
    }
  } catch (const Error&) {
    // Kernel by kernel (units that compiled are cache hits now).
    for (const auto& u : units)
      for (size_t i : u) {
        try {
          std::vector<CompiledUnit> one = backend.compile({unit_source({i})}, device);
          out.module[i] = one[0].module;
          out.source_path[i] = one[0].source_path;
        } catch (const Error& e) {
          out.error[i] = e.what();
        }
      }
  }
  return out;
}

std::vector<std::string> check_candidates(Backend& backend, runtime::Device& device, const Graph& g,
                                          const std::vector<const KernelCandidate*>& candidates,
                                          const std::vector<Tensor>& values, double tolerance) {
  std::vector<std::string> verdict(candidates.size());
  std::vector<EmittedKernel> emitted(candidates.size());
  std::vector<const EmittedKernel*> ok;
  std::vector<size_t> index;
  for (size_t i = 0; i < candidates.size(); ++i) {
    emitted[i] = backend.emit(g, *candidates[i]);
    if (!emitted[i].ok) {
      verdict[i] = emitted[i].reason;
      continue;
    }
    ok.push_back(&emitted[i]);
    index.push_back(i);
  }
  CompiledKernels compiled = compile_kernels(backend, device, ok, 120);
  for (size_t j = 0; j < ok.size(); ++j) {
    const size_t i = index[j];
    if (!compiled.error[j].empty()) {
      verdict[i] = compiled.error[j];
      continue;
    }
    try {
      std::unique_ptr<runtime::DeviceKernel> kernel = device.make_kernel(ok[j]->recipe, compiled.module[j]);
      KernelProbe probe(device, *kernel, *ok[j], g, values);
      verdict[i] = probe.check(tolerance);
    } catch (const Error& e) {
      verdict[i] = e.what();
    }
  }
  return verdict;
}

}  // namespace korch
