// What a record's prose becomes: the GPU part named (which preset carries it, and what of the part replaces the
// preset's), the precision named in words, and an out-of-memory outcome told in words.
#include "validation_support.hpp"

#include "../../simulator/src/validation_prose.hpp"
#include "tessel/cost/framework.hpp"
#include "tessel/sim/simulate.hpp"

#include <gtest/gtest.h>

#include <tuple>

namespace tessel::sim {
namespace {
using test::load;
using test::mentions;
using test::record;
using test::refusalOf;
using prose::outOfMemoryInProse;

PlanSimulation stepOf(const Scenario& s) { return simulatePlan(s.model, s.cluster, s.plan); }

// A number written as text: its leading figure, with a config's exponent ("5e8" is 5e8, not 5) and without a table's
// thousands separators ("1,024" is 1024, not 1), prose after it ignored.
TEST(ValidationProse, NumbersInTextKeepTheirExponent) {
    const nlohmann::json o = {{"a", "5e8"}, {"b", "8 (inferred)"}, {"c", "3.5E+9 elements"}, {"d", "2 experts"}, {"e", "none"},
                              {"f", "1,024"}, {"g", "8, 16"}, {"h", "2,097,152.5 tokens"}};
    EXPECT_DOUBLE_EQ(*prose::number(o, "a"), 5e8);
    EXPECT_DOUBLE_EQ(*prose::number(o, "b"), 8.0);
    EXPECT_DOUBLE_EQ(*prose::number(o, "c"), 3.5e9);
    EXPECT_DOUBLE_EQ(*prose::number(o, "d"), 2.0);
    EXPECT_FALSE(prose::number(o, "e").has_value());
    EXPECT_DOUBLE_EQ(*prose::number(o, "f"), 1024.0); // thousands separators, as tables print counts
    EXPECT_DOUBLE_EQ(*prose::number(o, "g"), 8.0);    // a list's first number
    EXPECT_DOUBLE_EQ(*prose::number(o, "h"), 2097152.5);
    // An abbreviated magnitude right after the number is its multiplier ("265k" had been read as 265); a unit that
    // goes on with a letter is not one ("8kB", "400 Gb/s").
    const nlohmann::json m = {{"k", "265k tokens/s"}, {"M", "1.5M"}, {"B", "22B"}, {"kB", "8kB"}, {"Gb", "400 Gb/s"}};
    EXPECT_DOUBLE_EQ(*prose::number(m, "k"), 265e3);
    EXPECT_DOUBLE_EQ(*prose::number(m, "M"), 1.5e6);
    EXPECT_DOUBLE_EQ(*prose::number(m, "B"), 22e9);
    EXPECT_DOUBLE_EQ(*prose::number(m, "kB"), 8.0);
    EXPECT_DOUBLE_EQ(*prose::number(m, "Gb"), 400.0);
    // A count so written is refused naming it: k is 1000 in a vocabulary of 32000 and 1024 in a width of 4096.
    std::string refusal;
    EXPECT_FALSE(prose::count(nlohmann::json{{"vocab", "32k"}}, "vocab", 1, 1 << 30, "/0/model", refusal).has_value());
    EXPECT_NE(refusal.find("/0/model/vocab: \"32k\" abbreviates the count"), std::string::npos) << refusal;
}

// A sequence length written "2k" is 2048 (k is 1024 there), said; it had been read as a sequence of 2 tokens.
TEST(ValidationProse, AnAbbreviatedSequenceLengthIsInUnitsOf1024) {
    nlohmann::json r = record();
    r["model"]["seq"] = "2k";
    const ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.model.seqLen, 2048);
    EXPECT_TRUE(mentions(c.assumptions, "model/seq \"2k\" read as 2048"));
    r["model"]["seq"] = "32K tokens";
    EXPECT_EQ(load(r).scenario.model.seqLen, 32768);
    r["model"]["seq"] = 4096;
    r["model"]["hidden"] = "4k";
    EXPECT_NE(refusalOf(r).find("/model/hidden: \"4k\" abbreviates the count"), std::string::npos) << refusalOf(r);
}

// Recompute and the attention kernel under a config's own keys, where the schema's are absent: Megatron-LM's
// --recompute-granularity / --recompute-activations / --use-flash-attn / --attention-backend, Hugging Face's
// gradient_checkpointing and attn_implementation, llm-foundry's attn_impl. Each had been passed over for the
// record's prose or the year's default.
TEST(ValidationProse, RecomputeAndAttentionUnderTheirConfigKeys) {
    nlohmann::json r = record();
    r["plan"].erase("recompute");
    auto recomputeOf = [&](const char* key, const nlohmann::json& value) {
        nlohmann::json withKey = r;
        withKey["plan"][key] = value;
        const ValidationCase c = load(withKey);
        EXPECT_TRUE(mentions(c.assumptions, std::string("read from ") + key)) << key;
        return c.scenario.plan.recompute;
    };
    EXPECT_EQ(recomputeOf("recompute_granularity", "selective"), Recompute::Selective);
    EXPECT_EQ(recomputeOf("recompute_granularity", "full"), Recompute::Full);
    EXPECT_EQ(recomputeOf("recompute_activations", true), Recompute::Selective);
    EXPECT_EQ(recomputeOf("checkpoint_activations", true), Recompute::Full);
    EXPECT_EQ(recomputeOf("gradient_checkpointing", true), Recompute::Full);
    EXPECT_EQ(recomputeOf("gradient_checkpointing", false), Recompute::None);
    EXPECT_EQ(recomputeOf("activation_checkpointing", "none"), Recompute::None);
    EXPECT_EQ(recomputeOf("recompute_method", "uniform"), Recompute::Full);
    // The schema's key wins where both are stated.
    r["plan"]["recompute"] = "none";
    r["plan"]["recompute_granularity"] = "full";
    EXPECT_EQ(load(r).scenario.plan.recompute, Recompute::None);

    r = record();
    r["plan"]["framework"] = "Megatron-LM";
    EXPECT_FALSE(load(r).scenario.plan.flashAttention); // Megatron-LM of 2022 ran without it
    auto kernelOf = [&](const char* key, const nlohmann::json& value) {
        nlohmann::json withKey = r;
        withKey["plan"][key] = value;
        const Plan p = load(withKey).scenario.plan;
        return p.flashAttention ? p.attentionKernel : std::string("unfused");
    };
    EXPECT_EQ(kernelOf("use_flash_attn", true), "flash1");          // FlashAttention of 2022
    EXPECT_EQ(kernelOf("flash_attention", true), "flash1");
    EXPECT_EQ(kernelOf("attn_implementation", "flash_attention_2"), "flash2");
    EXPECT_EQ(kernelOf("attention_backend", "fused"), "flash2"); // cuDNN's, where the A100 has no figure for it: FA2
    r["system"]["gpu"] = "H100 SXM";
    EXPECT_EQ(kernelOf("attention_backend", "fused"), "cudnn");
    r["system"]["gpu"] = "A100-SXM4-80GB";
    EXPECT_EQ(kernelOf("attn_impl", "torch"), "unfused");
    EXPECT_EQ(kernelOf("attention_backend", "unfused"), "unfused");
    EXPECT_EQ(kernelOf("use_flash_attn", false), "unfused");
}

// ZeRO stages as records write them, the ZeRO paper's notation and ZeRO++ included.
TEST(ValidationProse, ZeroStagesInTheirWrittenForms) {
    auto zero = [](const char* text) { return prose::parseZero(nlohmann::json{{"zero", text}}); };
    EXPECT_EQ(zero("ZeRO stage 3"), 3);
    EXPECT_EQ(zero("ZeRO-2 (overlap_comm)"), 2);
    EXPECT_EQ(zero("P_os+g+p"), 3);
    EXPECT_EQ(zero("ZeRO-DP P_{os+g}"), 2);
    EXPECT_EQ(zero("$P_{os}$"), 1);
    EXPECT_EQ(zero("ZeRO++ (qwZ, hpZ, qgZ)"), 3);
    EXPECT_EQ(zero("positional"), -1); // "pos" inside a word is no stage
    // No ZeRO said in words is stage 0, not "not stated" (which FSDP and torchtitan records read as full sharding).
    EXPECT_EQ(zero("none"), 0);
    EXPECT_EQ(zero("ZeRO stage 0"), 0);
    EXPECT_EQ(zero("off"), 0);
    EXPECT_EQ(zero("Disabled"), 0);
    EXPECT_EQ(prose::parseZero(nlohmann::json{{"zero", false}}), 0);
    EXPECT_EQ(prose::parseZero(nlohmann::json{{"zero", true}}), -1); // on, stage unnamed
    EXPECT_EQ(zero("not stated"), -1);
    // Under the keys configs use: DeepSpeed's zero_optimization.stage (or a record's zero_stage), FSDP's
    // sharding_strategy and Megatron FSDP's data_parallel_sharding_strategy (each had been passed over: no ZeRO).
    EXPECT_EQ(prose::parseZero(nlohmann::json{{"zero_stage", 2}}), 2);
    EXPECT_EQ(prose::parseZero(nlohmann::json{{"zero_stage", "ZeRO-3"}}), 3);
    EXPECT_EQ(prose::parseZero(nlohmann::json{{"zero_optimization", {{"stage", 3}, {"overlap_comm", true}}}}), 3);
    EXPECT_EQ(prose::parseZero(nlohmann::json{{"sharding_strategy", "SHARD_GRAD_OP"}}), 2);
    EXPECT_EQ(prose::parseZero(nlohmann::json{{"data_parallel_sharding_strategy", "optim_grads_params"}}), 3);
    EXPECT_EQ(prose::parseZero(nlohmann::json{{"stage", 3}}), -1); // a bare "stage" may be a pipeline stage's
}

// FSDP named by its long name, or by fairseq's fully_sharded backend, is FSDP; a framework tessel has no defaults
// for stays itself (read as generic by the caller).
TEST(ValidationProse, FullyShardedDataParallelIsFsdp) {
    auto fw = [](const char* name) { return prose::frameworkOf(nlohmann::json{{"framework", name}}, ""); };
    EXPECT_EQ(fw("Fully Sharded Data Parallel"), "fsdp");
    EXPECT_EQ(fw("fairseq (fully_sharded)"), "fsdp");
    EXPECT_EQ(fw("PyTorch FSDP"), "fsdp");
    EXPECT_EQ(fw("Nanotron"), "");
    // FSDP2 (fully_shard) is not fairseq's fully_sharded: it takes torchtitan's costs.
    EXPECT_EQ(fw("fully_shard"), "torchtitan");
    EXPECT_EQ(fw("PyTorch FSDP2"), "torchtitan");
}

// Recompute as records write it: a denial is none ("no activation checkpointing" had been read as full), the
// attention-only and op-level forms selective, Megatron-LM's --checkpoint-activations and Hugging Face's gradient
// checkpointing full; what names none of these is not known.
TEST(ValidationProse, RecomputeInItsWrittenForms) {
    auto rc = [](const char* text, bool expectKnown = true) {
        bool known = false;
        const Recompute r = prose::parseRecompute(text, known);
        EXPECT_EQ(known, expectKnown) << text;
        return r;
    };
    EXPECT_EQ(rc("no activation checkpointing"), Recompute::None);
    EXPECT_EQ(rc("without recompute"), Recompute::None);
    EXPECT_EQ(rc("w/o AC"), Recompute::None);
    EXPECT_EQ(rc("none"), Recompute::None);
    EXPECT_EQ(rc("selective"), Recompute::Selective);
    EXPECT_EQ(rc("attention-only recompute"), Recompute::Selective);
    EXPECT_EQ(rc("op-level SAC"), Recompute::Selective);
    EXPECT_EQ(rc("full activation checkpointing"), Recompute::Full);
    EXPECT_EQ(rc("checkpoint-activations (1 layer per checkpoint)"), Recompute::Full);
    EXPECT_EQ(rc("gradient checkpointing"), Recompute::Full);
    EXPECT_EQ(rc("activation checkpointing every 2 layers"), Recompute::Full);
    EXPECT_EQ(rc("50% of layers", false), Recompute::None);
}

TEST(ValidationProse, APowerLimitBesideTheGpusName) {
    EXPECT_EQ(prose::powerLimitInProse("H100 96GB HBM2e (500W)"), 500.0);
    EXPECT_EQ(prose::powerLimitInProse("NVIDIA H100 SXM5, 700 W"), 700.0);
    EXPECT_EQ(prose::powerLimitInProse("GB200 at 1200W"), 1200.0);
    EXPECT_FALSE(prose::powerLimitInProse("H100 80GB HBM3 (SXM5)").has_value());
    EXPECT_FALSE(prose::powerLimitInProse("A100 80GB, 1.5 kWh a day").has_value());
    EXPECT_FALSE(prose::powerLimitInProse("H100 with 900 Watts of cooling").has_value()); // "Watts" is a word, not the unit
    EXPECT_FALSE(prose::powerLimitInProse("MI300X 750").has_value());
}

TEST(ValidationGpu, Gh200IsTheH200sGpuWithItsOwnMemory) {
    nlohmann::json r = record();
    // The first GH200 (Alps, JUPITER): 96 GB of HBM3 at 4 TB/s; usable bytes scaled as the 80 GB H100's.
    r["system"]["gpu"] = "NVIDIA GH200 96GB HBM3";
    const ValidationCase hbm3 = load(r);
    EXPECT_EQ(hbm3.scenario.cluster.name, "h200-single");
    EXPECT_EQ(hbm3.scenario.cluster.gpu.memoryBytes, 102624971981LL); // 85,520,809,984 x 96 / 80
    EXPECT_DOUBLE_EQ(hbm3.scenario.cluster.gpu.hbmBytesPerSecond, 4.0e12);
    EXPECT_EQ(hbm3.scenario.cluster.gpu.name, "NVIDIA GH200 (96 GB HBM3)");
    EXPECT_TRUE(mentions(hbm3.assumptions, "GH200 taken as the H200 preset's GPU"));
    EXPECT_TRUE(mentions(hbm3.assumptions, "96 GB at 4.0 TB/s"));
    EXPECT_FALSE(mentions(hbm3.assumptions, "memory not stated"));
    // The HBM3e part: 144 GB at 4.9 TB/s.
    r["system"]["gpu"] = "GH200 144GB HBM3e";
    const ValidationCase hbm3e = load(r);
    EXPECT_EQ(hbm3e.scenario.cluster.gpu.memoryBytes, 153962369460LL); // 150,754,820,096 x 144 / 141
    EXPECT_DOUBLE_EQ(hbm3e.scenario.cluster.gpu.hbmBytesPerSecond, 4.9e12);
    EXPECT_TRUE(mentions(hbm3e.assumptions, "144 GB at 4.9 TB/s"));
    // Unstated memory is the 96 GB part, and the record says so.
    r["system"]["gpu"] = "NVIDIA GH200 Grace Hopper Superchip";
    const ValidationCase bare = load(r);
    EXPECT_EQ(bare.scenario.cluster.gpu.memoryBytes, 102624971981LL);
    EXPECT_TRUE(mentions(bare.assumptions, "memory not stated"));
    // An H200 stays the preset as it is.
    r["system"]["gpu"] = "NVIDIA H200";
    const ValidationCase h200 = load(r);
    EXPECT_EQ(h200.scenario.cluster.gpu.memoryBytes, 150754820096LL);
    EXPECT_DOUBLE_EQ(h200.scenario.cluster.gpu.hbmBytesPerSecond, 4.8e12);
    EXPECT_FALSE(mentions(h200.assumptions, "GH200"));
}

TEST(ValidationGpu, B200AndBlackwellUltraHavePresetsOfTheirOwn) {
    nlohmann::json r = record();
    r["system"]["gpu"] = "NVIDIA B200 180GB (DGX B200)";
    r["system"]["precision"] = "fp8";
    const ValidationCase b200 = load(r);
    EXPECT_EQ(b200.scenario.cluster.name, "dgx-b200");
    EXPECT_EQ(b200.scenario.cluster.gpu.memoryBytes, 192265846784LL); // nvidia-smi's 183359 MiB
    EXPECT_DOUBLE_EQ(b200.scenario.cluster.gpu.peakFlopsPerSecond.at(Dtype::Bf16), 2.25e15);
    EXPECT_DOUBLE_EQ(b200.scenario.cluster.intraNode.bandwidthBytesPerSecond, 900e9);
    EXPECT_EQ(b200.scenario.plan.precision, "fp8"); // Transformer Engine's FP8 runs on Blackwell as on Hopper
    // The Blackwell Ultra parts are neither (before 2026-12-01 they were refused): the B300 of HGX/DGX B300 nodes
    // with its 288 GB and 800 Gb/s NICs, and the GB300 rack, 72 GPUs one NVLink domain as the GB200's.
    r["system"]["gpu"] = "NVIDIA B300 SXM6 (DGX B300)";
    r["system"]["inter_node_link"] = nullptr; // the preset's, not the record's HDR
    const ValidationCase b300 = load(r);
    EXPECT_EQ(b300.scenario.cluster.name, "dgx-b300");
    EXPECT_EQ(b300.scenario.cluster.gpu.memoryBytes, 288000000000LL);
    EXPECT_DOUBLE_EQ(b300.scenario.cluster.gpu.peakFlopsPerSecond.at(Dtype::Bf16), 2.25e15); // the B200's dense rates
    EXPECT_DOUBLE_EQ(b300.scenario.cluster.interNode.bandwidthBytesPerSecond, 100e9);       // ConnectX-8, 800 Gb/s
    r["system"]["gpu"] = "GB300";
    const ValidationCase gb300 = load(r);
    EXPECT_EQ(gb300.scenario.cluster.name, "gb300-nvl72");
    EXPECT_EQ(gb300.scenario.cluster.gpusPerNode, 32); // the record's 32 GPUs, all in the rack's one NVLink domain
    EXPECT_DOUBLE_EQ(gb300.scenario.cluster.gpu.peakFlopsPerSecond.at(Dtype::Bf16), 2.5e15);
}

TEST(ValidationGpu, ThePcieCardsHavePresetsOfTheirOwnNotTheSxmParts) {
    // No NVSwitch (PCIe and NVLink bridges between pairs) and a lower power limit: the dgx presets are not their
    // figures. The A100 and H100 cards run on pcie-a100-80g / -40g and pcie-h100-80g.
    nlohmann::json r = record();
    const std::pair<const char*, const char*> parts[] = {{"A100 80GB PCIe", "pcie-a100-80g"},
                                                         {"NVIDIA A100-PCIE-40GB", "pcie-a100-40g"},
                                                         {"NVIDIA H100 PCIe", "pcie-h100-80g"}};
    for (const auto& [part, preset] : parts) {
        r["system"]["gpu"] = part;
        const ValidationCase c = load(r);
        EXPECT_EQ(c.scenario.cluster.name, preset) << part;
        EXPECT_EQ(c.scenario.cluster.intraNode.name.rfind("PCIe", 0), 0u) << c.scenario.cluster.intraNode.name;
        EXPECT_FALSE(mentions(c.assumptions, "memory size not stated")) << part;
    }
    // The cards' own figures: the 80 GB A100 card's HBM2e and its MAMF plateau, the H100 card's 114-SM peak.
    r["system"]["gpu"] = "A100 80GB PCIe";
    const ClusterConfig a100 = load(r).scenario.cluster;
    EXPECT_DOUBLE_EQ(a100.gpu.hbmBytesPerSecond, 1.935e12);
    EXPECT_DOUBLE_EQ(a100.gpu.gemmModel->maxEfficiency.at(Dtype::Bf16), 0.839);
    EXPECT_LT(a100.intraNode.bandwidthBytesPerSecond, 40e9); // PCIe 4.0 x16, not NVLink's 300 GB/s
    r["system"]["gpu"] = "NVIDIA H100 PCIe";
    const ClusterConfig h100 = load(r).scenario.cluster;
    EXPECT_DOUBLE_EQ(h100.gpu.peakFlopsPerSecond.at(Dtype::Bf16), 7.56e14);
    EXPECT_DOUBLE_EQ(h100.gpu.hbmBytesPerSecond, 2.0e12);
    // The export variants' PCIe cards are the same cards but for the NVLink bridge, which is not modelled; an A100
    // PCIe whose memory is not stated is the 80 GB card. Each said.
    const std::tuple<const char*, const char*, const char*> said[] = {
        {"NVIDIA A800 80GB PCIe", "pcie-a100-80g", "A800 PCIe taken as the A100 PCIe card"},
        {"H800 PCIe", "pcie-h100-80g", ""}, // the H800 is an H100 but for NVLink, which the card has only as a bridge
        {"A100 PCIe", "pcie-a100-80g", "A100 PCIe memory size not stated"}};
    for (const auto& [part, preset, words] : said) {
        r["system"]["gpu"] = part;
        const ValidationCase c = load(r);
        EXPECT_EQ(c.scenario.cluster.name, preset) << part;
        if (*words) EXPECT_TRUE(mentions(c.assumptions, words)) << part;
    }
    r["system"]["gpu"] = "A100-SXM4-80GB";
    EXPECT_EQ(load(r).scenario.cluster.name, "dgx-a100-80g");
}

// A cloud instance named in place of its GPU is the GPU it carries, said, with its provider's network where the
// record states none (each had been refused, or read as an A100 of the wrong memory).
TEST(ValidationGpu, ACloudInstanceIsTheGpuItCarriesAndItsNetwork) {
    nlohmann::json r = record(); // 4 nodes, no link stated below
    r["system"].erase("inter_node_link");
    auto read = [&](const char* gpu) {
        r["system"]["gpu"] = gpu;
        return load(r);
    };
    ValidationCase c = read("AWS p4d.24xlarge");
    EXPECT_EQ(c.scenario.cluster.name.rfind("dgx-a100-40g", 0), 0u) << c.scenario.cluster.name;
    EXPECT_DOUBLE_EQ(c.scenario.cluster.interNode.bandwidthBytesPerSecond, 400e9 / 8 / 8); // 400 Gbps a node of 8
    EXPECT_TRUE(mentions(c.assumptions, "read as the instance's GPU, A100-SXM4-40GB"));
    EXPECT_TRUE(mentions(c.assumptions, "inter-node link not stated: the instance's, EFA 400 Gbps per node"));
    c = read("p5.48xlarge");
    EXPECT_EQ(c.scenario.cluster.name.rfind("dgx-h100-80g", 0), 0u) << c.scenario.cluster.name;
    EXPECT_DOUBLE_EQ(c.scenario.cluster.interNode.bandwidthBytesPerSecond, 50e9);
    EXPECT_EQ(read("Standard_ND96amsr_A100_v4").scenario.cluster.name.rfind("dgx-a100-80g", 0), 0u);
    EXPECT_EQ(read("Azure ND96asr_v4").scenario.cluster.name.rfind("dgx-a100-40g", 0), 0u);
    EXPECT_EQ(read("p5en.48xlarge").scenario.cluster.name.rfind("h200", 0), 0u);
    // A link the record states wins over the instance's.
    r["system"]["inter_node_link"] = "8 x 400 Gb/s";
    EXPECT_DOUBLE_EQ(read("AWS p4d.24xlarge").scenario.cluster.interNode.bandwidthBytesPerSecond, 50e9);
}

TEST(ValidationGpu, V100sAreTheDgx1AndDgx2PartsComputingInFp16) {
    // Volta: no bf16 tensor cores, so an fp16 run computes in fp16 (half_dtype), and no FlashAttention (sm70).
    nlohmann::json r = record();
    r["system"]["gpu"] = "Tesla V100-SXM2-16GB";
    r["system"]["precision"] = "fp16";
    r["plan"]["attention"] = "flash attention";
    const ValidationCase sxm2 = load(r);
    EXPECT_EQ(sxm2.scenario.cluster.name, "dgx1-v100");
    EXPECT_EQ(sxm2.scenario.cluster.gpu.memoryBytes, 16944988160LL); // nvidia-smi's 16160 MiB
    EXPECT_DOUBLE_EQ(sxm2.scenario.cluster.gpu.peakFlopsPerSecond.at(Dtype::Fp16), 125e12);
    EXPECT_EQ(sxm2.scenario.cluster.gpu.peakFlopsPerSecond.count(Dtype::Bf16), 0u);
    EXPECT_EQ(halfDtypeOf(sxm2.scenario.plan.framework), "fp16");
    EXPECT_EQ(precisionRecipeOf(sxm2.scenario.plan).computeDtype, Dtype::Fp16);
    EXPECT_FALSE(sxm2.scenario.plan.flashAttention);
    EXPECT_TRUE(mentions(sxm2.assumptions, "no fused attention kernel"));
    // The 32 GB SXM2 module keeps the DGX-1's fabric with its own memory; SXM3 (and DGX-2H) is the DGX-2.
    r["system"]["gpu"] = "V100 32GB";
    const ValidationCase v32 = load(r);
    EXPECT_EQ(v32.scenario.cluster.name, "dgx1-v100");
    EXPECT_EQ(v32.scenario.cluster.gpu.memoryBytes, 34069000000LL);
    EXPECT_TRUE(mentions(v32.assumptions, "DGX-1's V100-SXM2"));
    r["system"]["gpu"] = "Tesla V100-SXM3-32GB-H (DGX-2H)";
    r["system"]["gpus_per_node"] = 16;
    r["system"]["nodes"] = 2;
    const ValidationCase dgx2h = load(r);
    EXPECT_EQ(dgx2h.scenario.cluster.name, "dgx2-v100");
    EXPECT_EQ(dgx2h.scenario.cluster.gpusPerNode, 16);
    EXPECT_DOUBLE_EQ(dgx2h.scenario.cluster.intraNode.bandwidthBytesPerSecond, 150e9);
    EXPECT_TRUE(mentions(dgx2h.assumptions, "DGX-2H's 450 W V100"));
    // A precision left out on Volta is the 16-bit one it has, fp16 (it had been read as bf16 and refused), said.
    r["system"].erase("precision");
    const ValidationCase unstated = load(r);
    EXPECT_EQ(halfDtypeOf(unstated.scenario.plan.framework), "fp16");
    EXPECT_TRUE(mentions(unstated.assumptions, "which has no bf16: fp16 mixed precision"));
    EXPECT_FALSE(mentions(unstated.assumptions, "BF16 mixed precision"));
    // So is a 16-bit recipe that names no type ("mixed precision", as Korthikanti's and SC'21's records write it;
    // "AMP"; "half"), and an FP8 the GPU has no units for: each had been read as bf16 and refused.
    for (const char* generic : {"mixed precision", "AMP", "half precision", "fp8"}) {
        r["system"]["precision"] = generic;
        const ValidationCase mixed = load(r);
        EXPECT_EQ(halfDtypeOf(mixed.scenario.plan.framework), "fp16") << generic;
        EXPECT_EQ(precisionRecipeOf(mixed.scenario.plan).computeDtype, Dtype::Fp16) << generic;
        EXPECT_TRUE(mentions(mixed.assumptions, "which has no bf16: fp16 mixed precision")) << generic;
    }
    // A bf16 run cannot run on Volta: refused at the precision, naming the way out.
    r["system"]["precision"] = "bf16";
    const std::string bf16 = refusalOf(r);
    EXPECT_NE(bf16.find("half_dtype"), std::string::npos) << bf16;
    // Its network as the 2019 paper states it: bytes, not bits (GB/s, as against Gb/s), 100 GB/s a 16-GPU server.
    std::string how;
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("8 InfiniBand adapters per server, 100 GB/s between servers", 16, how),
                     6.25e9);
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("8 x 100 Gb/s InfiniBand per server", 16, how), 6.25e9);
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("RDMA 400 Gb/s per GPU", 8, how), 50e9);
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("RDMA 50 GBps per GPU", 8, how), 50e9);
    // A part name with an H that is not the DGX-2H's is not read as it.
    r["system"]["precision"] = "fp16";
    r["system"]["gpu"] = "Tesla V100-HBM2 16GB";
    EXPECT_EQ(load(r).scenario.cluster.name, "dgx1-v100");
    // The PCIe card has no NVLink fabric: refused, not read as the SXM part.
    r["system"]["precision"] = "fp16";
    r["system"]["gpu"] = "Tesla V100-PCIE-32GB";
    const std::string pcie = refusalOf(r);
    EXPECT_NE(pcie.find("V100 PCIe"), std::string::npos) << pcie;
}

