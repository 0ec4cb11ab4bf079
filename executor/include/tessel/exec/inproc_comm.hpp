// In-process Comm: N threads of one process act as N ranks, exchanging through shared memory (tests, and runs
// without MPI: `tessel run --launcher in-process`).
#pragma once

#include "tessel/exec/comm.hpp"

#include <exception>
#include <functional>
#include <memory>
#include <vector>

namespace tessel::exec {

class InProcessWorld;

// Creates the shared state of a world of `worldSize` ranks; hand each thread its own communicator.
std::shared_ptr<InProcessWorld> makeInProcessWorld(int worldSize);
std::unique_ptr<Comm> makeInProcessComm(std::shared_ptr<InProcessWorld> world, int rank);
// Marks `rank` as failed: every call that waits on it (now or later) throws CommError naming it, as when a
// process dies (used by tests of the failure path and by a thread that throws).
void failRank(InProcessWorld& world, int rank, const std::string& why);

// Runs body(rank, world) on `size` threads of one in-process world. A rank that throws is failed in the world
// (so the others stop waiting on it within their timeouts). Returns, once every thread has joined, each rank's
// exception (null for a rank that returned).
std::vector<std::exception_ptr> runInProcessRanks(
    int size, const std::function<void(int rank, const std::shared_ptr<InProcessWorld>& world)>& body);

} // namespace tessel::exec
