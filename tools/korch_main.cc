// korch: the command line. Errors from any stage arrive as korch::Error and are printed as one
// line with a non-zero exit code; internal invariant failures abort with file:line.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "support/error.h"

namespace {

// Levenshtein distance, for suggesting the command a typo meant.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Help in two columns: the option and its value's type on the left; on the right what it does,
// then its default, what it needs and what it excludes (CLI11's own formatter puts those on the
// left, which pushes the description off its column).
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    if (!opt->get_option_text().empty()) return " " + opt->get_option_text();
    std::string out;
    if (opt->get_type_size() == 0) return out;
    if (!opt->get_type_name().empty()) out += " " + get_label(opt->get_type_name());
    if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
    if (opt->get_required()) out += " " + get_label("REQUIRED");
    return out;
  }
  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string out = opt->get_description();
    std::string def = opt->get_default_str();
    if (def.size() >= 2 && def.front() == '[' && def.back() == ']') def = def.substr(1, def.size() - 2);
    if (opt->get_type_size() != 0 && !opt->get_required() && !def.empty()) out += " (default: " + def + ")";
    auto names = [](const auto& opts) {
      std::string s;
      for (const CLI::Option* o : opts) s += (s.empty() ? "" : ", ") + o->get_name();
      return s;
    };
    if (!opt->get_needs().empty()) out += " [needs " + names(opt->get_needs()) + "]";
    if (!opt->get_excludes().empty()) out += " [not with " + names(opt->get_excludes()) + "]";
    return out;
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Korch: optimal kernel orchestration for tensor programs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "korch 0.1.0");
  // Every option's default in --help, after its description; subcommands inherit both settings.
  app.option_defaults()->always_capture_default();
  app.formatter(std::make_shared<HelpFormatter>());
  app.footer("Examples:\n  korch compile model.onnx -o model.korch   choose and build the kernels (measured on this CPU)\n"
             "  korch bench --artifact model.korch        time it next to onnxruntime and OpenVINO\n"
             "  korch help compile                        one command's options, defaults and examples");
  std::vector<std::pair<CLI::App*, korch::cli::Command>> commands;
  auto add = [&](const char* name, const char* help, auto adder) {
    CLI::App* sub = app.add_subcommand(name, help);
    commands.emplace_back(sub, adder(*sub));
  };
  add("inspect", "Print what Korch knows about a model: ops, tensors, parameters, FLOPs, bytes", korch::cli::add_inspect);
  add("demo", "The main job on the built-in models: load, inspect, run", korch::cli::add_demo);
  add("fission", "Split operators into primitives and write the primitive graph as ONNX", korch::cli::add_fission);
  add("compile", "Choose the cheapest kernels for a model and write the plan (plan.json) to an artifact directory",
      korch::cli::add_compile);
  add("explain", "Print an artifact's plan for a person: kernels, costs, why", korch::cli::add_explain);
  add("bench", "Time an artifact (or compile MODEL first) next to onnxruntime, OpenVINO and the unfused plan", korch::cli::add_bench);
  add("fold", "Write the model after the frontend (folded, simplified, static shapes) as ONNX", korch::cli::add_fold);
  add("ops", "List the supported ONNX operators and their opset ranges", korch::cli::add_ops);
  add("run", "Run a model on inputs from .npy files (or seeded random inputs)", korch::cli::add_run);
  add("devices", "Which backends this machine can compile for, run on and time (and why not)", korch::cli::add_devices);
  add("cache", "Show or clear the cache: compiled kernels and the tuning database", korch::cli::add_cache);
  // `korch help [COMMAND]` is `korch [COMMAND] --help`; a word that is no command gets the nearest.
  std::vector<std::string> args(argv, argv + argc);
  if (args.size() >= 2 && args[1] == "help") {
    args.erase(args.begin() + 1);
    args.insert(args.begin() + std::min<long>(2, static_cast<long>(args.size())), "--help");
  }
  if (args.size() >= 2 && !args[1].empty() && args[1][0] != '-') {
    std::string nearest;
    size_t best = std::string::npos;
    bool known = false;
    for (const auto& [sub, cmd] : commands) {
      known |= sub->get_name() == args[1];
      const size_t d = edit_distance(sub->get_name(), args[1]);
      if (d < best) {
        best = d;
        nearest = sub->get_name();
      }
    }
    if (!known) {
      std::fprintf(stderr, "korch: error: unknown command '%s'%s; `korch --help` lists the commands\n", args[1].c_str(),
                   best <= 3 ? (std::string("; did you mean '") + nearest + "'?").c_str() : "");
      return 2;
    }
  }
  std::vector<const char*> cargs;
  for (const std::string& a : args) cargs.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(cargs.size()), cargs.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version end here with 0; every argument error exits 2, as the README says.
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    for (auto& [sub, cmd] : commands)
      if (sub->parsed()) return cmd();
  } catch (const korch::Error& e) {
    std::fprintf(stderr, "korch: error: %s\n", e.what());
    return e.code() == korch::ErrorCode::kUnsupported ? 3 : 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "korch: error: out of memory\n");
    return 2;
  }
  return 1;
}
