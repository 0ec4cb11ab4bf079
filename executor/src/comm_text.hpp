// Helpers the communicators share for their deadlines and error messages (private to executor/src).
#pragma once

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <vector>

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

} // namespace tessel::exec::detail
