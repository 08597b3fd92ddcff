#include "pipeline/model_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "ir/interpreter.h"
#include "ir/precision.h"
#include "ir/random.h"
#include "ir/tensor_compare.h"
#include "pipeline/compile_steps.h"
#include "runtime/executable.h"
#include "support/error.h"
#include "support/file_io.h"

namespace korch {

namespace {

// Every element the same (float32/64 by value, so -0 and 0 are one; other types bytewise): a check
// against it says little about the arithmetic before it.
bool one_value(const Tensor& t) {
  const size_t n = static_cast<size_t>(t.numel()), size = n ? t.nbytes() / n : 0;
  for (size_t i = 1; i < n; ++i) {
    const bool same = t.dtype() == DType::kFloat32   ? t.data<float>()[i] == t.data<float>()[0]
                      : t.dtype() == DType::kFloat64 ? t.data<double>()[i] == t.data<double>()[0]
                                                     : std::memcmp(t.raw() + i * size, t.raw(), size) == 0;
    if (!same) return false;
  }
  return true;
}

}  // namespace

std::string ModelCheck::failure() const {
  for (const Output& o : outputs) {
    if (o.passed) continue;
    if (o.to_f64 < 0)
      return fmt::format(
          "output '{}' differs from the reference interpreter: {}", o.name,
          o.detail.empty() ? fmt::format("{:.3g} relative L2 (tolerance {:g})", o.error, tolerance) : o.detail);
    return fmt::format(
        "output '{}' differs from the reference interpreter by {:.3g} relative L2 (tolerance {:g}), and from its "
        "float64 run by {:.3g}, where the float32 reference is {:.3g} from it",
        o.name, o.error, tolerance, o.to_f64, o.reference_to_f64);
  }
  return "";
}

std::string ModelCheck::notes() const {
  std::string s;
  if (ran_f64) s += fmt::format("; outputs past {:g} no farther from a float64 run than the reference", tolerance);
  if (!vacuous.empty())
    s += fmt::format("; vacuous for {} (the reference gives one value everywhere)", fmt::join(vacuous, ", "));
  return s;
}

nlohmann::json model_check_json(const ModelCheck& c) {
  nlohmann::json outputs = nlohmann::json::object();
  for (const ModelCheck::Output& o : c.outputs) {
    nlohmann::json j = {{"rel_l2_error", o.error}, {"passed", o.passed}};
    if (o.to_f64 >= 0) j.update({{"rel_l2_to_f64", o.to_f64}, {"reference_rel_l2_to_f64", o.reference_to_f64}});
    outputs[o.name] = j;
  }
  return {{"passed", c.passed},   {"tolerance", c.tolerance},     {"worst_rel_l2_error", c.worst},
          {"ran_f64", c.ran_f64}, {"vacuous_outputs", c.vacuous}, {"reference_wall_s", c.reference_seconds},
          {"outputs", outputs}};
}

ModelCheck check_model_outputs(const Graph& model, const std::vector<Tensor>& inputs, const std::vector<Tensor>& got,
                               double tolerance) {
  ModelCheck c;
  c.tolerance = tolerance;
  auto t = std::chrono::steady_clock::now();
  const std::vector<Tensor> want = interpret(model, inputs);
  c.reference_seconds = since(t);
  KORCH_CHECK(want.size() == got.size() && want.size() == model.outputs.size(), "{} outputs to check, {} given",
              want.size(), got.size());
  std::vector<Tensor> f64;  // the float64 run, when an output needs it
  for (size_t i = 0; i < want.size(); ++i) {
    ModelCheck::Output o;
    o.name = model.value(model.outputs[i]).name;
    o.error = rel_l2_error(got[i], want[i]);
    o.passed = o.error <= tolerance;
    if (!o.passed) o.detail = rel_l2_diff(got[i], want[i], tolerance);
    if (!o.passed && got[i].dtype() == DType::kFloat32 && want[i].dtype() == DType::kFloat32) {
      if (f64.empty()) {
        t = std::chrono::steady_clock::now();
        f64 = interpret_f64(model, inputs);
        c.reference_seconds += since(t);
        c.ran_f64 = true;
      }
      o.to_f64 = rel_l2_error(widen_to_f64(got[i]), f64[i]);
      o.reference_to_f64 = rel_l2_error(widen_to_f64(want[i]), f64[i]);
      o.passed = o.to_f64 <= std::max(o.reference_to_f64, tolerance);
    }
    if (want[i].numel() > 1 && one_value(want[i])) c.vacuous.push_back(o.name);
    c.worst = std::max(c.worst, o.error);
    c.outputs.push_back(o);
  }
  c.passed = std::all_of(c.outputs.begin(), c.outputs.end(), [](const ModelCheck::Output& o) { return o.passed; });
  return c;
}

ModelCheck check_artifact(const Graph& model, const std::string& dir, uint64_t seed, int cpu_threads,
                          double tolerance) {
  const nlohmann::json manifest =
      nlohmann::json::parse(read_file_bytes((std::filesystem::path(dir) / "manifest.json").string()));
  runtime::LoadOptions lo;
  lo.emulate = manifest.value("device", std::string("cpu")) == "cuda";
  lo.cpu_threads = cpu_threads;
  auto exe = runtime::Executable::load(dir, lo);
  const std::vector<Tensor> inputs = random_inputs(model, seed);
  return check_model_outputs(model, inputs, exe->run(inputs), tolerance);
}

}  // namespace korch
