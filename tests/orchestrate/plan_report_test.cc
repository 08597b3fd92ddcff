// report.html (plan_report.h) from a small hand-written plan JSON: a valid, self-contained page;
// with Graphviz, one <g class="kernel"> per kernel and the recomputed primitive marked in each
// kernel that computes it; without it (or above the size limit) the page says why and keeps the rest.
#include "orchestrate/plan_report.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "support/process.h"

namespace korch {
namespace {

using nlohmann::json;

// x -> Conv -> c -> Relu -> r -> {Neg -> y, Exp -> z}; kernel 0 = {Conv, Relu} writes c,
// kernel 1 = {Relu, Neg} recomputes Relu from c, kernel 2 = {Exp} reads r from kernel 0.
json small_plan() {
  auto prim = [](const char* name, const char* op, const char* kind, json reads, json writes) {
    return json{{"name", name}, {"op_type", op}, {"kind", kind}, {"reads", reads}, {"writes", writes}};
  };
  json p;
  p["format"] = "korch-plan";
  p["model"] = "builtin:<small>";
  p["device"] = "cpu";
  p["cost_model"] = "analytic:cpu";
  p["graph"] = {{"primitives", 4}};
  p["candidates"] = {{"count", 9}};
  p["solver"] = {{"source", "blp"}, {"name", "cbc"}, {"status", "optimal"}, {"objective_s", 6e-6},
                 {"bound_s", 6e-6}, {"gap", 0.0},    {"seconds", 0.01}};
  p["cost"] = {{"plan_s", 6e-6}, {"unfused_s", 9e-6}, {"greedy_s", 7e-6}};
  p["greedy"] = {{"groups", 2}, {"kernels", 2}, {"split_groups", 0}, {"why", ""}};
  p["kernels"] = json::array(
      {{{"step", 0},
        {"primitives",
         {prim("conv", "Conv", "linear", {"x"}, {"c"}), prim("relu", "Relu", "elementwise", {"c"}, {"r"})}},
        {"inputs", {"x"}},
        {"outputs", {"c", "r"}},
        {"cost_s", 3e-6},
        {"note", "linear 1.0 MFLOP"},
        {"recomputed", {"relu"}}},
       {{"step", 1},
        {"primitives",
         {prim("relu", "Relu", "elementwise", {"c"}, {"r"}), prim("neg", "Neg", "elementwise", {"r"}, {"y"})}},
        {"inputs", {"c"}},
        {"outputs", {"y"}},
        {"cost_s", 2e-6},
        {"note", "memory-bound 8 kB"},
        {"recomputed", {"relu"}}},
       {{"step", 2},
        {"primitives", {prim("<exp>", "Exp", "elementwise", {"r"}, {"z"})}},
        {"inputs", {"r"}},
        {"outputs", {"z"}},
        {"cost_s", 1e-6},
        {"note", "memory-bound 4 kB"},
        {"recomputed", json::array()}}});
  return p;
}

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + needle.size())) ++n;
  return n;
}

// Every http(s) reference left once the SVG namespace declarations are taken out.
std::string without_xmlns(std::string s) {
  for (const std::string ns : {"xmlns=\"http://www.w3.org/2000/svg\"", "xmlns:xlink=\"http://www.w3.org/1999/xlink\""})
    for (size_t at; (at = s.find(ns)) != std::string::npos;) s.erase(at, ns.size());
  return s;
}

void expect_self_contained_page(const std::string& html) {
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* tag : {"<html lang=\"en\">", "<head>", "<meta charset=\"utf-8\">", "<title>Korch plan: ", "</head>",
                          "<body>", "</body>", "</html>"})
    EXPECT_EQ(count(html, tag), 1u) << tag;
  const std::string rest = without_xmlns(html);
  EXPECT_EQ(rest.find("http://"), std::string::npos);
  EXPECT_EQ(rest.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
}

bool have_dot() {
  std::string out;
  return run_shell("command -v dot >/dev/null 2>&1", &out) == 0;
}

