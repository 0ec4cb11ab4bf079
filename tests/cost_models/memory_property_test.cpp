// Property tests of the memory model over grids of models and plans: sums, monotonicity in ZeRO and TP.
#include "test_support.hpp"

#include "tessel/cost/memory.hpp"

#include <gtest/gtest.h>

namespace tessel {
namespace {

struct Case {
    ModelConfig model;
    ClusterConfig cluster;
    Plan plan;
};

ClusterConfig clusterFor(int world) {
    ClusterConfig c = test::roundCluster(world >= 8 ? 8 : world, world >= 8 ? world / 8 : 1);
    return c;
}

// Every valid plan over a grid of degrees, ZeRO stages, recompute modes, SP and schedules.
std::vector<Case> grid() {
    std::vector<Case> cases;
    std::vector<ModelConfig> models;
    for (const char* name : {"gpt3-1.3b", "llama3-8b", "mixtral-8x7b", "tiny"}) models.push_back(test::preset(name));
    // Llama 3 8B with DeepSeek-V2's latent attention in place of its GQA, so the grid covers MLA's shapes.
    ModelConfig latent = test::preset("llama3-8b");
    latent.kvHeads = latent.heads;
    latent.mla = MlaConfig{1536, 512, 128, 64, 128};
    latent.headDim = 192;
    models.push_back(latent);
    for (const ModelConfig& m : models) {
        for (int tp : {1, 2, 4, 8})
            for (int pp : {1, 2, 4})
                for (int dp : {1, 2, 8})
                    for (int zero : {0, 1, 2, 3})
                        for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full})
                            for (Schedule sch : {Schedule::OneFOneB, Schedule::Gpipe, Schedule::Interleaved1F1B}) {
                                Plan p;
                                p.tp = tp;
                                p.pp = pp;
                                p.dp = dp;
                                p.ep = m.moe && dp % 2 == 0 ? 2 : 1;
                                p.zeroStage = zero;
                                p.recompute = rc;
                                p.schedule = sch;
                                p.vpp = sch == Schedule::Interleaved1F1B ? 2 : 1;
                                p.sequenceParallel = tp > 1;
                                p.microBatch = 1;
                                p.globalBatch = dp * 8;
                                ClusterConfig c = clusterFor(tp * pp * dp);
                                ProblemList problems;
                                validatePlan(m, c, p, "/plan", problems);
                                if (problems.empty()) cases.push_back({m, c, p});
                            }
    }
    return cases;
}

const std::vector<Case>& cases() {
    static const std::vector<Case> c = grid();
    return c;
}

TEST(MemoryProperties, GridIsLargeEnoughToMeanSomething) { EXPECT_GT(cases().size(), 1000u); }

TEST(MemoryProperties, ComponentsSumToTotalAndPeakIsTheLargestStage) {
    for (const auto& k : cases()) {
        auto mem = predictMemory(k.model, k.cluster, k.plan);
        ASSERT_EQ(static_cast<int>(mem.stages.size()), k.plan.pp);
        double peak = 0.0;
        for (const auto& st : mem.stages) {
            const double sum = st.weightsBytes + st.gradsBytes + st.optimizerBytes + st.activationsBytes +
                               st.other.zero3GatherBytes + st.other.commBufferBytes + st.other.logitsLossBytes +
                               st.other.backwardWorkingBytes + st.other.reservedBytes;
            ASSERT_NEAR(sum, st.totalBytes(), 1e-6 * sum);
            ASSERT_GT(st.weightsBytes, 0.0);
            ASSERT_GT(st.activationsBytes, 0.0);
            ASSERT_EQ(st.fits, st.totalBytes() <= mem.capacityBytes);
            peak = std::max(peak, st.totalBytes());
        }
        ASSERT_DOUBLE_EQ(mem.peakBytes, peak);
        ASSERT_EQ(mem.fits, peak <= mem.capacityBytes);
    }
}

TEST(MemoryProperties, MoreZeroNeverNeedsMoreModelState) {
    // Weights + grads + optimizer never grow with the ZeRO stage; the total may only grow by the ZeRO-3
    // gather buffers and ZeRO-2/3 reduce buckets, which are bounded by two layers plus one bucket.
    for (const auto& k : cases()) {
        if (k.plan.zeroStage != 0) continue;
        double prevState = 1e300, prevTotal = 1e300;
        for (int z = 0; z <= 3; ++z) {
            Plan p = k.plan;
            p.zeroStage = z;
            auto mem = predictMemory(k.model, k.cluster, p);
            const auto& st = mem.stages[0];
            const double state = st.weightsBytes + st.gradsBytes + st.optimizerBytes;
            ASSERT_LE(state, prevState * (1 + 1e-12)) << "zero " << z;
            if (k.plan.dp > 1 && z < 2) ASSERT_LE(st.totalBytes(), prevTotal * (1 + 1e-12)) << "zero " << z;
            prevState = state;
            prevTotal = st.totalBytes();
        }
    }
}

TEST(MemoryProperties, MoreTensorParallelismNeverNeedsMoreWeightMemory) {
    for (const auto& k : cases()) {
        if (k.plan.tp != 1) continue;
        double prev = 1e300;
        for (int tp : {1, 2, 4, 8}) {
            Plan p = k.plan;
            p.tp = tp;
            p.sequenceParallel = tp > 1;
            ProblemList problems;
            ClusterConfig c = clusterFor(p.worldSize());
            validatePlan(k.model, c, p, "/plan", problems);
            if (!problems.empty()) continue;
            auto mem = predictMemory(k.model, c, p);
            for (const auto& st : mem.stages) ASSERT_LE(st.weightsBytes, prev * (1 + 1e-12));
            double maxW = 0.0;
            for (const auto& st : mem.stages) maxW = std::max(maxW, st.weightsBytes);
            prev = maxW;
        }
    }
}

TEST(MemoryProperties, RecomputeNeverNeedsMoreActivations) {
    for (const auto& k : cases()) {
        if (k.plan.recompute != Recompute::None) continue;
        double prev = 1e300;
        for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
            Plan p = k.plan;
            p.recompute = rc;
            const double act = predictMemory(k.model, k.cluster, p).stages[0].activationsBytes;
            ASSERT_LE(act, prev * (1 + 1e-12)) << toString(rc);
            prev = act;
        }
    }
}

TEST(MemoryProperties, SequenceParallelNeverNeedsMoreActivations) {
    for (const auto& k : cases()) {
        if (k.plan.tp == 1 || !k.plan.sequenceParallel) continue;
        Plan off = k.plan;
        off.sequenceParallel = false;
        ASSERT_LE(layerActivationBytes(k.model, k.plan, *findPrecisionRecipe(k.plan.precision)),
                  layerActivationBytes(k.model, off, *findPrecisionRecipe(k.plan.precision)));
    }
}

TEST(MemoryProperties, GpipeHoldsAtLeastAsManyMicroBatchesAs1F1B) {
    for (const auto& k : cases()) {
        if (k.plan.schedule != Schedule::OneFOneB) continue;
        Plan g = k.plan;
        g.schedule = Schedule::Gpipe;
        for (int s = 0; s < k.plan.pp; ++s) ASSERT_GE(inFlightMicroBatches(g, s), inFlightMicroBatches(k.plan, s));
    }
}

} // namespace
} // namespace tessel
