// Export of plans as torchtitan TOML: exact values parsed back out of the text, every plan torchtitan cannot run
// refused at the right JSON pointer, and what every format refuses alike.
#include "export_support.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace tessel::sim {
namespace {

using namespace export_test;

// Hybrid sharding: Megatron-LM's --num-distributed-optimizer-instances, DeepSpeed's MiCS (ZeRO-3 only) and
// torchtitan's HSDP degrees.
TEST(ExportFrameworks, HybridShardingAsEachFrameworkSpellsIt) {
    Scenario s = defaultScenario();
    s.plan.zeroStage = 1;
    s.plan.zeroReplicas = 4;
    const auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--num-distributed-optimizer-instances"), "4");
    s.plan.zeroReplicas = 1;
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--num-distributed-optimizer-instances"));

    Scenario d = deepspeedPlan();
    d.plan.zeroStage = 3;
    d.plan.precision = "mixed";
    d.plan.zeroReplicas = 2;
    const auto ds = nlohmann::json::parse(exportPlan(d, ExportFormat::DeepSpeed));
    EXPECT_EQ(ds.at("zero_optimization").at("mics_shard_size").get<int>(), d.plan.dp / 2);
    d.plan.zeroStage = 2;
    EXPECT_EQ(refusal(d, ExportFormat::DeepSpeed), std::vector<std::string>{"/plan/zero_replicas"});

    Scenario t = preset("llama3-8b-h100");
    t.plan.zeroStage = 3;
    t.plan.precision = "fsdp";
    t.plan.zeroReplicas = 2;
    const auto toml = parseToml(exportPlan(t, ExportFormat::Torchtitan));
    EXPECT_EQ(toml.at("parallelism.data_parallel_replicate_degree"), "2");
    EXPECT_EQ(toml.at("parallelism.data_parallel_shard_degree"), std::to_string(t.plan.dp / 2));
}

// torchtitan's model with latent attention is its DeepSeek-V3; the flavor to register names the latents.
TEST(ExportTorchtitan, LatentAttentionIsTorchtitansDeepSeekV3Model) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.zeroStage = 3;
    s.plan.precision = "fsdp";
    s.model.kvHeads = s.model.heads;
    s.model.mla = MlaConfig{1536, 512, 128, 64, 128};
    s.model.headDim = 192;
    const std::string text = exportPlan(s, ExportFormat::Torchtitan);
    EXPECT_EQ(parseToml(text).at("model.name"), "deepseek_v3");
    EXPECT_NE(text.find("latent attention (q_lora_rank 1536, kv_lora_rank 512"), std::string::npos) << text;
}

TEST(ExportTorchtitan, FsdpPlanHasTheDegrees) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.zeroStage = 3;
    s.plan.precision = "fsdp";
    const auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("model.name"), "llama3");
    EXPECT_EQ(t.at("model.flavor"), "8B");
    EXPECT_EQ(t.at("parallelism.data_parallel_replicate_degree"), "1");
    EXPECT_EQ(t.at("parallelism.data_parallel_shard_degree"), "4");
    EXPECT_EQ(t.at("parallelism.tensor_parallel_degree"), "2");
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_degree"), "1");
    EXPECT_EQ(t.at("parallelism.context_parallel_degree"), "1");
    EXPECT_EQ(t.at("parallelism.expert_parallel_degree"), "1");
    EXPECT_EQ(t.at("parallelism.enable_async_tensor_parallel"), "false");
    EXPECT_EQ(t.at("parallelism.fsdp_reshard_after_forward"), "always");
    EXPECT_EQ(t.at("training.local_batch_size"), "1");
    EXPECT_EQ(t.at("training.global_batch_size"), "32");
    EXPECT_EQ(t.at("training.seq_len"), "8192");
    EXPECT_EQ(t.at("training.mixed_precision_param"), "bfloat16");
    EXPECT_EQ(t.at("activation_checkpoint.mode"), "none") << "selective + flash stores what none stores";
    EXPECT_EQ(t.count("parallelism.pipeline_parallel_schedule"), 0u);
    // A Megatron-style plan was predicted with fused kernels: torch.compile gives them.
    EXPECT_EQ(t.at("compile.enable"), "true");
    // Blocking launches (FORMULAS.md §3.8) go on the launch line the header gives.
    const std::string plain = exportPlan(s, ExportFormat::Torchtitan);
    EXPECT_EQ(plain.find("CUDA_LAUNCH_BLOCKING"), std::string::npos);
    s.plan.framework.launchBlocking = true;
    EXPECT_NE(exportPlan(s, ExportFormat::Torchtitan).find("# launch on every node: CUDA_LAUNCH_BLOCKING=1 torchrun"),
              std::string::npos);
}

