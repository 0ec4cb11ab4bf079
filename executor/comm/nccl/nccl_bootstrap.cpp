// NCCL group construction and bootstrap packing: plain C++, unit-tested without a GPU.
#include "nccl_bootstrap.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace tessel::exec::nccl {

SplitColorKey splitColorKey(const Group& g, int worldRank) {
    if (g.ranks.empty()) throw CommError("ncclCommSplit: group \"" + g.name + "\" has no ranks");
    if (g.myIndex < 0 || g.myIndex >= g.size() || g.ranks[static_cast<size_t>(g.myIndex)] != worldRank)
        throw CommError("ncclCommSplit: rank " + std::to_string(worldRank) + " is not member " +
                        std::to_string(g.myIndex) + " of group \"" + g.name + "\"");
    return {*std::min_element(g.ranks.begin(), g.ranks.end()), g.myIndex};
}

std::vector<double> packBootstrapBytes(const std::vector<uint8_t>& bytes) {
    std::vector<double> out((bytes.size() + 3) / 4, 0.0);
    for (size_t i = 0; i < bytes.size(); ++i) {
        const auto word = static_cast<uint32_t>(bytes[i]) << (8 * (i % 4));
        out[i / 4] += static_cast<double>(word);   // disjoint bits: the sum is the OR, exactly
    }
    return out;
}

std::vector<uint8_t> unpackBootstrapBytes(const std::vector<double>& values, size_t byteCount) {
    if (values.size() < (byteCount + 3) / 4)
        throw CommError("NCCL bootstrap: " + std::to_string(values.size()) + " values cannot hold " +
                        std::to_string(byteCount) + " bytes");
    std::vector<uint8_t> out(byteCount);
    for (size_t w = 0; w < (byteCount + 3) / 4; ++w) {
        const double v = values[w];
        if (!(v >= 0.0 && v < 4294967296.0) || std::floor(v) != v)
            throw CommError("NCCL bootstrap: value " + std::to_string(w) + " (" + std::to_string(v) +
                            ") is not a 32-bit word; the unique id was corrupted in transit");
        const auto word = static_cast<uint32_t>(v);
        for (size_t b = 0; b < 4 && 4 * w + b < byteCount; ++b)
            out[4 * w + b] = static_cast<uint8_t>((word >> (8 * b)) & 0xFFu);
    }
    return out;
}

bool usesDataParallelStream(const Group& g) { return g.name == "dp" || g.name == "dp_cp" || g.name == "expert_dp"; }

} // namespace tessel::exec::nccl
