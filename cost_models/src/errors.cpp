// Typed errors: formats every collected input problem into the exception's message.
#include "tessel/cost/errors.hpp"

namespace tessel {
namespace {
std::string joinProblems(const std::vector<Problem>& problems) {
    std::string text;
    for (const auto& p : problems) {
        if (!text.empty()) text += '\n';
        text += (p.where.empty() ? std::string("(input)") : p.where) + ": " + p.message;
    }
    return text;
}
} // namespace

InputError::InputError(std::vector<Problem> problems)
    : std::runtime_error(joinProblems(problems)), problems_(std::move(problems)) {}

InputError::InputError(std::string where, std::string message)
    : InputError(std::vector<Problem>{{std::move(where), std::move(message)}}) {}

void ProblemList::throwIfAny() const {
    if (!items_.empty()) throw InputError(items_);
}

} // namespace tessel
