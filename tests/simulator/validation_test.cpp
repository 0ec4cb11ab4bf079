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
using test::dataParallelOnly;
using test::llama405;
using test::onNodes;
using test::record;

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
    // AWS gives EFA per instance: a bare 400 Gbps EFA (p4d) is the node's, not each GPU's.
    r["system"]["inter_node_link"] = "AWS EFA 400 Gbps";
    EXPECT_DOUBLE_EQ(load(r).scenario.cluster.interNode.bandwidthBytesPerSecond, 400e9 / 8 / 8);
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



// A context-parallel record that names no cp_comm_type: its words decide the exchange where one sentence about
// context parallelism (or K and V) names it, and the reading is said; silence is the framework's ring, said too.
TEST(ValidationRecord, TheContextParallelExchangeIsReadFromTheRecordOrSaid) {
    // The exchange a record is read with, and the words its assumptions say it with ("" for none at all).
    auto reads = [](const nlohmann::json& rec, CpComm comm, const std::string& said) {
        const ValidationCase c = load(rec);
        EXPECT_EQ(c.scenario.plan.cpComm, comm) << said;
        if (said.empty()) EXPECT_FALSE(mentions(c.assumptions, "context-parallel exchange"));
        else EXPECT_TRUE(mentions(c.assumptions, said)) << said;
    };
    nlohmann::json r = llama405(16384, 16, 131072);
    reads(r, CpComm::P2p, "context-parallel exchange not stated: Megatron-core's default, the ring");
    // Meta's Llama 3 report: K and V gathered whole.
    r["notes"] = "4D parallelism. Context parallelism all-gathers K and V before attention (section 3.3.2).";
    reads(r, CpComm::AllGather, "read from the record's words: K and V all-gathered whole");
    // An all-to-all over heads: with 16 query and 1 key/value heads a rank it cannot split over cp 16, so the ring,
    // said (not a refusal of a cp_comm_type the record never wrote); over cp 2 with 16 key/value heads it runs.
    r["notes"] = "CP exchanges attention heads by all-to-all.";
    reads(r, CpComm::P2p, "which this shape cannot split over cp = 16");
    nlohmann::json a2a = llama405(8192 * 2, 2, 16384);
    a2a["model"]["kv_heads"] = 128;
    a2a["notes"] = r["notes"];
    reads(a2a, CpComm::A2a, "read from the record's words: all-to-all over attention heads");
    r["notes"] = "Ring attention over the CP group.";
    reads(r, CpComm::P2p, "read from the record's words: the ring");
    // An all-gather of something else (a sentence that does not name CP or K and V) says nothing of it.
    r["notes"] = "ZeRO all-gathers the parameters before each layer.";
    reads(r, CpComm::P2p, "context-parallel exchange not stated");
    // Two readings are none: the ring, said.
    r["notes"] = "CP all-gathers K and V. Later runs used ring attention for CP.";
    reads(r, CpComm::P2p, "the record's words name more than one");
    r.erase("notes");
    // torchtitan's key: PyTorch's ring attention whichever way it moves K and V.
    r["plan"]["context_parallel_rotate_method"] = "allgather";
    reads(r, CpComm::P2p, "context_parallel_rotate_method \"allgather\": PyTorch's ring attention");
    r["plan"].erase("context_parallel_rotate_method");
    // Stated as cp_comm_type: nothing to say.
    r["plan"]["cp_comm_type"] = "allgather";
    reads(r, CpComm::AllGather, "");
}

