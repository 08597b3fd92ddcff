#include "runtime/executable.h"

#include "support/process.h"

#include "codegen/cpu/cpu_linear.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <fcntl.h>
#include <omp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "codegen/cpu/cpu_compiler.h"
#include "codegen/cpu/cpu_kernel.h"
#include "ir/dtype.h"
#include "runtime/artifact.h"
#include "support/error.h"
#include "support/file_io.h"

namespace korch::runtime {

namespace fs = std::filesystem;

namespace {

nlohmann::json parse_json_file(const std::string& path) {
  std::string text = read_file_bytes(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{} is not valid JSON: {}", path, e.what());
  }
}


}  // namespace

std::unique_ptr<Executable> Executable::load(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail_io("artifact folder '{}' does not exist", dir);
  const std::string manifest_path = (fs::path(dir) / "manifest.json").string();
  if (!fs::exists(manifest_path, ec))
    fail_io("'{}' is not a Korch artifact: {} is missing (make one with korch compile)", dir, manifest_path);
  std::unique_ptr<Executable> x(new Executable());
  x->dir_ = dir;
  x->manifest_ = parse_json_file(manifest_path);
  if (!x->manifest_.is_object() || x->manifest_.value("format", "") != kArtifactFormat)
    fail("{}: not a Korch artifact manifest (format is not \"{}\")", manifest_path, kArtifactFormat);
  if (x->manifest_.value("version", -1) != kArtifactVersion)
    fail("{}: artifact version {} but this korch reads version {}; recompile the model", manifest_path,
         x->manifest_.value("version", nlohmann::json(nullptr)).dump(), kArtifactVersion);

  const std::string program_path = (fs::path(dir) / "program.json").string();
  nlohmann::json program = parse_json_file(program_path);
  try {
    x->parse_program(program, program_path);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: malformed program: {}", program_path, e.what());
  }
  x->map_weights((fs::path(dir) / "weights.bin").string(), program.at("weights_bytes").get<int64_t>());

  std::shared_ptr<cpu::KernelLibrary> lib;
  bool needs_library = false;
  for (const auto& k : program.at("kernels")) needs_library |= !k.at("recipe").at("symbol").get<std::string>().empty();
  if (needs_library) lib = x->open_library(dir);
  size_t i = 0;
  for (const auto& k : program.at("kernels")) {
    Step& s = x->steps_[i++];
    s.kernel = std::make_unique<cpu::CpuKernel>(cpu::CpuKernelRecipe::from_json(k.at("recipe")), lib);
  }

  if (x->arena_bytes_ > 0) {
    size_t size = static_cast<size_t>((x->arena_bytes_ + 63) / 64 * 64);
    x->arena_ = static_cast<std::byte*>(std::aligned_alloc(64, size));
    if (!x->arena_) fail_io("out of memory: the artifact's arena needs {} bytes", size);
  }
  x->ptrs_.assign(x->buffers_.size(), nullptr);
  for (size_t b = 0; b < x->buffers_.size(); ++b) {
    const Buffer& buf = x->buffers_[b];
    if (buf.kind == Kind::kWeight) x->ptrs_[b] = const_cast<std::byte*>(x->weights_) + buf.offset;
    if (buf.kind == Kind::kArena) x->ptrs_[b] = x->arena_ + buf.offset;
  }
  if (!std::getenv("KORCH_NO_LAYOUT_HANDOFF")) x->hand_off_layouts();
  return x;
}

// Layout handoff (cpu_linear.h): an arena value written by a kernel that is only a linear step
// and read only as the src of kernels that are only linear steps wanting the same layout stays in
// that layout, in a buffer of its own (a blocked layout pads channels, so it may not fit the arena
// slot planned for the plain tensor).
void Executable::hand_off_layouts() {
  std::vector<int> writer(buffers_.size(), -1);
  std::vector<std::vector<std::pair<int, int>>> readers(buffers_.size());  // (step, input position)
  for (size_t i = 0; i < steps_.size(); ++i) {
    for (size_t a = 0; a < steps_[i].outputs.size(); ++a) writer[static_cast<size_t>(steps_[i].outputs[a])] = static_cast<int>(i);
    for (size_t a = 0; a < steps_[i].inputs.size(); ++a)
      readers[static_cast<size_t>(steps_[i].inputs[a])].emplace_back(static_cast<int>(i), static_cast<int>(a));
  }
  for (size_t b = 0; b < buffers_.size(); ++b) {
    if (buffers_[b].kind != Kind::kArena || writer[b] < 0 || readers[b].empty()) continue;
    Step& w = steps_[static_cast<size_t>(writer[b])];
    cpu::LinearStep* producer = w.kernel->only_linear_step();
    if (!producer) continue;
    const int out_slot = static_cast<int>(w.inputs.size()) +
                         static_cast<int>(std::find(w.outputs.begin(), w.outputs.end(), static_cast<int>(b)) - w.outputs.begin());
    const std::string layout = producer->dst_layout();
    if (layout.empty() || producer->result_slot() != out_slot) continue;
    bool ok = true;
    for (auto [step, pos] : readers[b]) {
      cpu::LinearStep* c = steps_[static_cast<size_t>(step)].kernel->only_linear_step();
      ok = ok && c &&
           ((c->src_slot() == pos && c->reads_only_as_src(pos) && c->src_layout() == layout) ||
            (c->reads_only_as_sum(pos) && c->dst_layout() == layout));
    }
    if (!ok) continue;
    void* p = std::aligned_alloc(64, static_cast<size_t>((producer->dst_layout_bytes() + 63) / 64 * 64));
    if (!p) fail_io("out of memory for a {}-byte layout handoff buffer", producer->dst_layout_bytes());
    handoff_buffers_.emplace_back(p);
    ptrs_[b] = p;
    producer->set_dst_in_layout(true);
    for (auto [step, pos] : readers[b]) {
      cpu::LinearStep* c = steps_[static_cast<size_t>(step)].kernel->only_linear_step();
      if (c->src_slot() == pos) c->set_src_in_layout(true);
      else c->set_sum_in_layout(true);
    }
    ++handoffs_;
  }
}

void Executable::parse_program(const nlohmann::json& j, const std::string& path) {
  if (j.value("format", "") != "korch-program" || j.value("version", -1) != kArtifactVersion)
    fail("{}: not a version {} Korch program", path, kArtifactVersion);
  arena_bytes_ = j.at("arena_bytes").get<int64_t>();
  const int64_t weights_bytes = j.at("weights_bytes").get<int64_t>();
  if (arena_bytes_ < 0 || weights_bytes < 0) fail("{}: negative arena or weights size", path);
  for (const auto& b : j.at("buffers")) {
    Buffer buf;
    int id = b.at("id").get<int>();
    if (id != static_cast<int>(buffers_.size())) fail("{}: buffer {} is listed at position {}", path, id, buffers_.size());
    std::string kind = b.at("kind").get<std::string>();
    if (kind == "input") buf.kind = Kind::kInput;
    else if (kind == "output") buf.kind = Kind::kOutput;
    else if (kind == "weight") buf.kind = Kind::kWeight;
    else if (kind == "arena") buf.kind = Kind::kArena;
    else fail("{}: buffer {} has unknown kind '{}'", path, id, kind);
    buf.name = b.at("name").get<std::string>();
    auto dtype = dtype_from_name(b.at("dtype").get<std::string>());
    if (!dtype || dtype_size(*dtype) == 0) fail("{}: buffer {} has unknown dtype {}", path, id, b.at("dtype").dump());
    buf.type = {*dtype, b.at("shape").get<Shape>()};
    for (int64_t d : buf.type.shape)
      if (d < 0) fail("{}: buffer {} has a negative dimension", path, id);
    if (buf.kind == Kind::kWeight || buf.kind == Kind::kArena) {
      buf.offset = b.at("offset").get<int64_t>();
      int64_t limit = buf.kind == Kind::kWeight ? weights_bytes : arena_bytes_;
      if (buf.offset < 0 || buf.offset % 64 != 0 || buf.offset + buf.type.byte_size() > limit)
        fail("{}: buffer {} ({}) at offset {} does not fit its {} of {} bytes", path, id, buf.name, buf.offset, kind,
             limit);
    } else {
      buf.index = b.at("index").get<int>();
    }
    if (buf.kind == Kind::kOutput && b.contains("copy_from")) buf.copy_from = b.at("copy_from").get<int>();
    buffers_.push_back(std::move(buf));
  }
  const int n = static_cast<int>(buffers_.size());
  auto buffer_ref = [&](const nlohmann::json& v, const char* what) {
    int id = v.get<int>();
    if (id < 0 || id >= n) fail("{}: {} refers to buffer {}, but there are {}", path, what, id, n);
    return id;
  };
  for (const auto& v : j.at("inputs")) {
    int id = buffer_ref(v, "inputs");
    if (buffers_[id].kind != Kind::kInput) fail("{}: inputs lists buffer {}, which is not an input", path, id);
    input_buffers_.push_back(id);
    input_names_.push_back(buffers_[id].name);
    input_types_.push_back(buffers_[id].type);
  }
  for (const auto& v : j.at("outputs")) {
    int id = buffer_ref(v, "outputs");
    if (buffers_[id].kind != Kind::kOutput) fail("{}: outputs lists buffer {}, which is not an output", path, id);
    if (buffers_[id].copy_from >= n || buffers_[id].copy_from == id ||
        (buffers_[id].copy_from >= 0 && buffers_[buffers_[id].copy_from].type != buffers_[id].type))
      fail("{}: output {} copies from an invalid buffer", path, buffers_[id].name);
    output_buffers_.push_back(id);
    output_names_.push_back(buffers_[id].name);
    output_types_.push_back(buffers_[id].type);
  }
  for (const auto& k : j.at("kernels")) {
    size_t index = steps_.size();
    cpu::CpuKernelRecipe r;
    try {
      r = cpu::CpuKernelRecipe::from_json(k.at("recipe"));
    } catch (const Error& e) {
      rethrow_with_context(e, fmt::format("{}: kernel {}", path, index));
    }
    const auto& args = k.at("args");
    if (args.size() != r.inputs.size() + r.outputs.size())
      fail("{}: kernel {} ({}) has {} arguments for {} inputs and {} outputs", path, index, r.symbol, args.size(),
           r.inputs.size(), r.outputs.size());
    Step s;
    for (size_t a = 0; a < args.size(); ++a) {
      int id = buffer_ref(args[a], "a kernel argument");
      bool is_input = a < r.inputs.size();
      const TensorType& want = is_input ? r.inputs[a] : r.outputs[a - r.inputs.size()];
      if (buffers_[id].type != want)
        fail("{}: kernel {} ({}) argument {} is buffer {} of type {}, but the kernel takes {}", path, index, r.symbol,
             a, id, type_str(buffers_[id].type), type_str(want));
      if (!is_input && (buffers_[id].kind == Kind::kInput || buffers_[id].kind == Kind::kWeight))
        fail("{}: kernel {} ({}) writes buffer {}, an input or weight", path, index, r.symbol, id);
      (is_input ? s.inputs : s.outputs).push_back(id);
    }
    s.in_ptrs.resize(s.inputs.size());
    s.out_ptrs.resize(s.outputs.size());
    s.note = k.value("note", std::string());
    steps_.push_back(std::move(s));
  }
  const auto& m = j.at("memory");
  memory_.arena_bytes = m.at("arena_bytes").get<int64_t>();
  memory_.unfused_arena_bytes = m.at("unfused_arena_bytes").get<int64_t>();
  memory_.intermediate_bytes = m.at("intermediate_bytes").get<int64_t>();
  memory_.weights_bytes = m.at("weights_bytes").get<int64_t>();
}

void Executable::map_weights(const std::string& path, int64_t bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_io("cannot open {}: {}", path, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size < bytes) {
    ::close(fd);
    fail_io("{} holds {} bytes but program.json needs {}; the artifact is incomplete", path,
            static_cast<int64_t>(st.st_size), bytes);
  }
  if (bytes > 0) {
    // Read-only and private: a kernel that wrote into a weight would fault instead of corrupting it.
    void* p = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      fail_io("cannot map {}: {}", path, std::strerror(errno));
    }
    weights_ = static_cast<const std::byte*>(p);
    weights_map_bytes_ = static_cast<size_t>(bytes);
  }
  ::close(fd);
}

