// The devices of CUDA artifacts (runtime/device.h):
//   * the GPU itself: the driver is loaded at run time (cuda_driver.h); without one, opening it
//     fails with one line naming what is missing. Running kernels on a GPU (device memory plan,
//     CUDA graphs, cuBLASLt/cuDNN) is the CUDA runtime's work and is not built yet: with a GPU
//     present, opening it says so.
//   * the host emulator (DeviceOptions::emulate): the artifact's CUDA source compiled for this CPU
//     with cuda_emulator.h, host memory, linear steps on oneDNN, reference ops in the interpreter.
//     For tests and machines without a GPU; it is an emulation, not a GPU: its timings mean nothing.
#pragma once

#include <memory>

#include "runtime/device.h"

namespace korch::cuda {

std::unique_ptr<runtime::Device> open_cuda_device(const runtime::DeviceOptions& options);

// The host emulator device ("cuda-emulator"), and a module of it from a compiled unit.
class EmulatedModule;
std::unique_ptr<runtime::Device> make_emulator_device();
std::shared_ptr<runtime::KernelModule> emulated_module(std::shared_ptr<EmulatedModule> m);

}  // namespace korch::cuda
