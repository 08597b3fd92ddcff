// The CUDA host emulator on handwritten CUDA: block barriers with shared memory, every shuffle
// flavour and type, warp barriers, barrier-free launches, and the errors (divergent barriers
// must throw, not hang).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "codegen/cuda/cuda_compiler.h"
#include "codegen/cuda/cuda_loop_emitter.h"
#include "runtime/cuda/cuda_emulator.h"
#include "support/error.h"

namespace korch::cuda {
namespace {

const char* kSource = R"(
// Block sum by a shared-memory tree: out[blockIdx.x] = sum of the block's 256 inputs.
extern "C" __global__ void __launch_bounds__(256) tree_sum(korch_args a) {
  __shared__ float s[256];
  const float* x = (const float*)a.p[0];
  float* out = (float*)a.p[1];
  s[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
    if (threadIdx.x < h) s[threadIdx.x] += s[threadIdx.x + h];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

// Every shuffle on every type: out[t * 64 + k] for test k of thread t (width 32 and 8).
template <class T> __device__ void shuffles(T v, double* o) {
  o[0] = (double)__shfl_down_sync(0xffffffffu, v, 3);
  o[1] = (double)__shfl_up_sync(0xffffffffu, v, 5);
  o[2] = (double)__shfl_xor_sync(0xffffffffu, v, 6);
  o[3] = (double)__shfl_sync(0xffffffffu, v, 7);
  o[4] = (double)__shfl_down_sync(0xffffffffu, v, 3, 8);
  o[5] = (double)__shfl_up_sync(0xffffffffu, v, 2, 8);
  o[6] = (double)__shfl_xor_sync(0xffffffffu, v, 5, 8);
  o[7] = (double)__shfl_sync(0xffffffffu, v, 9, 8);
}
extern "C" __global__ void __launch_bounds__(64) all_shuffles(korch_args a) {
  double* out = (double*)a.p[0];
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  double* o = out + t * 40;
  shuffles<float>((float)t + 0.5f, o);
  shuffles<double>((double)t + 0.25, o + 8);
  shuffles<int>((int)t - 20, o + 16);
  shuffles<long long>((long long)t * 3000000000LL, o + 24);
  shuffles<unsigned>(t * 7u, o + 32);
}

// __syncwarp orders a warp's shared-memory writes before its reads.
extern "C" __global__ void __launch_bounds__(64) warp_reverse(korch_args a) {
  __shared__ int s[64];
  int* out = (int*)a.p[0];
  s[threadIdx.x] = (int)(threadIdx.x * threadIdx.x);
  __syncwarp();
  const unsigned base = threadIdx.x & ~31u;
  out[blockIdx.x * 64 + threadIdx.x] = s[base + 31 - (threadIdx.x & 31)];
}

// Barrier-free: a grid-stride axpy.
extern "C" __global__ void __launch_bounds__(128) axpy(korch_args a) {
  const float* x = (const float*)a.p[0];
  float* y = (float*)a.p[1];
  const int n = *(const int*)a.p[2];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] += 2.0f * x[i];
}

// Divergent barriers: half the block skips __syncthreads / half the warp skips a shuffle.
extern "C" __global__ void __launch_bounds__(64) divergent_sync(korch_args a) {
  float* out = (float*)a.p[0];
  if (threadIdx.x < 16) __syncthreads();
  out[threadIdx.x] = 1.0f;
}
extern "C" __global__ void __launch_bounds__(64) divergent_shuffle(korch_args a) {
  float* out = (float*)a.p[0];
  float v = (float)threadIdx.x;
  if (threadIdx.x & 1) v = __shfl_xor_sync(0xffffffffu, v, 1);
  out[threadIdx.x] = v;
}
// Half of each warp at a block barrier, the other half at a shuffle.
extern "C" __global__ void __launch_bounds__(64) mixed_barriers(korch_args a) {
  float* out = (float*)a.p[0];
  float v = (float)threadIdx.x;
  if (threadIdx.x & 1) __syncthreads();
  else v = __shfl_xor_sync(0xffffffffu, v, 2);
  out[threadIdx.x] = v;
}
extern "C" __global__ void __launch_bounds__(64) misaligned(korch_args a) {
  float* x = (float*)a.p[0];
  if (threadIdx.x == 0) korch_st4(x + 1, make_float4(1.f, 2.f, 3.f, 4.f));
}
)";

std::shared_ptr<EmulatedModule> module() {
  static std::shared_ptr<EmulatedModule> m = EmulatedModule::compile(cuda_prelude() + kSource);
  return m;
}

template <class T>
double shfl_expect(int k, const std::vector<T>& v, int t) {
  const int lane = t % 32, warp0 = t - lane;
  auto at = [&](int l) { return static_cast<double>(v[static_cast<size_t>(warp0 + l)]); };
  auto seg = [&](int w) { return lane & ~(w - 1); };
  switch (k) {
    case 0: return lane + 3 < 32 ? at(lane + 3) : at(lane);
    case 1: return lane - 5 >= 0 ? at(lane - 5) : at(lane);
    case 2: return at(lane ^ 6);
    case 3: return at(7);
    case 4: return lane + 3 < seg(8) + 8 ? at(lane + 3) : at(lane);
    case 5: return lane - 2 >= seg(8) ? at(lane - 2) : at(lane);
    case 6: return (lane ^ 5) < seg(8) + 8 ? at(lane ^ 5) : at(lane);
    default: return at(seg(8) + (9 & 7));
  }
}

TEST(CudaEmulator, SharedMemoryTreeWithSyncthreads) {
  std::vector<float> x(256 * 5), out(5, 0.f);
  std::iota(x.begin(), x.end(), 0.f);
  void* args[] = {x.data(), out.data()};
  module()->launch(CudaLaunch{"tree_sum", 5, 256, true}, args, 2);
  for (int b = 0; b < 5; ++b) {
    double want = 0;
    for (int i = 0; i < 256; ++i) want += x[static_cast<size_t>(b * 256 + i)];
    EXPECT_EQ(out[static_cast<size_t>(b)], static_cast<float>(want)) << b;
  }
}

TEST(CudaEmulator, EveryShuffleFlavourAndType) {
  const int n = 3 * 64;
  std::vector<double> out(static_cast<size_t>(n) * 40, -1);
  void* args[] = {out.data()};
  module()->launch(CudaLaunch{"all_shuffles", 3, 64, true}, args, 1);
  std::vector<float> vf;
  std::vector<double> vd;
  std::vector<int> vi;
  std::vector<long long> vl;
  std::vector<unsigned> vu;
  for (int t = 0; t < n; ++t) {
    vf.push_back(static_cast<float>(t) + 0.5f);
    vd.push_back(t + 0.25);
    vi.push_back(t - 20);
    vl.push_back(static_cast<long long>(t) * 3000000000LL);
    vu.push_back(static_cast<unsigned>(t) * 7u);
  }
  for (int t = 0; t < n; ++t)
    for (int k = 0; k < 8; ++k) {
      const double* o = out.data() + t * 40;
      EXPECT_EQ(o[k], shfl_expect(k, vf, t)) << "float test " << k << " thread " << t;
      EXPECT_EQ(o[8 + k], shfl_expect(k, vd, t)) << "double test " << k << " thread " << t;
      EXPECT_EQ(o[16 + k], shfl_expect(k, vi, t)) << "int test " << k << " thread " << t;
      EXPECT_EQ(o[24 + k], shfl_expect(k, vl, t)) << "long long test " << k << " thread " << t;
      EXPECT_EQ(o[32 + k], shfl_expect(k, vu, t)) << "unsigned test " << k << " thread " << t;
    }
}

TEST(CudaEmulator, SyncwarpOrdersSharedMemory) {
  std::vector<int> out(128, -1);
  void* args[] = {out.data()};
  module()->launch(CudaLaunch{"warp_reverse", 2, 64, true}, args, 1);
  for (int t = 0; t < 128; ++t) {
    const int tx = t % 64, src = (tx & ~31) + 31 - (tx & 31);
    EXPECT_EQ(out[static_cast<size_t>(t)], src * src) << t;
  }
}

TEST(CudaEmulator, BarrierFreeLaunchRunsThreadByThread) {
  const int n = 100000;
  std::vector<float> x(n), y(n, 1.f);
  for (int i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 97);
  int count = n;
  void* args[] = {x.data(), y.data(), &count};
  module()->launch(CudaLaunch{"axpy", 37, 128, false}, args, 3);
  for (int i = 0; i < n; ++i) ASSERT_EQ(y[static_cast<size_t>(i)], 1.f + 2.f * x[static_cast<size_t>(i)]) << i;
}

void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(CudaEmulator, DivergentBarriersThrowInsteadOfHanging) {
  std::vector<float> out(64);
  void* args[] = {out.data()};
  expect_error([&] { module()->launch(CudaLaunch{"divergent_sync", 4, 64, true}, args, 1); }, "barrier deadlock in divergent_sync");
  expect_error([&] { module()->launch(CudaLaunch{"divergent_shuffle", 1, 64, true}, args, 1); },
               "barrier deadlock in divergent_shuffle");
  expect_error([&] { module()->launch(CudaLaunch{"mixed_barriers", 1, 64, true}, args, 1); },
               "16 threads wait at a warp barrier or shuffle while 16 wait at __syncthreads");
  // The abandoned fibers are rebuilt: the next launch on the same threads is fine.
  std::vector<int> rev(64, -1);
  void* rargs[] = {rev.data()};
  module()->launch(CudaLaunch{"warp_reverse", 1, 64, true}, rargs, 1);
  EXPECT_EQ(rev[0], 31 * 31);
}

TEST(CudaEmulator, LaunchErrors) {
  std::vector<float> out(64);
  void* args[] = {out.data()};
  expect_error([&] { module()->launch(CudaLaunch{"no_such_kernel", 1, 32, false}, args, 1); }, "no such function");
  expect_error([&] { module()->launch(CudaLaunch{"axpy", 1, 2048, false}, args, 1); }, "block of 2048 threads");
  expect_error([&] { module()->launch(CudaLaunch{"tree_sum", 1, 48, true}, args, 1); }, "a multiple of 32");
  std::vector<void*> many(kMaxKernelArgs + 1, out.data());
  expect_error([&] { module()->launch(CudaLaunch{"axpy", 1, 32, false}, many.data(), kMaxKernelArgs + 1); }, "arguments");
  // A kernel that synchronises, launched as barrier-free.
  std::vector<float> x(256, 1.f), o(1);
  void* targs[] = {x.data(), o.data()};
  expect_error([&] { module()->launch(CudaLaunch{"tree_sum", 1, 256, false}, targs, 2); }, "barriers=false");
  alignas(16) float buf[8] = {};
  void* margs[] = {buf};
  expect_error([&] { module()->launch(CudaLaunch{"misaligned", 1, 64, false}, margs, 1); }, "misaligned float4");
  EXPECT_TRUE(module()->has("axpy"));
  EXPECT_FALSE(module()->has("axpy2"));
}

TEST(CudaEmulator, CompileErrorNamesTheSource) {
  expect_error([] { EmulatedModule::compile(cuda_prelude() + "extern \"C\" __global__ void broken(korch_args a) { undefined_thing(); }\n"); },
               "does not compile");
}

TEST(CudaEmulator, HandwrittenSourceIsValidCuda) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  std::vector<PtxModule> m = compile_to_ptx({cuda_prelude() + kSource});
  EXPECT_NE(m[0].ptx.find(".entry all_shuffles("), std::string::npos);
  expect_error([] { compile_to_ptx({cuda_prelude() + "extern \"C\" __global__ void broken(korch_args a) { nope(); }\n"}); },
               ".cu does not compile");
}

}  // namespace
}  // namespace korch::cuda
