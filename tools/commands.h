// The `korch` subcommands. Each add_* registers its options on the app and returns the callback
// to run when that subcommand is chosen.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

#include "ir/graph.h"

namespace korch::cli {

using Command = std::function<int()>;

Command add_inspect(CLI::App& app);
Command add_run(CLI::App& app);
Command add_demo(CLI::App& app);
Command add_ops(CLI::App& app);

// The `inspect` report: graph, parameters, FLOPs, bytes, inputs/outputs, op histogram.
void print_model_summary(const korch::Graph& g, const std::string& path);

// Parses repeated --shape name=1x3x224x224 options.
std::map<std::string, std::vector<int64_t>> parse_shape_options(const std::vector<std::string>& specs);

}  // namespace korch::cli
