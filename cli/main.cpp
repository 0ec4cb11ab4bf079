// Entry point of `tessel`: dispatches subcommands; exit 2 on bad input (every problem listed), 1 on runtime faults.
#include "commands.hpp"

#include "tessel/cost/errors.hpp"
#include "tessel/sim/heap.hpp"

#include <CLI/CLI.hpp>

#include <iostream>
#include <string>
#include <vector>

namespace {

// CLI11 reads an empty value ("--tp ''", "--model=") as the option's default, so a value lost to an unset shell
// variable ran the default scenario without a word. Every option that takes a value refuses an empty one, named.
void refuseEmptyValues(CLI::App& app) {
    const CLI::Validator nonEmpty(
        [](std::string& value) { return value.empty() ? std::string("empty value (give one, or leave the option out)") : std::string(); },
        "");
    for (CLI::Option* opt : app.get_options([](const CLI::Option* o) { return o->get_items_expected_min() > 0; }))
        opt->check(nonEmpty);
    for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) refuseEmptyValues(*sub);
}

} // namespace

int main(int argc, char** argv) {
    tessel::sim::retainFreedHeap(); // search, validate and calibrate simulate thousands of plans
    CLI::App app{"tessel: plan, predict and run parallel LLM training"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "tessel 0.1.0");
    std::vector<std::function<int()>> commands;
    commands.push_back(tessel::cli::addPredictCommand(app));
    commands.push_back(tessel::cli::addTraceCommand(app));
    commands.push_back(tessel::cli::addRunCommand(app));
    commands.push_back(tessel::cli::addExportCommand(app));
    commands.push_back(tessel::cli::addSearchCommand(app));
    commands.push_back(tessel::cli::addCompareCommand(app));
    commands.push_back(tessel::cli::addBenchCommand(app));
    commands.push_back(tessel::cli::addCalibrateCommand(app));
    commands.push_back(tessel::cli::addValidateCommand(app));
    commands.push_back(tessel::cli::addImportCommand(app));
    refuseEmptyValues(app);
    // CLI11 answers --help before it notices an unknown positional, so `tessel frobnicate --help` would print
    // the main help and exit 0: the first word that is not an option must name a subcommand.
    if (argc > 1 && argv[1][0] != '-') {
        const std::string word = argv[1];
        bool known = false;
        std::string names;
        for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
            known = known || sub->check_name(word);
            names += (names.empty() ? "" : ", ") + sub->get_name();
        }
        if (!known) {
            std::cerr << "tessel: unknown subcommand \"" << word << "\" (subcommands: " << names
                      << "; tessel --help lists them)\n";
            return 2;
        }
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        return 2;
    }
    try {
        for (auto& run : commands) {
            int rc = run();
            if (rc >= 0) return rc;
        }
        return 2;
    } catch (const tessel::InputError& e) {
        std::cerr << "tessel: invalid input (" << e.problems().size() << " problem"
                  << (e.problems().size() == 1 ? "" : "s") << "):\n";
        for (const auto& p : e.problems()) std::cerr << "  " << (p.where.empty() ? "(input)" : p.where) << ": " << p.message << "\n";
        return 2;
    } catch (const tessel::RuntimeError& e) {
        std::cerr << "tessel: " << e.what() << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "tessel: internal error: " << e.what() << "\n";
        return 1;
    }
}
