// Fission of elementwise operators: numpy broadcasting becomes explicit Expand primitives, so
// every elementwise primitive reads same-shaped operands (scalar constants excepted).
#include "fission/fission.h"

namespace korch {

void register_elementwise_fission(FissionRegistry& r) {
  // An elementwise operator reaches its rule only when its operands need broadcasting.
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Equal", "Less", "LessOrEqual",
                         "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Where", "BitShift", "BitwiseAnd",
                         "BitwiseOr", "BitwiseXor", "Sum", "Mean", "PRelu", "Clip"}) {
    r.add(op, [op = std::string(op)](FissionBuilder& b, const Node& n, const std::vector<ValueId>& in) {
      return std::vector<ValueId>{b.elementwise(op, in, n.attrs)};
    });
  }
}

}  // namespace korch
