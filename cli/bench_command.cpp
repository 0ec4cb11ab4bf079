// `tessel bench`: microbenchmarks for calibration — GEMMs over the layer shapes of the chosen models and a sweep,
// attention, element-wise/norm kernels, the optimizer and every collective over message sizes — run by
// tessel-worker ranks (under mpirun, or as threads of one worker: --launcher); leaves DIR/bench.jsonl (one
// record per point) and DIR/provenance.json.
#include "commands.hpp"
#include "launch.hpp"
#include "table.hpp"

#include "tessel/cost/cluster.hpp"
#include "tessel/cost/scenario.hpp"
#include "tessel/exec/run_output.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include <unistd.h>

namespace tessel::cli {

namespace fs = std::filesystem;

namespace {
// "model name" of /proc/cpuinfo (the CPU backend's device), or "cpu".
std::string cpuName() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("model name", 0) != 0) continue;
        const auto colon = line.find(':');
        if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
    return "cpu";
}

std::string utcNow() {
    const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

std::string hostName() {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
    return buf;
}
} // namespace

std::function<int()> addBenchCommand(CLI::App& app) {
    auto* cmd = app.add_subcommand("bench", "Microbenchmarks for `tessel calibrate`: kernels, copies and collectives");
    struct Options {
        std::string backend = "cpu";
        std::string out;
        int ranks = 2;
        bool quick = false;
        bool force = false;
        std::vector<std::string> models{"tiny"};
        std::string cluster = "cpu-host";
        std::string dtype = "fp64";
        double maxMessageMiB = 64.0;
        double timeoutSeconds = 120.0;
        std::string launcher = "auto";
    };
    auto o = std::make_shared<Options>();
    cmd->add_option("--backend", o->backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
    cmd->add_option("--out", o->out, "Folder to write (bench.jsonl, provenance.json)")->required();
    cmd->add_option("--ranks", o->ranks, "Ranks to start (collectives over groups of 2, 4, ... of them)");
    cmd->add_option("--model", o->models, "Models whose layer shapes seed the GEMM and kernel shapes (name or file)");
    cmd->add_option("--cluster", o->cluster, "Cluster the ranks run on (for the tier of each group)");
    cmd->add_option("--dtype", o->dtype, "Element type: fp64 or fp32 on cpu; mixed (bf16) or fp32 on cuda");
    cmd->add_option("--max-message-mib", o->maxMessageMiB, "Largest collective message in MiB");
    cmd->add_option("--timeout", o->timeoutSeconds, "Seconds a collective may wait before the bench fails");
    cmd->add_option("--launcher", o->launcher,
                    "auto (mpirun where tessel-worker has MPI, else in-process), mpirun or in-process");
    cmd->add_flag("--quick", o->quick, "Fewer shapes and message sizes (up to 8 MiB): for CI");
    cmd->add_flag("--force", o->force, "Reuse a non-empty output folder");
    return [cmd, o]() {
        if (!cmd->parsed()) return -1;
        ProblemList problems;
        nlohmann::json models = nlohmann::json::array();
        for (size_t i = 0; i < o->models.size(); ++i) {
            try {
                models.push_back(modelToJson(loadModelRef(o->models[i], "--model")));
            } catch (const InputError& e) {
                problems.append(e.problems());
            }
        }
        ClusterConfig cluster;
        try {
            cluster = loadClusterRef(o->cluster, "--cluster");
        } catch (const InputError& e) {
            problems.append(e.problems());
        }
        if (o->ranks < 1) problems.add("--ranks", "must be at least 1");
        if (!(o->maxMessageMiB > 0.0)) problems.add("--max-message-mib", "must be positive");
        if (!(o->timeoutSeconds > 0.0)) problems.add("--timeout", "must be positive");
        const bool cpu = o->backend == "cpu";
        if (cpu && o->dtype != "fp64" && o->dtype != "fp32") problems.add("--dtype", "the cpu backend runs fp64 or fp32, not " + o->dtype);
        if (!cpu && o->dtype != "mixed" && o->dtype != "fp32") problems.add("--dtype", "the cuda backend runs mixed or fp32, not " + o->dtype);
        std::error_code ec;
        if (fs::exists(o->out, ec) && !fs::is_empty(o->out, ec) && !o->force)
            problems.add("--out", "\"" + o->out + "\" is not empty; pass --force to reuse it");
        const Launch launch = resolveLaunch(o->launcher, problems);
        problems.throwIfAny();

        fs::create_directories(o->out);
        for (const auto& entry : fs::directory_iterator(o->out))
            if (entry.path().filename().string().rfind("rank-", 0) == 0) fs::remove_all(entry.path());
        const nlohmann::json provenance{{"schema_version", 1},
                                        {"created_utc", utcNow()},
                                        {"host", hostName()},
                                        {"device", cpu ? cpuName() : std::string("cuda")},
                                        {"backend", o->backend},
                                        {"dtype", o->dtype},
                                        {"ranks", o->ranks},
                                        {"launcher", launch.launcher},
                                        {"cluster", cluster.name},
                                        {"software", exec::softwareVersions()}};
        const nlohmann::json spec{{"schema_version", 1},
                                  {"backend", o->backend},
                                  {"dtype", o->dtype},
                                  {"quick", o->quick},
                                  {"models", models},
                                  {"device", provenance["device"]},
                                  {"gpus_per_node", cluster.gpusPerNode},
                                  {"max_message_bytes", static_cast<int64_t>(o->maxMessageMiB * 1024 * 1024)},
                                  {"timeout_seconds", o->timeoutSeconds}};
        exec::writeFileAtomically((fs::path(o->out) / "bench-spec.json").string(), spec.dump(2) + "\n");

        const std::vector<std::string> argv = launchCommand(launch, o->ranks, {"bench", "--out", o->out});
        std::cerr << "tessel bench: " << o->ranks << " ranks (" << launch.launcher << "), " << o->backend << " " << o->dtype
                  << " -> " << o->out << "\n";
        const int rc = runAndWait(argv);
        if (rc != 0)
            throw RuntimeError("the benchmark failed (" + std::string(launch.launcher == "mpirun" ? "mpirun" : "tessel-worker") +
                               " exit status " + std::to_string(rc) + ")");
        // On CUDA rank 0 names the device and the library versions it ran with.
        nlohmann::json provenanceOut = provenance;
        if (std::ifstream dev(fs::path(o->out) / "rank-0" / "device.json"); dev) {
            const nlohmann::json d = nlohmann::json::parse(dev, nullptr, false);
            if (d.is_object()) {
                if (d.contains("device")) provenanceOut["device"] = d["device"];
                for (auto it = d.begin(); it != d.end(); ++it) provenanceOut["software"][it.key()] = it.value();
            }
        }

        // Merge the ranks' points into one file, with the provenance on every line.
        std::string merged;
        std::map<std::string, std::pair<int, double>> perKernel; // kernel -> points, sum of rank-0 seconds
        for (int r = 0; r < o->ranks; ++r) {
            std::ifstream in(fs::path(o->out) / ("rank-" + std::to_string(r)) / "bench.jsonl");
            if (!in) throw RuntimeError("rank " + std::to_string(r) + " left no bench.jsonl in " + o->out);
            for (std::string line; std::getline(in, line);) {
                nlohmann::json j = nlohmann::json::parse(line);
                j["created_utc"] = provenance["created_utc"];
                j["host"] = provenance["host"];
                j["software"] = provenanceOut["software"];
                merged += j.dump() + "\n";
                if (r == 0) {
                    auto& k = perKernel[j["kernel"].get<std::string>()];
                    ++k.first;
                    k.second += j["median_seconds"].get<double>();
                }
            }
        }
        exec::writeFileAtomically((fs::path(o->out) / "bench.jsonl").string(), merged);
        exec::writeFileAtomically((fs::path(o->out) / "provenance.json").string(), provenanceOut.dump(2) + "\n");
        Table t({"kernel", "points (rank 0)", "mean median us"});
        for (const auto& [k, v] : perKernel)
            t.addRow({k, std::to_string(v.first), fixed(v.second / v.first * 1e6, 1)});
        std::cout << t.render();
        std::cout << "wrote bench.jsonl and provenance.json to " << o->out << "\n";
        return 0;
    };
}

} // namespace tessel::cli
