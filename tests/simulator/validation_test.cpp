// Published training runs read as scenarios: prose fields parsed, unstated values listed as assumptions,
// unreadable records refused with their reason, errors summarised per group (`tessel validate`).
#include "validation_support.hpp"
#include "../cost_models/test_support.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/framework.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/sim/validation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <map>

namespace tessel::sim {
namespace {
using test::load;
using test::mentions;
using test::record;

// The record on `nodes` nodes of 8 GPUs at tp x pp with dp 1 and micro-batch 1.
nlohmann::json onNodes(nlohmann::json r, int nodes, int tp, int pp) {
    r["system"]["nodes"] = nodes;
    r["system"]["total_gpus"] = nodes * 8;
    r["plan"]["tp"] = tp;
    r["plan"]["pp"] = pp;
    r["plan"]["dp"] = 1;
    r["plan"]["micro_batch"] = 1;
    return r;
}

// The record's 32 GPUs as pure data parallelism (tp 1, pp 1, no sequence parallelism).
void dataParallelOnly(nlohmann::json& r) {
    r["plan"]["tp"] = 1;
    r["plan"]["pp"] = 1;
    r["plan"]["dp"] = 32;
    r["plan"]["sequence_parallel"] = false;
}

TEST(ValidationRecord, ProseBecomesAScenarioAndEveryGuessIsListed) {
    const ValidationCase c = load(record());
    const Scenario& s = c.scenario;
    EXPECT_EQ(s.cluster.name, "dgx-a100-80g");
    EXPECT_EQ(s.cluster.nodes, 4);
    EXPECT_DOUBLE_EQ(s.cluster.interNode.bandwidthBytesPerSecond, 8 * 200e9 / 8 / 8); // 8 NICs of 200 Gb/s, 8 GPUs
    EXPECT_EQ(s.model.kvHeads, 32);
    EXPECT_EQ(s.model.ffnHidden, 4 * 4096);
    EXPECT_TRUE(mentions(c.assumptions, "kv_heads not stated"));
    EXPECT_TRUE(mentions(c.assumptions, "ffn_hidden not stated"));
    EXPECT_EQ(s.plan.recompute, Recompute::Full);
    EXPECT_TRUE(s.plan.sequenceParallel);
    EXPECT_EQ(s.plan.zeroStage, 1); // the distributed optimizer
    EXPECT_EQ(s.plan.framework.name, "megatron");
    EXPECT_EQ(s.plan.framework.version, "2022"); // arXiv 2205: software of 2022
    // Step time from the throughput: 64 x 2048 tokens at 65536 tokens/s.
    ASSERT_TRUE(c.measured.stepSeconds.has_value());
    EXPECT_DOUBLE_EQ(*c.measured.stepSeconds, 2.0);
    EXPECT_EQ(c.measured.stepSource, "runs.json#/0/measured/tokens_per_s");
}

TEST(ValidationRecord, AStepTimeFromAFlopRateWhenThatIsAllTheRecordStates) {
    // Only MFU or TFLOP/s published: the step that rate implies with tessel's model-FLOP count, said so; a
    // hardware count (HFU) with full recompute is 4/3 of the model count.
    nlohmann::json r = record();   // 32 A100, full recompute
    r["measured"] = {{"mfu", 0.5}};
    ValidationCase c = load(r);
    const double flops = modelFlopsPerStep(c.scenario.model, c.scenario.plan);
    ASSERT_TRUE(c.measured.stepSeconds.has_value());
    EXPECT_DOUBLE_EQ(*c.measured.stepSeconds, flops / (0.5 * 312e12 * 32));
    EXPECT_EQ(c.measured.stepSource, "runs.json#/0/measured/mfu");
    EXPECT_TRUE(mentions(c.assumptions, "derived from measured/mfu with tessel's model-FLOP count"));
    r["measured"] = {{"tflops_per_gpu", 150.0}, {"tflops_kind", "HFU (recompute counted)"}};
    c = load(r);
    EXPECT_DOUBLE_EQ(*c.measured.stepSeconds, flops * 4.0 / 3.0 / (150e12 * 32));
    // A stated step time or throughput always wins over a rate.
    r["measured"]["tokens_per_s"] = 65536.0;
    EXPECT_EQ(load(r).measured.stepSource, "runs.json#/0/measured/tokens_per_s");
}

TEST(ValidationRecord, LinksGpusAndShardingInOtherWords) {
    nlohmann::json r = record();
    r["system"]["inter_node_link"] = "1600 Gbps node-node interconnect (RoCE)";
    EXPECT_DOUBLE_EQ(load(r).scenario.cluster.interNode.bandwidthBytesPerSecond, 1600e9 / 8 / 8);
    r["system"]["inter_node_link"] = "400 Gbps per GPU";
    EXPECT_DOUBLE_EQ(load(r).scenario.cluster.interNode.bandwidthBytesPerSecond, 400e9 / 8);
    // A bare rate one port carries is one NIC's, one NIC per GPU as DGX systems ship; it is listed as read so.
    // Read as the node's, the 8 GPUs would share 50 GB/s and a Llama 3 70B FP8 run on 64 H100 (NeMo 26.04,
    // 1664 tokens/s/GPU) came out 49% slow, its pipeline sends at 1/8 of the link.
    r["system"]["inter_node_link"] = "InfiniBand NDR 400 Gb/s";
    const ValidationCase ndr = load(r);
    EXPECT_DOUBLE_EQ(ndr.scenario.cluster.interNode.bandwidthBytesPerSecond, 400e9 / 8);
    EXPECT_TRUE(mentions(ndr.assumptions, "per NIC, one NIC per GPU"));
    // Said to be the node's, or more than any port carries (800 Gb/s): shared by the node's GPUs.
    r["system"]["inter_node_link"] = "400 Gb/s per node";
    EXPECT_DOUBLE_EQ(load(r).scenario.cluster.interNode.bandwidthBytesPerSecond, 400e9 / 8 / 8);
    r["system"]["inter_node_link"] = "3200 Gbps EFA";
    EXPECT_DOUBLE_EQ(load(r).scenario.cluster.interNode.bandwidthBytesPerSecond, 3200e9 / 8 / 8);
    r["system"]["gpu"] = "A100 40GB";
    EXPECT_EQ(load(r).scenario.cluster.name, "dgx-a100-40g");
    r["system"]["gpu"] = "NVIDIA H800";
    ValidationCase h = load(r);
    EXPECT_EQ(h.scenario.cluster.name, "dgx-h100-80g");
    EXPECT_TRUE(mentions(h.assumptions, "H800"));
    r["system"]["gpu"] = "A100-SXM4-80GB";
    r["plan"]["zero"] = nullptr;
    r["plan"]["distributed_optimizer"] = nullptr;
    r["plan"]["fsdp_sharding"] = "FULL_SHARD";
    r["plan"]["framework"] = "Composer + PyTorch FSDP";
    dataParallelOnly(r);
    const ValidationCase f = load(r);
    EXPECT_EQ(f.scenario.plan.zeroStage, 3);
    EXPECT_EQ(f.scenario.plan.framework.name, "fsdp");
}

TEST(ValidationRecord, InconsistentOrMissingDegreesAreInferredAndSaid) {
    nlohmann::json r = record();
    r["plan"]["dp"] = 3; // 4 x 2 x 3 = 24 of 32 GPUs
    const ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.dp, 4);
    EXPECT_TRUE(mentions(c.assumptions, "does not fill"));
    r = record();
    r["plan"]["micro_batch"] = nullptr;
    r["plan"]["grad_accum"] = 8;
    EXPECT_EQ(load(r).scenario.plan.microBatch, 2); // 64 / (8 x 4)
}

TEST(ValidationRecord, UnstatedRecomputeIsRaisedUntilThePlanFits) {
    nlohmann::json r = record();
    // 175B on 64 GPUs at tp 8 pp 8 and no recompute does not fit in 80 GB.
    r["model"] = {{"name", "GPT 175B"}, {"layers", 96}, {"hidden", 12288}, {"heads", 96}, {"kv_heads", 96},
                  {"ffn_hidden", 49152}, {"vocab", 51200}, {"seq", 2048}};
    r = onNodes(r, 8, 8, 8);
    r["plan"]["recompute"] = nullptr;
    r["plan"]["sequence_parallel"] = nullptr;
    const ValidationCase c = load(r);
    EXPECT_NE(c.scenario.plan.recompute, Recompute::None);
    EXPECT_TRUE(mentions(c.assumptions, "raised until the plan fits"));
}

TEST(ValidationRecord, PartialRecomputeIsReadFromConfigNamesOrProse) {
    nlohmann::json r = record(); // "full (every layer)": every layer, nothing to say
    EXPECT_EQ(load(r).scenario.plan.recomputeLayers, 0);
    EXPECT_FALSE(mentions(load(r).assumptions, "recompute \""));
    // Megatron-LM's block method: the first n layers of each chunk.
    r["plan"]["recompute"] = "full, block method, 4 layers per stage";
    ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.recompute, Recompute::Full);
    EXPECT_EQ(c.scenario.plan.recomputeLayers, 4);
    EXPECT_TRUE(mentions(c.assumptions, "the first 4 layers of each chunk recomputed"));
    r["plan"]["recompute"] = "full";
    r["plan"]["recompute_method"] = "block";
    r["plan"]["recompute_num_layers"] = 2;
    EXPECT_EQ(load(r).scenario.plan.recomputeLayers, 2);
    // Uniform with several layers per checkpoint recomputes every layer: read so, and said.
    r["plan"]["recompute_method"] = "uniform";
    c = load(r);
    EXPECT_EQ(c.scenario.plan.recomputeLayers, 0);
    EXPECT_TRUE(mentions(c.assumptions, "not one per 2"));
    r["plan"]["recompute_num_layers"] = 1;
    EXPECT_FALSE(mentions(load(r).assumptions, "recompute \""));
    // A block count at or beyond the model's layers (or too large to hold) is every layer, said.
    r["plan"]["recompute_method"] = "block";
    r["plan"]["recompute_num_layers"] = 1000000000000LL;
    c = load(r);
    EXPECT_EQ(c.scenario.plan.recomputeLayers, 0);
    EXPECT_TRUE(mentions(c.assumptions, "reaches every layer of every chunk"));
}

