#include "runtime/executable.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ir/dtype.h"
#include "runtime/artifact.h"
#include "runtime/kernel_recipe.h"
#include "support/hash.h"
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

std::unique_ptr<Executable> Executable::load(const std::string& dir, const LoadOptions& options) {
  // A field of the wrong JSON type anywhere in manifest.json or program.json is the artifact's
  // fault, said as such (found by the artifact_loader fuzz target: it escaped as a json type_error).
  try {
    return load_checked(dir, options);
  } catch (const nlohmann::json::exception& e) {
    fail("artifact '{}': malformed manifest.json or program.json: {}", dir, e.what());
  }
}

std::unique_ptr<Executable> Executable::load_checked(const std::string& dir, const LoadOptions& options) {
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
  const nlohmann::json tag = x->manifest_.value("device", nlohmann::json("cpu"));
  if (!tag.is_string()) fail("{}: \"device\" is not a string", manifest_path);

  const std::string program_path = (fs::path(dir) / "program.json").string();
  nlohmann::json program = parse_json_file(program_path);
  try {
    x->parse_program(program, program_path);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: malformed program: {}", program_path, e.what());
  }
  DeviceOptions dopt;
  dopt.emulate = options.emulate;
  dopt.cpu_threads = options.cpu_threads;
  const nlohmann::json denormals = program.value("denormals", nlohmann::json("keep"));
  if (denormals != "keep" && denormals != "flush")
    fail("{}: \"denormals\" is {} (\"keep\" or \"flush\")", program_path, denormals.dump());
  dopt.flush_denormals = denormals == "flush";
  x->device_ = options.open_device ? options.open_device(tag.get<std::string>(), dopt)
                                   : open_device(tag.get<std::string>(), dopt);
  Device& dev = *x->device_;
  x->place_weights((fs::path(dir) / "weights.bin").string(), program.at("weights_bytes").get<int64_t>(),
                   program.value("weights_checksum", ""));

  bool needs_module = false;
  for (const auto& k : program.at("kernels")) needs_module |= dev.uses_module(k.at("recipe"));
  if (needs_module) x->module_ = dev.load_module(dir);
  x->rebuilt_ = x->module_ && x->module_->rebuilt();
  size_t i = 0;
  for (const auto& k : program.at("kernels")) {
    Step& s = x->steps_[i];
    try {
      s.kernel = dev.make_kernel(k.at("recipe"), x->module_);
    } catch (const Error& e) {
      rethrow_with_context(e, fmt::format("{}: kernel {}", program_path, i));
    }
    ++i;
  }

  if (x->arena_bytes_ > 0) x->arena_ = static_cast<std::byte*>(x->device_buffer(x->arena_bytes_));
  x->ptrs_.assign(x->buffers_.size(), nullptr);
  x->staging_.assign(x->buffers_.size(), nullptr);
  for (size_t b = 0; b < x->buffers_.size(); ++b) {
    const Buffer& buf = x->buffers_[b];
    if (buf.kind == Kind::kWeight) x->ptrs_[b] = const_cast<std::byte*>(x->weights_) + buf.offset;
    if (buf.kind == Kind::kArena) x->ptrs_[b] = x->arena_ + buf.offset;
    if (buf.kind == Kind::kPiece) x->ptrs_[b] = x->piece_ptr(buf);
    if (buf.kind == Kind::kPiece && x->buffers_[static_cast<size_t>(buf.of)].kind == Kind::kOutput)
      x->output_pieces_.push_back(static_cast<int>(b));
    if (!dev.host_memory() && (buf.kind == Kind::kInput || buf.kind == Kind::kOutput))
      x->staging_[b] = x->device_buffer(buf.type.byte_size());
  }
  ProgramView view;
  for (Step& s : x->steps_) view.steps.push_back({s.kernel.get(), s.inputs, s.outputs});
  for (const Buffer& b : x->buffers_) view.is_arena.push_back(b.kind == Kind::kArena);
  view.ptrs = &x->ptrs_;
  x->specialized_ = dev.specialize(view);
  // Replaying a recorded sequence needs buffers that stay put (inputs are staged on the device)
  // and kernels that never need the host in between.
  if (dev.host_memory()) x->replay_why_ = "inputs are read in place (host memory)";
  for (size_t k = 0; k < x->steps_.size() && x->replay_why_.empty(); ++k)
    if (!x->steps_[k].kernel->capturable())
      x->replay_why_ = fmt::format("kernel {} ({}) needs the host between device work", k, x->steps_[k].note);
  if (const char* off = std::getenv("KORCH_NO_DEVICE_REPLAY"); off && *off && std::string(off) != "0" && x->replay_why_.empty())
    x->replay_why_ = "KORCH_NO_DEVICE_REPLAY is set";
  return x;
}

