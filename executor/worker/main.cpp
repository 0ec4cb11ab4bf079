// tessel-worker: the ranks of `tessel run`, one per process under mpirun or all as threads of one process
// (--in-process); each trains the run folder's scenario for some steps (or resumes from its newest checkpoint),
// saves sharded checkpoints and writes its measurements, memory peaks and (rank 0) losses. Under mpirun any
// error takes every rank down (MPI_Abort); in one process a failed rank fails the others' waits on it.
#include "tessel/cost/scenario.hpp"
#include "tessel/exec/context.hpp"
#include "tessel/exec/cpu_backend.hpp"
#include "tessel/exec/data.hpp"
#include "tessel/exec/inproc_comm.hpp"
#include "tessel/exec/mpi_comm.hpp"
#include "tessel/exec/run_output.hpp"
#include "tessel/exec/runtime.hpp"

#include "bench_worker.hpp"
#include "rank_launch.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <thread>

namespace {
// Written by the SIGTERM handler (async-signal-safe: open/write/_exit only): mpirun terminates the other ranks
// after one fails, and `tessel run` must not blame them.
char gStatusPath[4096];

extern "C" void onTerminate(int) {
    const int fd = ::open(gStatusPath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        static const char text[] = "terminated: stopped by mpirun after another rank failed\n";
        [[maybe_unused]] ssize_t n = ::write(fd, text, sizeof text - 1);
        ::close(fd);
    }
    ::_exit(143);
}

struct Options {
    std::string runDir;
    std::string dataPath;
    int steps = 1;
    double timeoutSeconds = 60.0;
    int failRank = -1;     // test hook: this rank dies abruptly...
    int failAtStep = -1;   // ...when this step starts
    std::string checkpointDir;   // default <run-dir>/checkpoints
    int checkpointEvery = 0;     // also save after every this many steps (0: only at the end)
    bool resume = false;
    std::string backend = "cpu";   // cpu (MPI or in-process comm) or cuda (NCCL or staged comm)
    bool inProcess = false;        // every rank a thread of this process, not one process per rank under mpirun
    int ranks = 0;                 // with inProcess: ranks to run (must equal the plan's; 0: the plan's)
};

// The lines of an earlier run's losses.jsonl for steps before `step` (unchanged, so a resumed run's file is
// byte for byte what an uninterrupted run writes); `missing` gets how many of steps 0..step-1 it lacked.
std::string lossesBefore(const std::filesystem::path& path, int step, int& missing) {
    std::ifstream in(path);
    std::string kept;
    std::vector<bool> seen(static_cast<size_t>(step), false);
    for (std::string line; std::getline(in, line);) {
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
        const int s = j["step"].get<int>();
        if (s < 0 || s >= step || seen[static_cast<size_t>(s)]) continue;
        seen[static_cast<size_t>(s)] = true;
        kept += line + "\n";
    }
    missing = static_cast<int>(std::count(seen.begin(), seen.end(), false));
    return kept;
}

// A rank's memory.json. process_peak_resident_bytes (the process's resident peak, which `tessel calibrate` fits
// reserved bytes to on the CPU backend) only where the rank has a process of its own; on CUDA the device bytes
// the caching allocator held at its peak.
nlohmann::json memoryJson(int rank, int stage, const tessel::exec::Backend& backend, const tessel::exec::RankLaunch& launch) {
    const tessel::exec::MemoryStats& m = backend.memory();
    nlohmann::json peak = nlohmann::json::object(), atPeak = nlohmann::json::object();
    for (int c = 0; c < tessel::exec::kMemoryCategories; ++c) {
        const std::string key = tessel::exec::toString(static_cast<tessel::exec::MemoryCategory>(c)) + "_bytes";
        peak[key] = m.peakBytes[static_cast<size_t>(c)];
        atPeak[key] = m.atPeakBytes[static_cast<size_t>(c)];
    }
    nlohmann::json j{{"rank", rank},
                     {"stage", stage},
                     {"peak_bytes", peak},
                     {"at_peak_total_bytes", atPeak},
                     {"peak_total_bytes", m.peakTotalBytes}};
    if (backend.name() == "cuda")
        j["device_peak_reserved_bytes"] = tessel::exec::cudaPeakReservedBytes(backend);
    else if (!launch.inProcess)
        j["process_peak_resident_bytes"] = tessel::exec::processPeakResidentBytes();
    if (launch.inProcess) j["ranks_in_process"] = launch.ranks;
    return j;
}

// One rank's run: status file, scenario, backend and comm, steps, checkpoints and outputs. Writes "error: ..."
// to the rank's status file and rethrows on failure. `dieAbruptly` is the --fail-rank test hook (a crash
// with no cleanup: under mpirun the process exits, in one process the rank is failed in the world and stops).
void runRank(const Options& o, std::unique_ptr<tessel::exec::Comm> comm, const tessel::exec::RankLaunch& launch,
             const std::function<void()>& dieAbruptly) {
    using namespace tessel;
    using namespace tessel::exec;
    const int rank = comm->rank();
    namespace fs = std::filesystem;
    // A status file per rank lets `tessel run` name the rank that failed: "running" until it finishes
    // ("done") or reports an error; a rank that dies abruptly leaves "running" behind.
    const fs::path rankDir = fs::path(o.runDir) / ("rank-" + std::to_string(rank));
    auto status = [&](const std::string& text) {
        std::error_code ec;
        fs::create_directories(rankDir, ec);
        try {
            writeFileAtomically((rankDir / "status").string(), text + "\n");
        } catch (const std::exception&) {
        }
    };
    status("running");
    if (!launch.inProcess) {
        std::strncpy(gStatusPath, (rankDir / "status").c_str(), sizeof gStatusPath - 1);
        std::signal(SIGTERM, onTerminate);
    }
    try {
        comm->setTimeoutSeconds(o.timeoutSeconds);
        Scenario s = loadScenarioFile(fs::path(o.runDir) / "scenario.json");
        finishScenario(s);
        ProblemList problems;
        validateExecutable(s.model, s.plan, "/plan", problems, o.backend);
        problems.throwIfAny();
        if (comm->worldSize() != s.plan.worldSize())
            throw InputError("--ranks", "the plan needs " + std::to_string(s.plan.worldSize()) + " ranks, " +
                                            (launch.inProcess ? "--ranks asked for " : "mpirun started ") +
                                            std::to_string(comm->worldSize()));
        std::unique_ptr<Backend> backend;
        if (o.backend == "cuda") {
            // DeviceError (exit 1) when this build has no CUDA backend or no GPU answers.
            CudaRank cuda = makeCudaRank(cudaPrecisionOf(s.plan.precision, "/plan/precision"), std::move(comm), launch);
            backend = std::move(cuda.backend);
            comm = std::move(cuda.comm);
            comm->setTimeoutSeconds(o.timeoutSeconds);
        } else {
            backend = makeCpuBackend(s.plan.precision == "cpu_fp32" ? ElementType::F32 : ElementType::F64);
        }
        ParallelContext ctx = makeContext(s.plan, rank, *comm, s.model.tiedEmbeddings);
        TrainHyper hyper;
        Trainer trainer(s.model, ctx, *backend, hyper,
                        textDataSource(readTextFile(o.dataPath), s.model.seqLen, s.plan.microBatch, s.plan.globalBatch,
                                       s.plan.dp, hyper.seed));
        const std::string checkpointDir =
            o.checkpointDir.empty() ? (fs::path(o.runDir) / "checkpoints").string() : o.checkpointDir;
        const fs::path lossesPath = fs::path(o.runDir) / "losses.jsonl";
        std::string losses;
        int first = 0;
        if (o.resume) {
            first = trainer.loadCheckpoint(checkpointDir);
            if (first >= o.steps)
                throw InputError("--steps", "the newest checkpoint is at step " + std::to_string(first) + ", so --steps " +
                                                std::to_string(o.steps) + " leaves nothing to train");
            if (rank == 0) {
                // Keep the earlier run's losses before the resumed step; drop any it logged past its checkpoint.
                int missing = 0;
                losses = lossesBefore(lossesPath, first, missing);
                if (missing > 0)
                    std::cerr << "tessel-worker: warning: " << lossesPath.string() << " lacks " << missing << " of the "
                              << first << " steps before the checkpoint; the resumed file will too\n";
            }
        } else if (const int found = newestCheckpointStep(checkpointDir); found >= 0) {
            // Never mix a fresh run's checkpoints with an earlier run's.
            throw InputError("--checkpoint-dir", "\"" + checkpointDir + "\" already holds a checkpoint (step " +
                                                     std::to_string(found) + "); resume from it or remove it");
        }
        // Rank 0 writes the losses before each checkpoint, so a complete checkpoint of step N always has the
        // losses of steps 0..N-1 on disk next to it.
        auto checkpoint = [&](int nextStep) {
            if (rank == 0) writeFileAtomically(lossesPath.string(), losses);
            trainer.saveCheckpoint(checkpointDir, nextStep);
        };
        for (int step = first; step < o.steps; ++step) {
            if (rank == o.failRank && step == o.failAtStep) {
                dieAbruptly();
                return;
            }
            const StepStats st = trainer.step(step);
            losses += nlohmann::json{{"step", step}, {"loss", st.loss}, {"grad_norm", st.gradNorm}}.dump() + "\n";
            if (o.checkpointEvery > 0 && (step + 1) % o.checkpointEvery == 0 && step + 1 < o.steps) checkpoint(step + 1);
        }
        checkpoint(o.steps);
        std::string lines;
        const std::string device = backend->name();
        for (const auto& r : trainer.records()) lines += measurementToJson(r, device).dump() + "\n";
        writeFileAtomically((rankDir / "measurements.jsonl").string(), lines);
        writeFileAtomically((rankDir / "memory.json").string(),
                            memoryJson(rank, ctx.stage(), *backend, launch).dump(2) + "\n");
        if (rank == 0) {
            nlohmann::json versions = softwareVersions();
            versions["launcher"] = launch.inProcess ? "in-process" : "mpirun";
            versions["comm"] = comm->name();
            // The CPU reference's ranks all run on this host (tessel run's mpirun is local): how many hardware threads
            // they had, so that `tessel compare` can say when they shared cores.
            if (o.backend == "cpu") {
                versions["ranks"] = s.plan.worldSize();
                versions["host_threads"] = static_cast<int>(std::thread::hardware_concurrency());
            }
            for (const auto& [key, value] : backend->provenance()) versions[key] = value;   // cuda: device, driver, ...
            writeFileAtomically((fs::path(o.runDir) / "versions.json").string(), versions.dump(2) + "\n");
        }
        comm->barrier(ctx.world);
        status("done");
        if (o.backend == "cuda") comm.reset();   // the NCCL comm holds buffers of the backend: it goes first
    } catch (const std::exception& e) {
        status(std::string("error: ") + e.what());
        std::cerr << "tessel-worker rank " << rank << ": error: " << e.what() << "\n" << std::flush;
        throw;
    }
}
} // namespace