TEST(ValidationRecord, AttentionFollowsTheRecordThenItsYear) {
    nlohmann::json r = record();
    EXPECT_FALSE(load(r).scenario.plan.flashAttention); // Megatron-LM of 2022: no FlashAttention
    r["model"]["attention"] = "flash or triton per yaml";
    ValidationCase c = load(r);
    EXPECT_TRUE(c.scenario.plan.flashAttention);
    EXPECT_EQ(c.scenario.plan.attentionKernel, "flash1");
    r["model"]["attention"] = "FlashAttention-3";
    EXPECT_EQ(load(r).scenario.plan.attentionKernel, "flash2"); // A100 has no FA3: the best it has
    // llm-foundry's benchmark runs take submit_benchmarks.py's --attn_impl, default triton (FA1 class); the Large
    // Scale table's sweep.py (5e85bd62d) passes flash (flash-attn 2.4.2) for MPT-1B/3B/7B/70B, triton for 13B/30B.
    r["model"]["attention"] = "flash or triton per yaml";
    r["source"] = "mosaicml/llm-foundry scripts/train/benchmarking/README.md, section 'A100 80GB with 1600 Gbps node-node interconnect (RoCE)'";
    EXPECT_EQ(load(r).scenario.plan.attentionKernel, "flash1");
    r["source"] = "mosaicml/llm-foundry scripts/train/benchmarking/README.md, section 'H100 80GB BF16 (Large Scale, >= 128 GPUs)'";
    r["model"]["name"] = "MPT-70B";
    c = load(r);
    EXPECT_EQ(c.scenario.plan.attentionKernel, "flash2");
    EXPECT_TRUE(mentions(c.assumptions, "attn_impl flash, flash-attn 2.4.2"));
    for (const char* name : {"MPT-13B", "MPT-30B"}) {
        r["model"]["name"] = name;
        c = load(r);
        EXPECT_EQ(c.scenario.plan.attentionKernel, "flash1") << name;
        EXPECT_TRUE(mentions(c.assumptions, "attn_impl triton for this model")) << name;
    }
    for (const char* name : {"MPT-7B", "MPT-3B", "MPT-1B"}) {
        r["model"]["name"] = name;
        EXPECT_EQ(load(r).scenario.plan.attentionKernel, "flash2") << name;
    }
}

// Llama 3 405B as Meta describes it (Llama Team 2024, §3.3.2): 126 layers on 16 pipeline stages, one layer fewer
// on the first and the last; context parallelism 16 for the long-context stage; FP8 on H100.
nlohmann::json llama405(int gpus, int cp, int seq) {
    nlohmann::json r = record();
    r["id"] = "llama3-405b";
    r["model"] = {{"name", "Llama 3 405B"}, {"layers", 126}, {"hidden", 16384}, {"heads", 128}, {"kv_heads", 8},
                  {"ffn_hidden", 53248}, {"vocab", 128256}, {"seq", seq}, {"params", 405e9}};
    r["system"] = {{"gpu", "H100-SXM5-80GB"}, {"gpus_per_node", 8}, {"nodes", gpus / 8}, {"total_gpus", gpus},
                   {"intra_node_link", "NVLink"}, {"inter_node_link", "RoCE 400 Gb/s"}, {"precision", "bf16"}};
    r["plan"] = {{"tp", 8}, {"pp", 16}, {"cp", cp}, {"dp", gpus / (8 * 16 * cp)}, {"ep", 1}, {"vpp", 1},
                 {"micro_batch", 1}, {"global_batch", gpus / (8 * 16 * cp) * 16}, {"recompute", "selective"},
                 {"sequence_parallel", true}, {"zero", 1}, {"distributed_optimizer", true}, {"framework", "Megatron-LM"}};
    return r;
}