TEST(ValidationPrecision, Fp32TrainingIsTheFp32RecipeAndTf32TheTf32Recipe) {
    // A field naming only 32 bits is full-precision training (the fp32 recipe: CUDA-core GEMMs), said; "fp32" beside
    // a 16-bit word is a mixed recipe's master copy. The test record's software is of 2022 (arXiv 2205), after
    // PyTorch 1.12 turned TF32 matmuls off by default.
    nlohmann::json r = record();
    for (const char* words : {"fp32", "float32", "FP32 (no mixed precision)", "fp32 on Ampere, TF32 off"}) {
        r["system"]["precision"] = words;
        const ValidationCase c = load(r);
        EXPECT_EQ(c.scenario.plan.precision, "fp32") << words;
        EXPECT_TRUE(mentions(c.assumptions, "fp32 training")) << words;
    }
    for (const char* words : {"bf16 with fp32 master weights", "mixed precision (fp16), fp32 master", "bf16"}) {
        r["system"]["precision"] = words;
        const ValidationCase c = load(r);
        EXPECT_NE(c.scenario.plan.precision, "fp32") << words;
        EXPECT_FALSE(mentions(c.assumptions, "fp32 training")) << words;
    }
    const double bf16Step = stepOf(load(r).scenario).metrics.stepSeconds;
    // TF32 is its own recipe: fp32 tensors, matmuls at the TF32 rate, attention unfused (FlashAttention takes 16-bit
    // inputs); between fp32 on the CUDA cores and bf16 on the tensor cores.
    r["system"]["precision"] = "tf32";
    r["plan"]["attention"] = "FlashAttention-2";
    const ValidationCase tf32 = load(r);
    EXPECT_EQ(tf32.scenario.plan.precision, "tf32");
    EXPECT_FALSE(tf32.scenario.plan.flashAttention);
    EXPECT_TRUE(mentions(tf32.assumptions, "TF32 training"));
    EXPECT_TRUE(mentions(tf32.assumptions, "attention unfused (FlashAttention takes 16-bit inputs)"));
    r["plan"].erase("attention");
    r["system"]["precision"] = "fp32";
    const double tf32Step = stepOf(tf32.scenario).metrics.stepSeconds;
    const double fp32Step = stepOf(load(r).scenario).metrics.stepSeconds;
    EXPECT_GT(tf32Step, 1.3 * bf16Step);
    EXPECT_LT(tf32Step, 0.5 * fp32Step);
    // An fp32 run of software before 2022 ran its matmuls in TF32: PyTorch's default from 1.7 to 1.11.
    r["source"] = "Someone et al., 'An older paper' (arXiv:2107.01234)";
    const ValidationCase older = load(r);
    EXPECT_EQ(older.scenario.plan.precision, "tf32");
    EXPECT_TRUE(mentions(older.assumptions, "fp32 training of 2021: matmuls on the tensor cores at the TF32 rate"));
    r["system"]["precision"] = "fp32, TF32 off";
    EXPECT_EQ(load(r).scenario.plan.precision, "fp32");
    // A GPU without TF32 units runs a TF32 record as fp32, said.
    r["system"]["gpu"] = "V100-SXM2-32GB";
    r["system"]["precision"] = "tf32";
    const ValidationCase volta = load(r);
    EXPECT_EQ(volta.scenario.plan.precision, "fp32");
    EXPECT_TRUE(mentions(volta.assumptions, "has no TF32 units: read as fp32"));
}

