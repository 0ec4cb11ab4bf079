// The equivalence grid: a tiny model trained for a few steps on N ranks gives the same losses and updated
// parameters as on one rank (float64, relative difference under 1e-10), plan by plan.
#include "executor_support.hpp"

#include "tessel/exec/gpt.hpp"
#include "tessel/exec/run_output.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace tessel::exec {
namespace {

using test::basePlan;
using test::expectGradientsMatchFiniteDifferences;
using test::expectMatchesOneRank;
using test::tinyModel;
using test::tinyMoeModel;

struct Case {
    std::string name;
    Plan plan;
    bool swiglu = false;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> grid() {
    std::vector<Case> cases;
    auto add = [&](std::string name, auto edit, bool swiglu = false) {
        Plan p = basePlan();
        edit(p);
        cases.push_back({std::move(name), p, swiglu});
    };
    add("tp2", [](Plan& p) { p.tp = 2; });
    add("tp2_sp", [](Plan& p) { p.tp = 2; p.sequenceParallel = true; });
    add("tp2_swiglu_rope", [](Plan& p) { p.tp = 2; }, true);
    // A parallel block: each block's own reduction (Megatron-core's layers), or one of their summed outputs
    // (GPT-NeoX, framework deepspeed with pp > 1), with and without SP, and replayed under full recompute.
    add("tp2_parallel", [](Plan& p) { p.tp = 2; });
    add("tp2_sp_parallel", [](Plan& p) { p.tp = 2; p.sequenceParallel = true; });
    add("tp2_pp2_parallel_once", [](Plan& p) { p.tp = 2; p.pp = 2; p.framework.name = "deepspeed"; });
    add("tp2_pp2_sp_swiglu_parallel_once", [](Plan& p) {
        p.tp = 2;
        p.pp = 2;
        p.sequenceParallel = true;
        p.framework.name = "deepspeed";
    }, true);
    add("tp2_pp2_sp_parallel_once_recompute", [](Plan& p) {
        p.tp = 2;
        p.pp = 2;
        p.sequenceParallel = true;
        p.framework.name = "deepspeed";
        p.recompute = Recompute::Full;
    });
    add("pp2_dp2_zero3_parallel", [](Plan& p) { p.pp = 2; p.dp = 2; p.zeroStage = 3; });
    // Gemma's norms after each block and scaled embedding, BLOOM's norm over the embedding: over TP (with SP), CP,
    // pipeline stages (interleaved, the embedding's own bucket) and ZeRO-3's units, and replayed under full recompute.
    add("tp2_postnorms", [](Plan& p) { p.tp = 2; });
    add("tp2_sp_swiglu_postnorms_embscale", [](Plan& p) { p.tp = 2; p.sequenceParallel = true; }, true);
    add("cp2_postnorms_embnorm", [](Plan& p) { p.cp = 2; });
    add("tp2_sp_embnorm_recompute", [](Plan& p) { p.tp = 2; p.sequenceParallel = true; p.recompute = Recompute::Full; });
    add("pp2_interleaved_vpp2_postnorms_embscale", [](Plan& p) { p.pp = 2; p.vpp = 2; p.schedule = Schedule::Interleaved1F1B; });
    add("pp2_dp2_zero1_embnorm_embscale_tied", [](Plan& p) { p.pp = 2; p.dp = 2; p.zeroStage = 1; });
    add("dp2_zero3_embnorm_postnorms", [](Plan& p) { p.dp = 2; p.zeroStage = 3; });
    // Gemma's MLP (GeGLU) with its post-norms and scaled embedding, over TP with SP and over pipeline stages.
    add("tp2_sp_geglu_postnorms_embscale", [](Plan& p) { p.tp = 2; p.sequenceParallel = true; }, true);
    add("pp2_dp2_zero1_geglu", [](Plan& p) { p.pp = 2; p.dp = 2; p.zeroStage = 1; }, true);
    // q and k normalised per head (Qwen3, Gemma 3): the norms' gradients summed over the TP ranks' heads, with and
    // without SP, with rotary (SwiGLU model) and without, over CP's gathered keys and pipeline stages, recomputed.
    add("tp2_qknorm", [](Plan& p) { p.tp = 2; });
    // Gemma 2's soft-capping of the scores and the vocabulary-parallel logits, over TP, CP's gathered keys and stages.
    add("tp2_softcap", [](Plan& p) { p.tp = 2; });
    add("cp2_swiglu_softcap_postnorms", [](Plan& p) { p.cp = 2; }, true);
    add("pp2_tp2_sp_softcap_recompute", [](Plan& p) { p.pp = 2; p.tp = 2; p.sequenceParallel = true; p.recompute = Recompute::Full; });
    add("tp2_sp_swiglu_qknorm", [](Plan& p) { p.tp = 2; p.sequenceParallel = true; }, true);
    add("cp2_swiglu_qknorm", [](Plan& p) { p.cp = 2; }, true);
    add("pp2_dp2_zero3_qknorm_recompute", [](Plan& p) { p.pp = 2; p.dp = 2; p.zeroStage = 3; p.recompute = Recompute::Full; });
    // ALiBi's biases (BLOOM, MPT; each TP rank's heads take their own slopes) and a sliding window (Mistral; Gemma 2's
    // with full-attention layers between), over TP with SP, CP's gathered keys (the all-gather exchange, which runs
    // windows), pipeline stages with ZeRO-3, and replayed under full recompute.
    add("tp2_alibi", [](Plan& p) { p.tp = 2; });
    add("tp2_sp_swiglu_alibi_window_recompute", [](Plan& p) {
        p.tp = 2;
        p.sequenceParallel = true;
        p.recompute = Recompute::Full;
    }, true);
    add("cp2_alibi_windowmix", [](Plan& p) { p.cp = 2; p.cpComm = CpComm::AllGather; });
    add("cp2_tp2_swiglu_window", [](Plan& p) { p.cp = 2; p.tp = 2; p.cpComm = CpComm::AllGather; }, true);
    add("pp2_dp2_zero3_alibi_windowmix", [](Plan& p) { p.pp = 2; p.dp = 2; p.zeroStage = 3; });
    // Context parallelism's all-to-all exchange (DeepSpeed-Ulysses, Transformer Engine's a2a): each CP rank attends
    // over every position with its block of the heads (GQA's groups kept whole), with TP + SP, ALiBi's slopes by the
    // heads' model index, a window, pipeline stages with ZeRO-1 and full recompute.
    add("cp2_a2a", [](Plan& p) { p.cp = 2; p.cpComm = CpComm::A2a; });
    add("cp2_tp2_sp_swiglu_mha_a2a", [](Plan& p) { p.cp = 2; p.tp = 2; p.sequenceParallel = true; p.cpComm = CpComm::A2a; }, true);
    add("cp2_a2a_alibi_window", [](Plan& p) { p.cp = 2; p.cpComm = CpComm::A2a; });
    // ... and Megatron-core's hierarchical one (a2a+p2p): the all-to-all in groups of 2 consecutive CP ranks, K and V
    // gathered over the groups; with TP + SP (MHA: a key/value head a rank per all-to-all member), ALiBi and a window.
    auto hierarchical = [](Plan& p) {
        p.cp = 4;
        p.cpComm = CpComm::A2aP2p;
        p.cpA2a = 2;
    };
    add("cp4_a2a2_p2p", hierarchical);
    add("cp4_a2a2_p2p_tp2_sp_swiglu_mha", [&](Plan& p) { hierarchical(p); p.tp = 2; p.sequenceParallel = true; }, true);
    add("cp4_a2a2_p2p_alibi_windowmix", hierarchical);
    add("pp2_cp4_a2a2_p2p_recompute", [&](Plan& p) { hierarchical(p); p.pp = 2; p.recompute = Recompute::Full; });
    add("pp2_cp2_dp2_zero1_a2a_recompute", [](Plan& p) {
        p.pp = 2;
        p.cp = 2;
        p.dp = 2;
        p.zeroStage = 1;
        p.cpComm = CpComm::A2a;
        p.recompute = Recompute::Full;
    });
    // Megatron-core's selective recompute of the dense MLP (recompute_modules mlp): rebuilt from its block's input in
    // the backward, over TP with SP, a parallel block (its MLP reads the layer input), ZB-H1's deferred weight
    // gradients and ZeRO-3's units.
    add("tp2_sp_swiglu_recompute_mlp", [](Plan& p) {
        p.tp = 2;
        p.sequenceParallel = true;
        p.recompute = Recompute::Selective;
        p.recomputeModules = recompute_module::CoreAttn | recompute_module::Mlp;
    }, true);
    add("tp2_pp2_parallel_once_recompute_mlp", [](Plan& p) {
        p.tp = 2;
        p.pp = 2;
        p.framework.name = "deepspeed";
        p.recompute = Recompute::Selective;
        p.recomputeModules = recompute_module::Mlp;
    });
    add("pp2_zb_dp2_zero3_postnorms_recompute_mlp", [](Plan& p) {
        p.pp = 2;
        p.schedule = Schedule::ZeroBubble;
        p.dp = 2;
        p.zeroStage = 3;
        p.recompute = Recompute::Selective;
        p.recomputeModules = recompute_module::Mlp;
    });
    // Nemotron's squared ReLU MLP, over TP with SP and over pipeline stages with ZeRO-3, replayed under full recompute.
    add("tp2_sp_sqrelu", [](Plan& p) { p.tp = 2; p.sequenceParallel = true; });
    add("pp2_dp2_zero3_sqrelu_recompute", [](Plan& p) { p.pp = 2; p.dp = 2; p.zeroStage = 3; p.recompute = Recompute::Full; });
    for (Schedule s : {Schedule::Gpipe, Schedule::OneFOneB, Schedule::ZeroBubble}) {
        add("pp2_" + toString(s), [s](Plan& p) { p.pp = 2; p.schedule = s; });
        add("pp4_" + toString(s), [s](Plan& p) { p.pp = 4; p.schedule = s; });
    }
    add("pp2_interleaved_vpp2", [](Plan& p) { p.pp = 2; p.vpp = 2; p.schedule = Schedule::Interleaved1F1B; });
    // pp4 x vpp2 needs 8 layers: the "8layers" cases run the tiny model twice as deep.
    add("pp4_interleaved_vpp2_8layers", [](Plan& p) { p.pp = 4; p.vpp = 2; p.schedule = Schedule::Interleaved1F1B; });
    add("pp4_interleaved_vpp2_8layers_m8", [](Plan& p) {
        p.pp = 4;
        p.vpp = 2;
        p.globalBatch = 16;
        p.schedule = Schedule::Interleaved1F1B;
    });
    // DualPipeV: the model down the ranks and back up, rank 0 holding both ends, the last rank handing each
    // micro-batch from its first chunk to its second in its own memory, some backwards split (zero bubble).
    auto dualPipeV = [](Plan& p, int pp, int microBatches) {
        p.pp = pp;
        p.vpp = 2;
        p.globalBatch = microBatches * p.microBatch * p.dp;
        p.schedule = Schedule::DualPipeV;
    };
    add("pp2_dualpipev", [&](Plan& p) { dualPipeV(p, 2, 4); });
    add("pp4_dualpipev_8layers_m8", [&](Plan& p) { dualPipeV(p, 4, 8); });
    add("pp2_dp2_zero1_dualpipev", [&](Plan& p) { p.dp = 2; p.zeroStage = 1; dualPipeV(p, 2, 5); });
    add("pp2_dp2_zero3_dualpipev", [&](Plan& p) { p.dp = 2; p.zeroStage = 3; dualPipeV(p, 2, 4); });
    // ZB-V: the same V with every backward split; pp 4 with 4 micro-batches, fewer than its 2p - 1 (padded and dropped).
    auto zbv = [](Plan& p, int pp) { p.pp = pp; p.vpp = 2; p.schedule = Schedule::ZeroBubbleV; };
    add("pp2_zbv", [&](Plan& p) { zbv(p, 2); });
    add("pp4_zbv_8layers", [&](Plan& p) { zbv(p, 4); });
    add("pp2_dp2_zero1_zbv", [&](Plan& p) { p.dp = 2; p.zeroStage = 1; zbv(p, 2); });
    for (int z = 0; z <= 3; ++z) add("dp2_zero" + std::to_string(z), [z](Plan& p) { p.dp = 2; p.zeroStage = z; });
    for (int z = 1; z <= 3; ++z) add("dp1_zero" + std::to_string(z), [z](Plan& p) { p.zeroStage = z; });
    add("tp2_pp2_dp2_zero1", [](Plan& p) { p.tp = 2; p.pp = 2; p.dp = 2; p.zeroStage = 1; });
    add("pp2_dp2_zero2_tied", [](Plan& p) { p.pp = 2; p.dp = 2; p.zeroStage = 2; });
    // Context parallelism (load-balanced zig-zag split of each sequence; seq_len 16 % (2 cp) == 0).
    add("cp2", [](Plan& p) { p.cp = 2; });
    add("cp4", [](Plan& p) { p.cp = 4; });
    add("cp2_tp2", [](Plan& p) { p.cp = 2; p.tp = 2; });
    add("cp2_tp2_sp", [](Plan& p) { p.cp = 2; p.tp = 2; p.sequenceParallel = true; });
    add("cp2_pp2", [](Plan& p) { p.cp = 2; p.pp = 2; });
    add("cp2_dp2_zero0", [](Plan& p) { p.cp = 2; p.dp = 2; });
    add("cp2_dp2_zero1", [](Plan& p) { p.cp = 2; p.dp = 2; p.zeroStage = 1; });
    add("cp2_dp2_zero1_over_cp", [](Plan& p) { p.cp = 2; p.dp = 2; p.zeroStage = 1; p.zeroOverCp = true; });
    add("cp2_zero3_over_cp", [](Plan& p) { p.cp = 2; p.zeroStage = 3; p.zeroOverCp = true; });
    add("cp2_swiglu_rope", [](Plan& p) { p.cp = 2; }, true);
    // A partial rotary (Pythia's rotary_pct 0.25: 4 of each head's 16 columns) split over heads and over positions.
    add("tp2_swiglu_partial_rope", [](Plan& p) { p.tp = 2; }, true);
    add("cp2_swiglu_partial_rope", [](Plan& p) { p.cp = 2; }, true);
    add("cp2_pp2_tied", [](Plan& p) { p.cp = 2; p.pp = 2; });
    // ZeRO-3 gathers unit by unit (embedding, layers, head) around their use: a tied embedding on one stage
    // (gathered again for the head) and across stages (its own bucket on both), one layer per stage and per
    // chunk (re-gathered in place between passes), ZB-H1's split backward, and a shard group of one (cp2 without
    // zero_over_cp: the gathers only copy the shard).
    add("dp2_zero3_tied", [](Plan& p) { p.dp = 2; p.zeroStage = 3; });
    add("pp2_dp2_zero3_tied", [](Plan& p) { p.pp = 2; p.dp = 2; p.zeroStage = 3; });
    add("pp4_dp2_zero3", [](Plan& p) { p.pp = 4; p.dp = 2; p.zeroStage = 3; });
    add("pp2_vpp2_dp2_zero3", [](Plan& p) {
        p.pp = 2;
        p.vpp = 2;
        p.dp = 2;
        p.zeroStage = 3;
        p.schedule = Schedule::Interleaved1F1B;
    });
    add("pp2_dp2_zero3_zero_bubble", [](Plan& p) { p.pp = 2; p.dp = 2; p.zeroStage = 3; p.schedule = Schedule::ZeroBubble; });
    add("cp2_zero3", [](Plan& p) { p.cp = 2; p.zeroStage = 3; });
    // Hybrid sharding (zero_replicas): the state sharded inside runs of the data-parallel group and each run's reduced
    // shards summed across the runs; two micro-batches a step (ZeRO-2/3 reduce each), runs of one rank (x4, and
    // pp2 x dp2), a tied embedding across stages, and the dp x cp group split under zero_over_cp.
    auto hybrid = [](Plan& p, int dp, int zero, int replicas) {
        p.dp = dp;
        p.zeroStage = zero;
        p.zeroReplicas = replicas;
        p.microBatch = 1;
        p.globalBatch = 2 * dp;
    };
    for (int z = 1; z <= 3; ++z) add("dp4_zero" + std::to_string(z) + "_x2", [&, z](Plan& p) { hybrid(p, 4, z, 2); });
    add("dp4_zero3_x4", [&](Plan& p) { hybrid(p, 4, 3, 4); });
    add("pp2_dp2_zero2_x2_tied", [&](Plan& p) { p.pp = 2; hybrid(p, 2, 2, 2); });
    add("pp2_dp4_zero3_x2_tied", [&](Plan& p) { p.pp = 2; hybrid(p, 4, 3, 2); });
    add("cp2_dp2_zero3_over_cp_x2", [&](Plan& p) {
        p.cp = 2;
        p.zeroOverCp = true;
        hybrid(p, 2, 3, 2);
    });
    // Uneven pipeline splits (FORMULAS.md §5.4): 4 layers balanced over 3 stages, an explicit 1 + 3, the
    // first/last-stage rule, an uneven interleaved split and ZeRO-3 gathering unequal chunks.
    add("pp3_balanced", [](Plan& p) { p.pp = 3; p.pipelineSplit = PipelineSplit::Balanced; });
    add("pp2_layers_1_3", [](Plan& p) { p.pp = 2; p.pipelineLayers = {1, 3}; });
    add("pp3_first_stage_2", [](Plan& p) { p.pp = 3; p.firstStageLayers = 2; });
    add("pp2_vpp2_layers_1_3_2_2_8layers", [](Plan& p) {
        p.pp = 2;
        p.vpp = 2;
        p.pipelineLayers = {1, 3, 2, 2};
        p.schedule = Schedule::Interleaved1F1B;
    });
    add("pp3_dp2_zero3_balanced", [](Plan& p) { p.pp = 3; p.dp = 2; p.zeroStage = 3; p.pipelineSplit = PipelineSplit::Balanced; });
    // Chunks of unequal layers on one rank reduce a bucket a layer each (the rank's first chunk no longer sets
    // every chunk's count); data parallel makes the buckets run.
    add("pp2_vpp2_dp2_zero1_layers_1_3_2_2_8layers", [](Plan& p) {
        p.pp = 2;
        p.vpp = 2;
        p.dp = 2;
        p.zeroStage = 1;
        p.pipelineLayers = {1, 3, 2, 2};
        p.schedule = Schedule::Interleaved1F1B;
    });
    // Stages of no transformer layer (Megatron-core's "E|...|L" layouts, account-for-embedding/loss with
    // layers + 2 = pp x vpp): the embedding alone on the first virtual stage, the head and loss alone on the last;
    // a tied embedding synchronised between them; their one gradient bucket each under data parallelism.
    add("pp3_layers_0_4_0_tied", [](Plan& p) { p.pp = 3; p.pipelineLayers = {0, 4, 0}; });
    add("pp3_dp2_zero1_layers_0_4_0", [](Plan& p) { p.pp = 3; p.dp = 2; p.zeroStage = 1; p.pipelineLayers = {0, 4, 0}; });
    add("pp3_dp2_zero3_layers_0_4_0", [](Plan& p) { p.pp = 3; p.dp = 2; p.zeroStage = 3; p.pipelineLayers = {0, 4, 0}; });
    add("pp2_vpp3_dp2_zero1_ends_as_layers", [](Plan& p) {
        p.pp = 2;
        p.vpp = 3;
        p.dp = 2;
        p.zeroStage = 1;
        p.pipelineSplit = PipelineSplit::EndsAsLayers; // 4 layers on 6 virtual stages: 0,1,1,1,1,0
        p.schedule = Schedule::Interleaved1F1B;
    });
    return cases;
}

class Equivalence : public ::testing::TestWithParam<Case> {};

TEST_P(Equivalence, MatchesOneRank) {
    const Case& c = GetParam();
    ModelConfig model = tinyModel(c.swiglu);
    if (c.name.find("tied") != std::string::npos) model.tiedEmbeddings = true;
    if (c.name.find("8layers") != std::string::npos) model.layers = 8;
    if (c.name.find("partial_rope") != std::string::npos) model.rotaryPercent = 0.25;
    if (c.name.find("parallel") != std::string::npos) model.parallelResidual = true;
    if (c.name.find("postnorms") != std::string::npos) model.postNorms = true;
    if (c.name.find("embnorm") != std::string::npos) model.embeddingNorm = true;
    if (c.name.find("embscale") != std::string::npos) model.embeddingScale = true;
    if (c.name.find("geglu") != std::string::npos) model.activation = Activation::Geglu; // the gated layout, GELU's gate
    if (c.name.find("qknorm") != std::string::npos) model.qkNorm = true;
    if (c.name.find("alibi") != std::string::npos) model.position = PositionEmbedding::Alibi;
    if (c.name.find("sqrelu") != std::string::npos) model.activation = Activation::SquaredRelu;
    if (c.name.find("mha") != std::string::npos) model.kvHeads = model.heads;  // two key/value heads a TP rank
    if (c.name.find("window") != std::string::npos) model.slidingWindow = 5;  // 16 positions a sequence
    if (c.name.find("windowmix") != std::string::npos) model.fullAttentionLayers = {1};
    if (c.name.find("softcap") != std::string::npos) {                        // Gemma 2's, small enough to bend the
        model.attentionSoftcap = 2.0;                                         // tiny model's scores and logits
        model.logitSoftcap = 1.0;
    }
    Plan one = basePlan();
    one.precision = c.plan.precision;
    one.globalBatch = c.plan.globalBatch;
    expectMatchesOneRank(model, c.plan, one);
}

INSTANTIATE_TEST_SUITE_P(Grid, Equivalence, ::testing::ValuesIn(grid()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// With a clip norm far below the gradient norm every step is clipped, so the updated parameters depend on the
// global gradient norm: each distinct gradient element must be counted once over dp x cp, and once over the copies
// hybrid sharding keeps.
TEST(ShardedGradients, ClippedStepsMatchOneRank) {
    ModelConfig model = tinyModel(false);
    TrainHyper hyper;
    hyper.clipNorm = 1e-3;
    const test::RunResult ref = test::runPlan(model, basePlan(), 2, hyper);
    struct { const char* name; int cp, dp, zero; bool overCp; int replicas; } cases[] = {
        {"cp2_dp2_zero0", 2, 2, 0, false, 1}, {"cp2_dp2_zero1", 2, 2, 1, false, 1}, {"cp2_dp2_zero2_over_cp", 2, 2, 2, true, 1},
        {"cp2_zero1", 2, 1, 1, false, 1},     {"dp4_zero1_x2", 1, 4, 1, false, 2},  {"dp4_zero3_x2", 1, 4, 3, false, 2},
        {"cp2_dp2_zero2_over_cp_x2", 2, 2, 2, true, 2}};
    for (const auto& c : cases) {
        Plan p = basePlan();
        p.cp = c.cp;
        p.dp = c.dp;
        p.zeroStage = c.zero;
        p.zeroOverCp = c.overCp;
        p.zeroReplicas = c.replicas;
        if (c.dp == 4) p.microBatch = 1;
        const test::RunResult got = test::runPlan(model, p, 2, hyper);
        for (size_t i = 0; i < ref.losses.size(); ++i)
            EXPECT_LT(std::abs(ref.losses[i] - got.losses[i]) / ref.losses[i], 1e-10) << c.name << " step " << i;
        for (const auto& [name, values] : ref.params)
            EXPECT_LT(test::maxRelDiff(values, got.params.at(name)), 1e-10) << c.name << " " << name;
    }
}

// Mixture of experts: the tiny-moe model (4 experts, top 2, SwiGLU/RMSNorm/RoPE) with its MoE block kept,
// short sequences; N ranks with expert parallelism against one rank running all experts locally.
void expectMoeMatchesOneRank(const ModelConfig& model, const Plan& plan, const TrainHyper& hyper = {}) {
    expectMatchesOneRank(model, plan, basePlan(), hyper);
}

TEST(ExpertParallel, OneRankHasEveryExpertAndTrains) {
    const ModelConfig model = tinyMoeModel();
    const test::RunResult r = test::runPlan(model, basePlan(), 3);
    EXPECT_TRUE(r.params.count("layer.0.mlp.router.weight"));
    for (int e = 0; e < 4; ++e) {
        EXPECT_TRUE(r.params.count("layer.3.mlp.expert." + std::to_string(e) + ".gate.weight")) << e;
        EXPECT_TRUE(r.params.count("layer.3.mlp.expert." + std::to_string(e) + ".fc2.weight")) << e;
    }
    EXPECT_LT(r.losses.back(), r.losses.front());
}

Plan expertPlan(int dp, int ep, int pp = 1) {
    Plan p = basePlan();
    p.dp = dp;
    p.ep = ep;
    p.pp = pp;
    return p;
}

TEST(ExpertParallel, Ep2Dp2MatchesOneRank) { expectMoeMatchesOneRank(tinyMoeModel(), expertPlan(2, 2)); }
TEST(ExpertParallel, Ep2Dp2Pp2MatchesOneRank) { expectMoeMatchesOneRank(tinyMoeModel(), expertPlan(2, 2, 2)); }
TEST(ExpertParallel, Ep4Dp4MatchesOneRank) { expectMoeMatchesOneRank(tinyMoeModel(), expertPlan(4, 4)); }

// ep 2 of dp 4: expert gradients are reduced over the expert data-parallel group (2 ranks); clipped steps
// check that the gradient norm counts each expert gradient element once.
TEST(ExpertParallel, Ep2Dp4ClippedMatchesOneRank) {
    TrainHyper hyper;
    hyper.clipNorm = 1e-3;
    expectMoeMatchesOneRank(tinyMoeModel(), expertPlan(4, 2), hyper);
}

// ZeRO with experts: the expert buckets are sharded and reduced over the expert data-parallel group (dp / ep ranks),
// the dense ones over dp, as Megatron-core's distributed optimizer and FSDP with expert parallelism do. Expert
// shard groups of one (ep = dp) and of two, expert parallelism of one (experts sharded like the dense part),
// pipeline stages, hybrid sharding (the expert copies summed over expert_zero_replica), two micro-batches a step
// (ZeRO-2/3 reduce each); the clipped cases check that the gradient norm counts each expert shard once.
struct MoeZeroCase {
    std::string name;
    int dp, ep, pp, zero, replicas;
    bool clipped = false;
    int cp = 1;           // CP ranks route other tokens to the same experts: expert gradients sum over cp x dp / ep
    bool overCp = false;  // zero_over_cp: the expert state sharded over cp x dp / ep (else over dp / ep after cp)
    int tp = 1;           // expert TP = tp, sequence parallel (the TensorParallel grid below)
    bool zeroBubble = false;
    bool mixed = false;   // a dense first layer and shared experts (the Mixed grid below)
    int etp = 0;          // expert TP other than tp: MoE parallel folding (the Folded grid below)
    // Megatron-core 0.9's layout (EP carved out of dp with cp > 1; the Carved grid below); otherwise today's, whose
    // expert layers with cp > 1 take a layout of their own (EP over CP ranks first).
    bool carved = false;
    bool bias = false;    // linear_bias: every expert's fc1 and fc2 biases, the shared experts' and the dense layer's
};

class ExpertZero : public ::testing::TestWithParam<MoeZeroCase> {};

TEST_P(ExpertZero, MatchesOneRank) {
    const MoeZeroCase& c = GetParam();
    Plan p = expertPlan(c.dp, c.ep, c.pp);
    p.zeroStage = c.zero;
    p.zeroReplicas = c.replicas;
    p.cp = c.cp;
    p.zeroOverCp = c.overCp;
    p.tp = c.tp;
    p.etp = c.etp;
    p.sequenceParallel = c.tp > 1;
    if (c.zeroBubble) p.schedule = Schedule::ZeroBubble;
    if (c.carved) {
        p.framework.name = "megatron";
        p.framework.version = "core_r0.9.0";
    }
    ASSERT_EQ(p.expertLayoutApart(), c.etp > 0 && c.etp != c.tp ? true : c.cp > 1 && c.ep > 1 && !c.carved) << c.name;
    p.microBatch = 1;
    p.globalBatch = 2 * c.dp;
    TrainHyper hyper;
    if (c.clipped) hyper.clipNorm = 1e-3;
    Plan one = basePlan();
    one.globalBatch = p.globalBatch;
    ModelConfig model = tinyMoeModel(c.mixed);
    model.linearBias = c.bias;
    expectMatchesOneRank(model, p, one, hyper);
}

INSTANTIATE_TEST_SUITE_P(Grid, ExpertZero,
                         ::testing::Values(MoeZeroCase{"ep2_dp2_zero1", 2, 2, 1, 1, 1}, MoeZeroCase{"ep2_dp2_zero2", 2, 2, 1, 2, 1},
                                           MoeZeroCase{"ep2_dp2_zero3", 2, 2, 1, 3, 1}, MoeZeroCase{"ep2_dp4_zero1", 4, 2, 1, 1, 1},
                                           MoeZeroCase{"ep2_dp4_zero2_clipped", 4, 2, 1, 2, 1, true},
                                           MoeZeroCase{"ep2_dp4_zero3_clipped", 4, 2, 1, 3, 1, true},
                                           MoeZeroCase{"ep1_dp2_zero2", 2, 1, 1, 2, 1}, MoeZeroCase{"ep2_dp2_pp2_zero1", 2, 2, 2, 1, 1},
                                           MoeZeroCase{"ep2_dp2_pp2_zero3", 2, 2, 2, 3, 1},
                                           MoeZeroCase{"ep2_dp4_zero1_x2_clipped", 4, 2, 1, 1, 2, true},
                                           MoeZeroCase{"ep2_dp4_zero2_x2", 4, 2, 1, 2, 2}, MoeZeroCase{"ep2_dp8_zero3_x2_clipped", 8, 2, 1, 3, 2, true},
                                           MoeZeroCase{"cp2_ep2_dp2_zero0_clipped", 2, 2, 1, 0, 1, true, 2},
                                           MoeZeroCase{"cp2_ep2_dp4_zero1_clipped", 4, 2, 1, 1, 1, true, 2},
                                           MoeZeroCase{"cp2_ep2_dp2_zero2_over_cp_clipped", 2, 2, 1, 2, 1, true, 2, true},
                                           MoeZeroCase{"cp2_ep1_dp2_zero0_over_cp", 2, 1, 1, 0, 1, false, 2, true},
                                           MoeZeroCase{"cp2_ep2_dp2_pp2_zero3", 2, 2, 2, 3, 1, false, 2},
                                           MoeZeroCase{"cp2_ep2_dp2_zero3_over_cp_x2_clipped", 2, 2, 1, 3, 2, true, 2, true}),
                         [](const ::testing::TestParamInfo<MoeZeroCase>& i) { return i.param.name; });

// Expert tensor parallelism (etp = tp, sequence parallel, as Megatron-core runs MoE with TP): each TP rank routes
// its own tokens, the rows received over EP are gathered over TP, every TP rank runs F/tp of each local expert and
// the partial outputs are reduce-scattered back; the router's gradient is summed over TP. With EP, pipeline stages,
// CP, ZeRO-1/2/3, a clipped step and zero-bubble's split backward (the router's TP sum inside the B pass).
INSTANTIATE_TEST_SUITE_P(
    TensorParallel, ExpertZero,
    ::testing::Values(MoeZeroCase{"tp2_ep1", 1, 1, 1, 0, 1, false, 1, false, 2},
                      MoeZeroCase{"tp2_ep2_dp2", 2, 2, 1, 0, 1, false, 1, false, 2},
                      MoeZeroCase{"tp2_ep2_dp4_zero1_clipped", 4, 2, 1, 1, 1, true, 1, false, 2},
                      MoeZeroCase{"tp2_ep2_dp2_pp2_zero3", 2, 2, 2, 3, 1, false, 1, false, 2},
                      MoeZeroCase{"tp2_cp2_ep2_dp2", 2, 2, 1, 0, 1, false, 2, false, 2},
                      MoeZeroCase{"tp2_ep1_dp2_zero2_clipped", 2, 1, 1, 2, 1, true, 1, false, 2},
                      MoeZeroCase{"tp2_ep2_dp2_pp2_zero_bubble", 2, 2, 2, 0, 1, false, 1, false, 2, true}),
    [](const ::testing::TestParamInfo<MoeZeroCase>& i) { return i.param.name; });

// An MoE model with a dense layer among its MoE layers and shared experts (a dense MLP over every token beside the
// routed ones, split over TP as the dense MLP): the dense layer's and the shared experts' parameters are dense
// parameters (reduced and sharded over dp), the routed experts' expert ones.
INSTANTIATE_TEST_SUITE_P(
    Mixed, ExpertZero,
    ::testing::Values(MoeZeroCase{"dense0_shared_ep2_dp2", 2, 2, 1, 0, 1, false, 1, false, 1, false, true},
                      MoeZeroCase{"dense0_shared_ep2_dp4_zero3_clipped", 4, 2, 1, 3, 1, true, 1, false, 1, false, true},
                      MoeZeroCase{"dense0_shared_tp2_ep2_dp2_pp2_zero1", 2, 2, 2, 1, 1, false, 1, false, 2, false, true},
                      MoeZeroCase{"dense0_shared_cp2_ep2_dp2_zero2", 2, 2, 1, 2, 1, false, 2, false, 1, false, true},
                      MoeZeroCase{"dense0_shared_tp2_ep2_dp2_pp2_zero_bubble", 2, 2, 2, 0, 1, false, 1, false, 2, true, true}),
    [](const ::testing::TestParamInfo<MoeZeroCase>& i) { return i.param.name; });

// MoE parallel folding (Megatron-core's etp != tp): the expert layers laid out as etp x ep x edp over the stage's
// tp x cp x dp ranks, so EP takes TP and CP ranks (etp 1) or expert TP takes data-parallel ranks (etp 2 over tp 1);
// the expert gradients sum over edp alone.
INSTANTIATE_TEST_SUITE_P(
    Folded, ExpertZero,
    ::testing::Values(MoeZeroCase{"tp2_etp1_ep2", 1, 2, 1, 0, 1, false, 1, false, 2, false, false, 1},
                      MoeZeroCase{"tp2_etp1_ep4_dp2_zero1_clipped", 2, 4, 1, 1, 1, true, 1, false, 2, false, false, 1},
                      MoeZeroCase{"tp2_etp1_ep2_dp2_zero3", 2, 2, 1, 3, 1, false, 1, false, 2, false, false, 1},
                      MoeZeroCase{"tp1_etp2_ep1_dp2", 2, 1, 1, 0, 1, false, 1, false, 1, false, false, 2},
                      MoeZeroCase{"tp2_etp1_ep2_dp2_pp2_zero2_mixed", 2, 2, 2, 2, 1, false, 1, false, 2, false, true, 1},
                      MoeZeroCase{"tp2_etp1_ep2_dp4_zero1_x2_clipped", 4, 2, 1, 1, 2, true, 1, false, 2, false, false, 1},
                      // With cp 2 the folded EP and edp groups take CP ranks: the experts' gradients are not pre-reduced
                      // over cp (it holds other experts there), with or without zero_over_cp.
                      MoeZeroCase{"tp2_cp2_etp1_ep2_zero0_clipped", 1, 2, 1, 0, 1, true, 2, false, 2, false, false, 1},
                      MoeZeroCase{"tp2_cp2_etp1_ep4_dp2_zero1_clipped", 2, 4, 1, 1, 1, true, 2, false, 2, false, false, 1},
                      MoeZeroCase{"tp2_cp2_etp1_ep2_zero2", 1, 2, 1, 2, 1, false, 2, false, 2, false, false, 1},
                      MoeZeroCase{"tp2_cp2_etp1_ep2_dp2_zero3_over_cp_mixed", 2, 2, 1, 3, 1, false, 2, true, 2, false, true, 1}),
    [](const ::testing::TestParamInfo<MoeZeroCase>& i) { return i.param.name; });

// Megatron-core's expert layout with cp > 1 and etp = tp (0.10 on: the expert RankGenerator whatever etp is): EP takes
// CP ranks before data-parallel ones, so ep may exceed dp, and the expert gradients sum over cp x dp / ep without a
// pre-reduction over cp. The Grid's and TensorParallel's cp 2 cases run it too; these are the ones the carved layout
// cannot hold (ep > dp).
INSTANTIATE_TEST_SUITE_P(
    CoreExpertLayout, ExpertZero,
    ::testing::Values(MoeZeroCase{"cp2_ep2_dp1_zero1_clipped", 1, 2, 1, 1, 1, true, 2},
                      MoeZeroCase{"cp2_ep4_dp2_zero3_over_cp_clipped", 2, 4, 1, 3, 1, true, 2, true},
                      MoeZeroCase{"cp2_ep4_dp2_pp2_zero2", 2, 4, 2, 2, 1, false, 2},
                      MoeZeroCase{"tp2_cp2_ep2_dp1", 1, 2, 1, 0, 1, false, 2, false, 2},
                      MoeZeroCase{"cp2_ep2_dp1_zero2_mixed", 1, 2, 1, 2, 1, false, 2, false, 1, false, true}),
    [](const ::testing::TestParamInfo<MoeZeroCase>& i) { return i.param.name; });

// Megatron-core 0.9's layout with cp > 1 (EP carved out of dp; CP ranks hold the same experts and pre-reduce their
// gradients over cp without zero_over_cp), kept for plans of that version and MegaScale's fork.
INSTANTIATE_TEST_SUITE_P(
    Carved, ExpertZero,
    ::testing::Values(MoeZeroCase{"cp2_ep2_dp2_zero0_clipped", 2, 2, 1, 0, 1, true, 2, false, 1, false, false, 0, true},
                      MoeZeroCase{"cp2_ep2_dp4_zero1_clipped", 4, 2, 1, 1, 1, true, 2, false, 1, false, false, 0, true},
                      MoeZeroCase{"cp2_ep2_dp2_zero2_over_cp_clipped", 2, 2, 1, 2, 1, true, 2, true, 1, false, false, 0, true},
                      MoeZeroCase{"cp2_ep2_dp2_zero3_over_cp_x2_clipped", 2, 2, 1, 3, 2, true, 2, true, 1, false, false, 0, true},
                      MoeZeroCase{"tp2_cp2_ep2_dp2", 2, 2, 1, 0, 1, false, 2, false, 2, false, false, 0, true}),
    [](const ::testing::TestParamInfo<MoeZeroCase>& i) { return i.param.name; });

// Experts with biases (linear_bias; GPT-OSS's experts carry them): fc1's split over expert TP as fc1 (SwiGLU's gate and
// up halves apart), fc2's replicated over expert TP and added once before the reduce-scatter, summed and sharded over
// the expert data-parallel group; the shared experts' and the dense layer's SwiGLU biases with them.
INSTANTIATE_TEST_SUITE_P(
    Biases, ExpertZero,
    ::testing::Values(MoeZeroCase{"ep2_dp2_zero1", 2, 2, 1, 1, 1, false, 1, false, 1, false, false, 0, false, true},
                      MoeZeroCase{"tp2_ep2_dp2_zero3_clipped", 2, 2, 1, 3, 1, true, 1, false, 2, false, false, 0, false, true},
                      MoeZeroCase{"tp2_etp1_ep2_dp2_zero2_clipped", 2, 2, 1, 2, 1, true, 1, false, 2, false, false, 1, false, true},
                      MoeZeroCase{"tp1_etp2_ep1_dp2_clipped", 2, 1, 1, 0, 1, true, 1, false, 1, false, false, 2, false, true},
                      MoeZeroCase{"dense0_shared_tp2_ep2_dp2_pp2_zero1", 2, 2, 2, 1, 1, false, 1, false, 2, false, true, 0, false, true},
                      MoeZeroCase{"cp2_ep2_dp1_zero_bubble", 1, 2, 2, 0, 1, false, 2, false, 1, true, false, 0, false, true}),
    [](const ::testing::TestParamInfo<MoeZeroCase>& i) { return i.param.name; });

// MoE with TP but without SP is refused at its field (Megatron refuses it too), and so is parallel folding.
TEST(ExpertTensorParallel, NeedsSequenceParallelismAndRunsFolded) {
    Plan p = expertPlan(2, 2);
    p.tp = 2;
    ProblemList problems;
    validateExecutable(tinyMoeModel(), p, "/plan", problems, "cpu");
    ASSERT_EQ(problems.items().size(), 1u);
    EXPECT_EQ(problems.items()[0].where, "/plan/sequence_parallel");
    p.sequenceParallel = true;
    p.etp = 1;
    ProblemList folded;
    validateExecutable(tinyMoeModel(), p, "/plan", folded, "cpu");
    EXPECT_TRUE(folded.empty());
}

TEST(ExpertParallel, Ep1Dp2AndZeroBubbleFullRecomputeMatchOneRank) {
    Plan p = basePlan();
    p.dp = 2;
    expectMoeMatchesOneRank(tinyMoeModel(), p);
    Plan q = basePlan();
    q.dp = 2;
    q.ep = 2;
    q.pp = 2;
    q.schedule = Schedule::ZeroBubble;
    q.recompute = Recompute::Full;
    expectMoeMatchesOneRank(tinyMoeModel(), q);
}

// The MoE backward (experts, top-k renormalised gates, router softmax) against central differences of the
// loss on one rank, for elements of the router and of an expert of the first layer.
// The mixed model (a dense first layer, shared experts) checks the dense layer's MLP and the shared experts' weights
// of the first MoE layer the same way.
void expectMoeGradientsMatchFiniteDifferences(bool mixed, const std::vector<std::string>& names, bool bias = false) {
    ModelConfig model = tinyMoeModel(mixed);
    model.linearBias = bias;
    expectGradientsMatchFiniteDifferences(model, names);
}

TEST(ExpertParallel, GradientsMatchFiniteDifferences) {
    expectMoeGradientsMatchFiniteDifferences(
        false, {"layer.0.mlp.router.weight", "layer.0.mlp.expert.1.fc1.weight", "layer.0.mlp.expert.2.fc2.weight"});
    expectMoeGradientsMatchFiniteDifferences(
        true, {"layer.0.mlp.fc1.weight", "layer.0.mlp.fc2.weight", "layer.1.mlp.router.weight",
               "layer.1.mlp.shared.fc1.weight", "layer.1.mlp.shared.fc2.weight", "layer.1.mlp.expert.3.fc1.weight"});
    // With linear_bias: the experts' fc1 and fc2 biases, the shared experts' and the dense layer's SwiGLU fc1 bias.
    expectMoeGradientsMatchFiniteDifferences(
        true, {"layer.0.mlp.fc1.bias", "layer.0.mlp.fc2.bias", "layer.1.mlp.expert.2.fc1.bias", "layer.1.mlp.expert.2.fc2.bias",
               "layer.1.mlp.shared.fc1.bias", "layer.1.mlp.shared.fc2.bias"},
        true);
}

// A parallel block (GPT-NeoX's): both norms read the layer input, both blocks' outputs join it; every weight and
// bias of the layer, the two norms' included, by central differences.
TEST(ParallelBlock, GradientsMatchFiniteDifferences) {
    for (const bool swiglu : {false, true}) { // GELU with LayerNorm, SwiGLU with RMSNorm (no norm biases)
        ModelConfig model = tinyModel(swiglu);
        model.parallelResidual = true;
        model.linearBias = true;
        std::vector<std::string> names{"layer.0.ln1.weight",       "layer.0.ln2.weight",     "layer.0.attn.q.weight",
                                       "layer.0.attn.v.bias",      "layer.0.attn.proj.weight", "layer.0.attn.proj.bias",
                                       "layer.0.mlp.fc1.weight",   "layer.0.mlp.fc2.weight", "layer.0.mlp.fc2.bias",
                                       "layer.1.ln2.weight"};
        if (model.norm == NormKind::LayerNorm) names.insert(names.end(), {"layer.0.ln1.bias", "layer.0.ln2.bias"});
        expectGradientsMatchFiniteDifferences(model, names);
    }
}

// Gemma's norms after each block (post_norms) and its embedding x sqrt(hidden) (embedding_scale), BLOOM's norm over
// the embedding (embedding_norm): every parameter they touch by central differences, with LayerNorm (GELU, learned
// positions) and RMSNorm (SwiGLU, rotary).
TEST(ModelFeatures, NormsAndEmbeddingScaleGradientsMatchFiniteDifferences) {
    for (const bool swiglu : {false, true}) {
        ModelConfig model = tinyModel(swiglu);
        model.postNorms = true;
        model.embeddingNorm = true;
        model.embeddingScale = true;
        model.linearBias = true;
        std::vector<std::string> names{"wte",                        "embed_norm.weight",        "layer.0.ln_post_attn.weight",
                                       "layer.0.ln_post_mlp.weight", "layer.0.attn.proj.weight", "layer.0.attn.proj.bias",
                                       "layer.0.mlp.fc2.bias",       "layer.0.ln2.weight",       "layer.1.ln_post_mlp.weight"};
        if (model.norm == NormKind::LayerNorm)
            names.insert(names.end(), {"embed_norm.bias", "layer.0.ln_post_attn.bias", "layer.0.ln_post_mlp.bias"});
        if (model.position == PositionEmbedding::Learned) names.push_back("wpe");
        expectGradientsMatchFiniteDifferences(model, names);
    }
}

// q and k normalised per head (qk_norm), LayerNorm (weight and bias) and RMSNorm, before RoPE in the second.
TEST(ModelFeatures, QkNormGradientsMatchFiniteDifferences) {
    for (const bool swiglu : {false, true}) {
        ModelConfig model = tinyModel(swiglu);
        model.qkNorm = true;
        std::vector<std::string> names{"layer.0.attn.q_norm.weight", "layer.0.attn.k_norm.weight", "layer.0.attn.q.weight",
                                       "layer.0.attn.k.weight", "layer.1.attn.k_norm.weight"};
        // (k_norm's bias moves every key of a head alike, q.b the same for each key of a query: the softmax ignores it,
        // its gradient is zero and there is nothing for the differences to see.)
        if (model.norm == NormKind::LayerNorm) names.push_back("layer.0.attn.q_norm.bias");
        expectGradientsMatchFiniteDifferences(model, names);
    }
}

// Gemma 2's soft-capping of the attention scores and the logits, by central differences.
TEST(ModelFeatures, SoftcapGradientsMatchFiniteDifferences) {
    ModelConfig model = tinyModel(true);
    model.attentionSoftcap = 2.0;
    model.logitSoftcap = 1.0;
    expectGradientsMatchFiniteDifferences(model, {"layer.0.attn.q.weight", "layer.0.attn.k.weight", "layer.1.attn.v.weight",
                                                  "lnf.weight", "lm_head", "wte"});
}

// ALiBi's biases and a sliding window of 5 of the 16 positions, layer 1 attending over the whole prefix: the
// projections of both layers and what feeds them (the biases and the mask add no parameter; no position embedding).
TEST(ModelFeatures, AlibiAndWindowGradientsMatchFiniteDifferences) {
    ModelConfig model = tinyModel(false);
    model.position = PositionEmbedding::Alibi;
    model.slidingWindow = 5;
    model.fullAttentionLayers = {1};
    expectGradientsMatchFiniteDifferences(model, {"layer.0.attn.q.weight", "layer.0.attn.k.weight", "layer.0.attn.v.weight",
                                                  "layer.1.attn.q.weight", "layer.1.attn.k.weight", "layer.0.ln1.weight",
                                                  "wte"});
}

// Nemotron's squared ReLU: the MLP's weights and biases on both sides of it, and what feeds them.
TEST(ModelFeatures, SquaredReluGradientsMatchFiniteDifferences) {
    ModelConfig model = tinyModel(false);
    model.activation = Activation::SquaredRelu;
    expectGradientsMatchFiniteDifferences(model, {"layer.0.mlp.fc1.weight", "layer.0.mlp.fc1.bias", "layer.0.mlp.fc2.weight",
                                                  "layer.1.mlp.fc1.weight", "layer.1.ln2.weight"});
}

// Gemma's gated GELU (GeGLU): the gate's and up projection's weights and biases, and what feeds them.
TEST(ModelFeatures, GegluGradientsMatchFiniteDifferences) {
    ModelConfig model = tinyModel(true);
    model.activation = Activation::Geglu;
    model.linearBias = true;
    expectGradientsMatchFiniteDifferences(model, {"layer.0.mlp.fc1.weight", "layer.0.mlp.fc1.bias", "layer.0.mlp.fc2.weight",
                                                  "layer.1.ln2.weight", "layer.1.attn.q.weight"});
}

// The all-to-all exchange splits each rank's heads over CP: one key/value head a rank (tiny-moe's 2 at tp 2) cannot
// split over cp 2, refused at the field rather than run.
TEST(ContextParallel, AllToAllRefusesHeadsThatDoNotSplit) {
    Plan p = basePlan();
    p.tp = 2;
    p.cp = 2;
    p.sequenceParallel = true;
    p.cpComm = CpComm::A2a;
    try {
        test::runPlan(tinyModel(true), p, 1);
        FAIL() << "ran";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("/plan/cp_comm_type"), std::string::npos) << e.what();
    }
    // a2a+p2p: the all-to-all group's size must split the heads (2 query, 1 key/value head a TP rank here).
    p.cp = 4;
    p.cpComm = CpComm::A2aP2p;
    p.cpA2a = 2;
    try {
        test::runPlan(tinyModel(true), p, 1);
        FAIL() << "ran";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("/plan/cp_a2a_size"), std::string::npos) << e.what();
    }
}

TEST(ExpertParallel, RejectsTensorParallelismWithoutSequenceParallelism) {
    Plan p = basePlan();
    p.tp = 2;
    EXPECT_THROW(test::runPlan(tinyMoeModel(), p, 1), InputError);
}

TEST(Recompute, SelectiveAndFullAreBitwiseEqualToNone) {
    ModelConfig model = tinyModel(false);
    Plan p = basePlan();
    p.pp = 2;
    test::expectRecomputeIsBitwise(model, p);
    const test::RunResult none = test::runPlan(model, p, 2);
    // Full recompute of the first layer of each stage only (Megatron-LM's block method).
    Plan q = p;
    q.recompute = Recompute::Full;
    q.recomputeLayers = 1;
    const test::RunResult r = test::runPlan(model, q, 2);
    EXPECT_EQ(r.losses, none.losses) << "recompute_layers 1";
    EXPECT_EQ(r.params, none.params) << "recompute_layers 1";
}

TEST(Training, LossFallsOnTheTinyModel) {
    ModelConfig model = tinyModel(false);
    Plan p = basePlan();
    const test::RunResult r = test::runPlan(model, p, 12);
    EXPECT_LT(r.losses.back(), r.losses.front() - 0.5);
    EXPECT_NEAR(r.losses.front(), std::log(256.0), 0.3); // starts near uniform over bytes
}

} // namespace
} // namespace tessel::exec
