// The host emulator's loader and scheduler (see cuda_emulator.h).
#include "runtime/cuda/cuda_emulator.h"

#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <boost/context/detail/fcontext.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "support/host_compiler.h"
#include "support/error.h"

namespace korch::cuda {

namespace {

namespace bctx = boost::context::detail;

// Mirrors korch_emu_ops / korch_emu_thread of the emulation header (cuda_emulator_header.cc).
constexpr unsigned kEmuAbi = 1;
struct EmuDim {
  unsigned x, y, z;
};
struct EmuThread;
struct EmuOps {
  void (*barrier)(EmuThread*, int);
  void (*fail)(EmuThread*, const char*);
};
struct EmuThread {
  EmuDim thread_idx, block_idx, block_dim, grid_dim;
  const EmuOps* ops;
  void* sched;
  unsigned char* warp_slots;
  unsigned lane, shfl_phase;
};

using CallFn = void (*)(void*, void* const*, EmuThread*);
using PlainFn = void (*)(void*, void* const*, EmuThread*, long long, long long);

constexpr size_t kStackBytes = 64 * 1024;
constexpr int kWarpSlotBytes = 2 * kWarpSize * 8;

enum class State : unsigned char { kRunnable, kAtBlock, kAtWarp, kDone };

struct Worker;

struct Fiber {
  EmuThread t{};
  bctx::fcontext_t ctx = nullptr;
  State state = State::kDone;
  Worker* w = nullptr;
  bool fibered = false;
  char* stack = nullptr;  // mapping: guard page, then kStackBytes
};

// Per OpenMP thread: the fibers (reused across blocks and launches) and the current launch.
struct Worker {
  CallFn call = nullptr;
  void* fn = nullptr;
  void* const* args = nullptr;
  const std::string* function = nullptr;
  bctx::fcontext_t sched = nullptr;
  std::vector<std::unique_ptr<Fiber>> fibers;
  std::vector<unsigned char> slots = std::vector<unsigned char>(32 * kWarpSlotBytes);
  Fiber plain;
  std::string error;
  bool stale = false;  // fibers abandoned mid-kernel (a deadlock): their contexts must be remade

  ~Worker() {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    for (auto& f : fibers) munmap(f->stack, kStackBytes + page);
  }
  void note(std::string what) {
    if (error.empty()) error = std::move(what);
  }
};

void fiber_entry(bctx::transfer_t t);

void emu_barrier(EmuThread* t, int kind) {
  Fiber* f = static_cast<Fiber*>(t->sched);
  if (!f->fibered) {
    f->w->note(fmt::format("{} synchronises threads (__syncthreads, __syncwarp or a shuffle) but its launch says "
                           "barriers=false",
                           *f->w->function));
    return;
  }
  f->state = kind == 0 ? State::kAtBlock : State::kAtWarp;
  bctx::transfer_t r = bctx::jump_fcontext(f->w->sched, nullptr);
  f->w->sched = r.fctx;
}

void emu_fail(EmuThread* t, const char* what) {
  Fiber* f = static_cast<Fiber*>(t->sched);
  f->w->note(fmt::format("{} (block {}, thread {}): {}", *f->w->function, t->block_idx.x, t->thread_idx.x, what));
}

const EmuOps kOps{emu_barrier, emu_fail};

void fiber_entry(bctx::transfer_t t) {
  Fiber* f = static_cast<Fiber*>(t.data);
  f->w->sched = t.fctx;
  for (;;) {
    f->w->call(f->w->fn, f->w->args, &f->t);
    f->state = State::kDone;
    bctx::transfer_t r = bctx::jump_fcontext(f->w->sched, nullptr);
    f->w->sched = r.fctx;
  }
}

void reset(Fiber& f) { f.ctx = bctx::make_fcontext(f.stack + sysconf(_SC_PAGESIZE) + kStackBytes, kStackBytes, fiber_entry); }

Worker& worker() {
  static thread_local std::unique_ptr<Worker> w;
  if (!w) {
    w = std::make_unique<Worker>();
    w->plain.w = w.get();
    w->plain.t.ops = &kOps;
    w->plain.t.sched = &w->plain;
  }
  return *w;
}

void ensure_fibers(Worker& w, int n) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  while (static_cast<int>(w.fibers.size()) < n) {
    auto f = std::make_unique<Fiber>();
    void* m = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) fail_io("cuda emulator: cannot map a fiber stack");
    mprotect(m, page, PROT_NONE);  // overflow faults instead of corrupting the next stack
    f->stack = static_cast<char*>(m);
    f->w = &w;
    f->fibered = true;
    f->t.ops = &kOps;
    f->t.sched = f.get();
    reset(*f);
    w.fibers.push_back(std::move(f));
  }
  if (w.stale) {
    for (auto& f : w.fibers) reset(*f);
    w.stale = false;
  }
}

