// Export of plans as a Megatron-LM launch script: exact flag values parsed back out of the text, and every plan
// Megatron-LM cannot run refused at the right JSON pointer.
#include "export_support.hpp"

#include <string>
#include <vector>

namespace tessel::sim {
namespace {

using namespace export_test;

TEST(ExportMegatron, DefaultScenarioIsMegatronsGpt3Recipe) {
    const auto a = parseMegatron(exportPlan(defaultScenario(), ExportFormat::Megatron));
    EXPECT_NE(a.launch.find("torchrun --nproc_per_node 8 --nnodes 128 "), std::string::npos) << a.launch;
    EXPECT_NE(a.launch.find("--node_rank"), std::string::npos);
    EXPECT_NE(a.launch.find(" pretrain_gpt.py \\"), std::string::npos);
    EXPECT_EQ(a.launch.rfind("CUDA_DEVICE_MAX_CONNECTIONS=1 ", 0), 0u) << "Megatron asserts it for tp > 1";
    EXPECT_EQ(a.launch.find("CUDA_LAUNCH_BLOCKING"), std::string::npos) << "asynchronous launches unless the plan says";
    // A plan with blocking launches (FORMULAS.md §3.8) is launched with them.
    Scenario blocking = defaultScenario();
    blocking.plan.framework.launchBlocking = true;
    EXPECT_NE(parseMegatron(exportPlan(blocking, ExportFormat::Megatron)).launch.find("CUDA_LAUNCH_BLOCKING=1 torchrun"),
              std::string::npos);
    // NCCL user buffers (nccl_ub) only where the plan states them.
    EXPECT_FALSE(a.has("--nccl-ub"));
    Scenario registered = defaultScenario();
    registered.plan.framework.ncclUb = true;
    EXPECT_TRUE(parseMegatron(exportPlan(registered, ExportFormat::Megatron)).has("--nccl-ub"));
    // The weight-gradient GEMMs accumulate into main_grad unless the plan turns the fusion off.
    EXPECT_FALSE(a.has("--no-gradient-accumulation-fusion"));
    Scenario unfused = defaultScenario();
    unfused.plan.framework.gradAccumulationFusion = false;
    EXPECT_TRUE(parseMegatron(exportPlan(unfused, ExportFormat::Megatron)).has("--no-gradient-accumulation-fusion"));
    EXPECT_EQ(a.at("--tensor-model-parallel-size"), "8");
    EXPECT_EQ(a.at("--pipeline-model-parallel-size"), "8");
    EXPECT_EQ(a.at("--context-parallel-size"), "1");
    EXPECT_EQ(a.at("--expert-model-parallel-size"), "1");
    EXPECT_EQ(a.at("--global-batch-size"), "1536");
    EXPECT_EQ(a.at("--micro-batch-size"), "1");
    EXPECT_EQ(a.at("--num-layers"), "96");
    EXPECT_EQ(a.at("--hidden-size"), "12288");
    EXPECT_EQ(a.at("--num-attention-heads"), "96");
    EXPECT_EQ(a.at("--ffn-hidden-size"), "49152");
    EXPECT_EQ(a.at("--seq-length"), "2048");
    EXPECT_EQ(a.at("--max-position-embeddings"), "2048");
    EXPECT_EQ(a.at("--position-embedding-type"), "learned_absolute");
    EXPECT_EQ(a.at("--normalization"), "LayerNorm");
    EXPECT_EQ(a.at("--attention-dropout"), "0.1");
    EXPECT_EQ(a.at("--hidden-dropout"), "0.1");
    EXPECT_EQ(a.at("--make-vocab-size-divisible-by"), "128");
    EXPECT_EQ(a.at("--sequence-parallel"), "");
    EXPECT_EQ(a.at("--recompute-activations"), "");
    EXPECT_EQ(a.at("--bf16"), "");
    EXPECT_EQ(a.at("--accumulate-allreduce-grads-in-fp32"), "");
    EXPECT_EQ(a.at("--use-flash-attn"), "");
    EXPECT_EQ(a.at("--attention-backend"), "flash");
    // GPT-3: tied embeddings, biases, GELU, MHA, ZeRO-0, no interleaving.
    for (const char* absent :
         {"--use-distributed-optimizer", "--untie-embeddings-and-output-weights", "--disable-bias-linear",
          "--swiglu", "--group-query-attention", "--num-experts", "--num-layers-per-virtual-pipeline-stage",
          "--recompute-granularity", "--fp16", "--use-tp-pp-dp-mapping", "--kv-channels"})
        EXPECT_FALSE(a.has(absent)) << absent;
}

TEST(ExportMegatron, Llama3PresetHasGqaSwigluRmsnormRope) {
    const auto a = parseMegatron(exportPlan(preset("llama3-8b-h100"), ExportFormat::Megatron));
    EXPECT_NE(a.launch.find("--nproc_per_node 8 --nnodes 1 pretrain_gpt.py"), std::string::npos) << a.launch;
    EXPECT_EQ(a.launch.find("--node_rank"), std::string::npos) << "one node needs no rendezvous address";
    EXPECT_EQ(a.at("--group-query-attention"), "");
    EXPECT_EQ(a.at("--num-query-groups"), "8");
    EXPECT_EQ(a.at("--swiglu"), "");
    EXPECT_EQ(a.at("--normalization"), "RMSNorm");
    EXPECT_EQ(a.at("--position-embedding-type"), "rope");
    EXPECT_EQ(a.at("--untie-embeddings-and-output-weights"), "");
    EXPECT_EQ(a.at("--disable-bias-linear"), "");
    EXPECT_EQ(a.at("--ffn-hidden-size"), "14336");
    EXPECT_EQ(a.at("--seq-length"), "8192");
    EXPECT_EQ(a.at("--attention-dropout"), "0");
    EXPECT_EQ(a.at("--tensor-model-parallel-size"), "2");
    EXPECT_EQ(a.at("--pipeline-model-parallel-size"), "1");
    EXPECT_EQ(a.at("--global-batch-size"), "32");
    EXPECT_EQ(a.at("--use-distributed-optimizer"), "") << "the preset is ZeRO-1";
    EXPECT_EQ(a.at("--sequence-parallel"), "");
    EXPECT_FALSE(a.has("--add-qkv-bias"));
    for (const char* absent : {"--multi-latent-attention", "--kv-lora-rank", "--kv-channels", "--rotary-percent",
                               "--window-size"})
        EXPECT_FALSE(a.has(absent)) << absent;
    // A partial rotary (Pythia's quarter of each head) is Megatron-LM's --rotary-percent.
    Scenario s = preset("llama3-8b-h100");
    s.model.rotaryPercent = 0.25;
    EXPECT_EQ(parseMegatron(exportPlan(s, ExportFormat::Megatron)).at("--rotary-percent"), "0.25");
    // A sliding window of 4096 keys is Megatron-core's (left, right) window (4095, 0); under context parallelism
    // Transformer Engine runs it with the all-to-all or all-gather exchange only.
    s.model.slidingWindow = 4096;
    EXPECT_EQ(parseMegatron(exportPlan(s, ExportFormat::Megatron)).at("--window-size"), "4095,0");
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--window-attn-skip-freq"));
    // Every other layer in full (layer numbers 2, 4, ... of Megatron-core's 1-based count) is a skip frequency of 2;
    // any other pattern the per-layer list, 1 for a windowed layer.
    for (int i = 1; i < s.model.layers; i += 2) s.model.fullAttentionLayers.push_back(i);
    EXPECT_EQ(parseMegatron(exportPlan(s, ExportFormat::Megatron)).at("--window-attn-skip-freq"), "2");
    s.model.fullAttentionLayers = {0};
    std::string list = "'[0";
    for (int i = 1; i < s.model.layers; ++i) list += ",1";
    EXPECT_EQ(parseMegatron(exportPlan(s, ExportFormat::Megatron)).at("--window-attn-skip-freq"), list + "]'");
    // A learned sink a head (gpt-oss) is Megatron-core's learnable softmax; without one no --softmax-type is written.
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--softmax-type"));
    s.model.attentionSinks = true;
    EXPECT_EQ(parseMegatron(exportPlan(s, ExportFormat::Megatron)).at("--softmax-type"), "learnable");
    s.model.attentionSinks = false;
    s.model.fullAttentionLayers.clear();
    s.plan.cp = 2;
    s.plan.dp /= 2;
    ProblemList problems;
    validatePlan(s.model, s.cluster, s.plan, "/plan", problems);
    ASSERT_FALSE(problems.empty());
    EXPECT_EQ(problems.items().front().where, "/plan/cp_comm_type");
    s.plan.cpComm = CpComm::AllGather;
    ProblemList gathered;
    validatePlan(s.model, s.cluster, s.plan, "/plan", gathered);
    EXPECT_TRUE(gathered.empty()) << gathered.items().front().message;
}

// Latent attention as Megatron-LM's MLA flags (arguments.py), with no --kv-channels beside them.
TEST(ExportMegatron, LatentAttentionWritesMegatronsMlaFlags) {
    Scenario s = preset("llama3-8b-h100");
    s.model.kvHeads = s.model.heads;
    s.model.mla = MlaConfig{1536, 512, 128, 64, 128};
    s.model.headDim = 192;
    const auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--multi-latent-attention"), "");
    EXPECT_EQ(a.at("--q-lora-rank"), "1536");
    EXPECT_EQ(a.at("--kv-lora-rank"), "512");
    EXPECT_EQ(a.at("--qk-head-dim"), "128");
    EXPECT_EQ(a.at("--qk-pos-emb-head-dim"), "64");
    EXPECT_EQ(a.at("--v-head-dim"), "128");
    for (const char* absent : {"--kv-channels", "--group-query-attention"}) EXPECT_FALSE(a.has(absent)) << absent;
    s.model.mla->qLoraRank = 0;
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--q-lora-rank"));
    // Multi-token prediction as Megatron-core's flag; torchtitan's models have none.
    EXPECT_FALSE(a.has("--mtp-num-layers"));
    s.model.mtpLayers = 1;
    EXPECT_EQ(parseMegatron(exportPlan(s, ExportFormat::Megatron)).at("--mtp-num-layers"), "1");
    s.plan.zeroStage = 3;
    s.plan.sequenceParallel = true;
    EXPECT_TRUE(contains(refusal(s, ExportFormat::Torchtitan), "/model/mtp_layers"));
}

// Dense layers among the expert layers as Megatron-LM's --moe-layer-freq list expression (1: an expert layer).
TEST(ExportMegatron, DenseLayersAmongExpertsAreAMoeLayerFreqPattern) {
    Scenario s = preset("llama3-8b-h100");
    s.model.layers = 4;
    s.model.moe = MoeConfig{8, 2, 1024};
    s.model.moe->denseLayers = {0};
    EXPECT_EQ(parseMegatron(exportPlan(s, ExportFormat::Megatron)).at("--moe-layer-freq"), "'([0]*1+[1]*3)'");
    s.model.moe->denseLayers = {1, 3};
    EXPECT_EQ(parseMegatron(exportPlan(s, ExportFormat::Megatron)).at("--moe-layer-freq"), "'[1,0,1,0]'");
    s.model.moe->denseLayers.clear();
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--moe-layer-freq"));
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--moe-router-num-groups"));
    s.model.moe->routingGroups = 4;
    s.model.moe->groupsPerToken = 2;
    const auto grouped = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(grouped.at("--moe-router-num-groups"), "4");
    EXPECT_EQ(grouped.at("--moe-router-group-topk"), "2");
}

TEST(ExportMegatron, TheLossKernelIsWrittenAsMegatronsCrossEntropyFlags) {
    // "fused" is what tessel costs for Megatron-core's vocab-parallel loss; "te" keeps only the logits, which
    // Transformer Engine's kernel overwrites with their gradient; NeMo's performance recipes run it from 25.09.
    // A plan of no named framework costs the fused kernel and writes its flag; Megatron-LM's own default,
    // "unfused", writes none.
    Scenario s = preset("llama3-8b-h100");
    auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--cross-entropy-loss-fusion"), "");
    EXPECT_FALSE(a.has("--cross-entropy-fusion-impl"));
    s.plan.framework.name = "megatron";
    a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_FALSE(a.has("--cross-entropy-loss-fusion"));
    EXPECT_FALSE(a.has("--cross-entropy-fusion-impl"));
    s.plan.framework.name = "nemo";
    s.plan.framework.version = "25.11";
    a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--cross-entropy-loss-fusion"), "");
    EXPECT_EQ(a.at("--cross-entropy-fusion-impl"), "te");
    s.plan.framework.crossEntropy = "eager";
    a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_FALSE(a.has("--cross-entropy-loss-fusion"));
}

// flash-attn's cross_entropy is llm-foundry's model code: every format refuses it at its pointer.
TEST(Export, FlashAttnsLossIsModelCode) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.framework.crossEntropy = "flash_attn";
    for (ExportFormat f : {ExportFormat::Megatron, ExportFormat::DeepSpeed, ExportFormat::Torchtitan})
        EXPECT_TRUE(contains(refusal(s, f), "/plan/cross_entropy"));
}

// torch.compile's cross_entropy is torchtitan's compiled loss: Megatron-LM and DeepSpeed refuse it at its pointer.
TEST(Export, CompiledLossIsTorchtitans) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.framework.crossEntropy = "compiled";
    for (ExportFormat f : {ExportFormat::Megatron, ExportFormat::DeepSpeed})
        EXPECT_TRUE(contains(refusal(s, f), "/plan/cross_entropy"));
    EXPECT_FALSE(contains(refusal(s, ExportFormat::Torchtitan), "/plan/cross_entropy")); // its fused kernels: compiled
}

