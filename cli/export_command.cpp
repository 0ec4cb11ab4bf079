// `tessel export`: prints a plan as Megatron-LM arguments, a DeepSpeed ds_config.json or a torchtitan TOML job.
#include "commands.hpp"
#include "scenario_flags.hpp"

#include "tessel/sim/export.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>

namespace tessel::cli {

namespace {
struct ExportFlags {
    sim::ExportFormat format = sim::ExportFormat::Megatron;
    std::string output;  // -o FILE; empty = stdout
    bool force = false;  // overwrite FILE if it exists
};

// Writes `text` to `path`, refusing to replace an existing file unless `force`: nothing a user wrote is lost
// without asking.
void writeFile(const std::string& path, const std::string& text, bool force) {
    std::error_code ec;
    if (!force && std::filesystem::exists(path, ec))
        throw InputError("-o", "\"" + path + "\" already exists; pass --force to overwrite it");
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw RuntimeError("cannot open \"" + path + "\" for writing");
    out << text;
    out.close();
    if (!out) throw RuntimeError("could not write \"" + path + "\"");
}
} // namespace

std::function<int()> addExportCommand(CLI::App& app) {
    auto* cmd = app.add_subcommand(
        "export", "Print a plan as Megatron-LM arguments, a DeepSpeed ds_config.json or a torchtitan TOML config");
    auto flags = std::make_shared<ScenarioFlags>();
    auto opts = std::make_shared<ExportFlags>();
    flags->addTo(*cmd);
    const std::map<std::string, sim::ExportFormat> formats{{"megatron", sim::ExportFormat::Megatron},
                                                           {"deepspeed", sim::ExportFormat::DeepSpeed},
                                                           {"torchtitan", sim::ExportFormat::Torchtitan}};
    cmd->add_option("--format", opts->format,
                    "megatron (pretrain_gpt.py launch), deepspeed (ds_config.json) or torchtitan (TOML job config)")
        ->required()
        ->transform(CLI::CheckedTransformer(formats, CLI::ignore_case));
    cmd->add_option("-o,--output", opts->output, "Write to FILE instead of stdout (an existing FILE needs --force)");
    cmd->add_flag("--force", opts->force, "Overwrite the -o FILE if it exists");
    return [cmd, flags, opts]() {
        if (!cmd->parsed()) return -1;
        const Scenario s = flags->resolve();
        const std::string text = sim::exportPlan(s, opts->format);
        if (opts->output.empty()) {
            std::cout << text;
        } else {
            writeFile(opts->output, text, opts->force);
            std::cerr << "tessel export: wrote " << opts->output << "\n";
        }
        return 0;
    };
}

} // namespace tessel::cli
