// Rewrites as choices: the orchestrator decides, per site, whether a rewrite alternative
// (rewrite/alternatives.h) runs, in the same program that selects the kernels.
//
//   variant graphs   the primitive graph P; P with each alternative applied alone ("site" s); and
//                    combinations: every set of non-overlapping sites when there are at most
//                    kMaxExhaustiveSites of them (those that apply together), else one graph per
//                    layer (each site in the first layer it applies to with the sites already there).
//                    What a rewrite adds gets canonical names ("alt<s>/..."), and the values that
//                    replace the site's outputs take their old names back, so a node or value of
//                    one variant is the same node or value in every variant that has it.
//   union graph U    every node of every variant, by name. A site's outputs have two writers in U
//                    (the original nodes and the rewritten ones): U is not a graph to run, only the
//                    index space of the program. Candidates are enumerated on each variant graph
//                    (where they are convex), costed there, and translated to U (duplicates dropped).
//   the program      build_orchestration_blp over U, plus one binary y_s per site:
//                      live rows     a node that site s removes: covered >= 1 - sum y_s;
//                                    a node that s adds: covered >= y_s (no recompute: equalities)
//                      kernel rows   x_K + y_s <= 1 when K holds a node s removes; x_K <= y_s when
//                                    K holds a node s adds
//                      site rows     y_s + y_t <= 1 when s and t overlap (share a node they
//                                    replace); a chosen set that does not apply together is
//                                    excluded (sum of its y <= size - 1) and the program solved
//                                    again
//                      need rows     only over P's edges, relaxed by the y of sites removing the
//                                    consumer
//                    Solved by regions (regions.h), a site's nodes (removed and added) and the
//                    producers of what only one of its variants reads in one region; no state search.
//   the result       P* = P with the chosen sites applied (the sites with an added node in a
//                    selected kernel); the candidates are P*'s own, enumerated and costed again
//                    (the database and the analytic model answer the repeats), and the plan is the
//                    selection mapped to them; verify_plan checks it on P*.
//
// Exactness: with all combinations enumerated (few sites), every kernel of every variant
// combination is in the program, so the plan is the best of solving each combination separately
// (test: RewriteChoice.MatchesBruteForceOverVariantCombinations). With layers, kernels that span
// two rewritten sites exist only for sites of one layer.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "orchestrate/orchestrate.h"
#include "orchestrate/rewrite_sites.h"

namespace korch {

constexpr int kMaxExhaustiveSites = 5;


struct RewriteChoiceResult {
  Graph graph;               // P* (P itself when nothing is chosen)
  OrchestrateResult result;  // on `graph`; result.rewrites says what was offered and chosen
};

// The plan over every rewrite variant (see above). With no alternative in `p`, plain orchestrate().
RewriteChoiceResult orchestrate_with_rewrites(const Graph& p, CostProvider& provider,
                                              const OrchestrateOptions& options);

}  // namespace korch
