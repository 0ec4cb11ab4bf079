// Tests of the framework a plan names (cost_models/src/framework.cpp): versions read as dates, each framework's
// defaults for overlap and its other settings by version, and the plan's framework keys (docs/frameworks.md).
#include "test_support.hpp"

#include "tessel/cost/framework.hpp"
#include "tessel/cost/json_reader.hpp"
#include "tessel/cost/plan.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>

namespace tessel {
namespace {

// The year frameworkYear reads from `version` under the framework `name`.
int yearOf(const std::string& name, const std::string& version) {
    FrameworkSettings f;
    f.name = name;
    f.version = version;
    return frameworkYear(f);
}

TEST(Framework, VersionsMapToYears) {
    auto year = [](const std::string& v) { return yearOf("generic", v); };
    EXPECT_EQ(year(""), 0);
    EXPECT_EQ(year("2021"), 2021);
    EXPECT_EQ(year("core_r0.9.0"), 2024);
    EXPECT_EQ(year("core_r0.3.0"), 2023);
    EXPECT_EQ(year("0.12"), 2025);
    EXPECT_EQ(year("24.05"), 2024);
    EXPECT_EQ(year("v2.5"), 2021);
    EXPECT_EQ(year("something"), 0);
}

TEST(Framework, DefaultsFollowTheFrameworkAndItsVersion) {
    FrameworkSettings f;
    f.name = "megatron";
    f.version = "2021";
    OverlapSettings o = resolveOverlap(f, true, 0);
    EXPECT_FALSE(o.overlapGradReduce);  // local DDP
    EXPECT_FALSE(o.asyncTpGradReduce);  // before v2.6
    EXPECT_FALSE(o.overlapP2pComm);     // store_true until 2024
    EXPECT_TRUE(o.fusedKernels);        // Megatron's fused norm, RoPE, bias-SwiGLU and loss kernels
    EXPECT_TRUE(o.gradReduceInFp32);    // arguments.py forces fp32 main grads for --bf16
    EXPECT_FALSE(o.fp8ParamGather);     // --fp8-param-gather is off unless given
    EXPECT_FALSE(o.foreachOptimizer);   // fused Adam (Apex / Transformer Engine)
    EXPECT_FALSE(o.storeParamRemainders); // an fp32 master unless the precision-aware optimizer is asked for
    EXPECT_FALSE(o.checkpointEarlyStop);  // Megatron's own reentrant checkpoint reruns the whole forward
    EXPECT_TRUE(o.gradSyncEachMicroBatch); // no FSDP no_sync unless stated
    EXPECT_EQ(o.defaulted.size(), 14u);
    f.ddpImpl = "torch";
    f.version = "2022";
    o = resolveOverlap(f, true, 0);
    EXPECT_TRUE(o.overlapGradReduce);
    EXPECT_TRUE(o.asyncTpGradReduce);
    f.version = "2024";
    EXPECT_TRUE(resolveOverlap(f, true, 0).overlapP2pComm);
    EXPECT_FALSE(resolveOverlap(f, false, 0).overlapP2pComm); // 1F1B waits on its batched p2p
    // A stated value wins and is not listed as a default.
    f.overlapP2pComm = true;
    o = resolveOverlap(f, false, 0);
    EXPECT_TRUE(o.overlapP2pComm);
    EXPECT_EQ(o.defaulted.size(), 13u);
    // torchtitan runs eager PyTorch ops unless torch.compile (FORMULAS.md §3.4); stated, the plan wins.
    FrameworkSettings titan;
    titan.name = "torchtitan";
    EXPECT_FALSE(resolveOverlap(titan, false, 3).fusedKernels);
    EXPECT_FALSE(fusedKernelsOf(titan));
    EXPECT_TRUE(resolveOverlap(titan, false, 3).checkpointEarlyStop); // torch.utils.checkpoint, non-reentrant
    EXPECT_TRUE(eagerLossOf(titan));
    titan.fusedKernels = true;
    EXPECT_TRUE(resolveOverlap(titan, false, 3).fusedKernels);
    // Its loss: outside the compiled blocks through 2024 (train.py at 9dec370), compiled with them from 2025
    // (build_cross_entropy_loss, bbb1b616e, 2025-04) and today; eager wherever the model is not compiled.
    EXPECT_EQ(crossEntropyOf(titan), "compiled");
    titan.version = "2024";
    EXPECT_TRUE(eagerLossOf(titan));
    titan.version = "2025";
    EXPECT_EQ(crossEntropyOf(titan), "compiled");
    titan.fusedKernels = false;
    EXPECT_TRUE(eagerLossOf(titan));

    FrameworkSettings ds;
    ds.name = "deepspeed";
    EXPECT_TRUE(resolveOverlap(ds, false, 3).overlapGradReduce);
    EXPECT_FALSE(resolveOverlap(ds, false, 2).overlapGradReduce);
    FrameworkSettings nemo;
    nemo.name = "nemo";
    o = resolveOverlap(nemo, true, 1);
    EXPECT_TRUE(o.overlapGradReduce && o.overlapParamGather && o.tpCommOverlap && o.overlapP2pComm);
    // NeMo's performance recipes reduce gradients in bf16 from 2024 (launcher examples, optim.grad_sync_dtype).
    EXPECT_FALSE(o.gradReduceInFp32);
    EXPECT_FALSE(gradReduceInFp32Of(nemo));
    nemo.version = "23.11";
    EXPECT_TRUE(gradReduceInFp32Of(nemo));
    nemo.version = "24.07";
    EXPECT_FALSE(gradReduceInFp32Of(nemo));
    nemo.gradReduceInFp32 = true; // stated, the plan wins
    EXPECT_TRUE(resolveOverlap(nemo, true, 1).gradReduceInFp32);
    // NeMo 2 (containers from 24.09) keeps FP8 weights: fp8_params / fp8_param_gather in its FP8 recipes.
    EXPECT_FALSE(fp8ParamGatherOf(nemo)); // 24.07: NeMo 1's launcher
    nemo.version = "24.09";
    EXPECT_TRUE(fp8ParamGatherOf(nemo));
    nemo.version = "2026";
    EXPECT_TRUE(fp8ParamGatherOf(nemo));
    nemo.version = "";
    EXPECT_TRUE(fp8ParamGatherOf(nemo));
    // NeMo-Framework-Launcher's 24.01-24.07 config.yaml set NVTE_FUSED_ATTN: 0: flash-attn 2, not cuDNN's attention.
    for (const char* v : {"24.01", "24.03.01", "24.07"}) {
        nemo.version = v;
        EXPECT_EQ(attentionKernelDefaultOf(nemo), "flash2") << v;
    }
    for (const char* v : {"23.11", "24.09", "2024", ""}) {
        nemo.version = v;
        EXPECT_EQ(attentionKernelDefaultOf(nemo), "") << v;
    }
    EXPECT_EQ(attentionKernelDefaultOf(ds), "");
    // generic keeps tessel's idealised settings and lists nothing as defaulted.
    EXPECT_TRUE(resolveOverlap(FrameworkSettings{}, false, 0).defaulted.empty());
}

TEST(Framework, AVersionWithoutADateIsNamed) {
    // The defaults follow the version's date: text tessel reads no date from is a problem, not the current defaults.
    for (const char* dated : {"2024", "24.05", "core_r0.9.0", "v3.0", "0.14", "24.07.01"}) {
        ProblemList problems;
        parsePlan(nlohmann::json{{"framework", "megatron"}, {"framework_version", dated}}, "/plan", problems);
        EXPECT_TRUE(problems.empty()) << dated;
        EXPECT_TRUE(frameworkVersionDated("megatron", dated)) << dated;
    }
    for (const char* undated : {"bogus", "-1", "1800", "latest"}) {
        ProblemList problems;
        parsePlan(nlohmann::json{{"framework", "megatron"}, {"framework_version", undated}}, "/plan", problems);
        ASSERT_EQ(problems.items().size(), 1u) << undated;
        EXPECT_EQ(problems.items()[0].where, "/plan/framework_version");
        EXPECT_NE(problems.items()[0].message.find("no date"), std::string::npos);
    }
}

TEST(Framework, AReleaseNumberIsReadAsThePlansFrameworksOwn) {
    // Megatron-core 0.6 is 2024; DeepSpeed 0.6.0 was tagged 2022-03-07, 0.13.0 2024-01-19, 0.3.15 in 2021-04 (0.3.0
    // 2020-09); PyTorch 2.1 was 2023-10, 1.13 2022-10. Before, every 0.x was read as a Megatron-core release and
    // every 2.x as Megatron-LM v2 (2021).
    EXPECT_EQ(yearOf("megatron", "0.6.0"), 2024);
    EXPECT_EQ(yearOf("deepspeed", "0.6.0"), 2022);
    EXPECT_EQ(yearOf("deepspeed", "v0.13.1"), 2024);
    EXPECT_EQ(yearOf("deepspeed", "0.3.15"), 2020);
    EXPECT_EQ(yearOf("deepspeed", "2022"), 2022);
    EXPECT_EQ(yearOf("fsdp", "2.1"), 2023);
    EXPECT_EQ(yearOf("fsdp", "1.13.1"), 2022);
    EXPECT_EQ(yearOf("torchtitan", "2.6"), 2025);
    EXPECT_EQ(yearOf("megatron", "v2.5"), 2021);
    // Another framework's release form carries no date for this one: named at the key, with this framework's form.
    for (const auto& [name, undated] : {std::pair{"deepspeed", "core_r0.9.0"}, std::pair{"deepspeed", "v3.0"},
                                        std::pair{"torchtitan", "0.1.0"}, std::pair{"fsdp", "core_r0.9.0"}}) {
        EXPECT_FALSE(frameworkVersionDated(name, undated)) << name << " " << undated;
        ProblemList problems;
        parsePlan(nlohmann::json{{"framework", name}, {"framework_version", undated}}, "/plan", problems);
        ASSERT_EQ(problems.items().size(), 1u) << name << " " << undated;
        EXPECT_EQ(problems.items()[0].where, "/plan/framework_version");
        EXPECT_NE(problems.items()[0].message.find(std::string("for ") + name), std::string::npos) << problems.items()[0].message;
    }
    ProblemList problems;
    parsePlan(nlohmann::json{{"framework", "deepspeed"}, {"framework_version", "bogus"}}, "/plan", problems);
    ASSERT_EQ(problems.items().size(), 1u);
    EXPECT_NE(problems.items()[0].message.find("a DeepSpeed release (0.6.0)"), std::string::npos) << problems.items()[0].message;
}

TEST(Framework, PlanKeysRoundTripAndBadValuesAreNamed) {
    nlohmann::json doc{{"framework", "megatron"},  {"framework_version", "core_r0.8.0"},
                       {"ddp_impl", "torch"},      {"overlap_param_gather", true},
                       {"tp_comm_overlap", false}, {"attention_unpad", true},
                       {"train_metric_losses", 2}, {"te_op_fuser", true}};
    ProblemList problems;
    Plan p = parsePlan(doc, "/plan", problems);
    ASSERT_TRUE(problems.empty());
    EXPECT_EQ(p.framework.name, "megatron");
    EXPECT_EQ(*p.framework.ddpImpl, "torch");
    EXPECT_TRUE(*p.framework.overlapParamGather);
    EXPECT_FALSE(*p.framework.tpCommOverlap);
    EXPECT_FALSE(p.framework.overlapGradReduce.has_value());
    EXPECT_TRUE(*p.framework.attentionUnpad);
    const nlohmann::json back = planToJson(p);
    EXPECT_EQ(back["attention_unpad"], true);
    EXPECT_TRUE(teOpFuserOf(p.framework));
    EXPECT_EQ(back["te_op_fuser"], true);
    EXPECT_EQ(trainMetricLossesOf(p.framework), 2);
    EXPECT_EQ(back["train_metric_losses"], 2);
    EXPECT_EQ(back["framework_version"], "core_r0.8.0");
    EXPECT_EQ(back["overlap_param_gather"], true);
    EXPECT_FALSE(back.contains("overlap_grad_reduce"));
    ProblemList again;
    EXPECT_EQ(planToJson(parsePlan(back, "/plan", again)), back);

    ProblemList bad;
    parsePlan(nlohmann::json{{"framework", "jax"}, {"ddp_impl", "apex"}, {"overlap_grad_reduce", "yes"}, {"attention_unpad", 1}},
              "/plan", bad);
    std::vector<std::string> where;
    for (const auto& pr : bad.items()) where.push_back(pr.where);
    EXPECT_NE(std::find(where.begin(), where.end(), "/plan/framework"), where.end());
    EXPECT_NE(std::find(where.begin(), where.end(), "/plan/ddp_impl"), where.end());
    EXPECT_NE(std::find(where.begin(), where.end(), "/plan/overlap_grad_reduce"), where.end());
    EXPECT_NE(std::find(where.begin(), where.end(), "/plan/attention_unpad"), where.end());
}

// DeepSpeed's contiguous_gradients by version and stage: off by default before v0.5.0 (2021-08), forced off at ZeRO-1
// from v0.4.4 to v0.12 whatever is stated, always on with the optimizer on the host; a plan key under its config name.
TEST(Framework, DeepSpeedsContiguousGradientsFollowTheVersion) {
    FrameworkSettings f;
    f.name = "deepspeed";
    auto at = [&](const std::string& version, int stage, bool offload = false) {
        f.version = version;
        return deepSpeedContiguousGradientsOf(f, stage, offload);
    };
    EXPECT_FALSE(at("0.3.15", 2));
    EXPECT_FALSE(at("0.4.2", 2));
    EXPECT_TRUE(at("0.5.0", 2));
    EXPECT_TRUE(at("2022", 2));
    EXPECT_TRUE(at("", 2));
    EXPECT_FALSE(at("0.6.0", 1));
    EXPECT_FALSE(at("2023", 1));
    EXPECT_TRUE(at("0.13.0", 1));
    EXPECT_TRUE(at("2022", 1, true));
    f.contiguousGradients = true;
    EXPECT_FALSE(at("2022", 1)); // the engine overrode it
    EXPECT_TRUE(at("2020", 2));
    f.contiguousGradients = false;
    EXPECT_FALSE(at("", 2));
    // ZeRO-1 all-reduces without it, but for DeepSpeed 0.3's stage1.py; ZeRO-3 and other frameworks never.
    f.contiguousGradients.reset();
    f.version = "0.6.0";
    EXPECT_TRUE(deepSpeedAllReducesGradientsOf(f, 1, false));
    f.version = "0.3.15";
    EXPECT_FALSE(deepSpeedAllReducesGradientsOf(f, 1, false));
    EXPECT_TRUE(deepSpeedAllReducesGradientsOf(f, 2, false));
    EXPECT_FALSE(deepSpeedAllReducesGradientsOf(f, 3, false));
    f.name = "megatron";
    EXPECT_FALSE(deepSpeedAllReducesGradientsOf(f, 1, false));
    ProblemList problems;
    Plan p = parsePlan(nlohmann::json{{"framework", "deepspeed"}, {"contiguous_gradients", false}}, "/plan", problems);
    ASSERT_TRUE(problems.empty());
    EXPECT_EQ(p.framework.contiguousGradients, std::optional<bool>(false));
    EXPECT_EQ(planToJson(p).at("contiguous_gradients"), false);
}

// gradient_accumulation_fusion: on unless the plan says, read and written under Megatron-LM's argument name, and a
// value that is not a boolean named at its key.
TEST(Framework, GradientAccumulationFusionIsAPlanKey) {
    ProblemList problems;
    Plan p = parsePlan(nlohmann::json{{"framework", "megatron"}}, "/plan", problems);
    ASSERT_TRUE(problems.empty());
    EXPECT_TRUE(gradAccumulationFusionOf(p.framework));
    EXPECT_FALSE(planToJson(p).contains("gradient_accumulation_fusion"));
    p = parsePlan(nlohmann::json{{"framework", "megatron"}, {"gradient_accumulation_fusion", false}}, "/plan", problems);
    ASSERT_TRUE(problems.empty());
    EXPECT_FALSE(gradAccumulationFusionOf(p.framework));
    EXPECT_EQ(planToJson(p).at("gradient_accumulation_fusion"), false);
    parsePlan(nlohmann::json{{"framework", "megatron"}, {"gradient_accumulation_fusion", "no"}}, "/plan", problems);
    ASSERT_EQ(problems.items().size(), 1u);
    EXPECT_EQ(problems.items()[0].where, "/plan/gradient_accumulation_fusion");
}

} // namespace
} // namespace tessel