TEST(ValidationRecord, TorchtitansH100AndItsAttention) {
    // torchtitan's Llama 3.1 benchmarks (benchmarks/llama3_h100_202412_torchtitan.md) ran on Meta's Grand Teton
    // H100: 96 GB of HBM2e at 2.4 TB/s, 500 W. Read as the 80 GB part, its 82.4 GiB FSDP run could not fit.
    nlohmann::json r = record();
    r["source"] = "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md (2024-12)";
    r["system"]["gpu"] = "H100 96GB HBM2e (500W)";
    r["plan"]["framework"] = "torchtitan";
    r["plan"]["zero"] = 3;
    const ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.cluster.name, "grand-teton-h100-96g");
    EXPECT_GT(c.scenario.cluster.gpu.memoryBytes, 95LL * 1024 * 1024 * 1024);
    EXPECT_DOUBLE_EQ(c.scenario.cluster.gpu.hbmBytesPerSecond, 2.4e12);
    EXPECT_TRUE(mentions(c.assumptions, "Grand Teton"));
    // Its models call PyTorch SDPA, whose flash backend is FlashAttention-2, not Hopper's FlashAttention-3.
    EXPECT_EQ(c.scenario.plan.attentionKernel, "flash2");
    EXPECT_TRUE(mentions(c.assumptions, "PyTorch SDPA"));
    // FSDP's mixed precision: fp32 shards, bf16 gathers, fp32 reduction; Composer's 'PURE' reduces in bf16.
    EXPECT_EQ(c.scenario.plan.precision, "fsdp");
    nlohmann::json pure = r;
    pure["system"]["precision"] = "bf16 (FSDP mixed_precision=PURE)";
    EXPECT_EQ(load(pure).scenario.plan.precision, "fsdp_pure");
    // torch.autocast over fp32 parameters without FSDP sharding is its own recipe; Composer's amp_bf16 under FSDP
    // (FULL_SHARD) is FSDP's mixed precision, which casts before the gather.
    nlohmann::json autocast = r;
    autocast["plan"]["zero"] = 0;
    autocast["system"]["precision"] = "bf16 autocast, fp32 parameters and AdamW (fused)";
    EXPECT_EQ(load(autocast).scenario.plan.precision, "amp");
    autocast["system"]["precision"] = "amp_bf16";
    EXPECT_EQ(load(autocast).scenario.plan.precision, "amp");
    autocast["plan"]["zero"] = 3;
    autocast["system"]["precision"] = "amp_bf16 (FSDP mixed_precision=DEFAULT)";
    EXPECT_EQ(load(autocast).scenario.plan.precision, "fsdp");
    // Plain-PyTorch trainers' bf16 is autocast over fp32 weights, said; under DeepSpeed it is DeepSpeed's bf16.
    nlohmann::json trainer = record();
    trainer["source"] = "Someone et al. 2024";
    trainer["plan"]["framework"] = "Hugging Face Trainer (DDP)";
    trainer["plan"]["zero"] = 0;
    dataParallelOnly(trainer);
    trainer["system"]["precision"] = "bf16";
    const ValidationCase hf = load(trainer);
    EXPECT_EQ(hf.scenario.plan.precision, "amp");
    EXPECT_TRUE(mentions(hf.assumptions, "torch.autocast over fp32 weights"));
    trainer["plan"]["framework"] = "Hugging Face Trainer + DeepSpeed ZeRO-2";
    trainer["plan"]["zero"] = 2;
    EXPECT_NE(load(trainer).scenario.plan.precision, "amp");
    // A sharded-data-parallel run without a pipeline that states no micro-batch takes one a step (no
    // accumulation: the frameworks' default); Megatron-LM's default stays 1.
    nlohmann::json fsdpRun = trainer;
    fsdpRun["plan"]["framework"] = "FSDP (metaseq)";
    fsdpRun["plan"]["zero"] = 3;
    fsdpRun["plan"].erase("micro_batch");
    const ValidationCase noAccumulation = load(fsdpRun);
    EXPECT_EQ(noAccumulation.scenario.plan.microBatch, 64 / 32);
    EXPECT_TRUE(mentions(noAccumulation.assumptions, "no gradient accumulation"));
    // One micro-batch that cannot fit (512 sequences a rank of a 7B model) is not kept: the largest that fits.
    fsdpRun["plan"]["global_batch"] = 32 * 512;
    const ValidationCase accumulated = load(fsdpRun);
    EXPECT_LT(accumulated.scenario.plan.microBatch, 512);
    EXPECT_EQ(512 % accumulated.scenario.plan.microBatch, 0);
    EXPECT_TRUE(mentions(accumulated.assumptions, "does not fit in memory: micro_batch"));
    nlohmann::json megatronRun = record();
    megatronRun["plan"].erase("micro_batch");
    EXPECT_EQ(load(megatronRun).scenario.plan.microBatch, 1);
    // MFU printed as a percentage reads as one, said; a batch given in tokens is that many sequences.
    nlohmann::json pct = record();
    pct["measured"] = {{"mfu", 42}};
    nlohmann::json frac = record();
    frac["measured"] = {{"mfu", 0.42}};
    const ValidationCase percent = load(pct);
    ASSERT_TRUE(percent.measured.stepSeconds.has_value());
    EXPECT_DOUBLE_EQ(*percent.measured.stepSeconds, *load(frac).measured.stepSeconds);
    EXPECT_TRUE(mentions(percent.assumptions, "measured/mfu 42 read as a percentage"));
    // Only an HFU: hardware FLOPs (full recompute: 4/3 of the model's), so the same step as an MFU of 3/4 of it;
    // an aggregate rate and samples per second read too.
    nlohmann::json hfu = record();
    hfu["measured"] = {{"hfu", 0.56}};
    EXPECT_NEAR(*load(hfu).measured.stepSeconds, *load(frac).measured.stepSeconds * 0.42 / 0.56 * 4.0 / 3.0, 1e-9);
    nlohmann::json agg = record();
    agg["measured"] = {{"aggregate_pflops", 1.0}};
    EXPECT_EQ(load(agg).measured.stepSource, "runs.json#/0/measured/aggregate_pflops");
    nlohmann::json sps = record();
    sps["measured"] = {{"samples_per_s", 16.0}};
    EXPECT_DOUBLE_EQ(*load(sps).measured.stepSeconds, 64.0 / 16.0);
    // Recompute as a flag: on is full, off is none (not a default that may be raised).
    nlohmann::json flag = record();
    flag["plan"]["recompute"] = true;
    EXPECT_EQ(load(flag).scenario.plan.recompute, Recompute::Full);
    flag["plan"].erase("recompute");
    flag["plan"]["activation_checkpointing"] = false;
    const ValidationCase off = load(flag);
    EXPECT_EQ(off.scenario.plan.recompute, Recompute::None);
    EXPECT_FALSE(mentions(off.assumptions, "recompute not stated"));
    nlohmann::json inTokens = record();
    inTokens["plan"].erase("global_batch");
    inTokens["plan"]["global_batch_tokens"] = 64 * 2048;
    EXPECT_EQ(load(inTokens).scenario.plan.globalBatch, 64);
    inTokens["plan"]["global_batch_tokens"] = 64 * 2048 + 1;
    const auto uneven = loadValidationRecords(nlohmann::json::array({inTokens}), "runs.json");
    EXPECT_NE(uneven[0].refusal.find("/plan/global_batch_tokens: 131073 tokens are not a whole number of 2048-token sequences"),
              std::string::npos) << uneven[0].refusal;
    // fp16 under Megatron-LM keeps fp16 main gradients (only --bf16 forces --accumulate-allreduce-grads-in-fp32):
    // 2 B of gradient per parameter, said; bf16, or a record that states fp32 accumulation, keeps fp32.
    nlohmann::json fp16 = record();
    fp16["system"]["precision"] = "fp16 mixed precision (script: --fp16)";
    const ValidationCase half = load(fp16);
    EXPECT_EQ(precisionRecipeOf(half.scenario.plan).gradBytes, 2);
    EXPECT_TRUE(mentions(half.assumptions, "gradients accumulated and reduced in fp16"));
    EXPECT_EQ(precisionRecipeOf(load(record()).scenario.plan).gradBytes, 4);
    fp16["plan"]["framework"] = "Megatron-DeepSpeed";
    fp16["plan"]["zero"] = 1;
    EXPECT_EQ(precisionRecipeOf(load(fp16).scenario.plan).gradBytes, 2); // DeepSpeed's fp16 path: fp16 .grad
    fp16["plan"]["framework"] = "Megatron-LM";
    fp16["plan"]["accumulate_allreduce_grads_in_fp32"] = true;
    EXPECT_EQ(precisionRecipeOf(load(fp16).scenario.plan).gradBytes, 4);
    // PyTorch 2.11 (2026) SDPA prefers cuDNN's attention on Hopper; an A100 has no cuDNN figure and keeps
    // FlashAttention-2.
    nlohmann::json late = r;
    late["source"] = "measured by someone in 2026";
    const ValidationCase sdpa2026 = load(late);
    EXPECT_EQ(sdpa2026.scenario.plan.attentionKernel, "cudnn");
    EXPECT_TRUE(mentions(sdpa2026.assumptions, "cuDNN"));
    late["system"]["gpu"] = "A100 80GB";
    EXPECT_EQ(load(late).scenario.plan.attentionKernel, "flash2");
    // Megatron-LM of the same year runs Transformer Engine, which prefers cuDNN's fused attention on Hopper.
    r["plan"]["framework"] = "Megatron-LM";
    r["plan"]["zero"] = 1;
    const ValidationCase megatron = load(r);
    EXPECT_EQ(resolveAttentionKernel(megatron.scenario.cluster.gpu, megatron.scenario.plan.attentionKernel), "cudnn");
    // A record that names FlashAttention-3 keeps it.
    nlohmann::json fa3 = r;
    fa3["plan"]["attention"] = "FlashAttention-3";
    EXPECT_EQ(load(fa3).scenario.plan.attentionKernel, "flash3");
    // An H100 NVL has no figures of its own: taken as the SXM part, and said so.
    r["system"]["gpu"] = "H100 NVL";
    const ValidationCase nvl = load(r);
    EXPECT_EQ(nvl.scenario.cluster.name, "dgx-h100-80g");
    EXPECT_TRUE(mentions(nvl.assumptions, "H100 NVL taken as an H100 SXM"));
}

