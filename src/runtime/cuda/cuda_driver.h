// The NVIDIA driver, loaded at run time (dlopen "libcuda.so.1"): Korch never links it, so the
// binary starts and runs the CPU backend on machines without a GPU or driver.
#pragma once

#include <string>

namespace korch::cuda {

struct GpuInfo {
  bool available = false;
  std::string why;       // when !available: one line naming what is missing
  std::string name;      // device 0's name, e.g. "NVIDIA H200"
  int major = 0, minor = 0;  // compute capability
  std::string arch() const;  // "sm_90"
};

// Loads the driver (once), initialises it and reads device 0. Never throws.
const GpuInfo& probe_gpu();

// The driver library probe_gpu() loaded (dlopen handle), null when no GPU is usable.
void* driver_library();

}  // namespace korch::cuda
