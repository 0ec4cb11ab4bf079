// Starting tessel-worker ranks under mpirun and naming the ranks that failed.
#include "launch.hpp"

#include "tessel/cost/errors.hpp"

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#ifndef TESSEL_WORKER_PATH
#define TESSEL_WORKER_PATH ""
#endif

namespace tessel::cli {

namespace fs = std::filesystem;

std::string findOnPath(const std::string& name) {
    const char* path = std::getenv("PATH");
    if (!path) return {};
    std::stringstream ss(path);
    for (std::string dir; std::getline(ss, dir, ':');) {
        fs::path candidate = fs::path(dir) / name;
        if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
    return {};
}

std::string findWorker() {
    if (const char* env = std::getenv("TESSEL_WORKER")) return env;
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        for (const fs::path& candidate : {self.parent_path() / "tessel-worker", self.parent_path().parent_path() / "executor" / "tessel-worker"})
            if (fs::exists(candidate)) return candidate.string();
    }
    if (fs::exists(TESSEL_WORKER_PATH)) return TESSEL_WORKER_PATH;
    return findOnPath("tessel-worker");
}

int runAndWait(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0)
        throw RuntimeError("cannot start " + argv[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) throw RuntimeError("lost track of " + argv[0]);
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}
std::pair<std::string, std::string> findLaunchTools(ProblemList& problems) {
    std::pair<std::string, std::string> tools{findOnPath("mpirun"), findWorker()};
    if (tools.first.empty()) problems.add("mpirun", "not found on PATH (install openmpi-bin)");
    if (tools.second.empty()) problems.add("tessel-worker", "not found next to tessel, in TESSEL_WORKER or on PATH");
    return tools;
}

std::vector<std::string> mpirunCommand(const std::string& mpirun, int ranks) {
    // No binding: containers and CI runners often restrict which cores a process may bind to, and binding made
    // no measurable difference to run-to-run timing spread on the development VM.
    std::vector<std::string> argv{mpirun, "-np", std::to_string(ranks), "--oversubscribe", "--bind-to", "none"};
    if (::geteuid() == 0) argv.push_back("--allow-run-as-root"); // OpenMPI refuses root without it
    return argv;
}

std::string describeFailedRanks(const std::string& dir, int ranks) {
    std::string detail;
    for (int r = 0; r < ranks; ++r) {
        std::ifstream st(fs::path(dir) / ("rank-" + std::to_string(r)) / "status");
        std::string line;
        std::getline(st, line);
        if (line == "running" || line.empty())
            detail += "\n  rank " + std::to_string(r) + ": died without reporting an error";
        else if (line.rfind("error", 0) == 0 || line.rfind("terminated", 0) == 0)
            detail += "\n  rank " + std::to_string(r) + ": " + line;
    }
    return detail;
}

} // namespace tessel::cli
