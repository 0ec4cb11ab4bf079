// The CPU reference backend (float64 or float32, Eigen, single-threaded so results are bitwise reproducible).
#pragma once

#include "tessel/exec/backend.hpp"

#include <memory>

namespace tessel::exec {

// A CPU backend computing in `type` (F64 or F32). Element-wise math and every reduction run in float64 in a
// fixed order; matrix products use Eigen in the element type. Ops check the shapes and element type of their
// tensors and throw tessel::RuntimeError naming the op on any mismatch.
std::unique_ptr<Backend> makeCpuBackend(ElementType type);

} // namespace tessel::exec