TEST(ValidationGpu, Gb200IsOneNvlinkDomainARackWhateverTheRecordCallsANode) {
    nlohmann::json r = record(); // 32 GPUs, 8 a node as the record says
    r["system"]["gpu"] = "NVIDIA GB200 NVL72";
    const ValidationCase c32 = load(r);
    EXPECT_EQ(c32.scenario.cluster.name, "gb200-nvl72");
    EXPECT_EQ(c32.scenario.cluster.gpusPerNode, 32); // the whole job inside one rack's NVLink domain
    EXPECT_EQ(c32.scenario.cluster.nodes, 1);
    EXPECT_DOUBLE_EQ(c32.scenario.cluster.gpu.peakFlopsPerSecond.at(Dtype::Bf16), 2.5e15);
    EXPECT_TRUE(mentions(c32.assumptions, "NVLink domain of 32 GPUs (gb200-nvl72: 72 a rack, not the 8 a node the record counts)"));
    // 256 GPUs (4-GPU compute trays, as NVIDIA's tables count them) do not fill whole racks of 72: 4 x 64.
    r["system"]["gpus_per_node"] = 4;
    r["system"]["nodes"] = 64;
    r["system"]["total_gpus"] = 256;
    r["plan"]["dp"] = 32;
    r["plan"]["global_batch"] = 256;
    const ValidationCase c256 = load(r);
    EXPECT_EQ(c256.scenario.cluster.gpusPerNode, 64);
    EXPECT_EQ(c256.scenario.cluster.nodes, 4);
    EXPECT_TRUE(mentions(c256.assumptions, "the job does not fill whole racks"));
    // A rate "per node" is the record's node's, the 4-GPU tray's, not the 64-GPU domain's: 4 x 400 Gb/s a tray is
    // 50 GB/s a GPU (it had been 3.1, and MLPerf's GB200 rows +54% to +142%).
    r["system"]["inter_node_link"] = "4x ConnectX-7 InfiniBand NDR 400 Gb/s per node";
    EXPECT_DOUBLE_EQ(load(r).scenario.cluster.interNode.bandwidthBytesPerSecond, 50e9);
}

