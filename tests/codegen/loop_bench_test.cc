// Opt-in timing of generated loop kernels against naive single-threaded loops
// (KORCH_LOOP_BENCH=1; a test asserts correctness only, this prints numbers for the report):
//   softmax over f32[12,197,197] (fission's ReduceMax/Sub/Exp/ReduceSum/Div chain)
//   Add + Relu over 1M floats
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "codegen/cpu/cpu_compiler.h"
#include "runtime/cpu/cpu_kernel.h"
#include "codegen/cpu/cpu_loop_emitter.h"
#include "codegen/kernel_signature.h"
#include "codegen/loop_kernel.h"
#include "ir/random.h"
#include "loop_test_util.h"

namespace korch::testing {
namespace {

// Median and minimum of `reps` timed runs after a warm-up, in ms. The minimum is shown too: on a
// shared machine a parallel region's median can be a scheduler tick of a descheduled thread.
struct Timing {
  double median, min;
};
Timing time_ms(const std::function<void()>& f, int reps = 50) {
  for (int i = 0; i < 5; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t[0]};
}

// Compiles the whole-graph kernel of `c` and returns a runner over `inputs` into `outputs`.
std::function<void()> compiled(const LoopCase& c, std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                               std::shared_ptr<cpu::CpuKernel>* keep) {
  std::vector<ValueId> args = kernel_arg_inputs(*c.g, c.c);
  LoopKernelBuild kb = build_loop_kernel(*c.g, c.c.nodes, args, c.c.outputs);
  EXPECT_TRUE(kb.kernel) << kb.reason;
  CodeWriter w;
  std::vector<int> in_slots, out_slots;
  for (size_t i = 0; i < args.size(); ++i) in_slots.push_back(static_cast<int>(i));
  for (size_t i = 0; i < c.c.outputs.size(); ++i) out_slots.push_back(static_cast<int>(args.size() + i));
  cpu::emit_cpu_loop_kernel(*kb.kernel, "bench", in_slots, out_slots, static_cast<int>(args.size() + c.c.outputs.size()), w);
  auto libs = compile_libraries({cpu::cpu_prelude() + w.str()}, cpu::default_cpu_compiler());
  if (std::getenv("KORCH_LOOP_BENCH_SHOW")) std::printf("generated code (%s):\n%s\n", libs[0].source_path.c_str(), w.str().c_str());
  cpu::CpuKernelRecipe r;
  r.symbol = "bench";
  for (ValueId v : args) r.inputs.push_back(c.g->type(v));
  for (ValueId v : c.c.outputs) r.outputs.push_back(c.g->type(v));
  r.scratch_bytes = kb.scratch_bytes;
  *keep = std::make_shared<cpu::CpuKernel>(r, libs[0].library);
  std::mt19937_64 rng(7);
  for (const auto& t : r.inputs) inputs.push_back(random_tensor(t, rng));
  for (const auto& t : r.outputs) outputs.emplace_back(t);
  auto k = *keep;
  return [k, &inputs, &outputs] {
    std::vector<const void*> ip;
    std::vector<void*> op;
    for (auto& t : inputs) ip.push_back(t.raw());
    for (auto& t : outputs) op.push_back(t.raw());
    k->run(ip.data(), op.data());
  };
}

TEST(LoopKernelBench, SoftmaxAndAddRelu) {
  if (!std::getenv("KORCH_LOOP_BENCH")) GTEST_SKIP() << "set KORCH_LOOP_BENCH=1";
  const int threads = std::getenv("KORCH_LOOP_BENCH_THREADS") ? std::atoi(std::getenv("KORCH_LOOP_BENCH_THREADS")) : 2;
  omp_set_num_threads(threads);
  {
    GraphBuilder b;
    Shape s{12, 197, 197};
    ValueId x = b.f32("x", s);
    ValueId m = b.reduce("ReduceMax", x, {-1});
    ValueId e = b.node("Exp", {b.node("Sub", {x, b.node("Expand", {m, b.ints(s)})})});
    ValueId sum = b.reduce("ReduceSum", e, {-1});
    ValueId y = b.node("Div", {e, b.node("Expand", {sum, b.ints(s)})});
    LoopCase c = whole_graph_case("softmax", b.finish({y}));
    std::vector<Tensor> in, out;
    std::shared_ptr<cpu::CpuKernel> keep;
    auto run = compiled(c, in, out, &keep);
    const Timing gen = time_ms(run);
    const float* xp = in[0].data<float>();
    std::vector<float> ref(static_cast<size_t>(in[0].numel()));
    const Timing naive = time_ms([&] {
      const int64_t rows = 12 * 197, n = 197;
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = xp + r * n;
        float* yr = ref.data() + r * n;
        float mx = -INFINITY;
        for (int64_t i = 0; i < n; ++i) mx = std::max(mx, xr[i]);
        float s = 0;
        for (int64_t i = 0; i < n; ++i) s += yr[i] = std::exp(xr[i] - mx);
        for (int64_t i = 0; i < n; ++i) yr[i] /= s;
      }
    });
    double err = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      err += std::pow(out[0].data<float>()[i] - ref[i], 2);
      den += ref[i] * ref[i];
    }
    std::printf("softmax f32[12,197,197]: generated %.3f ms (min %.3f, %d threads), naive single-threaded %.3f ms "
                "(min %.3f), rel err %.2g\n", gen.median, gen.min, threads, naive.median, naive.min, std::sqrt(err / den));
  }
  {
    GraphBuilder b;
    Shape s{1 << 20};
    ValueId x = b.f32("x", s), y = b.f32("y", s);
    LoopCase c = whole_graph_case("add_relu", b.finish({b.node("Relu", {b.node("Add", {x, y})})}));
    std::vector<Tensor> in, out;
    std::shared_ptr<cpu::CpuKernel> keep;
    auto run = compiled(c, in, out, &keep);
    const Timing gen = time_ms(run, 200);
    std::vector<float> ref(1 << 20);
    const float* a = in[0].data<float>();
    const float* bb = in[1].data<float>();
    const Timing naive = time_ms([&] {
      for (size_t i = 0; i < ref.size(); ++i) {
        const float v = a[i] + bb[i];
        ref[i] = v < 0 ? 0 : v;
      }
    }, 200);
    std::printf("add+relu f32[1M]: generated %.3f ms (min %.3f, %d threads), naive single-threaded %.3f ms (min %.3f)\n",
                gen.median, gen.min, threads, naive.median, naive.min);
  }
}

}  // namespace
}  // namespace korch::testing
