// The devices of CUDA artifacts (runtime/device.h):
//   * the GPU itself (cuda_gpu.cc): the driver is loaded at run time (cuda_driver.h); without
//     one, opening it fails with one line naming what is missing. Device memory for the arena,
//     weights uploaded once, generated kernels from the artifact's PTX, linear steps on cuBLASLt
//     and cuDNN (cuda_library.h), reference ops through host copies, and the kernel sequence
//     recorded once as a CUDA graph and replayed (Device::capture). Needs the toolkit's headers
//     at build time (KORCH_HAVE_CUDA_HEADERS), never its libraries at link time.
//   * the host emulator (DeviceOptions::emulate): the artifact's CUDA source compiled for this CPU
//     with cuda_emulator.h, host memory, linear steps on oneDNN, reference ops in the interpreter.
//     For tests and machines without a GPU; it is an emulation, not a GPU: its timings mean nothing.
#pragma once

#include <memory>
#include <string>

#include "runtime/device.h"

namespace korch::cuda {

std::unique_ptr<runtime::Device> open_cuda_device(const runtime::DeviceOptions& options);

// The host emulator device ("cuda-emulator"), and a module of it from a compiled unit.
class EmulatedModule;
std::unique_ptr<runtime::Device> make_emulator_device();

// The GPU device and a module of it from PTX text (`where` names it in messages). Throw
// korch::Error (kUnsupported) without a GPU or without the CUDA headers at build time.
std::unique_ptr<runtime::Device> make_gpu_device();
std::shared_ptr<runtime::KernelModule> gpu_module(const std::string& ptx, const std::string& where);
std::shared_ptr<runtime::KernelModule> emulated_module(std::shared_ptr<EmulatedModule> m);

}  // namespace korch::cuda
