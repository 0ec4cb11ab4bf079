// Shared by the search tests: small clusters of a chosen shape, a space with keys fixed, every rank order.
#pragma once

#include "../cost_models/test_support.hpp"

#include "tessel/sim/search.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tessel::sim::search_support {

inline std::vector<std::array<ParallelDim, 5>> permutations() {
    std::vector<std::array<ParallelDim, 5>> out;
    std::array<ParallelDim, 5> o{ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Dp, ParallelDim::Pp};
    do {
        out.push_back(o);
    } while (std::next_permutation(o.begin(), o.end()));
    return out;
}

inline ClusterConfig smallNodes(int gpusPerNode, int nodes, double memoryGiB) {
    ClusterConfig c = test::clusterPreset("dgx-a100-80g");
    c.gpusPerNode = gpusPerNode;
    c.nodes = nodes;
    c.gpu.memoryBytes = static_cast<int64_t>(memoryGiB * 1024 * 1024 * 1024);
    c.gpu.reservedBytes = 0;
    c.host = {}; // the brute force enumerates plans without offload (offload: search_flexible_test.cpp)
    return c;
}

inline SearchSpace spaceFor(int gpus, int globalBatch, std::map<std::string, int> fixed = {}) {
    SearchSpace s;
    s.gpus = gpus;
    s.globalBatch = globalBatch;
    s.fixed = std::move(fixed);
    return s;
}

} // namespace tessel::sim::search_support
