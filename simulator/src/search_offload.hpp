// Offload as a search dimension: the offload variants a plan can take, as bits in a plan code, and the rule that
// admits them (only where the plan does not fit without it, and never a superset of a variant that fits).
#pragma once

#include "tessel/cost/plan.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessel::sim::detail {

constexpr uint8_t kOffloadOptimizer = 1;
constexpr uint8_t kOffloadParameters = 2;
constexpr uint8_t kOffloadActivations = 4;

inline uint8_t offloadBits(const Plan& p) {
    return static_cast<uint8_t>((p.offloadOptimizer ? kOffloadOptimizer : 0) | (p.offloadParameters ? kOffloadParameters : 0) |
                                (p.offloadActivations ? kOffloadActivations : 0));
}

inline void setOffload(Plan& p, uint8_t bits) {
    p.offloadOptimizer = (bits & kOffloadOptimizer) != 0;
    p.offloadParameters = (bits & kOffloadParameters) != 0;
    p.offloadActivations = (bits & kOffloadActivations) != 0;
}

// The offload variants valid for the plan's ZeRO stage and recompute (validatePlan's rules), smallest first:
// activations (full recompute), optimizer (ZeRO >= 1), both, optimizer + parameters (ZeRO-3), all three. The last
// contains every other one (so it leaves the least on the GPU).
inline std::vector<uint8_t> offloadVariants(const Plan& p) {
    const bool full = p.recompute == Recompute::Full;
    std::vector<uint8_t> v;
    if (full) v.push_back(kOffloadActivations);
    if (p.zeroStage >= 1) v.push_back(kOffloadOptimizer);
    if (p.zeroStage >= 1 && full) v.push_back(kOffloadOptimizer | kOffloadActivations);
    if (p.zeroStage == 3) v.push_back(kOffloadOptimizer | kOffloadParameters);
    if (p.zeroStage == 3 && full) v.push_back(kOffloadOptimizer | kOffloadParameters | kOffloadActivations);
    return v;
}

// Tries the variants in order with fits(bits), skipping every variant that contains one that fitted: each offload
// only adds PCIe or CPU time and never shortens a pass (FORMULAS.md §8), so a superset is never faster. Returns how
// many variants were tried.
template <class Fits>
size_t fittingOffloads(const Plan& plan, Fits&& fits) {
    std::vector<uint8_t> fitted;
    size_t tried = 0;
    for (uint8_t bits : offloadVariants(plan)) {
        bool dominated = false;
        for (uint8_t f : fitted) dominated = dominated || (bits & f) == f;
        if (dominated) continue;
        ++tried;
        if (fits(bits)) fitted.push_back(bits);
    }
    return tried;
}

} // namespace tessel::sim::detail