// A recompute stated only in the record's prose is read from it (Meta's Llama 3 report: 8K sequences "without
// activation checkpointing"), said with its sentence; a model's saved checkpoints are not activation checkpoints,
// sentences that disagree are no reading, and a recompute key wins.
TEST(ValidationRecord, RecomputeStatedInProseIsRead) {
    nlohmann::json r = llama405(8192, 1, 8192);
    r["plan"].erase("recompute");
    r["notes"] = "Checkpoints saved every 500 steps. Pre-trained on 8K sequences without activation checkpointing.";
    ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.recompute, Recompute::None);
    EXPECT_TRUE(mentions(c.assumptions, "recompute none, read from the record's words (\"pre-trained on 8k sequences without "
                                        "activation checkpointing\")"));
    r.erase("notes");
    r["plan"]["techniques"] = "4D parallelism; full activation checkpointing";
    EXPECT_EQ(load(r).scenario.plan.recompute, Recompute::Full);
    r["plan"]["techniques"] = "selective activation recompute (attention only)";
    EXPECT_EQ(load(r).scenario.plan.recompute, Recompute::Selective);
    // Saved checkpoints alone say nothing of recompute; two readings are none.
    r["plan"]["techniques"] = "asynchronous checkpoints to a distributed file system";
    EXPECT_TRUE(mentions(load(r).assumptions, "recompute not stated"));
    r["plan"]["techniques"] = "no activation checkpointing at 8K. Full activation checkpointing at 128K";
    EXPECT_TRUE(mentions(load(r).assumptions, "recompute not stated"));
    // The plan's own key decides.
    r["plan"]["techniques"] = "no activation checkpointing";
    r["plan"]["recompute"] = "selective";
    c = load(r);
    EXPECT_EQ(c.scenario.plan.recompute, Recompute::Selective);
    EXPECT_FALSE(mentions(c.assumptions, "read from the record's words"));
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

// A power limit the record states moves the preset's measured share curve by its kernels' power law (FORMULAS.md
// §3.3), said with the factor; the preset's own limit says nothing; a GPU without the law says it costs its own.
TEST(ValidationRecord, AStatedPowerLimitMovesTheMeasuredCurveOrIsSaid) {
    nlohmann::json r = record();
    r["system"]["gpu"] = "H100 80GB SXM";
    const ValidationCase full = load(r);
    EXPECT_DOUBLE_EQ(full.scenario.cluster.gpu.powerLimitShareScale(), 1.0);
    r["system"]["gpu"] = "H100 80GB SXM (700 W)";
    EXPECT_FALSE(mentions(load(r).assumptions, "power limit"));
    r["system"]["gpu"] = "H100 80GB SXM (500W)";
    const ValidationCase capped = load(r);
    EXPECT_DOUBLE_EQ(capped.scenario.cluster.gpu.powerLimitWatts, 500.0);
    EXPECT_NEAR(capped.scenario.cluster.gpu.powerLimitShareScale(), 0.844, 0.001);
    EXPECT_TRUE(mentions(capped.assumptions, "power limit 500 W: the tensor cores' share curve, measured at 700 W, x0.844"));
    const ValidationReport report = validateRecords(loadValidationRecords(nlohmann::json::array({r, [&] {
        nlohmann::json f = r;
        f["system"]["gpu"] = "H100 80GB SXM";
        return f;
    }()}), "runs.json"));
    ASSERT_TRUE(report.results[0].predicted && report.results[1].predicted);
    EXPECT_GT(report.results[0].predictedStepSeconds, 1.05 * report.results[1].predictedStepSeconds);
    // The field wins over the name, and one that is no limit is refused at its pointer.
    r["system"]["power_limit_watts"] = 600;
    EXPECT_DOUBLE_EQ(load(r).scenario.cluster.gpu.powerLimitWatts, 600.0);
    r["system"]["power_limit_watts"] = "lots";
    EXPECT_NE(test::refusalOf(r).find("/system/power_limit_watts"), std::string::npos);
    r["system"]["power_limit_watts"] = 60; // below what the card draws idle
    EXPECT_NE(test::refusalOf(r).find("/system/power_limit_watts: 60 W is no limit this GPU runs at"), std::string::npos);
    r["system"].erase("power_limit_watts");
    r["system"]["tdp_w"] = 450;
    const ValidationCase tdp = load(r);
    EXPECT_DOUBLE_EQ(tdp.scenario.cluster.gpu.powerLimitWatts, 450.0);
    EXPECT_TRUE(mentions(tdp.assumptions, "/system/tdp_w"));
    // A GH200's watts are its module's (Grace shares them): said, not taken as the GPU's limit.
    nlohmann::json gh = record();
    gh["system"]["gpu"] = "NVIDIA GH200 96GB HBM3 (900W)";
    const ValidationCase grace = load(gh);
    EXPECT_DOUBLE_EQ(grace.scenario.cluster.gpu.powerLimitWatts, 0.0);
    EXPECT_TRUE(mentions(grace.assumptions, "900 W beside GH200 read as the module's power"));
    // An A100 preset carries no power law for its fitted share: the stated limit is said, its own costed.
    nlohmann::json a = record();
    a["system"]["gpu"] = "A100-SXM4-80GB (300W)";
    const ValidationCase a100 = load(a);
    EXPECT_DOUBLE_EQ(a100.scenario.cluster.gpu.powerLimitWatts, 0.0);
    EXPECT_TRUE(mentions(a100.assumptions, "carries no power law"));
}