// Liger-Kernel's fused linear cross-entropy patches a Hugging Face model: Megatron-LM and torchtitan run their own
// head and refuse it at its pointer; DeepSpeed's config says nothing of the loss of the model it is given.
TEST(Export, LigersFusedLinearLossIsHuggingFaceModelCode) {
    Scenario s = preset("llama3-8b-h100");
    s.plan.tp = 1;
    s.plan.dp = 8;
    s.plan.sequenceParallel = false;
    s.plan.recompute = Recompute::Full;
    s.plan.framework.crossEntropy = "fused_linear";
    for (ExportFormat f : {ExportFormat::Megatron, ExportFormat::Torchtitan})
        EXPECT_TRUE(contains(refusal(s, f), "/plan/cross_entropy"));
    EXPECT_NO_THROW((void)exportPlan(s, ExportFormat::DeepSpeed));
}

TEST(ExportMegatron, SquaredReluIsMegatronsFlag) {
    Scenario s = preset("llama3-8b-h100");
    s.model.activation = Activation::SquaredRelu;
    const auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--squared-relu"), "");
    EXPECT_FALSE(a.has("--swiglu"));
}

TEST(ExportMegatron, InterleavedScheduleGivesLayersPerVirtualStage) {
    const auto a = parseMegatron(exportPlan(preset("llama3-70b-h100"), ExportFormat::Megatron));
    EXPECT_EQ(a.at("--pipeline-model-parallel-size"), "4");
    EXPECT_EQ(a.at("--num-layers-per-virtual-pipeline-stage"), "4"); // 80 layers / (pp 4 x vpp 5)
}

