// The CUDA printer on the shared loop-kernel table (loop_cases.h) plus cases aimed at each
// schedule family: every case under every schedule of its cuda_schedule_space(), compiled for
// the host emulator (many kernels per translation unit; the default also with 64-bit index
// arithmetic), run on seeded inputs and compared with the reference interpreter at 1e-4 relative
// L2; and every case's default schedule compiled to
// PTX by NVRTC. The built-in models' loop candidates run under their default schedule
// (KORCH_CUDA_ALL_SCHEDULES=1: all of them); KORCH_CUDA_TIMES=1 prints each variant's time;
// KORCH_CUDA_NVRTC_ALL=1 also compiles every variant (not only the defaults) with NVRTC.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <map>

#include "codegen/cuda/cuda_compiler.h"
#include "codegen/cuda/cuda_loop_emitter.h"
#include "codegen/kernel_signature.h"
#include "codegen/loop_kernel.h"
#include "frontend/builtin_models.h"
#include "frontend/onnx_loader.h"
#include "pipeline/pipeline.h"
#include "ir/interpreter.h"
#include "ir/random.h"
#include "loop_cases.h"
#include "runtime/cuda/cuda_emulator.h"

namespace korch::testing {
namespace {

using cuda::CudaSchedule;
using I = std::vector<int64_t>;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct Built {
  std::shared_ptr<LoopKernel> kernel;
  std::vector<int64_t> scratch_bytes;
  std::vector<ValueId> args;
  std::string reason;
};

Built build(const LoopCase& lc) {
  Built b;
  b.args = kernel_arg_inputs(*lc.g, lc.c);
  LoopKernelBuild kb = build_loop_kernel(*lc.g, lc.c.nodes, b.args, lc.c.outputs);
  b.kernel = kb.kernel;
  b.scratch_bytes = kb.scratch_bytes;
  b.reason = kb.reason;
  return b;
}

struct Variant {
  size_t case_index;
  CudaSchedule schedule;
  std::string symbol;
  cuda::CudaLoopEmit emit;
  int module = -1;
  std::string text;
};

struct CudaRun {
  std::vector<Variant> variants;
  std::vector<std::string> failures;  // "case [schedule]: what"
  int cases_built = 0;
  double compile_ms = 0, run_ms = 0;
};

// Emits every case under its schedules (all of cuda_schedule_space() unless `only_default`),
// compiles the translation units for the emulator and runs each variant against the reference.
CudaRun run_cuda_cases(const std::vector<LoopCase>& cases, bool only_default = false, size_t per_unit = 120) {
  CudaRun run;
  std::vector<Built> builds(cases.size());
  std::vector<std::string> units;
  CodeWriter w;
  size_t in_unit = 0;
  auto flush = [&] {
    if (in_unit == 0) return;
    units.push_back(cuda::cuda_prelude() + w.take());
    w = CodeWriter();
    in_unit = 0;
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    builds[i] = build(cases[i]);
    if (!builds[i].kernel) {
      run.failures.push_back(fmt::format("{}: not built: {}", cases[i].name, builds[i].reason));
      continue;
    }
    ++run.cases_built;
    const LoopKernel& k = *builds[i].kernel;
    std::vector<CudaSchedule> space = only_default ? std::vector<CudaSchedule>{cuda::default_cuda_schedule(k)}
                                                   : cuda::cuda_schedule_space(k);
    if (!only_default) {
      // The default once more with 64-bit index arithmetic: that code path on every case.
      space.push_back(space.front());
      space.back().index64 = true;
    }
    const int ni = k.num_inputs, no = k.num_outputs;
    std::vector<int> in_slots, out_slots;
    for (int s = 0; s < ni; ++s) in_slots.push_back(s);
    for (int s = 0; s < no; ++s) out_slots.push_back(ni + s);
    for (size_t v = 0; v < space.size(); ++v) {
      Variant var{i, space[v], fmt::format("cuda_case_{}_v{}", i, v), {}, -1, {}};
      CodeWriter one;
      var.emit = cuda::emit_cuda_loop_kernel(k, var.symbol, in_slots, out_slots, ni + no, space[v], one);
      var.text = one.take();
      w.raw(var.text);
      if (!var.emit.ok) {
        run.failures.push_back(fmt::format("{} [{}]: in the schedule space but does not apply: {}", cases[i].name,
                                           space[v].describe(), var.emit.reason));
        continue;
      }
      var.module = static_cast<int>(units.size());
      run.variants.push_back(std::move(var));
      if (++in_unit >= per_unit) flush();
    }
  }
  flush();
  if (std::getenv("KORCH_CUDA_NVRTC_ALL") && cuda::nvrtc_available(nullptr)) {
    // Opt-in: every variant through NVRTC too, warning-free (the default schedules always are).
    for (const cuda::PtxModule& m : cuda::compile_to_ptx(units))
      if (!m.log.empty()) run.failures.push_back("NVRTC warnings: " + m.log.substr(0, 2000));
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<cuda::EmulatedModule>> modules = cuda::EmulatedModule::compile_all(units);
  run.compile_ms = ms_since(t0);
  t0 = std::chrono::steady_clock::now();
  std::map<size_t, std::pair<std::vector<Tensor>, std::vector<Tensor>>> data;  // case -> inputs, reference
  for (const Variant& var : run.variants) {
    const LoopCase& lc = cases[var.case_index];
    const Built& b = builds[var.case_index];
    const std::string where = fmt::format("{} [{}]", lc.name, var.schedule.describe());
    const auto tv = std::chrono::steady_clock::now();
    try {
      auto it = data.find(var.case_index);
      if (it == data.end()) {
        Graph sub = kernel_subgraph(*lc.g, lc.c);
        std::vector<Tensor> inputs = random_inputs(sub, 1234 + var.case_index);
        std::vector<Tensor> ref = interpret(sub, inputs);
        it = data.emplace(var.case_index, std::make_pair(std::move(inputs), std::move(ref))).first;
      }
      const auto& [inputs, ref] = it->second;
      // Buffers as the GPU runtime would allocate them (Tensor buffers are 64-byte aligned).
      std::vector<Tensor> outs, scratch;
      std::vector<void*> args;
      for (const Tensor& t : inputs) args.push_back(const_cast<std::byte*>(t.raw()));
      for (ValueId v : lc.c.outputs) {
        outs.emplace_back(lc.g->type(v));
        args.push_back(outs.back().raw());
      }
      std::vector<int64_t> bytes = b.scratch_bytes;
      bytes.insert(bytes.end(), var.emit.extra_scratch_bytes.begin(), var.emit.extra_scratch_bytes.end());
      for (int64_t n : bytes) {
        scratch.emplace_back(TensorType{DType::kUInt8, {std::max<int64_t>(n, 1)}});
        args.push_back(scratch.back().raw());
      }
      for (const cuda::CudaLaunch& l : var.emit.launches)
        modules[static_cast<size_t>(var.module)]->launch(l, args.data(), static_cast<int>(args.size()));
      for (size_t o = 0; o < outs.size(); ++o)
        if (std::string msg = compare_to_reference(outs[o], ref[o]); !msg.empty())
          run.failures.push_back(fmt::format("{}: output {}: {}", where, o, msg));
    } catch (const std::exception& e) {
      run.failures.push_back(fmt::format("{}: {}", where, e.what()));
    }
    if (std::getenv("KORCH_CUDA_TIMES")) std::printf("%8.1f ms %s\n", ms_since(tv), where.c_str());
  }
  run.run_ms = ms_since(t0);
  return run;
}

std::string report(const CudaRun& r) {
  std::string s = fmt::format("{} cases built, {} variants, {} failures (compile {:.0f} ms, run {:.0f} ms)\n",
                              r.cases_built, r.variants.size(), r.failures.size(), r.compile_ms, r.run_ms);
  for (size_t i = 0; i < r.failures.size() && i < 20; ++i) s += "  " + r.failures[i] + "\n";
  return s;
}

// ---- cases aimed at the schedule families ----------------------------------------------------

LoopCase one(const std::string& name, const TensorType& t, const std::function<ValueId(GraphBuilder&, ValueId)>& f) {
  GraphBuilder b;
  ValueId x = b.input("x", t.dtype, t.shape);
  return whole_graph_case(name, b.finish({f(b, x)}));
}

ValueId layernorm(GraphBuilder& b, ValueId x, const Shape& s, ValueId eps = kNoValue) {
  ValueId mean = b.reduce("ReduceMean", x, {-1});
  ValueId xm = b.node("Sub", {x, expand_to(b, mean, s)});
  ValueId var = b.reduce("ReduceMean", b.node("Mul", {xm, xm}), {-1});
  ValueId sd = b.node("Sqrt", {b.node("Add", {var, eps == kNoValue ? b.scalar(1e-5f) : eps})});
  return b.node("Div", {xm, expand_to(b, sd, s)});
}

std::vector<LoopCase> cuda_cases() {
  std::vector<LoopCase> cs;
  const auto f32 = [](Shape s) { return TensorType{DType::kFloat32, std::move(s)}; };
  // Row kernels over rows of 7, 64, 197 and 3000 elements (warp per row, block per row).
  for (int64_t n : {7, 64, 197, 3000}) {
    const Shape s{n == 3000 ? 5 : 33, n};
    cs.push_back(one(fmt::format("softmax_row{}", n), f32(s), [s](GraphBuilder& b, ValueId x) { return softmax(b, x, s); }));
    cs.push_back(one(fmt::format("layernorm_row{}", n), f32(s), [s](GraphBuilder& b, ValueId x) { return layernorm(b, x, s); }));
  }
  // Group norm as fission writes it: rows of C/G * H * W through reshapes.
  cs.push_back(one("groupnorm", f32({2, 8, 6, 6}), [](GraphBuilder& b, ValueId x) {
    const Shape g{2, 4, 72};
    ValueId y = layernorm(b, b.node("Reshape", {x, b.ints(g)}), g);
    return b.node("Reshape", {y, b.ints({2, 8, 6, 6})});
  }));
  // Long rows, few outputs: two passes.
  cs.push_back(one("sum_long_rows", f32({2, 70000}), [](GraphBuilder& b, ValueId x) { return b.reduce("ReduceSum", x, {-1}); }));
  cs.push_back(one("mean_all_long", f32({300, 200}), [](GraphBuilder& b, ValueId x) { return b.reduce("ReduceMean", x, {}); }));
  cs.push_back(one("max_f64_long", f32({3, 40000}), [](GraphBuilder& b, ValueId x) {
    return b.reduce("ReduceMax", b.node("Cast", {x}, attrs({{"to", int64_t{11}}})), {-1});
  }));
  // ArgMax / ArgMin with many ties (and NaNs: sqrt of negatives) under every mapping.
  for (const char* op : {"ArgMax", "ArgMin"})
    for (int64_t last : {0, 1}) {
      cs.push_back(one(fmt::format("{}_ties_last{}", op, last), f32({4, 300, 5}), [=](GraphBuilder& b, ValueId x) {
        ValueId q = b.node("Floor", {b.node("Mul", {x, b.scalar(2.f)})});
        return b.node(op, {q}, attrs({{"axis", int64_t{1}}, {"keepdims", int64_t{0}}, {"select_last_index", last}}));
      }));
      cs.push_back(one(fmt::format("{}_long_ties_last{}", op, last), f32({2, 50000}), [=](GraphBuilder& b, ValueId x) {
        ValueId q = b.node("Floor", {b.node("Mul", {x, b.scalar(3.f)})});
        return b.node(op, {q}, attrs({{"axis", int64_t{1}}, {"select_last_index", last}}));
      }));
      cs.push_back(one(fmt::format("{}_nan_last{}", op, last), f32({6, 40}), [=](GraphBuilder& b, ValueId x) {
        return b.node(op, {b.node("Sqrt", {x})}, attrs({{"axis", int64_t{1}}, {"select_last_index", last}}));
      }));
    }
  // Pools with padding on a CNN-sized image.
  cs.push_back(one("maxpool_56", f32({1, 8, 56, 56}), [](GraphBuilder& b, ValueId x) {
    return b.node("MaxPool", {x}, attrs({{"kernel_shape", I{3, 3}}, {"strides", I{2, 2}}, {"pads", I{1, 1, 1, 1}}}));
  }));
  cs.push_back(one("avgpool_56_pad", f32({1, 8, 56, 56}), [](GraphBuilder& b, ValueId x) {
    return b.node("AveragePool", {x}, attrs({{"kernel_shape", I{3, 3}}, {"strides", I{1, 1}}, {"pads", I{1, 1, 1, 1}}}));
  }));
  cs.push_back(one("global_avgpool", f32({2, 64, 14, 14}), [](GraphBuilder& b, ValueId x) {
    return b.reduce("ReduceMean", x, {2, 3});
  }));
  // Pointwise float4: aligned (a slice starting at a multiple of 4) and misaligned offsets.
  cs.push_back(one("vec_bias_gelu", f32({64, 256}), [](GraphBuilder& b, ValueId x) {
    ValueId er = b.node("Erf", {b.node("Mul", {x, b.scalar(0.70710678f)})});
    return b.node("Mul", {b.node("Mul", {x, b.node("Add", {er, b.scalar(1.f)})}), b.scalar(0.5f)});
  }));
  cs.push_back(one("vec_slice_aligned", f32({64, 72}), [](GraphBuilder& b, ValueId x) {
    return b.node("Relu", {b.node("Slice", {x, b.ints({8}), b.ints({72}), b.ints({1})})});
  }));
  cs.push_back(one("vec_slice_misaligned", f32({64, 72}), [](GraphBuilder& b, ValueId x) {
    return b.node("Relu", {b.node("Slice", {x, b.ints({1}), b.ints({65}), b.ints({1})})});
  }));
  // Other element types.
  cs.push_back(one("sum_i64", TensorType{DType::kInt64, {6, 300}}, [](GraphBuilder& b, ValueId x) {
    return b.reduce("ReduceSum", x, {-1});
  }));
  cs.push_back(one("max_i32_rows", TensorType{DType::kInt32, {40, 50}}, [](GraphBuilder& b, ValueId x) {
    return b.reduce("ReduceMax", x, {0});
  }));
  cs.push_back(one("f64_layernorm", f32({8, 500}), [](GraphBuilder& b, ValueId x) {
    const Shape s{8, 500};
    return layernorm(b, b.node("Cast", {x}, attrs({{"to", int64_t{11}}})), s, b.constant(Tensor::scalar<double>(1e-5)));
  }));
  cs.push_back(one("bool_where_i64", TensorType{DType::kInt64, {16, 64}}, [](GraphBuilder& b, ValueId x) {
    ValueId c = b.node("Greater", {x, b.constant(Tensor::scalar<int64_t>(4))});
    return b.node("Where", {b.node("Not", {c}), x, b.node("Neg", {x})});
  }));
  return cs;
}

TEST(CudaLoopKernel, EveryCaseUnderEverySchedule) {
  std::vector<LoopCase> cases = op_cases();
  for (LoopCase& c : chain_cases()) cases.push_back(std::move(c));
  for (LoopCase& c : cuda_cases()) cases.push_back(std::move(c));
  const CudaRun r = run_cuda_cases(cases);
  std::printf("%s", report(r).c_str());
  EXPECT_EQ(r.cases_built, static_cast<int>(cases.size())) << report(r);
  EXPECT_TRUE(r.failures.empty()) << report(r);
  // Every mapping ran somewhere in the table (told apart by the code it prints).
  std::map<std::string, int> families;
  for (const Variant& v : r.variants) {
    const std::string& t = v.text;
    const bool row = t.find("row kernel") != std::string::npos;
    families["row kernel, warp per row"] += t.find("a warp per row") != std::string::npos;
    families["row kernel, block per row"] += t.find("a block per row") != std::string::npos;
    families["two-pass"] += t.find("two-pass") != std::string::npos;
    families["float4"] += t.find("korch_ld4(") != std::string::npos;
    families["64-bit index arithmetic"] += v.schedule.index64 && t.find("int32_t") == std::string::npos;
    families["warp per output"] += !row && t.find("korch_warp_") != std::string::npos;
    families["block per output"] += !row && t.find("korch_block_") != std::string::npos;
    families["thread per output"] += t.find("acc = ") != std::string::npos && t.find("korch_warp_") == std::string::npos &&
                                     t.find("korch_block_") == std::string::npos && t.find("two-pass") == std::string::npos;
  }
  for (const auto& [f, n] : families) {
    std::printf("  %4d variants: %s\n", n, f.c_str());
    EXPECT_GT(n, 0) << f;
  }
}

// Every loop candidate of the built-in models (what the orchestrator actually asks for).
TEST(CudaLoopKernel, BuiltinModelsEveryLoopCandidate) {
  std::vector<LoopCase> cases;
  for (const std::string& name : builtin_model_names()) {
    auto p = std::make_shared<const Graph>(lower_to_primitives(load_onnx_bytes(builtin_model_bytes(name), name + ".onnx")));
    std::vector<LoopCase> mc = candidate_cases(p, name);
    cases.insert(cases.end(), mc.begin(), mc.end());
  }
  const CudaRun r = run_cuda_cases(cases, std::getenv("KORCH_CUDA_ALL_SCHEDULES") == nullptr);
  std::printf("%s", report(r).c_str());
  EXPECT_EQ(r.cases_built, static_cast<int>(cases.size())) << report(r);
  EXPECT_TRUE(r.failures.empty()) << report(r);
}

TEST(CudaLoopKernel, DefaultSchedulesCompileWithNvrtc) {
  std::string why;
  if (!cuda::nvrtc_available(&why)) GTEST_SKIP() << why;
  std::vector<LoopCase> cases = op_cases();
  for (LoopCase& c : chain_cases()) cases.push_back(std::move(c));
  for (LoopCase& c : cuda_cases()) cases.push_back(std::move(c));
  std::vector<std::string> programs(2, cuda::cuda_prelude());
  std::vector<std::string> functions;
  for (size_t i = 0; i < cases.size(); ++i) {
    Built b = build(cases[i]);
    ASSERT_TRUE(b.kernel) << cases[i].name << ": " << b.reason;
    const LoopKernel& k = *b.kernel;
    std::vector<int> in, out;
    for (int s = 0; s < k.num_inputs; ++s) in.push_back(s);
    for (int s = 0; s < k.num_outputs; ++s) out.push_back(k.num_inputs + s);
    CodeWriter w;
    cuda::CudaLoopEmit e = cuda::emit_cuda_loop_kernel(k, fmt::format("nv_case_{}", i), in, out,
                                                       k.num_inputs + k.num_outputs, cuda::default_cuda_schedule(k), w);
    ASSERT_TRUE(e.ok) << cases[i].name << ": " << e.reason;
    programs[i % 2] += w.take();
    for (const cuda::CudaLaunch& l : e.launches) functions.push_back(l.function);
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<cuda::PtxModule> ptx = cuda::compile_to_ptx(programs);
  const double ms = ms_since(t0);
  std::printf("NVRTC %s: %zu programs, %zu kernels in %.0f ms (%s)\n", cuda::nvrtc_version().c_str(), programs.size(),
              functions.size(), ms, ptx[0].cached ? "cached" : "compiled");
  // The printer's code compiles without a warning (unused variables, narrowing, ...).
  for (const cuda::PtxModule& m : ptx) EXPECT_EQ(m.log, "") << m.source_path;
  for (const std::string& f : functions) {
    bool found = false;
    for (const cuda::PtxModule& m : ptx) found |= m.ptx.find(".entry " + f + "(") != std::string::npos;
    EXPECT_TRUE(found) << f << " is not in the PTX";
  }
}

// Index arithmetic that needs 64 bits although every buffer is tiny: a description made by hand
// (nothing in the builder produces it on small tensors), checked against its closed form.
TEST(CudaLoopKernel, IndexMathBeyond32BitsUses64BitIntegers) {
  using namespace loop;
  LoopKernel k;
  k.buffers = {Buffer{BufferKind::kInput, 0, DType::kFloat32, 7, true, false},
               Buffer{BufferKind::kOutput, 0, DType::kFloat32, 12, false, true}};
  k.num_inputs = k.num_outputs = 1;
  Stage st;
  st.loops = {Loop{3, false}, Loop{4, false}};
  const int64_t big = int64_t{1} << 32;
  auto node = [&](IndexNode n) {
    st.index.push_back(std::move(n));
    return static_cast<int>(st.index.size()) - 1;
  };
  const int i0 = node(IndexNode{IndexOp::kVar, 0, {}, -1, -1, 0, 2, 0});
  const int i1 = node(IndexNode{IndexOp::kVar, 1, {}, -1, -1, 0, 3, 1});
  const int wide = node(IndexNode{IndexOp::kSum, 0, {{i0, big}, {i1, 1}}, -1, -1, 0, 2 * big + 3, 1});
  const int mod = node(IndexNode{IndexOp::kMod, 7, {}, wide, -1, 0, 6, 1});
  const int flat = node(IndexNode{IndexOp::kSum, 0, {{i0, 4}, {i1, 1}}, -1, -1, 0, 11, 1});
  ExprNode load;
  load.op = ExprOp::kLoad;
  load.buffer = 0;
  load.index = mod;
  st.exprs.push_back(load);
  st.stores.push_back(Store{1, flat, 0});
  st.comment = "pointwise -> buffer 1";
  k.stages.push_back(st);
  std::vector<CudaSchedule> space = cuda::cuda_schedule_space(k);
  ASSERT_FALSE(space.empty());
  CodeWriter w;
  std::vector<cuda::CudaLoopEmit> emits;
  for (size_t v = 0; v < space.size(); ++v)
    emits.push_back(cuda::emit_cuda_loop_kernel(k, fmt::format("wide_v{}", v), {0}, {1}, 2, space[v], w));
  const std::string src = w.take();
  EXPECT_NE(src.find("const int64_t x3 = "), std::string::npos) << src;
  EXPECT_EQ(src.find("int32_t"), std::string::npos) << src;
  auto m = cuda::EmulatedModule::compile(cuda::cuda_prelude() + src);
  for (size_t v = 0; v < space.size(); ++v) {
    ASSERT_TRUE(emits[v].ok) << emits[v].reason;
    std::vector<float> in{10, 11, 12, 13, 14, 15, 16}, out(12, -1);
    void* args[] = {in.data(), out.data()};
    for (const cuda::CudaLaunch& l : emits[v].launches) m->launch(l, args, 2);
    for (int64_t a = 0; a < 3; ++a)
      for (int64_t b = 0; b < 4; ++b)
        EXPECT_EQ(out[static_cast<size_t>(4 * a + b)], in[static_cast<size_t>((a * big + b) % 7)])
            << space[v].describe() << " i0=" << a << " i1=" << b;
  }
}

LoopCase named_softmax(const std::string& input_name) {
  GraphBuilder b;
  const Shape s{6, 50};
  ValueId x = b.f32(input_name, s);
  return whole_graph_case("softmax", b.finish({softmax(b, x, s)}));
}

std::string default_text(const LoopCase& c, const std::string& symbol, cuda::CudaLoopEmit* e = nullptr) {
  Built b = build(c);
  KORCH_CHECK(b.kernel, "{}", b.reason);
  CodeWriter w;
  cuda::CudaLoopEmit r = cuda::emit_cuda_loop_kernel(*b.kernel, symbol, {0}, {1}, 2, cuda::default_cuda_schedule(*b.kernel), w);
  if (e) *e = r;
  return w.take();
}

TEST(CudaLoopKernel, OneSignaturePrintsOneText) {
  const std::string a = default_text(named_softmax("x"), "sym");
  const std::string b = default_text(named_softmax("attention_scores"), "sym");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.find("attention"), std::string::npos);
  EXPECT_NE(a.find("// ReduceMax"), std::string::npos) << a;
}

TEST(CudaLoopKernel, DefaultHeuristicPicksTheFamilies) {
  auto launches = [](const LoopCase& c) {
    cuda::CudaLoopEmit e;
    default_text(c, "k", &e);
    return e;
  };
  std::map<std::string, LoopCase> by_name;
  for (LoopCase& c : cuda_cases()) by_name.emplace(c.name, c);
  // Softmax over short rows: one row kernel, a warp per row.
  cuda::CudaLoopEmit e = launches(by_name.at("softmax_row197"));
  ASSERT_EQ(e.launches.size(), 1u);
  EXPECT_TRUE(e.launches[0].barriers);
  EXPECT_EQ(e.launches[0].block, 128);
  // Over rows of 3000: still one launch, a block per row.
  e = launches(by_name.at("layernorm_row3000"));
  ASSERT_EQ(e.launches.size(), 1u);
  EXPECT_EQ(e.launches[0].block, 256);
  EXPECT_EQ(e.launches[0].grid, 5);
  // Two rows of 70000: two passes through extra scratch.
  e = launches(by_name.at("sum_long_rows"));
  ASSERT_EQ(e.launches.size(), 2u);
  EXPECT_EQ(e.extra_scratch_bytes.size(), 1u);
  EXPECT_TRUE(e.launches[0].barriers);
  EXPECT_FALSE(e.launches[1].barriers);
  // Pool windows: a thread per output, no barriers.
  e = launches(by_name.at("maxpool_56"));
  ASSERT_EQ(e.launches.size(), 1u);
  EXPECT_FALSE(e.launches[0].barriers);
}

TEST(CudaLoopKernel, Vector4NeedsAlignedUnitStrideAccess) {
  std::map<std::string, LoopCase> by_name;
  for (LoopCase& c : cuda_cases()) by_name.emplace(c.name, c);
  CudaSchedule vec;
  vec.vector = 4;
  auto emit = [&](const std::string& name) {
    Built b = build(by_name.at(name));
    CodeWriter w;
    return cuda::emit_cuda_loop_kernel(*b.kernel, "k", {0}, {1}, 2, vec, w);
  };
  cuda::CudaLoopEmit e = emit("vec_slice_aligned");
  EXPECT_TRUE(e.ok) << e.reason;
  e = emit("vec_slice_misaligned");
  EXPECT_FALSE(e.ok);
  EXPECT_NE(e.reason.find("not 16-byte aligned"), std::string::npos) << e.reason;
  e = emit("softmax_row7");  // rows of 7: no pointwise launch of its own
  EXPECT_FALSE(e.ok);
  EXPECT_EQ(cuda::default_cuda_schedule(*build(by_name.at("vec_bias_gelu")).kernel).vector, 4);
}

// Emulator speed on a transformer's softmax and a 1M-element pointwise (printed, not asserted:
// timings vary by machine); the results are checked against the reference all the same.
TEST(CudaLoopKernel, EmulatorSpeedOnLargeKernels) {
  std::vector<std::pair<LoopCase, CudaSchedule>> runs;
  {
    GraphBuilder b;
    const Shape s{12, 197, 197};
    ValueId x = b.f32("x", s);
    LoopCase c = whole_graph_case("softmax_12x197x197", b.finish({softmax(b, x, s)}));
    const LoopKernel k = *build(c).kernel;
    CudaSchedule block_rows;
    runs.emplace_back(c, cuda::default_cuda_schedule(k));
    runs.emplace_back(c, block_rows);
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {1024, 1024});
    ValueId g = b.node("Mul", {b.node("Sigmoid", {x}), x});
    LoopCase c = whole_graph_case("silu_1M", b.finish({g}));
    CudaSchedule v1, v4;
    v4.vector = 4;
    runs.emplace_back(c, v1);
    runs.emplace_back(c, v4);
  }
  std::string src = cuda::cuda_prelude();
  std::vector<cuda::CudaLoopEmit> emits;
  std::vector<Built> builds;
  for (size_t i = 0; i < runs.size(); ++i) {
    builds.push_back(build(runs[i].first));
    CodeWriter w;
    emits.push_back(cuda::emit_cuda_loop_kernel(*builds[i].kernel, fmt::format("speed_{}", i), {0}, {1}, 2, runs[i].second, w));
    ASSERT_TRUE(emits[i].ok) << emits[i].reason;
    src += w.take();
  }
  auto m = cuda::EmulatedModule::compile(src);
  for (size_t i = 0; i < runs.size(); ++i) {
    const LoopCase& c = runs[i].first;
    Tensor in = random_inputs(*c.g, 7)[0], out(c.g->type(c.g->outputs[0]));
    std::vector<Tensor> scratch;
    std::vector<void*> args{in.raw(), out.raw()};
    for (int64_t n : builds[i].scratch_bytes) {
      scratch.emplace_back(TensorType{DType::kUInt8, {n}});
      args.push_back(scratch.back().raw());
    }
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      for (const cuda::CudaLaunch& l : emits[i].launches) m->launch(l, args.data(), static_cast<int>(args.size()));
      best = std::min(best, ms_since(t0));
    }
    std::printf("emulated %s [%s]: %.1f ms\n", c.name.c_str(), runs[i].second.describe().c_str(), best);
    const std::vector<Tensor> ref = interpret(*c.g, {in});
    EXPECT_EQ(compare_to_reference(out, ref[0]), "") << c.name << " [" << runs[i].second.describe() << "]";
  }
}

}  // namespace
}  // namespace korch::testing
