// Typed errors shared by every tessel library: input problems (with JSON pointers), runtime and device faults.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace tessel {

// One problem found in user input: where (a JSON pointer such as "/plan/tp", or a flag name such as
// "--tp") and what is wrong.
struct Problem {
    std::string where;
    std::string message;
    bool operator==(const Problem&) const = default;
};

// Thrown when input is invalid. Carries every problem found, not just the first, so a user can fix
// them all in one go.
class InputError : public std::runtime_error {
public:
    explicit InputError(std::vector<Problem> problems);
    InputError(std::string where, std::string message);
    const std::vector<Problem>& problems() const noexcept { return problems_; }

private:
    std::vector<Problem> problems_;
};

// A fault while running (a rank died, a collective timed out, a file could not be written).
class RuntimeError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A fault reported by an accelerator or its driver.
class DeviceError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Collects problems while validating; throws one InputError with all of them at the end.
class ProblemList {
public:
    void add(std::string where, std::string message) { items_.push_back({std::move(where), std::move(message)}); }
    void append(const std::vector<Problem>& more) { items_.insert(items_.end(), more.begin(), more.end()); }
    bool empty() const noexcept { return items_.empty(); }
    const std::vector<Problem>& items() const noexcept { return items_; }
    // Throws InputError if any problem was recorded.
    void throwIfAny() const;

private:
    std::vector<Problem> items_;
};

} // namespace tessel
