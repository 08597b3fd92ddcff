// The text that turns a CUDA translation unit into host C++ (see cuda_emulator.h).
//
// The module gets no dependency on Boost or Korch: it sees the scheduler only through the
// korch_emu_ops function pointers in each thread's context, and gives the scheduler two
// extern "C" entries (run one thread as a fiber; run barrier-free blocks thread by thread).
// The context layout is mirrored by EmuThread in cuda_emulator.cc; korch_emu_abi() lets the
// loader check that both sides agree.
#include "runtime/cuda/cuda_emulator.h"

namespace korch::cuda {

const std::string& emulation_header() {
  static const std::string text = R"KORCH(// ---- korch CUDA emulation header (host C++ for a CUDA translation unit) ----
#define KORCH_CUDA_EMULATION 1
#include <math.h>
#include <stdint.h>
#include <string.h>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
// Shared memory is per block: blocks of one OS thread run one after another, and all fibers of
// a block run on that OS thread, so per-thread static storage is per block.
#define __shared__ static thread_local
#define KORCH_MAX_ARGS 128
// On the host a kernel receives a pointer to the slot array instead of KORCH_MAX_ARGS pointers
// by value: one call per emulated thread would otherwise copy 1 KiB. Kernels only read a.p[i].
struct korch_args { void* const* p; };
struct uint3 { unsigned x, y, z; };
typedef uint3 dim3;
struct korch_emu_thread;
struct korch_emu_ops {
  void (*barrier)(korch_emu_thread* t, int kind);  // 0: the block (__syncthreads), 1: the warp
  void (*fail)(korch_emu_thread* t, const char* what);  // recorded; the launch throws afterwards
};
struct korch_emu_thread {
  uint3 thread_idx, block_idx, block_dim, grid_dim;
  const korch_emu_ops* ops;
  void* sched;                // the scheduler's fiber
  unsigned char* warp_slots;  // this thread's warp: 2 phases x 32 lanes x 8 bytes
  unsigned lane, shfl_phase;
};
#define KORCH_EMU_ABI 1u
// The running thread's context; the scheduler's barrier returns on the same OS thread, and the
// value is put back after every barrier (another fiber of the block ran meanwhile).
static thread_local korch_emu_thread* korch_emu_self;
#define threadIdx (korch_emu_self->thread_idx)
#define blockIdx (korch_emu_self->block_idx)
#define blockDim (korch_emu_self->block_dim)
#define gridDim (korch_emu_self->grid_dim)
#define warpSize 32
static inline void korch_emu_fail(const char* what) { korch_emu_self->ops->fail(korch_emu_self, what); }
static inline void __syncthreads() {
  korch_emu_thread* me = korch_emu_self;
  me->ops->barrier(me, 0);
  korch_emu_self = me;
}
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
  korch_emu_thread* me = korch_emu_self;
  if (mask != 0xffffffffu) me->ops->fail(me, "__syncwarp with a partial mask is not emulated");
  me->ops->barrier(me, 1);
  korch_emu_self = me;
}
// A shuffle: every lane writes its value to its slot, a warp barrier, every lane reads its
// source's slot. Two slot sets alternate, so one barrier per shuffle suffices: a lane writes a
// set again only after the next shuffle's barrier, which every lane reaches after its read.
template <class T> static inline T korch_emu_exchange(unsigned mask, T v, int src) {
  static_assert(sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
  korch_emu_thread* me = korch_emu_self;
  if (mask != 0xffffffffu) me->ops->fail(me, "warp shuffles with a partial mask are not emulated");
  unsigned char* slots = me->warp_slots + (me->shfl_phase++ & 1u) * 256u;
  memcpy(slots + me->lane * 8u, &v, sizeof(T));
  me->ops->barrier(me, 1);
  korch_emu_self = me;
  T r;
  memcpy(&r, slots + (unsigned)src * 8u, sizeof(T));
  return r;
}
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  const int lane = (int)korch_emu_self->lane, seg = lane & ~(width - 1);
  return korch_emu_exchange(mask, v, seg + (src & (width - 1)));
}
template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const int lane = (int)korch_emu_self->lane, seg = lane & ~(width - 1), s = lane + (int)delta;
  return korch_emu_exchange(mask, v, s < seg + width ? s : lane);
}
template <class T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const int lane = (int)korch_emu_self->lane, seg = lane & ~(width - 1), s = lane - (int)delta;
  return korch_emu_exchange(mask, v, s >= seg ? s : lane);
}
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  // As on the GPU: a lane may read its own or an earlier width-group, never a later one.
  const int lane = (int)korch_emu_self->lane, seg = lane & ~(width - 1), s = lane ^ lane_mask;
  return korch_emu_exchange(mask, v, s < seg + width ? s : lane);
}
static inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
static inline int __float_as_int(float f) { int x; memcpy(&x, &f, 4); return x; }
static inline float __uint_as_float(unsigned x) { float f; memcpy(&f, &x, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned x; memcpy(&x, &f, 4); return x; }
static inline double __longlong_as_double(long long x) { double d; memcpy(&d, &x, 8); return d; }
static inline long long __double_as_longlong(double d) { long long x; memcpy(&x, &d, 8); return x; }
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(16) double2 { double x, y; };
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline int2 make_int2(int x, int y) { return int2{x, y}; }
static inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
static inline double2 make_double2(double x, double y) { return double2{x, y}; }
template <class T> static inline T __ldg(const T* p) { return *p; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long min(long a, long b) { return a < b ? a : b; }
static inline long max(long a, long b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
// float4 accesses: a misaligned address faults on the GPU, so it is an error here too.
static inline void korch_emu_check16(const void* p) {
  if ((uintptr_t)p & 15u) korch_emu_fail("misaligned float4 access (the GPU needs 16-byte alignment)");
}
static inline float4 korch_ld4(const float* p) { korch_emu_check16(p); float4 v; memcpy(&v, p, 16); return v; }
static inline void korch_st4(float* p, float4 v) { korch_emu_check16(p); memcpy(p, &v, 16); }
extern "C" unsigned korch_emu_abi(void) { return (KORCH_EMU_ABI << 16) | (unsigned)sizeof(korch_emu_thread); }
// One thread of a block with barriers (called on the thread's fiber).
extern "C" void korch_emu_call(void* fn, void* const* args, korch_emu_thread* t) {
  korch_emu_self = t;
  korch_args a = {args};
  ((void (*)(korch_args))fn)(a);
}
// Barrier-free blocks [b0, b1), thread by thread as plain calls.
extern "C" void korch_emu_run_plain(void* fn, void* const* args, korch_emu_thread* t, long long b0, long long b1) {
  korch_args a = {args};
  void (*f)(korch_args) = (void (*)(korch_args))fn;
  korch_emu_self = t;
  const unsigned n = t->block_dim.x;
  for (long long b = b0; b < b1; ++b) {
    t->block_idx.x = (unsigned)b;
    for (unsigned x = 0; x < n; ++x) {
      t->thread_idx.x = x;
      t->lane = x & 31u;
      f(a);
    }
  }
}
// ---- end of emulation header ----
)KORCH";
  return text;
}

}  // namespace korch::cuda