// Uneven splits as Megatron-LM core states them: the first/last rank's layers, the rest even; with interleaving
// the virtual stage count replaces the per-virtual-stage layers.
TEST(ExportMegatron, UnevenSplitsAsFirstAndLastStageLayers) {
    Scenario s = defaultScenario(); // GPT-3 175B, 96 layers, tp 8 pp 8 dp 16
    s.plan.pipelineLayers = {11, 12, 12, 12, 12, 12, 12, 13};
    auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--decoder-first-pipeline-num-layers"), "11");
    EXPECT_EQ(a.at("--decoder-last-pipeline-num-layers"), "13");
    EXPECT_FALSE(a.has("--num-layers-per-virtual-pipeline-stage"));
    s.plan.pipelineLayers = {11, 12, 12, 12, 13, 12, 12, 12}; // a middle rank differs: not Megatron's form
    EXPECT_EQ(refusal(s, ExportFormat::Megatron), std::vector<std::string>{"/plan/pipeline_layers"});
    s = preset("llama3-70b-h100"); // 80 layers, pp 4, vpp 5
    s.plan.pipelineLayers.clear();
    s.plan.firstStageLayers = 15;
    s.plan.lastStageLayers = 25;
    a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--num-virtual-stages-per-pipeline-rank"), "5");
    EXPECT_EQ(a.at("--decoder-first-pipeline-num-layers"), "15");
    EXPECT_EQ(a.at("--decoder-last-pipeline-num-layers"), "25");
    // The embedding and the loss counted as layers (Llama 3.1 405B, 126 layers over pp 8 x vpp 8: 1, 2 x 62, 1 by
    // virtual stage, as NVIDIA's recipes run it): Megatron-LM's two account-for flags, not first/last counts,
    // which cannot state a rank whose virtual stages differ.
    s = preset("llama3-70b-h100");
    s.model = loadModelRef("llama3-405b", "test");
    s.plan.firstStageLayers = s.plan.lastStageLayers = 0;
    s.plan.pp = 8;
    s.plan.dp = 1;
    s.plan.vpp = 8;
    s.plan.globalBatch = 64;
    s.plan.pipelineSplit = PipelineSplit::EndsAsLayers;
    a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--num-virtual-stages-per-pipeline-rank"), "8");
    EXPECT_TRUE(a.has("--account-for-embedding-in-pipeline-split"));
    EXPECT_TRUE(a.has("--account-for-loss-in-pipeline-split"));
    EXPECT_FALSE(a.has("--decoder-first-pipeline-num-layers"));
    // Megatron-Bridge's 405B on GB200: pp 16 x vpp 8 = 128 virtual stages for 126 layers, the embedding and the loss
    // alone in theirs; the same two flags state it.
    s.plan.pp = 16;
    s.plan.globalBatch = 128;
    s.cluster.nodes = 16;
    a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--pipeline-model-parallel-size"), "16");
    EXPECT_EQ(a.at("--num-virtual-stages-per-pipeline-rank"), "8");
    EXPECT_TRUE(a.has("--account-for-embedding-in-pipeline-split"));
    EXPECT_TRUE(a.has("--account-for-loss-in-pipeline-split"));
}