TEST(PlanReport, TablesWithoutGraphviz) {
  ReportOptions o;
  o.dot = "/nonexistent/korch-test-dot";
  const PlanDrawing d = draw_plan(small_plan(), o);
  EXPECT_TRUE(d.svg.empty());
  EXPECT_NE(d.why_not.find("not installed (apt install graphviz)"), std::string::npos) << d.why_not;
  const std::string html = plan_report_html(small_plan(), d);
  expect_self_contained_page(html);
  EXPECT_NE(html.find("is not installed (apt install graphviz)"), std::string::npos);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  // One row per kernel, the recomputed primitive marked in both kernels, names escaped.
  EXPECT_EQ(count(html, "<tr id=\"step-"), 3u);
  EXPECT_EQ(count(html, "class=\"prim k-elementwise recomputed\""), 2u);
  EXPECT_NE(html.find("&lt;exp&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<exp>"), std::string::npos);
  // Summary and baselines.
  EXPECT_NE(html.find("none offered"), std::string::npos);
  EXPECT_NE(html.find("optimal"), std::string::npos);
  EXPECT_NE(html.find("6.0 µs"), std::string::npos);  // plan
  EXPECT_NE(html.find("9.0 µs"), std::string::npos);  // unfused
  EXPECT_NE(html.find("7.0 µs"), std::string::npos);  // greedy
  EXPECT_NE(html.find("1.50×"), std::string::npos);   // unfused / plan
  EXPECT_NE(html.find("50.0%"), std::string::npos);   // kernel 0's share
  EXPECT_NE(html.find("memory-bound 8 kB"), std::string::npos);
}

TEST(PlanReport, SizeLimitSkipsTheDrawing) {
  ReportOptions o;
  o.max_drawn_nodes = 4;  // the plan has 5 primitive instances (Relu twice)
  const PlanDrawing d = draw_plan(small_plan(), o);
  EXPECT_TRUE(d.svg.empty());
  EXPECT_NE(d.why_not.find("5 primitive instances"), std::string::npos) << d.why_not;
}

TEST(PlanReport, GreedyBaselineNotPricedSaysWhy) {
  json p = small_plan();
  p["cost"]["greedy_s"] = nullptr;
  p["greedy"]["why"] = "primitive 'q' (TopK) has no single-primitive kernel with a finite cost";
  p["rewrites"] = {{"offered", 3},
                   {"chosen", json::array({{{"rule", "merge_matmuls"},
                                            {"name", "mm1"},
                                            {"description", "2 MatMuls of x"},
                                            {"saved_s", 2e-6}}})}};
  const std::string html = plan_report_html(p, PlanDrawing{"", "no drawing here", 0});
  EXPECT_NE(html.find("not priced: primitive &#39;q&#39; (TopK)"), std::string::npos);
  EXPECT_EQ(html.find("7.0 µs"), std::string::npos);
  EXPECT_NE(html.find("1 of 3 sites chosen<br>merge_matmuls at mm1: 2 MatMuls of x (saves 2.0 µs)"), std::string::npos)
      << html;
  EXPECT_EQ(html.find("none offered"), std::string::npos);
}

// After the closed loop every baseline is priced on the isolated costs, and the measured times
// (end to end, per kernel) get their own columns.
TEST(PlanReport, ClosedLoopPricesOnIsolatedCostsAndShowsMeasured) {
  json p = small_plan();
  p["cost"] = {{"plan_s", 6e-6},
               {"measured_s", 6.5e-6},
               {"plan_isolated_s", 5e-6},
               {"unfused_s", 20e-6},
               {"unfused_isolated_s", 10e-6},
               {"greedy_s", 8e-6},
               {"greedy_isolated_s", 7.5e-6}};
  for (json& k : p["kernels"]) {
    k["in_model_s"] = k["cost_s"];
    k["isolated_s"] = k["cost_s"].get<double>() / 2;
  }
  const std::string html = plan_report_html(p, PlanDrawing{"", "no drawing here", 0});
  expect_self_contained_page(html);
  EXPECT_NE(html.find("<th>Priced on isolated costs</th>"), std::string::npos);
  EXPECT_NE(html.find("<th>Measured in the model</th><th>Alone</th>"), std::string::npos);
  EXPECT_NE(html.find("6.5 µs (in the model, closed loop)"), std::string::npos);
  EXPECT_NE(html.find("2.00×"), std::string::npos);    // unfused isolated / plan isolated
  EXPECT_NE(html.find("1.50×"), std::string::npos);    // greedy isolated / plan isolated
  EXPECT_NE(html.find("20.0 µs"), std::string::npos);  // unfused measured
  EXPECT_NE(html.find("1.5 µs"), std::string::npos);   // kernel 0 alone
}