TEST(ValidationGpu, AmdInstinctPartsHavePresetsAndAnMi250xRecordMayCountPackagesOrGcds) {
    // CDNA3: one device an OAM, 8 a platform on a switchless Infinity Fabric mesh.
    nlohmann::json r = record(); // 32 GPUs, 8 a node; tp 4 x pp 2 x dp 4 = 32
    r["system"]["gpu"] = "AMD Instinct MI300X";
    const ValidationCase mi300x = load(r);
    EXPECT_EQ(mi300x.scenario.cluster.name, "mi300x-platform");
    EXPECT_EQ(mi300x.scenario.cluster.intraNode.meshLinks, 7);
    EXPECT_DOUBLE_EQ(mi300x.scenario.cluster.gpu.peakFlopsPerSecond.at(Dtype::Bf16), 1.3074e15);
    r["system"]["gpu"] = "MI325X 256GB";
    EXPECT_EQ(load(r).scenario.cluster.name, "mi325x-platform");
    // CDNA2: the preset is one GCD (191.5 TFLOP/s of BF16); 8 a node are a Frontier / LUMI-G node's 8 GCDs ...
    r["system"]["gpu"] = "AMD Instinct MI250X";
    const ValidationCase gcds = load(r);
    EXPECT_EQ(gcds.scenario.cluster.name, "frontier-mi250x");
    EXPECT_EQ(gcds.scenario.cluster.gpusPerNode * gcds.scenario.cluster.nodes, 32);
    EXPECT_DOUBLE_EQ(gcds.scenario.cluster.gpu.peakFlopsPerSecond.at(Dtype::Bf16), 1.915e14);
    EXPECT_TRUE(mentions(gcds.assumptions, "GPUs read as GCDs (2 a package): 8 a node are a node's 8 GCDs"));
    // ... 4 a node are its 4 packages: 16 MI250X on 4 nodes are 32 GCDs, as the plan's 32 ranks say.
    r["system"]["gpus_per_node"] = 4;
    r["system"]["total_gpus"] = 16;
    const ValidationCase packages = load(r);
    EXPECT_EQ(packages.scenario.cluster.gpusPerNode, 8);
    EXPECT_EQ(packages.scenario.cluster.nodes, 4);
    EXPECT_TRUE(mentions(packages.assumptions, "GPUs read as packages of 2 GCDs, 32 GCDs in all"));
    // Without a count a node, the plan's stated degrees decide: 16 counted GPUs for 32 ranks are packages ...
    r["system"].erase("gpus_per_node");
    r["system"].erase("nodes");
    const ValidationCase byPlan = load(r);
    EXPECT_EQ(byPlan.scenario.cluster.gpusPerNode * byPlan.scenario.cluster.nodes, 32);
    EXPECT_TRUE(mentions(byPlan.assumptions, "the plan's degrees multiply to 32"));
    // ... and a record that says GCD counts GCDs, whatever the rest.
    r["system"]["gpu"] = "MI250X GCD";
    r["system"]["total_gpus"] = 32;
    EXPECT_TRUE(mentions(load(r).assumptions, "the record counts GCDs"));
    // The MI250 is the MI250X's GCD with 104 of its 110 CUs.
    r["system"]["gpu"] = "AMD Instinct MI250";
    const ValidationCase mi250 = load(r);
    EXPECT_NEAR(mi250.scenario.cluster.gpu.peakFlopsPerSecond.at(Dtype::Bf16), 181.05e12, 0.01e12);
    EXPECT_EQ(mi250.scenario.cluster.gpu.name, "AMD Instinct MI250 GCD (one of two, 64 GB HBM2e)");
    // CDNA4 (since 2026-12-01): the MI355X on its own preset, 2.5 PFLOP/s of BF16 on a mesh of 7 x 76.5 GB/s; the
    // MI350X, the same silicon at 2200 MHz, on it with every peak x 2200/2400, said.
    nlohmann::json cdna4 = record();
    cdna4["system"]["gpu"] = "AMD Instinct MI355X";
    const ValidationCase mi355x = load(cdna4);
    EXPECT_EQ(mi355x.scenario.cluster.name, "mi355x-platform");
    EXPECT_EQ(mi355x.scenario.cluster.intraNode.meshLinks, 7);
    EXPECT_DOUBLE_EQ(mi355x.scenario.cluster.intraNode.bandwidthBytesPerSecond, 535.5e9);
    EXPECT_DOUBLE_EQ(mi355x.scenario.cluster.gpu.peakFlopsPerSecond.at(Dtype::Bf16), 2.5e15);
    cdna4["system"]["gpu"] = "MI350X";
    const ValidationCase mi350x = load(cdna4);
    EXPECT_NEAR(mi350x.scenario.cluster.gpu.peakFlopsPerSecond.at(Dtype::Bf16), 2.5e15 * 2200.0 / 2400.0, 1e9);
    EXPECT_EQ(mi350x.scenario.cluster.gpu.name, "AMD Instinct MI350X OAM (288 GB HBM3E)");
    EXPECT_TRUE(mentions(mi350x.assumptions, "MI350X taken as the MI355X's preset at its 2200 MHz clock"));
    // Parts without figures are refused naming the nearest preset, not read as another in silence.
    for (const char* part : {"AMD Instinct MI300A", "AMD Instinct MI100"}) {
        r["system"]["gpu"] = part;
        const std::string refusal = refusalOf(r);
        EXPECT_NE(refusal.find("/system/gpu"), std::string::npos) << refusal;
        EXPECT_NE(refusal.find("mi3"), std::string::npos) << refusal;
    }
}

