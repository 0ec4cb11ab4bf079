// Published training runs in each framework's own words: torchtitan, FSDP's and Megatron-core's sharding names,
// Lightning's and Hugging Face's model code, DeepSpeed's blocking launches, read as those frameworks run them
// (`tessel validate`; Megatron-core, Transformer Engine and NeMo: validation_megatron_nemo_test.cpp; model
// architectures in their configs' words: validation_architectures_test.cpp; llm-foundry's MPT:
// validation_llm_foundry_test.cpp).
#include "validation_support.hpp"
#include "../cost_models/test_support.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/framework.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/sim/validation.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace tessel::sim {
namespace {
using test::dataParallelOnly;
using test::load;
using test::mentions;
using test::onNodes;
using test::record;
using test::refusalOf;

// A record of a data-parallel run sharded ZeRO-3 under `framework` (the sharded-framework tests' case).
nlohmann::json shardedRecord(const std::string& framework) {
    nlohmann::json r = record();
    dataParallelOnly(r);
    r["plan"]["zero"] = 3;
    r["plan"]["framework"] = framework;
    return r;
}

TEST(ValidationRecord, FsdpReducesIn16BitsUnlessItsTrainerReducesInFp32) {
    // Where FSDP reduces is the trainer's: PyTorch's MixedPrecision with reduce_dtype unset takes param_dtype,
    // FairScale (metaseq) reduces in fp16, Accelerate and Lightning use one dtype; Composer's DEFAULT (llm-foundry)
    // and torchtitan reduce in fp32. A stated reduce dtype decides.
    nlohmann::json r = shardedRecord("metaseq (FSDP)");
    r["system"]["precision"] = "fp16";
    const ValidationCase metaseq = load(r);
    EXPECT_EQ(metaseq.scenario.plan.precision, "fsdp_pure");
    EXPECT_EQ(precisionRecipeOf(metaseq.scenario.plan).gradReduceBytes(), 2);
    EXPECT_EQ(halfDtypeOf(metaseq.scenario.plan.framework), "fp16");
    EXPECT_TRUE(mentions(metaseq.assumptions, "FSDP gradients reduced in 16 bits"));
    r["plan"]["reduce_dtype"] = "float32";
    EXPECT_EQ(load(r).scenario.plan.precision, "fsdp");
    r["plan"].erase("reduce_dtype");
    r["plan"]["framework"] = "Composer (FSDP)";
    r["system"]["precision"] = "amp_bf16";
    EXPECT_EQ(load(r).scenario.plan.precision, "fsdp");
    r["plan"]["mixed_precision_reduce"] = "bfloat16";
    EXPECT_EQ(load(r).scenario.plan.precision, "fsdp_pure");
}

// Lightning's FSDP "bf16-mixed" from 2.1 to 2.5 keeps param_dtype float32 inside torch.autocast and reduces in
// bf16 (fabric/plugins/precision/fsdp.py): recipe fsdp_amp, said; before 2.1 and from 2.6 it gathers in 16 bits.
// TinyLlama (lit-gpt on Fabric, lightning 2.1.2) is such a run; "16-mixed" is fp16.
TEST(ValidationRecord, LightningsFsdpMixedPrecisionGathersFp32UnderAutocast) {
    nlohmann::json r = shardedRecord("lit-gpt (Lightning Fabric FSDP)");
    r["source"] = "jzhang38/TinyLlama README (2023-09)";
    r["system"]["precision"] = "bf16-mixed";
    ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.precision, "fsdp_amp");
    EXPECT_EQ(precisionRecipeOf(c.scenario.plan).paramGatherBytes(), 4);
    EXPECT_EQ(precisionRecipeOf(c.scenario.plan).gradReduceBytes(), 2);
    EXPECT_TRUE(precisionRecipeOf(c.scenario.plan).autocast);
    EXPECT_TRUE(mentions(c.assumptions, "Lightning's FSDP \"bf16-mixed\" (a 2023 source): fp32 parameters gathered"));
    EXPECT_FALSE(mentions(c.assumptions, "FSDP gradients reduced in 16 bits"));
    r["plan"]["framework"] = "Lightning 2.0.9 (FSDPStrategy)";
    c = load(r);
    EXPECT_EQ(c.scenario.plan.precision, "fsdp_pure");
    EXPECT_TRUE(mentions(c.assumptions, "(Lightning 2.0): parameters gathered and gradients reduced in 16 bits"));
    r["plan"]["framework"] = "Lightning 2.6 (FSDPStrategy)";
    EXPECT_EQ(load(r).scenario.plan.precision, "fsdp_pure");
    // A PyTorch version beside it is not Lightning's.
    r["plan"]["framework"] = "Lightning Fabric FSDP on PyTorch 2.0";
    EXPECT_EQ(load(r).scenario.plan.precision, "fsdp_amp");
    r["plan"]["framework"] = "Lightning Fabric FSDP";
    r["system"]["precision"] = "16-mixed";
    c = load(r);
    EXPECT_EQ(c.scenario.plan.precision, "fsdp_amp");
    EXPECT_EQ(halfDtypeOf(c.scenario.plan.framework), "fp16");
    // A reduce dtype the record states decides as before.
    r["system"]["precision"] = "bf16-mixed";
    r["plan"]["reduce_dtype"] = "float32";
    EXPECT_EQ(load(r).scenario.plan.precision, "fsdp");
    // Accumulating over micro-batches, Fabric's no_backward_sync is FSDP's no_sync (one reduce-scatter a step),
    // said; one micro-batch a step has nothing to accumulate, and a stated flag wins.
    EXPECT_EQ(load(r).scenario.plan.framework.gradSyncEachMicroBatch, std::nullopt);
    r["plan"]["global_batch"] = 32 * 2 * 4;
    c = load(r);
    EXPECT_EQ(c.scenario.plan.framework.gradSyncEachMicroBatch, std::optional<bool>(false));
    EXPECT_TRUE(mentions(c.assumptions, "Lightning Fabric's no_backward_sync: FSDP's no_sync over the 4 micro-batches"));
    r["plan"]["grad_sync_each_micro_batch"] = true;
    EXPECT_EQ(load(r).scenario.plan.framework.gradSyncEachMicroBatch, std::optional<bool>(true));
    // A flag that is neither true nor false is said, not dropped in silence.
    r["plan"]["grad_sync_each_micro_batch"] = "maybe";
    EXPECT_TRUE(mentions(load(r).assumptions, "grad_sync_each_micro_batch \"maybe\" is neither true nor false"));
    // The Hugging Face Trainer accumulates through Accelerate's no_sync too; torchtitan and Composer do not.
    r["plan"].erase("grad_sync_each_micro_batch");
    r["plan"]["framework"] = "Hugging Face Trainer (FSDP)";
    c = load(r);
    EXPECT_EQ(c.scenario.plan.framework.gradSyncEachMicroBatch, std::optional<bool>(false));
    EXPECT_TRUE(mentions(c.assumptions, "Hugging Face Accelerate's accumulate"));
    r["plan"]["framework"] = "Composer (FSDP)";
    EXPECT_EQ(load(r).scenario.plan.framework.gradSyncEachMicroBatch, std::nullopt);
}