ReorderStats Executable::reorders_per_run() const {
  ReorderStats total;
  for (const Step& s : steps_) {
    ReorderStats r = s.kernel->reorders_per_run();
    total.count += r.count;
    total.bytes += r.bytes;
  }
  return total;
}

void* Executable::piece_ptr(const Buffer& b) const {
  auto* holder = static_cast<std::byte*>(ptrs_[static_cast<size_t>(b.of)]);
  return holder ? holder + b.offset : nullptr;
}

void* Executable::device_buffer(int64_t bytes) {
  void* p = device_->alloc(bytes);
  device_buffers_.push_back(p);
  return p;
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
    else if (kind == "piece") buf.kind = Kind::kPiece;
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
    } else if (buf.kind == Kind::kPiece) {
      buf.of = b.at("of").get<int>();
      buf.offset = b.at("offset").get<int64_t>();
      if (buf.of < 0 || buf.of >= id ||
          (buffers_[buf.of].kind != Kind::kArena && buffers_[buf.of].kind != Kind::kOutput))
        fail("{}: buffer {} ({}) is a piece of buffer {}, which is not an arena or output buffer listed before it",
             path, id, buf.name, buf.of);
      if (buf.offset < 0 || buf.offset % 64 != 0 ||
          buf.offset + buf.type.byte_size() > buffers_[buf.of].type.byte_size())
        fail("{}: buffer {} ({}) at offset {} does not fit in buffer {}", path, id, buf.name, buf.offset, buf.of);
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
    KernelRecipeBase r;
    try {
      r = KernelRecipeBase::from_json(k.at("recipe"));
    } catch (const Error& e) {
      rethrow_with_context(e, fmt::format("{}: kernel {}", path, index));
    }
    const auto& args = k.at("args");
    if (args.size() != r.inputs.size() + r.outputs.size())
      fail("{}: kernel {} has {} arguments for {} inputs and {} outputs", path, index, args.size(), r.inputs.size(),
           r.outputs.size());
    Step s;
    for (size_t a = 0; a < args.size(); ++a) {
      int id = buffer_ref(args[a], "a kernel argument");
      bool is_input = a < r.inputs.size();
      const TensorType& want = is_input ? r.inputs[a] : r.outputs[a - r.inputs.size()];
      if (buffers_[id].type != want)
        fail("{}: kernel {} argument {} is buffer {} of type {}, but the kernel takes {}", path, index, a, id,
             type_str(buffers_[id].type), type_str(want));
      if (!is_input && (buffers_[id].kind == Kind::kInput || buffers_[id].kind == Kind::kWeight))
        fail("{}: kernel {} writes buffer {}, an input or weight", path, index, id);
      (is_input ? s.inputs : s.outputs).push_back(id);
    }
    s.in_ptrs.resize(s.inputs.size());
    s.out_ptrs.resize(s.outputs.size());
    s.note = k.value("note", std::string());
    steps_.push_back(std::move(s));
  }
  micro_batches_ = j.value("micro_batches", int64_t{1});
  if (micro_batches_ < 1) fail("{}: micro_batches is {}", path, micro_batches_);
  if (micro_batches_ > 1) {  // the buffers hold one micro-batch; a run takes micro_batches of them
    for (auto* types : {&input_types_, &output_types_})
      for (TensorType& t : *types) {
        if (t.shape.empty())
          fail("{}: micro_batches is {} but an input or output ({}) has no batch dimension", path, micro_batches_,
               type_str(t));
        t.shape[0] *= micro_batches_;
      }
  }
  const auto& m = j.at("memory");
  memory_.arena_bytes = m.at("arena_bytes").get<int64_t>();
  memory_.unfused_arena_bytes = m.at("unfused_arena_bytes").get<int64_t>();
  memory_.intermediate_bytes = m.at("intermediate_bytes").get<int64_t>();
  memory_.weights_bytes = m.at("weights_bytes").get<int64_t>();
}