TEST(ExportFrameworks, UnevenSplitsInTorchtitanAndRefusedByDeepSpeed) {
    Scenario s = preset("llama3-70b-h100");
    s.plan.zeroStage = 3;
    s.plan.precision = "fsdp";
    s.plan.vpp = 1;
    s.plan.schedule = Schedule::OneFOneB;
    s.plan.pp = 3;
    s.cluster.nodes = 6; // tp 8 x pp 3 x dp 2
    s.plan.pipelineSplit = PipelineSplit::Balanced;
    resolvePipelineSplit(s.model, s.cluster, s.plan);
    const std::vector<int> counts = chunkLayerCounts(s.model, s.plan);
    ASSERT_EQ(counts.size(), 3u);
    const auto t = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_layers_per_stage"), std::to_string(counts[1]));
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_first_stage_less_layers"), std::to_string(counts[1] - counts[0]));
    EXPECT_EQ(t.at("parallelism.pipeline_parallel_last_stage_less_layers"), std::to_string(counts[1] - counts[2]));
    s.plan.pipelineSplit = PipelineSplit::Even;
    s.plan.resolvedPipelineLayers.clear();
    s.plan.pipelineLayers = {30, 20, 30}; // heavier ends: beyond torchtitan's own split, so each stage is named
    const auto named = parseToml(exportPlan(s, ExportFormat::Torchtitan));
    EXPECT_EQ(named.count("parallelism.pipeline_parallel_layers_per_stage"), 0u);
    EXPECT_EQ(named.count("parallelism.module_fqns_per_model_part"), 1u);
    EXPECT_TRUE(contains(refusal(s, ExportFormat::DeepSpeed), "/plan/pipeline_split"));
}

TEST(ExportMegatron, MixtralPresetHasExpertsAndAllToAll) {
    const auto a = parseMegatron(exportPlan(preset("mixtral-8x7b-h100"), ExportFormat::Megatron));
    EXPECT_EQ(a.at("--num-experts"), "8");
    EXPECT_EQ(a.at("--moe-router-topk"), "2");
    EXPECT_EQ(a.at("--moe-ffn-hidden-size"), "14336");
    EXPECT_EQ(a.at("--expert-model-parallel-size"), "8");
    EXPECT_EQ(a.at("--moe-token-dispatcher-type"), "alltoall");
    EXPECT_EQ(a.launch.find("CUDA_DEVICE_MAX_CONNECTIONS"), std::string::npos) << "tp = cp = 1";
}