// Hybrid sharding under the names records use: FSDP's HYBRID_SHARD (a shard group per node), torchtitan's
// dp_replicate, Megatron-core's optimizer instances. Read, said, and predicted, never taken as full sharding.
TEST(ValidationRecord, HybridShardingIsReadInEachFrameworksWords) {
    nlohmann::json r = record();
    r["plan"]["tp"] = 1;
    r["plan"]["pp"] = 1;
    r["plan"]["dp"] = 32;
    r["plan"]["micro_batch"] = 1;
    r["plan"]["sequence_parallel"] = false;
    r["plan"]["framework"] = "Composer + PyTorch FSDP";
    r["plan"]["fsdp_sharding"] = "HYBRID_SHARD";
    r["plan"].erase("zero");
    r["plan"].erase("distributed_optimizer");
    ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.zeroStage, 3);
    EXPECT_EQ(c.scenario.plan.zeroReplicas, 4); // 8 ranks per node, four nodes
    EXPECT_EQ(c.scenario.plan.zeroShardSize(), 8);
    EXPECT_TRUE(mentions(c.assumptions, "hybrid sharding (HYBRID_SHARD)"));
    r["plan"]["fsdp_sharding"] = "FULL_SHARD";
    EXPECT_EQ(load(r).scenario.plan.zeroReplicas, 1);
    r["plan"]["dp_replicate"] = 2;
    c = load(r);
    EXPECT_EQ(c.scenario.plan.zeroReplicas, 2);
    EXPECT_TRUE(mentions(c.assumptions, "dp_replicate: the ZeRO state is replicated 2 times"));
    nlohmann::json m = record();
    m["plan"]["num_distributed_optimizer_instances"] = 2;
    c = load(m);
    EXPECT_EQ(c.scenario.plan.zeroStage, 1);
    EXPECT_EQ(c.scenario.plan.zeroReplicas, 2);
    // A replica count that does not fit is a refusal naming the field, not a silent full shard.
    m["plan"]["num_distributed_optimizer_instances"] = 3;
    const auto refused = loadValidationRecords(nlohmann::json::array({m}), "runs.json");
    ASSERT_EQ(refused.size(), 1u);
    EXPECT_FALSE(refused[0].validationCase.has_value());
    EXPECT_NE(refused[0].refusal.find("zero_replicas"), std::string::npos) << refused[0].refusal;
    // A shard size that does not split dp, or a count below one, is refused by its own name.
    nlohmann::json shard = record();
    shard["plan"]["dp_shard"] = 3;
    const auto badShard = loadValidationRecords(nlohmann::json::array({shard}), "runs.json");
    EXPECT_NE(badShard[0].refusal.find("/plan/dp_shard: 3 does not divide"), std::string::npos) << badShard[0].refusal;
    nlohmann::json zero = record();
    zero["plan"]["zero_replicas"] = 0;
    const auto badCount = loadValidationRecords(nlohmann::json::array({zero}), "runs.json");
    EXPECT_NE(badCount[0].refusal.find("/plan/zero_replicas: 0 is not a positive count"), std::string::npos) << badCount[0].refusal;
}