// Hugging Face Transformers' model code runs its norms, rotary embedding and activations as separate PyTorch
// ops under whichever engine shards it (Trainer + DeepSpeed here): eager, said; compiled or with a kernel
// library (Liger, fused RMSNorm) it is fused, and a Megatron-DeepSpeed model keeps its fused kernels. A fused
// optimizer fuses no model kernel. JAX's rematerialisation as MaxText names it (remat_policy): what the
// policy keeps decides what XLA reruns, and a rerun MLP stops before fc2 (checkpoint_early_stop), unless the
// record says otherwise.
TEST(ValidationRecord, MaxTextsRematPoliciesAreReadAsWhatXlaReruns) {
    namespace rm = recompute_module;
    auto read = [](const nlohmann::json& planKeys) {
        nlohmann::json r = test::record();
        r["plan"].erase("recompute");
        r["plan"]["framework"] = "MaxText";
        r["plan"]["tp"] = 1;
        r["plan"]["pp"] = 1;
        r["plan"]["dp"] = 32;
        r["plan"]["zero"] = 3;
        r["plan"]["sequence_parallel"] = false;
        for (const auto& [k, v] : planKeys.items())
            r["plan"][k] = v;
        return test::load(r);
    };
    struct Expect {
        const char* policy;
        Recompute recompute;
        uint8_t modules;
    };
    for (const Expect& e :
         {Expect{"full", Recompute::Full, 0}, Expect{"minimal", Recompute::Selective, rm::CoreAttn},
          Expect{"save_dot_with_context_except_mlp", Recompute::Selective, rm::Mlp},
          Expect{"save_dot_except_mlpwi", Recompute::Selective, rm::CoreAttn | rm::Mlp},
          Expect{"save_dot_except_mlp", Recompute::Selective, rm::CoreAttn | rm::Mlp},
          Expect{"save_qkv_proj", Recompute::Full, 0}, Expect{"save_out_proj", Recompute::Full, 0}}) {
        const ValidationCase c = read({{"remat_policy", e.policy}});
        const Plan& p = c.scenario.plan;
        EXPECT_EQ(p.recompute, e.recompute) << e.policy;
        if (e.recompute == Recompute::Selective) EXPECT_EQ(p.recomputeModules, e.modules) << e.policy;
        EXPECT_TRUE(p.framework.checkpointEarlyStop.value_or(false)) << e.policy;
        EXPECT_TRUE(mentions(c.assumptions, std::string("read from remat_policy \"") + e.policy + "\""))
            << e.policy;
    }
    // custom: the named tensors kept on the device (or offloaded) are kept, the rest rerun (base.yml's
    // 'remat').
    const ValidationCase custom = read({{"remat_policy", "custom"},
                                        {"query_proj", "device"},
                                        {"key_proj", "device"},
                                        {"value_proj", "device"},
                                        {"out_proj", "device"}});
    EXPECT_EQ(custom.scenario.plan.recompute, Recompute::Selective);
    EXPECT_EQ(custom.scenario.plan.recomputeModules, rm::CoreAttn | rm::Mlp);
    const ValidationCase keepsMlp = read({{"remat_policy", "custom"},
                                          {"qkv_proj", "offload"},
                                          {"context", "device"},
                                          {"mlpwi_0", "device"},
                                          {"mlpwi_1", "device"}});
    EXPECT_EQ(keepsMlp.scenario.plan.recompute, Recompute::None);
    EXPECT_TRUE(mentions(keepsMlp.assumptions, "the attention's output projection rerun, not counted"));
    const ValidationCase dropsQkv = read({{"remat_policy", "custom"}, {"out_proj", "device"}});
    EXPECT_EQ(dropsQkv.scenario.plan.recompute, Recompute::Full);
    // A placement MaxText does not take is said and read as remat, not silently.
    const ValidationCase misspelt = read({{"remat_policy", "custom"}, {"qkv_proj", "devcie"}});
    EXPECT_EQ(misspelt.scenario.plan.recompute, Recompute::Full);
    EXPECT_TRUE(mentions(misspelt.assumptions, "plan/qkv_proj \"devcie\" names no placement"));
    // A stated early stop is the record's; a stated recompute is read before the policy; an unknown policy is
    // said.
    const ValidationCase stated = read({{"remat_policy", "minimal"}, {"checkpoint_early_stop", false}});
    EXPECT_FALSE(stated.scenario.plan.framework.checkpointEarlyStop.value_or(true));
    const ValidationCase explicitRecompute = read({{"remat_policy", "full"}, {"recompute", "selective"}});
    EXPECT_EQ(explicitRecompute.scenario.plan.recompute, Recompute::Selective);
    const ValidationCase unknown = read({{"remat_policy", "save_everything_twice"}});
    EXPECT_TRUE(
        mentions(unknown.assumptions, "plan/remat_policy \"save_everything_twice\" names no remat policy"));
}