TEST(ValidationProse, AProductNumberInTheLinkIsNoCountOfNics) {
    // "Slingshot-11" and "ConnectX-7" are names: 4 NICs of 200 Gb/s a node of 8 GCDs are 12.5 GB/s a GCD.
    std::string how;
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("4x Slingshot-11 200 Gb/s per node", 8, how), 12.5e9);
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("8x ConnectX-7 400 Gb/s InfiniBand", 8, how), 50e9);
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("4 x ConnectX-6 HDR 200 Gb/s per node", 8, how), 12.5e9);
    // A rate joined to its unit by a hyphenated word is still the rate.
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("RoCE-400 Gb/s per GPU", 8, how), 50e9);
}

// A port's rate with the node's count of them written after it had been read as the node's whole rate, shared by its
// GPUs: "NDR 400 Gb/s, 8x ConnectX-7 a node" gave 6.25 GB/s a GPU, not 50 (MLPerf's Eos rows predicted +50-160%).
TEST(ValidationProse, ACountOfNicsWrittenAfterTheRateIsRead) {
    std::string how;
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("InfiniBand NDR 400 Gb/s, 8x ConnectX-7 a node (Eos)", 8, how), 50e9);
    EXPECT_NE(how.find("x 8 per node"), std::string::npos) << how;
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("InfiniBand NDR 400 Gb/s, 8x Quantum-2 CX7 a node", 8, how), 50e9);
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("400 Gb/s x 8", 8, how), 50e9);
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("HDR 200 Gb/s x4", 8, how), 12.5e9);
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("InfiniBand HDR 200 Gb/s (4 per node)", 8, how), 12.5e9);
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("200 Gb/s HDR, 2 HCAs per server", 8, how), 6.25e9);
    // "a GPU" is "per GPU"; a node's aggregate above any port's rate stays the node's; no count keeps one NIC a GPU.
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("RoCE v2, 400 Gb/s a GPU (OCI BM.GPU.H100.8)", 8, how), 50e9);
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("1600 Gbps node-node interconnect (RoCE), 8 a node", 8, how), 25e9);
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("InfiniBand NDR 400 Gb/s", 8, how), 50e9);
    // A product's number after the rate is no count ("ConnectX-7", "CX7"), nor is a generation's.
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("400 Gb/s ConnectX-7 per node", 8, how), 6.25e9);
}