// A plan's etp is Megatron-core's --expert-tensor-parallel-size; without it Megatron takes tp, so none is written.
TEST(ExportMegatron, ExpertTensorParallelSizeIsThePlansEtp) {
    Scenario s = preset("mixtral-8x7b-h100");
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--expert-tensor-parallel-size"));
    s.plan.etp = 1;
    EXPECT_EQ(parseMegatron(exportPlan(s, ExportFormat::Megatron)).at("--expert-tensor-parallel-size"), "1");
    // The flex dispatcher is Megatron-core's, with the HybridEP backend.
    s.plan.framework.moeDispatcher = "flex";
    const auto flex = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(flex.at("--moe-token-dispatcher-type"), "flex");
    EXPECT_EQ(flex.at("--moe-flex-dispatcher-backend"), "hybridep");
    // Megatron-core's batch-level EP overlap is a flag of its own, written only where the plan says so.
    EXPECT_FALSE(flex.has("--overlap-moe-expert-parallel-comm"));
    s.plan.framework.moeA2aOverlap = true; // with pp 4 Megatron-core runs it only interleaved
    s.plan.vpp = 2;
    s.plan.schedule = Schedule::Interleaved1F1B;
    EXPECT_TRUE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--overlap-moe-expert-parallel-comm"));
    // The shared-expert overlap likewise, for a model with shared experts.
    s.plan.framework.moeA2aOverlap.reset();
    s.model.moe->sharedFfnHidden = 14336;
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--moe-shared-expert-overlap"));
    s.plan.framework.moeSharedExpertOverlap = true;
    EXPECT_TRUE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--moe-shared-expert-overlap"));
}

TEST(ExportMegatron, PartialRecomputeIsTheBlockMethodAndOnlyMegatronWritesIt) {
    Scenario s = defaultScenario();
    s.plan.recompute = Recompute::Full;
    s.plan.recomputeLayers = 3;
    const auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--recompute-granularity"), "full");
    EXPECT_EQ(a.at("--recompute-method"), "block");
    EXPECT_EQ(a.at("--recompute-num-layers"), "3");
    for (ExportFormat f : {ExportFormat::DeepSpeed, ExportFormat::Torchtitan}) {
        try {
            exportPlan(s, f);
            ADD_FAILURE() << "expected a refusal";
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find("/plan/recompute_layers"), std::string::npos) << e.what();
        }
    }
}

// Selective recompute of other modules than the attention core: Megatron-core's --recompute-modules (the experts as
// one grouped GEMM, which moe_act needs and tessel costs, in every MoE export); the other formats cannot say it.
TEST(ExportMegatron, RecomputeModulesAreMegatronCoresList) {
    Scenario s = preset("mixtral-8x7b-h100");
    s.plan.recompute = Recompute::Selective;
    auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_TRUE(a.has("--recompute-activations"));
    EXPECT_FALSE(a.has("--recompute-modules")); // the default, core_attn
    EXPECT_TRUE(a.has("--moe-grouped-gemm"));
    s.plan.recomputeModules = recompute_module::Layernorm | recompute_module::MoeAct;
    a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--recompute-modules"), "moe_act layernorm");
    EXPECT_FALSE(a.has("--recompute-granularity"));
    for (ExportFormat f : {ExportFormat::DeepSpeed, ExportFormat::Torchtitan}) {
        try {
            exportPlan(s, f);
            ADD_FAILURE() << "expected a refusal";
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find("/plan/recompute_modules"), std::string::npos) << e.what();
        }
    }
    EXPECT_FALSE(parseMegatron(exportPlan(defaultScenario(), ExportFormat::Megatron)).has("--moe-grouped-gemm")); // dense
}

TEST(ExportMegatron, LayerActivationOffloadIsMegatronCoresCpuOffloading) {
    // Llama 3 8B on 8 DGX B200 GPUs, pp 1, no recompute: the first 8 layers' activations to the host.
    Scenario s;
    s.model = loadModelRef("llama3-8b", "test");
    s.cluster = loadClusterRef("dgx-b200", "test");
    s.plan.tp = 1;
    s.plan.pp = 1;
    s.plan.dp = 8;
    s.plan.microBatch = 2;
    s.plan.globalBatch = 16;
    s.plan.zeroStage = 1;
    s.plan.recompute = Recompute::None;
    s.plan.sequenceParallel = false;
    s.plan.offloadActivationLayers = 8;
    const auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_TRUE(a.has("--cpu-offloading"));
    EXPECT_EQ(a.at("--cpu-offloading-num-layers"), "8");
    for (ExportFormat f : {ExportFormat::DeepSpeed, ExportFormat::Torchtitan}) {
        try {
            exportPlan(s, f);
            ADD_FAILURE() << "expected a refusal";
        } catch (const InputError& e) {
            EXPECT_NE(std::string(e.what()).find("/plan/offload_activation_layers"), std::string::npos) << e.what();
        }
    }
}