TEST(ValidationRecord, UnevenPipelineSplitsAreReadOrBalancedNeverRefused) {
    // Not stated: the embedding and the loss counted as a layer each, as the frameworks split, which is Meta's
    // own split of Llama 3 405B.
    ValidationCase c = load(llama405(8192, 1, 8192));
    EXPECT_EQ(pipelineSplitText(c.scenario.model, c.scenario.plan), "7,8x14,7");
    EXPECT_TRUE(mentions(c.assumptions, "counted as a layer each, as the frameworks split (7,8x14,7)"));
    // Stated as balanced: the time-balanced split.
    nlohmann::json balanced = llama405(8192, 1, 8192);
    balanced["plan"]["pipeline_split"] = "balanced";
    EXPECT_EQ(load(balanced).scenario.plan.pipelineSplit, PipelineSplit::Balanced);
    // Stated in Megatron-LM's words.
    nlohmann::json stated = llama405(8192, 1, 8192);
    stated["plan"]["num_layers_in_first_pipeline_stage"] = 6;
    stated["plan"]["num_layers_in_last_pipeline_stage"] = 8;
    c = load(stated);
    EXPECT_EQ(pipelineSplitText(c.scenario.model, c.scenario.plan), "6,8x15");
    EXPECT_FALSE(mentions(c.assumptions, "as the frameworks split"));
    // 70 layers on 12 stages.
    nlohmann::json seventy = onNodes(record(), 12, 8, 12);
    seventy["model"]["layers"] = 70;
    c = load(seventy);
    // BLOOM-176B's split (70 layers, pp 12, Megatron-DeepSpeed partition "type:transformer|embedding").
    EXPECT_EQ(pipelineSplitText(c.scenario.model, c.scenario.plan), "5,6x10,5");
}

TEST(ValidationRecord, AnInterleavedScheduleWithoutVirtualStagesGetsTwoLayersEach) {
    // Meta describes an interleaved schedule for Llama 3 405B but prints no virtual-stage count: 126 layers + the
    // embedding and the loss on 16 stages, two layers per virtual stage -> vpp 4.
    nlohmann::json r = llama405(8192, 1, 8192);
    r["plan"].erase("vpp");
    r["plan"]["schedule"] = "interleaved 1F1B (Narayanan et al. 2021)";
    ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 4);
    EXPECT_EQ(c.scenario.plan.schedule, Schedule::Interleaved1F1B);
    EXPECT_TRUE(mentions(c.assumptions, "interleaved schedule without a vpp: vpp = 4"));
    // Saying nothing is 1F1B, and said so.
    r["plan"].erase("schedule");
    c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 1);
    EXPECT_TRUE(mentions(c.assumptions, "vpp not stated: 1"));
    // The record's notes say it: interleaved; notes that also deny it somewhere are no reading.
    r["notes"] = "Meta's 4D parallelism: interleaved 1F1B with tuned micro-batches per stage (section 3.3.2).";
    c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 4);
    r["notes"] = "the paper mentions the interleaved schedule, but this size ran non-interleaved";
    c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 1);
    r.erase("notes");
    // Micro-batches that pp does not divide cannot interleave in Megatron-LM: 1F1B, said so.
    r["plan"]["schedule"] = "interleaved";
    r["plan"]["global_batch"] = 64 * 15;
    c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 1);
    EXPECT_TRUE(mentions(c.assumptions, "no split of two layers per virtual stage fits"));

    // Meta's own words on top: one layer fewer on the first and the last stage. The inferred vpp 4 does not
    // divide 7, which Megatron-LM's rule would refuse; the vpp is tessel's reading, so the missing layer comes
    // off the chunk with the embedding / the loss instead.
    r["plan"]["global_batch"] = 64 * 32;
    r["plan"]["first_stage_layers"] = 7;
    r["plan"]["last_stage_layers"] = 7;
    c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 4);
    EXPECT_EQ(pipelineSplitText(c.scenario.model, c.scenario.plan), "1,2x62,1");
    EXPECT_TRUE(mentions(c.assumptions, "the layers they lack come off the chunk with the embedding / the loss (1,2x62,1)"));
    // A vpp the stated ranks cannot take is not inferred: a first rank of 3 layers cannot fill 4 chunks, so two
    // layers per virtual stage gives way to vpp 2 (first rank 1 + 2, the others 4 + 4, the last 6 + 5).
    r["plan"]["first_stage_layers"] = 3;
    r["plan"]["last_stage_layers"] = 11;
    c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 2);
    EXPECT_EQ(chunkLayerCount(c.scenario.model, c.scenario.plan, 0, 0), 1);
    EXPECT_EQ(chunkLayerCount(c.scenario.model, c.scenario.plan, 0, 1), 2);
    EXPECT_EQ(chunkLayerCount(c.scenario.model, c.scenario.plan, 15, 0), 6);
    EXPECT_EQ(chunkLayerCount(c.scenario.model, c.scenario.plan, 15, 1), 5);
    EXPECT_EQ(chunkLayerCount(c.scenario.model, c.scenario.plan, 7, 1), 4);
}

TEST(ValidationRecord, NamedSchedulesAreSimulatedOrTheReadingIsSaid) {
    auto withSchedule = [](const char* key, const char* name) {
        nlohmann::json r = record();
        r["plan"][key] = name;
        return load(r);
    };
    ASSERT_GT(load(record()).scenario.plan.pp, 1);
    // GPipe and zero bubble are schedules tessel simulates, under the keys and words records use.
    for (const char* key : {"schedule", "pipeline_schedule", "pp_schedule", "pipeline_parallel_schedule"}) {
        const ValidationCase g = withSchedule(key, "GPipe");
        EXPECT_EQ(g.scenario.plan.schedule, Schedule::Gpipe) << key;
        EXPECT_TRUE(mentions(g.assumptions, "pipeline schedule read as GPipe")) << key;
        EXPECT_EQ(withSchedule(key, "ZBVZeroBubble").scenario.plan.schedule, Schedule::ZeroBubble) << key;
    }
    EXPECT_EQ(withSchedule("schedule", "zero bubble (ZB-H1)").scenario.plan.schedule, Schedule::ZeroBubble);
    EXPECT_EQ(withSchedule("schedule", "fill-drain").scenario.plan.schedule, Schedule::Gpipe);
    // 1F1B named is 1F1B, with nothing to say; interleaved under torchtitan's key interleaves.
    const ValidationCase plain = withSchedule("pp_schedule", "1F1B");
    EXPECT_EQ(plain.scenario.plan.schedule, Schedule::OneFOneB);
    EXPECT_FALSE(mentions(plain.assumptions, "pipeline schedule"));
    nlohmann::json noVpp = record();
    noVpp["plan"].erase("vpp");
    noVpp["plan"]["pipeline_parallel_schedule"] = "Interleaved1F1B";
    EXPECT_EQ(load(noVpp).scenario.plan.schedule, Schedule::Interleaved1F1B);
    // One tessel does not simulate keeps 1F1B, and says so rather than reading it silently.
    const ValidationCase dual = withSchedule("pp_schedule", "DualPipe");
    EXPECT_EQ(dual.scenario.plan.schedule, Schedule::OneFOneB);
    EXPECT_TRUE(mentions(dual.assumptions, "pipeline schedule \"dualpipe\" is not one tessel simulates: read as 1F1B"));
    // Zero bubble with virtual stages (InterleavedZeroBubble) is simulated without them: interleaved 1F1B, said.
    nlohmann::json r = record();
    r["plan"]["vpp"] = 2;
    r["plan"]["pp_schedule"] = "InterleavedZeroBubble";
    const ValidationCase izb = load(r);
    EXPECT_EQ(izb.scenario.plan.schedule, Schedule::Interleaved1F1B);
    EXPECT_TRUE(mentions(izb.assumptions, "read as interleaved 1F1B"));
}

