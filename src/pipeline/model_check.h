// The whole model's outputs against the reference interpreter: `korch compile --check` (the written
// artifact, once, on seeded random inputs) and `korch run --check`.
//
// Why, beside the correctness gate every kernel passes: the gate feeds each kernel the reference's
// values of its inputs, so an error that only compounds from kernel to kernel passes it. A layer norm
// over rows offset by 1e4, compiled with float accumulators for its sums (a trial, 2026-12-07; the
// conformance case layernorm_offset_rows in tests/codegen/loop_cases.cc keeps them double), passed
// every kernel's gate and missed the model by 1.45e-3.
//
// The rule, per output: within `tolerance` (1e-4) relative L2 of the float32 reference passes.
// Otherwise the model also runs in float64 (ir/precision.h), and the output passes when it is no
// farther from that than the float32 reference is (or within `tolerance` of it): two correct float32
// runs of an ill-conditioned model differ by more than 1e-4 (scripts/compare_with_ort.py's f64 rule,
// with the reference interpreter in onnxruntime's place).
//
// A check is only as good as its outputs: an output whose reference is the same value everywhere
// (a vanished activation, a zero head) makes it vacuous, and the report says so (`vacuous`).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace korch {

struct ModelCheck {
  struct Output {
    std::string name;
    double error = 0;              // relative L2 against the float32 reference
    double to_f64 = -1;            // against the float64 reference, when it ran (else -1)
    double reference_to_f64 = -1;  // the float32 reference's own distance to it
    bool passed = false;
    std::string detail;  // past the tolerance: what differs (rel_l2_diff: a non-finite value's place)
  };
  std::vector<Output> outputs;
  double tolerance = 1e-4;
  bool passed = false;
  bool ran_f64 = false;
  double worst = 0;                  // largest Output::error
  double reference_seconds = 0;      // the reference runs (float32, and float64 when it ran)
  std::vector<std::string> vacuous;  // outputs whose reference is one value everywhere
  // The first failing output: name, errors and the rule ("" when passed).
  std::string failure() const;
  // What a passing check's summary line adds: that the float64 rule was needed, and which outputs
  // are vacuous ("; ..." each, "" when neither).
  std::string notes() const;
};

// `got`: the model's outputs on `inputs` from the system under test (same order and types).
nlohmann::json model_check_json(const ModelCheck& c);  // manifest.json's model_check, korch --json

ModelCheck check_model_outputs(const Graph& model, const std::vector<Tensor>& inputs, const std::vector<Tensor>& got,
                               double tolerance = 1e-4);

// The artifact in `dir` run once on random_inputs(model, seed) with `cpu_threads` and checked
// (check_model_outputs). A CUDA artifact runs on the host emulator. Throws korch::Error when it
// cannot be loaded or run.
ModelCheck check_artifact(const Graph& model, const std::string& dir, uint64_t seed, int cpu_threads,
                          double tolerance = 1e-4);

}  // namespace korch
