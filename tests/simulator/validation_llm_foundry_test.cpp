// MosaicML's MPT runs as llm-foundry and Composer run them: its attention paths, loss, positions, training metrics
// and checkpointing, and one rank of its 8-GPU MPT-30B job measured on a lent H100 (`tessel validate`; the other
// frameworks' words: validation_frameworks_test.cpp).
#include "validation_support.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/framework.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/sim/validation.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>

namespace tessel::sim {
namespace {
using test::dataParallelOnly;
using test::load;
using test::mentions;
using test::record;

TEST(ValidationRecord, LlmFoundryRunsAsItsCodeDoes) {
    // MosaicML's MPT benchmarks: llm-foundry's flash_attn_fn unpads q, k, v (its Triton path does not), its loss is flash-attn's fused
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
    EXPECT_EQ(crossEntropyOf(c.scenario.plan.framework), "flash_attn"); // flash-attn's, not Megatron-core's loss
    EXPECT_TRUE(mentions(c.assumptions, "flash-attn's cross_entropy"));
    // Composer's training metrics after every micro-batch: LanguageCrossEntropy and LanguagePerplexity.
    EXPECT_EQ(trainMetricLossesOf(c.scenario.plan.framework), 2);
    EXPECT_TRUE(mentions(c.assumptions, "Composer's training metrics"));
    {
        // Its triton_flash_attn_fn hands the Triton kernel views of the projection's output: nothing gathered.
        nlohmann::json t = r;
        t["model"]["attention"] = "flash or triton per yaml"; // as the shared MPT records say it
        const ValidationCase triton = load(t);
        EXPECT_EQ(triton.scenario.plan.attentionKernel, "flash1");
        EXPECT_FALSE(*triton.scenario.plan.framework.attentionUnpad);
        EXPECT_TRUE(mentions(triton.assumptions, "no unpadding"));
        EXPECT_FALSE(mentions(triton.assumptions, "unpadded q, k, v"));
        // The Large Scale sweep ran flash-attn 2 (unpadded) for MPT-7B and the Triton kernel for MPT-13B and -30B.
        nlohmann::json ls = r;
        ls["source"] = "mosaicml/llm-foundry scripts/train/benchmarking/README.md, section 'H100 80GB BF16 (Large Scale, >= 128 GPUs)'";
        EXPECT_TRUE(*load(ls).scenario.plan.framework.attentionUnpad);
        ls["model"]["name"] = "MPT-13B";
        EXPECT_FALSE(*load(ls).scenario.plan.framework.attentionUnpad);
    }
    // What a record states wins.
    r["plan"]["attention_unpad"] = false;
    r["plan"]["cross_entropy"] = "torch_crossentropy";  // llm-foundry's other loss_fn: not a kernel tessel names
    EXPECT_EQ(crossEntropyOf(load(r).scenario.plan.framework), "flash_attn");
    EXPECT_TRUE(mentions(load(r).assumptions, "names no loss kernel tessel costs"));
    r["plan"]["cross_entropy"] = "eager";
    const ValidationCase stated = load(r);
    EXPECT_FALSE(*stated.scenario.plan.framework.attentionUnpad);
    EXPECT_FALSE(mentions(stated.assumptions, "unpadded q, k, v"));
    EXPECT_EQ(crossEntropyOf(stated.scenario.plan.framework), "eager");
    r["plan"]["train_metric_losses"] = 0; // use_train_metrics: false
    EXPECT_EQ(trainMetricLossesOf(load(r).scenario.plan.framework), 0);
    EXPECT_FALSE(mentions(load(r).assumptions, "Composer's training metrics"));
    r["plan"]["train_metric_losses"] = 2.5;
    EXPECT_TRUE(mentions(load(r).assumptions, "is not a count"));
    r["plan"].erase("train_metric_losses");
    EXPECT_FALSE(mentions(stated.assumptions, "flash-attn's cross_entropy"));
    // Other frameworks keep their own code.
    r["source"] = "Someone et al. 2024";
    r["plan"]["framework"] = "Megatron-LM";
    r["plan"]["attention_unpad"] = true;   // stated: read under any framework
    EXPECT_TRUE(*load(r).scenario.plan.framework.attentionUnpad);
    r["plan"].erase("attention_unpad");
    EXPECT_FALSE(load(r).scenario.plan.framework.attentionUnpad.has_value());
    EXPECT_EQ(trainMetricLossesOf(load(r).scenario.plan.framework), 0);
}

TEST(ValidationRecord, LlmFoundrysCheckpointStopsEarlyUnderPyTorch21Only) {
    // submit_benchmarks.py checkpoints non-reentrantly; the H100 tables and the A100 80 GB table but its 70B rows ran
    // PyTorch 2.1, whose checkpoint stops early; the A100 40 GB table and the 80 GB 70B rows PyTorch 1.13.1.
    nlohmann::json r = record();
    r["plan"]["framework"] = "Composer + PyTorch FSDP";
    r["plan"]["zero"] = 3;
    dataParallelOnly(r);
    auto earlyStop = [&](const std::string& section, const std::string& model) {
        r["source"] = "mosaicml/llm-foundry scripts/train/benchmarking/README.md, section '" + section + "'";
        r["model"]["name"] = model;
        const ValidationCase c = load(r);
        EXPECT_TRUE(mentions(c.assumptions, "non-reentrant activation checkpointing")) << section << " " << model;
        return checkpointEarlyStopOf(c.scenario.plan.framework);
    };
    EXPECT_TRUE(earlyStop("H100 80GB BF16", "MPT-7B"));
    EXPECT_TRUE(earlyStop("H100 80GB BF16 (Large Scale, >= 128 GPUs)", "MPT-70B"));
    EXPECT_TRUE(earlyStop("A100 80GB with 1600 Gbps node-node interconnect (RoCE)", "MPT-30B"));
    EXPECT_FALSE(earlyStop("A100 80GB with 1600 Gbps node-node interconnect (RoCE)", "MPT-70B"));
    EXPECT_FALSE(earlyStop("A100 40GB with 1600 Gbps node-node interconnect (RoCE)", "MPT-7B"));
    // Stated, the record wins.
    r["plan"]["checkpoint_early_stop"] = false;
    r["source"] = "mosaicml/llm-foundry scripts/train/benchmarking/README.md, section 'H100 80GB BF16'";
    EXPECT_FALSE(checkpointEarlyStopOf(load(r).scenario.plan.framework));
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
            // the compute and cost it the contention share κ of their time, at most κ_max of its own (FORMULAS.md §6.2), as the simulator
            // charges an overlapped collective; the fake group's own copies are not FSDP's and are left out.
            const double params = sc.model.layers * layerParameters(sc.model, sc.plan).total() +
                                  embeddingParameters(sc.model, sc.plan) + headParameters(sc.model, sc.plan);
            const double side = fsdpCollectiveCopySeconds(sc.cluster, sc.plan, recipe, true, params) +
                                2.0 * fsdpCollectiveCopySeconds(sc.cluster, sc.plan, recipe, false, params);
            const double lost = sc.cluster.gpu.contentionSeconds(side, compute);
            const double perMicroBatch = compute + lost;
            RecordProperty(r.id, std::to_string(compute) + " + " + std::to_string(lost));
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