TEST(ExportMegatron, FullRecomputeMixedPrecisionAndNoFlash) {
    Scenario s = defaultScenario();
    s.plan.recompute = Recompute::Full;
    s.plan.precision = "mixed";
    s.plan.flashAttention = false;
    s.plan.zeroStage = 1;
    const auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--recompute-granularity"), "full");
    EXPECT_EQ(a.at("--recompute-method"), "uniform");
    EXPECT_EQ(a.at("--recompute-num-layers"), "1");
    EXPECT_FALSE(a.has("--recompute-activations"));
    EXPECT_EQ(a.at("--bf16"), "");
    EXPECT_EQ(a.at("--grad-reduce-in-bf16"), "");
    EXPECT_FALSE(a.has("--accumulate-allreduce-grads-in-fp32"));
    EXPECT_EQ(a.at("--attention-backend"), "unfused");
    EXPECT_FALSE(a.has("--use-flash-attn"));
    EXPECT_EQ(a.at("--use-distributed-optimizer"), "");
}

TEST(ExportMegatron, TpPpDpRankOrderUsesMegatronsAlternativeMapping) {
    Scenario s = defaultScenario();
    s.plan.rankOrder = {ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Pp, ParallelDim::Dp};
    EXPECT_TRUE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--use-tp-pp-dp-mapping"));
    // Size-1 dimensions do not matter: cp and ep moved elsewhere build the same groups.
    s.plan.rankOrder = {ParallelDim::Ep, ParallelDim::Tp, ParallelDim::Dp, ParallelDim::Cp, ParallelDim::Pp};
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--use-tp-pp-dp-mapping"));
    s.plan.rankOrder = {ParallelDim::Dp, ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Pp};
    EXPECT_EQ(refusal(s, ExportFormat::Megatron), std::vector<std::string>{"/plan/rank_order"});
}

TEST(ExportMegatron, RefusesZero2And3) {
    Scenario s = defaultScenario();
    for (int z : {2, 3}) {
        s.plan.zeroStage = z;
        EXPECT_EQ(refusal(s, ExportFormat::Megatron), std::vector<std::string>{"/plan/zero_stage"})
            << "zero " << z;
    }
}

TEST(ExportMegatron, SharedExpertsAreMegatronsSharedExpertSize) {
    Scenario s = preset("mixtral-8x7b-h100");
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--moe-shared-expert-intermediate-size"));
    s.model.moe->sharedFfnHidden = 14336;
    EXPECT_EQ(parseMegatron(exportPlan(s, ExportFormat::Megatron)).at("--moe-shared-expert-intermediate-size"), "14336");
}

TEST(ExportMegatron, QkNormIsMegatronsQkLayernorm) {
    Scenario s = defaultScenario();
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--qk-layernorm"));
    s.model.qkNorm = true;
    EXPECT_TRUE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--qk-layernorm"));
}

TEST(ExportMegatron, RefusesAlibi) {
    // Megatron-LM's --position-embedding-type has no ALiBi (BigScience's Megatron-DeepSpeed fork has it).
    Scenario s = defaultScenario();
    s.model.position = PositionEmbedding::Alibi;
    EXPECT_EQ(refusal(s, ExportFormat::Megatron), std::vector<std::string>{"/model/position_embedding"});
    EXPECT_FALSE(contains(refusal(s, ExportFormat::DeepSpeed), "/model/position_embedding")); // model code is the user's
}

TEST(ExportMegatron, RefusesGemmasGatedGeluAndPostNorms) {
    // Megatron-LM's arguments gate with SiLU only (--swiglu) and normalise before each block only; exporting Gemma's
    // GeGLU as --swiglu, or without its post-norms, would train another model. DeepSpeed runs the user's model code.
    Scenario s = defaultScenario();
    s.model.activation = Activation::Geglu;
    EXPECT_EQ(refusal(s, ExportFormat::Megatron), std::vector<std::string>{"/model/activation"});
    EXPECT_FALSE(contains(refusal(s, ExportFormat::DeepSpeed), "/model/activation"));
    s.model.activation = Activation::Swiglu;
    s.model.postNorms = true;
    EXPECT_EQ(refusal(s, ExportFormat::Megatron), std::vector<std::string>{"/model/post_norms"});
    EXPECT_FALSE(contains(refusal(s, ExportFormat::DeepSpeed), "/model/post_norms"));
    // BLOOM's norm over the embedding is BigScience's Megatron-DeepSpeed (--embed-layernorm), not Megatron-LM.
    s.model.postNorms = false;
    s.model.embeddingNorm = true;
    EXPECT_EQ(refusal(s, ExportFormat::Megatron), std::vector<std::string>{"/model/embedding_norm"});
    EXPECT_FALSE(contains(refusal(s, ExportFormat::DeepSpeed), "/model/embedding_norm"));
    // Gemma 2's soft-capping is NeMo's Gemma2Model, not an argument of Megatron-LM's: each cap at its own key.
    s.model.embeddingNorm = false;
    s.model.attentionSoftcap = 50.0;
    s.model.logitSoftcap = 30.0;
    EXPECT_EQ(refusal(s, ExportFormat::Megatron), (std::vector<std::string>{"/model/attention_softcap", "/model/logit_softcap"}));
    s.model.attentionSoftcap = s.model.logitSoftcap = 0.0;
    s.model.embeddingScale = true;
    EXPECT_EQ(refusal(s, ExportFormat::Megatron), std::vector<std::string>{"/model/embedding_scale"});
    // GPT-NeoX's attention and MLP side by side (gpt_j_residual) are its own model code, not an argument of Megatron-LM's.
    s.model.embeddingScale = false;
    s.model.parallelResidual = true;
    EXPECT_EQ(refusal(s, ExportFormat::Megatron), std::vector<std::string>{"/model/parallel_residual"});
    EXPECT_FALSE(contains(refusal(s, ExportFormat::DeepSpeed), "/model/parallel_residual"));
}

