// Rank launch: the launchers this build has, and each rank's CUDA backend and device comm.
#include "rank_launch.hpp"

#include "nccl_comm.hpp"
#include "staged_comm.hpp"

#include "tessel/exec/mpi_comm.hpp"

#include <nlohmann/json.hpp>

namespace tessel::exec {

std::string launchersJson() {
    nlohmann::json launchers = nlohmann::json::array();
    if (mpiBuilt()) launchers.push_back("mpirun");
    launchers.push_back("in-process");
    return nlohmann::json{{"launchers", launchers}}.dump();
}

CudaRank makeCudaRank(CudaPrecision precision, std::unique_ptr<Comm> host, const RankLaunch& launch) {
    CudaRank r;
    if (!launch.inProcess) {
        r.backend = makeCudaBackend(precision, cudaDeviceForThisProcess());
        r.comm = makeNcclComm(std::move(host), *r.backend);   // MPI stays underneath for the bootstrap
        return r;
    }
    const int devices = cudaDeviceCount();   // DeviceError below when there is none
    const int rank = host->rank();
    if (devices >= launch.ranks) {
        r.backend = makeCudaBackend(precision, rank);
        r.comm = makeNcclComm(std::move(host), *r.backend);
    } else {
        r.backend = makeCudaBackend(precision, devices > 0 ? rank % devices : 0);
        r.comm = makeStagedComm(std::move(host), cudaStagingFor(*r.backend));
    }
    return r;
}

} // namespace tessel::exec