TEST(ValidationRecord, AnUnusedDegreeWrittenAsNaOrZeroIsOneAndSaid) {
    // NVIDIA's performance tables print an unused virtual pipeline size as "n/a"; other tables write "-", "none" or
    // 0. Each is the degree 1, said, for vpp, cp and ep alike; the same plan as the degree stated as 1.
    nlohmann::json r = record(); // tp 4, pp 2, no vpp stated
    const ValidationCase one = load(r);
    for (const char* key : {"vpp", "cp", "ep"})
        for (const nlohmann::json& unused : {nlohmann::json("n/a"), nlohmann::json("-"), nlohmann::json("None"), nlohmann::json(0)}) {
            nlohmann::json u = r;
            u["plan"][key] = unused;
            const ValidationCase c = load(u);
            EXPECT_EQ(c.scenario.plan.vpp, 1) << key << " " << unused;
            EXPECT_EQ(c.scenario.plan.cp, 1) << key << " " << unused;
            EXPECT_EQ(c.scenario.plan.ep, 1) << key << " " << unused;
            EXPECT_EQ(c.scenario.plan.schedule, one.scenario.plan.schedule) << key << " " << unused;
            EXPECT_TRUE(mentions(c.assumptions, std::string(key) + " ")) << key << " " << unused;
            EXPECT_TRUE(mentions(c.assumptions, "read as 1 (not used)")) << key << " " << unused;
        }
    // Any other word is no degree: refused naming the field.
    r["plan"]["vpp"] = "several";
    const std::string refusal = test::refusalOf(r);
    EXPECT_NE(refusal.find("/plan/vpp"), std::string::npos) << refusal;
}

TEST(ValidationRecord, UlyssesSequenceParallelismIsContextParallelismSaid) {
    // DeepSpeed-Ulysses names its degree under its own keys; read as cp with its all-to-all (cp_comm_type a2a), not
    // folded into dp.
    nlohmann::json r = record(); // 32 GPUs
    r["plan"]["tp"] = 1;
    r["plan"]["pp"] = 1;
    r["plan"].erase("dp");
    r["plan"].erase("cp");
    r["plan"]["sequence_parallel"] = "DeepSpeed-Ulysses";
    r["plan"]["sequence_parallel_size"] = 4;
    const ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.cp, 4);
    EXPECT_EQ(c.scenario.plan.dp, 8);
    EXPECT_EQ(c.scenario.plan.cpComm, CpComm::A2a);
    EXPECT_TRUE(mentions(c.assumptions, "DeepSpeed-Ulysses over sequence_parallel_size = 4"));
    EXPECT_TRUE(mentions(c.assumptions, "its all-to-all over attention heads (cp_comm_type a2a)"));
    // A stated cp wins, and the exchange is the all-to-all all the same.
    r["plan"]["cp"] = 2;
    const ValidationCase stated = load(r);
    EXPECT_EQ(stated.scenario.plan.cp, 2);
    EXPECT_EQ(stated.scenario.plan.cpComm, CpComm::A2a);
    EXPECT_TRUE(mentions(stated.assumptions, "DeepSpeed-Ulysses over cp = 2 ranks: its all-to-all"));
    // Megatron-DeepSpeed's ds_sequence_parallel_size is Ulysses by its name, and a DeepSpeed record's
    // sequence_parallel_size too; elsewhere a sequence_parallel_size naming no exchange is said and not read (it had
    // been folded into dp in silence).
    nlohmann::json ds = record();
    ds["plan"]["tp"] = 1;
    ds["plan"]["pp"] = 1;
    ds["plan"].erase("dp");
    ds["plan"].erase("cp");
    ds["plan"]["ds_sequence_parallel_size"] = 4;
    EXPECT_EQ(load(ds).scenario.plan.cp, 4);
    EXPECT_EQ(load(ds).scenario.plan.cpComm, CpComm::A2a);
    ds["plan"].erase("ds_sequence_parallel_size");
    ds["plan"]["sequence_parallel_size"] = 4;
    ds["plan"]["framework"] = "Megatron-DeepSpeed";
    EXPECT_EQ(load(ds).scenario.plan.cp, 4);
    ds["plan"]["framework"] = "Megatron-LM";
    const ValidationCase unnamed = load(ds);
    EXPECT_EQ(unnamed.scenario.plan.cp, 1);
    EXPECT_TRUE(mentions(unnamed.assumptions, "sequence_parallel_size 4 names a sequence split without its exchange"));
}

