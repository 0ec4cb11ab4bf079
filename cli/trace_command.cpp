// `tessel trace`: writes the predicted timeline of a plan as a Chrome trace (Perfetto, chrome://tracing).
#include "commands.hpp"
#include "output_file.hpp"
#include "scenario_flags.hpp"

#include "tessel/sim/schedule.hpp"
#include "tessel/sim/simulate.hpp"
#include "tessel/sim/trace.hpp"

#include <iostream>
#include <memory>

namespace tessel::cli {

std::function<int()> addTraceCommand(CLI::App& app) {
    auto* cmd = app.add_subcommand("trace", "Write the predicted timeline as a Chrome trace (open in Perfetto)");
    auto flags = std::make_shared<ScenarioFlags>();
    flags->addTo(*cmd);
    struct Options {
        std::string output;
        bool force = false;
        std::vector<int> ranks;
        bool check = false;
    };
    auto o = std::make_shared<Options>();
    cmd->add_option("-o,--output", o->output, "Trace file to write (\"-\" for standard output)")->required();
    cmd->add_flag("--force", o->force, "Overwrite the output file if it exists");
    cmd->add_option("--ranks", o->ranks, "Ranks to include (default: one per pipeline stage)")->delimiter(',');
    cmd->add_flag("--check", o->check, "Check the schedule's invariants first; exit 1 listing any violation");
    return [cmd, flags, o]() {
        if (!cmd->parsed()) return -1;
        Scenario s = flags->resolve();
        const sim::PlanSimulation simulation = sim::simulatePlan(s.model, s.cluster, s.plan);
        if (o->check) {
            const auto violations = sim::checkSchedule(simulation.schedule);
            if (!violations.empty()) {
                std::string msg = "schedule invariants violated:";
                for (const auto& v : violations) msg += "\n  " + v;
                throw RuntimeError(msg);
            }
        }
        sim::TraceOptions options;
        options.ranks = o->ranks;
        const std::string text = sim::chromeTrace(simulation, options).dump() + "\n";
        if (o->output == "-") {
            std::cout << text;
        } else {
            writeOutputFile(o->output, text, o->force, "--output");
            std::cerr << "tessel trace: wrote " << o->output << " (" << simulation.schedule.actionCount()
                      << " actions, step " << simulation.metrics.stepSeconds << " s); open it in https://ui.perfetto.dev\n";
        }
        return 0;
    };
}

} // namespace tessel::cli