TEST(ValidationRecord, AFrameworkTesselDoesNotKnowIsNamedNotGuessedFromTheSource) {
    nlohmann::json r = record();
    r["source"] = "a Megatron-LM paper's table";
    r["plan"]["framework"] = "Colossal-AI";
    const ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.framework.name, "generic");
    EXPECT_TRUE(mentions(c.assumptions, "framework \"Colossal-AI\" is not one tessel has defaults for"));
    // Unstated, or stated in words that name no framework of their own, the source's words still decide.
    r["plan"].erase("framework");
    EXPECT_EQ(load(r).scenario.plan.framework.name, "megatron");
    for (const char* generic : {"PyTorch", "PyTorch DDP", "in-house (PyTorch)"}) {
        r["plan"]["framework"] = generic;
        EXPECT_EQ(load(r).scenario.plan.framework.name, "megatron") << generic;
    }
}

TEST(ValidationRecord, ContextParallelismWithThePublishedWorldSize) {
    // 16384 GPUs = tp 8 x pp 16 x cp 16 x dp 8, sequence 131072.
    ValidationCase c = load(llama405(16384, 16, 131072));
    EXPECT_EQ(c.scenario.plan.cp, 16);
    EXPECT_EQ(c.scenario.plan.dp, 8);
    EXPECT_EQ(c.scenario.plan.worldSize(), 16384);
}

TEST(ValidationRecord, MegatronCpuOffloadingIsReadAsLayerActivationOffload) {
    nlohmann::json r = record(); // 32 GPUs, pp 2 in the record: CPU offloading needs pp 1
    r["plan"]["pp"] = 1;
    r["plan"]["dp"] = 8;
    r["plan"]["recompute"] = nullptr;
    r["plan"]["cpu_offloading"] = true;
    r["plan"]["cpu_offloading_num_layers"] = 6;
    const ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.offloadActivationLayers, 6);
    EXPECT_EQ(c.scenario.plan.recompute, Recompute::None);
    EXPECT_TRUE(mentions(c.assumptions, "recompute none: Megatron-core's CPU offloading"));
    // cpu_offloading false leaves the count unread.
    r["plan"]["cpu_offloading"] = false;
    EXPECT_EQ(load(r).scenario.plan.offloadActivationLayers, 0);
    // A count that is no layer count is refused, naming the field, not ignored.
    for (const int bad : {-1, 32}) { // the record's model has 32 layers
        r["plan"]["cpu_offloading"] = true;
        r["plan"]["cpu_offloading_num_layers"] = bad;
        const auto loaded = loadValidationRecords(nlohmann::json::array({r}), "runs.json");
        ASSERT_EQ(loaded.size(), 1u);
        EXPECT_FALSE(loaded[0].validationCase.has_value()) << bad;
        EXPECT_NE(loaded[0].refusal.find("/plan/cpu_offloading_num_layers"), std::string::npos) << loaded[0].refusal;
    }
}

TEST(ValidationRecord, Fp8IsTransformerEnginesRecipeOnHopperAndBf16Elsewhere) {
    nlohmann::json fp8 = llama405(8192, 1, 8192);
    fp8["system"]["precision"] = "FP8 (Transformer Engine)";
    EXPECT_EQ(load(fp8).scenario.plan.precision, "fp8");
    nlohmann::json a100 = record();
    a100["system"]["precision"] = "fp8";
    const ValidationCase c = load(a100);
    EXPECT_EQ(c.scenario.plan.precision, "megatron");
    EXPECT_TRUE(mentions(c.assumptions, "no FP8 tensor cores"));
    // MXFP8 (Blackwell's block-scaled FP8) runs the FP8 recipe, and the record says what that leaves out.
    fp8["system"]["precision"] = "MXFP8";
    const ValidationCase mx = load(fp8);
    EXPECT_EQ(mx.scenario.plan.precision, "fp8");
    EXPECT_TRUE(mentions(mx.assumptions, "MXFP8 read as FP8"));
    // 4-bit training has no recipe: refused with the field named, never read as BF16.
    for (const char* fp4 : {"NVFP4", "MXFP4 (Transformer Engine)"}) {
        fp8["system"]["precision"] = fp4;
        const auto loaded = loadValidationRecords(nlohmann::json::array({fp8}), "runs.json");
        ASSERT_EQ(loaded.size(), 1u);
        EXPECT_FALSE(loaded[0].validationCase.has_value()) << fp4;
        EXPECT_NE(loaded[0].refusal.find("/system/precision"), std::string::npos) << loaded[0].refusal;
        EXPECT_NE(loaded[0].refusal.find("4-bit training is not modelled"), std::string::npos) << loaded[0].refusal;
    }
}

TEST(ValidationRecord, FrameworksUnderTheirProjectsNames) {
    auto frameworkOfRecord = [](const std::string& framework) {
        nlohmann::json r = record();
        r["plan"]["framework"] = framework;
        return load(r).scenario.plan.framework.name;
    };
    EXPECT_EQ(frameworkOfRecord("Megatron-Bridge"), "nemo"); // NeMo 2's library, NeMo's performance recipes
    EXPECT_EQ(frameworkOfRecord("NeMo 2.0"), "nemo");
    EXPECT_EQ(frameworkOfRecord("GPT-NeoX"), "deepspeed");
    EXPECT_EQ(frameworkOfRecord("Megatron-DeepSpeed"), "deepspeed");
    EXPECT_EQ(frameworkOfRecord("metaseq"), "fsdp");
    EXPECT_EQ(frameworkOfRecord("Megatron-LM"), "megatron");
}

TEST(ValidationRecord, ShardingUnderItsOtherNames) {
    auto zeroOf = [](const nlohmann::json& planKeys) {
        nlohmann::json r = record();
        r["plan"].erase("zero");
        r["plan"]["distributed_optimizer"] = false;
        for (const auto& [k, v] : planKeys.items()) r["plan"][k] = v;
        return load(r).scenario.plan.zeroStage;
    };
    EXPECT_EQ(zeroOf({{"zero", "ZeRO stage 3"}}), 3);
    EXPECT_EQ(zeroOf({{"zero", "stage-2 (DeepSpeed)"}}), 2);
    EXPECT_EQ(zeroOf({{"zero", "ZeRO-1"}}), 1);
    // Megatron-Bridge's FSDP column: GPUs sharding with Megatron FSDP, 0 = the distributed optimizer.
    EXPECT_EQ(zeroOf({{"fsdp", 8}}), 3);
    EXPECT_EQ(zeroOf({{"fsdp", 0}, {"distributed_optimizer", true}}), 1);
    EXPECT_EQ(zeroOf({{"fsdp_sharding", "optim_grads_params"}}), 3);
}