// A rate without "b/s" ("400G", "100GbE") and an InfiniBand generation named without one ("NDR400 x8", "4x HDR",
// "InfiniBand NDR") are read as the port rates they are; each had been taken as no link stated (the preset's).
TEST(ValidationProse, ALinkRateWrittenAsAPortOrAGenerationIsRead) {
    std::string how;
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("Spectrum-X 400G", 8, how), 50e9);   // one NIC per GPU
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("TCP 100GbE", 8, how), 12.5e9);
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("NDR400 x8", 8, how), 50e9);
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("4x HDR", 8, how), 12.5e9);           // 4 ports of 200 a node
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("4x HDR 200", 8, how), 12.5e9);
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("InfiniBand NDR", 8, how), 50e9);
    EXPECT_NE(how.find("InfiniBand ndr: 400 Gb/s a port"), std::string::npos) << how;
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("8x EDR InfiniBand", 8, how), 12.5e9);
    // A rate written in full is read as before, the generation beside it no second rate.
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("InfiniBand NDR 400 Gb/s", 8, how), 50e9);
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("8x NVIDIA Mellanox 200Gb/s HDR", 8, how), 25e9);
    // Words with no rate stay unread (0: the preset's link, said as named without a rate).
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("Omni-Path", 8, how), 0.0);
    EXPECT_DOUBLE_EQ(prose::interNodeBytesPerSecond("high-speed fabric", 8, how), 0.0);
}

