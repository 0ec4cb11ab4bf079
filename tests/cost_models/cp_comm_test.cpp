// Context parallelism's three exchanges (cp_comm_type p2p, a2a, allgather): kernels, collectives, memory, the ring's
// overlap and the plan checks (FORMULAS.md §3.2, §5, §6.1).
#include "test_support.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/traffic.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace tessel {
namespace {

using test::findOp;

using test::gqaModel;

Plan cpPlan(int cp, CpComm comm) {
    Plan p;
    p.cp = cp;
    p.dp = 8 / cp;
    p.globalBatch = p.dp;
    p.cpComm = comm;
    p.framework.name = "megatron";
    return p;
}

std::map<std::string, CommOp> cpOps(const ModelConfig& m, const ClusterConfig& c, const Plan& p) {
    std::map<std::string, CommOp> out;
    for (const CommOp& op : layerCommOps(m, c, p))
        if (op.group == GroupKind::Cp) out[op.name] = op;
    return out;
}

TEST(CpComm, A2aRunsOneCausalKernelOverTheWholeSequenceOnItsShareOfHeads) {
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const ModelConfig m = gqaModel();
    const PrecisionRecipe& r = *findPrecisionRecipe("megatron");
    const BlockCompute b = layerCompute(m, c, cpPlan(4, CpComm::A2a), r);
    const OpCost* att = findOp(b, "attention_core_flash_a2a");
    ASSERT_NE(att, nullptr);
    EXPECT_EQ(findOp(b, "attention_core_flash_ring"), nullptr);
    EXPECT_EQ(findOp(b, "attention_ring_merge"), nullptr);
    // 8192 queries and keys, causal, for 32 / 4 = 8 query heads and 8 / 4 = 2 key/value heads.
    EXPECT_TRUE(att->causal);
    EXPECT_EQ(att->m, 8192);
    EXPECT_EQ(att->n, 8192);
    EXPECT_EQ(att->batch, 8);
    EXPECT_EQ(att->kvHeads, 2);
    // The same FLOPs as the rank's causal share under the ring: 2 b (h/cp) s^2 d = 2 b h (s/cp) s d.
    EXPECT_DOUBLE_EQ(att->flops, kernel_cost::flashAttentionFlops(1, 32, 2048, 8192, 128));
    EXPECT_DOUBLE_EQ(att->flops, 2.0 * 8 * 8192.0 * 8192.0 * 128);
    // Two copies (read and written) of q, k, v and the output each way: 4 e (2 E_q + 2 E_kv), E = tokens x width.
    const OpCost* copies = findOp(b, "attention_a2a_copies");
    ASSERT_NE(copies, nullptr);
    const double eq = 2048.0 * 4096, ekv = 2048.0 * 1024;
    EXPECT_DOUBLE_EQ(copies->bytes, 4.0 * 2 * (2.0 * eq + 2.0 * ekv));
    EXPECT_DOUBLE_EQ(copies->backwardByteFactor, 1.0);
}

TEST(CpComm, AllGatherRunsOneKernelOverTheRanksQueriesAndEveryKey) {
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const ModelConfig m = gqaModel();
    const PrecisionRecipe& r = *findPrecisionRecipe("megatron");
    const BlockCompute b = layerCompute(m, c, cpPlan(4, CpComm::AllGather), r);
    const OpCost* att = findOp(b, "attention_core_flash");
    ASSERT_NE(att, nullptr);
    EXPECT_EQ(findOp(b, "attention_core_flash_ring"), nullptr);
    EXPECT_EQ(att->m, 2048);
    EXPECT_EQ(att->n, 8192);
    EXPECT_DOUBLE_EQ(att->flops, kernel_cost::flashAttentionFlops(1, 32, 2048, 8192, 128));
    // Forward: the local K, V made contiguous and the gathered ones reordered, read and written; backward the same
    // again and dK, dV zeroed at the full length.
    const OpCost* copies = findOp(b, "attention_kv_gather_copies");
    ASSERT_NE(copies, nullptr);
    const double ekv = 2048.0 * 1024, gathered = 4.0 * ekv;
    EXPECT_DOUBLE_EQ(copies->bytes, 2.0 * 2 * (2.0 * ekv + 2.0 * gathered));
    EXPECT_DOUBLE_EQ(copies->bytes * copies->backwardByteFactor, copies->bytes + 2.0 * 2.0 * gathered);
    // No ring: nothing for the overlap to hide under.
    EXPECT_EQ(b.ringStepsForwardSeconds, 0.0);
    EXPECT_EQ(b.ringDiagForwardSeconds, 0.0);
}

// a2a+p2p (Megatron-core's hierarchical CP): cp 8 as all-to-all groups of 4 and a ring of 2 across them. After the
// all-to-all a rank holds 8192 x 4 / 8 = 4096 queries of 8 heads (2 key/value heads), which run the ring of 2 steps.
TEST(CpComm, HierarchicalRunsTheRingAcrossTheAllToAllGroupsOnTheirHeads) {
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const ModelConfig m = gqaModel();
    Plan p = cpPlan(8, CpComm::A2aP2p);
    p.cpA2a = 4;
    EXPECT_EQ(p.cpHeadSplit(), 4);
    EXPECT_EQ(p.cpRing(), 2);
    const BlockCompute b = layerCompute(m, c, p, *findPrecisionRecipe("megatron"));
    const OpCost* diag = findOp(b, "attention_core_flash");
    const OpCost* ring = findOp(b, "attention_core_flash_ring");
    ASSERT_NE(diag, nullptr);
    ASSERT_NE(ring, nullptr);
    EXPECT_EQ(diag->m, 4096);
    EXPECT_EQ(diag->n, 4096);
    EXPECT_EQ(diag->batch, 8);
    EXPECT_EQ(diag->kvHeads, 2);
    EXPECT_EQ(ring->n, 2048);
    // The rank's causal share, as under any exchange.
    EXPECT_DOUBLE_EQ(diag->flops + ring->flops, kernel_cost::flashAttentionFlops(1, 32, 1024, 8192, 128));
    const OpCost* copies = findOp(b, "attention_a2a_copies");
    ASSERT_NE(copies, nullptr);
    EXPECT_DOUBLE_EQ(copies->bytes, 4.0 * 2 * (2.0 * 1024 * 4096 + 2.0 * 1024 * 1024));
    EXPECT_GT(b.ringStepsForwardSeconds, 0.0);
    // The all-to-alls over the 4 ranks of the first level, the ring's volume (K, V of 2 of 8 kv heads over the whole
    // sequence) over the 2 ranks of the second.
    const auto ops = cpOps(m, c, p);
    ASSERT_EQ(ops.size(), 11u);
    EXPECT_EQ(ops.at("cp_a2a_q").placement.size, 4);
    EXPECT_DOUBLE_EQ(ops.at("cp_a2a_q").bytes, 2.0 * 1024 * 4096);
    EXPECT_EQ(ops.at("cp_kv_exchange").placement.size, 2);
    EXPECT_DOUBLE_EQ(ops.at("cp_kv_exchange").bytes, 2.0 * 8192 * 2 * 1024 / 4);
    // The ring moves what the plain ring's step does: a times the tokens of 1/a of the heads.
    EXPECT_DOUBLE_EQ(ringStepBytes(m, p).kv, ringStepBytes(m, cpPlan(8, CpComm::P2p)).kv);
}

TEST(CpComm, HierarchicalLevelsAreChecked) {
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const ModelConfig m = gqaModel();
    auto where = [&](const Plan& p) {
        ProblemList problems;
        validatePlan(m, c, p, "/plan", problems);
        std::set<std::string> out;
        for (const Problem& pr : problems.items()) out.insert(pr.where);
        return out;
    };
    Plan p = cpPlan(8, CpComm::A2aP2p);
    p.dp = 1;
    p.globalBatch = 1;
    p.cpA2a = 4;
    EXPECT_TRUE(where(p).empty());
    for (int bad : {0, 1, 3, 8}) { // unset, a single rank, not a divisor, the whole group (no ring)
        p.cpA2a = bad;
        EXPECT_EQ(where(p), std::set<std::string>{"/plan/cp_a2a_size"}) << bad;
    }
    p.cpComm = CpComm::P2p; // only a2a+p2p has levels
    p.cpA2a = 4;
    EXPECT_EQ(where(p), std::set<std::string>{"/plan/cp_a2a_size"});
    ModelConfig few = m;
    few.kvHeads = 2; // 2 key/value heads cannot be split over 4 ranks
    p.cpComm = CpComm::A2aP2p;
    ProblemList problems;
    validatePlan(few, c, p, "/plan", problems);
    ASSERT_EQ(problems.items().size(), 1u);
    EXPECT_EQ(problems.items().front().where, "/plan/cp_comm_type");
    ProblemList read;
    const Plan parsed = parsePlan(planToJson(p), "/plan", read);
    EXPECT_TRUE(read.empty());
    EXPECT_EQ(parsed.cpComm, CpComm::A2aP2p);
    EXPECT_EQ(parsed.cpA2a, 4);
}

TEST(CpComm, EachExchangeMovesItsOwnTensors) {
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const ModelConfig m = gqaModel();
    // bf16, one sequence: a rank's q is 2048 x 4096 elements, its K or V 2048 x 1024; the whole K and V 8192 x 2048.
    const double q = 2.0 * 2048 * 4096, kv = 2.0 * 2048 * 1024, kvAll = 2.0 * 8192 * 2 * 1024;
    const auto a2a = cpOps(m, c, cpPlan(4, CpComm::A2a));
    ASSERT_EQ(a2a.size(), 8u);
    for (const char* name : {"cp_a2a_q", "cp_a2a_out", "cp_a2a_q_grad", "cp_a2a_out_grad"}) {
        ASSERT_TRUE(a2a.count(name)) << name;
        EXPECT_EQ(a2a.at(name).primitive, Primitive::AllToAll);
        EXPECT_DOUBLE_EQ(a2a.at(name).bytes, q) << name;
    }
    for (const char* name : {"cp_a2a_k", "cp_a2a_v", "cp_a2a_k_grad", "cp_a2a_v_grad"}) EXPECT_DOUBLE_EQ(a2a.at(name).bytes, kv) << name;
    // The ring and the gather move the same bytes: K and V whole forward and backward, their gradients reduce-scattered.
    for (CpComm comm : {CpComm::P2p, CpComm::AllGather}) {
        const auto ops = cpOps(m, c, cpPlan(4, comm));
        ASSERT_EQ(ops.size(), 3u);
        EXPECT_EQ(ops.at("cp_kv_exchange").primitive, Primitive::AllGather);
        EXPECT_EQ(ops.at("cp_kv_grad_reduce").primitive, Primitive::ReduceScatter);
        for (const auto& [name, op] : ops) EXPECT_DOUBLE_EQ(op.bytes, kvAll) << name;
    }
}

TEST(CpComm, TheRingIsHiddenUnderItsStepsUpToWhatOutlastsThem) {
    GpuSpec free; // no contention: what is hidden costs nothing
    free.commContention = 0.0;
    free.commContentionMax = 0.0;
    // cp 4: forward transfers under the diagonal (1 s) and two of three later steps (3 s together, 1 s each).
    const RingExposure hidden = ringExposure(1.0, 3.0, 2.5, 7.5, 4, 0.5, 0.5, free);
    EXPECT_DOUBLE_EQ(hidden.forwardSeconds, 0.0);
    // Backward: K, V under the diagonal, K, V and dK, dV (1 s) under the two middle steps (2.5 s each), dK, dV under
    // the last; the last dK, dV hop (0.5 s) is exposed.
    EXPECT_DOUBLE_EQ(hidden.backwardSeconds, 0.5);
    // A 2 s transfer outlasts each 1 s forward step by 1 s: 3 s in all. Backward: 2 s under the 2.5 s diagonal, 4 s
    // under each middle step (1.5 s out), 2 s under the last, and the 2 s hop: 2 x 1.5 + 2.
    const RingExposure slow = ringExposure(1.0, 3.0, 2.5, 7.5, 4, 2.0, 2.0, free);
    EXPECT_DOUBLE_EQ(slow.forwardSeconds, 3.0);
    EXPECT_DOUBLE_EQ(slow.backwardSeconds, 2.0 * 1.5 + 2.0);
    // With contention the hidden part costs kappa of its time, at most kappa_max of the compute it runs under.
    GpuSpec shared;
    shared.commContention = 0.5;
    shared.commContentionMax = 0.0;
    EXPECT_DOUBLE_EQ(ringExposure(1.0, 3.0, 2.5, 7.5, 4, 0.5, 0.5, shared).forwardSeconds, 0.5 * 3 * 0.5);
    shared.commContentionMax = 0.1;
    EXPECT_DOUBLE_EQ(ringExposure(1.0, 3.0, 2.5, 7.5, 4, 0.5, 0.5, shared).forwardSeconds, 0.1 * 3.0);
    // No ring, nothing.
    EXPECT_DOUBLE_EQ(ringExposure(1.0, 3.0, 2.5, 7.5, 1, 0.5, 0.5, shared).forwardSeconds, 0.0);
}

TEST(CpComm, PyTorchsRingCarriesRepeatedKAndVAndPassesFp32Gradients) {
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const ModelConfig m = gqaModel(); // 32 heads, 8 kv heads of 128, sequence 8192
    // Megatron-core (Transformer Engine): a step's K and V at the 8 kv heads, 2048 tokens, bf16; dK, dV the same.
    const Plan te = cpPlan(4, CpComm::P2p);
    EXPECT_DOUBLE_EQ(ringStepBytes(m, te).kv, 2.0 * 2048 * (1024 + 1024));
    EXPECT_DOUBLE_EQ(ringStepBytes(m, te).grads, ringStepBytes(m, te).kv);
    EXPECT_DOUBLE_EQ(cpOps(m, c, te).at("cp_kv_grad_reduce").bytes, 2.0 * 8192 * 2048);
    // torchtitan repeats K and V to the 32 query heads before SDPA (repeat_kv), so the ring carries 4x the bytes,
    // and PyTorch's ring passes dK, dV on in fp32 at each of its 4 steps: 4 B x 2048 tokens x 8192 columns a step,
    // which a reduce-scatter of 4/3 of the fp32 whole (8192 tokens) moves.
    Plan tt = te;
    tt.framework.name = "torchtitan";
    tt.framework.version = "2024-12"; // its Llama repeated K and V until pytorch/torchtitan#2259 (2026-01-27)
    EXPECT_DOUBLE_EQ(ringStepBytes(m, tt).kv, 2.0 * 2048 * (4096 + 4096));
    EXPECT_DOUBLE_EQ(ringStepBytes(m, tt).grads, 4.0 * 2048 * (4096 + 4096));
    const auto ops = cpOps(m, c, tt);
    EXPECT_DOUBLE_EQ(ops.at("cp_kv_exchange").bytes, 2.0 * 8192 * 8192);
    EXPECT_DOUBLE_EQ(ops.at("cp_kv_grad_reduce").bytes, 4.0 * 8192 * 8192 * 4.0 / 3.0);
    // What a reduce-scatter of that size moves per rank, (cp - 1) / cp of it, is the 4 sends of the rank's share.
    EXPECT_DOUBLE_EQ(0.75 * ops.at("cp_kv_grad_reduce").bytes, 4 * ringStepBytes(m, tt).grads);
    // torchtitan from 2026 passes enable_gqa (pytorch/torchtitan#2259): the ring at the kv heads, still fp32 dK, dV;
    // a plan that states repeat_kv decides either way.
    Plan gqa = tt;
    gqa.framework.version = "2026";
    EXPECT_DOUBLE_EQ(ringStepBytes(m, gqa).kv, 2.0 * 2048 * (1024 + 1024));
    EXPECT_DOUBLE_EQ(ringStepBytes(m, gqa).grads, 4.0 * 2048 * (1024 + 1024));
    gqa.framework.repeatKv = true;
    EXPECT_DOUBLE_EQ(ringStepBytes(m, gqa).kv, ringStepBytes(m, tt).kv);
    // Backward with dK, dV slower than K, V (x 0.5 s, y 2.5 s; steps of 2.5 s, no contention): K, V under the
    // diagonal, x + y = 3 s under each of the two middle steps (0.5 s out each), y under the last, y exposed after.
    GpuSpec free;
    free.commContention = 0.0;
    free.commContentionMax = 0.0;
    EXPECT_DOUBLE_EQ(ringExposure(1.0, 3.0, 2.5, 7.5, 4, 0.5, 2.5, free).backwardSeconds, 2 * 0.5 + 2.5);
    EXPECT_DOUBLE_EQ(ringExposure(1.0, 3.0, 2.5, 7.5, 4, 0.5, 2.5, free).forwardSeconds, 0.0);
}

TEST(CpComm, ARingStepCrossesNodesOnlyWhereTheGroupDoes) {
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const ModelConfig m = gqaModel();
    const Plan p = cpPlan(4, CpComm::P2p);
    const double bytes = 2.0 * 2048 * 2 * 1024; // one step's K and V
    GroupPlacement inNode;
    inNode.size = inNode.ranksPerNode = inNode.minRanksPerNode = 4;
    GroupPlacement overNodes;
    overNodes.size = 4;
    overNodes.nodes = 4;
    overNodes.ranksPerNode = overNodes.minRanksPerNode = 1;
    const double nvlink = ringStepTransferSeconds(ringStepBytes(m, p).kv, c, inNode), network = ringStepTransferSeconds(ringStepBytes(m, p).kv, c, overNodes);
    const double nvlinkRate = c.intraNode.bandwidthBytesPerSecond * c.intraNode.efficiencyFor(Primitive::SendRecv);
    const double networkRate = c.interNode.bandwidthBytesPerSecond * c.interNode.efficiencyFor(Primitive::SendRecv);
    // The bytes at each tier's rate, and a message's latency (microseconds) on top.
    EXPECT_GE(nvlink, bytes / nvlinkRate);
    EXPECT_LT(nvlink, bytes / nvlinkRate + 20e-6);
    EXPECT_GE(network, bytes / networkRate);
    EXPECT_LT(network, bytes / networkRate + 20e-6);
    EXPECT_GT(network, 3.0 * nvlink);
}

std::string wheres(const ProblemList& problems) {
    std::string out;
    for (const Problem& pr : problems.items()) out += pr.where + ": " + pr.message + "\n";
    return out;
}

TEST(CpComm, A2aNeedsEachRanksHeadsDivisibleByCp) {
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    ModelConfig m = gqaModel();
    Plan p = cpPlan(4, CpComm::A2a);
    p.tp = 2; // 16 query and 4 key/value heads a rank: cp 4 divides both (8 GPUs: tp 2 x cp 4)
    p.dp = 1;
    ProblemList ok;
    validatePlan(m, c, p, "/plan", ok);
    EXPECT_TRUE(ok.empty()) << wheres(ok);
    m.kvHeads = 4; // 2 key/value heads a rank now: a2a over 4 ranks cannot split them
    ProblemList refused;
    validatePlan(m, c, p, "/plan", refused);
    ASSERT_EQ(refused.items().size(), 1u) << wheres(refused);
    EXPECT_EQ(refused.items().front().where, "/plan/cp_comm_type");
    // The ring and the gather take any head count.
    for (CpComm comm : {CpComm::P2p, CpComm::AllGather}) {
        p.cpComm = comm;
        ProblemList other;
        validatePlan(m, c, p, "/plan", other);
        EXPECT_TRUE(other.empty()) << wheres(other);
    }
}

TEST(CpComm, PlanFilesReadAndWriteIt) {
    ProblemList problems;
    const Plan a2a = parsePlan(nlohmann::json{{"cp", 2}, {"cp_comm_type", "a2a"}}, "/plan", problems);
    const Plan gather = parsePlan(nlohmann::json{{"cp", 2}, {"cp_comm_type", "all_gather"}}, "/plan", problems); // TE's spelling
    const Plan ring = parsePlan(nlohmann::json{{"cp", 2}}, "/plan", problems);
    EXPECT_TRUE(problems.empty()) << wheres(problems);
    EXPECT_EQ(a2a.cpComm, CpComm::A2a);
    EXPECT_EQ(gather.cpComm, CpComm::AllGather);
    EXPECT_EQ(ring.cpComm, CpComm::P2p);
    EXPECT_EQ(planToJson(a2a).at("cp_comm_type"), "a2a");
    EXPECT_EQ(planToJson(gather).at("cp_comm_type"), "allgather");
    EXPECT_FALSE(planToJson(ring).contains("cp_comm_type")); // the default is not written
    ProblemList bad;
    parsePlan(nlohmann::json{{"cp", 2}, {"cp_comm_type", "ulysses"}}, "/plan", bad);
    EXPECT_NE(wheres(bad).find("/plan/cp_comm_type"), std::string::npos) << wheres(bad);
}

TEST(CpComm, MemoryHoldsEachExchangesBuffers) {
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const ModelConfig m = gqaModel();
    std::map<CpComm, double> buffers;
    for (CpComm comm : {CpComm::P2p, CpComm::A2a, CpComm::AllGather})
        buffers[comm] = predictMemory(m, c, cpPlan(4, comm)).stages.at(0).other.commBufferBytes;
    const double ekv = 2.0 * 2048 * 1024, eq = 2.0 * 2048 * 4096;
    // Over p2p: the next step's K and V twice over; a2a: the received q, k, v; allgather: K, V and dK, dV whole.
    EXPECT_DOUBLE_EQ(buffers[CpComm::A2a] - buffers[CpComm::P2p], (eq + 2.0 * ekv) - 2.0 * 2.0 * ekv);
    EXPECT_DOUBLE_EQ(buffers[CpComm::AllGather] - buffers[CpComm::P2p], 2.0 * 4 * 2.0 * ekv - 2.0 * 2.0 * ekv);
}

} // namespace
} // namespace tessel
