// Dependencies inside one stage of a loop kernel (loop_kernel.h), which both printers use to
// place code: a node is computed at the outermost loop level it depends on, so a per-channel
// operand is loaded once per row and a value that does not depend on the reduce loops once per
// output. Target-independent; the printers decide the loop order (depth) themselves.
//   index_loops[i] / expr_loops[e]   the loops (a bit per loop) index node i / expression e reads
//   expr_acc[e]                      expression e depends on the reduction accumulator
#pragma once

#include <cstdint>
#include <limits>
#include <string>
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

// Index node `id` as text with every node inline and loops by position: equal texts are equal
// indices, also across stages (row fusion compares a store of one stage with a load of another;
// a printer's own text names its temporaries, which each stage numbers its own way).
std::string canonical_index(const Stage& st, int id);

// A transposing copy: a pointwise stage whose stores run contiguously along its innermost loop
// while a load steps through memory by a cache line or more per inner iteration and by one
// element along an outer loop (out[c][hw] = in[hw][c]). Run as written, every inner iteration
// reads a new cache line and a line is reused only a whole inner loop later, long evicted (and
// power-of-two strides map all of them to a few cache sets). Blocking the outer loop and the
// inner loop into rows x cols tiles keeps the lines of one tile in L1 until all their elements
// are used: segformer's channels-last decode-head Concat, 3 x [256, 16384] slices, 28 -> 6 ms.
// `outer` is the loop along which the load is contiguous; `inner` the innermost loop. Tile sizes
// measured on that Concat (bench/results/transpose_tiles.md): 64 rows x 16 columns.
struct TransposeTile {
  int outer = -1, inner = -1;
  int64_t rows = 64, cols = 16;
  bool active() const { return outer >= 0; }
};
// The tiling for a pointwise stage (inactive when the stage has no such load, or its loops are too
// short for tiles to matter). `needed` marks the expressions the stage computes.
TransposeTile find_transpose_tile(const Stage& st, const std::vector<uint64_t>& index_loops,
                                  const std::vector<char>& needed);

}  // namespace korch::loop
