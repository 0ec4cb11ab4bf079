// The MPI communicator's entry points in a build without MPI (TESSEL_MPI=OFF or no MPI found): ranks then run
// as threads of one process, and asking for MPI is a RuntimeError saying so.
#include "tessel/exec/mpi_comm.hpp"

#include "tessel/cost/errors.hpp"

#include <cstdlib>

namespace tessel::exec {

bool mpiBuilt() { return false; }

std::unique_ptr<Comm> makeMpiComm() {
    throw RuntimeError("this tessel was built without MPI (TESSEL_MPI=OFF or no MPI found), so its ranks cannot run "
                       "under mpirun; run them as threads of one process (tessel run --launcher in-process)");
}

void abortMpi(int code) { std::_Exit(code); }

} // namespace tessel::exec
