// Fission of elementwise operators: numpy broadcasting becomes explicit Expand primitives, so
// every elementwise primitive reads same-shaped operands (scalar constants excepted).
#include "fission/fission.h"

namespace korch {

void register_elementwise_fission(FissionRegistry& r) {
  // An elementwise operator reaches its rule only when its operands need broadcasting.
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Equal", "Less", "LessOrEqual",
                         "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Where", "BitShift", "BitwiseAnd",
                         "BitwiseOr", "BitwiseXor", "Sum", "Mean", "PRelu"}) {
    r.add(op, [op = std::string(op)](FissionBuilder& b, const Node& n, const std::vector<ValueId>& in) {
      return std::vector<ValueId>{b.elementwise(op, in, n.attrs)};
    });
  }
  // Clip(x, min, max) with bounds that are not scalar constants (runtime scalars): Clip's bounds
  // must stay scalars, so it becomes Min(Max(x, min), max) with explicit broadcasts. That order
  // also gives Clip's answer when min > max (max) and keeps NaN (Max/Min propagate it).
  r.add("Clip", [](FissionBuilder& b, const Node& n, const std::vector<ValueId>& in) {
    ValueId y = in[0];
    if (in.size() > 1 && in[1] != kNoValue) y = b.elementwise("Max", {y, in[1]});
    if (in.size() > 2 && in[2] != kNoValue) y = b.elementwise("Min", {y, in[2]});
    return std::vector<ValueId>{y};
  });
}

}  // namespace korch