TEST(ValidationRecord, HuggingFaceModelCodeRunsEager) {
    nlohmann::json r = shardedRecord("Hugging Face Trainer + DeepSpeed ZeRO-3");
    r["plan"]["techniques"] = "fused AdamW";
    ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.framework.fusedKernels, std::optional<bool>(false));
    EXPECT_TRUE(mentions(c.assumptions, "Hugging Face Transformers' model code"));
    r["plan"]["techniques"] = "Liger kernels (fused RMSNorm, RoPE, SwiGLU, cross-entropy)";
    EXPECT_TRUE(fusedKernelsOf(load(r).scenario.plan.framework));
    r["plan"].erase("techniques");
    r["plan"]["compile"] = true;
    EXPECT_EQ(load(r).scenario.plan.framework.fusedKernels, std::optional<bool>(true));
    r["plan"].erase("compile");
    r["plan"]["framework"] = "Megatron-DeepSpeed";
    c = load(r);
    EXPECT_FALSE(mentions(c.assumptions, "Hugging Face Transformers' model code"));
    EXPECT_TRUE(fusedKernelsOf(c.scenario.plan.framework));
}

// Liger-Kernel's Hugging Face patch replaces the output layer and loss with its fused linear cross-entropy (on by
// default in apply_liger_kernel_to_*): read from its switches or its name, said, and not where the run has tensor
// parallelism (Liger multiplies the whole head on each rank).
TEST(ValidationRecord, LigerIsReadAsItsFusedLinearLoss) {
    nlohmann::json r = shardedRecord("Hugging Face Trainer + FSDP");
    EXPECT_NE(crossEntropyOf(load(r).scenario.plan.framework), "fused_linear");
    r["plan"]["use_liger_kernel"] = true;
    ValidationCase c = load(r);
    EXPECT_EQ(crossEntropyOf(c.scenario.plan.framework), "fused_linear");
    EXPECT_TRUE(mentions(c.assumptions, "Liger-Kernel: the output layer and the loss"));
    r["plan"]["use_liger_kernel"] = "perhaps";
    c = load(r);
    EXPECT_NE(crossEntropyOf(c.scenario.plan.framework), "fused_linear");
    EXPECT_TRUE(mentions(c.assumptions, "use_liger_kernel \"perhaps\" is not a yes or no"));
    r["plan"]["use_liger_kernel"] = false;
    r["plan"]["techniques"] = "Liger kernels";
    EXPECT_NE(crossEntropyOf(load(r).scenario.plan.framework), "fused_linear"); // the switch said no
    r["plan"].erase("use_liger_kernel");
    EXPECT_EQ(crossEntropyOf(load(r).scenario.plan.framework), "fused_linear");
    r["plan"].erase("techniques");
    r["notes"] = "LigerFusedLinearCrossEntropyLoss in place of the model's lm_head and loss";
    EXPECT_EQ(crossEntropyOf(load(r).scenario.plan.framework), "fused_linear");
    r["plan"]["cross_entropy"] = "fused_linear";
    EXPECT_EQ(crossEntropyOf(load(r).scenario.plan.framework), "fused_linear");
    r["plan"].erase("cross_entropy");
    r["plan"]["tp"] = 2;
    r["plan"]["dp"] = r["plan"]["dp"].get<int>() / 2;
    r["plan"]["techniques"] = "Liger kernels";
    c = load(r);
    EXPECT_NE(crossEntropyOf(c.scenario.plan.framework), "fused_linear");
    EXPECT_TRUE(mentions(c.assumptions, "Liger-Kernel named, but"));
}

