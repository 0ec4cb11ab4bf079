// Plain-text table formatting and number helpers for the CLI.
#include "table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tessel::cli {

std::string Table::render() const {
    std::vector<size_t> width(header_.size(), 0);
    auto measure = [&](const std::vector<std::string>& row) {
        for (size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
    };
    measure(header_);
    for (const auto& r : rows_) measure(r);
    std::string out;
    auto emit = [&](const std::vector<std::string>& row) {
        std::string line;
        for (size_t i = 0; i < width.size(); ++i) {
            const std::string cell = i < row.size() ? row[i] : "";
            const std::string pad(width[i] - cell.size(), ' ');
            if (i > 0) line += "  ";
            line += i == 0 ? cell + pad : pad + cell;
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        out += line + "\n";
    };
    emit(header_);
    for (const auto& r : rows_) emit(r);
    return out;
}

std::string fixed(double value, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
    return buf;
}

std::string gib(double bytes, int decimals) { return fixed(bytes / (1024.0 * 1024.0 * 1024.0), decimals); }

std::string human(double value) {
    const char* units[] = {"", " K", " M", " G", " T", " P", " E"};
    int i = 0;
    double v = value;
    while (std::fabs(v) >= 1000.0 && i < 6) {
        v /= 1000.0;
        ++i;
    }
    return fixed(v, v < 10 ? 2 : (v < 100 ? 1 : 0)) + units[i];
}

std::string milliseconds(double seconds, int decimals) { return fixed(seconds * 1e3, decimals); }

} // namespace tessel::cli
