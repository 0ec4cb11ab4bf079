// Starting tessel-worker ranks (for `tessel run` and `tessel bench`), under mpirun or as threads of one worker
// process, and naming the ranks that failed.
#pragma once

#include "tessel/cost/errors.hpp"

#include <string>
#include <utility>
#include <vector>

namespace tessel::cli {

// The first executable called `name` on PATH, or "" when there is none.
std::string findOnPath(const std::string& name);
// tessel-worker: $TESSEL_WORKER, next to this executable, the build tree's, or on PATH; "" when not found.
std::string findWorker();
// How ranks start: "mpirun" (one tessel-worker process per rank) or "in-process" (one tessel-worker process,
// the ranks its threads).
struct Launch {
    std::string launcher;
    std::string mpirun;   // with "mpirun": its path
    std::string worker;
};
// The launchers `worker` was built with (`tessel-worker --launchers`: "mpirun" only where it has MPI, and
// "in-process"); empty when the worker cannot be asked.
std::vector<std::string> workerLaunchers(const std::string& worker);
// Resolves --launcher: "auto" is mpirun where the worker was built with MPI, in-process otherwise. Adds a problem
// (at --launcher, tessel-worker or mpirun) for each piece that is missing.
Launch resolveLaunch(const std::string& requested, ProblemList& problems);
// The command that starts `ranks` ranks running `workerArgs`: `mpirun -np N ... worker ARGS` (with what OpenMPI
// needs here: oversubscription on small hosts, --allow-run-as-root as root), or `worker ARGS --in-process
// --ranks N`.
std::vector<std::string> launchCommand(const Launch& launch, int ranks, const std::vector<std::string>& workerArgs);
// Runs argv[0] with the arguments, waits, and returns its exit status (128 + signal when killed).
int runAndWait(const std::vector<std::string>& argv);
// As runAndWait, and returns what it wrote to stdout in `out`.
int runAndCapture(const std::vector<std::string>& argv, std::string& out);
// One line per rank of a failed launch, from the status files under dir/rank-R/status (ranks that reported an
// error, and ranks that died without a word).
std::string describeFailedRanks(const std::string& dir, int ranks);

} // namespace tessel::cli
