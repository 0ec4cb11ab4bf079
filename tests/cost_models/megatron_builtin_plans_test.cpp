// Model state (weights, gradients, optimizer) per GPU of every built-in plan, first and last pipeline stage,
// against Megatron-LM's report_theoretical_memory (megatron/training/theoretical_memory_usage.py).
#include "test_support.hpp"

#include "tessel/cost/memory.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

namespace tessel {
namespace {

namespace fs = std::filesystem;

// Parameters of one rank of `stage` as compute_weight_and_optimizer_memory counts them, split into what the
// distributed optimizer shards over dp (dense) and over the expert data-parallel group (experts).
struct MegatronShard {
    double dense = 0.0;
    double expert = 0.0;
};

// Megatron-LM's formula (GQA, SwiGLU, RMSNorm/LayerNorm, MoE; no biases, no learned positions, no router):
//   self_attn = 2 h^2 (1 + g/a) q/h;  layer = 2 h (f x 3/2 if swiglu + norm) + self_attn, the MoE MLP with E
//   experts of f_moe; block = layers + final norm; embedding = h V_padded.
// Most loaded shard (stage 0): (block / pp + embedding) / tp, plus the output layer when untied and pp = 1.
// Extended here, in the formula's terms, to
//  - the last stage: (block / pp + embedding) / tp as well: it holds the output layer (untied) or Megatron's
//    copy of the tied word embedding (pp > 1), the same h V_padded;
//  - expert parallelism: the formula divides experts by tp only (it predates EP); experts are split over ep;
//  - what Megatron allocates and the formula leaves out: linear biases (--add-bias-linear; column-parallel
//    biases split over tp, row-parallel ones whole on every rank) and learned absolute positions (s h, on
//    stage 0, not split). They are 0.9% of GPT-3 175B's first stage and 4.5% of the 4-layer test model's.
MegatronShard megatronShard(const ModelConfig& m, const Plan& p) {
    const double h = static_cast<double>(m.hidden);
    const double headDim = static_cast<double>(m.headDim > 0 ? m.headDim : m.hidden / m.heads);
    const double ratio = headDim * m.heads / h;
    const double selfAttn = 2.0 * h * h * (1.0 + static_cast<double>(m.kvHeads) / m.heads) * ratio;
    const double gated = m.activation == Activation::Swiglu ? 1.5 : 1.0;
    const double norm = m.norm == NormKind::RmsNorm ? 1.0 : 2.0;
    const double embedding = h * static_cast<double>(paddedVocab(m, p));
    double denseLayer = 2.0 * h * norm + selfAttn, expertLayer = 0.0;
    if (m.moe) expertLayer = 2.0 * h * static_cast<double>(m.moe->expertFfnHidden) * m.moe->experts * gated;
    else denseLayer += 2.0 * h * static_cast<double>(m.ffnHidden) * gated;
    const double block = (denseLayer + expertLayer) * m.layers + norm * h;
    const double expertBlock = expertLayer * m.layers;
    MegatronShard s;
    s.expert = expertBlock / p.pp / (p.tp * p.ep);
    s.dense = ((block - expertBlock) / p.pp + embedding) / p.tp;
    if (!m.tiedEmbeddings && p.pp == 1) s.dense += embedding / p.tp;
    return s;
}

// The omitted parameters above, on one rank of `stage`.
double megatronOmittedParameters(const ModelConfig& m, const Plan& p, int stage) {
    const double h = static_cast<double>(m.hidden);
    const double headDim = static_cast<double>(m.headDim > 0 ? m.headDim : m.hidden / m.heads);
    const double qkv = headDim * (m.heads + 2.0 * m.kvHeads);
    const double gated = m.activation == Activation::Swiglu ? 2.0 : 1.0;
    double perLayer = 0.0;
    if (m.linearBias) perLayer = (qkv + gated * static_cast<double>(m.ffnHidden)) / p.tp + 2.0 * h;
    else if (m.qkvBias) perLayer = qkv / p.tp;
    double omitted = perLayer * m.layers / p.pp;
    if (stage == 0 && m.position == PositionEmbedding::Learned) omitted += static_cast<double>(m.seqLen) * h;
    return omitted;
}

// num_bytes_per_parameter: 18 without the distributed optimizer, 6 + 12 / dp with it, written in the recipe's
// terms so the CPU recipe (fp64 weights, gradients and Adam state) is held to the same count; experts shard
// their optimizer over the expert data-parallel group (dp / ep).
double megatronModelStateBytes(const ModelConfig& m, const Plan& p, int stage) {
    const PrecisionRecipe& r = *findPrecisionRecipe(p.precision);
    MegatronShard s = megatronShard(m, p);
    s.dense += megatronOmittedParameters(m, p, stage);
    const bool distributed = p.zeroStage >= 1;
    const double kept = r.weightBytes + r.gradBytes;
    const double opt = r.optimizerBytesPerParameter();
    return s.dense * (kept + (distributed ? opt / p.dp : opt)) + s.expert * (kept + (distributed ? opt / (p.dp / p.ep) : opt));
}

TEST(MegatronTheoreticalMemory, HandCheckOfTheReferenceOnGpt3) {
    // GPT-3 175B, TP8 PP8, no distributed optimizer: 96 layers x 12 h^2 (+ 4h norms) = 173.95e9; / 8 + 12288 x
    // 51200 = 22.37e9; / 8 = 2.797e9 parameters x 18 B = 50.34 GB (the figure Megatron prints, in bytes).
    ModelConfig m = test::megatronStyleModel(96, 12288, 96, 50257, 2048);
    Plan p;
    p.tp = 8;
    p.pp = 8;
    p.dp = 16;
    p.globalBatch = 1536;
    EXPECT_NEAR(megatronModelStateBytes(m, p, 0) / 1e9, 50.34, 0.01);
}

TEST(MegatronTheoreticalMemory, EveryBuiltInPlanFirstAndLastStageMatches) {
    const fs::path dir = fs::path(TESSEL_SCENARIO_DIR) / "plans";
    std::set<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".json") files.insert(e.path());
    ASSERT_GE(files.size(), 5u);
    for (const fs::path& f : files) {
        const Scenario sc = loadScenarioFile(f);
        const MemoryReport mem = predictMemory(sc.model, sc.cluster, sc.plan);
        ASSERT_EQ(mem.stages.size(), static_cast<size_t>(sc.plan.pp));
        for (int stage : {0, sc.plan.pp - 1}) {
            const double megatron = megatronModelStateBytes(sc.model, sc.plan, stage);
            const StageMemory& st = mem.stages[static_cast<size_t>(stage)];
            const double tessel = st.weightsBytes + st.gradsBytes + st.optimizerBytes;
            // Known differences, all small: tessel keeps norms whole on every TP rank (Megatron divides them
            // by tp), puts the final norm on the last stage only and counts the MoE router. Today every
            // stage is within 0.06%; the bound is 3%, this guard 0.5%.
            EXPECT_LT(test::relDiff(tessel, megatron), 0.005)
                << f.filename() << " stage " << stage << ": tessel " << tessel / 1e9 << " GB, Megatron "
                << megatron / 1e9 << " GB";
        }
    }
}

} // namespace
} // namespace tessel
