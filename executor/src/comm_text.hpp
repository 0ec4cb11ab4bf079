// Helpers the communicators share for their world group, deadlines and error messages (private to executor/src).
#pragma once

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include "tessel/exec/comm.hpp"

namespace tessel::exec::detail {

using Clock = std::chrono::steady_clock;

// "[0, 2, 5]"
inline std::string rankList(const std::vector<int>& ranks) {
    std::string s = "[";
    for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
    return s + "]";
}

inline std::string secondsText(double seconds) {
    std::ostringstream out;
    out << seconds << " s";
    return out.str();
}

// A deadline `seconds` from now; huge timeouts are clamped so the time point cannot overflow.
inline Clock::time_point deadlineAfter(double seconds) {
    const double clamped = std::clamp(seconds, 0.0, 1e8);
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(clamped));
}

// Every rank of a world of `size`, seen from `rank`.
inline Group worldGroup(int size, int rank) {
    Group g;
    g.name = "world";
    for (int r = 0; r < size; ++r) g.ranks.push_back(r);
    g.myIndex = rank;
    return g;
}

} // namespace tessel::exec::detail
