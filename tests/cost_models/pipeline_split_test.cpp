// Uneven pipeline splits: the balanced split against brute force, Megatron-LM's first/last-stage rule, explicit
// lists, validation with the field named, the plan JSON round trip, and memory per stage following the split.
#include "test_support.hpp"

#include "tessel/cost/memory.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>

namespace tessel {
namespace {

// The smallest possible largest per-rank load over every split of `layers` into pp ranks of >= vpp layers.
double bruteForceBestLoad(int layers, int pp, int vpp, double first, double last) {
    double best = 1e300;
    std::vector<int> n(static_cast<size_t>(pp), vpp);
    std::function<void(int, int)> rec = [&](int rank, int left) {
        if (rank == pp - 1) {
            n.back() = left;
            if (left < vpp) return;
            double worst = 0.0;
            for (int r = 0; r < pp; ++r) worst = std::max(worst, n[static_cast<size_t>(r)] + (r == 0 ? first : 0.0) + (r == pp - 1 ? last : 0.0));
            best = std::min(best, worst);
            return;
        }
        for (int k = vpp; k <= left - vpp * (pp - 1 - rank); ++k) {
            n[static_cast<size_t>(rank)] = k;
            rec(rank + 1, left - k);
        }
    };
    rec(0, layers);
    return best;
}

TEST(PipelineSplit, BalancedByHand) {
    // Llama 3 405B (Llama Team 2024, §3.3.2): one layer fewer on the first and the last of 16 stages.
    EXPECT_EQ(balancedPipelineLayers(126, 16, 1, 0.05, 0.7), (std::vector<int>{7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7}));
    // No extra work anywhere and an even count: the even split.
    EXPECT_EQ(balancedPipelineLayers(8, 4, 1, 0.0, 0.0), (std::vector<int>{2, 2, 2, 2}));
    // 10 layers over 2 ranks x 2 chunks with a heavy head: rank 0 takes 6, spread 3 + 3; rank 1 takes 4.
    EXPECT_EQ(balancedPipelineLayers(10, 2, 2, 0.0, 2.0), (std::vector<int>{3, 2, 3, 2}));
    // An odd rank total: the first rank's later chunk takes the remainder (its chunk 0 has the embedding).
    EXPECT_EQ(balancedPipelineLayers(9, 2, 2, 0.0, 1.0), (std::vector<int>{2, 2, 3, 2}));
}

// DualPipeV's V: rank 0 holds virtual stages 0 and 2 pp - 1, so both ends load it; its layers and parameters are
// the embedding's and the head's, and the last rank holds neither.
TEST(PipelineSplit, DualPipeVPutsBothEndsOnTheFirstRank) {
    // 10 layers, 2 ranks x 2 chunks, the head worth 2 layers: rank 0 (chunks 0 and 3) takes 4, rank 1 takes 6.
    EXPECT_EQ(balancedPipelineLayers(10, 2, 2, 0.0, 2.0, true), (std::vector<int>{2, 3, 3, 2}));
    ModelConfig model = test::megatronStyleModel(8, 1024, 16, 50000, 2048);
    Plan p;
    p.pp = 2;
    p.vpp = 2;
    p.dp = 1;
    p.globalBatch = 4;
    p.schedule = Schedule::DualPipeV;
    const StageParameters first = stageParameters(model, p, 0), last = stageParameters(model, p, 1);
    EXPECT_NEAR(first.dense - last.dense, embeddingParameters(model, p) + headParameters(model, p), 1e-6);
    // The same tensors as the interleaved layout holds, the head's moved from the last rank to the first.
    Plan interleaved = p;
    interleaved.schedule = Schedule::Interleaved1F1B;
    EXPECT_EQ(stageParameterTensors(model, p, 0) + stageParameterTensors(model, p, 1),
              stageParameterTensors(model, interleaved, 0) + stageParameterTensors(model, interleaved, 1));
    EXPECT_LT(stageParameterTensors(model, p, 1), stageParameterTensors(model, interleaved, 1));
    EXPECT_GT(stageParameterTensors(model, p, 0), stageParameterTensors(model, interleaved, 0));
}

TEST(PipelineSplit, FirstLastRanksUnderAnInterleavedScheduleByHand) {
    // Chunk-major (virtual stage c x pp + rank). 10 layers, pp 2, vpp 2, first rank 4, last 6: even chunks.
    EXPECT_EQ(firstLastChunkLayers(10, 2, 2, 4, 6), (std::vector<int>{2, 3, 2, 3}));
    // First rank 3 over 2 chunks: its chunk 0 (the embedding's) takes the missing layer; last rank 5: its last
    // chunk (the loss's) takes it.
    EXPECT_EQ(firstLastChunkLayers(8, 2, 2, 3, 5), (std::vector<int>{1, 3, 2, 2}));
    // Llama 3 405B: 7 + 8 x 14 + 7 over 16 ranks x 4 chunks: 1,2 x 62,1.
    const std::vector<int> meta = firstLastChunkLayers(126, 16, 4, 7, 7);
    ASSERT_EQ(meta.size(), 64u);
    EXPECT_EQ(meta.front(), 1);
    EXPECT_EQ(meta.back(), 1);
    EXPECT_EQ(std::count(meta.begin(), meta.end(), 2), 62);
    // Only the first rank stated: the others share the rest.
    EXPECT_EQ(firstLastChunkLayers(11, 3, 2, 3, 0), (std::vector<int>{1, 2, 2, 2, 2, 2}));
    // Impossible: the rest does not share evenly, a rank with fewer layers than chunks, or one rank.
    EXPECT_TRUE(firstLastChunkLayers(10, 3, 2, 3, 0).empty());
    EXPECT_TRUE(firstLastChunkLayers(9, 2, 4, 3, 6).empty());
    EXPECT_TRUE(firstLastChunkLayers(8, 1, 2, 3, 0).empty());
}

TEST(PipelineSplit, EndsAsLayersIsMegatronsAccounting) {
    // --account-for-embedding/loss-in-pipeline-split: L + 2 units over pp; BLOOM-176B (70 layers, pp 12) and
    // Llama 3 405B (126 layers, pp 16) as their authors split them.
    Plan p;
    p.pipelineSplit = PipelineSplit::EndsAsLayers;
    ModelConfig m = test::megatronStyleModel(70, 1024, 16, 50257, 1024);
    p.pp = 12;
    EXPECT_EQ(pipelineSplitText(m, p), "5,6x10,5");
    m.layers = 126;
    p.pp = 16;
    EXPECT_EQ(pipelineSplitText(m, p), "7,8x14,7");
    p.pp = 1;
    EXPECT_EQ(chunkLayerCounts(m, p), std::vector<int>{126});
    // 96 layers on 12: among the splits with the least largest load (9), the most even one.
    m.layers = 96;
    p.pp = 12;
    EXPECT_EQ(chunkLayerCounts(m, p), std::vector<int>(12, 8));
    // More virtual stages than layers, up to two more: the embedding and the loss take a stage each (Megatron-core's
    // (L + 2) / (pp vpp) = 1 a virtual stage, one fewer at either end: Megatron-Bridge's 405B on pp 16 x vpp 8).
    m.layers = 126;
    p.pp = 16;
    p.vpp = 8;
    p.schedule = Schedule::Interleaved1F1B;
    EXPECT_EQ(pipelineSplitText(m, p), "0,1x126,0");
    EXPECT_EQ(stageLayerCount(m, p, 0), 7);
    EXPECT_EQ(stageLayerCount(m, p, 15), 7);
    EXPECT_EQ(stageLayerCount(m, p, 7), 8);
    m.layers = 127; // one short of that: the embedding's stage takes it
    EXPECT_EQ(pipelineSplitText(m, p), "1x127,0");
    EXPECT_TRUE(endsOnlySplit(125, 16, 8).empty());
    EXPECT_TRUE(endsOnlySplit(128, 16, 8).empty()); // as many layers as stages: the balanced rule's
    EXPECT_TRUE(endsOnlySplit(2, 1, 4).empty());    // one rank holds both ends
}

TEST(PipelineSplit, BalancedIsTheBestPossibleLoadOnAGrid) {
    for (int pp = 1; pp <= 5; ++pp)
        for (int vpp = 1; vpp <= 2; ++vpp)
            for (int layers = pp * vpp; layers <= 14; ++layers)
                for (double first : {0.0, 0.3, 1.5})
                    for (double last : {0.0, 0.8, 2.6}) {
                        const std::vector<int> split = balancedPipelineLayers(layers, pp, vpp, first, last);
                        ASSERT_EQ(split.size(), static_cast<size_t>(pp * vpp));
                        EXPECT_EQ(std::accumulate(split.begin(), split.end(), 0), layers);
                        EXPECT_GE(*std::min_element(split.begin(), split.end()), 1);
                        double worst = 0.0;
                        for (int r = 0; r < pp; ++r) {
                            double load = (r == 0 ? first : 0.0) + (r == pp - 1 ? last : 0.0);
                            for (int c = 0; c < vpp; ++c) load += split[static_cast<size_t>(c * pp + r)];
                            worst = std::max(worst, load);
                        }
                        EXPECT_NEAR(worst, bruteForceBestLoad(layers, pp, vpp, first, last), 1e-12)
                            << layers << " layers, pp " << pp << ", vpp " << vpp << ", extras " << first << "/" << last;
                    }
}

TEST(PipelineSplit, MegatronFirstAndLastStageRule) {
    ModelConfig m = test::megatronStyleModel(30, 1024, 16, 50257, 1024);
    Plan p;
    p.pp = 4;
    p.firstStageLayers = 6;
    EXPECT_EQ(chunkLayerCounts(m, p), (std::vector<int>{6, 8, 8, 8}));
    p.lastStageLayers = 4;
    EXPECT_EQ(chunkLayerCounts(m, p), (std::vector<int>{6, 10, 10, 4}));
    // Interleaved: every rank divides its layers over its chunks (virtual stage u = chunk x pp + stage).
    p.vpp = 2;
    EXPECT_EQ(chunkLayerCounts(m, p), (std::vector<int>{3, 5, 5, 2, 3, 5, 5, 2}));
    EXPECT_EQ(stageLayerCount(m, p, 0), 6);
    EXPECT_EQ(chunkLayerCount(m, p, 1, 1), 5);
    EXPECT_EQ(pipelineSplitText(m, p), "3,5x2,2,3,5x2,2");
}

Plan checked(const ModelConfig& m, const Plan& p, std::vector<std::string>& where) {
    ProblemList problems;
    validatePlan(m, test::roundCluster(8, 1), p, "/plan", problems);
    where.clear();
    for (const auto& pr : problems.items()) where.push_back(pr.where);
    return p;
}

TEST(PipelineSplit, ProblemsNameTheField) {
    ModelConfig m = test::megatronStyleModel(30, 1024, 16, 50257, 1024);
    Plan p;
    p.pp = 4;
    p.dp = 2;
    p.globalBatch = 8;
    std::vector<std::string> where;
    checked(m, p, where);
    EXPECT_EQ(where, std::vector<std::string>{"/plan/pp"}); // 30 % 4: even split impossible
    p.pipelineSplit = PipelineSplit::Balanced;
    checked(m, p, where);
    EXPECT_TRUE(where.empty());
    p.pipelineSplit = PipelineSplit::Even;
    p.pipelineLayers = {8, 8, 8};
    checked(m, p, where);
    EXPECT_EQ(where, std::vector<std::string>{"/plan/pipeline_layers"}); // 3 entries for 4 stages
    p.pipelineLayers = {8, 8, 8, 8};
    checked(m, p, where);
    EXPECT_EQ(where, std::vector<std::string>{"/plan/pipeline_layers"}); // sums to 32
    p.pipelineLayers = {6, 8, 8, 8};
    checked(m, p, where);
    EXPECT_TRUE(where.empty());
    p.pipelineSplit = PipelineSplit::Balanced;
    checked(m, p, where);
    EXPECT_EQ(where, std::vector<std::string>{"/plan/pipeline_split"}); // two ways at once
    p.pipelineSplit = PipelineSplit::Even;
    p.pipelineLayers.clear();
    p.firstStageLayers = 5; // 25 left over 3 ranks
    checked(m, p, where);
    EXPECT_EQ(where, std::vector<std::string>{"/plan/first_stage_layers"});
    p.vpp = 2;
    p.schedule = Schedule::Interleaved1F1B;
    p.firstStageLayers = 5;
    p.lastStageLayers = 5; // neither a multiple of vpp; the 20 left share evenly
    checked(m, p, where);
    EXPECT_EQ(where, (std::vector<std::string>{"/plan/first_stage_layers", "/plan/last_stage_layers"}));
    // A virtual stage of no layer: only at either end, where the embedding or the output layer is.
    p.firstStageLayers = p.lastStageLayers = 0;
    p.pipelineLayers = {0, 4, 4, 4, 4, 4, 4, 6};
    checked(m, p, where);
    EXPECT_TRUE(where.empty());
    p.pipelineLayers = {0, 4, 4, 4, 0, 4, 4, 10};
    checked(m, p, where);
    EXPECT_EQ(where, std::vector<std::string>{"/plan/pipeline_layers/4"});
    // ends_as_layers down to layers + 2 = pp x vpp; below that the vpp is named, with the way out.
    p.pipelineLayers.clear();
    p.pipelineSplit = PipelineSplit::EndsAsLayers;
    p.vpp = 8; // 32 virtual stages for 30 layers
    checked(m, p, where);
    EXPECT_TRUE(where.empty());
    EXPECT_EQ(pipelineSplitText(m, p), "0,1x30,0");
    p.vpp = 9; // 36
    checked(m, p, where);
    EXPECT_EQ(where, std::vector<std::string>{"/plan/vpp"});
    // Under a V schedule rank 0 holds both ends, and would hold no layer (6 layers on pp 4 x 2 chunks).
    m.layers = 6;
    p.vpp = 2;
    p.globalBatch = 16;
    p.schedule = Schedule::DualPipeV;
    checked(m, p, where);
    EXPECT_EQ(where, std::vector<std::string>{"/plan/pipeline_split"});
}

TEST(PipelineSplit, JsonRoundTripAndBadValues) {
    ProblemList problems;
    Plan p = parsePlan(nlohmann::json{{"pp", 4}, {"pipeline_layers", {7, 8, 8, 7}}}, "/plan", problems);
    EXPECT_TRUE(problems.empty());
    EXPECT_EQ(parsePlan(planToJson(p), "/plan", problems).pipelineLayers, p.pipelineLayers);
    p = parsePlan(nlohmann::json{{"pp", 4}, {"pipeline_split", "balanced"}, {"first_stage_layers", 3}}, "/plan", problems);
    const Plan back = parsePlan(planToJson(p), "/plan", problems);
    EXPECT_EQ(back.pipelineSplit, PipelineSplit::Balanced);
    EXPECT_EQ(back.firstStageLayers, 3);
    EXPECT_TRUE(problems.empty());
    // 0 at either end reads (the embedding or the output layer alone); in between it does not.
    EXPECT_EQ(parsePlan(nlohmann::json{{"pp", 3}, {"pipeline_layers", {0, 8, 0}}}, "/plan", problems).pipelineLayers,
              (std::vector<int>{0, 8, 0}));
    EXPECT_TRUE(problems.empty());
    parsePlan(nlohmann::json{{"pipeline_layers", {7, 0, "x"}}, {"pipeline_split", "lumpy"}}, "/plan", problems);
    std::vector<std::string> where;
    for (const auto& pr : problems.items()) where.push_back(pr.where);
    EXPECT_EQ(where, (std::vector<std::string>{"/plan/pipeline_layers/1", "/plan/pipeline_layers/2", "/plan/pipeline_split"}));
}

TEST(PipelineSplit, MemoryFollowsTheLayersOfEachStage) {
    ModelConfig m = test::megatronStyleModel(30, 1024, 16, 50257, 1024);
    const ClusterConfig c = test::roundCluster(8, 1);
    Plan p;
    p.pp = 4;
    p.dp = 2;
    p.globalBatch = 8;
    p.pipelineLayers = {6, 8, 8, 8};
    const MemoryReport mem = predictMemory(m, c, p);
    const StageParameters layer = layerParameters(m, p);
    EXPECT_EQ(mem.stages[0].layers, 6);
    EXPECT_EQ(mem.stages[1].layers, 8);
    // Stages 1 and 2 differ only by one micro-batch in flight: their parameters are the same 8 layers.
    EXPECT_DOUBLE_EQ(mem.stages[1].parameters, mem.stages[2].parameters);
    EXPECT_NEAR(mem.stages[1].parameters, 8 * layer.total(), 1e-6);
    EXPECT_NEAR(mem.stages[0].parameters, 6 * layer.total() + embeddingParameters(m, p), 1e-6);
    // An explicit list equal to the even split predicts exactly the even plan.
    Plan even = p;
    even.pipelineLayers.clear();
    m.layers = 32;
    Plan listed = even;
    listed.pipelineLayers = {8, 8, 8, 8};
    const MemoryReport a = predictMemory(m, c, even), b = predictMemory(m, c, listed);
    for (int s = 0; s < 4; ++s) EXPECT_DOUBLE_EQ(a.stages[static_cast<size_t>(s)].totalBytes(), b.stages[static_cast<size_t>(s)].totalBytes());
}

} // namespace
} // namespace tessel
