// What every device's kernel recipe has in common (device.h), as JSON:
//   "inputs", "outputs"  the argument inputs' and outputs' types, [{dtype, shape}]
//   "scratch_bytes"      the scratch buffers, after the outputs in the argument list
//   "linear"             (optional) a library call: codegen/linear_match.h's description with its
//                        operand_slots / result_slot filled in, or (LSTM/GRU/RNN)
//                        codegen/rnn_match.h's with input_slots / output_slots
//   "reference_graph"    (optional) no generated code: the kernel's one-node graph in the IR text
//                        form, run by the reference interpreter (every device supports it; one
//                        without host memory through copies)
//   "in_place"           (optional) a Concat or view written in place (memory_plan.h): each
//                        argument input's byte offset in the one output; the kernel copies only
//                        the inputs it does not find there (InPlaceStep)
// Each device's recipe adds what runs its generated code (cpu: "symbol", cuda: "launches").
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "ir/tensor.h"

namespace korch::runtime {

nlohmann::json tensor_type_json(const TensorType& t);
TensorType tensor_type_from_json(const nlohmann::json& j);  // throws korch::Error

struct KernelRecipeBase {
  std::vector<TensorType> inputs;       // argument inputs
  std::vector<TensorType> outputs;
  std::vector<int64_t> scratch_bytes;
  std::optional<nlohmann::json> linear;
  std::string reference_graph;
  std::vector<int64_t> in_place;

  void write_json(nlohmann::json& j) const;
  void read_json(const nlohmann::json& j);  // throws korch::Error
  static KernelRecipeBase from_json(const nlohmann::json& j) {
    KernelRecipeBase r;
    r.read_json(j);
    return r;
  }
};

// An opaque primitive (TopK, GridSample, ...) or an operator fission keeps whole has no
// generated code: it runs in the reference interpreter, at reference speed for that op, so a model
// with such an op still compiles and runs. Host pointers in and out.
class ReferenceStep {
 public:
  // `graph_text`: kernel_subgraph() printed (graph inputs = argument inputs, outputs = kernel
  // outputs). Throws korch::Error when it does not parse or does not match `io`.
  ReferenceStep(const std::string& graph_text, const KernelRecipeBase& io);
  void run(const void* const* inputs, void* const* outputs) const;

 private:
  Graph graph_;
  std::vector<TensorType> inputs_, outputs_;
};

// The run of a Concat or view written in place: where an input is already at its offset in the output (the
// artifact's memory plan put it there) nothing is done; otherwise (the kernel run alone) `copy`
// moves it there, on the device.
class InPlaceStep {
 public:
  explicit InPlaceStep(const KernelRecipeBase& r);  // throws korch::Error for a malformed one
  template <class Copy>
  void run(const void* const* inputs, void* const* outputs, Copy&& copy) const {
    for (size_t i = 0; i < offsets_.size(); ++i) {
      void* to = static_cast<std::byte*>(outputs[0]) + offsets_[i];
      if (to != inputs[i] && bytes_[i] > 0) copy(to, inputs[i], bytes_[i]);
    }
  }

  // On a device whose memory is the host's (the CPU, the CUDA emulator).
  void run_on_host(const void* const* inputs, void* const* outputs) const;

 private:
  std::vector<int64_t> offsets_, bytes_;
};

}  // namespace korch::runtime