std::shared_ptr<cpu::KernelLibrary> Executable::open_library(const std::string& dir) {
  const fs::path lib = fs::path(dir) / "kernels" / "libkernels.so";
  const fs::path script = fs::path(dir) / "kernels" / "build.sh";
  std::string why = "missing";
  std::error_code ec;
  if (fs::exists(lib, ec)) {
    try {
      return cpu::KernelLibrary::open(lib.string());
    } catch (const Error& e) {
      why = std::string("unloadable (") + e.what() + ")";
    }
  }
  if (!fs::exists(script, ec))
    fail_io("{} is {} and {}, which would rebuild it, is missing too", lib.string(), why, script.string());
  std::string log;
  if (run_shell("/bin/sh " + shell_quote(script.string()), &log) != 0)
    fail_io("{} is {}; rebuilding it with {} failed: {}", lib.string(), why, script.string(), log.substr(0, 2000));
  rebuilt_ = true;
  return cpu::KernelLibrary::open(lib.string());
}

Executable::~Executable() {
  steps_.clear();  // kernels before the library and buffers they point into
  if (weights_) munmap(const_cast<std::byte*>(weights_), weights_map_bytes_);
  std::free(arena_);
}

std::vector<Tensor> Executable::run(const std::vector<Tensor>& inputs) {
  if (inputs.size() != input_buffers_.size())
    fail("the artifact takes {} inputs ({}), got {}", input_buffers_.size(), fmt::join(input_names_, ", "),
         inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].type() != input_types_[i])
      fail("input '{}' expects {} but got {}", input_names_[i], type_str(input_types_[i]), type_str(inputs[i].type()));
    ptrs_[static_cast<size_t>(input_buffers_[i])] = const_cast<std::byte*>(inputs[i].raw());
  }
  std::vector<Tensor> outputs;
  outputs.reserve(output_buffers_.size());
  for (int id : output_buffers_) {
    outputs.emplace_back(buffers_[static_cast<size_t>(id)].type);
    ptrs_[static_cast<size_t>(id)] = outputs.back().raw();
  }
  for (Step& s : steps_) {
    for (size_t a = 0; a < s.inputs.size(); ++a) s.in_ptrs[a] = ptrs_[static_cast<size_t>(s.inputs[a])];
    for (size_t a = 0; a < s.outputs.size(); ++a) s.out_ptrs[a] = ptrs_[static_cast<size_t>(s.outputs[a])];
    if (step_timing_) {
      auto t0 = std::chrono::steady_clock::now();
      s.kernel->run(s.in_ptrs.data(), s.out_ptrs.data());
      s.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } else {
      s.kernel->run(s.in_ptrs.data(), s.out_ptrs.data());
    }
  }
  for (size_t o = 0; o < output_buffers_.size(); ++o) {
    const Buffer& b = buffers_[static_cast<size_t>(output_buffers_[o])];
    if (b.copy_from >= 0 && outputs[o].nbytes() > 0)
      std::memcpy(outputs[o].raw(), ptrs_[static_cast<size_t>(b.copy_from)], outputs[o].nbytes());
  }
  return outputs;
}

std::vector<Executable::StepTime> Executable::step_times() const {
  std::vector<StepTime> out;
  for (size_t i = 0; i < steps_.size(); ++i) out.push_back({static_cast<int>(i), steps_[i].note, steps_[i].seconds});
  return out;
}

void Executable::set_step_timing(bool on) {
  step_timing_ = on;
  for (Step& s : steps_) s.seconds = 0;
}

void set_cpu_threads(int n) {
  KORCH_CHECK(n >= 1, "thread count {}", n);
  omp_set_num_threads(n);
}

}  // namespace korch::runtime
