// What tessel run accepts before it starts a rank: validateExecutable refuses, at the field, every model feature and
// plan setting the executor does not run (or runs only on one backend), and passes the ones it does (split from
// equivalence_test.cpp, which trains the ones it runs).
#include "executor_support.hpp"

#include "tessel/exec/run_output.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tessel::exec {
namespace {

using test::basePlan;
using test::tinyModel;

// Model features tessel predicts and exports but the executor does not run are refused at their field, never run as
// something else: multi-token prediction not as the next token alone; gpt-oss's learned attention sinks not as a
// plain softmax; latent attention without the rotary key its
// decoupled RoPE needs not as MLA with one (what it does not run of MLA: tests/executor/mla_test.cpp).
TEST(ValidateExecutable, PredictedOnlyModelFeaturesAreRefusedAtTheirField) {
    const std::vector<std::pair<std::string, std::function<void(ModelConfig&)>>> cases{
        {"/model/mtp_layers", [](ModelConfig& m) { m.mtpLayers = 1; }},
        {"/model/attention_sinks", [](ModelConfig& m) { m.attentionSinks = true; }},
        {"/model/mla/qk_rope_head_dim", [](ModelConfig& m) {
             m.kvHeads = m.heads;
             m.position = PositionEmbedding::Rope;
             m.mla = MlaConfig{0, 8, m.headDim, 0, m.headDim};
         }},
    };
    for (const auto& [where, change] : cases) {
        ModelConfig model = tinyModel();
        change(model);
        ProblemList problems;
        validateExecutable(model, basePlan(), "/plan", problems, "cpu");
        ASSERT_EQ(problems.items().size(), 1u) << where;
        EXPECT_EQ(problems.items()[0].where, where);
    }
}

// DualPipeV runs on the executor (the grid above) but for what it would run as something else: a tied embedding
// (two copies on rank 0 the executor syncs across stages only) and expert parallelism (its pairs hide the
// all-to-all, which the executor runs exposed).
TEST(ValidateExecutable, DualPipeVRefusesTiedEmbeddingsAndExpertParallelism) {
    Plan plan = basePlan();
    plan.pp = 2;
    plan.vpp = 2;
    plan.schedule = Schedule::DualPipeV;
    auto where = [&](const ModelConfig& model, const Plan& p) {
        ProblemList problems;
        validateExecutable(model, p, "/plan", problems, "cpu");
        return problems.empty() ? std::string() : problems.items()[0].where;
    };
    EXPECT_EQ(where(tinyModel(), plan), "");
    ModelConfig tied = tinyModel();
    tied.tiedEmbeddings = true;
    EXPECT_EQ(where(tied, plan), "/model/tied_embeddings");
    Plan ep = plan;
    ep.dp = 2;
    ep.ep = 2;
    ep.globalBatch = 16;
    EXPECT_EQ(where(loadModelRef("tiny-moe", "test"), ep), "/plan/schedule");
}

// Megatron-core's batch-level EP overlap is predicted and exported; the executor runs its all-to-alls exposed, so a
// plan that asks for the overlap is refused at its field rather than measured against a prediction it cannot meet.
TEST(ValidateExecutable, EpOverlapIsRefusedAtItsField) {
    ModelConfig model = loadModelRef("tiny-moe", "test");
    Plan plan = basePlan();
    plan.dp = 2;
    plan.ep = 2;
    ProblemList none;
    validateExecutable(model, plan, "/plan", none, "cpu");
    EXPECT_TRUE(none.empty()) << (none.empty() ? "" : none.items()[0].message);
    plan.framework.moeA2aOverlap = true;
    ProblemList problems;
    validateExecutable(model, plan, "/plan", problems, "cpu");
    ASSERT_EQ(problems.items().size(), 1u);
    EXPECT_EQ(problems.items()[0].where, "/plan/moe_a2a_overlap");
}

// The executor's context parallelism gathers K and V over the group, which p2p and allgather plans run as (and are
// costed as, marked by the in-place loss), or exchanges heads for positions by all-to-all over the whole group (a2a)
// or over groups of cp_a2a_size whose K and V are then gathered (a2a+p2p): every exchange runs.
TEST(ValidateExecutable, EveryCpExchangeRuns) {
    const ModelConfig model = tinyModel();
    Plan plan = basePlan();
    plan.cp = 2;
    for (CpComm comm : {CpComm::P2p, CpComm::AllGather, CpComm::A2a, CpComm::A2aP2p}) {
        plan.cpComm = comm;
        if (comm == CpComm::A2aP2p) {
            plan.cp = 4;
            plan.cpA2a = 2;
        }
        ProblemList none;
        validateExecutable(model, plan, "/plan", none, "cpu");
        EXPECT_TRUE(none.empty()) << (none.empty() ? "" : none.items()[0].message);
    }
}

// validateExecutable: each backend accepts its own precision recipes and refuses the others at
// /plan/precision, naming the backend that does run them; an unknown backend is a problem at --backend.
// The CUDA backend caps, windows and biases scores (ALiBi) in its tiled kernels, built for head widths of 16 to 128:
// Gemma 2's 256-wide heads are refused there at each such field (the CPU backend runs them), its logit cap runs on
// both.
TEST(ValidateExecutable, ScoreRulesOnCudaNeedATiledHeadWidth) {
    const std::vector<std::pair<std::string, std::function<void(ModelConfig&)>>> cases{
        {"/model/attention_softcap", [](ModelConfig& m) { m.attentionSoftcap = 50.0; m.logitSoftcap = 30.0; }},
        {"/model/sliding_window", [](ModelConfig& m) { m.slidingWindow = 8; }},
        {"/model/position_embedding", [](ModelConfig& m) { m.position = PositionEmbedding::Alibi; }},
    };
    for (const auto& [where, change] : cases) {
        ModelConfig model = tinyModel();
        change(model);
        Plan plan = basePlan();
        plan.precision = "mixed";
        ProblemList fits;
        validateExecutable(model, plan, "/plan", fits, "cuda");
        EXPECT_TRUE(fits.empty()) << where;
        model.headDim = 256;
        ProblemList wide;
        validateExecutable(model, plan, "/plan", wide, "cuda");
        ASSERT_EQ(wide.items().size(), 1u) << where;
        EXPECT_EQ(wide.items()[0].where, where);
        EXPECT_NE(wide.items()[0].message.find("--backend cpu"), std::string::npos) << wide.items()[0].message;
        plan.precision = "cpu_fp64";
        ProblemList cpu;
        validateExecutable(model, plan, "/plan", cpu, "cpu");
        EXPECT_TRUE(cpu.empty()) << where;
    }
}

TEST(ValidateExecutable, PrecisionRecipeFollowsTheBackend) {
    const ModelConfig model = tinyModel();
    auto problemsFor = [&](const std::string& precision, const std::string& backend) {
        Plan plan = basePlan();
        plan.precision = precision;
        ProblemList problems;
        validateExecutable(model, plan, "/plan", problems, backend);
        return problems.items();
    };
    for (const char* recipe : {"cpu_fp64", "cpu_fp32"}) {
        EXPECT_TRUE(problemsFor(recipe, "cpu").empty()) << recipe;
        const auto refused = problemsFor(recipe, "cuda");
        ASSERT_EQ(refused.size(), 1u) << recipe;
        EXPECT_EQ(refused[0].where, "/plan/precision");
        EXPECT_NE(refused[0].message.find("--backend cpu"), std::string::npos) << refused[0].message;
    }
    for (const char* recipe : {"mixed", "fp32"}) {
        EXPECT_TRUE(problemsFor(recipe, "cuda").empty()) << recipe;
        const auto refused = problemsFor(recipe, "cpu");
        ASSERT_EQ(refused.size(), 1u) << recipe;
        EXPECT_EQ(refused[0].where, "/plan/precision");
        EXPECT_NE(refused[0].message.find("--backend cuda"), std::string::npos) << refused[0].message;
    }
    const auto neither = problemsFor("bf16_no_master", "cuda");
    ASSERT_EQ(neither.size(), 1u);
    EXPECT_NE(neither[0].message.find("\"bf16_no_master\""), std::string::npos) << neither[0].message;
    // The default backend is cpu, as before the argument existed.
    Plan mixedPlan = basePlan();
    mixedPlan.precision = "mixed";
    ProblemList byDefault;
    validateExecutable(model, mixedPlan, "/plan", byDefault);
    ASSERT_EQ(byDefault.items().size(), 1u);
    EXPECT_EQ(byDefault.items()[0].where, "/plan/precision");
    const auto unknown = problemsFor("cpu_fp64", "rocm");
    ASSERT_EQ(unknown.size(), 1u);
    EXPECT_EQ(unknown[0].where, "--backend");
    // The CUDA backend's 16-bit kernels are bf16: an fp16 plan (half_dtype, Volta) is refused at that field.
    mixedPlan.framework.halfDtype = "fp16";
    ProblemList fp16;
    validateExecutable(model, mixedPlan, "/plan", fp16, "cuda");
    ASSERT_EQ(fp16.items().size(), 1u);
    EXPECT_EQ(fp16.items()[0].where, "/plan/half_dtype");
}

// Hybrid sharding runs (the equivalence grid's _x2 and _x4 cases), where it was once refused by name.
TEST(ValidateExecutable, HybridShardingRuns) {
    Plan plan = basePlan();
    plan.dp = 4;
    plan.microBatch = 1;
    plan.zeroStage = 1;
    plan.zeroReplicas = 2;
    ProblemList problems;
    validateExecutable(tinyModel(), plan, "/plan", problems, "cpu");
    EXPECT_TRUE(problems.items().empty()) << (problems.items().empty() ? "" : problems.items()[0].message);
}

// The executor's loss writes the gradient into the logits, as Transformer Engine's: a plan naming another loss kernel
// would be predicted with a last stage the run does not have, so it is refused at the field; te or unset runs.
TEST(ValidateExecutable, OnlyTheExecutorsOwnLossKernelRuns) {
    Plan plan = basePlan();
    for (const std::string& kind : crossEntropyKinds()) {
        plan.framework.crossEntropy = kind;
        ProblemList problems;
        validateExecutable(tinyModel(), plan, "/plan", problems, "cpu");
        if (kind == "te") {
            EXPECT_TRUE(problems.empty()) << kind;
        } else {
            ASSERT_EQ(problems.items().size(), 1u) << kind;
            EXPECT_EQ(problems.items()[0].where, "/plan/cross_entropy") << kind;
        }
    }
    plan.framework.crossEntropy.reset();
    ProblemList unset;
    validateExecutable(tinyModel(), plan, "/plan", unset, "cpu");
    EXPECT_TRUE(unset.empty());
}

// The executor compiles no graph: a plan costed with a whole-model torch.compile graph's gradients held at once is
// refused at the field; false or unset runs.
TEST(ValidateExecutable, AWholeModelCompiledGraphIsPredictedNotRun) {
    Plan plan = basePlan();
    plan.framework.compileWholeModel = true;
    ProblemList problems;
    validateExecutable(tinyModel(), plan, "/plan", problems, "cpu");
    ASSERT_EQ(problems.items().size(), 1u);
    EXPECT_EQ(problems.items()[0].where, "/plan/compile_whole_model");
    plan.framework.compileWholeModel = false;
    ProblemList off;
    validateExecutable(tinyModel(), plan, "/plan", off, "cpu");
    EXPECT_TRUE(off.empty());
}

// The executor recomputes whole layers, or any of Megatron-core's modules: the attention core, the dense MLP,
// layernorm, an MoE model's moe_act, shared_experts and moe, a latent-attention model's mla_up_proj (a module naming
// what the model lacks is validatePlan's refusal, tests/cost_models/recompute_modules_test.cpp).
TEST(ValidateExecutable, RecomputeModulesTheExecutorRuns) {
    namespace rm = recompute_module;
    Plan plan = basePlan();
    plan.recompute = Recompute::Selective;
    ModelConfig mla = tinyModel();
    mla.kvHeads = mla.heads;
    mla.position = PositionEmbedding::Rope;
    mla.mla = MlaConfig{24, 16, 8, 4, 10};
    const ModelConfig moe = loadModelRef("tiny-moe", "test");
    const std::vector<std::pair<const ModelConfig*, uint8_t>> cases{
        {nullptr, rm::Default}, {nullptr, uint8_t(rm::CoreAttn | rm::Mlp)}, {nullptr, uint8_t(rm::Mlp | rm::Layernorm)},
        {&moe, uint8_t(rm::CoreAttn | rm::MoeAct | rm::Layernorm)}, {&moe, uint8_t(rm::Moe)},
        {&moe, uint8_t(rm::SharedExperts | rm::MoeAct)}, {&mla, uint8_t(rm::MlaUpProj | rm::Mlp)},
        {&mla, uint8_t(rm::MlaUpProj | rm::Layernorm | rm::CoreAttn)}};
    const ModelConfig dense = tinyModel();
    for (const auto& [model, modules] : cases) {
        plan.recomputeModules = modules;
        ProblemList runs;
        validateExecutable(model ? *model : dense, plan, "/plan", runs, "cpu");
        EXPECT_TRUE(runs.empty()) << int(modules) << ": " << (runs.empty() ? "" : runs.items()[0].message);
    }
}

} // namespace
} // namespace tessel::exec