TEST(ExportTorchtitan, FsdpMixedPrecisionIsWrittenAndRefusedElsewhere) {
    // PyTorch FSDP's recipes (fp32 parameter shards, bf16 gathers, fp32 or bf16 reduction) are torchtitan's
    // mixed_precision_param / mixed_precision_reduce; Megatron-LM and DeepSpeed keep other state and refuse.
    Scenario s = preset("llama3-8b-h100");
    s.plan.zeroStage = 3;
    s.plan.precision = "fsdp_pure";
    auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("training.mixed_precision_param"), "bfloat16");
    EXPECT_EQ(t.at("training.mixed_precision_reduce"), "bfloat16");
    s.plan.precision = "fsdp";
    t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("training.mixed_precision_reduce"), "float32");
    EXPECT_TRUE(contains(refusal(s, ExportFormat::Megatron), "/plan/precision"));
    EXPECT_TRUE(contains(refusal(s, ExportFormat::DeepSpeed), "/plan/precision"));
    // Lightning's fp32 gathers under autocast (fsdp_amp) are none of the three.
    s.plan.precision = "fsdp_amp";
    EXPECT_TRUE(contains(refusal(s, ExportFormat::Torchtitan), "/plan/precision"));
    EXPECT_TRUE(contains(refusal(s, ExportFormat::Megatron), "/plan/precision"));
    EXPECT_TRUE(contains(refusal(s, ExportFormat::DeepSpeed), "/plan/precision"));
}

TEST(ExportTorchtitan, AnFp16PlanGathersFloat16) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.zeroStage = 3;
    s.plan.precision = "fsdp";
    s.plan.framework.halfDtype = "fp16";
    const auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("training.mixed_precision_param"), "float16");
    EXPECT_EQ(t.at("training.mixed_precision_reduce"), "float32");
}

TEST(ExportTorchtitan, AutocastOnlyUnderDataParallelismAlone) {
    // torchtitan's mixed_precision_param works through torch.autocast under DDP or on one device with no other
    // parallelism, and through fully_shard when it shards (torchtitan/config/configs.py).
    Scenario s = preset("llama3-8b-h100");
    s.plan.tp = 1;
    s.plan.dp = 8;
    s.plan.sequenceParallel = false;
    s.plan.zeroStage = 0;
    s.plan.precision = "amp";
    const auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("training.mixed_precision_param"), "bfloat16");
    EXPECT_EQ(t.at("parallelism.data_parallel_replicate_degree"), "8");
    s.plan.zeroStage = 3;
    EXPECT_NE(messageAt(s, ExportFormat::Torchtitan, "/plan/precision").find("use precision fsdp"), std::string::npos);
    s.plan.zeroStage = 0;
    s.plan.tp = 2;
    s.plan.dp = 4;
    s.plan.sequenceParallel = true;
    EXPECT_NE(messageAt(s, ExportFormat::Torchtitan, "/plan/precision").find("data parallelism alone"), std::string::npos);
    // Megatron-LM and DeepSpeed keep bf16 weights beside an fp32 master: no autocast to export.
    EXPECT_NE(messageAt(s, ExportFormat::Megatron, "/plan/precision").find("torch.autocast"), std::string::npos);
    EXPECT_NE(messageAt(s, ExportFormat::DeepSpeed, "/plan/precision").find("torch.autocast"), std::string::npos);
}

TEST(ExportFrameworks, Tf32IsTheTrainingScriptsSettingNoFrameworkArgument) {
    // TF32 is torch.backends.cuda.matmul.allow_tf32, a line of the script: every format refuses it at the field,
    // naming the setting, rather than writing fp32 arguments that would run 8x slower on the CUDA cores.
    Scenario s = preset("llama3-8b-h100");
    s.plan.zeroStage = 3;
    s.plan.precision = "tf32";
    for (ExportFormat f : allExportFormats()) {
        EXPECT_TRUE(contains(refusal(s, f), "/plan/precision")) << toString(f);
        EXPECT_NE(messageAt(s, f, "/plan/precision").find("allow_tf32"), std::string::npos) << toString(f);
    }
}