// GPUs on PCIe inside the node (at most bridged in pairs) are the PCIe card: the A100's and H100's presets of their
// own, said, not the NVSwitch part the GPU's name alone would give; another part's PCIe card is refused at the link.
TEST(ValidationRecord, APcieIntraNodeLinkIsThePcieCard) {
    nlohmann::json r = record();
    r["system"]["gpu"] = "A100 80GB";
    for (const char* link : {"PCIe Gen4", "PCIe 4.0 x16, NVLink bridges between pairs"}) {
        r["system"]["intra_node_link"] = link;
        const ValidationCase c = load(r);
        EXPECT_EQ(c.scenario.cluster.name, "pcie-a100-80g") << link;
        EXPECT_TRUE(mentions(c.assumptions, "the intra-node link is PCIe: the GPU read as the PCIe card")) << link;
        EXPECT_EQ(mentions(c.assumptions, "NVLink bridges between pairs of cards not modelled"),
                  std::string(link).find("bridge") != std::string::npos)
            << link;
    }
    r["system"]["gpu"] = "H100 80GB";
    r["system"]["intra_node_link"] = "PCIe 5.0";
    EXPECT_EQ(load(r).scenario.cluster.name, "pcie-h100-80g");
    // A part with no PCIe preset is refused at the link, naming the ones there are.
    r["system"]["gpu"] = "H200 141GB";
    const std::string refusal = test::refusalOf(r);
    EXPECT_NE(refusal.find("/system/intra_node_link"), std::string::npos) << refusal;
    EXPECT_NE(refusal.find("pcie-a100-80g"), std::string::npos) << refusal;
    // NVLink or NVSwitch inside the node (PCIe then being the host's link), or an SXM part, is read as before.
    r["system"]["gpu"] = "A100 80GB";
    for (const char* link : {"NVLink + NVSwitch, PCIe Gen4 to the CPUs", "NVLink 3, PCIe Gen4 host"}) {
        r["system"]["intra_node_link"] = link;
        EXPECT_EQ(load(r).scenario.cluster.name, "dgx-a100-80g") << link;
    }
    r["system"]["gpu"] = "A100-SXM4-80GB";
    r["system"]["intra_node_link"] = "PCIe Gen4";
    EXPECT_EQ(load(r).scenario.cluster.name, "dgx-a100-80g");
}