// The defaults said are those that decide something for the plan, as the plan runs: FSDP's no_sync only where FSDP
// shards gradients, and torchtitan under pipelining does not reshard after forward (fsdpGathersOncePerStep).
TEST(ValidationRecord, TheDefaultsSaidAreTheOnesThatDecide) {
    nlohmann::json r = record(); // Megatron-LM, pp 2
    ValidationCase c = load(r);
    EXPECT_FALSE(mentions(c.assumptions, "grad_sync_each_micro_batch"));
    r["plan"]["framework"] = "torchtitan";
    r["plan"]["zero"] = 3;
    r["plan"]["tp"] = 1;
    r["plan"]["dp"] = 16;
    c = load(r);
    ASSERT_GT(c.scenario.plan.pp, 1);
    EXPECT_TRUE(mentions(c.assumptions, "reshard_after_forward = false (torchtitan under pipelining"));
    EXPECT_FALSE(mentions(c.assumptions, "reshard_after_forward = true"));
    EXPECT_TRUE(mentions(c.assumptions, "grad_sync_each_micro_batch = true"));
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
    // So does a ZeRO-3 run under a framework tessel has no defaults for (BloombergGPT's SageMaker sharded data
    // parallelism): a sharded engine's batch per GPU; its ZeRO-1 twin keeps Megatron-LM's 1.
    nlohmann::json smp = fsdpRun;
    smp["plan"]["global_batch"] = 64;
    smp["plan"]["framework"] = "SageMaker model parallelism (sharded data parallel)";
    const ValidationCase sharded = load(smp);
    EXPECT_EQ(sharded.scenario.plan.microBatch, 64 / 32);
    EXPECT_TRUE(mentions(sharded.assumptions, "a ZeRO-3 engine's default"));
    smp["plan"]["zero"] = 1;
    EXPECT_EQ(load(smp).scenario.plan.microBatch, 1);
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
    // A step time and a sequence rate under the other names records give them, milliseconds as Megatron-LM logs.
    for (const auto& [key, value, seconds] : std::vector<std::tuple<std::string, double, double>>{
             {"step_time_s", 2.5, 2.5}, {"iteration_time_ms", 2500.0, 2.5}, {"elapsed_time_per_iteration_ms", 2500.0, 2.5},
             {"sequences_per_s", 16.0, 4.0}}) {
        nlohmann::json named = record();
        named["measured"] = {{key, value}};
        const ValidationCase c = load(named);
        ASSERT_TRUE(c.measured.stepSeconds.has_value()) << key;
        EXPECT_DOUBLE_EQ(*c.measured.stepSeconds, seconds) << key;
        EXPECT_EQ(c.measured.stepSource, "runs.json#/0/measured/" + key);
    }
    // Peak memory likewise: a key in GiB is GiB, one naming the allocator's counter says which.
    nlohmann::json gib = record();
    gib["measured"]["max_memory_allocated_gb"] = 40.0;
    const ValidationCase allocated = load(gib);
    ASSERT_TRUE(allocated.measured.memoryBytes.has_value());
    EXPECT_DOUBLE_EQ(*allocated.measured.memoryBytes, 40e9);
    EXPECT_TRUE(allocated.measured.memoryIsAllocated);
    gib["measured"].erase("max_memory_allocated_gb");
    gib["measured"]["peak_memory_gib"] = 40.0;
    const ValidationCase peak = load(gib);
    ASSERT_TRUE(peak.measured.memoryBytes.has_value());
    EXPECT_DOUBLE_EQ(*peak.measured.memoryBytes, 40.0 * 1073741824.0);
    EXPECT_EQ(peak.measured.memorySource, "runs.json#/0/measured/peak_memory_gib");
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
    // Not a whole number of sequences: a rounded figure, the nearest whole number of them, said.
    inTokens["plan"]["global_batch_tokens"] = 64 * 2048 + 1;
    const ValidationCase uneven = load(inTokens);
    EXPECT_EQ(uneven.scenario.plan.globalBatch, 64);
    EXPECT_TRUE(mentions(uneven.assumptions, "global_batch_tokens \"131073\" read in tokens: 64 sequences of 2048 (the nearest whole number)"));
    // "4M" under a tokens key as under global_batch: 2^22, the reading that is whole sequences (4e6 is not).
    inTokens["plan"]["global_batch_tokens"] = "4M";
    EXPECT_EQ(load(inTokens).scenario.plan.globalBatch, 2048);
    inTokens["plan"]["global_batch"] = nullptr; // a null batch beside it says nothing
    EXPECT_EQ(load(inTokens).scenario.plan.globalBatch, 2048);
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
    // So is an H200 NVL (it had been read as the SXM part in silence).
    r["system"]["gpu"] = "H200 NVL";
    const ValidationCase h200nvl = load(r);
    EXPECT_EQ(h200nvl.scenario.cluster.name, "h200-single");
    EXPECT_TRUE(mentions(h200nvl.assumptions, "H200 NVL taken as the H200 SXM part"));
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
    // "FSDP 2.4" is PyTorch 2.4's FSDP, not FSDP2 (it had been read as torchtitan's).
    EXPECT_EQ(frameworkOfRecord("PyTorch FSDP 2.4"), "fsdp");
    EXPECT_EQ(frameworkOfRecord("PyTorch FSDP2"), "torchtitan");
    // MosaicML's llm-foundry named alone trains under Composer's FSDP (it had been read as a framework of its own:
    // generic, no sharding).
    EXPECT_EQ(frameworkOfRecord("llm-foundry"), "fsdp");
    EXPECT_EQ(frameworkOfRecord("MosaicML llm-foundry v0.4"), "fsdp");
    nlohmann::json r = record();
    r["source"] = "A blog post (2024)";
    r["plan"]["framework"] = "llm-foundry";
    EXPECT_TRUE(mentions(load(r).assumptions, "llm-foundry:"));
}

