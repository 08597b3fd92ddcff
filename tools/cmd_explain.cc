// korch explain ARTIFACT_DIR: the plan in plan.json, for a person.
//
// Prints the solver's verdict (status, objective, bound, gap, time), where the time goes (plan vs
// one kernel per primitive), why candidates were dropped, then one line per kernel: its cost, what
// bounds it, its primitives, and which of them are recomputed elsewhere. --json: the same facts as
// one JSON document.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "json_out.h"
#include "support/error.h"
#include "support/strings.h"

namespace korch::cli {

namespace {

std::string ops_of(const nlohmann::json& prims, size_t max_len) {
  std::string s;
  for (const auto& p : prims) s += (s.empty() ? "" : "+") + p.at("op_type").get<std::string>();
  if (s.size() > max_len) s = s.substr(0, max_len - 3) + "...";
  return s;
}

// The kernels in `order` as --json lists them: plan.json's facts plus each one's share of the plan.
nlohmann::json kernels_json(const nlohmann::json& ks, const std::vector<size_t>& order, double plan_s) {
  nlohmann::json a = nlohmann::json::array();
  for (size_t i : order) {
    const auto& k = ks[i];
    const double cost = k.at("cost_s").get<double>();
    a.push_back({{"step", k.at("step")},
                 {"cost_s", cost},
                 {"share", cost / std::max(plan_s, 1e-30)},
                 {"bound_by", k.at("note")},
                 {"primitives", k.at("primitives")},
                 {"outputs", k.at("outputs")},
                 {"recomputed", k.at("recomputed")}});
  }
  return a;
}

}  // namespace

Command add_explain(CLI::App& app) {
  struct Opts {
    std::string dir;
    int top = 0;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("artifact", o->dir, "Artifact directory written by korch compile")->required();
  app.add_option("--top", o->top, "Only the N most expensive kernels (0 = all, in execution order)");
  app.add_flag("--json", o->json, "Print the same facts as one JSON document (README: korch --json)");
  app.footer("Examples:\n  korch explain model.korch\n  korch explain model.korch --top 10 --json");
  return [o]() {
    const std::filesystem::path path = std::filesystem::path(o->dir) / "plan.json";
    std::ifstream f(path);
    if (!f) fail_io("cannot read {}: is {} an artifact directory written by korch compile?", path.string(), o->dir);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(f);
      if (j.value("format", "") != "korch-plan") fail("{} is not a Korch plan (format field)", path.string());
      if (j.value("version", 0) != 1) fail("{}: plan version {} is not supported (expected 1)", path.string(), j.value("version", 0));
      const auto& s = j.at("solver");
      const auto& c = j.at("cost");
      const double plan_s = c.at("plan_s"), unfused_s = c.at("unfused_s");
      // With the closed loop, unfused_s was measured beside the plan's whole runs (beside_unfused_s):
      // the gain is their ratio, not the unfused time over a prediction from another machine state
      // (a compile whose kernel-by-kernel run met a slow phase printed 1.41x, explain said 0.96x).
      const double beside_s = c.value("beside_unfused_s", 0.0);
      const double speedup = unfused_s / std::max(beside_s > 0 ? beside_s : plan_s, 1e-30);
      std::vector<size_t> order(j.at("kernels").size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      const auto& ks = j.at("kernels");
      if (o->top > 0) {
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
          return ks[a].at("cost_s").get<double>() > ks[b].at("cost_s").get<double>();
        });
        if (order.size() > static_cast<size_t>(o->top)) order.resize(static_cast<size_t>(o->top));
      }
      const auto& st = j.at("states");
      const auto& cand = j.at("candidates");
      if (o->json) {
        print_json({{"model", j.at("model")},
                    {"device", j.at("device")},
                    {"cost_model", j.at("cost_model")},
                    {"primitives", j.at("graph").at("primitives")},
                    {"kernel_count", ks.size()},
                    {"plan_s", plan_s},
                    {"unfused_s", unfused_s},
                    {"beside_unfused_s", beside_s > 0 ? nlohmann::json(beside_s) : nlohmann::json()},
                    {"speedup", speedup},
                    {"micro_batches", c.value("micro_batches", int64_t{1})},
                    {"solver",
                     {{"source", s.at("source")},
                      {"name", s.at("name")},
                      {"status", s.at("status")},
                      {"objective_s", s.at("objective_s")},
                      {"bound_s", s.at("bound_s")},
                      {"gap", s.at("gap")},
                      {"seconds", s.at("seconds")},
                      {"cycle_cuts", s.at("cycle_cuts")}}},
                    {"no_recompute",
                     {{"completed", st.at("completed")},
                      {"cost_s", st.at("no_recompute_cost_s")},
                      {"states", st.at("count")}}},
                    {"candidates",
                     {{"count", cand.at("count")},
                      {"connected_sets", cand.at("connected_sets")},
                      {"infeasible", cand.at("infeasible")},
                      {"infeasible_reasons", cand.at("infeasible_reasons")},
                      {"rejected", cand.at("rejected")}}},
                    {"rewrites", j.value("rewrites", nlohmann::json())},
                    {"kernels", kernels_json(ks, order, plan_s)}});
        return 0;
      }
      fmt::print("plan for {} on {} ({})\n", j.at("model").get<std::string>(), j.at("device").get<std::string>(),
                 j.at("cost_model").get<std::string>());
      if (beside_s > 0)  // after the closed loop: the gain compile printed, from one machine state
        fmt::print(
            "  {} primitives -> {} kernels; estimated {:.1f} us; beside one kernel per primitive (alternating runs) "
            "{:.1f} us against {:.1f} us ({:.2f}x)\n",
            j.at("graph").at("primitives").get<int64_t>(), j.at("kernels").size(), plan_s * 1e6, beside_s * 1e6,
            unfused_s * 1e6, speedup);
      else
        fmt::print("  {} primitives -> {} kernels; estimated {:.1f} us, one kernel per primitive {:.1f} us ({:.2f}x)\n",
                   j.at("graph").at("primitives").get<int64_t>(), j.at("kernels").size(), plan_s * 1e6, unfused_s * 1e6,
                   speedup);
      if (const int64_t n = c.value("micro_batches", int64_t{1}); n > 1)
        fmt::print(
            "  micro-batched: a run of the model is {} runs of this plan on micro-batches of its inputs (costs "
            "above are one run's)\n",
            n);
      fmt::print("  solver: {} via {}, status {}, objective {:.3f} us, bound {:.3f} us, gap {:.3g}%, {:.2f} s{}\n",
                 s.at("source").get<std::string>(), s.at("name").get<std::string>(),
                 s.at("status").get<std::string>(), s.at("objective_s").get<double>() * 1e6,
                 s.at("bound_s").get<double>() * 1e6, 100 * s.at("gap").get<double>(), s.at("seconds").get<double>(),
                 s.at("cycle_cuts").get<int>() ? fmt::format(", {} cycle cuts", s.at("cycle_cuts").get<int>()) : "");
      if (st.at("completed").get<bool>() && !st.at("no_recompute_cost_s").is_null())
        fmt::print("  without recompute the best is {:.1f} us ({} execution states searched)\n",
                   st.at("no_recompute_cost_s").get<double>() * 1e6, st.at("count").get<int64_t>());
      else
        fmt::print("  no-recompute search stopped at its state limit ({} states)\n", st.at("count").get<int64_t>());
      fmt::print("  candidates: {} from {} convex subgraphs; {} cannot be emitted\n", cand.at("count").get<int64_t>(),
                 cand.at("connected_sets").get<int64_t>(), cand.at("infeasible").get<int64_t>());
      // The most frequent reasons first; the full lists are in plan.json.
      auto print_reasons = [](const nlohmann::json& reasons, const char* what) {
        std::vector<std::pair<int64_t, std::string>> v;
        for (const auto& [reason, n] : reasons.items()) v.emplace_back(n.get<int64_t>(), reason);
        std::sort(v.rbegin(), v.rend());
        for (size_t i = 0; i < v.size() && i < 6; ++i) fmt::print("    {:>8} {}: {}\n", v[i].first, what, v[i].second);
        if (v.size() > 6) fmt::print("    {:>8} more reasons (plan.json)\n", v.size() - 6);
      };
      print_reasons(cand.at("infeasible_reasons"), "not emittable");
      print_reasons(cand.at("rejected"), "growth steps pruned");
      if (j.contains("rewrites") && j.at("rewrites").at("offered").get<int64_t>() > 0) {
        const auto& rw = j.at("rewrites");
        fmt::print("  rewrites: {} of {} sites chosen ({} variant graphs{})\n", rw.at("chosen").size(),
                   rw.at("offered").get<int64_t>(), rw.at("variant_graphs").get<int64_t>(),
                   rw.at("every_combination").get<bool>() ? ", every combination" : "");
        for (const auto& c : rw.at("chosen"))
          fmt::print("    {:<22} at {}: {}; {}\n", c.at("rule").get<std::string>(), c.at("name").get<std::string>(),
                     c.at("description").get<std::string>(),
                     c.at("saved_s").is_null()
                         ? std::string("saving not computed (its time ran out, or a memory budget)")
                         : fmt::format("without it the plan is {:.2f} us slower", c.at("saved_s").get<double>() * 1e6));
      }

      fmt::print("\n  {:>4}  {:>10}  {:>5}  {:<26}  {}\n", "step", "cost (us)", "prims", "bound by", "primitives -> outputs");
      for (size_t i : order) {
        const auto& k = ks[i];
        std::string outs;
        for (const auto& v : k.at("outputs")) outs += (outs.empty() ? "" : ", ") + v.get<std::string>();
        if (outs.size() > 60) outs = outs.substr(0, 57) + "...";
        fmt::print("  {:>4}  {:>10.2f}  {:>5}  {:<26}  {} -> {}\n", k.at("step").get<int>(),
                   k.at("cost_s").get<double>() * 1e6, k.at("primitives").size(), k.at("note").get<std::string>(),
                   ops_of(k.at("primitives"), 70), outs);
        if (!k.at("recomputed").empty()) {
          std::string r;
          for (const auto& v : k.at("recomputed")) r += (r.empty() ? "" : ", ") + v.get<std::string>();
          fmt::print("  {:>4}  {:>10}  {:>5}  recomputes (also in another kernel): {}\n", "", "", "", r);
        }
      }
    } catch (const nlohmann::json::exception& e) {
      fail("{} is malformed: {}", path.string(), e.what());
    }
    return 0;
  };
}

}  // namespace korch::cli