void Executable::place_weights(const std::string& path, int64_t bytes, const std::string& checksum) {
  if (checksum.empty()) fail("{}: program.json has no weights_checksum (an older Korch made it): compile again", path);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_io("cannot open {}: {}", path, std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size != bytes) {
    ::close(fd);
    fail_io("{} holds {} bytes but program.json says {}: not the weights this artifact was compiled with", path,
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
  if (const std::string got = bytes_checksum(weights_, static_cast<size_t>(bytes)); got != checksum)
    fail_io("{}: checksum {} but program.json says {}: the weights were changed or damaged after compile", path, got,
            checksum);
  if (bytes > 0 && !device_->host_memory()) {  // upload once; the mapping is not needed after
    auto* copy = static_cast<std::byte*>(device_buffer(bytes));
    device_->upload(copy, weights_, bytes);
    munmap(const_cast<std::byte*>(weights_), weights_map_bytes_);
    weights_map_bytes_ = 0;
    weights_ = copy;
  }
}

Executable::~Executable() {
  replay_.reset();  // the recorded sequence before the kernels and buffers it names
  steps_.clear();  // kernels before the module and buffers they point into
  module_.reset();
  if (weights_map_bytes_) munmap(const_cast<std::byte*>(weights_), weights_map_bytes_);
  for (void* p : device_buffers_) device_->free(p);
}

std::vector<Tensor> Executable::run(const std::vector<Tensor>& inputs) {
  if (inputs.size() != input_buffers_.size())
    fail("the artifact takes {} inputs ({}), got {}", input_buffers_.size(), fmt::join(input_names_, ", "),
         inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].type() != input_types_[i])
      fail("input '{}' expects {} but got {}", input_names_[i], type_str(input_types_[i]), type_str(inputs[i].type()));
  std::vector<Tensor> outputs;
  outputs.reserve(output_buffers_.size());
  for (const TensorType& t : output_types_) outputs.emplace_back(t);
  // The device's floating-point mode for the run (Device::begin_run), put back however it ends.
  const Device::RunScope scope(*device_);
  for (int64_t m = 0; m < micro_batches_; ++m) run_micro_batch(inputs, outputs, m);
  device_->synchronize();
  return outputs;
}

void Executable::run_micro_batch(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, int64_t m) {
  Device& dev = *device_;
  // Where micro-batch m lies in a graph input or output: the buffers hold one micro-batch (the whole
  // tensor unless micro-batched).
  const auto at = [&](int id, auto* base) {
    return base + static_cast<size_t>(m * buffers_[static_cast<size_t>(id)].type.byte_size());
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int id = input_buffers_[i];
    const size_t b = static_cast<size_t>(id);
    if (dev.host_memory()) {
      ptrs_[b] = const_cast<std::byte*>(at(id, inputs[i].raw()));
    } else {
      dev.upload(staging_[b], at(id, inputs[i].raw()), buffers_[b].type.byte_size());
      ptrs_[b] = staging_[b];
    }
  }
  for (size_t o = 0; o < output_buffers_.size(); ++o) {
    const int id = output_buffers_[o];
    ptrs_[static_cast<size_t>(id)] = dev.host_memory() ? at(id, outputs[o].raw()) : staging_[static_cast<size_t>(id)];
  }
  for (int b : output_pieces_) ptrs_[static_cast<size_t>(b)] = piece_ptr(buffers_[static_cast<size_t>(b)]);
  if (step_timing_) {
    double t_prev = dev.synchronized_seconds();
    for (Step& s : steps_) {
      issue(s);
      const double t = dev.synchronized_seconds();
      s.samples.push_back(t - t_prev);
      t_prev = t;
    }
  } else if (replay_) {
    replay_->launch();
  } else {
    // The first run is eager (libraries pick algorithms and allocate then); the next records the
    // sequence once, and every run after replays it.
    if (eager_runs_ > 0 && replay_why_.empty()) {
      std::string why;
      replay_ = dev.capture([&] { for (Step& s : steps_) issue(s); }, &why);
      replay_why_ = replay_ ? "" : (why.empty() ? "recording failed" : why);
    }
    if (replay_) {
      replay_->launch();
    } else {
      for (Step& s : steps_) issue(s);
      ++eager_runs_;
    }
  }
  for (size_t o = 0; o < output_buffers_.size(); ++o) {
    const size_t id = static_cast<size_t>(output_buffers_[o]);
    const Buffer& b = buffers_[id];
    const int64_t bytes = b.type.byte_size();
    if (bytes == 0) continue;
    const void* from = b.copy_from >= 0 ? ptrs_[static_cast<size_t>(b.copy_from)] : (dev.host_memory() ? nullptr : ptrs_[id]);
    if (!from) continue;  // written in place
    if (dev.host_memory())
      std::memcpy(at(output_buffers_[o], outputs[o].raw()), from, static_cast<size_t>(bytes));
    else
      dev.download(at(output_buffers_[o], outputs[o].raw()), from, bytes);
  }
}

void Executable::issue(Step& s) {
  for (size_t a = 0; a < s.inputs.size(); ++a) s.in_ptrs[a] = ptrs_[static_cast<size_t>(s.inputs[a])];
  for (size_t a = 0; a < s.outputs.size(); ++a) s.out_ptrs[a] = ptrs_[static_cast<size_t>(s.outputs[a])];
  s.kernel->run(s.in_ptrs.data(), s.out_ptrs.data());
}

std::string Executable::replay_status() const {
  if (replay_) return fmt::format("one recorded sequence of {} kernels, replayed each run", steps_.size());
  if (!replay_why_.empty()) return "kernels issued one by one: " + replay_why_;
  return "kernels issued one by one (a sequence is recorded from the second run)";
}

std::vector<Executable::StepTime> Executable::step_times() const {
  std::vector<StepTime> out;
  for (size_t i = 0; i < steps_.size(); ++i) {
    int64_t bytes = 0;
    for (const std::vector<int>* ids : {&steps_[i].inputs, &steps_[i].outputs})
      for (int id : *ids) bytes += buffers_[static_cast<size_t>(id)].type.byte_size();
    out.push_back({static_cast<int>(i), steps_[i].note, steps_[i].samples, bytes});
  }
  return out;
}

double Executable::step_timer_seconds() {
  Device& dev = *device_;
  std::vector<double> per_read;
  for (int batch = 0; batch < 9; ++batch) {
    const double t0 = dev.synchronized_seconds();
    double t = t0;
    for (int i = 0; i < 50; ++i) t = dev.synchronized_seconds();
    per_read.push_back((t - t0) / 50);
  }
  std::nth_element(per_read.begin(), per_read.begin() + 4, per_read.end());
  return per_read[4];
}

void Executable::set_step_timing(bool on) {
  step_timing_ = on;
  for (Step& s : steps_) s.samples.clear();
}

}  // namespace korch::runtime