// Four SXM GPUs a node of the A100 / H100 / H200 generations are an HGX 4-GPU board: no NVSwitch, each GPU's
// NVLinks a third to each of its three peers, said; a pair of them reaches the other over one third (meshShare),
// all four over all of it. Eight a node keep the NVSwitch; a rack-scale NVL72 record counting 4 a tray keeps its
// domain; a record whose link names NVSwitch is read as it says.
TEST(ValidationRecord, FourSxmGpusANodeAreAnHgxBoardWithoutNvswitch) {
    nlohmann::json r = record();
    r["system"]["gpu"] = "H200 (SXM, 141 GB HBM3e)";
    r["system"]["intra_node_link"] = "NVLink";
    r["system"]["gpus_per_node"] = 4;
    r["system"]["nodes"] = 2;
    r["system"]["total_gpus"] = 8;
    r["plan"]["tp"] = 4;
    r["plan"]["pp"] = 1;
    r["plan"]["dp"] = 2;
    const ValidationCase board = load(r);
    const LinkTier& tier = board.scenario.cluster.intraNode;
    EXPECT_EQ(tier.meshLinks, 3);
    EXPECT_TRUE(mentions(board.assumptions, "HGX 4-GPU board, no NVSwitch")) << board.assumptions.size();
    EXPECT_DOUBLE_EQ(tier.meshShare(Primitive::AllGather, 4), 1.0);
    EXPECT_DOUBLE_EQ(tier.meshShare(Primitive::AllGather, 2), 1.0 / 3.0);
    r["system"]["intra_node_link"] = "NVLink 4 via NVSwitch";
    EXPECT_EQ(load(r).scenario.cluster.intraNode.meshLinks, 0);
    r["system"]["intra_node_link"] = "NVLink";
    r["system"]["gpus_per_node"] = 8;
    r["system"]["nodes"] = 1;
    EXPECT_EQ(load(r).scenario.cluster.intraNode.meshLinks, 0);
    r["system"]["gpu"] = "GB200 (DGX GB200, NVL72)";
    r["system"]["intra_node_link"] = "NVLink 5 (NVL72)";
    r["system"]["gpus_per_node"] = 4;
    r["system"]["nodes"] = 2;
    const ValidationCase rack = load(r);
    EXPECT_EQ(rack.scenario.cluster.intraNode.meshLinks, 0);
    EXPECT_FALSE(mentions(rack.assumptions, "HGX 4-GPU board"));
}

// A record's TP plan ends: loss_parallel (or torchtitan's disable_loss_parallel) and vocab_parallel_embedding read
// as stated; unstated, both split; a value that is no boolean is said and the split kept; a whole embedding tied to
// the split head is refused at its key.
TEST(ValidationRecord, TpPlanEndsAreReadAsStated) {
    nlohmann::json r = record();
    const ValidationCase plain = load(r);
    EXPECT_TRUE(lossParallelOf(plain.scenario.plan.framework));
    EXPECT_TRUE(vocabParallelEmbeddingOf(plain.scenario.plan.framework));
    r["plan"]["loss_parallel"] = false;
    r["plan"]["vocab_parallel_embedding"] = false;
    // The record's GPT ties its embedding to the head, which tp splits: a whole embedding is refused at the key.
    EXPECT_NE(test::refusalOf(r).find("/plan/vocab_parallel_embedding"), std::string::npos);
    r["model"]["tied_embeddings"] = false;
    const ValidationCase stated = load(r);
    EXPECT_FALSE(lossParallelOf(stated.scenario.plan.framework));
    EXPECT_FALSE(vocabParallelEmbeddingOf(stated.scenario.plan.framework));
    r["plan"].erase("loss_parallel");
    r["plan"]["disable_loss_parallel"] = true;
    EXPECT_FALSE(lossParallelOf(load(r).scenario.plan.framework));
    r["plan"]["disable_loss_parallel"] = "sometimes";
    const ValidationCase unread = load(r);
    EXPECT_TRUE(lossParallelOf(unread.scenario.plan.framework));
    EXPECT_TRUE(mentions(unread.assumptions, "disable_loss_parallel \"sometimes\" is neither true nor false"));
}

