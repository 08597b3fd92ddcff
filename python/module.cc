// korch._core: the C++ side of the Python API (python/korch/__init__.py is the public face).
//
// Three entry points over the same library the CLI uses: load a model (path, ONNX bytes or
// builtin:NAME) with fixed shapes and bound inputs, compile it into an artifact folder
// (pipeline/compile.h), and load an artifact folder as an executable (runtime/executable.h).
// korch::Error becomes korch.Error carrying the CLI's message. The GIL is released while
// compiling and running; log lines come back to Python through the caller's callable.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>

#include "frontend/builtin_models.h"
#include "frontend/onnx_loader.h"
#include "ir/interpreter.h"
#include "pipeline/compile.h"
#include "runtime/artifact.h"
#include "runtime/cpu/cpu_device.h"
#include "runtime/executable.h"
#include "support/error.h"

namespace py = pybind11;

namespace korch {
namespace {

// numpy's dtype for a Korch element type; bfloat16 has none.
py::dtype numpy_dtype(DType d) {
  switch (d) {
    case DType::kFloat32: return py::dtype::of<float>();
    case DType::kFloat64: return py::dtype::of<double>();
    case DType::kFloat16: return py::dtype("float16");
    case DType::kInt8: return py::dtype::of<int8_t>();
    case DType::kInt16: return py::dtype::of<int16_t>();
    case DType::kInt32: return py::dtype::of<int32_t>();
    case DType::kInt64: return py::dtype::of<int64_t>();
    case DType::kUInt8: return py::dtype::of<uint8_t>();
    case DType::kUInt16: return py::dtype::of<uint16_t>();
    case DType::kUInt32: return py::dtype::of<uint32_t>();
    case DType::kUInt64: return py::dtype::of<uint64_t>();
    case DType::kBool: return py::dtype::of<bool>();
    default: fail_unsupported("element type {} has no numpy dtype", dtype_name(d));
  }
}

DType korch_dtype(const py::dtype& dt, const std::string& what) {
  const char k = dt.kind();
  const auto n = dt.itemsize();
  if (k == 'f' && n == 4) return DType::kFloat32;
  if (k == 'f' && n == 8) return DType::kFloat64;
  if (k == 'f' && n == 2) return DType::kFloat16;
  if (k == 'b' && n == 1) return DType::kBool;
  if (k == 'i' || k == 'u') {
    const bool s = k == 'i';
    switch (n) {
      case 1: return s ? DType::kInt8 : DType::kUInt8;
      case 2: return s ? DType::kInt16 : DType::kUInt16;
      case 4: return s ? DType::kInt32 : DType::kUInt32;
      case 8: return s ? DType::kInt64 : DType::kUInt64;
      default: break;
    }
  }
  fail_unsupported("{}: numpy dtype '{}' has no Korch element type", what, py::str(dt.attr("name")).cast<std::string>());
}

Tensor to_tensor(const py::array& a, const std::string& what) {
  const DType d = korch_dtype(a.dtype(), what);
  Shape shape(a.shape(), a.shape() + a.ndim());
  Tensor t(d, shape);
  // A C-contiguous copy whatever the array's strides.
  py::array c = py::array::ensure(a, py::array::c_style);
  if (!c) fail("{}: could not read the array", what);
  if (t.nbytes()) std::memcpy(t.raw(), c.data(), t.nbytes());
  return t;
}

py::array to_numpy(Tensor t) {
  auto* owned = new Tensor(std::move(t));
  py::capsule keep(owned, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<py::ssize_t> shape(owned->shape().begin(), owned->shape().end());
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t stride = static_cast<py::ssize_t>(dtype_size(owned->dtype()));
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return py::array(numpy_dtype(owned->dtype()), shape, strides, owned->raw(), keep);
}

py::list type_list(const std::vector<std::string>& names, const std::vector<TensorType>& types) {
  py::list l;
  for (size_t i = 0; i < names.size(); ++i) {
    py::tuple shape(types[i].shape.size());
    for (size_t d = 0; d < types[i].shape.size(); ++d) shape[d] = py::int_(types[i].shape[d]);
    l.append(py::make_tuple(names[i], numpy_dtype(types[i].dtype), shape));
  }
  return l;
}

py::list value_list(const Graph& g, const std::vector<ValueId>& ids) {
  std::vector<std::string> names;
  std::vector<TensorType> types;
  for (ValueId v : ids) {
    names.push_back(g.value(v).name);
    types.push_back(g.type(v));
  }
  return type_list(names, types);
}

// Converts the arrays (named after `names` in messages), runs `fn` without the GIL, returns numpy
// arrays; `fn` checks the count, dtypes and shapes.
template <typename Fn>
py::list run_arrays(const std::vector<std::string>& names, const std::vector<py::array>& inputs, Fn&& fn) {
  std::vector<Tensor> in;
  for (size_t i = 0; i < inputs.size(); ++i)
    in.push_back(to_tensor(inputs[i], i < names.size() ? "input '" + names[i] + "'" : "input " + std::to_string(i)));
  std::vector<Tensor> out;
  {
    py::gil_scoped_release nogil;
    out = fn(in);
  }
  py::list l;
  for (Tensor& t : out) l.append(to_numpy(std::move(t)));
  return l;
}

// A loaded model: the graph after the frontend (fixed shapes, folded, simplified).
struct Model {
  Graph graph;
  std::string name;
};

Model load_model(const std::string& source, const py::object& bytes, const std::map<std::string, std::vector<int64_t>>& shapes,
                 const std::map<std::string, py::array>& binds) {
  LoadOptions lo;
  for (const auto& [name, dims] : shapes) lo.input_shapes[name] = Shape(dims.begin(), dims.end());
  for (const auto& [name, a] : binds) lo.frozen_inputs[name] = to_tensor(a, "bound input '" + name + "'");
  Model m;
  m.name = source;
  if (!bytes.is_none()) m.graph = load_onnx_bytes(bytes.cast<std::string>(), source, lo);
  else if (source.rfind("builtin:", 0) == 0) m.graph = load_onnx_bytes(builtin_model_bytes(source.substr(8)), source, lo);
  else m.graph = load_onnx(source, lo);
  return m;
}

struct CompileArgs {
  std::string device = "cpu", cost, tuning_db, layout = "auto", micro_batch = "auto", denormals = "flush";
  int threads = 2;
  double time_limit = 20, gap = -1;
  int max_kernel_size = 8;
  int64_t memory_budget = -1;  // bytes; -1: none
  bool recompute = true, verify = true, close_loop = true, unfused = false, progress = false;
  bool rewrite_choices = true;
  bool check = false;  // step 10: the artifact against the reference interpreter (pipeline/model_check.h)
};

py::dict compile(const Model& m, const std::string& dir, const CompileArgs& a, const py::object& log) {
  CompileOptions o;
  o.target = a.device;
  o.model_name = m.name;
  o.cpu_threads = a.threads;
  o.cost = a.cost.empty() ? default_cost_source(a.device)
           : a.cost == "analytic" ? CostSource::kAnalytic
           : a.cost == "measured" ? CostSource::kMeasured
                                  : (fail("cost='{}': give 'measured' or 'analytic'", a.cost), CostSource::kMeasured);
  o.orchestrate.time_limit_s = a.time_limit;
  o.orchestrate.rel_gap = a.gap < 0 ? default_gap(o.cost) : a.gap;
  o.orchestrate.candidates.max_primitives = a.max_kernel_size;
  o.orchestrate.candidates.offer_minimal_outputs = a.recompute;
  o.orchestrate.allow_recompute = a.recompute;
  o.orchestrate.memory_budget = a.memory_budget;
  o.orchestrate.rewrite_choices = a.rewrite_choices;
  o.measured.db_path = a.tuning_db;
  o.measured.progress = a.progress;
  o.verify = a.verify;
  o.close_loop = a.close_loop;
  o.unfused = a.unfused;
  o.layout = a.layout;
  o.micro_batch = a.micro_batch;
  o.model_check = a.check;
  if (a.denormals != "flush" && a.denormals != "keep") fail("denormals='{}': give 'flush' or 'keep'", a.denormals);
  o.flush_denormals = a.denormals == "flush";
  if (!log.is_none()) {
    // Called from the compiling thread, which holds no GIL while compiling.
    auto fn = std::make_shared<py::object>(log);
    o.log = [fn](const std::string& s) {
      py::gil_scoped_acquire gil;
      (*fn)(s);
    };
    o.measured.log = o.log;
    o.orchestrate.progress = o.log;
  }
  CompileResult r;
  {
    py::gil_scoped_release nogil;
    if (a.threads > 0) cpu::set_cpu_threads(a.threads);
    r = compile_model(m.graph, dir, o);
  }
  py::dict d;
  d["kernels"] = r.orchestration.plan.kernels.size();
  d["primitives"] = r.primitives.nodes.size();
  // A whole run's: a micro-batched artifact runs its batch-1 plan once per sample.
  const double runs = static_cast<double>(r.micro.runs());
  d["predicted_seconds"] = runs * (r.loop.ran ? r.loop.predicted : r.orchestration.plan.total_seconds());
  d["measured_seconds"] = r.loop.ran ? py::object(py::float_(runs * r.loop.measured)) : py::object(py::none());
  d["micro_batches"] = r.micro.runs();
  d["solver_status"] = solve_status_name(r.orchestration.selection.solve.status);
  d["gap"] = r.orchestration.selection.solve.gap;
  d["cost_model"] = r.cost_model;
  py::dict rewrites;  // the rewrite sites offered, and the rules of those the plan chose (rewrite_choice.h)
  rewrites["offered"] = r.orchestration.rewrites.offered.size();
  rewrites["chosen"] = r.orchestration.rewrites.chosen_rules();
  d["rewrites"] = rewrites;
  if (r.check) d["worst_rel_l2_error"] = r.check->worst;  // check=True: it passed (a miss raises)
  return d;
}

}  // namespace
}  // namespace korch

PYBIND11_MODULE(_core, mod) {
  using namespace korch;
  mod.doc() = "Korch's C++ core; use the korch package instead.";
  py::register_exception<Error>(mod, "Error", PyExc_Exception);

  py::class_<Model>(mod, "Model")
      .def_property_readonly("inputs", [](const Model& m) { return value_list(m.graph, m.graph.inputs); })
      .def_property_readonly("outputs", [](const Model& m) { return value_list(m.graph, m.graph.outputs); })
      .def("run_reference", [](const Model& m, const std::vector<py::array>& inputs) {
        std::vector<std::string> names;
        for (ValueId v : m.graph.inputs) names.push_back(m.graph.value(v).name);
        return run_arrays(names, inputs, [&](const std::vector<Tensor>& in) { return interpret(m.graph, in); });
      });

  mod.def("load_model", &load_model, py::arg("source"), py::arg("bytes"), py::arg("shapes"), py::arg("binds"));
  mod.def("builtin_model_names", &builtin_model_names);
  mod.def("is_artifact_entry", &runtime::is_artifact_entry);
  mod.def("builtin_model_bytes", [](const std::string& name) { return py::bytes(builtin_model_bytes(name)); });

  py::class_<CompileArgs>(mod, "CompileArgs")
      .def(py::init<>())
      .def_readwrite("device", &CompileArgs::device)
      .def_readwrite("cost", &CompileArgs::cost)
      .def_readwrite("tuning_db", &CompileArgs::tuning_db)
      .def_readwrite("threads", &CompileArgs::threads)
      .def_readwrite("time_limit", &CompileArgs::time_limit)
      .def_readwrite("gap", &CompileArgs::gap)
      .def_readwrite("max_kernel_size", &CompileArgs::max_kernel_size)
      .def_readwrite("memory_budget", &CompileArgs::memory_budget)
      .def_readwrite("rewrite_choices", &CompileArgs::rewrite_choices)
      .def_readwrite("recompute", &CompileArgs::recompute)
      .def_readwrite("verify", &CompileArgs::verify)
      .def_readwrite("close_loop", &CompileArgs::close_loop)
      .def_readwrite("unfused", &CompileArgs::unfused)
      .def_readwrite("layout", &CompileArgs::layout)
      .def_readwrite("micro_batch", &CompileArgs::micro_batch)
      .def_readwrite("denormals", &CompileArgs::denormals)
      .def_readwrite("check", &CompileArgs::check)
      .def_readwrite("progress", &CompileArgs::progress);
  mod.def("compile", &compile, py::arg("model"), py::arg("dir"), py::arg("args"), py::arg("log"));

  py::class_<runtime::Executable>(mod, "Executable")
      .def_static(
          "load",
          [](const std::string& dir, bool emulate, int threads) {
            runtime::LoadOptions lo;
            lo.emulate = emulate;
            lo.cpu_threads = threads;
            py::gil_scoped_release nogil;
            return runtime::Executable::load(dir, lo);
          },
          py::arg("dir"), py::arg("emulate"), py::arg("threads"))
      .def_property_readonly("inputs",
                             [](const runtime::Executable& e) { return type_list(e.input_names(), e.input_types()); })
      .def_property_readonly("outputs",
                             [](const runtime::Executable& e) { return type_list(e.output_names(), e.output_types()); })
      .def_property_readonly("device", [](const runtime::Executable& e) { return e.device().name(); })
      .def_property_readonly("kernel_count", &runtime::Executable::kernel_count)
      .def_property_readonly("manifest", [](const runtime::Executable& e) { return e.manifest().dump(); })
      .def("run", [](runtime::Executable& e, const std::vector<py::array>& inputs) {
        return run_arrays(e.input_names(), inputs, [&](const std::vector<Tensor>& in) { return e.run(in); });
      });
}
