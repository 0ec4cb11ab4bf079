// `tessel-worker bench`: the ranks of `tessel bench`, one per process under mpirun or all as threads of one
// process (--in-process --ranks N); each runs the compute microbenchmarks (every rank at once, as training
// loads the host) and the collectives over groups of 2, 4, ... ranks, and writes its points to
// <out>/rank-R/bench.jsonl.
#include "bench_worker.hpp"

#include "tessel/cost/model.hpp"
#include "tessel/exec/cpu_backend.hpp"
#include "tessel/exec/inproc_comm.hpp"
#include "tessel/exec/microbench.hpp"
#include "tessel/exec/mpi_comm.hpp"
#include "tessel/exec/run_output.hpp"

#include "rank_launch.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace tessel::exec {

namespace {
namespace fs = std::filesystem;

nlohmann::json readJson(const fs::path& path) {
    std::ifstream in(path);
    if (!in) throw InputError(path.string(), "cannot read the bench spec");
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw InputError(path.string(), "not a JSON object");
    return j;
}

// One rank of the benchmark: its points, written to <out>/rank-R/bench.jsonl. Throws on failure.
void benchRank(const std::string& outDir, std::unique_ptr<Comm> comm, const RankLaunch& launch) {
    const int rank = comm->rank();
    const nlohmann::json spec = readJson(fs::path(outDir) / "bench-spec.json");
    comm->setTimeoutSeconds(spec.value("timeout_seconds", 120.0));
    BenchOptions options;
    options.quick = spec.value("quick", false);
    options.maxMessageBytes = spec.value("max_message_bytes", options.maxMessageBytes);
    for (size_t i = 0; i < spec.at("models").size(); ++i)
        options.models.push_back(parseModel(spec["models"][i], "/models/" + std::to_string(i)));
    const std::string backendName = spec.value("backend", "cpu");
    const std::string dtype = spec.value("dtype", "fp64");
    std::unique_ptr<Backend> backend;
    if (backendName == "cuda") {
        CudaRank cuda = makeCudaRank(cudaPrecisionOf(dtype == "fp32" ? "fp32" : "mixed", "/dtype"), std::move(comm), launch);
        backend = std::move(cuda.backend);
        comm = std::move(cuda.comm);
        comm->setTimeoutSeconds(spec.value("timeout_seconds", 120.0));
    } else {
        backend = makeCpuBackend(dtype == "fp32" ? ElementType::F32 : ElementType::F64);
    }
    // The device the points ran on: the GPU's name on CUDA (rank 0 also leaves the versions for provenance.json).
    const std::string device = backendName == "cuda" ? cudaProvenance(*backend).deviceName : spec.value("device", backend->name());
    if (backendName == "cuda" && rank == 0) {
        nlohmann::json versions = nlohmann::json::object();
        for (const auto& [key, value] : backend->provenance()) versions[key] = value;
        fs::create_directories(fs::path(outDir) / "rank-0");
        writeFileAtomically((fs::path(outDir) / "rank-0" / "device.json").string(), versions.dump(2) + "\n");
    }
    const int gpusPerNode = spec.value("gpus_per_node", comm->worldSize());

    Group world{"world", {}, rank};
    for (int r = 0; r < comm->worldSize(); ++r) world.ranks.push_back(r);
    comm->createGroup(world);
    const BenchSync worldSync{[&] { comm->barrier(world); }, [&](int wish) {
                                  const double total = comm->allReduceHost({static_cast<double>(wish)}, world).at(0);
                                  return static_cast<int>(std::ceil(total / comm->worldSize()));
                              }};
    std::string lines;
    auto emit = [&](const BenchPoint& p, const std::string& tier) {
        nlohmann::json j = benchPointToJson(p, rank, device, dtype);
        if (!tier.empty()) j["tier"] = tier;
        lines += j.dump() + "\n";
    };
    for (const BenchPoint& p : runComputeBenchmarks(*backend, options, worldSync)) emit(p, "");
    if (backendName == "cuda")
        for (const BenchPoint& p : cudaHostTransferBenchmarks(*backend, options, worldSync)) emit(p, "");
    // Collectives over groups of n = 2, 4, ... ranks: the world split into consecutive blocks of n (every
    // world rank must create a group at each call under MPI), all blocks measuring at once as the
    // concurrent groups of a plan do. Ranks fill a node first, so a block within gpus_per_node is intra-node.
    for (int n = 2; n <= comm->worldSize(); n *= 2) {
        const int first = rank / n * n, last = std::min(comm->worldSize(), first + n);
        Group g{"bench" + std::to_string(n), {}, rank - first};
        for (int r = first; r < last; ++r) g.ranks.push_back(r);
        comm->createGroup(g);
        if (g.size() == n) {
            const bool oneNode = first / gpusPerNode == (last - 1) / gpusPerNode;
            for (const BenchPoint& p : runCommBenchmarks(*backend, *comm, g, options))
                emit(p, oneNode ? "intra_node" : "inter_node");
        }
        comm->barrier(world);
    }
    const fs::path rankDir = fs::path(outDir) / ("rank-" + std::to_string(rank));
    fs::create_directories(rankDir);
    writeFileAtomically((rankDir / "bench.jsonl").string(), lines);
    if (backendName == "cuda") comm.reset();   // the NCCL comm holds buffers of the backend: it goes first
}
} // namespace

int runBenchWorker(int argc, char** argv) {
    CLI::App app{"tessel-worker bench: the ranks of tessel bench (under mpirun, or all in one process)"};
    std::string outDir;
    bool inProcess = false;
    int ranks = 1;
    app.add_option("--out", outDir, "Bench folder holding bench-spec.json")->required();
    app.add_flag("--in-process", inProcess, "Run the ranks as threads of this process (no mpirun)");
    app.add_option("--ranks", ranks, "With --in-process: ranks to run")->check(CLI::PositiveNumber);
    CLI11_PARSE(app, argc, argv);

    if (inProcess) {
        const RankLaunch launch{true, ranks};
        int rc = 0;
        const auto errors = runInProcessRanks(ranks, [&](int r, const std::shared_ptr<InProcessWorld>& world) {
            benchRank(outDir, makeInProcessComm(world, r), launch);
        });
        for (size_t r = 0; r < errors.size(); ++r) {
            if (!errors[r]) continue;
            try {
                std::rethrow_exception(errors[r]);
            } catch (const InputError& e) {
                std::cerr << "tessel-worker bench: rank " << r << ": " << e.what() << "\n";
                rc = 2;
            } catch (const std::exception& e) {
                std::cerr << "tessel-worker bench: rank " << r << ": " << e.what() << "\n";
                rc = std::max(rc, 1);
            }
        }
        return rc;
    }
    std::unique_ptr<Comm> comm;
    try {
        comm = makeMpiComm();
    } catch (const std::exception& e) {
        std::cerr << "tessel-worker bench: cannot start MPI: " << e.what() << "\n";
        return 1;
    }
    const int rank = comm->rank();
    try {
        benchRank(outDir, std::move(comm), RankLaunch{});
        return 0;
    } catch (const InputError& e) {
        std::cerr << "tessel-worker bench: rank " << rank << ": " << e.what() << "\n";
        abortMpi(2);
    } catch (const std::exception& e) {
        std::cerr << "tessel-worker bench: rank " << rank << ": " << e.what() << "\n";
        abortMpi(1);
    }
    return 1;
}

} // namespace tessel::exec
