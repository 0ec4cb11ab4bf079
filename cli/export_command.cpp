// `tessel export`: prints a plan as Megatron-LM arguments, a DeepSpeed ds_config.json or a torchtitan TOML.
#include "commands.hpp"
#include "output_file.hpp"
#include "scenario_flags.hpp"

#include "tessel/sim/export.hpp"

#include <iostream>
#include <map>
#include <memory>
#include <string>

namespace tessel::cli {

namespace {
struct ExportFlags {
    std::string format; // megatron | deepspeed | torchtitan
    std::string output; // -o FILE; empty = stdout
    bool force = false; // overwrite FILE if it exists
};
} // namespace

std::function<int()> addExportCommand(CLI::App& app) {
    auto* cmd = app.add_subcommand(
        "export",
        "Print a plan as Megatron-LM arguments, a DeepSpeed ds_config.json or a torchtitan TOML config");
    auto flags = std::make_shared<ScenarioFlags>();
    auto opts = std::make_shared<ExportFlags>();
    flags->addTo(*cmd);
    cmd->add_option(
           "--format", opts->format,
           "megatron (pretrain_gpt.py launch), deepspeed (ds_config.json) or torchtitan (TOML job config)")
        ->required()
        ->check(CLI::IsMember({"megatron", "deepspeed", "torchtitan"}));
    cmd->add_option("-o,--output", opts->output,
                    "Write to FILE instead of stdout (an existing FILE needs --force)");
    cmd->add_flag("--force", opts->force, "Overwrite the -o FILE if it exists");
    return [cmd, flags, opts]() {
        if (!cmd->parsed()) return -1;
        const Scenario s = flags->resolve();
        const std::map<std::string, sim::ExportFormat> formats{{"megatron", sim::ExportFormat::Megatron},
                                                               {"deepspeed", sim::ExportFormat::DeepSpeed},
                                                               {"torchtitan", sim::ExportFormat::Torchtitan}};
        const std::string text = sim::exportPlan(s, formats.at(opts->format));
        if (opts->output.empty()) {
            std::cout << text;
        } else {
            writeOutputFile(opts->output, text, opts->force, "--output");
            std::cerr << "tessel export: wrote " << opts->output << "\n";
        }
        return 0;
    };
}

} // namespace tessel::cli
