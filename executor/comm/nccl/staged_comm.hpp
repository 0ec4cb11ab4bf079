// A Comm over device tensors that stages every transfer through fp32 host buffers and hands it to a host Comm
// (in-process or MPI). It is the in-process device communicator for several ranks (threads) sharing one GPU,
// which NCCL refuses ("duplicate GPU"), and a fallback wherever NCCL is not available.
#pragma once

#include "tessel/exec/comm.hpp"

#include <memory>

namespace tessel::exec {

// Moves a device tensor's values to and from a host fp32 buffer of numel() floats. The CUDA backend provides
// one (cudaStagingFor); tests use a host fake.
class DeviceStaging {
public:
    virtual ~DeviceStaging() = default;
    virtual void toHost(const Tensor& device, float* host) = 0;
    virtual void fromHost(const float* host, Tensor& device) = 0;
};

// Sums run in fp32 on the host in the host comm's order (group order for the in-process comm), then are
// rounded once to the device type, so every member gets the same bits. Timeouts are the host comm's, with
// this comm's timeoutSeconds() passed down at every call.
std::unique_ptr<Comm> makeStagedComm(std::unique_ptr<Comm> host, std::shared_ptr<DeviceStaging> staging);

} // namespace tessel::exec
