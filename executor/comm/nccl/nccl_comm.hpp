// NCCL Comm: one process per GPU under mpirun. The NCCL unique id is bootstrapped over a host Comm (MPI),
// sub-groups come from ncclCommSplit, and every call is polled against the comm's deadline; on timeout all
// NCCL communicators are aborted (ncclCommAbort) and CommError names this rank, the group and the call.
#pragma once

#include "tessel/exec/backend.hpp"
#include "tessel/exec/comm.hpp"

#include <memory>

namespace tessel::exec {

// `host` carries the bootstrap, allReduceHost and barrier (an MPI comm under mpirun); `backend` is the CUDA
// backend whose compute stream orders the transfers. Collective over the host world.
std::unique_ptr<Comm> makeNcclComm(std::unique_ptr<Comm> host, Backend& backend);

} // namespace tessel::exec
