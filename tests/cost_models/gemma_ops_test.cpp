// Gemma's own elementwise ops: its embedding times sqrt(hidden) (embedding_scale) and Gemma 2's tanh soft-capping
// (attention_softcap, logit_softcap): the passes each way, what each keeps for the backward, and where nothing is
// added. Cases checked by hand.
#include "compute_support.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/memory.hpp"
#include "tessel/cost/model.hpp"

#include <gtest/gtest.h>

namespace tessel {
namespace {

using test::findOp;
using test::forwardOpNamed;

// The compute tests' model (hidden 1024, 16 heads of 64, vocabulary 51200, sequence 2048, micro-batch 2) at tp 2 x
// pp 2 x dp 2, 16-bit.
struct Case : test::Tp4Case {
    Case() {
        p.tp = 2;
        p.pp = 2;
        p.globalBatch = 16;
    }
    PrecisionRecipe recipe() const { return precisionRecipeOf(p); }
};

// divide, tanh, multiply: each reads and writes every logit (6e); backward 7e. T = 2 x 2048 tokens, V / tp = 25600.
TEST(Softcap, LogitCapIsThreeEagerPassesOverTheRanksLogits) {
    Case k;
    const BlockCompute plain = headCompute(k.m, k.c, k.p, k.recipe());
    EXPECT_EQ(findOp(plain, "logit_softcap"), nullptr);
    k.m.logitSoftcap = 30.0;
    const BlockCompute capped = headCompute(k.m, k.c, k.p, k.recipe());
    const OpCost& cap = forwardOpNamed(capped, "logit_softcap");
    const double logits = 4096.0 * 25600.0;
    EXPECT_DOUBLE_EQ(cap.bytes, 6.0 * 2.0 * logits);
    EXPECT_DOUBLE_EQ(cap.backwardByteFactor, 7.0 / 6.0);
    EXPECT_DOUBLE_EQ(cap.flops, 0.0);
    // Memory-bound: it adds its own time forward and 7/6 of it backward (the GEMMs' sustained share moves a little
    // with the block's duty, so within a percent of the head's time).
    EXPECT_NEAR(capped.forward.seconds - plain.forward.seconds, cap.seconds, 0.01 * plain.forward.seconds);
    EXPECT_NEAR(capped.backward().seconds - plain.backward().seconds, 7.0 / 6.0 * cap.seconds, 0.01 * plain.backward().seconds);
    EXPECT_DOUBLE_EQ(capped.forward.modelFlops, plain.forward.modelFlops);
    // Liger's fused linear cross-entropy caps inside its kernel: no pass of its own.
    k.p.framework.crossEntropy = "fused_linear";
    EXPECT_EQ(findOp(headCompute(k.m, k.c, k.p, k.recipe()), "logit_softcap"), nullptr);
}

// Unfused attention: the same three ops over every score, b x heads/tp x s x s = 2 x 8 x 2048 x 2048, part of the
// attention core (selective recompute reruns it). A FlashAttention kernel that takes softcap computes the tanh on its
// own scores: no op.
TEST(Softcap, AttentionCapIsThreeEagerPassesOverTheScoresUnfusedOnly) {
    Case k;
    k.p.flashAttention = false;
    k.p.recompute = Recompute::Selective;
    const BlockCompute plain = layerCompute(k.m, k.c, k.p, k.recipe());
    k.m.attentionSoftcap = 50.0;
    const BlockCompute capped = layerCompute(k.m, k.c, k.p, k.recipe());
    const OpCost& cap = forwardOpNamed(capped, "attention_softcap");
    const double scores = 2.0 * 8.0 * 2048.0 * 2048.0;
    EXPECT_DOUBLE_EQ(cap.bytes, 6.0 * 2.0 * scores);
    EXPECT_GT(capped.recompute.seconds - plain.recompute.seconds, 0.99 * cap.seconds);
    k.p.flashAttention = true;
    EXPECT_EQ(findOp(layerCompute(k.m, k.c, k.p, k.recipe()), "attention_softcap"), nullptr);
}

// What each keeps: the tanh output, 16-bit, the size of what it capped. The last stage under 1F1B holds one micro-batch's
// head state at a time, so the logits' cap adds 2 x T x V/tp there and nowhere else; the scores' cap adds 2 x scores to
// a layer's activations without recompute, none with flash.
TEST(Softcap, EachCapKeepsItsTanhOutputForTheBackward) {
    Case k;
    const auto plain = predictMemory(k.m, k.c, k.p);
    ModelConfig logits = k.m;
    logits.logitSoftcap = 30.0;
    const auto capped = predictMemory(logits, k.c, k.p);
    EXPECT_DOUBLE_EQ(capped.stages[1].other.logitsLossBytes - plain.stages[1].other.logitsLossBytes, 2.0 * 4096.0 * 25600.0);
    EXPECT_DOUBLE_EQ(capped.stages[0].other.logitsLossBytes, plain.stages[0].other.logitsLossBytes);

    ModelConfig scores = k.m;
    scores.attentionSoftcap = 50.0;
    k.p.flashAttention = false;
    const double perScore = layerActivationBytesNoRecompute(scores, k.p, k.recipe()) -
                            layerActivationBytesNoRecompute(k.m, k.p, k.recipe());
    EXPECT_DOUBLE_EQ(perScore, 2.0 * 2.0 * 8.0 * 2048.0 * 2048.0);
    k.p.flashAttention = true;
    EXPECT_DOUBLE_EQ(layerActivationBytesNoRecompute(scores, k.p, k.recipe()),
                     layerActivationBytesNoRecompute(k.m, k.p, k.recipe()));
}

// Which fused kernel a soft-capping model runs: on an H100, whose default is cuDNN's (no softcap), "auto" takes
// flash2; a model without the cap keeps cuDNN. Named, cuDNN is refused at attention_kernel; on a B200, whose presets
// hold cuDNN only, "auto" is refused at flash_attention; unfused attention runs anywhere.
TEST(Softcap, AFusedKernelWithoutSoftcapIsRefusedAndAutoPicksOneWithIt) {
    const ModelConfig gemma = test::preset("gemma2-9b");
    ModelConfig plain = gemma;
    plain.attentionSoftcap = 0.0;
    const ClusterConfig h100 = test::clusterPreset("dgx-h100-80g"), b200 = test::clusterPreset("dgx-b200");
    Plan p;
    p.dp = 8;
    p.globalBatch = 64;
    EXPECT_EQ(attentionKernelOf(gemma, p, h100.gpu), "flash2");
    EXPECT_EQ(attentionKernelOf(plain, p, h100.gpu), "cudnn");
    auto problemAt = [&](const ModelConfig& m, const ClusterConfig& c, const Plan& q) {
        ProblemList problems;
        validatePlan(m, c, q, "/plan", problems);
        for (const auto& item : problems.items())
            if (item.message.find("soft-caps") != std::string::npos) return item.where;
        return std::string();
    };
    EXPECT_EQ(problemAt(gemma, h100, p), "");
    EXPECT_EQ(problemAt(gemma, b200, p), "/plan/flash_attention");
    p.attentionKernel = "cudnn";
    EXPECT_EQ(problemAt(gemma, h100, p), "/plan/attention_kernel");
    EXPECT_EQ(problemAt(plain, h100, p), "");
    p.attentionKernel = "flash3";
    EXPECT_EQ(problemAt(gemma, h100, p), "");
    p.attentionKernel = "auto";
    p.flashAttention = false;
    EXPECT_EQ(problemAt(gemma, b200, p), "");
}

// The embedding times sqrt(hidden): one pass over the rank's rows (T x h, read and written, 16-bit) forward and one
// backward, never rerun by a recompute, nothing kept; the first stage's memory does not move.
TEST(EmbeddingScale, IsOnePassEachWayAndKeepsNothing) {
    Case k;
    k.p.recompute = Recompute::Full;
    const BlockCompute plain = embeddingCompute(k.m, k.c, k.p, k.recipe());
    const auto before = predictMemory(k.m, k.c, k.p);
    k.m.embeddingScale = true;
    const BlockCompute scaled = embeddingCompute(k.m, k.c, k.p, k.recipe());
    const OpCost& scale = forwardOpNamed(scaled, "embedding_scale");
    EXPECT_DOUBLE_EQ(scale.bytes, 2.0 * 2.0 * 4096.0 * 1024.0);
    EXPECT_DOUBLE_EQ(scaled.forward.seconds - plain.forward.seconds, scale.seconds);
    EXPECT_DOUBLE_EQ(scaled.backwardInput.seconds - plain.backwardInput.seconds, scale.seconds);
    EXPECT_DOUBLE_EQ(scaled.recompute.seconds, plain.recompute.seconds);
    const auto after = predictMemory(k.m, k.c, k.p);
    EXPECT_DOUBLE_EQ(after.stages[0].activationsBytes, before.stages[0].activationsBytes);
    EXPECT_TRUE(parseModel(modelToJson(k.m)).embeddingScale);
}

// The model file's keys: written only when set, read back; 0 is none, a negative cap a problem at its key.
TEST(Softcap, ModelKeysRoundTripAndANegativeCapIsAProblemAtItsKey) {
    ModelConfig m = test::megatronStyleModel(4, 1024, 16, 51200, 2048);
    EXPECT_FALSE(modelToJson(m).contains("logit_softcap"));
    m.attentionSoftcap = 50.0;
    m.logitSoftcap = 30.0;
    const ModelConfig back = parseModel(modelToJson(m));
    EXPECT_DOUBLE_EQ(back.attentionSoftcap, 50.0);
    EXPECT_DOUBLE_EQ(back.logitSoftcap, 30.0);
    nlohmann::json bad = modelToJson(m);
    bad["logit_softcap"] = -1.0;
    ProblemList problems;
    parseModel(bad, "", problems);
    ASSERT_FALSE(problems.empty());
    EXPECT_EQ(problems.items()[0].where, "/logit_softcap");
}

} // namespace
} // namespace tessel
