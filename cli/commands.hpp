// Subcommands of the `tessel` CLI: each registers its flags and returns the process exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace tessel::cli {

// Registers `predict` on `app`; the returned function runs it after parsing.
std::function<int()> addPredictCommand(CLI::App& app);

} // namespace tessel::cli
