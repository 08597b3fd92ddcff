#include "orchestrate/analytic_cost.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "ir/text_format.h"
#include "support/error.h"

namespace korch {
namespace {

// Round numbers so that every expected cost below can be worked out by hand.
DeviceSpec toy_spec() {
  DeviceSpec s;
  s.name = "toy";
  s.dram_bandwidth = 1e10;
  s.cache_bytes = 1000;
  s.cache_bandwidth = 1e11;
  s.peak_linear = 1e12;
  s.peak_vector = 1e10;
  s.launch_seconds = 1e-6;
  s.threads = 1;
  return s;
}

// Hand-built candidate: what make_candidate() would produce, written out.
KernelCandidate candidate(std::vector<NodeId> nodes, std::vector<ValueId> inputs, std::vector<ValueId> outputs,
                          int linear = 0) {
  KernelCandidate c;
  c.nodes = std::move(nodes);
  c.inputs = std::move(inputs);
  c.outputs = std::move(outputs);
  c.linear = linear;
  return c;
}

ValueId value_named(const Graph& g, const std::string& name) {
  const ValueId v = g.find_value(name);
  if (v == kNoValue) ADD_FAILURE() << "no value " << name;
  return v;
}

// x (4096 B) -> Relu -> r -> Exp -> e, plus s (400 B, fits the toy cache) -> Neg -> n.
Graph chain_graph() {
  return parse_graph(R"(
graph chain (opset 17) {
  input x: f32[1024]
  input s: f32[100]
  %r: f32[1024] = Relu(x)
  %e: f32[1024] = Exp(r)
  %n: f32[100] = Neg(s)
  output e, n
}
)");
}

// a, b: 64x64 -> MatMul -> m -> Relu -> y;  and  a -> Relu -> q -> MatMul(q, b) -> z.
Graph matmul_graph() {
  return parse_graph(R"(
graph mm (opset 17) {
  input a: f32[64,64]
  input b: f32[64,64]
  %m: f32[64,64] = MatMul(a, b)
  %y: f32[64,64] = Relu(m)
  %q: f32[64,64] = Relu(a)
  %z: f32[64,64] = MatMul(q, b)
  output y, z
}
)");
}

TEST(AnalyticCost, MemoryBoundElementwise) {
  const Graph g = chain_graph();
  const ValueId x = value_named(g, "x"), r = value_named(g, "r");
  const KernelCandidate relu = candidate({0}, {x}, {r});
  const KernelWork w = kernel_work(g, relu, toy_spec());
  EXPECT_DOUBLE_EQ(w.bytes_dram, 8192);  // 4096 read + 4096 written, both > cache_bytes
  EXPECT_DOUBLE_EQ(w.bytes_cached, 0);
  EXPECT_DOUBLE_EQ(w.flops_vector, 1024);
  EXPECT_DOUBLE_EQ(w.flops_linear, 0);

  AnalyticCost model(toy_spec());
  const KernelCost k = model.cost(g, relu);
  // memory 8192 / 1e10 = 819.2 ns > compute 1024 / 1e10 = 102.4 ns.
  EXPECT_DOUBLE_EQ(k.seconds, 1e-6 + 8192 / 1e10);
  EXPECT_EQ(k.reason, "memory-bound 8.2 kB");
  EXPECT_EQ(model.name(), "analytic:toy");
}

TEST(AnalyticCost, SmallValuesMoveAtCacheSpeed) {
  const Graph g = chain_graph();
  const KernelCandidate neg = candidate({2}, {value_named(g, "s")}, {value_named(g, "n")});
  const KernelWork w = kernel_work(g, neg, toy_spec());
  EXPECT_DOUBLE_EQ(w.bytes_cached, 800);
  EXPECT_DOUBLE_EQ(w.bytes_dram, 0);
  // memory 800 / 1e11 = 8 ns < compute 100 / 1e10 = 10 ns.
  const KernelCost k = AnalyticCost(toy_spec()).cost(g, neg);
  EXPECT_DOUBLE_EQ(k.seconds, 1e-6 + 100 / 1e10);
  EXPECT_EQ(k.reason, "compute-bound 100 FLOP");
}

TEST(AnalyticCost, FusingElementwiseOpsCostsLessThanSingletons) {
  const Graph g = chain_graph();
  const ValueId x = value_named(g, "x"), r = value_named(g, "r"), e = value_named(g, "e");
  AnalyticCost model(toy_spec());
  const KernelCost relu = model.cost(g, candidate({0}, {x}, {r}));
  const KernelCost exp = model.cost(g, candidate({1}, {r}, {e}));
  const KernelCost fused = model.cost(g, candidate({0, 1}, {x}, {e}));
  // Fused: r stays inside, 8192 B and 2048 FLOP: memory-bound, one launch.
  EXPECT_DOUBLE_EQ(fused.seconds, 1e-6 + 8192 / 1e10);
  EXPECT_DOUBLE_EQ(relu.seconds + exp.seconds, 2 * (1e-6 + 8192 / 1e10));
  EXPECT_LT(fused.seconds, relu.seconds + exp.seconds);
  // Writing r as well (the "full" output set) costs its bytes.
  const KernelCost full = model.cost(g, candidate({0, 1}, {x}, {r, e}));
  EXPECT_DOUBLE_EQ(full.seconds, 1e-6 + 12288 / 1e10);
}

TEST(AnalyticCost, LinearWithEpilogue) {
  const Graph g = matmul_graph();
  const ValueId a = value_named(g, "a"), b = value_named(g, "b"), y = value_named(g, "y");
  const KernelCandidate mm_relu = candidate({0, 1}, {a, b}, {y}, 1);
  const KernelWork w = kernel_work(g, mm_relu, toy_spec());
  EXPECT_DOUBLE_EQ(w.flops_linear, 2.0 * 64 * 64 * 64);
  EXPECT_DOUBLE_EQ(w.flops_vector, 64 * 64);
  EXPECT_DOUBLE_EQ(w.bytes_dram, 3 * 16384);

  // Toy spec: memory 49152 / 1e10 = 4.9 us beats compute 524288 / 1e12 + 4096 / 1e10 = 0.93 us.
  const KernelCost mem = AnalyticCost(toy_spec()).cost(g, mm_relu);
  EXPECT_DOUBLE_EQ(mem.seconds, 1e-6 + 49152 / 1e10);
  EXPECT_EQ(mem.reason, "memory-bound 49.2 kB");

  // A slow GEMM unit makes it compute-bound: 524288 / 1e10 + 4096 / 1e10.
  DeviceSpec slow = toy_spec();
  slow.peak_linear = 1e10;
  const KernelCost comp = AnalyticCost(slow).cost(g, mm_relu);
  EXPECT_DOUBLE_EQ(comp.seconds, 1e-6 + 524288 / 1e10 + 4096 / 1e10);
  EXPECT_EQ(comp.reason, "compute-bound 528.4 kFLOP");
}

TEST(AnalyticCost, UnfusableCandidateIsInfeasibleWithTheReason) {
  const Graph g = matmul_graph();
  const ValueId a = value_named(g, "a"), b = value_named(g, "b"), z = value_named(g, "z");
  const KernelCost k = AnalyticCost(toy_spec()).cost(g, candidate({2, 3}, {a, b}, {z}, 1));
  EXPECT_FALSE(k.feasible());
  EXPECT_TRUE(std::isinf(k.seconds));
  EXPECT_EQ(k.reason, "Relu is not downstream of MatMul: linear kernels fuse epilogues only");
}

TEST(AnalyticCost, BuiltInSpecsAreSane) {
  for (const DeviceSpec& s : {cpu_spec(), h200_spec()}) {
    SCOPED_TRACE(s.name);
    EXPECT_GT(s.cache_bandwidth, s.dram_bandwidth);
    EXPECT_GT(s.peak_linear, s.peak_vector);
    EXPECT_GT(s.launch_seconds, 0);
    EXPECT_LT(s.launch_seconds, 1e-4);
    EXPECT_GE(s.threads, 1);
  }
  EXPECT_GT(h200_spec().dram_bandwidth, 50 * cpu_spec().dram_bandwidth);
}

TEST(DeviceSpecJson, RoundTrips) {
  for (const DeviceSpec& s : {cpu_spec(), h200_spec(), toy_spec()}) {
    const DeviceSpec back = device_spec_from_json(device_spec_to_json(s), "spec.json");
    EXPECT_EQ(back.name, s.name);
    EXPECT_EQ(back.dram_bandwidth, s.dram_bandwidth);
    EXPECT_EQ(back.cache_bytes, s.cache_bytes);
    EXPECT_EQ(back.cache_bandwidth, s.cache_bandwidth);
    EXPECT_EQ(back.peak_linear, s.peak_linear);
    EXPECT_EQ(back.peak_vector, s.peak_vector);
    EXPECT_EQ(back.launch_seconds, s.launch_seconds);
    EXPECT_EQ(back.threads, s.threads);
  }
}

std::string error_of(const std::string& text) {
  try {
    device_spec_from_json(text, "my.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalid);
    return e.what();
  }
  ADD_FAILURE() << "no error for " << text;
  return "";
}

TEST(DeviceSpecJson, ErrorsNameTheSourceAndField) {
  const std::string good = device_spec_to_json(toy_spec());
  auto with = [&](const std::string& field, const std::string& value) {
    nlohmann::json j = nlohmann::json::parse(good);
    if (value.empty()) j.erase(field);
    else j[field] = nlohmann::json::parse(value);
    return j.dump();
  };
  EXPECT_NE(error_of(with("peak_vector", "")).find("my.json: field \"peak_vector\" is missing"), std::string::npos);
  EXPECT_NE(error_of(with("dram_bandwidth", "-5")).find("\"dram_bandwidth\" must be a positive number, got -5"),
            std::string::npos);
  EXPECT_NE(error_of(with("cache_bytes", "\"big\"")).find("\"cache_bytes\""), std::string::npos);
  EXPECT_NE(error_of(with("threads", "1.5")).find("\"threads\""), std::string::npos);
  EXPECT_NE(error_of(with("name", "")).find("\"name\""), std::string::npos);
  EXPECT_NE(error_of(with("dram_bandwith", "1e9")).find("unknown field \"dram_bandwith\""), std::string::npos);
  EXPECT_NE(error_of("{\"name\": ").find("my.json: not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[1, 2]").find("must be a JSON object"), std::string::npos);
  // Zero launch cost is allowed; zero bandwidth is not.
  EXPECT_EQ(device_spec_from_json(with("launch_seconds", "0"), "x").launch_seconds, 0);
  EXPECT_NE(error_of(with("cache_bandwidth", "0")).find("\"cache_bandwidth\""), std::string::npos);
}

TEST(MeasureCpuSpec, TriadGivesPositiveFiniteBandwidth) {
  const auto t0 = std::chrono::steady_clock::now();
  const double cache = measure_triad_bandwidth(2, 256 * 1024, 3);
  const double dram = measure_triad_bandwidth(1, 4 * 1024 * 1024, 1);
  EXPECT_TRUE(std::isfinite(cache) && cache > 1e8) << cache;
  EXPECT_TRUE(std::isfinite(dram) && dram > 1e8) << dram;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  EXPECT_THROW(measure_triad_bandwidth(0, 1024, 1), Error);
}

// The measurement behind cpu_spec() (bench/results/device_specs.md); about a second per run:
//   build/tests/korch_orchestrate_tests --gtest_also_run_disabled_tests
//       --gtest_filter='MeasureCpuSpec.DISABLED_Print' --gtest_repeat=7
TEST(MeasureCpuSpec, DISABLED_Print) {
  const auto t0 = std::chrono::steady_clock::now();
  const DeviceSpec s = measure_cpu_spec(2);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(s.dram_bandwidth, 0);
  EXPECT_GT(s.cache_bandwidth, 0);
  std::cout << "dram_bandwidth " << s.dram_bandwidth / 1e9 << " GB/s, cache_bandwidth " << s.cache_bandwidth / 1e9
            << " GB/s, took " << seconds << " s\n";
}

}  // namespace
}  // namespace korch
