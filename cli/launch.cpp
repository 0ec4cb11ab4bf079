// Starting tessel-worker ranks under mpirun or in one process, and naming the ranks that failed.
#include "launch.hpp"

#include "tessel/cost/errors.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
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

namespace {
int waitFor(pid_t pid, const std::string& what) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) throw RuntimeError("lost track of " + what);
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::vector<char*> argvOf(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    return args;
}
} // namespace

int runAndWait(const std::vector<std::string>& argv) {
    std::vector<char*> args = argvOf(argv);
    pid_t pid = 0;
    if (posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0)
        throw RuntimeError("cannot start " + argv[0]);
    return waitFor(pid, argv[0]);
}

int runAndCapture(const std::vector<std::string>& argv, std::string& out) {
    std::vector<char*> args = argvOf(argv);
    int fds[2];
    if (::pipe(fds) != 0) throw RuntimeError("cannot make a pipe to read " + argv[0]);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
        ::close(fds[0]);
        throw RuntimeError("cannot start " + argv[0]);
    }
    out.clear();
    std::array<char, 4096> buf;
    for (;;) {
        const ssize_t n = ::read(fds[0], buf.data(), buf.size());
        if (n > 0) out.append(buf.data(), static_cast<size_t>(n));
        else if (n == 0 || errno != EINTR) break;
    }
    ::close(fds[0]);
    return waitFor(pid, argv[0]);
}

std::vector<std::string> workerLaunchers(const std::string& worker) {
    std::string out;
    try {
        if (runAndCapture({worker, "--launchers"}, out) != 0) return {};
    } catch (const RuntimeError&) {
        return {};
    }
    const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
    std::vector<std::string> launchers;
    if (j.is_object() && j.contains("launchers") && j["launchers"].is_array())
        for (const auto& l : j["launchers"])
            if (l.is_string()) launchers.push_back(l.get<std::string>());
    return launchers;
}

Launch resolveLaunch(const std::string& requested, ProblemList& problems) {
    Launch l;
    l.worker = findWorker();
    if (requested != "auto" && requested != "mpirun" && requested != "in-process")
        problems.add("--launcher", "unknown launcher \"" + requested + "\"; use auto, mpirun or in-process");
    if (l.worker.empty()) {
        problems.add("tessel-worker", "not found next to tessel, in TESSEL_WORKER or on PATH");
        return l;
    }
    const std::vector<std::string> has = workerLaunchers(l.worker);
    if (has.empty()) {
        problems.add("tessel-worker", "\"" + l.worker + "\" did not say how its ranks start (`" + l.worker +
                                          " --launchers` failed): is it a tessel-worker of this version?");
        return l;
    }
    const bool hasMpi = std::find(has.begin(), has.end(), "mpirun") != has.end();
    l.launcher = requested == "auto" ? (hasMpi ? "mpirun" : "in-process") : requested;
    if (l.launcher == "mpirun") {
        if (!hasMpi)
            problems.add("--launcher", "mpirun, but \"" + l.worker + "\" was built without MPI (TESSEL_MPI=OFF or no MPI "
                                       "found); use --launcher in-process");
        l.mpirun = findOnPath("mpirun");
        if (l.mpirun.empty()) problems.add("mpirun", "not found on PATH (install openmpi-bin, or pass --launcher in-process)");
    }
    return l;
}

std::vector<std::string> launchCommand(const Launch& l, int ranks, const std::vector<std::string>& workerArgs) {
    std::vector<std::string> argv;
    if (l.launcher == "mpirun") {
        // No binding: containers and CI runners often restrict which cores a process may bind to, and binding
        // made no measurable difference to run-to-run timing spread on the development VM.
        argv = {l.mpirun, "-np", std::to_string(ranks), "--oversubscribe", "--bind-to", "none"};
        if (::geteuid() == 0) argv.push_back("--allow-run-as-root"); // OpenMPI refuses root without it
    }
    argv.push_back(l.worker);
    argv.insert(argv.end(), workerArgs.begin(), workerArgs.end());
    if (l.launcher == "in-process") argv.insert(argv.end(), {"--in-process", "--ranks", std::to_string(ranks)});
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