TEST(ExportFrameworks, UnpaddedAttentionIsModelCodeNoFrameworkRuns) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.zeroStage = 3;
    s.plan.precision = "fsdp";
    s.plan.framework.attentionUnpad = true;
    for (ExportFormat f : allExportFormats()) EXPECT_TRUE(contains(refusal(s, f), "/plan/attention_unpad")) << toString(f);
    s.plan.framework.attentionUnpad = false;
    EXPECT_NO_THROW(exportPlan(s, ExportFormat::Torchtitan));
    // Composer's training metrics are its trainer's, which no export format runs.
    s.plan.framework.trainMetricLosses = 2;
    for (ExportFormat f : allExportFormats()) EXPECT_TRUE(contains(refusal(s, f), "/plan/train_metric_losses")) << toString(f);
    s.plan.framework.trainMetricLosses = 0;
    EXPECT_NO_THROW(exportPlan(s, ExportFormat::Torchtitan));
    // A whole-model compiled graph is the trainer's own (KempnerForge's, nanoGPT's); torchtitan compiles block by block.
    s.plan.framework.compileWholeModel = true;
    for (ExportFormat f : allExportFormats()) EXPECT_TRUE(contains(refusal(s, f), "/plan/compile_whole_model")) << toString(f);
    s.plan.framework.compileWholeModel = false;
    EXPECT_NO_THROW(exportPlan(s, ExportFormat::Torchtitan));
}

TEST(ExportTorchtitan, ATorchtitanPlanKeepsItsOwnSelectivePolicyAndEagerKernels) {
    // Under framework torchtitan, selective is torchtitan's per-op policy and the kernels are eager unless
    // fused_kernels says otherwise (FORMULAS.md §3.4): the export writes what was predicted.
    Scenario s = preset("llama3-8b-h100");
    s.plan.zeroStage = 3;
    s.plan.precision = "fsdp";
    s.plan.framework.name = "torchtitan";
    auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("activation_checkpoint.mode"), "selective");
    EXPECT_EQ(t.at("activation_checkpoint.selective_ac_option"), "op");
    EXPECT_EQ(t.at("compile.enable"), "false");
    s.plan.framework.fusedKernels = true;
    t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("compile.enable"), "true");
    EXPECT_EQ(t.at("compile.components"), "[\"model\", \"loss\"]"); // the loss compiled, as costed
    // AdamW as costed: fused for current torchtitan, foreach for a 2024 one (its default before #881).
    EXPECT_EQ(t.at("optimizer.implementation"), "fused");
    s.plan.framework.version = "2024";
    t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("optimizer.implementation"), "foreach");
    EXPECT_EQ(t.at("compile.components"), "[\"model\"]"); // 2024: the loss ran eager beside compiled blocks
    // A compiled loss without a compiled model is no torchtitan run.
    s.plan.framework.crossEntropy = "compiled";
    s.plan.framework.fusedKernels = false;
    EXPECT_TRUE(contains(refusal(s, ExportFormat::Torchtitan), "/plan/cross_entropy"));
}

TEST(ExportTorchtitan, ReplicatedPlanAndFullRecompute) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.zeroStage = 0;
    // Replicated with tensor parallelism torchtitan neither shards nor autocasts (maybe_enable_amp): fp32.
    EXPECT_NE(messageAt(s, ExportFormat::Torchtitan, "/plan/precision").find("use precision fp32"), std::string::npos);
    s.plan.precision = "fsdp"; // FSDP's cast needs something sharded
    EXPECT_NE(messageAt(s, ExportFormat::Torchtitan, "/plan/precision").find("shards nothing, so it runs precision fp32"),
              std::string::npos);
    s.plan.precision = "fp32";
    s.plan.recompute = Recompute::Full;
    const auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("parallelism.data_parallel_replicate_degree"), "4");
    EXPECT_EQ(t.at("parallelism.data_parallel_shard_degree"), "1");
    EXPECT_EQ(t.count("parallelism.fsdp_reshard_after_forward"), 0u);
    EXPECT_EQ(t.at("activation_checkpoint.mode"), "full");
}

