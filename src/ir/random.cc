#include "ir/random.h"

namespace korch {

Tensor random_tensor(const TensorType& type, std::mt19937_64& rng) {
  Tensor out(type);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 9);
  dispatch_dtype<KORCH_ALL_TYPES>(type.dtype, "random input", [&](auto tag) {
    using T = decltype(tag);
    T* d = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      if constexpr (std::is_same_v<T, bool>) d[i] = small(rng) % 2;
      else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) d[i] = T(static_cast<float>(uni(rng)));
      else if constexpr (std::is_floating_point_v<T>) d[i] = static_cast<T>(uni(rng));
      else d[i] = static_cast<T>(small(rng));
    }
  });
  return out;
}

std::vector<Tensor> random_inputs(const Graph& g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Tensor> out;
  for (ValueId v : g.inputs) out.push_back(random_tensor(g.type(v), rng));
  return out;
}

}  // namespace korch