TEST(ValidationRecord, MainGradientDtypeUnderEachFrameworksName) {
    auto gradBytes = [](const nlohmann::json& r) { return precisionRecipeOf(load(r).scenario.plan).gradBytes; };
    nlohmann::json r = record();
    EXPECT_EQ(gradBytes(r), 4); // Megatron-LM keeps bf16 models' main gradients in fp32
    r["plan"]["grad_reduce_in_bf16"] = true;
    EXPECT_EQ(gradBytes(r), 2);
    nlohmann::json nemo = record();
    nemo["plan"]["framework"] = "NeMo";
    nemo["plan"]["framework_version"] = "24.07";
    EXPECT_EQ(gradBytes(nemo), 2); // its performance recipes: optim.grad_sync_dtype=bf16
    EXPECT_TRUE(mentions(load(nemo).assumptions, "grad_reduce_in_fp32 = false"));
    nemo["plan"]["grad_sync_dtype"] = "fp32";
    EXPECT_EQ(gradBytes(nemo), 4);
    nemo["plan"].erase("grad_sync_dtype");
    nemo["plan"]["accumulate_allreduce_grads_in_fp32"] = true;
    EXPECT_EQ(gradBytes(nemo), 4);
}

TEST(ValidationRecord, LlmFoundryRunsAsItsCodeDoes) {
    // MosaicML's MPT benchmarks: llm-foundry's flash_attn_fn unpads q, k, v, its loss is flash-attn's fused
    // cross-entropy (no fp32 copy of the logits: fused kernels stay), and the pretraining yamls build learned
    // positions (the table's NumParams grows with the sequence), not ALiBi.
    nlohmann::json r = record();
    r["source"] = "mosaicml/llm-foundry scripts/train/benchmarking/README.md (commit 495218376)";
    r["model"]["name"] = "MPT-7B";
    r["plan"]["framework"] = "Composer + PyTorch FSDP";
    r["plan"]["zero"] = 3;
    dataParallelOnly(r);
    const ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.model.position, PositionEmbedding::Learned);
    EXPECT_TRUE(fusedKernelsOf(c.scenario.plan.framework));
    EXPECT_FALSE(eagerLossOf(c.scenario.plan.framework));
    EXPECT_TRUE(*c.scenario.plan.framework.attentionUnpad);
    EXPECT_TRUE(mentions(c.assumptions, "unpadded q, k, v"));
    // What a record states wins.
    r["plan"]["attention_unpad"] = false;
    const ValidationCase stated = load(r);
    EXPECT_FALSE(*stated.scenario.plan.framework.attentionUnpad);
    EXPECT_FALSE(mentions(stated.assumptions, "unpadded q, k, v"));
    // Other frameworks keep their own code.
    r["source"] = "Someone et al. 2024";
    r["plan"]["framework"] = "Megatron-LM";
    r["plan"]["attention_unpad"] = true;   // stated: read under any framework
    EXPECT_TRUE(*load(r).scenario.plan.framework.attentionUnpad);
    r["plan"].erase("attention_unpad");
    EXPECT_FALSE(load(r).scenario.plan.framework.attentionUnpad.has_value());
}

TEST(ValidationRecord, MixtureOfExpertsUnderConfigNames) {
    nlohmann::json r = onNodes(record(), 8, 1, 4);
    r["model"] = {{"name", "Mixtral 8x7B"}, {"layers", 32}, {"hidden", 4096}, {"heads", 32}, {"kv_heads", 8},
                  {"ffn_hidden", 14336}, {"num_local_experts", 8}, {"num_experts_per_tok", 2}, {"vocab", 32000}, {"seq", 4096}};
    r["system"]["gpu"] = "H100 SXM";
    r["plan"]["ep"] = 8;
    r["plan"]["global_batch"] = 256;
    const ValidationCase c = load(r);
    ASSERT_TRUE(c.scenario.model.moe.has_value());
    EXPECT_EQ(c.scenario.model.moe->experts, 8);
    EXPECT_EQ(c.scenario.model.moe->topK, 2);
    EXPECT_EQ(c.scenario.model.moe->expertFfnHidden, 14336);
    EXPECT_EQ(c.scenario.plan.ep, 8);
    EXPECT_FALSE(mentions(c.assumptions, "experts per token"));
}

TEST(ValidationRecord, ExportVariantsAreTheirFullPartsWithSlowerNvlink) {
    nlohmann::json r = record();
    r["system"]["gpu"] = "A800-SXM4-80GB";
    const ValidationCase a800 = load(r);
    r["system"]["gpu"] = "A100-SXM4-80GB";
    const ValidationCase a100 = load(r);
    EXPECT_EQ(a800.scenario.cluster.gpu.memoryBytes, a100.scenario.cluster.gpu.memoryBytes);
    EXPECT_DOUBLE_EQ(a800.scenario.cluster.intraNode.bandwidthBytesPerSecond, 200e9);
    EXPECT_GT(a100.scenario.cluster.intraNode.bandwidthBytesPerSecond, 200e9);
    EXPECT_TRUE(mentions(a800.assumptions, "NVLink at 400 GB/s"));
}

TEST(ValidationRecord, AllocatedMemoryLeavesOutWhatTheClusterReserves) {
    nlohmann::json allocated = record();
    allocated["measured"]["memory_gb"] = 40.0;
    allocated["measured"]["memory_kind"] = "torch.cuda.max_memory_allocated";
    nlohmann::json reserved = allocated;
    reserved["measured"]["memory_kind"] = "nvidia-smi";
    const auto loaded = loadValidationRecords(nlohmann::json::array({allocated, reserved}), "runs.json");
    ASSERT_TRUE(loaded[0].validationCase && loaded[1].validationCase);
    EXPECT_TRUE(loaded[0].validationCase->measured.memoryIsAllocated);
    EXPECT_FALSE(loaded[1].validationCase->measured.memoryIsAllocated);
    const ValidationReport report = validateRecords(loaded);
    const double reservedBytes = static_cast<double>(loaded[0].validationCase->scenario.cluster.gpu.reservedBytes);
    ASSERT_GT(reservedBytes, 0.0);
    EXPECT_NEAR(report.results[1].predictedPeakMemoryBytes - report.results[0].predictedPeakMemoryBytes, reservedBytes, 1.0);
    ASSERT_TRUE(report.results[0].memoryError.has_value());
    EXPECT_NEAR(*report.results[0].memoryError, (report.results[0].predictedPeakMemoryBytes - 40e9) / 40e9, 1e-12);
}

