// Dropout's masks (dropout.hpp) and the CPU backend's dropout ops: Philox against its reference's known answers, the
// rate and scale of the masks, a mask read at coordinates (whatever the rows' split), and attention dropout against a
// reference with explicit masks and against finite differences.
#include "tessel/exec/dropout.hpp"

#include "cpu_backend_test_support.hpp"
#include "executor_support.hpp"

#include "tessel/cost/errors.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace tessel::exec::test::cpu_backend {
namespace {

// Random123's kat_vectors (the three philox4x32 10 lines: counter, key, expected output).
TEST(Dropout, PhiloxMatchesRandom123KnownAnswers) {
    const Philox4x32 zeros = philox4x32(0, 0, 0, 0, 0, 0);
    EXPECT_EQ(zeros.v[0], 0x6627e8d5u);
    EXPECT_EQ(zeros.v[1], 0xe169c58du);
    EXPECT_EQ(zeros.v[2], 0xbc57ac4cu);
    EXPECT_EQ(zeros.v[3], 0x9b00dbd8u);
    const uint32_t f = 0xffffffffu;
    const Philox4x32 ones = philox4x32(f, f, f, f, f, f);
    EXPECT_EQ(ones.v[0], 0x408f276du);
    EXPECT_EQ(ones.v[1], 0x41c83b0eu);
    EXPECT_EQ(ones.v[2], 0xa20bc7c6u);
    EXPECT_EQ(ones.v[3], 0x6d5451fdu);
    const Philox4x32 pi = philox4x32(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
    EXPECT_EQ(pi.v[0], 0xd16cfe09u);
    EXPECT_EQ(pi.v[1], 0x94fdccebu);
    EXPECT_EQ(pi.v[2], 0x5001e420u);
    EXPECT_EQ(pi.v[3], 0x24126ea1u);
}

DropoutRule rule(double p, uint64_t key = 0x1234'5678'9abc'def0ULL, uint32_t layer = 3,
                 DropoutSite site = DropoutSite::MlpOutput) {
    DropoutRule r;
    r.p = p;
    r.key = key;
    r.layer = layer;
    r.site = site;
    return r;
}

// Over 2^18 elements the dropped share is p within 5 standard deviations, and each coordinate (sequence, either
// position, head, layer, site, key) draws another mask: two masks agree on p^2 + (1 - p)^2 of the elements.
TEST(Dropout, MasksDropTheirShareAndEachCoordinateDrawsAnother) {
    for (double p : {0.1, 0.5}) {
        const DropoutRule r = rule(p);
        const int64_t n = 512;
        double dropped = 0.0;
        for (int64_t a = 0; a < n; ++a)
            for (int64_t b = 0; b < n; ++b) dropped += dropoutKeeps(r, 7, a, b) ? 0.0 : 1.0;
        const double total = static_cast<double>(n * n), sigma = std::sqrt(p * (1.0 - p) / total);
        EXPECT_NEAR(dropped / total, p, 5.0 * sigma) << p;
    }
    const DropoutRule r = rule(0.5);
    auto agreement = [&](const std::function<bool(int64_t, int64_t)>& other) {
        double same = 0.0;
        for (int64_t a = 0; a < 256; ++a)
            for (int64_t b = 0; b < 256; ++b) same += dropoutKeeps(r, 7, a, b, 2) == other(a, b) ? 1.0 : 0.0;
        return same / 65536.0;
    };
    const double sigma = 0.5 / 256.0;
    const std::pair<const char*, std::function<bool(int64_t, int64_t)>> others[] = {
        {"sequence", [&](int64_t a, int64_t b) { return dropoutKeeps(r, 8, a, b, 2); }},
        {"positions swapped", [&](int64_t a, int64_t b) { return dropoutKeeps(r, 7, b, a, 2); }},
        {"head", [&](int64_t a, int64_t b) { return dropoutKeeps(r, 7, a, b, 3); }},
        {"layer", [&](int64_t a, int64_t b) { return dropoutKeeps(rule(0.5, r.key, 4), 7, a, b, 2); }},
        {"site", [&](int64_t a, int64_t b) {
             return dropoutKeeps(rule(0.5, r.key, 3, DropoutSite::AttentionOutput), 7, a, b, 2);
         }},
        {"key", [&](int64_t a, int64_t b) { return dropoutKeeps(rule(0.5, r.key + 1), 7, a, b, 2); }}};
    for (const auto& [what, other] : others) EXPECT_NEAR(agreement(other), 0.5, 5.0 * sigma) << what;
    EXPECT_EQ(agreement([&](int64_t a, int64_t b) { return dropoutKeeps(r, 7, a, b, 2); }), 1.0);
}

// Four neighbours share a draw (word b mod 4 of group b / 4), and the walk that keeps the last draw reads the same
// masks in any order: keys in order, backwards, and jumping between groups.
TEST(Dropout, NeighboursShareADrawAndTheWalkReadsTheSameMasks) {
    const DropoutRule r = rule(0.5);
    for (int64_t b = 0; b < 16; ++b)
        EXPECT_EQ(dropoutKeeps(r, 2, 9, b, 1), dropoutKeepsWord(r, dropoutDraw(r, 2, 9, b / 4, 1).v[b % 4])) << b;
    std::vector<int64_t> order;
    for (int64_t b = 0; b < 40; ++b) order.push_back(b);
    for (int64_t b = 39; b >= 0; --b) order.push_back(b);
    for (int64_t b : {5, 17, 6, 4, 33, 18, 7, 0}) order.push_back(b);
    DropoutWalk walk;
    for (int64_t b : order) EXPECT_EQ(walk.keeps(r, 2, 9, b, 1), dropoutKeeps(r, 2, 9, b, 1)) << b;
}

TEST(Dropout, FactorIsInvertedDropoutAndOneWithout) {
    const DropoutRule r = rule(0.25);
    for (int64_t b = 0; b < 64; ++b) {
        const double f = dropoutFactor(r, 1, 5, b);
        EXPECT_TRUE(f == 0.0 || f == 1.0 / 0.75) << f;
        EXPECT_EQ(f != 0.0, dropoutKeeps(r, 1, 5, b));
    }
    EXPECT_EQ(dropoutFactor(rule(0.0), 1, 5, 3), 1.0);
    EXPECT_FALSE(rule(0.0).active());
}

// The CPU op: kept elements x / (1 - p), dropped ones 0, by each row's (sequence, position) and the column, so rows
// split over two calls (sequence parallelism's shares) read the same mask as one call; the same call on a gradient is
// the backward (the op is linear and its own adjoint).
TEST(Dropout, CpuOpReadsTheMaskAtEachRowsCoordinates) {
    auto b = f64();
    const int64_t rows = 6, cols = 8;
    const Positions sequences{4, 4, 4, 5, 5, 5}, positions{0, 1, 2, 0, 1, 2};
    const Values xv = randomValues(static_cast<size_t>(rows * cols), 41);
    const DropoutRule r = rule(0.3);
    Tensor whole = make(*b, {rows, cols}, xv);
    b->dropout(whole, r, sequences, positions);
    const Values out = b->download(whole);
    int zeros = 0;
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t c = 0; c < cols; ++c) {
            const auto at = static_cast<size_t>(i * cols + c);
            const bool keep = dropoutKeeps(r, sequences[static_cast<size_t>(i)], positions[static_cast<size_t>(i)], c);
            EXPECT_DOUBLE_EQ(out[at], keep ? xv[at] / 0.7 : 0.0);
            zeros += keep ? 0 : 1;
        }
    EXPECT_GT(zeros, 0);
    EXPECT_LT(zeros, rows * cols);
    Values halves;
    for (int64_t first : {0, 3}) {
        Tensor half = make(*b, {3, cols}, Values(xv.begin() + first * cols, xv.begin() + (first + 3) * cols));
        b->dropout(half, r, Positions(sequences.begin() + first, sequences.begin() + first + 3),
                   Positions(positions.begin() + first, positions.begin() + first + 3));
        const Values h = b->download(half);
        halves.insert(halves.end(), h.begin(), h.end());
    }
    EXPECT_EQ(halves, out);
    const Values w = randomValues(static_cast<size_t>(rows * cols), 42);
    Tensor dy = make(*b, {rows, cols}, w);
    b->dropout(dy, r, sequences, positions);
    EXPECT_NEAR(dot(b->download(dy), xv), dot(out, w), 1e-12);   // <D x, w> = <x, D w>
    Tensor same = make(*b, {rows, cols}, xv);
    b->dropout(same, rule(0.0), sequences, positions);
    EXPECT_EQ(b->download(same), xv);
    EXPECT_THROW(b->dropout(same, r, Positions(5, 0), positions), RuntimeError);
    EXPECT_THROW(b->dropout(same, rule(1.0), sequences, positions), RuntimeError);
}

// Attention dropout: o_i = sum_j z_ij softmax_j(S_i) v_j with z from the mask at (sequence, query position, key
// position, head), the log-sum-exp that of the undropped scores.
TEST(Dropout, AttentionForwardMatchesExplicitMasks) {
    auto b = f64();
    for (const AttentionCase& a : {gqaCase(), offsetCase()}) {
        const Values qv = randomValues(count(a.qShape()), 43, -2.0, 2.0);
        const Values kv = randomValues(count(a.kShape()), 44, -2.0, 2.0), vv = randomValues(count(a.kShape()), 45);
        ScoreRule sr;
        sr.dropout = rule(0.4, 99, 1, DropoutSite::Attention);
        sr.firstSequence = 6;
        sr.headOffset = 4;
        Tensor q = make(*b, a.qShape(), qv), k = make(*b, a.kShape(), kv), v = make(*b, a.kShape(), vv);
        Tensor o = b->empty(a.qShape(), MemoryCategory::Activations), lse = b->empty(a.lseShape(), MemoryCategory::Activations);
        Tensor o0 = b->empty(a.qShape(), MemoryCategory::Activations), lse0 = b->empty(a.lseShape(), MemoryCategory::Activations);
        b->attentionForward(q, k, v, a.sequences, a.queryPositions, a.keyPositions, o, lse, sr);
        b->attentionForward(q, k, v, a.sequences, a.queryPositions, a.keyPositions, o0, lse0);
        EXPECT_EQ(b->download(lse), b->download(lse0));
        Values expected(count(a.qShape()), 0.0);
        const Values lseRef = b->download(lse0);
        const int64_t sq = a.sq(), skv = a.skv();
        for (int64_t s = 0; s < a.sequences; ++s)
            for (int64_t h = 0; h < a.hq; ++h)
                for (int64_t i = 0; i < sq; ++i) {
                    const auto qi = static_cast<size_t>(((s * sq + i) * a.hq + h) * a.d);
                    const int64_t qp = a.queryPositions[static_cast<size_t>(i)];
                    for (int64_t j = 0; j < skv; ++j) {
                        const int64_t kp = a.keyPositions[static_cast<size_t>(j)];
                        if (kp > qp) continue;
                        const auto kj = static_cast<size_t>(((s * skv + j) * a.hkv + h / (a.hq / a.hkv)) * a.d);
                        double sc = 0.0;
                        for (int64_t c = 0; c < a.d; ++c) sc += qv[qi + static_cast<size_t>(c)] * kv[kj + static_cast<size_t>(c)];
                        const double p = std::exp(sc / std::sqrt(static_cast<double>(a.d)) -
                                                  lseRef[static_cast<size_t>((s * sq + i) * a.hq + h)]);
                        const double z = dropoutKeeps(sr.dropout, 6 + s, qp, kp, 4 + h) ? 1.0 / 0.6 : 0.0;
                        for (int64_t c = 0; c < a.d; ++c) expected[qi + static_cast<size_t>(c)] += z * p * vv[kj + static_cast<size_t>(c)];
                    }
                }
        EXPECT_LT(relativeError(b->download(o), expected), 1e-12) << "sq " << sq;
        EXPECT_GT(relativeError(b->download(o), b->download(o0)), 1e-2) << "dropout changes nothing here";
    }
}

// With the mask fixed by its coordinates the dropped attention is a smooth function of q, k and v: its backward
// against central differences (alone and with a soft-cap, a window and ALiBi).
TEST(Dropout, AttentionBackwardMatchesFiniteDifferences) {
    auto b = f64();
    ScoreRule plain, all;
    plain.dropout = rule(0.3, 5, 0, DropoutSite::Attention);
    plain.firstSequence = 2;
    all = plain;
    all.softcap = 1.5;
    all.window = 3;
    all.alibiHeads = 8;
    all.headOffset = 4;
    for (const ScoreRule& sr : {plain, all})
        for (const AttentionCase& a : {gqaCase(), offsetCase()}) {
            const Values qv = randomValues(count(a.qShape()), 46, -2.0, 2.0);
            const Values kv = randomValues(count(a.kShape()), 47, -2.0, 2.0), vv = randomValues(count(a.kShape()), 48);
            const Values w = randomValues(count(a.qShape()), 49);
            auto loss = [&](const Values& q, const Values& k, const Values& v) {
                Tensor o = b->empty(a.qShape(), MemoryCategory::Activations);
                Tensor lse = b->empty(a.lseShape(), MemoryCategory::Activations);
                b->attentionForward(make(*b, a.qShape(), q), make(*b, a.kShape(), k), make(*b, a.kShape(), v),
                                    a.sequences, a.queryPositions, a.keyPositions, o, lse, sr);
                return dot(b->download(o), w);
            };
            const AttentionGradients g = attentionGradients(*b, a, qv, kv, vv, w, 0.0, sr);
            const std::string label = "sq " + std::to_string(a.sq()) + " softcap " + std::to_string(sr.softcap);
            EXPECT_LT(relativeError(g.dq, finiteDifference([&](const Values& x) { return loss(x, kv, vv); }, qv)), 1e-6) << label;
            EXPECT_LT(relativeError(g.dk, finiteDifference([&](const Values& x) { return loss(qv, x, vv); }, kv)), 1e-6) << label;
            EXPECT_LT(relativeError(g.dv, finiteDifference([&](const Values& x) { return loss(qv, kv, x); }, vv)), 1e-6) << label;
        }
}

// ---------------------------------------------------------------------------------------------------------
// The model with dropout (0.2 on the embedding, the attention probabilities and both blocks' outputs)

ModelConfig droppedModel(bool swiglu) {
    ModelConfig m = tinyModel(swiglu);
    m.dropout = 0.2;
    return m;
}

// The masks are read at each element's coordinates in the step, so a plan on N ranks drops exactly what one rank
// drops: the same losses and parameters to 1e-10, whichever rank holds a token (tp + SP, cp's exchanges, pp with
// ZeRO-3 and full recompute, an interleaved pipeline, a parallel block with one reduction, data parallelism, experts
// over EP); DroppedModel below checks that the training differs from the same run without dropout.
struct DroppedCase {
    std::string name;
    Plan plan;
    bool swiglu = false;
};

void PrintTo(const DroppedCase& c, std::ostream* os) { *os << c.name; }

class DroppedEquivalence : public ::testing::TestWithParam<DroppedCase> {};

TEST_P(DroppedEquivalence, MatchesOneRank) {
    const DroppedCase& c = GetParam();
    ModelConfig model = droppedModel(c.swiglu);
    if (c.name.find("moe") != std::string::npos) {   // the MoE block's output dropped as the dense MLP's
        model = loadModelRef("tiny-moe", "test");
        model.seqLen = 16;
        model.dropout = 0.2;
    }
    if (c.name.find("parallel") != std::string::npos) model.parallelResidual = true;
    if (c.name.find("embnorm") != std::string::npos) model.embeddingNorm = true;
    if (c.name.find("postnorms") != std::string::npos) model.postNorms = true;
    if (c.name.find("mha") != std::string::npos) model.kvHeads = model.heads;
    Plan one = test::basePlan();
    one.globalBatch = c.plan.globalBatch;
    test::expectMatchesOneRank(model, c.plan, one);
}

std::vector<DroppedCase> droppedCases() {
    std::vector<DroppedCase> cases;
    auto add = [&](std::string name, auto edit, bool swiglu = false) {
        Plan p = test::basePlan();
        edit(p);
        cases.push_back({std::move(name), p, swiglu});
    };
    add("dp2", [](Plan& p) { p.dp = 2; });
    add("tp2", [](Plan& p) { p.tp = 2; });
    add("tp2_sp_swiglu", [](Plan& p) { p.tp = 2; p.sequenceParallel = true; }, true);
    add("tp2_sp_pp2_parallel_once", [](Plan& p) {
        p.tp = 2;
        p.pp = 2;
        p.sequenceParallel = true;
        p.framework.name = "deepspeed";   // one reduction of the summed blocks (GPT-NeoX's), one dropout on the sum
    });
    add("tp2_parallel", [](Plan& p) { p.tp = 2; });
    add("cp2_allgather", [](Plan& p) { p.cp = 2; p.cpComm = CpComm::AllGather; });
    add("cp2_a2a_mha", [](Plan& p) { p.cp = 2; p.cpComm = CpComm::A2a; });
    add("cp2_tp2_sp", [](Plan& p) { p.cp = 2; p.tp = 2; p.sequenceParallel = true; });
    add("cp4_a2a2_p2p", [](Plan& p) { p.cp = 4; p.cpComm = CpComm::A2aP2p; p.cpA2a = 2; });
    add("pp2_dp2_zero3_recompute_full_embnorm_postnorms", [](Plan& p) {
        p.pp = 2;
        p.dp = 2;
        p.zeroStage = 3;
        p.recompute = Recompute::Full;
    });
    add("pp2_vpp2_interleaved", [](Plan& p) { p.pp = 2; p.vpp = 2; p.schedule = Schedule::Interleaved1F1B; });
    add("moe_tp2_sp_ep2_dp2", [](Plan& p) { p.tp = 2; p.sequenceParallel = true; p.ep = 2; p.dp = 2; });
    add("tp2_sp_recompute_mlp_swiglu", [](Plan& p) {
        p.tp = 2;
        p.sequenceParallel = true;
        p.recompute = Recompute::Selective;
        p.recomputeModules = recompute_module::CoreAttn | recompute_module::Mlp;
    }, true);
    return cases;
}

INSTANTIATE_TEST_SUITE_P(Grid, DroppedEquivalence, ::testing::ValuesIn(droppedCases()),
                         [](const ::testing::TestParamInfo<DroppedCase>& i) { return i.param.name; });

TEST(DroppedModel, DropoutChangesTrainingAndRecomputeRebuildsTheSameMasks) {
    Plan p = test::basePlan();
    p.pp = 2;
    const test::RunResult plain = test::runPlan(tinyModel(false), p, 2);
    const test::RunResult dropped = test::runPlan(droppedModel(false), p, 2);
    EXPECT_NE(dropped.losses, plain.losses);
    EXPECT_GT(std::abs(dropped.losses[0] - plain.losses[0]), 1e-3);
    for (Recompute rc : {Recompute::Selective, Recompute::Full}) {
        Plan q = p;
        q.recompute = rc;
        const test::RunResult r = test::runPlan(droppedModel(false), q, 2);
        EXPECT_EQ(r.losses, dropped.losses) << toString(rc);
        EXPECT_EQ(r.params, dropped.params) << toString(rc);
    }
}

// With the masks fixed by the step's key, the dropped model is a smooth function of its parameters: the gradients
// of the parameters on both sides of each mask (the embedding's, the attention's, both blocks' outputs) against
// central differences, for the sequential block with learned positions and the parallel block with SwiGLU.
TEST(DroppedModel, GradientsMatchFiniteDifferences) {
    ModelConfig gelu = droppedModel(false);
    gelu.linearBias = true;
    gelu.embeddingNorm = true;
    test::expectGradientsMatchFiniteDifferences(gelu, {"wte", "wpe", "embed_norm.weight", "layer.0.attn.q.weight",
                                                       "layer.0.attn.v.weight", "layer.0.attn.proj.bias",
                                                       "layer.0.mlp.fc2.weight", "layer.0.mlp.fc2.bias", "layer.1.ln1.weight"});
    ModelConfig parallel = droppedModel(true);
    parallel.parallelResidual = true;
    test::expectGradientsMatchFiniteDifferences(parallel, {"wte", "layer.0.attn.k.weight", "layer.0.attn.proj.weight",
                                                           "layer.0.mlp.fc1.weight", "layer.1.ln2.weight"});
}

// The masks are read again where they are needed, not kept (as FlashAttention's attention dropout): every rank's
// activation peak is the same bytes with dropout as without, its buffers at most two output gradients more. Megatron-LM keeps a byte a hidden element
// for each mask (torch's dropout saves its mask), which the memory model counts (FORMULAS.md §2, μ); tessel run's
// measured activations are below such a prediction by those bytes.
TEST(DroppedModel, KeepsNoMaskBytes) {
    for (const auto& [name, edit] : std::vector<std::pair<std::string, std::function<void(Plan&)>>>{
             {"tp2_sp", [](Plan& p) { p.tp = 2; p.sequenceParallel = true; }},
             {"pp2_recompute_full", [](Plan& p) { p.pp = 2; p.recompute = Recompute::Full; }},
             {"cp2_a2a", [](Plan& p) { p.cp = 2; p.cpComm = CpComm::A2a; }}}) {
        Plan p = test::basePlan();
        edit(p);
        ModelConfig model = tinyModel(false);
        model.kvHeads = model.heads;
        const test::RunResult plain = test::runPlan(model, p, 1);
        model.dropout = 0.2;
        const test::RunResult dropped = test::runPlan(model, p, 1);
        ASSERT_EQ(plain.memory.size(), dropped.memory.size());
        // The backward's masked copies of the blocks' output gradients ([Tl, h] each, as autograd's products; the MLP's
        // and the attention's alive together) are transient buffers.
        const int64_t rowsOnRank = p.microBatch * model.seqLen / (p.sequenceParallel ? p.tp : 1) / p.cp;
        const int64_t gradientBytes = 2 * rowsOnRank * model.hidden * 8;
        for (size_t r = 0; r < plain.memory.size(); ++r) {
            const auto act = static_cast<size_t>(MemoryCategory::Activations), buf = static_cast<size_t>(MemoryCategory::Buffers);
            EXPECT_EQ(dropped.memory[r].peakBytes[act], plain.memory[r].peakBytes[act]) << name << " rank " << r;
            EXPECT_GE(dropped.memory[r].peakBytes[buf], plain.memory[r].peakBytes[buf]) << name << " rank " << r;
            EXPECT_LE(dropped.memory[r].peakBytes[buf], plain.memory[r].peakBytes[buf] + gradientBytes) << name << " rank " << r;
        }
    }
}

} // namespace
} // namespace tessel::exec::test::cpu_backend
