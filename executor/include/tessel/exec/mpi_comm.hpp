// MPI Comm (OpenMPI): one process per rank under mpirun; non-blocking calls polled against a deadline. A build
// without MPI (TESSEL_MPI=OFF or none found) links a stand-in: mpiBuilt() is false and makeMpiComm throws.
#pragma once

#include "tessel/exec/comm.hpp"

#include <memory>

namespace tessel::exec {

// True when this build has the MPI communicator (TESSEL_MPI found OpenMPI).
bool mpiBuilt();
// Calls MPI_Init_thread on first use (MPI_Finalize at exit); throws RuntimeError if MPI is unavailable.
std::unique_ptr<Comm> makeMpiComm();
// Takes every rank down (MPI_Abort) after a fatal error, so nothing is left running (without MPI: exits).
[[noreturn]] void abortMpi(int code);

} // namespace tessel::exec