int main(int argc, char** argv) {
    using namespace tessel;
    using namespace tessel::exec;
    if (argc > 1 && std::string(argv[1]) == "bench") return runBenchWorker(argc - 1, argv + 1);
    if (argc == 2 && std::string(argv[1]) == "--launchers") {
        std::cout << launchersJson() << "\n";
        return 0;
    }
    if (argc == 2 && std::string(argv[1]) == "--devices") {
        // For scripts/gpu-checks.sh: whether this build has the CUDA backend and how many GPUs answer (any CUDA
        // error at discovery counts as none).
        std::cout << nlohmann::json{{"cuda_built", cudaBackendBuilt()}, {"cuda_devices", cudaDeviceCount()}}.dump() << "\n";
        return 0;
    }
    CLI::App app{"tessel-worker: the ranks of tessel run (one per process under mpirun, or all in one process)"};
    Options o;
    app.add_option("--run-dir", o.runDir, "Run folder holding scenario.json")->required();
    app.add_option("--data", o.dataPath, "Training text (bytes are tokens)")->required();
    app.add_option("--steps", o.steps, "Training steps")->check(CLI::PositiveNumber);
    app.add_option("--timeout", o.timeoutSeconds, "Seconds any collective or transfer may wait");
    app.add_option("--fail-rank", o.failRank, "Test hook: rank that dies abruptly");
    app.add_option("--fail-at-step", o.failAtStep, "Test hook: step at which it dies");
    app.add_option("--checkpoint-dir", o.checkpointDir, "Checkpoint folder (default: <run-dir>/checkpoints)");
    app.add_option("--checkpoint-every", o.checkpointEvery, "Also save a checkpoint every K steps (0: only at the end)")
        ->check(CLI::NonNegativeNumber);
    app.add_flag("--resume", o.resume, "Continue from the newest complete checkpoint up to --steps in all");
    app.add_option("--backend", o.backend, "cpu (float64/float32) or cuda (bf16 mixed or fp32)")
        ->check(CLI::IsMember({"cpu", "cuda"}));
    app.add_flag("--in-process", o.inProcess,
                 "Run every rank of the plan as a thread of this process (no mpirun; the only way without MPI)");
    app.add_option("--ranks", o.ranks, "With --in-process: ranks to run (default: the plan's tp x pp x dp x cp)")
        ->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);

    if (!o.inProcess) {
        std::unique_ptr<Comm> comm;
        try {
            comm = makeMpiComm();
        } catch (const std::exception& e) {
            std::cerr << "tessel-worker: cannot start MPI: " << e.what() << "\n";
            return 1;
        }
        try {
            runRank(o, std::move(comm), RankLaunch{}, [] { std::_Exit(3); });   // a crash: no cleanup, no MPI_Finalize
        } catch (const std::exception&) {
            abortMpi(1);
        }
        return 0;
    }

    // In one process: as many ranks as the plan has (or --ranks, which the ranks check against the plan).
    int ranks = o.ranks;
    if (ranks == 0) {
        try {
            Scenario s = loadScenarioFile(std::filesystem::path(o.runDir) / "scenario.json");
            finishScenario(s);
            ranks = s.plan.worldSize();
        } catch (const std::exception& e) {
            std::cerr << "tessel-worker: error: " << e.what() << "\n";
            return 2;
        }
    }
    const RankLaunch launch{true, ranks};
    std::atomic<bool> died{false};
    const auto errors = runInProcessRanks(ranks, [&](int r, const std::shared_ptr<InProcessWorld>& world) {
        runRank(o, makeInProcessComm(world, r), launch, [&] {
            died = true;
            failRank(*world, r, "died abruptly (test hook --fail-rank)");
        });
    });
    for (const auto& e : errors)
        if (e) return 1;
    return died ? 3 : 0;
}