TEST(ValidationProse, AnOutOfMemoryOutcomeToldInWordsIsCompared) {
    nlohmann::json r = record();
    r["measured"] = {{"outcome", "OOM at the first step (CUDA out of memory)"}};
    const ValidationCase oom = load(r);
    ASSERT_TRUE(oom.measured.outOfMemory.has_value());
    EXPECT_TRUE(*oom.measured.outOfMemory);
    EXPECT_TRUE(mentions(oom.assumptions, "out-of-memory outcome read from measured/outcome"));
    r["measured"] = {{"status", "ran; fits with 3 GB to spare"}};
    const ValidationCase ran = load(r);
    ASSERT_TRUE(ran.measured.outOfMemory.has_value());
    EXPECT_FALSE(*ran.measured.outOfMemory);
    // A stated boolean wins over words; words that say neither leave the outcome unstated.
    r["measured"] = {{"oom", false}, {"outcome", "OOM"}};
    EXPECT_FALSE(*load(r).measured.outOfMemory);
    r["measured"] = {{"result", "see the paper's Figure 3"}, {"tokens_per_s", 65536.0}};
    EXPECT_FALSE(load(r).measured.outOfMemory.has_value());
    EXPECT_EQ(outOfMemoryInProse("didn't fit in 80 GB"), true);
    EXPECT_EQ(outOfMemoryInProse("did not fit"), true);
    EXPECT_EQ(outOfMemoryInProse("Completed 100 steps"), false);
    EXPECT_EQ(outOfMemoryInProse("zoom"), std::nullopt); // not the word oom
    EXPECT_EQ(outOfMemoryInProse("not successful"), std::nullopt);
    EXPECT_EQ(outOfMemoryInProse("failed: NCCL timeout"), std::nullopt);
    // PyTorch's exception name, "OOMed", and a negated out-of-memory (which had been read as one).
    EXPECT_EQ(outOfMemoryInProse("torch.OutOfMemoryError"), true);
    EXPECT_EQ(outOfMemoryInProse("OOMed at step 3"), true);
    EXPECT_EQ(outOfMemoryInProse("no OOM"), false);
    EXPECT_EQ(outOfMemoryInProse("ran without OOM errors"), false);
    EXPECT_EQ(outOfMemoryInProse("did not run out of memory"), false);
    EXPECT_EQ(outOfMemoryInProse("did not fit"), true); // a negated fit is still out of memory
    // measured/error is read as outcome, status and result are.
    r["measured"] = {{"error", "CUDA out of memory. Tried to allocate 2.00 GiB"}};
    ASSERT_TRUE(load(r).measured.outOfMemory.has_value());
    EXPECT_TRUE(*load(r).measured.outOfMemory);
}

