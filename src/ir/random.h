// Seeded random tensors for `korch run --random-inputs`, the demo and tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "ir/graph.h"

namespace korch {

// Floats ~ U(-1, 1); integers uniform in [0, 10); bools fair coin.
Tensor random_tensor(const TensorType& type, std::mt19937_64& rng);
// One tensor per graph input, in g.inputs order, from one generator seeded with `seed`.
std::vector<Tensor> random_inputs(const Graph& g, uint64_t seed);

}  // namespace korch
