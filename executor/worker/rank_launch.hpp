// How a tessel-worker's ranks start (one per process under mpirun, or all as threads of one process) and, for
// either, each rank's CUDA backend and device communicator.
#pragma once

#include "tessel/exec/backend.hpp"
#include "tessel/exec/comm.hpp"

#include "cuda_backend.hpp"

#include <memory>
#include <string>

namespace tessel::exec {

struct RankLaunch {
    bool inProcess = false;   // every rank a thread of this process; else this process is one rank under mpirun
    int ranks = 1;            // ranks in this process (in-process), else 1
};

// What `tessel-worker --launchers` prints: one line of JSON, {"launchers": ["mpirun", "in-process"]} (the first
// only where this build has MPI), which `tessel run` and `tessel bench` read to choose how to start ranks.
std::string launchersJson();

// A rank's CUDA backend and the comm its transfers go through. Under mpirun: the node-local device and NCCL
// over MPI. In one process: NCCL over the in-process comm with one GPU per rank where there are as many GPUs
// as ranks, else the staged comm (threads sharing GPUs round-robin, tensors through fp32 host buffers: NCCL
// refuses two ranks on one device). `comm` is declared after `backend` so it is destroyed first (NCCL holds
// buffers of the backend).
struct CudaRank {
    std::unique_ptr<Backend> backend;
    std::unique_ptr<Comm> comm;
};
CudaRank makeCudaRank(CudaPrecision precision, std::unique_ptr<Comm> host, const RankLaunch& launch);

} // namespace tessel::exec
