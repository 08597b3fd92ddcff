// Dependencies inside one stage of a loop kernel (loop_kernel.h), which both printers use to
// place code: a node is computed at the outermost loop level it depends on, so a per-channel
// operand is loaded once per row and a value that does not depend on the reduce loops once per
// output. Target-independent; the printers decide the loop order (depth) themselves.
//   index_loops[i] / expr_loops[e]   the loops (a bit per loop) index node i / expression e reads
//   expr_acc[e]                      expression e depends on the reduction accumulator
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "codegen/loop_kernel.h"

namespace korch::loop {

struct StageDeps {
  explicit StageDeps(const Stage& st);
  std::vector<uint64_t> index_loops, expr_loops;
  std::vector<char> expr_acc;
};

// Expressions reachable from `root` through arguments (root included; -1 reaches nothing).
std::vector<char> reachable_exprs(const Stage& st, int root);

// Coefficient of loop `l` in index node `i` when the index is affine in it (0 when it does not
// depend on it); kNonAffine otherwise. `index_loops` from StageDeps.
constexpr int64_t kNonAffine = std::numeric_limits<int64_t>::min();
int64_t affine_coef(const Stage& st, const std::vector<uint64_t>& index_loops, int i, int l);

// Index nodes a printer names once as a temporary (div, mod, table, min, max); the rest print inline.
bool is_index_atom(const IndexNode& n);

// Whether index node `root` is `i` or uses it.
bool index_contains(const Stage& st, int root, int i);

}  // namespace korch::loop
