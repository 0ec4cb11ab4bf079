// The collective library's (NCCL's) device buffers a rank holds for the communicators its plan uses (FORMULAS.md §2).
#include "tessel/cost/framework.hpp"
#include "tessel/cost/memory.hpp"

#include <algorithm>

namespace tessel {

namespace {
// NCCL's default FIFO of each protocol, one set a connection (src/init.cc, unchanged from 2.x to 2.28):
// Simple DEFAULT_BUFFSIZE 4 MiB; LL128 NCCL_LL128_ELEMS_PER_THREAD 120 x NCCL_LL128_MAX_NTHREADS 640 x NCCL_STEPS 8
// x 8 B = 4,915,200 B; LL NCCL_LL_LINES_PER_THREAD 8 x NCCL_LL_MAX_NTHREADS 512 x NCCL_STEPS 8 x 16 B = 524,288 B.
constexpr double kSimpleFifoBytes = 4194304.0;
constexpr double kLl128FifoBytes = 4915200.0;
constexpr double kLlFifoBytes = 524288.0;
constexpr double kConnectionBytes = kSimpleFifoBytes + kLl128FifoBytes + kLlFifoBytes; // 9,633,792 B
// With cuMem (NCCL 2.19 on, where the driver has it: ncclCuMemEnable's auto-detection) each side of a connection
// is its own allocation rounded up to the 2 MiB granularity: the receiver's FIFOs and header to 6 MiB (a ring's,
// whose Simple FIFO sits with the sender under P2P read) or 10 MiB (point to point), the sender's header with or
// without the Simple FIFO to 6 or 2 MiB: 12 MiB a connection either way (the 10485760 and 2097152 B allocations
// of NVIDIA/nccl#1685's ALLOC log).
constexpr double kCuMemConnectionBytes = 12.0 * 1048576.0;
// NCCL_NCHANNELS_PER_NET_PEER's default: point-to-point channels to a peer across the network.
constexpr int kNetChannelsPerPeer = 2;
constexpr int kMaxChannels = 32; // MAXCHANNELS

int nextPow2(int v) {
    int p = 1;
    while (p < v) p *= 2;
    return p;
}

bool megatronStyle(const FrameworkSettings& f) {
    return f.name == "megatron" || f.name == "nemo" || f.name == "megascale" || f.name == "deepspeed";
}
} // namespace

CollectiveLibraryMemory collectiveLibraryMemory(const ModelConfig& model, const Plan& plan,
                                                const ClusterConfig& cluster, int stage) {
    CollectiveLibraryMemory out;
    const int channels = cluster.gpu.ncclCollChannels;
    if (channels <= 0 || plan.worldSize() <= 1) return out;
    // The NCCL of the framework's version (ncclGenerationOf): plain cudaMalloc'd FIFOs up to NCCL 2.18, cuMem from
    // 2.19; every ring and tree connected at init until 2.22 ("lazy connection establishment"), then each algorithm
    // on its first use.
    const NcclGeneration gen = ncclGenerationOf(plan.framework);
    const bool perAlgorithm = gen.connectsPerAlgorithm;
    out.bytesPerConnection = gen.cuMem ? kCuMemConnectionBytes : kConnectionBytes;

    // A collective communicator of `size` ranks, `stride` ranks apart, holds per channel its ring's connection (the
    // rank receives from one neighbour and sends to the other: one connection's two halves) and, where trees are
    // connected, the tree's up and down ones (a rank with a parent and a child): 3; over two ranks the tree is one
    // link: 2 (NVIDIA/nccl#964: 544 MiB for a 2-rank group against 688 MiB for larger ones). Connected per
    // algorithm, a group holds what it runs: its ring, and its trees only where it all-reduces across nodes (inside
    // a node NCCL's tuner rates the tree below the ring: tuning.cc's LL128 tree at 7/9 of its bandwidth).
    const int gpusPerNode = std::max(1, cluster.gpusPerNode);
    auto spansNodes = [&](int stride, int size) { return stride * size > gpusPerNode; };
    auto collective = [&](bool allReduce, int size, int stride) {
        if (size <= 1) return;
        ++out.collectives;
        if (perAlgorithm) out.connectionsPerChannel += allReduce && spansNodes(stride, size) ? 3 : 1;
        else out.connectionsPerChannel += size == 2 ? 2 : 3;
    };
    // Point to point inside a node: per peer, NCCL's per-pair channels rounded up to a power of two (paths.cc
    // ncclTopoComputeP2pChannels: the coll channels on an NVSwitch node, at most 32), each its own connection.
    // Across nodes the peers share one buffer set a channel ("for send/recv operations we have a single shared
    // buffer", NVIDIA/nccl#1450; NCCL_NET_SHARED_BUFFERS), NCCL_NCHANNELS_PER_NET_PEER = 2 channels.
    auto p2p = [&](int connections, int stride, int size) {
        if (connections <= 0) return;
        out.p2pConnections += connections;
        if (!spansNodes(stride, size)) out.p2pChannels += connections * std::min(kMaxChannels, nextPow2(channels));
        else out.p2pChannels += kNetChannelsPerPeer;
    };

    const FrameworkSettings& f = plan.framework;
    const int gradGroup = plan.dp * plan.cp;
    // The default group: PyTorch's barrier is an all-reduce on it (a one-element one: one algorithm).
    collective(false, plan.worldSize(), 1);
    collective(true, plan.tp, 1);
    if (plan.cp > 1) {
        if (plan.cpComm == CpComm::AllGather) collective(false, plan.cp, plan.tp);
        if (plan.cpComm == CpComm::P2p || plan.cpComm == CpComm::A2aP2p) p2p(1, plan.tp * plan.cpHeadSplit(), plan.cpRing());
        if (plan.cpComm == CpComm::A2a || plan.cpComm == CpComm::A2aP2p) p2p(plan.cpHeadSplit() - 1, plan.tp, plan.cpHeadSplit());
    }
    // The gradient group (dp x cp): its own communicator wherever it is not the whole world, and in Megatron-style
    // frameworks always (parallel_state.py makes every group with new_group); all-reduced without ZeRO, reduce-
    // scattered and gathered with it. Hybrid sharding adds the replicas' all-reduce.
    const bool megatron = megatronStyle(f); // once a call: the search asks for every stage of every plan
    if (gradGroup < plan.worldSize() || megatron) collective(plan.zeroStage == 0, gradGroup, plan.tp);
    collective(true, plan.zeroReplicas, plan.tp * gradGroup / std::max(1, plan.zeroReplicas));
    if (model.moe && plan.ep > 1) {
        p2p(plan.ep - 1, plan.tp * plan.cp, plan.ep); // the dispatch and combine all-to-alls
        collective(plan.zeroStage == 0, gradGroup / plan.ep, plan.tp * plan.ep); // the expert layers' gradient group
    }
    if (plan.pp > 1) {
        const int v = std::max(1, plan.vpp);
        const bool end = stage == 0 || stage == plan.pp - 1;
        const bool wraps = v > 1 && !plan.vShape();
        p2p(end && !wraps ? 1 : 2, plan.tp * plan.cp * plan.dp, plan.pp);
        // Megatron-LM's embedding group (the first and last stages all-reduce a tied embedding's gradient);
        // DeepSpeed's pipeline engine broadcasts the loss over its pipe group; torchtitan's gradient norm all-reduces
        // over its pipeline mesh dimension.
        const int ppStride = plan.tp * plan.cp * plan.dp;
        if (megatron && model.tiedEmbeddings && end) collective(true, 2, ppStride * (plan.pp - 1));
        if (f.name == "deepspeed" || !megatron) collective(true, plan.pp, ppStride);
    }
    // Megatron-style gradient norm (and DeepSpeed's fp16 overflow check) over the model-parallel group, tp x pp.
    // (tp ranks are adjacent; with pp > 1 the group spans the pipeline's stride)
    if (megatron) collective(true, plan.tp * plan.pp, plan.pp > 1 ? plan.cp * plan.dp : 1);

    out.bytes = out.bytesPerConnection * (static_cast<double>(channels) * out.connectionsPerChannel + out.p2pChannels);
    return out;
}

} // namespace tessel