// A model named as a built-in one ("Meta-Llama-3.1-70B" is llama3-70b) takes the shape fields the record leaves out
// from it, each said: kv_heads 8, not multi-head attention, and the vocabulary and sequence that would otherwise be
// refused as missing. A stated field that disagrees with the preset means another model: nothing is taken.
TEST(ValidationRecord, AModelNamedAsABuiltInOneFillsWhatTheRecordLeavesOut) {
    nlohmann::json r = record();
    r["model"] = {{"name", "Meta-Llama-3.1-70B"}, {"layers", 80}};
    r["system"]["nodes"] = 8;
    r["system"]["total_gpus"] = 64;
    r["plan"]["tp"] = 8;
    r["plan"]["pp"] = 4;
    r["plan"]["dp"] = 2;
    ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.model.hidden, 8192);
    EXPECT_EQ(c.scenario.model.heads, 64);
    EXPECT_EQ(c.scenario.model.kvHeads, 8);
    EXPECT_EQ(c.scenario.model.ffnHidden, 28672);
    EXPECT_EQ(c.scenario.model.vocab, 128256);
    EXPECT_EQ(c.scenario.model.seqLen, 8192);
    EXPECT_TRUE(mentions(c.assumptions, "model/vocab not stated: 128256 (the built-in llama3-70b's"));
    EXPECT_TRUE(mentions(c.assumptions, "kv_heads not stated: 8 (the built-in llama3-70b's"));
    // What the record states wins over the preset.
    r["model"]["seq"] = 4096;
    EXPECT_EQ(load(r).scenario.model.seqLen, 4096);
    // A stated width the preset does not have: not the preset; the family's conventions instead (heads of 128,
    // Llama 3's vocabulary), each said.
    r["model"]["hidden"] = 4096;
    c = load(r);
    EXPECT_EQ(c.scenario.model.heads, 32);
    EXPECT_EQ(c.scenario.model.kvHeads, 32);
    EXPECT_EQ(c.scenario.model.vocab, 128256);
    EXPECT_TRUE(mentions(c.assumptions, "model/heads not stated: 32 (hidden / 128"));
    EXPECT_FALSE(mentions(c.assumptions, "the built-in"));
    // A name no preset has: a GPT-style run's conventions, GPT-2's vocabulary as Megatron-LM pads it and GPT-3's
    // sequence.
    r["model"] = {{"name", "GPT 7B"}, {"layers", 32}, {"hidden", 4096}, {"heads", 32}};
    c = load(r);
    EXPECT_EQ(c.scenario.model.vocab, 51200);
    EXPECT_EQ(c.scenario.model.seqLen, 2048);
    EXPECT_TRUE(mentions(c.assumptions, "model/seq not stated: 2048 (GPT-3's sequence"));
    // LLaMA 1's 30B is not Llama 3: its vocabulary is the SentencePiece one.
    r["model"] = {{"name", "LLaMA 30B"}, {"layers", 60}, {"hidden", 6656}, {"heads", 52}, {"seq", 2048}};
    r["plan"]["tp"] = 4;
    r["plan"]["dp"] = 8;
    EXPECT_EQ(load(r).scenario.model.vocab, 32000);
    // A width no head size divides, with no heads stated: refused, naming the field.
    r["model"]["hidden"] = 4100;
    r["model"].erase("heads");
    EXPECT_NE(test::refusalOf(r).find("/model/heads: missing"), std::string::npos);
}

// The MLP's width: under the names configs use, and where unstated LLaMA's rule for SwiGLU models (2/3 of 4 h, times
// ffn_dim_multiplier, rounded up to multiple_of), 4 h for the others.
TEST(ValidationRecord, FfnWidthUnderItsNamesAndLlamasRule) {
    nlohmann::json r = record(); // hidden 4096, a GPT-style model
    r["model"].erase("ffn_hidden");
    EXPECT_EQ(load(r).scenario.model.ffnHidden, 4 * 4096);
    r["model"]["intermediate_size"] = 11008;
    EXPECT_EQ(load(r).scenario.model.ffnHidden, 11008);
    r["model"].erase("intermediate_size");
    r["model"]["ffn_dim_multiplier"] = 1.3; // Llama 3 8B
    r["model"]["multiple_of"] = 1024;
    const ValidationCase llama3 = load(r);
    EXPECT_EQ(llama3.scenario.model.ffnHidden, 14336);
    EXPECT_TRUE(mentions(llama3.assumptions, "LLaMA's SwiGLU width"));
    r["model"].erase("ffn_dim_multiplier");
    r["model"]["multiple_of"] = 256; // Llama 2 7B
    EXPECT_EQ(load(r).scenario.model.ffnHidden, 11008);
    r["model"]["hidden"] = 8192; // Llama 2 70B's rule gives 28672 with its multiplier 1.3 and multiple_of 4096
    r["model"]["ffn_dim_multiplier"] = 1.3;
    r["model"]["multiple_of"] = 4096;
    EXPECT_EQ(load(r).scenario.model.ffnHidden, 28672);
}

