#include "runtime/cpu/cpu_device.h"

#include <omp.h>
#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/cpu/cpu_device_id.h"
#include "runtime/cpu/cpu_kernel.h"
#include "runtime/cpu/cpu_linear_step.h"
#include "runtime/cpu/cpu_module.h"
#include "support/error.h"

namespace korch::cpu {

CpuDevice::CpuDevice(int threads, bool flush_denormals) : threads_(threads), flush_denormals_(flush_denormals) {
  if (threads_ > 0) set_cpu_threads(threads_);
}

#if defined(__x86_64__) || defined(__i386__)
namespace {
constexpr unsigned kFtzDaz = 0x8040;  // MXCSR bit 15: flush to zero; bit 6: denormals are zero
}  // namespace

void CpuDevice::begin_run() {
  if (!flush_denormals_) return;
  saved_csr_.assign(static_cast<size_t>(omp_get_max_threads()), 0);
#pragma omp parallel
  {
    const size_t t = static_cast<size_t>(omp_get_thread_num());
    const unsigned csr = _mm_getcsr();
    if (t < saved_csr_.size()) saved_csr_[t] = csr;
    _mm_setcsr(csr | kFtzDaz);
  }
}

void CpuDevice::end_run() {
  if (!flush_denormals_) return;
#pragma omp parallel
  {
    const size_t t = static_cast<size_t>(omp_get_thread_num());
    _mm_setcsr(t < saved_csr_.size() ? saved_csr_[t] : _mm_getcsr() & ~kFtzDaz);
  }
}
#else
void CpuDevice::begin_run() {}
void CpuDevice::end_run() {}
#endif

CpuDevice::~CpuDevice() {
  for (void* p : owned_) std::free(p);
}

std::string CpuDevice::id() const { return cpu_device_id(threads_ > 0 ? threads_ : omp_get_max_threads()); }

void* CpuDevice::alloc(int64_t bytes) {
  const size_t size = static_cast<size_t>((std::max<int64_t>(bytes, 64) + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, size);
  if (!p) fail_io("out of memory: {} bytes", size);
  return p;
}

void CpuDevice::free(void* p) { std::free(p); }

void CpuDevice::upload(void* dst, const void* src, int64_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
}

void CpuDevice::download(void* dst, const void* src, int64_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
}

bool CpuDevice::uses_module(const nlohmann::json& recipe) const {
  return recipe.is_object() && recipe.value("symbol", std::string()) != "";
}

std::shared_ptr<runtime::KernelModule> CpuDevice::load_module(const std::string& artifact_dir) {
  return load_cpu_module(artifact_dir);
}

std::unique_ptr<runtime::DeviceKernel> CpuDevice::make_kernel(const nlohmann::json& recipe,
                                                              std::shared_ptr<runtime::KernelModule> module) {
  std::shared_ptr<SharedLibrary> lib;
  if (module) {
    auto* m = dynamic_cast<CpuModule*>(module.get());
    KORCH_CHECK(m, "a CPU kernel needs a CPU module, got {}", module->describe());
    lib = m->library();
  }
  return std::make_unique<CpuKernel>(CpuKernelRecipe::from_json(recipe), std::move(lib));
}

int CpuDevice::specialize(runtime::ProgramView& p) {
  if (std::getenv("KORCH_NO_LAYOUT_HANDOFF")) return 0;
  const size_t nb = p.is_arena.size();
  std::vector<int> writer(nb, -1);
  std::vector<std::vector<std::pair<int, int>>> readers(nb);  // (step, input position)
  for (size_t i = 0; i < p.steps.size(); ++i) {
    for (int b : p.steps[i].outputs) writer[static_cast<size_t>(b)] = static_cast<int>(i);
    for (size_t a = 0; a < p.steps[i].inputs.size(); ++a)
      readers[static_cast<size_t>(p.steps[i].inputs[a])].emplace_back(static_cast<int>(i), static_cast<int>(a));
  }
  auto only_linear = [&](int step) -> LinearStep* {
    auto* k = dynamic_cast<CpuKernel*>(p.steps[static_cast<size_t>(step)].kernel);
    return k ? k->only_linear_step() : nullptr;
  };
  int handoffs = 0;
  for (size_t b = 0; b < nb; ++b) {
    if (!p.is_arena[b] || writer[b] < 0 || readers[b].empty()) continue;
    const runtime::ProgramView::Step& w = p.steps[static_cast<size_t>(writer[b])];
    LinearStep* producer = only_linear(writer[b]);
    if (!producer) continue;
    const int out_slot = static_cast<int>(w.inputs.size()) +
                         static_cast<int>(std::find(w.outputs.begin(), w.outputs.end(), static_cast<int>(b)) - w.outputs.begin());
    const std::string layout = producer->dst_layout();
    if (layout.empty() || producer->result_slot() != out_slot) continue;
    bool ok = true;
    for (auto [step, pos] : readers[b]) {
      LinearStep* c = only_linear(step);
      ok = ok && c &&
           ((c->src_slot() == pos && c->reads_only_as_src(pos) && c->src_layout() == layout) ||
            (c->reads_only_as_sum(pos) && c->dst_layout() == layout));
    }
    if (!ok) continue;
    void* buf = std::aligned_alloc(64, static_cast<size_t>((producer->dst_layout_bytes() + 63) / 64 * 64));
    if (!buf) fail_io("out of memory for a {}-byte layout handoff buffer", producer->dst_layout_bytes());
    owned_.push_back(buf);
    (*p.ptrs)[b] = buf;
    producer->set_dst_in_layout(true);
    for (auto [step, pos] : readers[b]) {
      LinearStep* c = only_linear(step);
      if (c->src_slot() == pos) c->set_src_in_layout(true);
      else c->set_sum_in_layout(true);
    }
    ++handoffs;
  }
  return handoffs;
}

// ~5 ms on a quiet machine. When other processes' threads hold the cores, each parallel pass can
// wait for a descheduled thread: beside a compile of the e2e models a probe took up to 2.2 s (passes
// of 12 ms against ~12 us), and the pace tests ran 7-12x longer under ctest than alone. Past 50 ms
// the passes so far decide; such a probe reads slow, and MachinePace then looks at the load.
double CpuDevice::pace_probe_seconds() const { return cpu_pace_probe(0.05); }

void CpuDevice::evict(const void* data, int64_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  constexpr uintptr_t kLine = 64;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(kLine - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(data) + static_cast<uintptr_t>(std::max<int64_t>(bytes, 0));
  for (uintptr_t p = begin; p < end; p += kLine) _mm_clflush(reinterpret_cast<const void*>(p));
  _mm_mfence();
#else
  (void)data;
  (void)bytes;
#endif
}

int64_t cpu_l2_bytes() {
  static const int64_t bytes = [] {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index2/size");  // "1024K"
    std::string text;
    if (f >> text && !text.empty()) {
      char* end = nullptr;
      const long long n = std::strtoll(text.c_str(), &end, 10);
      const int64_t unit = *end == 'K' ? 1024 : *end == 'M' ? 1024 * 1024 : 1;
      if (n > 0) return static_cast<int64_t>(n) * unit;
    }
#ifdef _SC_LEVEL2_CACHE_SIZE
    if (const long n = sysconf(_SC_LEVEL2_CACHE_SIZE); n > 0) return static_cast<int64_t>(n);
#endif
    return static_cast<int64_t>(1) << 20;
  }();
  return bytes;
}

double cpu_pace_probe(double budget_seconds, int* passes) {
  constexpr int64_t kN = 151296;  // 3 arrays: 1.8 MB, about what two 1 MB L2s hold
  constexpr int kReps = 100, kWarm = 10, kLeast = 11;
  std::vector<float> a(kN, 1.f), b(kN, 2.f), c(kN);
  const float* pa = a.data();
  const float* pb = b.data();
  float* pc = c.data();
  using Clock = std::chrono::steady_clock;
  std::vector<double> times;
  const auto start = Clock::now();
  for (int r = 0; r < kReps + kWarm; ++r) {
    // One thread touches everything first, so the parallel pass pulls half of its data from the
    // other core's cache, as a kernel reading what the previous kernel wrote on other threads.
    for (int64_t i = 0; i < kN; ++i) pc[i] = pa[i] - pb[i];
    const auto t0 = Clock::now();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < kN; ++i) pc[i] = pa[i] + pb[i];
    if (r >= kWarm) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    if (static_cast<int>(times.size()) >= kLeast &&
        std::chrono::duration<double>(Clock::now() - start).count() > budget_seconds)
      break;
  }
  if (passes) *passes = static_cast<int>(times.size());
  const auto mid = times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2);
  std::nth_element(times.begin(), mid, times.end());
  return *mid;
}

void set_cpu_threads(int n) {
  KORCH_CHECK(n >= 1, "thread count {}", n);
  omp_set_num_threads(n);
}

int cpu_threads() { return omp_get_max_threads(); }

}  // namespace korch::cpu
