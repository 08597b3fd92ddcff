// The rewrite sites of a union graph (rewrite_choice.h), as the program and the regions see them.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace korch {

struct RewriteSites {
  int count = 0;
  std::vector<std::vector<int>> removed_by;    // per node of U: the sites whose choice removes it
  std::vector<int> added_by;                   // per node of U: the site that adds it, or -1
  std::vector<std::vector<int>> exclusive;  // sets of sites that cannot all be chosen (pairs, mostly)
  // Computed only under some choices: a site adds it or removes it.
  bool optional(NodeId n) const {
    return added_by[static_cast<size_t>(n)] >= 0 || !removed_by[static_cast<size_t>(n)].empty();
  }
};

}  // namespace korch
