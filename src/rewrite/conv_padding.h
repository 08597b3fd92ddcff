// Asymmetric convolution padding as an explicit Pad: for a backend whose convolution library pads
// both sides of an axis alike (cuDNN's legacy API; Backend::symmetric_conv_padding()).
//
// A float Conv whose padding differs before and after on some axis (explicit pads, or auto_pad
// SAME_UPPER / SAME_LOWER at a stride where the total is odd) becomes
//     x' = Pad(x, the excess on each side, zeros)        a layout primitive the orchestrator
//     y  = Conv(x', pads = min(before, after) per axis)   fuses and prices like any other
// so every Conv left has symmetric padding. Same function, same values (zero padding is zeros
// either way). ConvInteger is left alone (its padding is the input's zero point, not 0).
#pragma once

#include "ir/graph.h"

namespace korch {

// Rewrites g in place (nodes re-sorted); returns how many convolutions changed.
int make_conv_padding_symmetric(Graph& g);

}  // namespace korch
