// In-process Comm for tests: N threads of one process act as N ranks, exchanging through shared memory.
#pragma once

#include "tessel/exec/comm.hpp"

#include <memory>

namespace tessel::exec {

class InProcessWorld;

// Creates the shared state of a world of `worldSize` ranks; hand each thread its own communicator.
std::shared_ptr<InProcessWorld> makeInProcessWorld(int worldSize);
std::unique_ptr<Comm> makeInProcessComm(std::shared_ptr<InProcessWorld> world, int rank);
// Marks `rank` as failed: every call that waits on it (now or later) throws CommError naming it, as when a
// process dies (used by tests of the failure path and by a thread that throws).
void failRank(InProcessWorld& world, int rank, const std::string& why);

} // namespace tessel::exec