TEST(ExportTorchtitan, InterleavedPipelineSplitsEvenly) {
    Scenario s = preset("llama3-70b-h100");
    s.plan.zeroStage = 3;
    s.plan.precision = "fsdp";
    const auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("model.flavor"), "70B");
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_degree"), "4");
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_schedule"), "Interleaved1F1B");
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_layers_per_stage"), "4");
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_first_stage_less_layers"), "0");
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_last_stage_less_layers"), "0");
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_microbatch_size"), "1");
    // The schedule splits the local batch (global / dp) into micro-batches.
    EXPECT_EQ(t.at("training.local_batch_size"), "32");
    EXPECT_EQ(t.at("training.global_batch_size"), "64");
    // A torchtitan plan under pipelining is costed with each stage gathered once a step (fsdpGathersOncePerStep):
    // exported so, unless it states resharding.
    s.plan.framework = FrameworkSettings{};
    s.plan.framework.name = "torchtitan";
    EXPECT_EQ(parseToml(exportPlan(s, ExportFormat::Torchtitan)).at("parallelism.fsdp_reshard_after_forward"), "never");
    s.plan.framework.reshardAfterForward = true;
    EXPECT_EQ(parseToml(exportPlan(s, ExportFormat::Torchtitan)).at("parallelism.fsdp_reshard_after_forward"), "always");
}

// DualPipeV is torchtitan's (PyTorch's ScheduleDualPipeV): the per-virtual-stage layers as for any pipeline (the V
// layout is the schedule's own), and refused under torch.compile, which that schedule refuses.
TEST(ExportTorchtitan, DualPipeVIsWrittenWithoutCompile) {
    Scenario s = preset("llama3-70b-h100");
    s.plan.zeroStage = 3;
    s.plan.precision = "fsdp";
    s.plan.schedule = Schedule::DualPipeV;
    s.plan.vpp = 2;
    s.plan.framework.fusedKernels = false;
    const auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_schedule"), "DualPipeV");
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_layers_per_stage"), "10");
    EXPECT_EQ(t.at("compile.enable"), "false");
    s.plan.framework.fusedKernels = true;
    EXPECT_EQ(refusal(s, ExportFormat::Torchtitan), std::vector<std::string>{"/plan/framework/fused_kernels"});
    EXPECT_TRUE(contains(refusal(s, ExportFormat::Megatron), "/plan/schedule")); // (and ZeRO-3, which it has not)
    s.plan.schedule = Schedule::ZeroBubbleV;
    s.plan.framework.fusedKernels = false;
    EXPECT_EQ(parseToml(exportPlan(s, ExportFormat::Torchtitan)).at("parallelism.pipeline_parallel_schedule"), "ZBVZeroBubble");
}

// torchtitan's own split, transcribed from _generate_llm_fqn_per_model_part (torchtitan/distributed/pipeline_parallel.py,
// #1416 to today): each of `stages` virtual stages gets (layers + in + out) / stages layers, one more on the first
// (layers + in + out) % stages, less `in` on the first and `out` on the last.
std::vector<int> torchtitanSplit(int stages, int layers, int in, int out) {
    const int effective = layers + in + out, per = effective / stages, extra = effective % stages;
    std::vector<int> counts;
    int next = 0;
    for (int u = 0; u < stages; ++u) {
        int want = per + (u < extra ? 1 : 0) - (u == 0 ? in : 0) - (u == stages - 1 ? out : 0);
        int took = 0;
        for (; took < want && next < layers; ++took) ++next;
        counts.push_back(took);
    }
    return counts;
}

// The transformer layers of each virtual stage torchtitan builds from an exported [parallelism] table: the named
// modules where module_fqns_per_model_part is given (each layer once, in order, the embedding first and the norm
// and output last), else its own split of layers_per_stage with the fewer layers of the ends.
std::vector<int> torchtitanStages(const std::map<std::string, std::string>& t, int layers) {
    std::vector<int> counts;
    const auto named = t.find("parallelism.module_fqns_per_model_part");
    if (named != t.end()) {
        const auto parts = nlohmann::json::parse(named->second);
        int next = 0;
        for (size_t u = 0; u < parts.size(); ++u) {
            std::vector<std::string> names = parts[u].get<std::vector<std::string>>();
            if (u == 0 && !names.empty() && names.front() == "tok_embeddings") names.erase(names.begin());
            if (u + 1 == parts.size() && names.size() >= 2 && names[names.size() - 2] == "norm" && names.back() == "output")
                names.resize(names.size() - 2);
            for (const auto& n : names) EXPECT_EQ(n, "layers." + std::to_string(next++)) << named->second;
            counts.push_back(static_cast<int>(names.size()));
        }
        EXPECT_EQ(next, layers);
        return counts;
    }
    const int per = std::stoi(t.at("parallelism.pipeline_parallel_layers_per_stage"));
    const int in = std::stoi(t.at("parallelism.pipeline_parallel_first_stage_less_layers"));
    const int out = std::stoi(t.at("parallelism.pipeline_parallel_last_stage_less_layers"));
    EXPECT_LE(in, per);
    EXPECT_LE(out, per);
    return torchtitanSplit((layers + in + out + per - 1) / per, layers, in, out);
}

