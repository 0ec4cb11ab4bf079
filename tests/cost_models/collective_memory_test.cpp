// NCCL's own device buffers per rank (FORMULAS.md §2, "The collective library's buffers"): hand counts of the
// communicators a plan uses, the measured figure the formula is checked against, and where the term is counted.
#include "test_support.hpp"

#include "tessel/cost/memory.hpp"

#include <gtest/gtest.h>

#include <string>

namespace tessel {
namespace {
using namespace test;

constexpr double kConnection = 4194304.0 + 4915200.0 + 524288.0; // Simple + LL128 + LL FIFOs: 9,633,792 B
constexpr double kCuMemConnection = 12.0 * 1048576.0;

TEST(CollectiveLibrary, OneFourRankGroupOnA100sIsTheMeasuredSixHundredMegabytes) {
    // NVIDIA/nccl#964: 4 A100 with NVLink, PyTorch 2.0 (NCCL 2.14, 2023), an all-reduce on each new group of more
    // than two ranks added 688 MiB (nvidia-smi). One communicator, its rings and trees connected at init:
    // 24 channels x 3 connections x 9.19 MiB = 693.6 MB.
    ClusterConfig c = clusterPreset("dgx-a100-80g");
    c.gpusPerNode = 4;
    c.nodes = 1;
    const Plan p = plan3d(1, 1, 4, 1, 4, "fsdp", "2023");
    const CollectiveLibraryMemory m = collectiveLibraryMemory(preset("llama2-7b"), p, c, 0);
    EXPECT_EQ(m.collectives, 1);
    EXPECT_EQ(m.connectionsPerChannel, 3);
    EXPECT_EQ(m.p2pConnections, 0);
    EXPECT_DOUBLE_EQ(m.bytes, 24.0 * 3.0 * kConnection);
    EXPECT_NEAR(m.bytes / (688.0 * 1048576.0), 1.0, 0.05);
    // A group of two: the ring and a one-link tree, 24 x 2 x 9.19 MiB = 462 MB against 544 MiB measured (-19%).
    c.gpusPerNode = 2;
    const CollectiveLibraryMemory two = collectiveLibraryMemory(preset("llama2-7b"), plan3d(1, 1, 2, 1, 2, "fsdp", "2023"), c, 0);
    EXPECT_EQ(two.connectionsPerChannel, 2);
    EXPECT_NEAR(two.bytes / (544.0 * 1048576.0), 0.81, 0.01);
}

TEST(CollectiveLibrary, BigSciencesThreeDPlanHoldsSixCommunicatorsOnItsEnds) {
    // Megatron-DeepSpeed of 2022 (NCCL before cuMem, every ring and tree connected at init), tp 8 x pp 12 x dp 4,
    // ZeRO-1, tied embeddings: the world, tp, the data-parallel group, DeepSpeed's pipe group (the loss's
    // broadcast), the model-parallel group (gradient norm, overflow check); the first and last stages also the
    // embedding group. Point to point: the pipeline's neighbours across nodes, 2 channels a peer.
    ModelConfig model = megatronStyleModel(72, 14336, 64, 250880, 2048);
    const ClusterConfig c = clusterPreset("dgx-a100-80g");
    Plan p = plan3d(8, 12, 4, 2, 2048, "deepspeed", "2022");
    p.zeroStage = 1;
    const CollectiveLibraryMemory first = collectiveLibraryMemory(model, p, c, 0);
    const CollectiveLibraryMemory middle = collectiveLibraryMemory(model, p, c, 5);
    EXPECT_EQ(first.collectives, 6);
    EXPECT_EQ(middle.collectives, 5);
    EXPECT_EQ(first.p2pConnections, 1);
    EXPECT_EQ(middle.p2pConnections, 2);
    EXPECT_EQ(middle.p2pChannels, 2); // across nodes the peers share one buffer set a channel
    // The embedding group has two ranks: its tree is one link, 2 connections a channel.
    EXPECT_EQ(first.connectionsPerChannel, 5 * 3 + 2);
    EXPECT_DOUBLE_EQ(first.bytes, kConnection * (24.0 * (5 * 3 + 2) + 2.0));
    EXPECT_DOUBLE_EQ(middle.bytes, kConnection * (24.0 * 5 * 3 + 2.0));
    // Untied embeddings: no embedding group.
    model.tiedEmbeddings = false;
    EXPECT_EQ(collectiveLibraryMemory(model, p, c, 0).collectives, 5);
}

TEST(CollectiveLibrary, TodaysNcclConnectsOnlyTheAlgorithmsAGroupRuns) {
    // A year not stated is today's NCCL: cuMem's 12 MiB a connection, and a group holds the algorithms it runs: its
    // ring, and its trees only where it all-reduces across nodes (tp 8 inside a node does not; the data-parallel
    // group, across nodes, only reduce-scatters and gathers under ZeRO); the barrier's world group one algorithm.
    const ClusterConfig c = clusterPreset("dgx-h100-80g");
    Plan p = plan3d(8, 1, 4, 1, 64, "megatron");
    p.zeroStage = 1;
    const CollectiveLibraryMemory now = collectiveLibraryMemory(preset("llama2-7b"), p, c, 0);
    // world (1) + tp all-reduce in the node (1) + the distributed optimizer's group (1) + model-parallel norm, the
    // tp ranks again (1)
    EXPECT_EQ(now.collectives, 4);
    EXPECT_EQ(now.connectionsPerChannel, 4);
    EXPECT_DOUBLE_EQ(now.bytesPerConnection, kCuMemConnection);
    EXPECT_DOUBLE_EQ(now.bytes, kCuMemConnection * 32.0 * 4.0);
    // Without ZeRO the data-parallel group all-reduces across nodes: its trees too.
    p.zeroStage = 0;
    EXPECT_EQ(collectiveLibraryMemory(preset("llama2-7b"), p, c, 0).connectionsPerChannel, 6);
    p.zeroStage = 1;
    p.framework.version = "2024"; // cuMem, every ring and tree at init
    const CollectiveLibraryMemory then = collectiveLibraryMemory(preset("llama2-7b"), p, c, 0);
    EXPECT_EQ(then.connectionsPerChannel, 4 * 3);
    EXPECT_GT(then.bytes, now.bytes);
}

TEST(CollectiveLibrary, AnExpertAllToAllInsideANodeConnectsEveryPeer) {
    // NVIDIA/nccl#1685: one all-to-all over 8 H100 of a node took 3.28 GB beyond PyTorch's memory, 32 channels to
    // each peer, allocations of 10 MiB and 2 MiB: 7 peers x 32 x 12 MiB = 2.82 GB of it is the connections.
    const ClusterConfig c = clusterPreset("dgx-h100-80g");
    ModelConfig model = preset("mixtral-8x7b");
    Plan p = plan3d(1, 1, 8, 1, 8, "megatron", "2025");
    p.ep = 8;
    const CollectiveLibraryMemory m = collectiveLibraryMemory(model, p, c, 0);
    EXPECT_EQ(m.p2pConnections, 7);
    EXPECT_EQ(m.p2pChannels, 7 * 32);
    const double allToAll = m.p2pChannels * m.bytesPerConnection;
    EXPECT_DOUBLE_EQ(m.bytesPerConnection, kCuMemConnection);
    EXPECT_NEAR(allToAll / 3.28e9, 0.86, 0.01);
    EXPECT_GT(m.bytes, allToAll);
}

TEST(CollectiveLibrary, NothingWhereOneRankRunsAloneOrTheGpuStatesNoChannels) {
    ClusterConfig c = clusterPreset("dgx-a100-80g");
    EXPECT_EQ(collectiveLibraryMemory(preset("llama2-7b"), plan3d(1, 1, 1, 1, 1), c, 0).bytes, 0.0);
    c.gpu.ncclCollChannels = 0;
    EXPECT_EQ(collectiveLibraryMemory(preset("llama2-7b"), plan3d(8, 2, 4, 1, 64), c, 0).bytes, 0.0);
}

TEST(CollectiveLibrary, CountsInTheDevicesTotalAndItsVerdict) {
    // The buffers are device memory: the stage's total and its headroom carry them, by the stage's own count.
    const ModelConfig model = preset("llama2-7b");
    ClusterConfig with = clusterPreset("dgx-a100-80g");
    with.nodes = 4;
    ClusterConfig without = with;
    without.gpu.ncclCollChannels = 0;
    Plan p = plan3d(4, 4, 2, 1, 64, "megatron", "2023");
    const MemoryReport a = predictMemory(model, with, p);
    const MemoryReport b = predictMemory(model, without, p);
    ASSERT_EQ(a.stages.size(), b.stages.size());
    for (size_t s = 0; s < a.stages.size(); ++s) {
        const double library = collectiveLibraryMemory(model, p, with, static_cast<int>(s)).bytes;
        EXPECT_GT(library, 0.0);
        EXPECT_DOUBLE_EQ(a.stages[s].other.collectiveLibraryBytes, library);
        EXPECT_NEAR(a.stages[s].totalBytes() - b.stages[s].totalBytes(), library, 1.0);
        EXPECT_NEAR(b.stages[s].headroomBytes - a.stages[s].headroomBytes, library, 1.0);
    }
}

TEST(CollectiveLibrary, EveryPlanOfAGridHoldsAFiniteSumOfItsConnections) {
    // Property over plans of every framework and NCCL generation: each communicator holds one to three connections
    // a channel, at least the world's is there, the whole stays under 8 GiB, and a tensor-parallel group only adds to
    // what the same plan holds without one.
    const ModelConfig model = preset("llama2-7b");
    int checked = 0;
    for (const std::string cluster : {"dgx-a100-80g", "dgx-h100-80g"}) {
        ClusterConfig c = clusterPreset(cluster);
        c.nodes = 64;
        for (const std::string fw : {"megatron", "nemo", "deepspeed", "fsdp", "torchtitan", "generic"})
            for (const std::string version : {"2022", "2024", "2025", ""})
                for (int tp : {1, 2, 8})
                    for (int pp : {1, 2, 4})
                        for (int dp : {1, 4, 16})
                            for (int zero : {0, 1, 3}) {
                                Plan p = plan3d(tp, pp, dp, 1, 64, fw, version);
                                p.zeroStage = zero;
                                Plan noTp = p;
                                noTp.tp = 1;
                                for (int stage = 0; stage < pp; ++stage) {
                                    const CollectiveLibraryMemory m = collectiveLibraryMemory(model, p, c, stage);
                                    if (p.worldSize() == 1) {
                                        EXPECT_EQ(m.bytes, 0.0);
                                        continue;
                                    }
                                    ASSERT_GE(m.collectives, 1);
                                    ASSERT_GE(m.connectionsPerChannel, m.collectives);
                                    ASSERT_LE(m.connectionsPerChannel, 3 * m.collectives);
                                    ASSERT_LT(m.bytes, 8.0 * 1073741824.0) << fw << " " << planToJson(p).dump();
                                    if (noTp.worldSize() > 1)
                                        ASSERT_GE(m.bytes, collectiveLibraryMemory(model, noTp, c, stage).bytes) << planToJson(p).dump();
                                    ++checked;
                                }
                            }
    }
    EXPECT_GT(checked, 2000);
}

TEST(CollectiveLibrary, APresetsChannelCountIsReadAndWritten) {
    const ClusterConfig c = clusterPreset("dgx-h100-80g");
    EXPECT_EQ(c.gpu.ncclCollChannels, 32);
    EXPECT_EQ(parseCluster(clusterToJson(c)).gpu.ncclCollChannels, 32);
    nlohmann::json bad = clusterToJson(c);
    bad["gpu"]["nccl_channels"] = 65;
    EXPECT_NE(inputErrorOf([&] { parseCluster(bad); }).find("/gpu/nccl_channels"), std::string::npos);
}

} // namespace
} // namespace tessel
