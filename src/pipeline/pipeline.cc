#include "pipeline/pipeline.h"

#include "ir/text_format.h"
#include "support/dump.h"

namespace korch {

namespace {
void dump(const char* stage, const Graph& g) {
  if (dump_dir().empty()) return;
  PrintOptions po;
  po.max_constant_elements = 64;
  dump_stage(stage, print_graph(g, po));
}
}  // namespace

Graph lower_to_primitives(const Graph& g, PrimitiveReport* report) {
  PrimitiveReport rep;
  Graph p = fission(g, &rep.fission);
  dump("fission", p);
  simplify(p, SimplifyOptions{}, &rep.simplify);
  dump("rewrite", p);
  if (report) *report = rep;
  return p;
}

}  // namespace korch