TEST(ValidationRecord, UnreadableRecordsAreRefusedWithTheirReasonNotDropped) {
    nlohmann::json bad = record();
    bad["id"] = "no-batch";
    bad["plan"].erase("global_batch");
    nlohmann::json tpu = record();
    tpu["id"] = "tpu";
    tpu["system"]["gpu"] = "TPU v4";
    auto loaded = loadValidationRecords(nlohmann::json::array({record(), bad, tpu, 7}), "runs.json");
    ASSERT_EQ(loaded.size(), 4u);
    EXPECT_TRUE(loaded[0].validationCase.has_value());
    EXPECT_EQ(loaded[1].refusal, "runs.json#/1/plan/global_batch: missing (nor a batch in tokens: global_batch_tokens)");
    EXPECT_NE(loaded[2].refusal.find("runs.json#/2/system/gpu"), std::string::npos);
    EXPECT_NE(loaded[3].refusal.find("not an object"), std::string::npos);
    const ValidationReport report = validateRecords(loaded);
    ASSERT_EQ(report.results.size(), 4u);
    EXPECT_TRUE(report.results[0].predicted);
    EXPECT_FALSE(report.results[1].predicted);
    EXPECT_EQ(report.results[1].reason, loaded[1].refusal);
    EXPECT_EQ(report.overall.records, 4);
    EXPECT_EQ(report.overall.predicted, 1);
    EXPECT_THROW(loadValidationRecords(nlohmann::json::object(), "x.json"), InputError);
}

TEST(ValidationReport, SummariesByHand) {
    ValidationReport r;
    auto result = [](const char* id, const char* group, double err) {
        CaseResult c;
        c.id = id;
        c.group = group;
        c.predicted = true;
        c.stepError = err;
        return c;
    };
    r.results = {result("a", "x", 0.10), result("b", "x", -0.02), result("c", "x", 0.04), result("d", "y", -0.30)};
    summarize(r);
    ASSERT_EQ(r.groups.size(), 2u);
    EXPECT_EQ(r.groups[0].group, "x");
    EXPECT_DOUBLE_EQ(r.groups[0].medianAbsError, 0.04);
    EXPECT_DOUBLE_EQ(r.groups[0].maxAbsError, 0.10);
    EXPECT_EQ(r.groups[0].worst, "a");
    EXPECT_NEAR(r.groups[0].meanSignedError, 0.04, 1e-12);
    EXPECT_DOUBLE_EQ(r.overall.medianAbsError, 0.07);
    EXPECT_EQ(r.overall.worst, "d");
}

TEST(ValidationShipped, EveryPublishedRunIsReadAndPredicted) {
    const std::string file = defaultValidationFile();
    ASSERT_FALSE(file.empty());
    const auto records = loadValidationFile(file);
    ASSERT_EQ(records.size(), 85u);
    for (const auto& r : records) EXPECT_TRUE(r.validationCase.has_value()) << r.id << ": " << r.refusal;
    const ValidationReport report = validateRecords(records);
    EXPECT_EQ(report.overall.predicted, 85);
    EXPECT_EQ(report.groups.size(), 4u);
    for (const auto& res : report.results) {
        EXPECT_TRUE(res.predicted) << res.id << ": " << res.reason;
        EXPECT_FALSE(res.assumptions.empty()) << res.id;
    }
}

// One rank of llm-foundry's 8-GPU MPT-30B FSDP job, measured on a lent H100 under a fake process group (every
// kernel but the collectives': bench/fsdp_capacity_probe.py, data/gpu/h100-2026-11-26/call5-fsdp-rank/, the mean
// of each run): seconds per micro-batch, forward and backward with recompute, at sequence 8192 (micro-batch 1),
// 4096 (1) and 2048 (3). The records' own plans, read with the attention the probe ran (PyTorch 2.11's SDPA on
// Hopper: cuDNN's), predict it within 5%: the layers, the embedding and the head with FSDP's compute-stream copies,
// and the contention of its copies on the other streams (FORMULAS.md §3.7).
TEST(ValidationRecord, MptFsdpRankComputeMatchesTheH100Probe) {
    const std::string shared = defaultValidationFile();
    const std::string checks = shared.substr(0, shared.rfind('/') + 1) + "check_mpt_llm_foundry.json";
    const std::map<std::string, std::pair<double, double>> measured{  // id -> fastest, slowest run
        {"mpt-h100_80gb-30b-seq8192-8gpu-gbs168-mbs1", {3.446, 3.600}},
        {"mpt-h100_80gb-30b-seq4096-8gpu-gbs168-mbs1", {1.805, 1.855}},
        {"mpt-h100_80gb-30b-seq2048-8gpu-gbs504-mbs3", {2.532, 2.577}}};
    int found = 0;
    for (const std::string& file : {shared, checks}) {
        for (const LoadedRecord& r : loadValidationFile(file)) {
            const auto it = measured.find(r.id);
            if (it == measured.end()) continue;
            ASSERT_TRUE(r.validationCase) << r.id << ": " << r.refusal;
            Scenario sc = r.validationCase->scenario;
            sc.plan.attentionKernel = "cudnn";
            const PrecisionRecipe recipe = precisionRecipeOf(sc.plan);
            auto all = [](const BlockCompute& b) { return b.forward.seconds + b.backward().seconds + b.recompute.seconds; };
            const double compute = sc.model.layers * all(layerCompute(sc.model, sc.cluster, sc.plan, recipe)) +
                                   all(embeddingCompute(sc.model, sc.cluster, sc.plan, recipe)) +
                                   all(headCompute(sc.model, sc.cluster, sc.plan, recipe));
            // FSDP's copies on the reduce-scatter's and the gathers' streams (two gathers a micro-batch) run beside
            // the compute and cost it the contention share κ of their time (FORMULAS.md §6.2), as the simulator
            // charges an overlapped collective; the fake group's own copies are not FSDP's and are left out.
            const double params = sc.model.layers * layerParameters(sc.model, sc.plan).total() +
                                  embeddingParameters(sc.model, sc.plan) + headParameters(sc.model, sc.plan);
            const double side = fsdpCollectiveCopySeconds(sc.cluster, sc.plan, recipe, true, params) +
                                2.0 * fsdpCollectiveCopySeconds(sc.cluster, sc.plan, recipe, false, params);
            const double perMicroBatch = compute + sc.cluster.gpu.commContention * side;
            RecordProperty(r.id, std::to_string(compute) + " + " + std::to_string(sc.cluster.gpu.commContention * side));
            const auto [fast, slow] = it->second;
            EXPECT_GT(perMicroBatch, 0.95 * fast) << r.id;
            EXPECT_LT(perMicroBatch, 1.05 * slow) << r.id;
            ++found;
        }
    }
    EXPECT_EQ(found, 3);
}

} // namespace
} // namespace tessel::sim
