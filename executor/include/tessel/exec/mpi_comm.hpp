// MPI Comm (OpenMPI): one process per rank under mpirun; non-blocking calls polled against a deadline.
#pragma once

#include "tessel/exec/comm.hpp"

#include <memory>

namespace tessel::exec {

// Calls MPI_Init_thread on first use (MPI_Finalize at exit); throws RuntimeError if MPI is unavailable.
std::unique_ptr<Comm> makeMpiComm();
// Takes every rank down (MPI_Abort) after a fatal error, so nothing is left running.
[[noreturn]] void abortMpi(int code);

} // namespace tessel::exec
