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

Graph lower_to_primitives(const Graph& g, PrimitiveReport* report, bool channels_last) {
  PrimitiveReport rep;
  Graph p = fission(g, &rep.fission);
  dump("fission", p);
  SimplifyOptions so;
  if (!dump_dir().empty())
    so.after_pass = [](const std::string& pass, const Graph& g) { dump(("rewrite_" + pass).c_str(), g); };
  simplify(p, so, &rep.simplify);
  dump("rewrite", p);
  if (channels_last && to_channels_last(p, &rep.channels_last)) {
    simplify(p, so);
    dump("channels_last", p);
  }
  if (report) *report = rep;
  return p;
}

}  // namespace korch
