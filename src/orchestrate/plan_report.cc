#include "orchestrate/plan_report.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "support/clock.h"
#include "support/error.h"
#include "support/process.h"

namespace korch {

namespace {

using nlohmann::json;

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A DOT double-quoted string: backslashes and quotes escaped, so no label escape (\N, \l) fires.
std::string dot_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return out + "\"";
}

std::optional<double> number(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string text(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

const json& member(const json& j, const char* key) {
  static const json none;
  if (!j.is_object()) return none;
  auto it = j.find(key);
  return it == j.end() ? none : *it;
}

const json& kernels_of(const json& plan) {
  static const json none = json::array();
  const json& k = member(plan, "kernels");
  return k.is_array() ? k : none;
}

std::string seconds_text(double s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.1f} µs", s * 1e6);
}

std::string seconds_text(std::optional<double> s) { return s ? seconds_text(*s) : "—"; }

std::vector<std::string> strings(const json& j) {
  std::vector<std::string> out;
  if (j.is_array())
    for (const json& x : j)
      if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

const char* kind_color(const std::string& kind) {
  if (kind == "linear") return "#cfe2ff";
  if (kind == "reduce") return "#ffe0b2";
  if (kind == "layout") return "#e9ecef";
  if (kind == "broadcast") return "#eadcf8";
  if (kind == "elementwise") return "#d8f3dc";
  return "#f8d7da";  // opaque, operator
}

// The primitive instances of the drawing: kernel step x primitive, named as plan_to_dot does.
struct Instances {
  std::map<std::string, int> id_of;  // primitive name -> number
  int64_t count = 0;
  std::vector<std::string> recomputed_ids;
  explicit Instances(const json& plan) {
    for (const json& k : kernels_of(plan)) {
      const std::vector<std::string> rec = strings(member(k, "recomputed"));
      const int step = static_cast<int>(number(k, "step").value_or(0));
      for (const json& p : member(k, "primitives")) {
        const std::string name = text(p, "name");
        const int id = id_of.emplace(name, static_cast<int>(id_of.size())).first->second;
        ++count;
        if (std::find(rec.begin(), rec.end(), name) != rec.end()) recomputed_ids.push_back(svg_id(step, id));
      }
    }
  }
  static std::string dot_id(int step, int prim) { return fmt::format("k{}_p{}", step, prim); }
  static std::string svg_id(int step, int prim) { return fmt::format("k{}-p{}", step, prim); }
};

std::string strip_to_svg(const std::string& s) {
  const size_t begin = s.find("<svg");
  const size_t end = s.rfind("</svg>");
  if (begin == std::string::npos || end == std::string::npos || end < begin) return "";
  std::string body = s.substr(begin, end + 6 - begin), out;
  // Comments carry node names (which could read like anything) and nothing the page shows.
  size_t pos = 0;
  for (size_t c; (c = body.find("<!--", pos)) != std::string::npos;) {
    out.append(body, pos, c - pos);
    const size_t e = body.find("-->", c);
    if (e == std::string::npos) return out;
    pos = e + 3;
  }
  out.append(body, pos);
  return out;
}

}  // namespace

std::string plan_to_dot(const json& plan) {
  const Instances inst(plan);
  const json& kernels = kernels_of(plan);
  double total = 0, top = 0;
  for (const json& k : kernels) {
    total += number(k, "cost_s").value_or(0);
    top = std::max(top, number(k, "cost_s").value_or(0));
  }
  std::string out =
      "digraph plan {\n"
      "  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=10, nodesep=0.12, ranksep=0.22, "
      "bgcolor=\"transparent\"];\n"
      "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=9, height=0.22, width=0.3,"
      " margin=\"0.06,0.02\", penwidth=0.8];\n"
      "  edge [arrowsize=0.45, color=\"#777777\", penwidth=0.7];\n";
  // value -> (step, dot id of the primitive that writes it) for each kernel that outputs it.
  std::map<std::string, std::vector<std::pair<int, std::string>>> writers;
  std::vector<std::map<std::string, std::string>> local(kernels.size());  // per kernel: value -> writer
  for (size_t s = 0; s < kernels.size(); ++s) {
    const json& k = kernels[s];
    const int step = static_cast<int>(s);
    const double cost = number(k, "cost_s").value_or(0);
    const std::vector<std::string> rec = strings(member(k, "recomputed"));
    // Fill: the hotter, the more of the total the kernel takes (relative to the costliest).
    const double t = top > 0 ? std::sqrt(cost / top) : 0;
    const auto mix = [&](int a, int b) { return static_cast<int>(std::lround(a + (b - a) * t)); };
    std::vector<std::string> ops;
    for (const json& p : member(k, "primitives")) ops.push_back(text(p, "op_type"));
    out += fmt::format(
        "  subgraph cluster_k{0} {{\n    id=\"kernel-{0}\"; class=\"kernel\"; URL=\"#step-{0}\"; tooltip={1};\n"
        "    label={2}; labeljust=l; fontsize=9; style=\"rounded,filled\"; color=\"#8a8a8a\";"
        " fillcolor=\"#{3:02x}{4:02x}{5:02x}\";\n",
        step, dot_quote(fmt::format("kernel {}: {}", step, fmt::join(ops, " + "))),
        dot_quote(fmt::format("#{}  {:.1f} us  {:.0f}%", step, cost * 1e6, total > 0 ? 100 * cost / total : 0)),
        mix(0xf6, 0xff), mix(0xf6, 0xb0), mix(0xf6, 0x6a));
    for (const json& p : member(k, "primitives")) {
      const std::string name = text(p, "name"), kind = text(p, "kind");
      const std::string id = Instances::dot_id(step, inst.id_of.at(name));
      const bool again = std::find(rec.begin(), rec.end(), name) != rec.end();
      out += fmt::format(
          "    {} [id=\"{}\", label={}, tooltip={}, fillcolor=\"{}\"{}];\n", id,
          Instances::svg_id(step, inst.id_of.at(name)), dot_quote(text(p, "op_type")),
          dot_quote(fmt::format("{} ({}{})", name, kind, again ? ", recomputed" : "")), kind_color(kind),
          again ? ", class=\"recomputed\", style=\"rounded,filled,dashed\", color=\"#c0392b\", penwidth=1.4" : "");
      for (const std::string& v : strings(member(p, "writes"))) local[s][v] = id;
    }
    out += "  }\n";
    for (const std::string& v : strings(member(k, "outputs")))
      if (auto it = local[s].find(v); it != local[s].end()) writers[v].emplace_back(step, it->second);
  }
  std::set<std::pair<std::string, std::string>> edges;
  for (size_t s = 0; s < kernels.size(); ++s) {
    for (const json& p : member(kernels[s], "primitives")) {
      const std::string to = Instances::dot_id(static_cast<int>(s), inst.id_of.at(text(p, "name")));
      for (const std::string& v : strings(member(p, "reads"))) {
        if (auto it = local[s].find(v); it != local[s].end()) {
          if (it->second != to) edges.emplace(it->second, to);
          continue;
        }
        // From the last earlier kernel that writes v (none: a graph input or a constant).
        auto w = writers.find(v);
        if (w == writers.end()) continue;
        const std::string* from = nullptr;
        for (const auto& [step, id] : w->second)
          if (step < static_cast<int>(s)) from = &id;
        if (from) edges.emplace(*from, to);
      }
    }
  }
  for (const auto& [a, b] : edges) out += fmt::format("  {} -> {};\n", a, b);
  return out + "}\n";
}

std::string mark_svg_groups(const std::string& svg, const std::vector<std::string>& recomputed_ids) {
  const std::set<std::string> recomputed(recomputed_ids.begin(), recomputed_ids.end());
  const std::string open = "<g id=\"";
  std::string out;
  out.reserve(svg.size() + svg.size() / 16);
  size_t pos = 0;
  for (size_t at; (at = svg.find(open, pos)) != std::string::npos;) {
    const size_t id_begin = at + open.size();
    const size_t id_end = svg.find('"', id_begin);
    const size_t tag_end = id_end == std::string::npos ? id_end : svg.find('>', id_end);
    if (tag_end == std::string::npos) break;
    out.append(svg, pos, at - pos);
    // dot writes '-' in ids as "&#45;" (2.43); other versions may not.
    std::string id;
    for (size_t i = id_begin; i < id_end;) {
      const bool dash = svg.compare(i, 5, "&#45;") == 0;
      id += dash ? '-' : svg[i];
      i += dash ? 5 : 1;
    }
    const bool kernel = id.rfind("kernel-", 0) == 0 && id.size() > 7 &&
                        std::all_of(id.begin() + 7, id.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (kernel)
      out += fmt::format("<g class=\"kernel\" id=\"{}\" data-step=\"{}\">", id, id.substr(7));
    else if (recomputed.count(id))
      out += fmt::format("<g class=\"node recomputed\" id=\"{}\">", id);
    else
      out.append(svg, at, tag_end + 1 - at);
    pos = tag_end + 1;
  }
  out.append(svg, pos);
  return out;
}

PlanDrawing draw_plan(const json& plan, const ReportOptions& o) {
  namespace fs = std::filesystem;
  PlanDrawing d;
  const Instances inst(plan);
  if (inst.count == 0) {
    d.why_not = "The plan has no kernels, so there is nothing to draw.";
    return d;
  }
  if (inst.count > o.max_drawn_nodes) {
    d.why_not = fmt::format(
        "No drawing: the plan has {} primitive instances, more than the {} a quick Graphviz layout allows. "
        "The tables have every kernel.",
        inst.count, o.max_drawn_nodes);
    return d;
  }
  static std::atomic<int> counter{0};
  const fs::path tmp = fs::temp_directory_path() / fmt::format("korch-report-{}-{}", getpid(), counter++);
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (ec) {
    d.why_not = fmt::format("No drawing: cannot create a scratch folder {} ({}).", tmp.string(), ec.message());
    return d;
  }
  const auto t0 = std::chrono::steady_clock::now();
  {
    std::ofstream f(tmp / "plan.dot");
    f << plan_to_dot(plan);
  }
  const std::string dot = shell_quote(o.dot);
  const std::string cmd =
      fmt::format("command -v {0} >/dev/null 2>&1 || exit 127; timeout {1} {0} -Tsvg -o {2} {3}", dot, o.dot_timeout_s,
                  shell_quote((tmp / "plan.svg").string()), shell_quote((tmp / "plan.dot").string()));
  std::string output;
  int rc = 0;
  try {
    rc = run_shell(cmd, &output);
  } catch (const Error& e) {
    rc = -1;
    output = e.what();
  }
  d.seconds = since(t0);
  if (rc == 127) {
    d.why_not = fmt::format("No drawing: Graphviz's `{}` is not installed (apt install graphviz).", o.dot);
  } else if (rc == 124) {
    d.why_not = fmt::format("No drawing: Graphviz took longer than {} s to lay out {} primitive instances.",
                            o.dot_timeout_s, inst.count);
  } else if (rc != 0) {
    const std::string first = output.substr(0, output.find('\n'));
    d.why_not = fmt::format("No drawing: `{} -Tsvg` failed (exit {}): {}", o.dot, rc, first);
  } else {
    std::ifstream f(tmp / "plan.svg");
    std::stringstream ss;
    ss << f.rdbuf();
    d.svg = mark_svg_groups(strip_to_svg(ss.str()), inst.recomputed_ids);
    if (d.svg.empty()) d.why_not = fmt::format("No drawing: `{} -Tsvg` wrote no SVG.", o.dot);
  }
  fs::remove_all(tmp, ec);
  return d;
}

namespace {

constexpr const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px 32px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:3px}
.meta{color:#555;margin:0 0 8px}table{border-collapse:collapse;margin:4px 0}
td,th{border:1px solid #ddd;padding:3px 8px;vertical-align:top;text-align:left}th{background:#f4f4f4}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.kv th{width:14em}.bar{background:#eee;width:260px;height:12px;border-radius:2px}
.bar span{display:block;height:12px;background:#e8923a;border-radius:2px}.bar.plan span{background:#3a7de8}
.note{color:#555;font-size:13px;max-width:60em}.why{background:#fff6e0;border:1px solid #f0d58a;padding:8px 12px;max-width:60em}
.prim{display:inline-block;border:1px solid #bbb;border-radius:3px;padding:0 4px;margin:1px;font-size:12px}
.prim.recomputed{border:1px dashed #c0392b;color:#c0392b}.graph{overflow:auto;border:1px solid #ddd;max-height:1400px}
g.kernel:hover>path,g.kernel:hover>polygon{stroke:#3a7de8;stroke-width:2}g.node.recomputed path{stroke-dasharray:3,2}
.k-linear{background:#cfe2ff}.k-reduce{background:#ffe0b2}.k-layout{background:#e9ecef}.k-broadcast{background:#eadcf8}
.k-elementwise{background:#d8f3dc}.k-opaque,.k-operator{background:#f8d7da}
)";

void add_row(std::string& out, const std::string& key, const std::string& value_html) {
  out += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", html_escape(key), value_html);
}

}  // namespace

std::string plan_report_html(const json& plan, const PlanDrawing& drawing) {
  const json& kernels = kernels_of(plan);
  const json& cost = member(plan, "cost");
  const json& solver = member(plan, "solver");
  const json& greedy = member(plan, "greedy");
  const std::string model = text(plan, "model");
  std::string out;
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += fmt::format("<title>Korch plan: {}</title>\n<style>{}</style>\n</head>\n<body>\n", html_escape(model), kStyle);
  out += fmt::format("<h1>Korch plan: {}</h1>\n", html_escape(model));
  out += fmt::format("<p class=\"meta\">device {} · cost model {} · {} primitives · {} kernels · {} candidates</p>\n",
                     html_escape(text(plan, "device")), html_escape(text(plan, "cost_model")),
                     html_escape(text(member(plan, "graph"), "primitives")), kernels.size(),
                     html_escape(text(member(plan, "candidates"), "count")));

  // Summary.
  const std::optional<double> measured = number(cost, "measured_s");
  out += "<h2>Summary</h2>\n<table class=\"kv\">\n";
  add_row(out, "Predicted end to end", seconds_text(number(cost, "plan_s")) + " (sum of the kernels' costs)");
  add_row(out, "Measured end to end",
          measured ? seconds_text(*measured) + " (in the model, closed loop)"
                   : "not measured (the closed loop runs only with measured costs)");
  std::string status = html_escape(text(solver, "status"));
  if (!text(solver, "name").empty() || !text(solver, "source").empty())
    status += fmt::format(" (solver {}, plan from {})", html_escape(text(solver, "name")),
                          html_escape(text(solver, "source")));
  add_row(out, "Solver status", status);
  add_row(out, "Objective", seconds_text(number(solver, "objective_s")));
  add_row(out, "Bound", seconds_text(number(solver, "bound_s")));
  const std::optional<double> gap = number(solver, "gap");
  add_row(out, "Gap", gap ? fmt::format("{:.3g}%", *gap * 100) : "—");
  const std::optional<double> solve_s = number(solver, "seconds");
  add_row(out, "Solver time", solve_s ? fmt::format("{:.3f} s", *solve_s) : "—");
  // plan.json's "rewrites" (rewrite_choice.h): the sites offered, and each chosen one with what it saved.
  const json& rewrites = member(plan, "rewrites");
  std::string rw = "none offered";
  const std::optional<double> offered = number(rewrites, "offered");
  if (offered && *offered > 0) {
    const json& chosen = member(rewrites, "chosen");
    rw = fmt::format("{} of {:.0f} sites chosen", chosen.is_array() ? chosen.size() : 0, *offered);
    for (const json& c : chosen.is_array() ? chosen : json::array()) {
      const std::optional<double> saved = number(c, "saved_s");
      rw += fmt::format("<br>{} at {}: {}{}", html_escape(text(c, "rule")), html_escape(text(c, "name")),
                        html_escape(text(c, "description")),
                        saved ? fmt::format(" (saves {})", seconds_text(saved)) : "");
    }
  }
  add_row(out, "Rewrites", rw);
  out += "</table>\n";

  // Baselines, each priced on one cost table: the plan's (analytic or isolated measured costs) or,
  // after the closed loop, the isolated costs of every kernel (the plan's last table holds the
  // in-model times of whichever kernels the rounds ran: it would favour the plan).
  const bool loop = measured.has_value();
  const std::optional<double> plan_priced = number(cost, loop ? "plan_isolated_s" : "plan_s");
  struct Row {
    std::string name, kernels;
    std::optional<double> priced, in_model;
    std::string note;
  };
  std::vector<Row> rows;
  // Its whole runs beside the unfused plan's where the closed loop took them (one machine state for
  // both rows' in-model column), else its kernel-by-kernel run.
  const std::optional<double> beside = number(cost, "beside_unfused_s");
  rows.push_back({"This plan (the solver's)", std::to_string(kernels.size()), plan_priced,
                  beside && *beside > 0 ? beside : measured, ""});
  // After the closed loop, unfused_s is the baseline measured in the model.
  rows.push_back({"One kernel per primitive", text(member(plan, "graph"), "primitives"),
                  number(cost, loop ? "unfused_isolated_s" : "unfused_s"),
                  loop ? number(cost, "unfused_s") : std::nullopt, ""});
  const std::optional<double> greedy_s = number(cost, loop ? "greedy_isolated_s" : "greedy_s");
  std::string greedy_note;
  if (greedy.is_object())
    greedy_note = fmt::format("{} groups by the rules, {} of them split into candidates", text(greedy, "groups"),
                              text(greedy, "split_groups"));
  if (!greedy_s)
    greedy_note = greedy.is_object() && !text(greedy, "why").empty() ? "not priced: " + text(greedy, "why")
                                                                     : "not recorded in this plan.json";
  rows.push_back({"Greedy fusion (TVM-style rules)", greedy_s ? text(greedy, "kernels") : "—", greedy_s, std::nullopt,
                  greedy_note});
  double widest = 0;
  for (const Row& r : rows) widest = std::max(widest, r.priced.value_or(0));
  out += fmt::format(
      "<h2>Against baselines</h2>\n<table>\n<tr><th>Plan</th><th>Kernels</th><th>{}</th>"
      "<th>vs this plan</th><th></th>",
      loop ? "Priced on isolated costs" : "Priced on the costs");
  if (loop) out += "<th>Measured in the model</th>";
  out += "<th>Note</th></tr>\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const double w = r.priced && widest > 0 ? 100 * *r.priced / widest : 0;
    out += fmt::format(
        "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
        "<td><div class=\"bar{}\"><span style=\"width:{:.1f}%\"></span></div></td>",
        html_escape(r.name), html_escape(r.kernels), seconds_text(r.priced),
        r.priced && plan_priced && *plan_priced > 0 ? fmt::format("{:.2f}×", *r.priced / *plan_priced) : "—",
        i == 0 ? " plan" : "", w);
    if (loop) out += fmt::format("<td class=\"n\">{}</td>", seconds_text(r.in_model));
    out += fmt::format("<td>{}</td></tr>\n", html_escape(r.note));
  }
  out += "</table>\n<p class=\"note\">";
  if (loop)
    out += fmt::format(
        "The priced column uses every kernel's isolated cost ({}), one table for all three rows; the "
        "plan's own last cost table (in-model times of the kernels the closed loop ran) gives the "
        "plan {} and the greedy groups {}. {}",
        html_escape(text(plan, "cost_model")), seconds_text(number(cost, "plan_s")),
        seconds_text(number(cost, "greedy_s")),
        beside && *beside > 0 ? "The in-model column times this plan's and the unfused plan's whole runs in "
                                "alternating runs, one state of the machine for both. "
                              : "");
  else
    out += fmt::format(
        "The priced column uses the cost table the plan was chosen from ({}): the baselines are what "
        "the same costs say of other kernel choices. ",
        html_escape(text(plan, "cost_model")));
  out +=
      "Greedy fusion walks the primitives in topological order: an elementwise, broadcast or layout primitive "
      "joins its producer's group when it is the producer's only consumer or the producer is elementwise or "
      "linear; a reduction absorbs such producers and ends its group; a linear primitive starts one. A group that "
      "was a candidate costs what the candidate cost; otherwise it is split into the longest candidate "
      "prefixes.</p>\n\n";
  // The drawing.
  out += "<h2>Primitive graph</h2>\n";
  if (drawing.svg.empty()) {
    out += fmt::format("<p class=\"why\">{}</p>\n", html_escape(drawing.why_not));
  } else {
    out +=
        "<p class=\"note\">Each box around primitives is a kernel of the plan (hotter: more of the total); a "
        "dashed red primitive is recomputed by more than one kernel. Colours: <span class=\"prim k-linear\">linear"
        "</span><span class=\"prim k-elementwise\">elementwise</span><span class=\"prim k-broadcast\">broadcast"
        "</span><span class=\"prim k-layout\">layout</span><span class=\"prim k-reduce\">reduce</span><span "
        "class=\"prim k-opaque\">opaque</span>. Click a kernel for its row.</p>\n";
    out += "<div class=\"graph\">\n" + drawing.svg + "\n</div>\n";
  }

  // Kernels.
  bool any_in_model = false;
  double total = 0;
  for (const json& k : kernels) {
    any_in_model |= number(k, "in_model_s").has_value();
    total += number(k, "cost_s").value_or(0);
  }
  out += "<h2>Kernels</h2>\n<table>\n<tr><th>Step</th><th>Primitives</th><th>Cost</th>";
  if (any_in_model) out += "<th>Measured in the model</th><th>Alone</th>";
  out += "<th>Share</th><th>Bound / note</th></tr>\n";
  for (const json& k : kernels) {
    const int step = static_cast<int>(number(k, "step").value_or(0));
    const std::vector<std::string> rec = strings(member(k, "recomputed"));
    std::string prims;
    for (const json& p : member(k, "primitives")) {
      const std::string name = text(p, "name");
      const bool again = std::find(rec.begin(), rec.end(), name) != rec.end();
      prims += fmt::format("<span class=\"prim k-{}{}\" title=\"{}\">{}{}</span>", html_escape(text(p, "kind")),
                           again ? " recomputed" : "", html_escape(name + (again ? " (recomputed)" : "")),
                           html_escape(text(p, "op_type")), again ? " ↻" : "");
    }
    const std::optional<double> c = number(k, "cost_s");
    out += fmt::format("<tr id=\"step-{}\"><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td>", step, step,
                       prims, seconds_text(c));
    if (any_in_model)
      out += fmt::format("<td class=\"n\">{}</td><td class=\"n\">{}</td>", seconds_text(number(k, "in_model_s")),
                         seconds_text(number(k, "isolated_s")));
    out += fmt::format("<td class=\"n\">{}</td><td>{}</td></tr>\n",
                       c && total > 0 ? fmt::format("{:.1f}%", 100 * *c / total) : "—", html_escape(text(k, "note")));
  }
  out += "</table>\n";
  if (std::any_of(kernels.begin(), kernels.end(),
                  [](const json& k) { return !strings(member(k, "recomputed")).empty(); }))
    out +=
        "<p class=\"note\">↻ marks a primitive computed by more than one kernel (recompute instead of writing "
        "and reading its value).</p>\n";
  out += "</body>\n</html>\n";
  return out;
}

void write_plan_report(const std::string& dir, const json& plan, const ReportOptions& o) {
  const std::string html = plan_report_html(plan, draw_plan(plan, o));
  const std::string path = (std::filesystem::path(dir) / "report.html").string();
  std::ofstream f(path, std::ios::binary);
  f << html;
  if (!f) fail_io("cannot write {}", path);
}

}  // namespace korch
