#include "ir/text_format.h"

namespace korch {

Graph parse_graph(const std::string& text) { fail_unsupported("parse_graph: not implemented yet"); }

}  // namespace korch