// Every split tessel costs reaches torchtitan as the same layers per virtual stage: balanced and ends-as-layers
// splits over pp 2-8 and vpp 1-4 of Llama 3 70B's 80 layers, and listed ones torchtitan's own split cannot make
// (heavier ends, unequal middles), read back through the transcription above.
TEST(ExportTorchtitan, EveryPipelineSplitReachesTorchtitanUnchanged) {
    Scenario base = preset("llama3-70b-h100");
    base.plan.zeroStage = 3;
    base.plan.precision = "fsdp";
    base.plan.dp = 2; // FSDP shards over two ranks (over one torchtitan would neither shard nor cast)
    base.plan.globalBatch = 128;
    int checked = 0, named = 0;
    auto check = [&](Scenario s) {
        s.cluster.nodes = 2 * s.plan.pp; // tp 8 a node
        resolvePipelineSplit(s.model, s.cluster, s.plan);
        const std::vector<int> counts = chunkLayerCounts(s.model, s.plan);
        const auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
        EXPECT_EQ(torchtitanStages(t, s.model.layers), counts) << "pp " << s.plan.pp << " vpp " << s.plan.vpp;
        ++checked;
        named += t.count("parallelism.module_fqns_per_model_part") > 0 ? 1 : 0;
    };
    for (int pp = 2; pp <= 8; ++pp)
        for (int vpp = 1; vpp <= 4; ++vpp)
            for (PipelineSplit split : {PipelineSplit::Balanced, PipelineSplit::EndsAsLayers}) {
                Scenario s = base;
                s.plan.pp = pp;
                s.plan.vpp = vpp;
                s.plan.schedule = vpp > 1 ? Schedule::Interleaved1F1B : Schedule::OneFOneB;
                s.plan.pipelineSplit = split;
                s.plan.resolvedPipelineLayers.clear();
                s.cluster.nodes = 2 * pp;
                ProblemList problems;
                validatePlan(s.model, s.cluster, s.plan, "/plan", problems);
                if (!problems.empty()) continue;
                check(s);
            }
    for (const std::vector<int>& listed : std::vector<std::vector<int>>{{30, 20, 30}, {18, 22, 21, 19}, {21, 21, 19, 19},
                                                                         {41, 39}, {0, 40, 40, 0}}) {
        Scenario s = base;
        s.plan.pp = static_cast<int>(listed.size());
        s.plan.vpp = 1;
        s.plan.schedule = Schedule::OneFOneB;
        s.plan.pipelineSplit = PipelineSplit::Even;
        s.plan.resolvedPipelineLayers.clear();
        s.plan.pipelineLayers = listed;
        check(s);
    }
    EXPECT_GE(checked, 35); // 37 on 2026-12-02
    EXPECT_GE(named, 20);   // 23 of them beyond torchtitan's own split, {41, 39} not (0 and 2 fewer on the ends)
}

TEST(ExportTorchtitan, UnknownShapesNameARegistrationNotAFlavor) {
    Scenario s = defaultScenario();
    s.plan.zeroStage = 3;
    s.plan.precision = "fsdp";
    const std::string text = exportPlan(s, ExportFormat::Torchtitan);
    const auto t = parseToml(text);
    EXPECT_EQ(t.at("model.flavor"), "gpt3-175b");
    EXPECT_NE(text.find("register \"gpt3-175b\""), std::string::npos);
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_schedule"), "1F1B");
}

TEST(ExportTorchtitan, RefusesZero1And2) {
    Scenario s = preset("llama3-8b-h100"); // ZeRO-1
    s.plan.precision = "fsdp"; // torchtitan's own, so only the sharding is refused
    EXPECT_EQ(refusal(s, ExportFormat::Torchtitan), std::vector<std::string>{"/plan/zero_stage"});
    s.plan.zeroStage = 2;
    EXPECT_EQ(refusal(s, ExportFormat::Torchtitan), std::vector<std::string>{"/plan/zero_stage"});
}