TEST(ExportMegatron, RefusesZeroBubbleAndGpipe) {
    Scenario s = defaultScenario();
    for (auto sched : {Schedule::ZeroBubble, Schedule::Gpipe, Schedule::DualPipeV}) {
        s.plan.schedule = sched;
        s.plan.vpp = sched == Schedule::DualPipeV ? 2 : 1;
        EXPECT_EQ(refusal(s, ExportFormat::Megatron), std::vector<std::string>{"/plan/schedule"})
            << toString(sched);
    }
}

TEST(ExportMegatron, ListsEveryInexpressibleFieldAtOnce) {
    Scenario s = defaultScenario();
    s.plan.zeroStage = 3;
    s.plan.schedule = Schedule::Gpipe;
    s.plan.precision = "bf16_no_master";
    const auto where = refusal(s, ExportFormat::Megatron);
    EXPECT_EQ(where.size(), 3u);
    EXPECT_TRUE(contains(where, "/plan/zero_stage"));
    EXPECT_TRUE(contains(where, "/plan/schedule"));
    EXPECT_TRUE(contains(where, "/plan/precision"));
}

// K and V replicated over TP beyond the model's key/value heads is BigCode's fork's model code: Megatron-LM, DeepSpeed
// and torchtitan split the heads over TP, so each refuses such a plan at its pointer; where the heads divide tp the
// knob changes nothing and nothing is refused.
TEST(ExportMegatron, KvReplicationBeyondTheHeadsIsRefusedEverywhere) {
    Scenario s = preset("llama3-70b-h100"); // 8 key/value heads
    s.plan.framework.kvReplication = true;
    EXPECT_NO_THROW((void)exportPlan(s, ExportFormat::Megatron));
    s.model.kvHeads = s.plan.tp / 2;
    for (const ExportFormat f : {ExportFormat::Megatron, ExportFormat::DeepSpeed, ExportFormat::Torchtitan})
        EXPECT_TRUE(contains(refusal(s, f), "/plan/kv_replication"));
}

// Whether K and V are repeated before the kernel is the model code's: a stated repeat_kv that the exported
// framework's code does not follow is refused at its pointer (Megatron-LM's Transformer Engine takes grouped K and V
// as they are; torchtitan's Llama repeated them before 2026); one that agrees is written by nothing and refused by none.
TEST(ExportMegatron, RepeatKvAgainstTheModelCodeIsRefused) {
    Scenario s = preset("llama3-70b-h100");
    s.plan.framework.repeatKv = false;
    EXPECT_NO_THROW((void)exportPlan(s, ExportFormat::Megatron));
    s.plan.framework.repeatKv = true;
    EXPECT_TRUE(contains(refusal(s, ExportFormat::Megatron), "/plan/repeat_kv"));
    EXPECT_TRUE(contains(refusal(s, ExportFormat::DeepSpeed), "/plan/repeat_kv"));
}

// A TP plan's ends: every format splits the word embedding by vocabulary, so a whole one is refused at its pointer;
// the logits gathered over TP are torchtitan's disable_loss_parallel, which its export writes, and Megatron-LM and
// DeepSpeed refuse (their loss is vocab-parallel). At tp 1 neither says anything.
TEST(ExportMegatron, TpPlanEndsAreWrittenOrRefusedAtTheirPointers) {
    Scenario s = preset("llama3-70b-h100"); // tp 8
    s.plan.framework.vocabParallelEmbedding = false;
    for (const ExportFormat f : {ExportFormat::Megatron, ExportFormat::DeepSpeed, ExportFormat::Torchtitan})
        EXPECT_TRUE(contains(refusal(s, f), "/plan/vocab_parallel_embedding"));
    s.plan.framework.vocabParallelEmbedding.reset();
    s.plan.framework.lossParallel = false;
    for (const ExportFormat f : {ExportFormat::Megatron, ExportFormat::DeepSpeed})
        EXPECT_TRUE(contains(refusal(s, f), "/plan/loss_parallel"));
    Scenario t = preset("llama3-8b-h100");
    t.plan.tp = 2;
    t.plan.pp = 1;
    t.plan.cp = 1;
    t.plan.dp = t.cluster.totalGpus() / 2;
    t.plan.zeroStage = 3;
    t.plan.precision = "fsdp";
    t.plan.framework.lossParallel = false;
    const std::string text = exportPlan(t, ExportFormat::Torchtitan);
    EXPECT_NE(text.find("disable_loss_parallel = true"), std::string::npos) << text;
    t.plan.framework.lossParallel.reset();
    EXPECT_EQ(exportPlan(t, ExportFormat::Torchtitan).find("disable_loss_parallel"), std::string::npos);
    t.plan.tp = 1;
    t.plan.sequenceParallel = false;
    t.plan.dp = t.cluster.totalGpus();
    t.plan.framework.lossParallel = false;
    t.plan.framework.vocabParallelEmbedding = false;
    std::string one;
    EXPECT_NO_THROW(one = exportPlan(t, ExportFormat::Torchtitan));
    EXPECT_EQ(one.find("disable_loss_parallel"), std::string::npos);
}

