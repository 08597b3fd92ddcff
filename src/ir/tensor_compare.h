// How Korch decides two tensors agree: the project-wide correctness criterion.
#pragma once

#include <string>

#include "ir/tensor.h"

namespace korch {

// Relative L2 distance ||got - want|| / ||want|| over the elements where both are finite; the
// positions of non-finite values must match exactly (NaN with NaN, +Inf with +Inf). Integer and
// bool tensors must be equal. Returns "" when within `tol`, else what differs (first bad element
// or the error). Types must match.
std::string rel_l2_diff(const Tensor& got, const Tensor& want, double tol);

// The relative L2 error alone (+inf when non-finite positions or types differ).
double rel_l2_error(const Tensor& got, const Tensor& want);

}  // namespace korch