TEST(ValidationRecord, CpCommTypeIsReadAndAnUnknownOneRefusedAtItsField) {
    nlohmann::json r = record();
    r["plan"]["tp"] = 1;
    r["plan"]["pp"] = 1;
    r["plan"].erase("dp");
    r["plan"]["cp"] = 2;
    EXPECT_EQ(load(r).scenario.plan.cpComm, CpComm::P2p); // Megatron-core's default
    for (const auto& [text, comm] : {std::pair<const char*, CpComm>{"a2a", CpComm::A2a}, {"allgather", CpComm::AllGather},
                                     {"all_gather", CpComm::AllGather}, {"p2p", CpComm::P2p}, {"ring", CpComm::P2p}}) {
        r["plan"]["cp_comm_type"] = text;
        EXPECT_EQ(load(r).scenario.plan.cpComm, comm) << text;
    }
    r["plan"]["cp_comm_type"] = "a2a+p2p";
    const ValidationCase levelless = load(r);
    EXPECT_EQ(levelless.scenario.plan.cpComm, CpComm::P2p);
    EXPECT_TRUE(mentions(levelless.assumptions, "a2a+p2p without its levels"));
    r["plan"]["cp"] = 4;
    r["plan"]["hierarchical_context_parallel_sizes"] = {2, 2};
    const ValidationCase hierarchical = load(r);
    EXPECT_EQ(hierarchical.scenario.plan.cpComm, CpComm::A2aP2p);
    EXPECT_EQ(hierarchical.scenario.plan.cpA2a, 2);
    r["plan"].erase("hierarchical_context_parallel_sizes");
    r["plan"]["cp_comm_type"] = "tree";
    const std::string refusal = test::refusalOf(r);
    EXPECT_NE(refusal.find("/plan/cp_comm_type"), std::string::npos) << refusal;
}

