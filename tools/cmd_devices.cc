// korch devices: the backends this machine can compile for, run on and time, and why not.
#include <thread>

#include <nlohmann/json.hpp>

#include "codegen/cuda/cuda_compiler.h"
#include "commands.h"
#include "runtime/cpu/cpu_device_id.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/cuda_library.h"

namespace korch::cli {

Command add_devices(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  app.add_flag("--json", *json, "Print JSON instead of lines");
  app.footer("Examples:\n  korch devices\n  korch devices --json");
  return [json]() {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    const std::string cpu = cpu_device_id(cores);
    const cuda::GpuInfo& gpu = cuda::probe_gpu();
    std::string nvrtc_why;
    const bool nvrtc = cuda::nvrtc_available(&nvrtc_why);
    const bool cuda_runs = gpu.available && nvrtc;
    std::string cuda_why = !gpu.available ? gpu.why : !nvrtc ? nvrtc_why : "";
    // The libraries linear steps call (loaded only with a GPU: cuDNN needs a device to start).
    const std::vector<std::string> libraries =
        gpu.available ? cuda::describe_gpu_libraries() : std::vector<std::string>{};
    if (*json) {
      nlohmann::json j = {
          {"cpu", {{"compile", true}, {"run", true}, {"measure", true}, {"id", cpu}, {"cores", cores}}},
          {"cuda",
           {{"compile", true},
            {"run", cuda_runs},
            {"measure", cuda_runs},
            {"gpu", gpu.available ? gpu.name + " (" + gpu.arch() + ")" : ""},
            {"nvrtc", nvrtc ? cuda::nvrtc_version() : ""},
            {"libraries", libraries},
            {"why_not", cuda_why}}}};
      fmt::print("{}\n", j.dump(2));
      return 0;
    }
    fmt::print("cpu   compile, run, measured costs: {} ({} cores)\n", cpu.substr(4), cores);
    if (cuda_runs)
      fmt::print("cuda  compile, run, measured costs: {} ({}), NVRTC {}; {}\n", gpu.name, gpu.arch(), cuda::nvrtc_version(),
                 fmt::join(libraries, "; "));
    else
      fmt::print("cuda  compile only (analytic costs over --device-spec; kernels checked on the host emulator): {}\n",
                 cuda_why);
    return 0;
  };
}

}  // namespace korch::cli
