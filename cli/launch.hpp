// Starting tessel-worker ranks under mpirun (for `tessel run` and `tessel bench`) and naming the ranks that failed.
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
// mpirun and tessel-worker, adding a problem for each that is missing.
std::pair<std::string, std::string> findLaunchTools(ProblemList& problems);
// `mpirun -np N` with what OpenMPI needs here (oversubscription on small hosts, --allow-run-as-root as root).
std::vector<std::string> mpirunCommand(const std::string& mpirun, int ranks);
// Runs argv[0] with the arguments, waits, and returns its exit status (128 + signal when killed).
int runAndWait(const std::vector<std::string>& argv);
// One line per rank of a failed launch, from the status files under dir/rank-R/status (ranks that reported an
// error, and ranks that died without a word).
std::string describeFailedRanks(const std::string& dir, int ranks);

} // namespace tessel::cli