void resume(Fiber& f) {
  bctx::transfer_t r = bctx::jump_fcontext(f.ctx, &f);
  f.ctx = r.fctx;
}

[[noreturn]] void deadlock(Worker& w, int64_t block, const std::string& what) {
  w.stale = true;
  fail("barrier deadlock in {} block {}: {} (divergent barriers)", *w.function, block, what);
}

// One block with barriers: warp by warp, each fiber runs until it waits or ends; a warp barrier
// opens when all of the warp waits at one, the block barrier when all of the block does.
void run_block(Worker& w, const CudaLaunch& l, int64_t b) {
  const int n = l.block;
  ensure_fibers(w, n);
  for (int i = 0; i < n; ++i) {
    Fiber& f = *w.fibers[static_cast<size_t>(i)];
    f.t.thread_idx = {static_cast<unsigned>(i), 0, 0};
    f.t.block_idx = {static_cast<unsigned>(b), 0, 0};
    f.t.block_dim = {static_cast<unsigned>(n), 1, 1};
    f.t.grid_dim = {static_cast<unsigned>(l.grid), 1, 1};
    f.t.lane = static_cast<unsigned>(i) & 31u;
    f.t.shfl_phase = 0;
    f.t.warp_slots = w.slots.data() + (i >> 5) * kWarpSlotBytes;
    f.state = State::kRunnable;
  }
  for (;;) {
    for (int lo = 0; lo < n; lo += kWarpSize) {
      const int hi = std::min(n, lo + kWarpSize);
      for (;;) {
        for (int i = lo; i < hi; ++i)
          if (w.fibers[static_cast<size_t>(i)]->state == State::kRunnable) resume(*w.fibers[static_cast<size_t>(i)]);
        int at_warp = 0, at_block = 0;
        for (int i = lo; i < hi; ++i) {
          const State s = w.fibers[static_cast<size_t>(i)]->state;
          at_warp += s == State::kAtWarp;
          at_block += s == State::kAtBlock;
        }
        if (at_warp == hi - lo) {
          for (int i = lo; i < hi; ++i) w.fibers[static_cast<size_t>(i)]->state = State::kRunnable;
          continue;
        }
        if (at_warp > 0)
          deadlock(w, b, fmt::format("in warp {}, {} threads wait at a warp barrier or shuffle while {} wait at "
                                     "__syncthreads and {} have exited",
                                     lo / kWarpSize, at_warp, at_block, hi - lo - at_warp - at_block));
        break;
      }
    }
    int at_block = 0, done = 0;
    for (int i = 0; i < n; ++i) {
      const State s = w.fibers[static_cast<size_t>(i)]->state;
      at_block += s == State::kAtBlock;
      done += s == State::kDone;
    }
    if (done == n) return;
    if (at_block < n)
      deadlock(w, b, fmt::format("{} threads wait at __syncthreads while {} have exited", at_block, done));
    for (int i = 0; i < n; ++i) w.fibers[static_cast<size_t>(i)]->state = State::kRunnable;
  }
}

HostCompilerConfig emu_compiler() {
  HostCompilerConfig c;
  if (const char* cxx = std::getenv("KORCH_CXX"); cxx && *cxx) c.cxx = cxx;
  // No OpenMP or libmvec in the module (blocks are the parallel unit); IEEE semantics kept.
  // -mtune=generic: GCC 12.2's int64 vector-constant miscompile (codegen/cpu/cpu_compiler.h).
  c.flags = {"-std=c++17", "-O2", "-march=native", "-mno-avx512f", "-mtune=generic", "-fno-math-errno", "-fPIC",
             "-shared", "-w"};
  c.libs = {"-lm"};
  c.cache_subdir = "cuda_emu";
  c.key_extra = "emulator " + std::to_string(kEmuAbi);
  return c;
}

}  // namespace

