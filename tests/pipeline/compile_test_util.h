// Shared by the compile_model tests (compile_test.cc, closed_loop_test.cc): the fixture (an
// artifact folder per test, checked against the reference interpreter) and small graphs.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "ir/interpreter.h"
#include "ir/random.h"
#include "ir/tensor_compare.h"
#include "ir/text_format.h"
#include "pipeline/compile.h"
#include "runtime/executable.h"

namespace korch::testing {

class CompileModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::getenv("KORCH_CACHE_DIR")) setenv("KORCH_CACHE_DIR", "/tmp/korch-cache-pipeline-tests", 1);
  }
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("korch_compile_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The artifact in dir_ against the reference interpreter on `g`.
  void expect_runs_like_the_reference(const Graph& g, bool emulate) {
    runtime::LoadOptions lo;
    lo.emulate = emulate;
    auto exe = runtime::Executable::load(dir_.string(), lo);
    std::vector<Tensor> inputs = random_inputs(g, 5);
    std::vector<Tensor> got = exe->run(inputs), want = interpret(g, inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(rel_l2_diff(got[i], want[i], 1e-4), "") << exe->output_names()[i];
  }

  std::filesystem::path dir_;
};

// Two 512^3 MatMuls: milliseconds a run, three kernel boundaries.
inline Graph two_matmuls() {
  return parse_graph(R"(graph t (opset 17) {
  input a: f32[512,512]
  input b: f32[512,512]
  %c: f32[512,512] = MatMul(a, b)
  %d: f32[512,512] = Relu(c)
  %e: f32[512,512] = MatMul(d, b)
  output e
})");
}

// n values uniform in [-bound, bound], as a text-format constant ("[a, b, ...]").
inline std::string uniform_values(std::mt19937_64& rng, int n, float bound) {
  std::uniform_real_distribution<float> u(-bound, bound);
  std::string s;
  for (int i = 0; i < n; ++i) s += fmt::format("{}{:.4f}", i ? ", " : "", u(rng));
  return "[" + s + "]";
}

// What a compile logs (CompileOptions::log), kept to look for a line in and to print when a check
// fails: a closed-loop test whose loop took another turn under a loaded CI machine says why.
struct CompileLog {
  std::vector<std::string> lines;
  void attach(CompileOptions& o) {
    o.log = [this](const std::string& line) { lines.push_back(line); };
  }
  bool said(const std::string& what) const {
    for (const std::string& line : lines)
      if (line.find(what) != std::string::npos) return true;
    return false;
  }
  std::string text() const {
    std::string all = "the compile's log:\n";
    for (const std::string& line : lines) all += "  " + line + "\n";
    return all;
  }
};

// The first column of every row `sql` returns from the SQLite database at `path` (a tuning
// database), as numbers.
inline std::vector<double> db_column(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
  std::vector<double> out;
  while (sqlite3_step(st) == SQLITE_ROW) out.push_back(sqlite3_column_double(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

inline CompileOptions analytic(const std::string& target) {
  CompileOptions o;
  o.target = target;
  o.cost = CostSource::kAnalytic;
  o.model_name = "test";
  return o;
}

}  // namespace korch::testing