TEST(ExportMegatron, OverlapSettingsAndFp8AreWritten) {
    Scenario s = preset("llama3-70b-h100"); // interleaved, ZeRO-1, SP
    s.plan.framework.name = "megatron";
    s.plan.framework.ddpImpl = "torch";
    s.plan.framework.overlapParamGather = true;
    s.plan.framework.tpCommOverlap = true;
    s.plan.precision = "fp8";
    MegatronArgs a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_TRUE(a.has("--overlap-grad-reduce"));
    EXPECT_TRUE(a.has("--overlap-param-gather"));
    EXPECT_TRUE(a.has("--tp-comm-overlap"));
    EXPECT_FALSE(a.has("--no-overlap-p2p-communication")); // current Megatron overlaps interleaved transfers
    EXPECT_EQ(a.at("--fp8-format"), "hybrid");
    EXPECT_EQ(a.at("--transformer-impl"), "transformer_engine");
    EXPECT_TRUE(a.has("--bf16"));
    // The scaling recipe as the plan resolves it: delayed, with its amax history and no --fp8-recipe (which older
    // Megatron-LM does not know), unless it names another.
    EXPECT_FALSE(a.has("--fp8-recipe"));
    EXPECT_EQ(a.at("--fp8-amax-history-len"), "1024");
    s.plan.framework.fp8Recipe = "tensorwise";
    const MegatronArgs current = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(current.at("--fp8-recipe"), "tensorwise");
    EXPECT_FALSE(current.has("--fp8-amax-history-len")); // current scaling keeps no history
    s.plan.framework.fp8Recipe.reset();
    // A Megatron-LM of 2023 did not overlap them: written as such.
    s.plan.framework.version = "2023";
    a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_TRUE(a.has("--no-overlap-p2p-communication"));
    // Local DDP reduces after the backward: no overlap flag.
    s.plan.framework.ddpImpl = "local";
    EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--overlap-grad-reduce"));
}

TEST(ExportMegatron, RefusesOverlapItCannotRun) {
    Scenario s = defaultScenario(); // 1F1B, ZeRO-0
    s.plan.sequenceParallel = false;
    s.plan.framework.name = "megatron";
    s.plan.framework.overlapP2pComm = true;
    s.plan.framework.overlapParamGather = true;
    s.plan.framework.tpCommOverlap = true;
    s.plan.framework.asyncTpGradReduce = false;
    const auto where = refusal(s, ExportFormat::Megatron);
    EXPECT_TRUE(contains(where, "/plan/overlap_p2p_comm"));
    EXPECT_TRUE(contains(where, "/plan/overlap_param_gather"));
    EXPECT_TRUE(contains(where, "/plan/tp_comm_overlap"));
    EXPECT_TRUE(contains(where, "/plan/async_tp_grad_reduce"));
}

TEST(ExportMegatron, DistributedOptimizerWithContextParallelNeedsZeroOverCp) {
    Scenario s = defaultScenario();
    s.plan.dp = 8;
    s.plan.cp = 2;
    s.plan.zeroStage = 1;
    EXPECT_TRUE(s.plan.zeroOverCp); // the default: sharded as Megatron-core shards
    s.plan.zeroOverCp = false;
    EXPECT_EQ(refusal(s, ExportFormat::Megatron), std::vector<std::string>{"/plan/zero_over_cp"});
    s.plan.zeroOverCp = true;
    const auto a = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(a.at("--context-parallel-size"), "2");
    EXPECT_EQ(a.at("--use-distributed-optimizer"), "");
    EXPECT_FALSE(a.has("--cp-comm-type")); // p2p, Megatron-core's default, is not written
    for (CpComm comm : {CpComm::A2a, CpComm::AllGather}) {
        s.plan.cpComm = comm;
        EXPECT_EQ(parseMegatron(exportPlan(s, ExportFormat::Megatron)).at("--cp-comm-type"), toString(comm));
        EXPECT_FALSE(parseMegatron(exportPlan(s, ExportFormat::Megatron)).has("--hierarchical-context-parallel-sizes"));
    }
    // a2a+p2p with its levels: all-to-all groups of 2, a ring of 2 across them.
    s.plan.dp = 4;
    s.plan.cp = 4;
    s.plan.cpComm = CpComm::A2aP2p;
    s.plan.cpA2a = 2;
    const auto h = parseMegatron(exportPlan(s, ExportFormat::Megatron));
    EXPECT_EQ(h.at("--cp-comm-type"), "a2a+p2p");
    EXPECT_EQ(h.at("--hierarchical-context-parallel-sizes"), "2 2");
}

} // namespace
} // namespace tessel::sim
