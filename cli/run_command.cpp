// `tessel run`: validates the plan, then starts the ranks (mpirun with one tessel-worker per rank, or one
// tessel-worker running every rank as a thread: --launcher), and merges what the ranks measured into the run folder (losses, measurements.jsonl, trace.json, memory.json, scenario.json,
// checkpoints/); `--resume` continues a run folder from its newest complete checkpoint.
#include "commands.hpp"
#include "launch.hpp"
#include "scenario_flags.hpp"
#include "table.hpp"

#include "tessel/exec/run_output.hpp"
#include "tessel/exec/runtime.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifndef TESSEL_DATA_PATH
#define TESSEL_DATA_PATH ""
#endif

namespace tessel::cli {

namespace fs = std::filesystem;

std::function<int()> addRunCommand(CLI::App& app) {
    auto* cmd = app.add_subcommand("run", "Run a plan for real on CPU (or GPU) ranks, measuring every action");
    auto flags = std::make_shared<ScenarioFlags>();
    flags->addTo(*cmd);
    struct Options {
        int ranks = 0;
        int steps = 10;
        std::string out;
        std::string data = TESSEL_DATA_PATH;
        double timeoutSeconds = 60.0;
        bool force = false;
        bool resume = false;
        int checkpointEvery = 0;
        int failRank = -1, failAtStep = -1;
        std::string backend = "cpu";
        std::string launcher = "auto";
    };
    auto o = std::make_shared<Options>();
    cmd->add_option("--ranks", o->ranks, "Number of ranks to start (must equal tp x pp x dp x cp)")->required();
    cmd->add_option("--steps", o->steps, "Training steps in all (with --resume, counting those already done)");
    cmd->add_option("--out", o->out, "Run folder to write")->required();
    cmd->add_option("--data", o->data, "Training text (default: the shipped public-domain text)");
    cmd->add_option("--timeout", o->timeoutSeconds, "Seconds a collective or transfer may wait before the run fails");
    cmd->add_flag("--force", o->force,
                  "Reuse a non-empty run folder (its previous files, checkpoints included, are replaced)");
    cmd->add_flag("--resume", o->resume,
                  "Continue the run in --out from its newest complete checkpoint (same scenario and plan), "
                  "keeping its earlier losses");
    cmd->add_option("--checkpoint-every", o->checkpointEvery,
                    "Also save a checkpoint every K steps (default 0: only at the end; the last 2 are kept)");
    // Checked in the command (not by CLI11's IsMember) so a wrong name is listed with every other problem.
    cmd->add_option("--backend", o->backend,
                    "cpu (float64/float32 recipes) or cuda (mixed/fp32 recipes; NCCL with a GPU per rank, else the "
                    "staged comm)");
    cmd->add_option("--launcher", o->launcher,
                    "auto (mpirun where tessel-worker has MPI, else in-process), mpirun (a process per rank) or "
                    "in-process (every rank a thread of one tessel-worker)");
    cmd->add_option("--fail-rank", o->failRank, "Testing: make this rank die abruptly")->group("");
    cmd->add_option("--fail-at-step", o->failAtStep, "Testing: step at which --fail-rank dies")->group("");
    return [cmd, flags, o]() {
        if (!cmd->parsed()) return -1;
        // Everything that can be checked is checked before any rank starts.
        ProblemList problems;
        Scenario s;
        try {
            s = flags->resolve();
            // The run folder's scenario (and its checkpoints) say who ran it: tessel's executor, whose loss
            // overwrites the logits in place (loss_in_place), whose dropout keeps no masks (dropout_masks_kept
            // false) and which frees the logits as the head's backward ends (logits_held_through_backward false;
            // a run recorded without the key is of the executor before 2026-12-06, which kept them to the end of
            // the micro-batch's backward), so `tessel compare` predicts the memory it has.
            s.plan.framework.lossInPlace = true;
            s.plan.framework.dropoutMasksKept = false;
            if (!s.plan.framework.logitsHeldThroughBackward) s.plan.framework.logitsHeldThroughBackward = false;
        } catch (const InputError& e) {
            problems.append(e.problems());
        }
        // validateExecutable names an unknown backend too; this reports it when the scenario did not resolve.
        if (!problems.empty() && o->backend != "cpu" && o->backend != "cuda")
            problems.add("--backend", "unknown backend \"" + o->backend + "\"; the executor has cpu and cuda");
        if (problems.empty()) {
            exec::validateExecutable(s.model, s.plan, "/plan", problems, o->backend);
            if (s.plan.offloads())
                problems.add("--offload (/plan/offload_optimizer)",
                             "the executor keeps every tensor on its device; offload is predicted and exported "
                             "(DeepSpeed, Megatron-LM), not run by tessel run: use offload none");
            if (o->ranks != s.plan.worldSize())
                problems.add("--ranks", std::to_string(o->ranks) + " ranks, but the plan (tp x pp x dp x cp) needs " +
                                            std::to_string(s.plan.worldSize()));
        }
        if (o->steps < 1) problems.add("--steps", "must be at least 1");
        if (o->timeoutSeconds <= 0) problems.add("--timeout", "must be positive");
        std::error_code ec;
        if (o->data.empty() || !fs::is_regular_file(o->data, ec)) problems.add("--data", "no training text at \"" + o->data + "\"");
        if (o->checkpointEvery < 0) problems.add("--checkpoint-every", "must be 0 or more");
        const std::string checkpointDir = (fs::path(o->out) / "checkpoints").string();
        if (o->resume) {
            // Resuming reuses the folder by design; check here that there is something to resume from.
            const int found = exec::newestCheckpointStep(checkpointDir);
            if (found < 0) {
                problems.add("--resume", "no complete checkpoint in \"" + checkpointDir +
                                             "\" to resume from (a run saves one at its end, and every "
                                             "--checkpoint-every steps)");
            } else if (problems.empty()) {
                try {
                    exec::checkCheckpointMatches(checkpointDir, found, s.model, s.plan, exec::TrainHyper{});
                } catch (const InputError& e) {
                    problems.append(e.problems());
                }
                if (found >= o->steps)
                    problems.add("--steps", "the newest checkpoint is at step " + std::to_string(found) + ", so --steps " +
                                                std::to_string(o->steps) + " leaves nothing to train (--steps counts "
                                                "every step, those already done included)");
            }
        } else if (fs::exists(o->out, ec) && !fs::is_empty(o->out, ec) && !o->force) {
            problems.add("--out", "\"" + o->out + "\" is not empty; pass --force to reuse it, or --resume to continue it");
        }
        const Launch launch = resolveLaunch(o->launcher, problems);
        problems.throwIfAny();

        fs::create_directories(o->out);
        // A fresh run in a reused folder must not pick up, or be mixed with, the earlier run's checkpoints.
        if (!o->resume) fs::remove_all(checkpointDir);
        for (const auto& entry : fs::directory_iterator(o->out))
            if (entry.path().filename().string().rfind("rank-", 0) == 0) fs::remove_all(entry.path());
        exec::writeFileAtomically((fs::path(o->out) / "scenario.json").string(), scenarioToJson(s).dump(2) + "\n");

        std::vector<std::string> args{"--run-dir", o->out, "--data", o->data, "--steps", std::to_string(o->steps),
                                      "--timeout", std::to_string(o->timeoutSeconds), "--backend", o->backend};
        if (o->resume) args.push_back("--resume");
        if (o->checkpointEvery > 0) args.insert(args.end(), {"--checkpoint-every", std::to_string(o->checkpointEvery)});
        if (o->failRank >= 0) {
            args.insert(args.end(), {"--fail-rank", std::to_string(o->failRank), "--fail-at-step", std::to_string(o->failAtStep)});
        }
        const std::vector<std::string> argv = launchCommand(launch, o->ranks, args);
        std::cerr << "tessel run: " << o->ranks << " " << o->backend << " ranks (" << launch.launcher << "), " << o->steps
                  << " steps -> " << o->out;
        if (o->resume) std::cerr << " (resuming from " << exec::checkpointStepDir(checkpointDir, exec::newestCheckpointStep(checkpointDir)) << ")";
        std::cerr << "\n";
        const unsigned threads = std::thread::hardware_concurrency();
        if (o->backend == "cpu" && threads > 0 && static_cast<unsigned>(o->ranks) > threads)
            std::cerr << "tessel run: note: " << o->ranks << " CPU ranks on " << threads << " hardware threads share cores; "
                      << "the losses are the plan's, the measured times are not (tessel compare says so)\n";
        const int rc = runAndWait(argv);
        if (rc != 0) {
            const std::string detail = describeFailedRanks(o->out, o->ranks);
            throw RuntimeError("the run failed (" + std::string(launch.launcher == "mpirun" ? "mpirun" : "tessel-worker") +
                               " exit status " + std::to_string(rc) + ")" + detail);
        }
        const size_t records = exec::mergeRunOutputs(o->out, o->ranks);
        std::ifstream losses(fs::path(o->out) / "losses.jsonl");
        Table t({"step", "loss", "grad norm"});
        for (std::string line; std::getline(losses, line);) {
            const auto j = nlohmann::json::parse(line);
            t.addRow({std::to_string(j["step"].get<int>()), fixed(j["loss"].get<double>(), 4), fixed(j["grad_norm"].get<double>(), 4)});
        }
        std::cout << t.render();
        std::cout << "wrote " << records << " measurements, trace.json, memory.json, losses.jsonl, scenario.json and "
                  << "checkpoints/step-" << o->steps << " to " << o->out << "\n";
        return 0;
    };
}

} // namespace tessel::cli
