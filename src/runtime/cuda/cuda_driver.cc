#include "runtime/cuda/cuda_driver.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>

namespace korch::cuda {

namespace {

// The few driver entry points the probe needs (CUDA driver API, cuda.h): plain C, int results.
using CuInit = int (*)(unsigned);
using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetAttribute = int (*)(int*, int, int);
using CuDeviceGetName = int (*)(char*, int, int);
constexpr int kAttrComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrComputeCapabilityMinor = 76;

void* driver_handle = nullptr;  // set by probe(); kept open for the GPU runtime (cuda_api.h)

GpuInfo probe() {
  GpuInfo info;
  const char* lib = std::getenv("KORCH_CUDA_DRIVER");
  if (!lib || !*lib) lib = "libcuda.so.1";
  void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    info.why = fmt::format("no NVIDIA driver: {} does not load ({})", lib, dlerror());
    return info;
  }
  auto sym = [&](const char* name) { return dlsym(h, name); };
  auto init = reinterpret_cast<CuInit>(sym("cuInit"));
  auto count = reinterpret_cast<CuDeviceGetCount>(sym("cuDeviceGetCount"));
  auto get = reinterpret_cast<CuDeviceGet>(sym("cuDeviceGet"));
  auto attr = reinterpret_cast<CuDeviceGetAttribute>(sym("cuDeviceGetAttribute"));
  auto name = reinterpret_cast<CuDeviceGetName>(sym("cuDeviceGetName"));
  if (!init || !count || !get || !attr || !name) {
    info.why = fmt::format("{} lacks the CUDA driver API (cuInit ...)", lib);
    return info;
  }
  if (int rc = init(0); rc != 0) {
    info.why = fmt::format("the NVIDIA driver does not initialise (cuInit error {}): no usable GPU", rc);
    return info;
  }
  int n = 0;
  if (count(&n) != 0 || n < 1) {
    info.why = "the NVIDIA driver sees no GPU";
    return info;
  }
  int dev = 0;
  char buf[256] = {0};
  if (get(&dev, 0) != 0 || attr(&info.major, kAttrComputeCapabilityMajor, dev) != 0 ||
      attr(&info.minor, kAttrComputeCapabilityMinor, dev) != 0 || name(buf, sizeof buf - 1, dev) != 0) {
    info.why = "the NVIDIA driver cannot describe GPU 0";
    return info;
  }
  info.name = buf;
  info.available = true;
  driver_handle = h;
  return info;  // the handle stays open: later CUDA calls use the same driver
}

}  // namespace

std::string GpuInfo::arch() const { return fmt::format("sm_{}{}", major, minor); }

const GpuInfo& probe_gpu() {
  static const GpuInfo info = probe();
  return info;
}

void* driver_library() {
  probe_gpu();
  return driver_handle;
}

}  // namespace korch::cuda