std::shared_ptr<EmulatedModule> EmulatedModule::load(std::shared_ptr<SharedLibrary> lib, const std::string& source_path) {
  auto m = std::shared_ptr<EmulatedModule>(new EmulatedModule());
  m->lib_ = std::move(lib);
  m->source_path_ = source_path;
  auto abi = reinterpret_cast<unsigned (*)()>(m->lib_->symbol("korch_emu_abi"));
  m->call_ = m->lib_->symbol("korch_emu_call");
  m->plain_ = m->lib_->symbol("korch_emu_run_plain");
  if (!abi || !m->call_ || !m->plain_) fail("{} has no emulation entry points (was the emulation header prepended?)", source_path);
  const unsigned want = (kEmuAbi << 16) | static_cast<unsigned>(sizeof(EmuThread));
  if (abi() != want) fail("{}: emulation ABI {:#x}, the emulator expects {:#x}", source_path, abi(), want);
  return m;
}

std::shared_ptr<EmulatedModule> EmulatedModule::compile(const std::string& cuda_source) {
  return compile_all({cuda_source}).front();
}

std::vector<std::shared_ptr<EmulatedModule>> EmulatedModule::compile_all(const std::vector<std::string>& cuda_sources) {
  std::vector<std::string> sources;
  sources.reserve(cuda_sources.size());
  for (const std::string& s : cuda_sources) sources.push_back(emulation_header() + s);
  std::vector<CompiledLibrary> libs = compile_libraries(sources, emu_compiler());
  std::vector<std::shared_ptr<EmulatedModule>> out;
  for (CompiledLibrary& cs : libs) out.push_back(load(cs.library, cs.source_path));
  return out;
}

void* EmulatedModule::function(const std::string& name) const { return lib_->symbol(name); }

bool EmulatedModule::has(const std::string& name) const { return function(name) != nullptr; }

void EmulatedModule::launch(const CudaLaunch& l, void* const* args, int num_args) const {
  if (num_args < 0 || num_args > kMaxKernelArgs)
    fail("launch of {}: {} arguments (at most {})", l.function, num_args, kMaxKernelArgs);
  if (l.block < 1 || l.block > 1024) fail("launch of {}: block of {} threads (1 to 1024)", l.function, l.block);
  if (l.barriers && l.block % kWarpSize != 0)
    fail("launch of {}: block of {} threads with barriers (a multiple of {})", l.function, l.block, kWarpSize);
  if (l.grid < 1 || l.grid > 0x7fffffff) fail("launch of {}: grid of {} blocks", l.function, l.grid);
  void* fn = function(l.function);
  if (!fn) fail("launch of {}: no such function in {}", l.function, source_path_);
  std::array<void*, kMaxKernelArgs> slots{};
  std::copy(args, args + num_args, slots.begin());

  const int64_t grid = l.grid;
  const int threads = std::max(1, omp_get_max_threads());
  // Dynamic chunks: fiber blocks vary in cost (a reduce row vs the tail), plain ones less so.
  const int64_t chunk = std::max<int64_t>(1, grid / (static_cast<int64_t>(threads) * (l.barriers ? 16 : 4)));
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::string error;
#pragma omp parallel if (grid > 1)
  {
    Worker& w = worker();
    w.call = reinterpret_cast<CallFn>(call_);
    w.fn = fn;
    w.args = slots.data();
    w.function = &l.function;
    w.error.clear();
    try {
      for (;;) {
        const int64_t b0 = next.fetch_add(chunk);
        if (b0 >= grid || failed.load()) break;
        const int64_t b1 = std::min(grid, b0 + chunk);
        if (!l.barriers) {
          EmuThread& t = w.plain.t;
          t.block_dim = {static_cast<unsigned>(l.block), 1, 1};
          t.grid_dim = {static_cast<unsigned>(grid), 1, 1};
          t.warp_slots = w.slots.data();
          t.shfl_phase = 0;
          reinterpret_cast<PlainFn>(plain_)(fn, slots.data(), &t, b0, b1);
        } else {
          for (int64_t b = b0; b < b1 && w.error.empty(); ++b) run_block(w, l, b);
        }
        if (!w.error.empty()) fail("{}", w.error);
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu);
      if (error.empty()) error = e.what();
      failed = true;
    }
    w.error.clear();
  }
  if (!error.empty()) fail("{}", error);
}

}  // namespace korch::cuda
