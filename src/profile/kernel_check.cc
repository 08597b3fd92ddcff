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

KernelProbe::KernelProbe(runtime::Device& device, runtime::DeviceKernel& kernel, const EmittedKernel& k,
                         const Graph& g, const std::vector<Tensor>& values)
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

}  // namespace korch
