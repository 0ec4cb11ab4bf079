// The pure parts of the NCCL communicator: sub-group colour/key for ncclCommSplit, the packing of the
// ncclUniqueId into doubles for its broadcast over the host communicator, and which stream a group uses.
#pragma once

#include "tessel/exec/comm.hpp"

#include <cstdint>
#include <vector>

namespace tessel::exec::nccl {

// ncclCommSplit(world, color, key): members of one group share a colour (the smallest world rank of the
// group, as MpiComm's split) and are ordered by key (their index), so the new communicator's ranks are in
// group order. CommError when `worldRank` is not the group's member at myIndex.
struct SplitColorKey {
    int color = 0;
    int key = 0;
};
SplitColorKey splitColorKey(const Group& g, int worldRank);

// The unique id travels as an all-reduce of doubles over the host communicator (rank 0 contributes the
// bytes, everyone else zeros): 4 bytes per double, exact since every value is an integer below 2^32.
std::vector<double> packBootstrapBytes(const std::vector<uint8_t>& bytes);
// Inverse of packBootstrapBytes for `byteCount` bytes; CommError when a value is not an integer in
// [0, 2^32) or there are too few values (a corrupted or mixed-up bootstrap message).
std::vector<uint8_t> unpackBootstrapBytes(const std::vector<double>& values, size_t byteCount);

// Data-parallel gradient reduction ("dp", "dp_cp", "expert_dp") runs on its own stream, apart from the
// pipeline and tensor-parallel traffic.
bool usesDataParallelStream(const Group& g);

} // namespace tessel::exec::nccl