// Megatron-LM's --moe-layer-freq list expressions: lists, repeats, sums, parentheses; anything else is none.
TEST(ValidationProse, LayerPatternsReadMegatronsListExpressions) {
    using prose::layerPattern;
    EXPECT_EQ(layerPattern("([0]*3+[1]*2)"), (std::vector<int>{0, 0, 0, 1, 1}));
    EXPECT_EQ(layerPattern("[1, 0] * 2"), (std::vector<int>{1, 0, 1, 0}));
    EXPECT_EQ(layerPattern("([1]*3+[0]*1)*2"), (std::vector<int>{1, 1, 1, 0, 1, 1, 1, 0}));
    for (const char* bad : {"", "2", "[2]", "[0]*", "([0]*3", "[0]+", "[0]*99999999", "import os"})
        EXPECT_FALSE(layerPattern(bad).has_value()) << bad;
}

// A plain "FP8" in Megatron-Bridge's performance tables is the recipe its scripts ran: delayed scaling until 25.09
// (--fp8_recipe defaulted to ds), current scaling from 25.11 (--compute_dtype fp8_cs, fp8_mx or fp8_sc, no delayed
// scaling among them). The table's version decides, and only for Megatron-Bridge's tables: NeMo 24.07's FP8 and
// Megatron-LM's stay delayed, and a recipe the record names stays that recipe.
TEST(ValidationProse, MegatronBridgeTablesFp8IsCurrentScalingFrom2511) {
    nlohmann::json r = test::llama405(8192, 1, 8192);
    r["system"]["precision"] = "FP8";
    r["plan"]["framework"] = "Megatron-Bridge";
    auto recipeAt = [&](const char* version) {
        r["plan"]["framework_version"] = version;
        return fp8RecipeOf(load(r).scenario.plan.framework);
    };
    EXPECT_EQ(recipeAt("25.09"), "delayed");
    EXPECT_EQ(recipeAt("25.11"), "tensorwise");
    EXPECT_EQ(recipeAt("26.02"), "tensorwise");
    EXPECT_EQ(recipeAt("27.01"), "tensorwise");
    EXPECT_TRUE(mentions(load(r).assumptions, "fp8_cs, current scaling"));
    r["system"]["precision"] = "MXFP8"; // named: kept
    EXPECT_EQ(recipeAt("26.02"), "mxfp8");
    r["system"]["precision"] = "FP8";
    // The table named in the source, the framework given as NeMo (its containers run Megatron-Bridge's scripts).
    r["plan"]["framework"] = "NeMo";
    r["source"] = "NVIDIA-NeMo/Megatron-Bridge, docs/performance-summary-archive.md: '26.04.01 NeMo Container'";
    EXPECT_EQ(recipeAt("26.04"), "tensorwise");
    r["source"] = "NVIDIA NeMo performance summary";
    EXPECT_EQ(recipeAt("24.07"), "delayed");
    EXPECT_EQ(recipeAt("26.04"), "delayed"); // not Megatron-Bridge's table: Megatron-core's default
    r["plan"]["framework"] = "Megatron-LM";
    r["plan"]["framework_version"] = "core_r0.13.0";
    EXPECT_EQ(fp8RecipeOf(load(r).scenario.plan.framework), "delayed");
}

} // namespace
} // namespace tessel::sim