TEST(PlanReport, DotHasOneClusterPerKernelAndEdgesAlongValues) {
  const std::string dot = plan_to_dot(small_plan());
  EXPECT_EQ(count(dot, "subgraph cluster_k"), 3u);
  EXPECT_EQ(count(dot, "class=\"kernel\""), 3u);
  EXPECT_EQ(count(dot, "class=\"recomputed\""), 2u);
  // Primitive ids: conv 0, relu 1, neg 2, <exp> 3.
  EXPECT_NE(dot.find("k0_p0 -> k0_p1;"), std::string::npos);  // inside kernel 0
  EXPECT_NE(dot.find("k0_p0 -> k1_p1;"), std::string::npos);  // c from kernel 0 into kernel 1's Relu
  EXPECT_NE(dot.find("k1_p1 -> k1_p2;"), std::string::npos);  // the recomputed r, inside kernel 1
  EXPECT_NE(dot.find("k0_p1 -> k2_p3;"), std::string::npos);  // r from kernel 0 into kernel 2
  EXPECT_EQ(count(dot, " -> "), 4u);
  EXPECT_NE(dot.find("tooltip=\"<exp> (elementwise)\""), std::string::npos);
}

TEST(PlanReport, MarksKernelAndRecomputedGroups) {
  const std::string svg =
      "<svg xmlns=\"http://www.w3.org/2000/svg\"><g id=\"graph0\" class=\"graph\">"
      "<g id=\"kernel-0\" class=\"cluster kernel\"><title>cluster_k0</title></g>"
      "<g id=\"a_kernel-0\"><a xlink:href=\"#step-0\"></a></g>"
      "<g id=\"k0-p1\" class=\"node recomputed\"><title>k0_p1</title></g>"
      "<g id=\"kernel&#45;12\" class=\"cluster\"></g><g id=\"k12-p3\" class=\"node\"></g></g></svg>";
  const std::string out = mark_svg_groups(svg, {"k0-p1"});
  EXPECT_EQ(count(out, "<g class=\"kernel\" id=\"kernel-0\" data-step=\"0\">"), 1u);
  EXPECT_EQ(count(out, "<g class=\"kernel\" id=\"kernel-12\" data-step=\"12\">"), 1u);
  EXPECT_EQ(count(out, "<g class=\"kernel\""), 2u);
  EXPECT_EQ(count(out, "<g class=\"node recomputed\" id=\"k0-p1\">"), 1u);
  EXPECT_EQ(count(out, "<g id=\"a_kernel-0\">"), 1u);
  EXPECT_EQ(count(out, "<g id=\"k12-p3\" class=\"node\">"), 1u);
}

TEST(PlanReport, GraphvizDrawing) {
  if (!have_dot()) GTEST_SKIP() << "Graphviz's dot is not installed (apt install graphviz)";
  const PlanDrawing d = draw_plan(small_plan());
  ASSERT_FALSE(d.svg.empty()) << d.why_not;
  EXPECT_EQ(d.svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(d.svg.find("<!--"), std::string::npos);
  EXPECT_EQ(count(d.svg, "<g class=\"kernel\""), 3u);
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(count(d.svg, "<g class=\"kernel\" id=\"kernel-" + std::to_string(k) + "\""), 1u) << k;
  EXPECT_EQ(count(d.svg, "<g class=\"node recomputed\""), 2u);
  EXPECT_EQ(count(d.svg, "class=\"node"), 5u);  // every primitive instance
  const std::string html = plan_report_html(small_plan(), d);
  expect_self_contained_page(html);
  EXPECT_EQ(count(html, "<svg"), 1u);
  EXPECT_EQ(count(html, "<g class=\"kernel\""), 3u);
}

}  // namespace
}  // namespace korch