TEST(ValidationRecord, OffloadIsReadFromDeepSpeedsFieldsAndNames) {
    // ZeRO-Offload / ZeRO-Infinity: host-memory state, read from DeepSpeed's fields or the names, never dropped.
    nlohmann::json r = record(); // Megatron-LM with the distributed optimizer: ZeRO-1 stated
    EXPECT_FALSE(load(r).scenario.plan.offloads());
    r["plan"]["offload_optimizer"] = "cpu";
    ValidationCase c = load(r);
    EXPECT_TRUE(c.scenario.plan.offloadOptimizer);
    EXPECT_FALSE(c.scenario.plan.offloadParameters);
    EXPECT_EQ(c.scenario.plan.zeroStage, 1); // stated, kept
    EXPECT_TRUE(mentions(c.assumptions, "offload: the optimizer's state and step in host memory (ZeRO-Offload), ZeRO-1"));
    r["plan"]["offload_optimizer"] = {{"device", "none"}};
    EXPECT_FALSE(load(r).scenario.plan.offloads());
    // Named only: ZeRO-Infinity on NVMe is both, on ZeRO-3 when no stage is stated, NVMe said.
    nlohmann::json inf = record();
    inf["plan"].erase("distributed_optimizer");
    inf["plan"]["zero"] = "ZeRO-Infinity (NVMe)";
    c = load(inf);
    EXPECT_TRUE(c.scenario.plan.offloadOptimizer);
    EXPECT_TRUE(c.scenario.plan.offloadParameters);
    EXPECT_EQ(c.scenario.plan.zeroStage, 3);
    EXPECT_TRUE(mentions(c.assumptions, "NVMe read as host memory"));
    EXPECT_TRUE(mentions(c.assumptions, "ZeRO-3 (the stage it runs on; not stated)"));
    EXPECT_FALSE(mentions(c.assumptions, "not stated: none")); // no stage-0 reading said beside it
    inf["plan"]["zero"] = "ZeRO-Offload";
    c = load(inf);
    EXPECT_TRUE(c.scenario.plan.offloadOptimizer);
    EXPECT_FALSE(c.scenario.plan.offloadParameters);
    EXPECT_EQ(c.scenario.plan.zeroStage, 2);
    // Prose that denies it is no offload.
    inf["plan"]["zero"] = "ZeRO-3, no CPU offload";
    inf["plan"]["techniques"] = "activation checkpointing, without offloading";
    EXPECT_FALSE(load(inf).scenario.plan.offloads());
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
    EXPECT_EQ(loaded[1].refusal, "runs.json#/1/plan/global_batch: missing (nor a batch in tokens: global_batch_tokens; a "
                                 "pipeline's micro-batches a step decide its bubble)");
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

// Counts past what an int holds used to wrap (heads 2^62 became 0 and the reading divided by it; micro_batch 2^32 + 4
// became 4): each is now refused naming its field and range, as a model or plan file's reader does, and a
// present count that is not a number is refused rather than read as unstated. Found by mutating shipped records.
TEST(ValidationRecord, CountsOutOfRangeAreRefusedNamingTheFieldNeverWrapped) {
    const int64_t huge = int64_t{1} << 62;
    auto refusalOf = [](nlohmann::json rec) {
        auto loaded = loadValidationRecords(nlohmann::json::array({rec}), "runs.json");
        EXPECT_FALSE(loaded[0].validationCase.has_value());
        return loaded[0].refusal;
    };
    auto with = [](const char* part, const char* key, nlohmann::json value) {
        nlohmann::json r = record();
        r[part][key] = std::move(value);
        return r;
    };
    EXPECT_EQ(refusalOf(with("model", "heads", huge)),
              "runs.json#/0/model/heads: got 4611686018427387904, expected a whole number from 1 to 65536");
    EXPECT_EQ(refusalOf(with("model", "seq", huge)),
              "runs.json#/0/model/seq: got 4611686018427387904, expected a whole number from 1 to 1099511627776");
    EXPECT_EQ(refusalOf(with("model", "kv_heads", "x")),
              "runs.json#/0/model/kv_heads: \"x\" is not a number; expected a whole number from 1 to 65536");
    EXPECT_EQ(refusalOf(with("plan", "micro_batch", (int64_t{1} << 32) + 4)),
              "runs.json#/0/plan/micro_batch: got 4294967300, expected a whole number from 1 to 1048576");
    EXPECT_EQ(refusalOf(with("plan", "tp", -2)), "runs.json#/0/plan/tp: got -2, expected a whole number from 1 to 1048576");
    EXPECT_EQ(refusalOf(with("system", "nodes", huge)),
              "runs.json#/0/system/nodes: got 4611686018427387904, expected a whole number from 1 to 1048576");
    // The shape rules of a model file hold for a record too, under the record's pointers.
    EXPECT_EQ(refusalOf(with("model", "kv_heads", 5)),
              "runs.json#/0/model/kv_heads: must divide the number of attention heads (32), got 5");
    nlohmann::json odd = with("model", "hidden", 4100);
    EXPECT_EQ(refusalOf(odd), "runs.json#/0/model/heads: must divide hidden (4100) unless head_dim is given");
    odd["model"]["head_dim"] = 128;
    EXPECT_EQ(load(odd).scenario.model.headDim, 128);
    // Unstated (absent or null) counts keep their defaults and say so.
    nlohmann::json plain = record();
    plain["model"].erase("kv_heads");
    const ValidationCase c = load(plain);
    EXPECT_EQ(c.scenario.model.kvHeads, 32);
    EXPECT_TRUE(mentions(c.assumptions, "kv_heads not stated"));
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

// A file of records is an array, or an object holding one under "runs" or "records"; anything else is a clear error
// at the document, not a crash.
TEST(ValidationRecord, AFileIsAnArrayOrAnObjectWithRunsOrRecords) {
    for (const char* key : {"runs", "records"}) {
        const nlohmann::json doc = {{key, nlohmann::json::array({record()})}};
        const auto loaded = loadValidationRecords(doc, "held.json");
        ASSERT_EQ(loaded.size(), 1u) << key;
        EXPECT_EQ(loaded[0].pointer, std::string("held.json#/") + key + "/0");
        EXPECT_TRUE(loaded[0].refusal.empty()) << loaded[0].refusal;
    }
    try {
        loadValidationRecords(nlohmann::json{{"rows", nlohmann::json::array({record()})}}, "held.json");
        FAIL() << "an object without runs or records was read";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("\"records\" array"), std::string::npos) << e.what();
    }
}

} // namespace
} // namespace tessel::sim