// A version written in the framework's name is the framework's version (the source's year had been taken instead):
// a container's YY.MM, a Megatron-core release, a date, or a DeepSpeed or PyTorch release's year.
TEST(ValidationRecord, AVersionInTheFrameworksNameIsItsVersion) {
    auto versionOf = [](const std::string& framework) {
        nlohmann::json r = record();
        r["plan"]["framework"] = framework;
        const ValidationCase c = load(r);
        EXPECT_TRUE(mentions(c.assumptions, "read from the framework's name")) << framework;
        return c.scenario.plan.framework.version;
    };
    EXPECT_EQ(versionOf("NeMo 24.12"), "24.12");
    EXPECT_EQ(versionOf("Megatron-LM core_r0.9.0"), "core_r0.9");
    EXPECT_EQ(versionOf("torchtitan (2025-03)"), "2025");
    // DeepSpeed's and PyTorch's releases stay their numbers, read as the framework's own (DeepSpeed 0.4 is 2021 and
    // before contiguous_gradients became its default).
    EXPECT_EQ(versionOf("DeepSpeed 0.14 + Megatron-DeepSpeed"), "0.14");
    EXPECT_EQ(versionOf("DeepSpeed v0.7.3"), "0.7");
    EXPECT_EQ(versionOf("PyTorch FSDP 2.4"), "2.4");
    EXPECT_EQ(versionOf("PyTorch 1.13 FSDP"), "1.13");
    auto yearOf = [](const std::string& framework) {
        nlohmann::json r = record();
        r["plan"]["framework"] = framework;
        return frameworkYear(load(r).scenario.plan.framework);
    };
    EXPECT_EQ(yearOf("DeepSpeed 0.14 + Megatron-DeepSpeed"), 2024);
    EXPECT_EQ(yearOf("DeepSpeed v0.7.3"), 2022);
    EXPECT_EQ(yearOf("PyTorch FSDP 2.4"), 2024);
    EXPECT_EQ(yearOf("PyTorch 1.13 FSDP"), 2022);
    nlohmann::json early = record();
    early["plan"]["framework"] = "DeepSpeed 0.4";
    early["plan"]["zero"] = 2;
    EXPECT_FALSE(deepSpeedContiguousGradientsOf(load(early).scenario.plan.framework, 2, false));
    // Another framework's release form is not read as this one's: said, and the source's year taken instead.
    nlohmann::json foreign = record();
    foreign["plan"]["framework"] = "DeepSpeed";
    foreign["plan"]["framework_version"] = "core_r0.9.0";
    EXPECT_TRUE(mentions(load(foreign).assumptions,
                         "framework_version not used: no date can be read from \"core_r0.9.0\" for deepspeed"));
    EXPECT_NE(load(foreign).scenario.plan.framework.version, "core_r0.9.0");
    // A stated framework_version wins; a name with no version leaves the source's year.
    nlohmann::json r = record();
    r["plan"]["framework"] = "NeMo 24.12";
    r["plan"]["framework_version"] = "24.07";
    EXPECT_EQ(load(r).scenario.plan.framework.version, "24.07");
    r["plan"].erase("framework_version");
    r["plan"]["framework"] = "NeMo 2.0";
    EXPECT_FALSE(mentions(load(r).assumptions, "read from the framework's name"));
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

// A model held in bf16 under FSDP (torch_dtype / model_dtype: NeMo AutoModel's MoE models, Hugging Face's
// torch_dtype, torchtune's dtype): bf16 shards and no master, the optimizer's state as optimizer_dtype says; FSDP's
// usual reading (fp32 shards) otherwise, and a Megatron-style record is not moved by the key.
TEST(ValidationRecord, AModelHeldInBf16UnderFsdpKeepsNoMaster) {
    auto recipe = [](const nlohmann::json& r) { return precisionRecipeOf(load(r).scenario.plan); };
    nlohmann::json fsdp = record();
    fsdp["plan"]["framework"] = "NeMo AutoModel (PyTorch FSDP2)";
    fsdp["plan"]["zero"] = 3;
    EXPECT_EQ(load(fsdp).scenario.plan.precision, "fsdp");
    for (const char* key : {"torch_dtype", "model_dtype"}) {
        nlohmann::json held = fsdp;
        held["plan"][key] = "bfloat16";
        EXPECT_EQ(load(held).scenario.plan.precision, "bf16_no_master") << key;
        EXPECT_TRUE(mentions(load(held).assumptions, "no fp32 master (recipe bf16_no_master)")) << key;
        EXPECT_EQ(recipe(held).weightBytes, 2) << key;
        EXPECT_EQ(recipe(held).optimizerBytesPerParameter(), 8) << key; // fp32 moments (Transformer Engine's FusedAdam)
        held["plan"]["optimizer_dtype"] = "bf16";                       // torch.optim.Adam over bf16 parameters
        EXPECT_EQ(recipe(held).optimizerBytesPerParameter(), 4) << key;
        held["plan"].erase("optimizer_dtype");
        held["plan"][key] = "float32";
        EXPECT_EQ(load(held).scenario.plan.precision, "fsdp") << key;
        EXPECT_FALSE(mentions(load(held).assumptions, "is not a held dtype")) << key;
        held["plan"][key] = "float16"; // no recipe tessel costs: said, and read as fp32 shards
        EXPECT_EQ(load(held).scenario.plan.precision, "fsdp") << key;
        EXPECT_TRUE(mentions(load(held).assumptions, "is not a held dtype tessel costs")) << key;
    }
    nlohmann::json megatron = record();
    megatron["plan"]["torch_dtype"] = "bf16";
    EXPECT_EQ(load(megatron).scenario.plan.precision, load(record()).scenario.plan.precision);
    EXPECT_TRUE(mentions(load(megatron).assumptions, "torch_dtype \"bf16\" read under FSDP only"));
}

// Blocking launches: the plan's launch_blocking (or cuda_launch_blocking), or CUDA_LAUNCH_BLOCKING=1 written in the
// record's environment, techniques or notes (BigScience's BLOOM jobs), said; the shipped BLOOM records state it.
TEST(ValidationRecord, BlockingLaunchesFromTheKeyOrTheRecordsWords) {
    nlohmann::json r = record();
    EXPECT_FALSE(launchBlockingOf(load(r).scenario.plan.framework));
    r["plan"]["launch_blocking"] = true;
    EXPECT_TRUE(launchBlockingOf(load(r).scenario.plan.framework));
    r["plan"].erase("launch_blocking");
    r["plan"]["cuda_launch_blocking"] = true;
    EXPECT_TRUE(launchBlockingOf(load(r).scenario.plan.framework));
    r["plan"].erase("cuda_launch_blocking");
    r["notes"] = "The job script exports CUDA_LAUNCH_BLOCKING=1 to avoid hangs.";
    const ValidationCase c = load(r);
    EXPECT_TRUE(launchBlockingOf(c.scenario.plan.framework));
    EXPECT_TRUE(mentions(c.assumptions, "CUDA_LAUNCH_BLOCKING=1 read from the record's words"));
    r["notes"] = "CUDA_LAUNCH_BLOCKING=0";
    EXPECT_FALSE(launchBlockingOf(load(r).scenario.plan.framework));
    // BigScience's BLOOM jobs on A100s are read with it where the record does not say (their job scripts set it);
    // a stated false wins, and another team's DeepSpeed run, or BigScience's V100 runs of 2021, are not.
    nlohmann::json bloom = record();
    bloom["source"] = "BigScience Workshop 2022, 'BLOOM: A 176B-Parameter Open-Access Multilingual Language Model'";
    bloom["plan"]["framework"] = "Megatron-DeepSpeed";
    const ValidationCase bc = load(bloom);
    EXPECT_TRUE(launchBlockingOf(bc.scenario.plan.framework));
    EXPECT_TRUE(mentions(bc.assumptions, "CUDA_LAUNCH_BLOCKING=1 as BigScience's A100 jobs ran"));
    bloom["plan"]["launch_blocking"] = false;
    EXPECT_FALSE(launchBlockingOf(load(bloom).scenario.plan.framework));
    bloom["plan"].erase("launch_blocking");
    bloom["system"]["gpu"] = "Tesla V100-SXM2-32GB";
    bloom["system"]["precision"] = "fp16";
    EXPECT_FALSE(launchBlockingOf(load(bloom).scenario.plan.framework));
    nlohmann::json other = record();
    other["plan"]["framework"] = "Megatron-DeepSpeed";
    EXPECT_FALSE(launchBlockingOf(load(other).scenario.plan.framework));
    // A BLOOM model trained elsewhere: its pre-training under DeepSpeed's pipeline is BigScience's, a fine-tune without
    // a pipeline is not.
    other["model"]["name"] = "BLOOM-7B1";
    EXPECT_TRUE(launchBlockingOf(load(other).scenario.plan.framework)); // the fixture's pp 2
    other["plan"]["pp"] = 1;
    other["plan"].erase("vpp");
    EXPECT_FALSE(launchBlockingOf(load(other).scenario.plan.framework));
    // A value that is neither true nor false is said and read as asynchronous launches.
    other["plan"]["launch_blocking"] = "sometimes";
    const ValidationCase odd = load(other);
    EXPECT_FALSE(launchBlockingOf(odd.scenario.plan.framework));
    EXPECT_TRUE(mentions(odd.assumptions, "launch_blocking \"sometimes\" is neither true nor false"));
    // The BLOOM set states it, and its layers carry the host's time.
    const std::string shared = defaultValidationFile();
    for (const auto& rec : loadValidationFile(shared.substr(0, shared.rfind('/') + 1) + "check_bigscience_bloom.json")) {
        ASSERT_TRUE(rec.validationCase) << rec.id;
        const Scenario& sc = rec.validationCase->scenario;
        EXPECT_TRUE(launchBlockingOf(sc.plan.framework)) << rec.id;
        EXPECT_GT(layerCompute(sc.model, sc.cluster, sc.plan, precisionRecipeOf(sc.plan)).launchHostSeconds, 2e-3) << rec.id;
    }
}
} // namespace
} // namespace tessel::sim
