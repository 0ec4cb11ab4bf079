// Plain-text table formatting for the CLI: right-aligned numeric columns, left-aligned text.
#pragma once

#include <string>
#include <vector>

namespace tessel::cli {

class Table {
public:
    explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
    void addRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
    // Renders with two spaces between columns; the first column is left-aligned, the rest right-aligned.
    std::string render() const;

private:
    std::vector<std::string> header_;
    std::vector<std::vector<std::string>> rows_;
};

std::string fixed(double value, int decimals);
std::string gib(double bytes, int decimals = 2);            // bytes -> GiB text
std::string human(double value);                            // 1.23e9 -> "1.23 G"
std::string milliseconds(double seconds, int decimals = 3);

} // namespace tessel::cli
