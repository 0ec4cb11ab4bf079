// Importers of runs tessel did not execute: Megatron-LM logs (small hand-checkable logs in the format of
// arguments.py / training.py / utils.py) and PyTorch profiler traces (hand-sized traces, and the committed real one).
#include "tessel/sim/import.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/sim/compare.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace tessel::sim {
namespace {

std::string readFile(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// A two-stage log in Megatron-LM's own formats: 4 layers, pp 2, dp 2, two memory reports on one line (as
// concurrent prints leave them), an interval with a skipped iteration.
std::string smallLog() {
    return "------------------------ arguments ------------------------\n"
           "  bf16 ............................................ True\n"
           "  data_parallel_size .............................. 2\n"
           "  decoder_last_pipeline_num_layers ................ 1\n"
           "  ffn_hidden_size ................................. 256\n"
           "  global_batch_size ............................... 8\n"
           "  hidden_size ..................................... 64\n"
           "  micro_batch_size ................................ 1\n"
           "  num_attention_heads ............................. 4\n"
           "  num_layers ...................................... 4\n"
           "  pipeline_model_parallel_size .................... 2\n"
           "  recompute_granularity ........................... full\n"
           "  recompute_num_layers ............................ 1\n"
           "  seq_length ...................................... 128\n"
           "  some_new_knob ................................... 3\n"
           "  tensor_model_parallel_size ...................... 1\n"
           "  use_distributed_optimizer ....................... True\n"
           "  use_flash_attn .................................. True\n"
           "-------------------- end of arguments ---------------------\n"
           " > padded vocab (size: 1000) with 24 dummy tokens (new size: 1024)\n"
           " iteration        1/      10 | elapsed time per iteration (ms): 900.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
           " iteration        2/      10 | elapsed time per iteration (ms): 500.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
           "[Rank 0] (after 2 iterations) memory (MB) | allocated: 10.0 | max allocated: 100.0 | reserved: 120.0 | max reserved: 128.0"
           "[Rank 2] (after 2 iterations) memory (MB) | allocated: 10.0 | max allocated: 50.0 | reserved: 60.0 | max reserved: 64.0\n"
           " iteration        3/      10 | elapsed time per iteration (ms): 110.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
           " iteration        4/      10 | elapsed time per iteration (ms): 999.0 | number of skipped iterations:   1 | number of nan iterations:   0 |\n"
           " iteration        5/      10 | elapsed time per iteration (ms): 100.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
           " iteration        6/      10 | elapsed time per iteration (ms): 120.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n";
}

ClusterConfig cluster(const char* name = "dgx-a100-80g") { return loadClusterRef(name, "--cluster"); }

// smallLog() with more argument lines (each "  name ..... value\n") before its tensor_model_parallel_size line,
// imported.
ImportedRun importWithArgs(const std::string& args, const std::string& file) {
    std::string log = smallLog();
    log.insert(log.find("  tensor_model_parallel_size ...................... 1\n"), args);
    return importMegatronLog(parseMegatronLog(log, file), cluster());
}

// The importer expressed `key` in the scenario, so no warning names it.
void expectNotWarned(const ImportedRun& run, const std::string& key) {
    for (const auto& w : run.warnings) EXPECT_EQ(w.find(key), std::string::npos) << w;
}

TEST(MegatronImport, TheBlockRecomputeMethodIsPartialRecompute) {
    // --recompute-method block --recompute-num-layers 1 on 2 layers a stage: the plan's recompute_layers, no warning.
    std::string text = smallLog();
    const std::string at = "  recompute_num_layers ............................ 1\n";
    ASSERT_NE(text.find(at), std::string::npos);
    text.replace(text.find(at), at.size(), "  recompute_method ................................ block\n" + at);
    const ImportedRun run = importMegatronLog(parseMegatronLog(text, "block.log"), cluster());
    EXPECT_EQ(run.scenario["plan"]["recompute"], "full");
    EXPECT_EQ(run.scenario["plan"]["recompute_layers"], 1);
    for (const auto& w : run.warnings) EXPECT_EQ(w.find("recompute"), std::string::npos) << w;
    EXPECT_NO_THROW(finishScenario(parseScenario(run.scenario, "imported")));
}

TEST(MegatronImport, ArgumentsIterationsAndMemoryBecomeAScenarioAndARun) {
    const MegatronLog log = parseMegatronLog(smallLog(), "small.log");
    EXPECT_EQ(log.args.at("num_layers"), "4");
    EXPECT_EQ(log.argLines.at("num_layers"), 10);
    EXPECT_EQ(*log.paddedVocab, 1024);
    ASSERT_EQ(log.iterations.size(), 6u);
    ASSERT_EQ(log.memory.size(), 2u);   // both reports of the shared line

    const ImportedRun run = importMegatronLog(log, cluster());
    const auto& plan = run.scenario["plan"];
    EXPECT_EQ(plan["pp"], 2);
    EXPECT_EQ(plan["dp"], 2);
    EXPECT_EQ(plan["zero_stage"], 1);
    EXPECT_EQ(plan["recompute"], "full");
    EXPECT_EQ(plan["last_stage_layers"], 1);   // Megatron's --decoder-last-pipeline-num-layers
    EXPECT_EQ(plan["flash_attention"], true);
    EXPECT_EQ(plan["precision"], "megatron");
    EXPECT_EQ(run.scenario["model"]["vocab"], 1024);
    EXPECT_EQ(run.scenario["model"]["seq_len"], 128);
    // 4 of the 8 GPUs of a DGX node.
    EXPECT_EQ(run.scenario["cluster"]["gpus_per_node"], 4);
    // Warm-up (iterations 1-2) and the interval with a skipped iteration are left out: median of 110, 100, 120 ms.
    EXPECT_DOUBLE_EQ(run.stepSeconds, 0.110);
    EXPECT_DOUBLE_EQ(run.trace["otherData"]["step_seconds"].get<double>(), 0.110);
    // Rank 2 is on the second stage (world 4, pp 2); MB = 2^20 bytes.
    ASSERT_EQ(run.memory["ranks"].size(), 2u);
    EXPECT_EQ(run.memory["ranks"][1]["stage"], 1);
    EXPECT_DOUBLE_EQ(run.memory["ranks"][0]["peak_total_bytes"].get<double>(), 100.0 * 1024 * 1024);
    // What tessel cannot express is named, never dropped: an unknown argument and partial recompute.
    std::string warnings;
    for (const auto& w : run.warnings) warnings += w + "\n";
    EXPECT_NE(warnings.find("some_new_knob = 3 (line 15)"), std::string::npos) << warnings;
    EXPECT_NE(warnings.find("recompute_num_layers = 1"), std::string::npos) << warnings;
    // The written scenario loads as `tessel predict` reads it.
    const Scenario s = parseScenario(run.scenario, "imported");
    EXPECT_NO_THROW(finishScenario(s));
    // And the run folder opens as a measured run (compare, GUI): step from otherData, memory per stage.
    MeasuredRun measured = MeasuredRun::fromTrace(run.trace, "trace.json");
    measured.setMemory(run.memory, "memory.json");
    EXPECT_DOUBLE_EQ(measured.stepSeconds(), 0.110);
    EXPECT_DOUBLE_EQ(measured.stagePeakBytes().at(1), 50.0 * 1024 * 1024);
}

TEST(MegatronImport, BfloatMainGradientsFollowGradReduceInBf16) {
    std::string log = smallLog();
    const std::string at = "  bf16 ............................................ True\n";
    // bf16 alone: fp32 main gradients (arguments.py forces accumulate_allreduce_grads_in_fp32), as the recipe says.
    std::string fp32 = log;
    fp32.insert(fp32.find(at) - 0, "  accumulate_allreduce_grads_in_fp32 .............. True\n");
    ImportedRun run = importMegatronLog(parseMegatronLog(fp32, "fp32.log"), cluster());
    EXPECT_FALSE(run.scenario["plan"].contains("grad_reduce_in_fp32") && !run.scenario["plan"]["grad_reduce_in_fp32"].get<bool>());
    for (const auto& w : run.warnings) EXPECT_EQ(w.find("accumulate_allreduce_grads_in_fp32"), std::string::npos) << w;
    // --grad-reduce-in-bf16: bf16 main gradients, reduced in bf16.
    std::string bf = log;
    bf.insert(bf.find(at) + at.size(), "  grad_reduce_in_bf16 ............................. True\n");
    run = importMegatronLog(parseMegatronLog(bf, "bf.log"), cluster());
    EXPECT_EQ(run.scenario["plan"]["grad_reduce_in_fp32"], false);
    const Scenario s = parseScenario(run.scenario, "imported");
    EXPECT_EQ(precisionRecipeOf(s.plan).gradBytes, 2);
    for (const auto& w : run.warnings) EXPECT_EQ(w.find("grad_reduce_in_bf16"), std::string::npos) << w;
}

// --use-tp-pp-dp-mapping, which tessel's Megatron export writes for a tp-cp-ep-pp-dp plan, is read back as that rank
// order (it had been passed over as an argument that decides nothing), so export and import round-trip the layout.
TEST(MegatronImport, TpPpDpMappingIsThePlansRankOrder) {
    std::string log = smallLog();
    const std::string at = "  bf16 ............................................ True\n";
    ImportedRun run = importMegatronLog(parseMegatronLog(log, "plain.log"), cluster());
    EXPECT_EQ(parseScenario(run.scenario, "plain").plan.rankOrderString(), "tp-cp-ep-dp-pp");
    log.insert(log.find(at) + at.size(), "  use_tp_pp_dp_mapping ............................ True\n");
    run = importMegatronLog(parseMegatronLog(log, "mapped.log"), cluster());
    EXPECT_EQ(parseScenario(run.scenario, "mapped").plan.rankOrderString(), "tp-cp-ep-pp-dp");
    for (const auto& w : run.warnings) EXPECT_EQ(w.find("use_tp_pp_dp_mapping"), std::string::npos) << w;
}

// --cross-entropy-loss-fusion with --cross-entropy-fusion-impl te: the plan's cross_entropy "te"; native is "fused";
// without the flag, "unfused".
TEST(MegatronImport, TheCrossEntropyFlagsNameTheLossKernel) {
    const std::string at = "  use_distributed_optimizer ....................... True\n";
    auto import = [&](const std::string& impl) {
        std::string log = smallLog();
        log.insert(log.find(at), "  cross_entropy_fusion_impl ....................... " + impl + "\n");
        log.insert(log.find(at), "  cross_entropy_loss_fusion ....................... True\n");
        return importMegatronLog(parseMegatronLog(log, impl + ".log"), cluster());
    };
    for (const auto& [impl, kernel] : {std::pair<std::string, std::string>{"te", "te"}, {"native", "fused"}}) {
        const ImportedRun run = import(impl);
        EXPECT_EQ(run.scenario["plan"]["cross_entropy"], kernel) << impl;
        EXPECT_EQ(crossEntropyOf(parseScenario(run.scenario, "imported").plan.framework), kernel) << impl;
        for (const auto& w : run.warnings) EXPECT_EQ(w.find("cross_entropy"), std::string::npos) << w;
    }
    EXPECT_FALSE(importMegatronLog(parseMegatronLog(smallLog(), "plain.log"), cluster()).scenario["plan"].contains("cross_entropy"));
    std::string off = smallLog();
    off.insert(off.find(at), "  cross_entropy_loss_fusion ....................... False\n");
    EXPECT_EQ(importMegatronLog(parseMegatronLog(off, "off.log"), cluster()).scenario["plan"]["cross_entropy"], "unfused");
}

// --use-precision-aware-optimizer with the distributed optimizer: the master as remainders unless
// --no-store-param-remainders (store_param_remainders False).
TEST(MegatronImport, ThePrecisionAwareOptimizerKeepsRemainders) {
    const std::string at = "  use_distributed_optimizer ....................... True\n";
    std::string log = smallLog();
    log.insert(log.find(at), "  use_precision_aware_optimizer ................... True\n");
    ImportedRun run = importMegatronLog(parseMegatronLog(log, "pao.log"), cluster());
    EXPECT_EQ(run.scenario["plan"]["store_param_remainders"], true);
    Scenario s = parseScenario(run.scenario, "imported");
    EXPECT_EQ(s.plan.zeroStage, 1);
    EXPECT_EQ(precisionRecipeOf(s.plan).masterBytes, 2);
    for (const auto& w : run.warnings) EXPECT_EQ(w.find("precision_aware"), std::string::npos) << w;
    log.insert(log.find(at), "  store_param_remainders .......................... False\n");
    run = importMegatronLog(parseMegatronLog(log, "pao-full.log"), cluster());
    EXPECT_EQ(run.scenario["plan"]["store_param_remainders"], false);
    EXPECT_FALSE(importMegatronLog(parseMegatronLog(smallLog(), "plain.log"), cluster()).scenario["plan"].contains("store_param_remainders"));
}

// --fp8-recipe: the plan's fp8_recipe (Transformer Engine's scaling) beside precision fp8; a recipe tessel does not
// cost is said and read as delayed; without FP8 the setting says nothing about the run.
TEST(MegatronImport, Fp8RecipeIsThePlansScaling) {
    const std::string fp8 = "  fp8 ............................................. hybrid\n";
    auto importOnH100 = [](const std::string& args, const std::string& file) {
        std::string log = smallLog();
        log.insert(log.find("  tensor_model_parallel_size ...................... 1\n"), args);
        return importMegatronLog(parseMegatronLog(log, file), cluster("dgx-h100-80g")); // FP8 needs Hopper
    };
    ImportedRun run = importOnH100(fp8 + "  fp8_recipe ...................................... tensorwise\n", "cs.log");
    EXPECT_EQ(run.scenario["plan"]["precision"], "fp8");
    EXPECT_EQ(run.scenario["plan"]["fp8_recipe"], "tensorwise");
    EXPECT_EQ(fp8RecipeOf(parseScenario(run.scenario, "imported").plan.framework), "tensorwise");
    expectNotWarned(run, "fp8_recipe");
    run = importOnH100(fp8 + "  fp8_recipe ...................................... custom\n", "custom.log");
    EXPECT_FALSE(run.scenario["plan"].contains("fp8_recipe"));
    bool said = false;
    for (const auto& w : run.warnings) said |= w.find("fp8_recipe = custom") != std::string::npos;
    EXPECT_TRUE(said);
    run = importWithArgs("  fp8_recipe ...................................... delayed\n", "bf16.log");
    EXPECT_FALSE(run.scenario["plan"].contains("fp8_recipe"));
    expectNotWarned(run, "fp8_recipe");
}

// --fp4-format e2m1: NVFP4, Transformer Engine's NVFP4BlockScaling, with --fp4-param-gather where the log has it.
TEST(MegatronImport, Fp4FormatIsNvfp4) {
    std::string log = smallLog();
    log.insert(log.find("  tensor_model_parallel_size ...................... 1\n"),
               "  fp4 ............................................. e2m1\n"
               "  fp4_param_gather ................................ True\n"
               "  first_last_layers_bf16 .......................... True\n"
               "  num_layers_at_start_in_bf16 ..................... 1\n"
               "  num_layers_at_end_in_bf16 ....................... 2\n");
    const ImportedRun run = importMegatronLog(parseMegatronLog(log, "fp4.log"), cluster("dgx-b200"));
    EXPECT_EQ(run.scenario["plan"]["precision"], "nvfp4");
    EXPECT_EQ(run.scenario["plan"]["num_layers_at_end_in_bf16"], 2);
    EXPECT_EQ(parseScenario(run.scenario, "imported").plan.bf16LayersAtEnd, 2);
    EXPECT_EQ(run.scenario["plan"]["fp4_param_gather"], true);
    EXPECT_TRUE(fp4ParamGatherOf(parseScenario(run.scenario, "imported").plan.framework));
    expectNotWarned(run, "fp4");
}

// --squared-relu: the model's squared_relu MLP, not GELU.
TEST(MegatronImport, SquaredReluIsTheModelsActivation) {
    const ImportedRun run = importWithArgs("  squared_relu .................................... True\n", "relu2.log");
    EXPECT_EQ(run.scenario["model"]["activation"], "squared_relu");
    EXPECT_EQ(parseScenario(run.scenario, "imported").model.activation, Activation::SquaredRelu);
    expectNotWarned(run, "squared_relu");
}

// Megatron-DeepSpeed logs its position enum ("PositionEmbeddingType.alibi" in BLOOM's logs): ALiBi and rotary are
// read as themselves, not as learned positions with a warning.
TEST(MegatronImport, PositionEmbeddingEnumsAreReadAsThemselves) {
    for (const auto& [logged, want] : std::vector<std::pair<std::string, std::string>>{
             {"PositionEmbeddingType.alibi", "alibi"}, {"PositionEmbeddingType.rotary", "rope"},
             {"PositionEmbeddingType.absolute", "learned"}, {"rope", "rope"}}) {
        const ImportedRun run = importWithArgs("  position_embedding_type ......................... " + logged + "\n", "pos.log");
        EXPECT_EQ(run.scenario["model"]["position_embedding"], want) << logged;
        expectNotWarned(run, "position_embedding_type");
    }
}

// --rotary-percent: the part of each head RoPE rotates (Pythia's 0.25); its default 1.0, or beside learned
// positions, says nothing.
TEST(MegatronImport, RotaryPercentIsTheModels) {
    const std::string rope = "  position_embedding_type ......................... rope\n";
    const ImportedRun run = importWithArgs(rope + "  rotary_percent .................................. 0.25\n", "pct.log");
    const ModelConfig m = parseScenario(run.scenario, "imported").model;
    EXPECT_DOUBLE_EQ(m.rotaryPercent, 0.25);
    EXPECT_EQ(m.rotaryDim(), 4); // 64 / 4 heads = 16 columns a head
    expectNotWarned(run, "rotary");
    for (const std::string& args : {rope + "  rotary_percent .................................. 1.0\n",
                                    std::string("  rotary_percent .................................. 0.5\n")})
        EXPECT_FALSE(importWithArgs(args, "pct.log").scenario["model"].contains("rotary_percent")) << args;
}

// --window-size (4095, 0): a causal window of 4096 keys in every layer; --window-attn-skip-freq N gives every N-th
// layer (1-based) full attention, a 0/1 list (1: windowed) names them: the model's full_attention_layers.
TEST(MegatronImport, WindowSizeIsTheModelsSlidingWindow) {
    const std::string window = "  window_size ..................................... (4095, 0)\n";
    const ImportedRun run = importWithArgs(window, "window.log");
    EXPECT_EQ(parseScenario(run.scenario, "imported").model.slidingWindow, 4096);
    expectNotWarned(run, "window");
    const ImportedRun skipped = importWithArgs(window + "  window_attn_skip_freq ........................... 2\n", "skip.log");
    const ModelConfig every2 = parseScenario(skipped.scenario, "imported").model;
    EXPECT_EQ(every2.slidingWindow, 4096);
    EXPECT_EQ(every2.fullAttentionLayers, (std::vector<int>{1, 3})) << skipped.scenario["model"].dump(); // numbers 2, 4 of 4
    expectNotWarned(skipped, "window");
    const ImportedRun listed = importWithArgs(window + "  window_attn_skip_freq ........................... [1, 0, 1, 1]\n",
                                              "list.log");
    EXPECT_EQ(parseScenario(listed.scenario, "imported").model.fullAttentionLayers, (std::vector<int>{1}));
    // Every layer full: no window; a pattern of the wrong length names the argument.
    EXPECT_FALSE(importWithArgs(window + "  window_attn_skip_freq ........................... 1\n", "one.log")
                     .scenario["model"].contains("sliding_window"));
    EXPECT_THROW(importWithArgs(window + "  window_attn_skip_freq ........................... [1, 0]\n", "short.log"),
                 std::exception);
    EXPECT_FALSE(importWithArgs("  window_size ..................................... None\n", "none.log")
                     .scenario["model"].contains("sliding_window"));
}

// --num-experts with --moe-shared-expert-intermediate-size: the model's routed and shared experts.
TEST(MegatronImport, SharedExpertSizeIsTheModelsSharedExperts) {
    for (const auto& [logged, want] : std::vector<std::pair<std::string, int64_t>>{{"512", 512}, {"None", 0}}) {
        const ImportedRun run = importWithArgs("  num_experts ..................................... 4\n"
                                               "  moe_ffn_hidden_size ............................. 128\n"
                                               "  moe_shared_expert_intermediate_size ............. " + logged + "\n",
                                               "moe.log");
        const ModelConfig m = parseScenario(run.scenario, "imported").model;
        ASSERT_TRUE(m.moe.has_value()) << logged;
        EXPECT_EQ(m.moe->sharedFfnHidden, want) << logged;
        expectNotWarned(run, "moe_shared");
    }
}

// DeepSeek-style arguments: --multi-latent-attention with its widths, --moe-layer-freq as the list Megatron prints,
// group-limited routing. Without MLA its widths' defaults (printed in every log) say nothing and are not warned.
TEST(MegatronImport, LatentAttentionDenseLayersAndRouterGroupsAreTheModels) {
    const std::string moe = "  num_experts ..................................... 4\n"
                            "  moe_ffn_hidden_size ............................. 128\n"
                            "  moe_layer_freq .................................. [0, 1, 1, 1]\n"
                            "  moe_router_num_groups ........................... 2\n"
                            "  moe_router_group_topk ........................... 1\n"
                            "  moe_router_topk ................................. 2\n"
                            "  position_embedding_type ......................... rope\n";
    const std::string mla = "  multi_latent_attention .......................... True\n"
                            "  q_lora_rank ..................................... 32\n"
                            "  kv_lora_rank .................................... 16\n"
                            "  qk_head_dim ..................................... 16\n"
                            "  qk_pos_emb_head_dim ............................. 8\n"
                            "  v_head_dim ...................................... 16\n"
                            "  mtp_num_layers .................................. 1\n";
    const ImportedRun run = importWithArgs(moe + mla, "dsv3.log");
    const ModelConfig m = parseScenario(run.scenario, "imported").model;
    ASSERT_TRUE(m.moe.has_value());
    EXPECT_EQ(m.moe->denseLayers, (std::vector<int>{0}));
    EXPECT_EQ(m.moe->routingGroups, 2);
    EXPECT_EQ(m.moe->groupsPerToken, 1);
    ASSERT_TRUE(m.mla.has_value());
    EXPECT_EQ(m.mla->qLoraRank, 32);
    EXPECT_EQ(m.mla->qkHeadDim(), 24);
    EXPECT_EQ(m.kvHeads, m.heads);
    EXPECT_EQ(m.mtpLayers, 1);
    for (const char* key : {"moe_layer_freq", "moe_router_num_groups", "lora_rank", "qk_head_dim", "v_head_dim", "mtp_num_layers"})
        expectNotWarned(run, key);
    // An integer frequency: every N-th layer an expert layer; MLA off: its default widths unwarned.
    const std::string defaults = "  multi_latent_attention .......................... False\n"
                                 "  kv_lora_rank .................................... 32\n"
                                 "  qk_head_dim ..................................... 128\n"
                                 "  moe_layer_freq .................................. 2\n"
                                 "  mtp_num_layers .................................. None\n";
    const ImportedRun plain = importWithArgs("  num_experts ..................................... 4\n" + defaults, "freq.log");
    EXPECT_EQ(parseScenario(plain.scenario, "imported").model.moe->denseLayers, (std::vector<int>{1, 3}));
    EXPECT_FALSE(parseScenario(plain.scenario, "imported").model.mla.has_value());
    EXPECT_EQ(parseScenario(plain.scenario, "imported").model.mtpLayers, 0);
    for (const char* key : {"kv_lora_rank", "qk_head_dim", "moe_layer_freq"}) expectNotWarned(plain, key);
}

// expert_tensor_parallel_size: the plan's etp where it differs from tp (MoE parallel folding); tp's own is the default.
TEST(MegatronImport, ExpertTensorParallelSizeIsThePlansEtp) {
    for (const auto& [logged, want] : std::vector<std::pair<std::string, int>>{{"2", 2}, {"1", 0}, {"None", 0}}) {
        const ImportedRun run = importWithArgs("  expert_tensor_parallel_size ..................... " + logged + "\n"
                                               "  num_experts ..................................... 4\n"
                                               "  moe_ffn_hidden_size ............................. 128\n",
                                               "etp.log");
        if (want > 0) EXPECT_EQ(run.scenario["plan"]["etp"], want) << logged;
        else EXPECT_FALSE(run.scenario["plan"].contains("etp")) << logged;
        expectNotWarned(run, "expert_tensor_parallel_size");
    }
}

// moe_token_dispatcher_type alltoall or flex: the plan's dispatcher; allgather is not one tessel costs (warned).
TEST(MegatronImport, EpOverlapIsThePlansMoeA2aOverlap) {
    const std::string moe = "  overlap_moe_expert_parallel_comm ................ True\n"
                            "  moe_token_dispatcher_type ....................... alltoall\n"
                            "  expert_model_parallel_size ...................... 2\n"
                            "  num_experts ..................................... 4\n"
                            "  moe_ffn_hidden_size ............................. 128\n";
    // smallLog's own plan (full recompute, pp 2 without virtual stages) is one Megatron-core refuses the overlap
    // for: the flag is read into the plan, whose check names it.
    try {
        importWithArgs(moe, "overlap.log");
        ADD_FAILURE() << "imported a plan Megatron-core cannot run";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("/plan/moe_a2a_overlap"), std::string::npos) << e.what();
    }
    // Without pipelining (the same 4 ranks as dp 4) and with selective recompute it runs: the plan's
    // moe_a2a_overlap, no warning.
    std::string log = smallLog();
    auto replace = [&](const std::string& from, const std::string& to) {
        const size_t at = log.find(from);
        ASSERT_NE(at, std::string::npos) << from;
        log.replace(at, from.size(), to);
    };
    replace("  pipeline_model_parallel_size .................... 2\n", "  pipeline_model_parallel_size .................... 1\n");
    replace("  data_parallel_size .............................. 2\n", "  data_parallel_size .............................. 4\n");
    replace("  decoder_last_pipeline_num_layers ................ 1\n", "");
    replace("  recompute_granularity ........................... full\n", "  recompute_granularity ........................... selective\n");
    replace("  recompute_num_layers ............................ 1\n", moe);
    const ImportedRun run = importMegatronLog(parseMegatronLog(log, "overlap.log"), cluster());
    EXPECT_EQ(run.scenario["plan"]["moe_a2a_overlap"], true);
    expectNotWarned(run, "overlap_moe_expert_parallel_comm");
}

// --recompute-modules under selective recompute (printed as a Python list): the plan's recompute_modules; a module
// naming what the model lacks (Megatron-core skips it) or one tessel does not model is dropped and said.
TEST(MegatronImport, RecomputeModulesAreThePlansUnderSelective) {
    auto importModules = [](const std::string& modules) {
        std::string log = smallLog();
        const std::string from = "  recompute_granularity ........................... full\n";
        log.replace(log.find(from), from.size(),
                    "  recompute_granularity ........................... selective\n"
                    "  num_experts ..................................... 4\n"
                    "  moe_ffn_hidden_size ............................. 128\n"
                    "  moe_grouped_gemm ................................ True\n"
                    "  recompute_modules ............................... " + modules + "\n");
        return importMegatronLog(parseMegatronLog(log, "modules.log"), cluster());
    };
    const ImportedRun run = importModules("['moe_act', 'layernorm', 'mla_up_proj', 'gdn_norm_out']");
    EXPECT_EQ(run.scenario["plan"]["recompute"], "selective");
    EXPECT_EQ(run.scenario["plan"]["recompute_modules"], nlohmann::json({"moe_act", "layernorm"}));
    const Plan plan = parseScenario(run.scenario, "imported").plan; // validated as tessel's plan format validates it
    EXPECT_EQ(plan.recomputeModules, recompute_module::MoeAct | recompute_module::Layernorm);
    auto warned = [&](const std::string& what) {
        return std::any_of(run.warnings.begin(), run.warnings.end(), [&](const std::string& w) { return w.find(what) != std::string::npos; });
    };
    EXPECT_TRUE(warned("mla_up_proj needs multi-latent attention"));
    EXPECT_TRUE(warned("gdn_norm_out, which tessel does not model"));
    expectNotWarned(run, "moe_grouped_gemm");
    for (const std::string& w : run.warnings) EXPECT_EQ(w.find("recompute_modules = "), std::string::npos) << w;
    // Megatron-core's default list is the plan's default: no key.
    {
        std::string log = smallLog();
        const std::string from = "  recompute_granularity ........................... full\n";
        log.replace(log.find(from), from.size(),
                    from + "  num_experts ..................................... 4\n"
                           "  moe_ffn_hidden_size ............................. 128\n"
                           "  moe_shared_expert_intermediate_size ............. 256\n"
                           "  moe_shared_expert_overlap ....................... True\n");
        const ImportedRun shared = importMegatronLog(parseMegatronLog(log, "shared.log"), cluster());
        EXPECT_EQ(shared.scenario["plan"]["moe_shared_expert_overlap"], true);
        expectNotWarned(shared, "moe_shared_expert_overlap");
    }
    EXPECT_FALSE(importModules("['core_attn']").scenario["plan"].contains("recompute_modules"));
}

// --cp-comm-type (one type, printed bare or as a one-element list): the plan's cp_comm_type; a per-layer list or
// the hierarchical a2a+p2p is read as the ring and warned.
TEST(MegatronImport, CpCommTypeIsThePlansExchange) {
    for (const auto& [logged, want] : std::vector<std::pair<std::string, std::string>>{
             {"['a2a']", "a2a"}, {"allgather", "allgather"}, {"['p2p']", "p2p"}, {"['a2a+p2p']", ""}, {"['a2a', 'p2p']", ""},
             {"['a2a+p2p'] with levels", "a2a+p2p"}}) {
        std::string log = smallLog();
        const std::string dp = "  data_parallel_size .............................. 2\n";
        log.replace(log.find(dp), dp.size(), "  data_parallel_size .............................. 1\n");
        // a2a+p2p's levels need 4 CP ranks: pp 1 then keeps the world at 4.
        const bool levels = logged.find("with levels") != std::string::npos;
        const std::string type = levels ? "['a2a+p2p']" : logged;
        if (levels) {
            const std::string pp = "  pipeline_model_parallel_size .................... 2\n";
            log.replace(log.find(pp), pp.size(), "  pipeline_model_parallel_size .................... 1\n");
            const std::string last = "  decoder_last_pipeline_num_layers ................ 1\n";
            log.replace(log.find(last), last.size(), "");
        }
        log.insert(log.find("  tensor_model_parallel_size ...................... 1\n"),
                   std::string("  context_parallel_size ........................... ") + (levels ? "4" : "2") + "\n" +
                       (levels ? "  hierarchical_context_parallel_sizes ............. [2, 2]\n" : "") +
                       "  cp_comm_type .................................... " + type + "\n");
        const ImportedRun run = importMegatronLog(parseMegatronLog(log, "cp.log"), cluster());
        EXPECT_EQ(run.scenario["plan"]["cp"], levels ? 4 : 2) << logged;
        if (levels) EXPECT_EQ(run.scenario["plan"]["cp_a2a_size"], 2);
        if (want == "p2p") { // the default: the scenario's plan does not write it
            EXPECT_FALSE(run.scenario["plan"].contains("cp_comm_type")) << logged;
            expectNotWarned(run, "cp_comm_type");
        } else if (!want.empty()) {
            EXPECT_EQ(run.scenario["plan"]["cp_comm_type"], want) << logged;
            expectNotWarned(run, "cp_comm_type");
        } else {
            EXPECT_FALSE(run.scenario["plan"].contains("cp_comm_type")) << logged;
            bool warned = false;
            for (const auto& w : run.warnings) warned = warned || w.find("cp_comm_type = " + logged) != std::string::npos;
            EXPECT_TRUE(warned) << logged;
        }
    }
}

TEST(MegatronImport, TokenDispatcherIsThePlansMoeDispatcher) {
    for (const std::string type : {"alltoall", "flex", "allgather"}) {
        const ImportedRun run = importWithArgs("  moe_token_dispatcher_type ....................... " + type + "\n"
                                               "  moe_flex_dispatcher_backend ..................... hybridep\n"
                                               "  num_experts ..................................... 4\n"
                                               "  moe_ffn_hidden_size ............................. 128\n",
                                               "dispatcher.log");
        if (type == "allgather") {
            EXPECT_FALSE(run.scenario["plan"].contains("moe_dispatcher"));
            bool warned = false;
            for (const auto& w : run.warnings) warned = warned || w.find("moe_token_dispatcher_type") != std::string::npos;
            EXPECT_TRUE(warned);
        } else {
            EXPECT_EQ(run.scenario["plan"]["moe_dispatcher"], type);
            expectNotWarned(run, "moe_token_dispatcher_type");
            expectNotWarned(run, "moe_flex_dispatcher_backend");
        }
    }
}

// --qk-layernorm: the model's q and k norms.
TEST(MegatronImport, QkLayernormIsTheModelsQkNorm) {
    const ImportedRun run = importWithArgs("  qk_layernorm .................................... True\n", "qk.log");
    EXPECT_EQ(run.scenario["model"]["qk_norm"], true);
    EXPECT_TRUE(parseScenario(run.scenario, "imported").model.qkNorm);
    expectNotWarned(run, "qk_layernorm");
}

// --num-distributed-optimizer-instances: the plan's hybrid sharding (zero_replicas), not a warning.
TEST(MegatronImport, OptimizerInstancesAreHybridSharding) {
    std::string log = smallLog();
    const std::string at = "  use_distributed_optimizer ....................... True\n";
    log.insert(log.find(at), "  num_distributed_optimizer_instances ............. 2\n");
    const ImportedRun run = importMegatronLog(parseMegatronLog(log, "instances.log"), cluster());
    EXPECT_EQ(run.scenario["plan"]["zero_replicas"], 2);
    for (const auto& w : run.warnings) EXPECT_EQ(w.find("num_distributed_optimizer_instances"), std::string::npos) << w;
    EXPECT_EQ(parseScenario(run.scenario, "imported").plan.zeroShardSize(), 1); // dp 2 over 2 copies
}

// Each bad log exits with the line that is wrong; nothing is guessed.
TEST(MegatronImport, BadOrTruncatedLogsNameTheLine) {
    auto whereOf = [](const std::string& text) {
        try {
            importMegatronLog(parseMegatronLog(text, "bad.log"), cluster());
        } catch (const InputError& e) {
            return e.problems().front().where + ": " + e.problems().front().message;
        }
        return std::string("no error");
    };
    const std::string log = smallLog();
    const size_t end = log.find("----------------- end");
    // Truncated inside the arguments block.
    EXPECT_NE(whereOf(log.substr(0, end - 40)).find("bad.log:1"), std::string::npos) << whereOf(log.substr(0, end - 40));
    // Truncated inside the last iteration line.
    const std::string cut = log.substr(0, log.size() - 30) + "\n";
    EXPECT_NE(whereOf(cut).find("bad.log:27: truncated iteration line"), std::string::npos) << whereOf(cut);
    // A value that is not a number.
    std::string bad = log;
    bad.replace(bad.find("110.0"), 5, "1l0.0");
    EXPECT_NE(whereOf(bad).find("bad.log:24"), std::string::npos) << whereOf(bad);
    // A required argument printed as None.
    bad = log;
    bad.replace(bad.find("128\n"), 3, "None");
    EXPECT_NE(whereOf(bad).find("bad.log:14: argument seq_length is None"), std::string::npos) << whereOf(bad);
    // No arguments block at all.
    EXPECT_NE(whereOf(log.substr(end + 60)).find("no Megatron-LM arguments block"), std::string::npos);
    // Only warm-up: no measured step.
    EXPECT_NE(whereOf(log.substr(0, log.find("[Rank 0]"))).find("no iteration interval after the first 2"), std::string::npos);
}

// Found by mutating the committed real log: an iteration number past an int ended in "internal error: stoi", and
// tensor_model_parallel_size 0 made the run's GPU count 0 and the node split divided by it (SIGFPE).
TEST(MegatronImport, CountsOutOfRangeNameTheLineNeverCrash) {
    const std::string path = std::string(TESSEL_TEST_DATA_DIR) + "/megatron/gpt2-124m-1gpu-fp16.log";
    const std::string log = readFile(path);
    auto problemsOf = [&](std::string text) {
        try {
            importMegatronLog(parseMegatronLog(text, "bad.log"), cluster());
        } catch (const InputError& e) {
            std::string all;
            for (const auto& p : e.problems()) all += p.where + ": " + p.message + "\n";
            return all;
        }
        return std::string("no error");
    };
    auto replaced = [&](const std::string& from, const std::string& to) {
        std::string t = log;
        const size_t at = t.find(from);
        EXPECT_NE(at, std::string::npos) << from;
        return t.replace(at, from.size(), to);
    };
    EXPECT_EQ(problemsOf(replaced("iteration       40/", "iteration       99999999999999999999/")),
              "bad.log:118: iteration 99999999999999999999 is not a count tessel reads (0 to 2147483647)\n");
    EXPECT_EQ(problemsOf(replaced("tensor_model_parallel_size ...................... 1",
                                  "tensor_model_parallel_size ...................... 0")),
              "bad.log:91: argument tensor_model_parallel_size = 0 is not from 1 to 1048576\n");
    EXPECT_EQ(problemsOf(replaced("kv_channels ..................................... 64",
                                  "kv_channels ..................................... -1")),
              "bad.log:60: argument kv_channels = -1 is not from 1 to 65536\n");
    // Review: with data_parallel_size None, a world smaller than tp x pp x cp made dp 0 and the node split divided
    // by it; a stated dp that disagrees with the world was imported silently.
    const std::string tp2 = replaced("tensor_model_parallel_size ...................... 1",
                                     "tensor_model_parallel_size ...................... 2");
    EXPECT_EQ(problemsOf(tp2), "bad.log:30: tp x pp x cp x dp = 2 x 1 x 1 x 1 is not the log's world_size 1\n");
    std::string noDp = tp2;
    noDp.replace(noDp.find("data_parallel_size .............................. 1"), 51,
                 "data_parallel_size .............................. None");
    EXPECT_EQ(problemsOf(noDp), "bad.log:101: world_size 1 is not a multiple of tp x pp x cp = 2\n");
}

TEST(MegatronImport, TheCommittedRealLogImports) {
    const std::string path = std::string(TESSEL_TEST_DATA_DIR) + "/megatron/gpt2-124m-1gpu-fp16.log";
    const ImportedRun run = importMegatronLog(parseMegatronLog(readFile(path), path), cluster());
    EXPECT_EQ(run.scenario["model"]["layers"], 12);
    EXPECT_EQ(run.scenario["model"]["vocab"], 50304);
    EXPECT_EQ(run.scenario["plan"]["micro_batch"], 1);
    EXPECT_EQ(run.scenario["plan"]["global_batch"], 16);
    // Intervals 10-30 report skipped iterations (fp16 loss-scale search); the median of 40..200 is 849.8 ms.
    EXPECT_NEAR(run.stepSeconds, 0.8498, 1e-9);
    EXPECT_EQ(run.report["intervals_dropped"], 3);
}

nlohmann::json dims(const char* text) { return nlohmann::json::parse(text); }

// A hand-sized trace: one step with a forward addmm and layer norm, a backward mm, an optimizer step.
nlohmann::json tinyTrace() {
    auto op = [](const char* name, double ts, double dur, nlohmann::json dims = nullptr) {
        nlohmann::json e{{"ph", "X"}, {"cat", "cpu_op"}, {"name", name}, {"pid", 1}, {"tid", 1}, {"ts", ts}, {"dur", dur}, {"args", nlohmann::json::object()}};
        if (!dims.is_null()) e["args"]["Input Dims"] = dims;
        return e;
    };
    nlohmann::json events = nlohmann::json::array();
    events.push_back(op("ProfilerStep#3", 0, 1000));
    events.push_back(op("aten::native_layer_norm", 10, 40, dims("[[2,64,32],[32],[32],[32]]")));
    events.push_back(op("aten::addmm", 60, 200, dims("[[96],[128,32],[32,96],[],[]]")));
    events.push_back(op("aten::view", 270, 5, dims("[[128,96],[]]")));
    events.push_back(op("autograd::engine::evaluate_function: MmBackward0", 300, 400));
    events.push_back(op("aten::mm", 310, 300, dims("[[128,96],[96,32]]")));
    events.push_back(op("Optimizer.step#AdamW.step", 800, 150));
    return {{"traceEvents", events}};
}

Scenario torchScenario(int seq = 64, int batch = 2) {
    Scenario s = loadScenarioFile(std::string(TESSEL_TEST_DATA_DIR) + "/torch/seen-b8-s64.json");
    s.model.seqLen = seq;
    s.plan.microBatch = s.plan.globalBatch = batch;
    return s;
}

TEST(TorchImport, OperatorsBecomeKernelPointsAndStepsBecomePhases) {
    const TorchTrace t = parseTorchTrace(tinyTrace().dump(), "tiny.json");
    const ImportedRun run = importTorchTraces({t}, torchScenario());
    ASSERT_EQ(run.benchPoints.size(), 3u);
    const auto& norm = run.benchPoints[0];
    EXPECT_EQ(norm["kernel"], "norm_forward");
    EXPECT_EQ(norm["shape"]["rows"], 128);
    EXPECT_DOUBLE_EQ(norm["bytes"].get<double>(), kernel_cost::normBytes(128, 32, 4));   // fp32: 4 B
    EXPECT_DOUBLE_EQ(norm["median_seconds"].get<double>(), 40e-6);
    const auto& gemm = run.benchPoints[1];
    EXPECT_EQ(gemm["kernel"], "gemm");
    EXPECT_EQ(gemm["shape"], (nlohmann::json{{"m", 128}, {"n", 96}, {"k", 32}}));
    EXPECT_DOUBLE_EQ(gemm["flops"].get<double>(), 2.0 * 128 * 96 * 32);
    EXPECT_EQ(gemm["source"], "tiny.json#/traceEvents/2");
    EXPECT_EQ(run.benchPoints[2]["shape"], (nlohmann::json{{"m", 128}, {"n", 32}, {"k", 96}}));
    // Phases: forward 0..300 us, backward 300..800, optimizer 800..1000.
    ASSERT_EQ(run.measurements.size(), 3u);
    EXPECT_EQ(run.measurements[0]["kind"], "forward");
    EXPECT_DOUBLE_EQ(run.measurements[0]["duration_seconds"].get<double>(), 300e-6);
    EXPECT_DOUBLE_EQ(run.measurements[1]["duration_seconds"].get<double>(), 500e-6);
    EXPECT_DOUBLE_EQ(run.measurements[2]["duration_seconds"].get<double>(), 200e-6);
    EXPECT_DOUBLE_EQ(run.stepSeconds, 1e-3);
    // The unmapped operator is listed, not dropped.
    EXPECT_EQ(run.report["not_mapped"][0]["operator"], "aten::view");
    // With the step measured without the profiler, every phase shrinks by the same factor.
    const ImportedRun scaled = importTorchTraces({t}, torchScenario(), TorchImportOptions{0.8e-3});
    EXPECT_DOUBLE_EQ(scaled.measurements[1]["duration_seconds"].get<double>(), 400e-6);
    EXPECT_DOUBLE_EQ(scaled.measurements[1]["start_seconds"].get<double>(), 240e-6);
    EXPECT_DOUBLE_EQ(scaled.stepSeconds, 0.8e-3);
}

TEST(TorchImport, BadOrTruncatedTracesNameTheJsonPointer) {
    auto whereOf = [](const std::string& text) {
        try {
            importTorchTraces({parseTorchTrace(text, "t.json")}, torchScenario());
        } catch (const InputError& e) {
            return e.problems().front().where + ": " + e.problems().front().message;
        }
        return std::string("no error");
    };
    const std::string good = tinyTrace().dump();
    EXPECT_NE(whereOf(good.substr(0, good.size() / 2)).find("t.json#: not valid JSON (truncated?) at byte"), std::string::npos);
    nlohmann::json bad = tinyTrace();
    bad["traceEvents"][2]["dur"] = "long";
    EXPECT_EQ(whereOf(bad.dump()).rfind("t.json#/traceEvents/2/dur", 0), 0u) << whereOf(bad.dump());
    bad = tinyTrace();
    bad["traceEvents"][5]["args"]["Input Dims"] = dims("[[128,-96]]");
    EXPECT_EQ(whereOf(bad.dump()).rfind("t.json#/traceEvents/5/args/Input Dims", 0), 0u) << whereOf(bad.dump());
    bad = tinyTrace();
    bad["traceEvents"][0]["name"] = "Step 3";
    EXPECT_NE(whereOf(bad.dump()).find("t.json#/traceEvents: no ProfilerStep#N"), std::string::npos);
    bad = tinyTrace();
    bad["traceEvents"].erase(6);
    EXPECT_NE(whereOf(bad.dump()).find("t.json#/traceEvents/0: step ProfilerStep#3 has no optimizer step"), std::string::npos)
        << whereOf(bad.dump());
    EXPECT_NE(whereOf("{\"traceEvents\": 3}").find("t.json#/traceEvents: not a Chrome trace"), std::string::npos);
}

// The committed real trace (bench/make_torch_traces.py, torch 1.13 on the CPU): every operator family is found, each
// GEMM point carries the FLOPs of its shape, and the step's phases add up to the traced step.
TEST(TorchImport, TheCommittedRealTraceMapsEveryFamily) {
    const std::string path = std::string(TESSEL_TEST_DATA_DIR) + "/torch/seen-b8-s64.trace.json";
    const ImportedRun run = importTorchTraces({parseTorchTrace(readFile(path), path)}, loadScenarioFile(
        std::string(TESSEL_TEST_DATA_DIR) + "/torch/seen-b8-s64.json"));
    std::map<std::string, int> kernels;
    for (const auto& p : run.benchPoints) {
        ++kernels[p["kernel"].get<std::string>()];
        if (p["kernel"] == "gemm") {
            const auto& s = p["shape"];
            const double batch = s.contains("batch") ? s["batch"].get<double>() : 1.0;
            EXPECT_DOUBLE_EQ(p["flops"].get<double>(), batch * kernel_cost::gemmFlops(s["m"], s["n"], s["k"]));
        }
    }
    for (const char* k : {"gemm", "norm_forward", "norm_backward", "gelu_forward", "gelu_backward", "softmax_forward",
                          "softmax_backward", "residual_forward", "cross_entropy_forward", "embedding_backward"})
        EXPECT_GT(kernels[k], 0) << k;
    // Two norms per layer and the final one, in each of the two profiled steps.
    EXPECT_EQ(kernels["norm_forward"], 2 * 9);
    // The phases tile each step: over both steps they add up to twice the median (= mean) of the two spans.
    double phases = 0.0;
    for (const auto& m : run.measurements) phases += m["duration_seconds"].get<double>();
    EXPECT_NEAR(phases / 2.0, run.report["traced_step_seconds"].get<double>(), 1e-9);
}

TEST(TorchImport, DdpTracesGiveCollectivePointsPerRank) {
    const std::string base = std::string(TESSEL_TEST_DATA_DIR) + "/torch/ddp-b2-s64";
    std::vector<TorchTrace> traces;
    for (int r = 0; r < 2; ++r) {
        const std::string p = base + ".rank" + std::to_string(r) + ".trace.json";
        traces.push_back(parseTorchTrace(readFile(p), p));
    }
    const ImportedRun run = importTorchTraces(traces, loadScenarioFile(base + ".json"));
    int allReduce = 0;
    std::set<int> ranks;
    for (const auto& p : run.benchPoints)
        if (p["kernel"] == "all_reduce") {
            ++allReduce;
            EXPECT_EQ(p["group_size"], 2);
            EXPECT_EQ(p["tier"], "intra_node");
            EXPECT_DOUBLE_EQ(p["bytes"].get<double>(), 4.0 * p["shape"]["elements"].get<double>());
            ranks.insert(p["rank"].get<int>());
        }
    EXPECT_GT(allReduce, 0);
    EXPECT_EQ(ranks, (std::set<int>{0, 1}));
    // One trace of a two-rank plan is refused, naming the plan's dp.
    try {
        importTorchTraces({traces[0]}, loadScenarioFile(base + ".json"));
        ADD_FAILURE() << "expected an error";
    } catch (const InputError& e) {
        EXPECT_EQ(e.problems().front().where, "/plan/dp");
    }
}

} // namespace
} // namespace tessel::sim
