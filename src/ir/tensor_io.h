// Tensor <-> .npy conversion.
#pragma once

#include "ir/tensor.h"
#include "support/npy.h"

namespace korch {

Tensor tensor_from_npy(const NpyArray& a, const std::string& path_for_errors);
NpyArray tensor_to_npy(const Tensor& t);
Tensor load_npy(const std::string& path);
void save_npy(const std::string& path, const Tensor& t);

}  // namespace korch
