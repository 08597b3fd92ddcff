// Writes the artifact folder (artifact.h).
//
// program.json, as written here and read by executable.cc:
//   {"format": "korch-program", "version": 1,
//    "buffers": [{"id", "kind": "input"|"output"|"weight"|"arena"|"piece", "name", "dtype", "shape",
//                 "bytes", "index" (input/output position), "offset" (weight/arena/piece),
//                 "copy_from" (output only: a buffer id copied in after the kernels ran),
//                 "of" (piece only: the arena or output buffer it lies in, listed before it, at
//                 "offset" bytes: an input written in place, memory_plan.h)}],
//    "inputs": [buffer ids], "outputs": [buffer ids], "input_names", "output_names",
//    "kernels": [{"recipe": CpuKernelRecipe::to_json(), "args": [buffer ids], "note"}],
//    "arena_bytes", "weights_bytes", "weights_checksum" (support/hash.h bytes_checksum of weights.bin),
//    "memory": {"arena_bytes", "unfused_arena_bytes", "intermediate_bytes", "weights_bytes"},
//    "micro_batches" (only when > 1: every buffer is one micro-batch's, of k samples, and a run of
//                     the model on micro_batches x k samples runs the kernels micro_batches times)}
// Buffer ids are positions in "buffers", not graph value ids: the graph is not in the artifact.
#include "runtime/artifact.h"

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "ir/dtype.h"
#include "runtime/kernel_recipe.h"
#include "runtime/memory_plan.h"
#include "support/hash.h"
#include "support/error.h"
#include "support/file_io.h"

#ifndef KORCH_VERSION
#define KORCH_VERSION "unknown"
#endif
#ifndef KORCH_GIT_DESCRIBE
#define KORCH_GIT_DESCRIBE ""
#endif

namespace korch::runtime {

namespace fs = std::filesystem;

namespace {


std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// One line per top-level key, and one per element of a top-level array of objects (a buffer, a
// kernel): readable and diffable for a model with thousands of buffers.
std::string program_text(const nlohmann::json& j) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : j.items()) {
    out += (first ? "\n  " : ",\n  ") + nlohmann::json(key).dump() + ": ";
    first = false;
    if (value.is_array() && !value.empty() && value.front().is_object()) {
      out += "[";
      for (size_t i = 0; i < value.size(); ++i) out += (i ? ",\n    " : "\n    ") + value[i].dump();
      out += "\n  ]";
    } else {
      out += value.dump();
    }
  }
  return out + "\n}\n";
}

nlohmann::json buffer_json(int id, const char* kind, const Value& v) {
  return {{"id", id}, {"kind", kind}, {"name", v.name}, {"dtype", std::string(dtype_name(v.type.dtype))},
          {"shape", v.type.shape}, {"bytes", v.type.byte_size()}};
}

}  // namespace