TEST(ExportTorchtitan, RefusesZeroBubbleTpWithoutSpAndNoFlash) {
    Scenario s = defaultScenario();
    s.plan.zeroStage = 3;
    s.plan.precision = "fsdp";
    s.plan.schedule = Schedule::ZeroBubble;
    s.plan.sequenceParallel = false;
    s.plan.flashAttention = false;
    const auto where = refusal(s, ExportFormat::Torchtitan);
    EXPECT_EQ(where.size(), 3u);
    EXPECT_TRUE(contains(where, "/plan/schedule"));
    EXPECT_TRUE(contains(where, "/plan/sequence_parallel"));
    EXPECT_TRUE(contains(where, "/plan/flash_attention"));
}

TEST(ExportTorchtitan, ContextParallelNeedsShardingOverCp) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.dp = 2;
    s.plan.cp = 2;
    s.plan.zeroStage = 3;
    s.plan.precision = "fsdp";
    s.plan.zeroOverCp = false;
    EXPECT_EQ(refusal(s, ExportFormat::Torchtitan), std::vector<std::string>{"/plan/zero_over_cp"});
    s.plan.zeroOverCp = true;
    const auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("parallelism.context_parallel_degree"), "2");
    EXPECT_EQ(t.at("parallelism.data_parallel_shard_degree"), "2");
    // torchtitan's context parallelism is PyTorch's ring: the other exchanges are refused at their field.
    for (CpComm comm : {CpComm::A2a, CpComm::AllGather}) {
        s.plan.cpComm = comm;
        EXPECT_EQ(refusal(s, ExportFormat::Torchtitan), std::vector<std::string>{"/plan/cp_comm_type"});
    }
}

// torchtitan's expert mesh borrows every CP rank (and at expert_tensor_parallel_degree 1 every TP rank) before
// data-parallel ones, as tessel lays out a torchtitan plan with cp > 1: ep a multiple of cp (x tp), written with the
// plan's expert TP, which torchtitan would otherwise take as 1.
TEST(ExportTorchtitan, ExpertParallelismTakesTheContextParallelRanks) {
    Scenario s = preset("mixtral-8x7b-h100"); // 64 H100
    s.plan.framework.name = "torchtitan";
    s.plan.tp = 2;
    s.plan.sequenceParallel = true;
    s.plan.pp = 4;
    s.plan.cp = 2;
    s.plan.dp = 4;
    s.plan.ep = 4;
    s.plan.zeroStage = 3;
    s.plan.zeroOverCp = true;
    s.plan.precision = "fsdp";
    ASSERT_TRUE(s.plan.expertLayoutApart());
    auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("parallelism.expert_parallel_degree"), "4");
    EXPECT_EQ(t.at("parallelism.expert_tensor_parallel_degree"), "2");
    EXPECT_EQ(t.at("parallelism.context_parallel_degree"), "2");
    // Whole experts (etp 1): EP takes the TP ranks too, so ep must be a multiple of tp x cp = 4.
    s.plan.etp = 1;
    t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("parallelism.expert_tensor_parallel_degree"), "1");
    s.plan.ep = 2;
    EXPECT_EQ(refusal(s, ExportFormat::Torchtitan), std::vector<std::string>{"/plan/ep"});
    // With etp = tp an EP group smaller than cp would split the CP ranks, which torchtitan's mesh cannot.
    s.plan.etp = 0;
    s.plan.ep = 2;
    s.plan.cp = 4;
    s.plan.dp = 2;
    EXPECT_EQ(refusal(s, ExportFormat::Torchtitan), std::vector<std::string>{"/plan/ep"});
    s.plan.cp = 2;
    s.plan.dp = 4;
    s.plan.ep = 1;
    t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.count("parallelism.expert_tensor_parallel_degree"), 0u);
}

// ---------------------------------------------------------------------------------------------- all formats

TEST(Export, InvalidPlanIsRefusedBeforeExport) {
    Scenario s = defaultScenario();
    s.plan.tp = 7;
    for (auto f : {ExportFormat::Megatron, ExportFormat::DeepSpeed, ExportFormat::Torchtitan})
        EXPECT_TRUE(contains(refusal(s, f), "/plan/tp"));
}

} // namespace
} // namespace tessel::sim
