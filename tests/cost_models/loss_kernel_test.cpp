// The fused linear cross-entropy (Liger-Kernel, cross_entropy "fused_linear"): its chunk of tokens, what the last
// stage keeps for it, where the output layer's GEMMs run, and the plans it cannot run. Cases checked by hand.
#include "test_support.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/parameters.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace tessel {
namespace {

TEST(FusedLinearLoss, ChunkIsLigersPowerOfTwoAtMostTheTokens) {
    // Liger's own example (fused_linear_cross_entropy.py): BT = 4096 x 4, V = 32000, H = 4096 -> inc_factor
    // ceil(32000 / 4096) = 8, chunk ceil(16384 / 8) = 2048.
    EXPECT_EQ(kernel_cost::fusedLinearCrossEntropyChunkTokens(16384, 32000, 4096), 2048);
    // Llama 3 8B, 4 sequences of 8192: ceil(128256 / 4096) = 32, 32768 / 32 = 1024.
    EXPECT_EQ(kernel_cost::fusedLinearCrossEntropyChunkTokens(32768, 128256, 4096), 1024);
    // Not a power of two: ceil(100 / 8) = 13 -> 16.
    EXPECT_EQ(kernel_cost::fusedLinearCrossEntropyChunkTokens(100, 32000, 4096), 16);
    // A vocabulary below the hidden size: one chunk, the tokens themselves (next_pow2(3) = 4 tokens of 3).
    EXPECT_EQ(kernel_cost::fusedLinearCrossEntropyChunkTokens(3, 100, 4096), 3);
    // The loss kernel: each logit read twice and written once, 3e T V; 4 B of loss a token; and the zeroed input and
    // weight gradients, e (T + V) h.
    EXPECT_DOUBLE_EQ(kernel_cost::fusedLinearCrossEntropyBytes(10, 100, 8, 2), 3.0 * 2 * 10 * 100 + 4.0 * 10 + 2.0 * 110 * 8);
}

Plan llamaFsdp(const char* loss) {
    Plan p;
    p.dp = 8;
    p.microBatch = 4;
    p.globalBatch = 32;
    p.zeroStage = 3;
    p.recompute = Recompute::Full;
    p.precision = "fsdp";
    p.framework.name = "fsdp";
    p.framework.crossEntropy = loss;
    return p;
}

TEST(FusedLinearLoss, TheLastStageKeepsTheGradientsNotTheLogits) {
    // Llama 3 8B, 4 x 8192 tokens a micro-batch: torch.compile's loss keeps the bf16 logits and a bf16 gradient,
    // 4 B x 32768 x 128256 = 16.8 GB; the fused linear loss keeps the input gradient (2 x 32768 x 4096) and the
    // weight gradient (2 x 128256 x 4096) its forward computed, with one chunk of 1024 tokens' logits and an fp32
    // loss a token as the forward's transients: 1.58 GB.
    const ModelConfig llama = test::preset("llama3-8b");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const double T = 32768.0, V = 128256.0, h = 4096.0;
    const double compiled = predictMemory(llama, c, llamaFsdp("compiled")).stages.back().lossBackwardBytes;
    const double fused = predictMemory(llama, c, llamaFsdp("fused_linear")).stages.back().lossBackwardBytes;
    EXPECT_DOUBLE_EQ(compiled, 4.0 * T * V);
    EXPECT_DOUBLE_EQ(fused, 2.0 * T * h + 2.0 * V * h + 2.0 * 1024 * V + 4.0 * T);
    // Under autocast over fp32 parameters (amp) the final norm's output and the head's weight are fp32, and so are
    // the gradients Liger zeroes like them; the chunk's logits are the autocast matmul's bf16.
    Plan amp = llamaFsdp("fused_linear");
    amp.precision = "amp";
    const double autocast = predictMemory(llama, c, amp).stages.back().lossBackwardBytes;
    EXPECT_DOUBLE_EQ(autocast, 4.0 * T * h + 4.0 * V * h + 2.0 * 1024 * V + 4.0 * T);
}

TEST(FusedLinearLoss, TheOutputLayersGradientsRunInTheForwardAtTheSameWork) {
    // The same three GEMMs as any loss's (2 T V h forward, 4 T V h backward), all in the forward; the backward has no
    // GEMM left. MFU's model FLOPs follow the convention, not where the kernel puts them.
    const ModelConfig llama = test::preset("llama3-8b");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const Plan compiledPlan = llamaFsdp("compiled"), fusedPlan = llamaFsdp("fused_linear");
    const BlockCompute compiled = headCompute(llama, c, compiledPlan, precisionRecipeOf(compiledPlan));
    const BlockCompute fused = headCompute(llama, c, fusedPlan, precisionRecipeOf(fusedPlan));
    const double gemm = 2.0 * 32768.0 * 128256.0 * 4096.0;
    EXPECT_DOUBLE_EQ(compiled.forward.flops, gemm);
    EXPECT_DOUBLE_EQ(compiled.backward().flops, 2.0 * gemm);
    EXPECT_NEAR(fused.forward.flops, 3.0 * gemm, 1e-9 * gemm);
    EXPECT_DOUBLE_EQ(fused.backward().flops, 0.0);
    EXPECT_GT(fused.forward.seconds, 2.5 * fused.backward().seconds + compiled.forward.seconds);
    EXPECT_DOUBLE_EQ(modelFlopsPerStep(llama, fusedPlan), modelFlopsPerStep(llama, compiledPlan));
    // The weight gradient's GEMM per chunk: V x h x 1024 (its k the chunk), accumulating into what it reads back.
    const auto wgrad = std::find_if(fused.forwardOps.begin(), fused.forwardOps.end(),
                                    [](const OpCost& op) { return op.name == "lm_head_wgrad"; });
    ASSERT_NE(wgrad, fused.forwardOps.end());
    EXPECT_EQ(wgrad->m, 128256);
    EXPECT_EQ(wgrad->k, 1024);
    EXPECT_TRUE(wgrad->noBackward);
}

// A TP plan's ends (loss_parallel, vocab_parallel_embedding). Llama 3 8B at tp 4 with sequence parallelism, one
// micro-batch of 4 x 8192 tokens, torch.compile's loss (4 B a logit: the bf16 logits and their bf16 gradient). With
// the loss over each rank's vocabulary shard the last stage keeps 4 B x 32768 x 128256 / 4 = 4.20 GB; with the logits
// gathered to every rank (DTensor's ColwiseParallel(output_layouts=Replicate())) all of them, 16.8 GB, and the loss's
// kernels read and write four times the bytes; the LM head's GEMM is still the rank's V / 4 columns. The embedding
// whole on every rank adds its other three quarters, 128256 x 4096 x 3/4, to the rank's parameters and their state.
TEST(TpPlanEnds, GatheredLogitsAndAWholeEmbeddingByHand) {
    const ModelConfig llama = test::preset("llama3-8b");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    Plan p = test::plan3d(4, 1, 1, 4, 4, "torchtitan", "2026");
    p.sequenceParallel = true;
    p.recompute = Recompute::Full;
    p.framework.crossEntropy = "compiled";
    const double T = 32768.0, V = 128256.0, h = 4096.0;
    const auto split = predictMemory(llama, c, p).stages.back();
    EXPECT_DOUBLE_EQ(split.other.logitsLossBytes, 4.0 * T * V / 4.0);
    Plan gathered = p;
    gathered.framework.lossParallel = false;
    const auto whole = predictMemory(llama, c, gathered).stages.back();
    EXPECT_DOUBLE_EQ(whole.other.logitsLossBytes, 4.0 * T * V);
    EXPECT_DOUBLE_EQ(whole.weightsBytes, split.weightsBytes); // the head stays column-parallel
    auto opBytes = [&](const Plan& q, const std::string& name) {
        const BlockCompute b = headCompute(llama, c, q, precisionRecipeOf(q));
        for (const OpCost& op : b.forwardOps)
            if (op.name == name) return op.bytes;
        ADD_FAILURE() << name;
        return 0.0;
    };
    EXPECT_DOUBLE_EQ(opBytes(gathered, "cross_entropy"), 4.0 * opBytes(p, "cross_entropy"));
    const BlockCompute headSplit = headCompute(llama, c, p, precisionRecipeOf(p));
    const BlockCompute headWhole = headCompute(llama, c, gathered, precisionRecipeOf(gathered));
    EXPECT_DOUBLE_EQ(headWhole.forward.flops, headSplit.forward.flops); // 2 T (V / 4) h either way
    // Stated true, or tp 1, nothing moves.
    gathered.framework.lossParallel = true;
    EXPECT_DOUBLE_EQ(predictMemory(llama, c, gathered).stages.back().other.logitsLossBytes, split.other.logitsLossBytes);
    Plan one = test::plan3d(1, 1, 1, 1, 1, "torchtitan", "2026");
    one.framework.crossEntropy = "compiled";
    Plan oneWhole = one;
    oneWhole.framework.lossParallel = false;
    EXPECT_DOUBLE_EQ(predictMemory(llama, c, oneWhole).stages.back().other.logitsLossBytes,
                     predictMemory(llama, c, one).stages.back().other.logitsLossBytes);
    // The embedding: the rank holds V h / 4 parameters of it, or V h; bf16 weights beside fp32 master, gradients and
    // moments (the megatron recipe, bytesPerParameter: 2 + 4 + 4 + 4 + 4 = 18 B, no ZeRO).
    Plan embWhole = p;
    embWhole.framework.vocabParallelEmbedding = false;
    const auto first = predictMemory(llama, c, p).stages.front();
    const auto firstWhole = predictMemory(llama, c, embWhole).stages.front();
    const double extra = V * h * 3.0 / 4.0;
    const double state = precisionRecipeOf(p).bytesPerParameter();
    EXPECT_NEAR((firstWhole.weightsBytes + firstWhole.gradsBytes + firstWhole.optimizerBytes) -
                    (first.weightsBytes + first.gradsBytes + first.optimizerBytes),
                extra * state, 1.0);
    EXPECT_DOUBLE_EQ(embeddingParameters(llama, embWhole), V * h);
    EXPECT_DOUBLE_EQ(embeddingParameters(llama, p), V * h / 4.0);
    // A tied embedding is the column-parallel head's weight: whole on every rank it cannot be, refused at the key.
    ModelConfig tied = llama;
    tied.tiedEmbeddings = true;
    auto pointersOf = [&](const Plan& q) {
        ProblemList problems;
        validatePlan(tied, c, q, "/plan", problems);
        std::vector<std::string> where;
        for (const auto& item : problems.items()) where.push_back(item.where);
        return where;
    };
    auto names = [](const std::vector<std::string>& v) {
        return std::count(v.begin(), v.end(), std::string("/plan/vocab_parallel_embedding"));
    };
    EXPECT_EQ(names(pointersOf(embWhole)), 1);
    EXPECT_EQ(names(pointersOf(p)), 0); // split, the tied head and embedding agree
}

// torchtitan's fp32 eager loss, cross_entropy(pred.float()), at its backward: the fused kernels keep the log-softmax
// output and make nll_loss's dense gradient and log_softmax_backward's output, 12 B a logit (Llama 3 8B, 4 x 8192
// tokens: 50.4 GB); under loss_parallel at tp 2 DTensor's _nll_loss_and_log_softmax_backward makes the zero-filled
// gradient, exp(output), their sum and its product over each rank's half of the vocabulary, three at once beside the
// saved output: 16 B a logit of the shard, 33.6 GB.
TEST(EagerLossFp32, DTensorLossParallelHoldsThreeTemporariesBesideTheSavedOutput) {
    const ModelConfig llama = test::preset("llama3-8b");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const double T = 32768.0, V = 128256.0;
    Plan p = llamaFsdp("eager");
    p.framework.name = "torchtitan";
    EXPECT_DOUBLE_EQ(predictMemory(llama, c, p).stages.back().lossBackwardBytes, 12.0 * T * V);
    p.tp = 2;
    p.dp = 4;
    p.sequenceParallel = true;
    EXPECT_DOUBLE_EQ(predictMemory(llama, c, p).stages.back().lossBackwardBytes, 16.0 * T * V / 2.0);
    p.framework.lossParallel = false; // the logits gathered: the fused kernels over the whole vocabulary
    EXPECT_DOUBLE_EQ(predictMemory(llama, c, p).stages.back().lossBackwardBytes, 12.0 * T * V);
}

// cross_entropy over the 16-bit logits without an upcast (eager_16bit), Llama 3 8B, 4 x 8192 tokens: log_softmax's
// bf16 output kept, nll_loss's dense gradient and the input gradient at the backward, and the logits themselves where
// the trainer still holds them: 8 B a logit, 33.6 GB (6 B, 25.2 GB, where it does not), where the compiled kernels
// keep 4 and the fp32 eager loss 12. Its kernels move 4 x 2 B a logit forward (log_softmax reads a row three times
// and writes it) and 5 x 2 B backward.
TEST(EagerLoss16Bit, KeepsFourTensorsOfTheLogitsAtItsBackward) {
    const ModelConfig llama = test::preset("llama3-8b");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const double T = 32768.0, V = 128256.0;
    auto lossMemory = [&](const char* kind, bool held = true) {
        Plan p = llamaFsdp(kind);
        p.framework.logitsHeldThroughBackward = held;
        return predictMemory(llama, c, p).stages.back().lossBackwardBytes;
    };
    EXPECT_DOUBLE_EQ(lossMemory("eager_16bit"), 8.0 * T * V);
    EXPECT_DOUBLE_EQ(lossMemory("eager_16bit", false), 6.0 * T * V);
    EXPECT_DOUBLE_EQ(lossMemory("compiled", false), 4.0 * T * V); // the loss saves the logits: held or not, 4 B
    EXPECT_DOUBLE_EQ(lossMemory("compiled"), 4.0 * T * V);
    const Plan p = llamaFsdp("eager_16bit");
    const BlockCompute head = headCompute(llama, c, p, precisionRecipeOf(p));
    const auto ce = std::find_if(head.forwardOps.begin(), head.forwardOps.end(),
                                 [](const OpCost& op) { return op.name == "cross_entropy"; });
    ASSERT_NE(ce, head.forwardOps.end());
    EXPECT_DOUBLE_EQ(ce->bytes, 8.0 * T * V);
    EXPECT_DOUBLE_EQ(ce->backwardByteFactor, 5.0 / 4.0);
}

TEST(UnfusedMegatronLoss, EachStepItsOwnKernelAtTheFusedLossMemory) {
    // Megatron-LM without --cross-entropy-loss-fusion (megatron/core/tensor_parallel/cross_entropy.py): forward the
    // fp32 copy of bf16 logits (2 + 4), the row max (4), the max subtracted in place (8), exp in place (8), the row
    // sum (4), the division in place (8): 38 B a logit; backward the in-place multiply (8) and the cast back to bf16
    // (4 + 2): 14 B. The fused kernels' 10 + 20; the memory the same, the fp32 softmax beside the logits.
    const ModelConfig llama = test::preset("llama3-8b");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    const double T = 32768.0, V = 128256.0;
    EXPECT_DOUBLE_EQ(kernel_cost::unfusedCrossEntropyBytes(10, 100, 2), 38.0 * 1000);
    EXPECT_DOUBLE_EQ(kernel_cost::unfusedCrossEntropyBackwardFactor(2), 14.0 / 38.0);
    // fp32 logits: .float() copies nothing, and nothing is cast back (32 and 8 B).
    EXPECT_DOUBLE_EQ(kernel_cost::unfusedCrossEntropyBytes(10, 100, 4), 32.0 * 1000);
    EXPECT_DOUBLE_EQ(kernel_cost::unfusedCrossEntropyBackwardFactor(4), 8.0 / 32.0);
    auto loss = [&](const char* kind) {
        Plan p = llamaFsdp(kind);
        p.framework.name = "megatron";
        p.zeroStage = 1;
        p.precision = "megatron";
        const BlockCompute head = headCompute(llama, c, p, precisionRecipeOf(p));
        const auto ce = std::find_if(head.forwardOps.begin(), head.forwardOps.end(),
                                     [](const OpCost& op) { return op.name == "cross_entropy"; });
        if (ce == head.forwardOps.end()) {
            ADD_FAILURE() << kind << ": no cross_entropy op";
            return std::make_pair(OpCost{}, 0.0);
        }
        return std::make_pair(*ce, predictMemory(llama, c, p).stages.back().other.logitsLossBytes);
    };
    const auto [unfused, unfusedMemory] = loss("unfused");
    const auto [fused, fusedMemory] = loss("fused");
    EXPECT_DOUBLE_EQ(unfused.bytes, 38.0 * T * V);
    EXPECT_DOUBLE_EQ(unfused.bytes * unfused.backwardByteFactor, 14.0 * T * V);
    EXPECT_DOUBLE_EQ(fused.bytes, 10.0 * T * V);
    EXPECT_DOUBLE_EQ(fused.bytes * fused.backwardByteFactor, 20.0 * T * V);
    EXPECT_DOUBLE_EQ(unfusedMemory, fusedMemory);
    // Megatron-LM's default is the unfused one.
    Plan byDefault = llamaFsdp("fused");
    byDefault.framework.name = "megatron";
    byDefault.framework.crossEntropy.reset();
    EXPECT_EQ(crossEntropyOf(byDefault.framework), "unfused");
}

TEST(FusedLinearLoss, OverPresetsAndBatchesTheWorkIsEveryLosssAndTheChunkStaysSmall) {
    // A grid of models (tied and untied heads, vocabularies from 50k to 152k) and micro-batches: the output layer's
    // GEMM FLOPs, forward and backward together, are 6 T V h, as any loss's (the compiled one multiplies with the
    // vocabulary padded to 8, torch.compile's pad_mm, which Liger's eager matmuls do not: GPT-2's 50257 -> 50264);
    // MFU's model FLOPs are the same; the chunk's logits stay within Liger's design bound, chunk x V <= 2 (T h + V)
    // (chunk <= 2 ceil(T / ceil(V / h))).
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    for (const char* name : {"gpt2-124m", "gpt3-1.3b", "llama2-7b", "llama3-8b", "qwen3-8b"}) {
        const ModelConfig model = test::preset(name);
        for (int mb : {1, 2, 4}) {
            Plan compiledPlan = llamaFsdp("compiled"), fusedPlan = llamaFsdp("fused_linear");
            compiledPlan.microBatch = fusedPlan.microBatch = mb;
            compiledPlan.globalBatch = fusedPlan.globalBatch = 8 * mb;
            const BlockCompute compiled = headCompute(model, c, compiledPlan, precisionRecipeOf(compiledPlan));
            const BlockCompute fused = headCompute(model, c, fusedPlan, precisionRecipeOf(fusedPlan));
            const int64_t T = static_cast<int64_t>(mb) * model.seqLen;
            const double work = 6.0 * static_cast<double>(T) * model.hidden * model.vocab;
            const double padded = 6.0 * static_cast<double>(T) * model.hidden * ((model.vocab + 7) / 8 * 8);
            EXPECT_NEAR(fused.forward.flops + fused.backward().flops, work, 1e-9 * work) << name << " mb " << mb;
            EXPECT_NEAR(compiled.forward.flops + compiled.backward().flops, padded, 1e-9 * padded) << name << " mb " << mb;
            EXPECT_DOUBLE_EQ(modelFlopsPerStep(model, fusedPlan), modelFlopsPerStep(model, compiledPlan)) << name;
            const int64_t chunk = kernel_cost::fusedLinearCrossEntropyChunkTokens(T, model.vocab, model.hidden);
            EXPECT_LE(chunk, T) << name;
            EXPECT_LE(static_cast<double>(chunk) * model.vocab, 2.0 * (static_cast<double>(T) * model.hidden + model.vocab))
                << name << " mb " << mb;
        }
    }
}

TEST(FusedLinearLoss, PlansItCannotRunAreRefusedAtTheirField) {
    const ModelConfig llama = test::preset("llama3-8b");
    const ClusterConfig c = test::clusterPreset("dgx-h100-80g");
    Plan p = llamaFsdp("fused_linear");
    ProblemList ok;
    validatePlan(llama, c, p, "/plan", ok);
    EXPECT_TRUE(ok.empty());
    // Tensor parallelism: Liger multiplies the whole output layer on each rank.
    p.tp = 2;
    p.dp = 4;
    ProblemList tp;
    validatePlan(llama, c, p, "/plan", tp);
    ASSERT_FALSE(tp.empty());
    EXPECT_EQ(tp.items().front().where, "/plan/cross_entropy");
    // A trainer's metrics read logits it never makes.
    p = llamaFsdp("fused_linear");
    p.framework.trainMetricLosses = 2;
    ProblemList metrics;
    validatePlan(llama, c, p, "/plan", metrics);
    ASSERT_FALSE(metrics.empty());
    EXPECT_EQ(metrics.items().front().where, "/plan/train_metric_losses");
    // The plan key reads and writes back.
    ProblemList parsed;
    const Plan read = parsePlan({{"framework", "fsdp"}, {"cross_entropy", "fused_linear"}}, "/plan", parsed);
    EXPECT_TRUE(parsed.empty());
    EXPECT_EQ(planToJson(read)["cross_entropy"], "fused_linear");
}

} // namespace
} // namespace tessel
