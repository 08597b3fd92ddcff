// Runs a Korch artifact from C++: the smallest program that embeds the runtime.
//
//   korch_run_artifact_example ARTIFACT_DIR [INPUT_DIR]
//
// Inputs come from INPUT_DIR/<input name>.npy (names sanitised as `korch run` does) or are zeros;
// prints each output's type and first values, then the median time of 20 more runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "ir/tensor_io.h"
#include "runtime/executable.h"
#include "support/error.h"
#include "support/strings.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s ARTIFACT_DIR [INPUT_DIR]\n", argv[0]);
    return 1;
  }
  try {
    auto exe = korch::runtime::Executable::load(argv[1]);
    std::vector<korch::Tensor> inputs;
    for (size_t i = 0; i < exe->input_names().size(); ++i) {
      if (argc == 3) {
        auto path = std::filesystem::path(argv[2]) / (korch::sanitize_name(exe->input_names()[i]) + ".npy");
        inputs.push_back(korch::load_npy(path.string()));
      } else {
        inputs.emplace_back(exe->input_types()[i]);  // zeros
      }
    }
    std::vector<korch::Tensor> outputs = exe->run(inputs);  // also the warm-up for the timing below
    std::vector<double> times;
    for (int r = 0; r < 20; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      exe->run(inputs);
      times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(times.begin(), times.end());
    for (size_t o = 0; o < outputs.size(); ++o) {
      std::string first;
      for (int64_t e = 0; e < std::min<int64_t>(outputs[o].numel(), 5); ++e)
        first += fmt::format("{}{:.6g}", e ? ", " : "", outputs[o].get_as_double(e));
      fmt::print("{} {} [{}{}]\n", exe->output_names()[o], korch::type_str(outputs[o].type()), first,
                 outputs[o].numel() > 5 ? ", ..." : "");
    }
    auto mem = exe->memory();
    fmt::print("{} kernels, median of 20 runs {:.3f} ms; arena {} bytes (unfused {}), weights {} bytes{}\n",
               exe->kernel_count(), times[times.size() / 2], mem.arena_bytes, mem.unfused_arena_bytes,
               mem.weights_bytes, exe->rebuilt_library() ? "; rebuilt kernels/libkernels.so" : "");
  } catch (const korch::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