MemoryReport write_artifact(const std::string& dir, const ArtifactContents& c) {
  KORCH_CHECK(c.graph != nullptr);
  const Graph& g = *c.graph;
  const fs::path root(dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) fail_io("cannot create artifact folder {}: {}", root.string(), ec.message());

  // Which values are available before each kernel runs: graph inputs and constants, then outputs.
  std::set<ValueId> available(g.inputs.begin(), g.inputs.end());
  for (size_t v = 0; v < g.values.size(); ++v)
    if (g.values[v].is_constant()) available.insert(static_cast<ValueId>(v));
  std::vector<StepIo> steps;
  std::vector<KernelRecipeBase> ios;
  for (size_t k = 0; k < c.kernels.size(); ++k) {
    const ArtifactKernel& ak = c.kernels[k];
    ios.push_back(KernelRecipeBase::from_json(ak.recipe));
    const KernelRecipeBase& r = ios.back();
    KORCH_CHECK(ak.args.size() == r.inputs.size() + r.outputs.size(), "kernel {} ({}): {} args for {} inputs + {} outputs",
                k, ak.note, ak.args.size(), r.inputs.size(), r.outputs.size());
    StepIo io;
    for (size_t a = 0; a < ak.args.size(); ++a) {
      ValueId v = ak.args[a];
      bool is_input = a < r.inputs.size();
      const TensorType& want = is_input ? r.inputs[a] : r.outputs[a - r.inputs.size()];
      KORCH_CHECK(v >= 0 && static_cast<size_t>(v) < g.values.size() && g.type(v) == want,
                  "kernel {} ({}) argument {}: value {} does not have the recipe's type {}", k, ak.note, a, v,
                  type_str(want));
      if (is_input) {
        KORCH_CHECK(available.count(v), "kernel {} ({}) reads {} before any kernel writes it", k, ak.note,
                    g.value(v).name);
        io.reads.push_back(v);
      } else {
        io.writes.push_back(v);
      }
    }
    for (ValueId v : io.writes) available.insert(v);
    steps.push_back(std::move(io));
  }
  for (ValueId v : g.outputs)
    KORCH_CHECK(available.count(v), "graph output {} is written by no kernel", g.value(v).name);

  // Buffers: graph inputs, graph outputs, weights, then arena intermediates.
  nlohmann::json buffers = nlohmann::json::array();
  std::map<ValueId, int> buffer_of;  // where kernels read/write each value
  nlohmann::json inputs = nlohmann::json::array(), outputs = nlohmann::json::array();
  nlohmann::json input_names = nlohmann::json::array(), output_names = nlohmann::json::array();
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    int id = static_cast<int>(buffers.size());
    buffers.push_back(buffer_json(id, "input", g.value(g.inputs[i])));
    buffers.back()["index"] = i;
    buffer_of[g.inputs[i]] = id;
    inputs.push_back(id);
    input_names.push_back(g.value(g.inputs[i]).name);
  }
  std::vector<std::pair<int, ValueId>> copies;  // output buffer <- the buffer of a value
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    ValueId v = g.outputs[i];
    int id = static_cast<int>(buffers.size());
    buffers.push_back(buffer_json(id, "output", g.value(v)));
    buffers.back()["index"] = i;
    outputs.push_back(id);
    output_names.push_back(g.value(v).name);
    // Kernels write a graph output straight into its tensor; an output that is an input, a
    // constant or a repeat of an earlier output is copied in after the kernels.
    if (buffer_of.count(v) || g.value(v).is_constant()) copies.emplace_back(id, v);
    else buffer_of[v] = id;
  }

  // weights.bin: constants read as kernel arguments or copied to outputs, each 64-byte aligned.
  std::vector<ValueId> weights;
  for (size_t k = 0; k < c.kernels.size(); ++k)
    for (size_t a = 0; a < ios[k].inputs.size(); ++a)
      if (const ArtifactKernel& ak = c.kernels[k]; g.value(ak.args[a]).is_constant() && !buffer_of.count(ak.args[a])) {
        buffer_of[ak.args[a]] = -1;  // placeholder, assigned below
        weights.push_back(ak.args[a]);
      }
  for (const auto& [id, v] : copies)
    if (g.value(v).is_constant() && !buffer_of.count(v)) {
      buffer_of[v] = -1;
      weights.push_back(v);
    }
  std::string blob;
  for (ValueId v : weights) {
    const Tensor& t = *g.value(v).constant;
    int id = static_cast<int>(buffers.size());
    buffers.push_back(buffer_json(id, "weight", g.value(v)));
    buffers.back()["offset"] = blob.size();
    blob.append(reinterpret_cast<const char*>(t.raw()), t.nbytes());
    blob.resize(static_cast<size_t>(align_up(static_cast<int64_t>(blob.size()), 64)), '\0');
    buffer_of[v] = id;
  }
  write_file_bytes((root / "weights.bin").string(), blob);
  const std::string weights_checksum = bytes_checksum(blob.data(), blob.size());

  ArenaPlan arena = plan_arena(g, steps);
  for (const auto& [v, offset] : arena.offset) {
    int id = static_cast<int>(buffers.size());
    buffers.push_back(buffer_json(id, "arena", g.value(v)));
    buffers.back()["offset"] = offset;
    buffer_of[v] = id;
  }
  for (const auto& [v, at] : arena.piece_of) {
    int id = static_cast<int>(buffers.size());
    buffers.push_back(buffer_json(id, "piece", g.value(v)));
    buffers.back()["of"] = buffer_of.at(at.first);
    buffers.back()["offset"] = at.second;
    buffer_of[v] = id;
  }
  for (const auto& [id, v] : copies) buffers[static_cast<size_t>(id)]["copy_from"] = buffer_of.at(v);

  MemoryReport mem;
  mem.arena_bytes = arena.arena_bytes;
  mem.unfused_arena_bytes = plan_arena(g, unfused_steps(g)).arena_bytes;
  mem.intermediate_bytes = arena.intermediate_bytes;
  mem.weights_bytes = static_cast<int64_t>(blob.size());

  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& ak : c.kernels) {
    nlohmann::json args = nlohmann::json::array();
    for (ValueId v : ak.args) args.push_back(buffer_of.at(v));
    kernels.push_back({{"recipe", ak.recipe}, {"args", args}, {"note", ak.note}});
  }

  nlohmann::json program = {{"format", "korch-program"},
                            {"version", kArtifactVersion},
                            {"buffers", buffers},
                            {"inputs", inputs},
                            {"outputs", outputs},
                            {"input_names", input_names},
                            {"output_names", output_names},
                            {"kernels", kernels},
                            {"arena_bytes", mem.arena_bytes},
                            {"weights_bytes", mem.weights_bytes},
                            {"weights_checksum", weights_checksum},
                            {"memory",
                             {{"arena_bytes", mem.arena_bytes},
                              {"unfused_arena_bytes", mem.unfused_arena_bytes},
                              {"intermediate_bytes", mem.intermediate_bytes},
                              {"weights_bytes", mem.weights_bytes}}}};
  if (c.micro_batches > 1) {
    for (const auto* values : {&g.inputs, &g.outputs})
      for (ValueId v : *values)
        KORCH_CHECK(!g.type(v).shape.empty(), "micro-batched input or output {} has no batch dimension",
                    g.value(v).name);
    program["micro_batches"] = c.micro_batches;
  }
  write_file_bytes((root / "program.json").string(), program_text(program));

  nlohmann::json module = c.write_module ? c.write_module(dir) : nlohmann::json::object();
  nlohmann::json manifest = {{"format", kArtifactFormat},
                             {"version", kArtifactVersion},
                             {"korch_version", KORCH_VERSION},
                             {"created", utc_now()},
                             {"device", c.device},
                             {"model", g.name},
                             {"kernels", c.kernels.size()},
                             // The static memory plan's arena: what the plan's intermediates need at
                             // their peak (the number a memory budget bounds).
                             {"peak_intermediate_bytes", mem.arena_bytes},
                             {"memory", program["memory"]}};
  if (module.is_object())
    for (const auto& [k, v] : module.items()) manifest[k] = v;
  if (std::string(KORCH_GIT_DESCRIBE).size()) manifest["korch_git"] = KORCH_GIT_DESCRIBE;
  if (c.manifest_extra.is_object())
    for (const auto& [k, v] : c.manifest_extra.items()) manifest[k] = v;
  write_file_bytes((root / "manifest.json").string(), manifest.dump(2) + "\n");
  return mem;
}

bool is_artifact_entry(const std::string& name) {
  static const std::set<std::string> entries = {"manifest.json", "program.json",   "weights.bin", "kernels",
                                                "plan.json",     "primitives.txt", "report.html"};
  return entries.count(name) != 0;
}

}  // namespace korch::runtime
