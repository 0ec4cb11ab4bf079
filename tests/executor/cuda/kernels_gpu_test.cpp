// Every CUDA kernel against the CPU float64 backend on random inputs, in fp32 and bf16 (mixed) mode, within
// the relative error bands of gpu_test_support.hpp. Skips where no GPU answers.
#include "gpu_test_support.hpp"

#include "tessel/cost/errors.hpp"
#include "tessel/exec/cpu_backend.hpp"

#include <functional>
#include <string>
#include <utility>

namespace tessel::exec {
namespace {

using test::bandFor;
using test::randomValues;
using test::relativeError;

class Kernels : public ::testing::TestWithParam<CudaPrecision> {
protected:
    void SetUp() override {
        TESSEL_REQUIRE_GPU();
        gpu = makeCudaBackend(GetParam(), 0);
        cpu = makeCpuBackend(ElementType::F64);
    }
    CudaPrecision p() const { return GetParam(); }
    std::vector<double> rnd(size_t n, uint64_t seed, double scale = 1.0) const { return randomValues(n, seed, p(), scale); }

    // Runs `op` on both backends and checks every result within `band` (default: the dtype's band).
    void compare(const std::string& what, const std::function<std::vector<std::vector<double>>(Backend&)>& op,
                 double band = 0.0) {
        const auto want = op(*cpu);
        const auto got = op(*gpu);
        ASSERT_EQ(want.size(), got.size());
        for (size_t i = 0; i < want.size(); ++i) {
            const double err = relativeError(got[i], want[i]);
            EXPECT_LE(err, band > 0.0 ? band : bandFor(p())) << what << " output " << i;
            std::printf("%-28s %-5s output %zu relative error %.3g\n", what.c_str(),
                        p() == CudaPrecision::Fp32 ? "fp32" : "bf16", i, err);
        }
    }

    static Tensor make(Backend& be, const std::vector<double>& v, std::vector<int64_t> shape,
                       MemoryCategory c = MemoryCategory::Activations) {
        Tensor t = be.empty(std::move(shape), c);
        be.upload(v, t);
        return t;
    }

    std::unique_ptr<Backend> gpu, cpu;
};

TEST_P(Kernels, GemmEveryTransposeWithAndWithoutAccumulation) {
    const int64_t m = 37, n = 45, k = 70;
    for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb)
            for (double beta : {0.0, 1.0}) {
                const auto a = rnd(static_cast<size_t>(m * k), 1), b = rnd(static_cast<size_t>(k * n), 2),
                           c0 = rnd(static_cast<size_t>(m * n), 3);
                compare("gemm", [&](Backend& be) {
                    Tensor A = make(be, a, ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k});
                    Tensor B = make(be, b, tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
                    Tensor C = make(be, c0, {m, n});
                    be.gemm(ta, tb, 0.5, A, B, beta, C);
                    return std::vector<std::vector<double>>{be.download(C)};
                });
            }
}

TEST_P(Kernels, CopiesFillsAndAdds) {
    const auto x = rnd(6 * 8, 4), y = rnd(6 * 8, 5), small = rnd(2 * 8, 6), cols = rnd(6 * 3, 7);
    compare("copy rows/columns, add, scale", [&](Backend& be) {
        Tensor X = make(be, x, {6, 8}), Y = make(be, y, {6, 8});
        be.add(X, Y, -0.5);
        be.scale(Y, 2.0);
        Tensor R = be.empty({2, 8}, MemoryCategory::Buffers);
        be.copyRows(Y, 3, R);
        Tensor S = make(be, small, {2, 8});
        be.copyRowsInto(S, X, 1);
        Tensor C = be.empty({6, 3}, MemoryCategory::Buffers);
        be.copyColumns(X, 4, C);
        Tensor D = make(be, cols, {6, 3});
        be.addColumnsInto(D, Y, 2);
        Tensor F = be.empty({5}, MemoryCategory::Buffers);
        be.fill(F, 0.25);
        return std::vector<std::vector<double>>{be.download(Y), be.download(R), be.download(X), be.download(C),
                                                be.download(F)};
    });
}

TEST_P(Kernels, BiasAndItsGradient) {
    const int64_t n = 300, c = 40;   // more rows than one column-sum chunk
    const auto x = rnd(static_cast<size_t>(n * c), 8), b = rnd(static_cast<size_t>(c), 9), g0 = rnd(static_cast<size_t>(c), 10);
    compare("addBias/biasGrad", [&](Backend& be) {
        Tensor X = make(be, x, {n, c}), B = make(be, b, {1, c}), G = make(be, g0, {c});
        be.addBias(X, B);
        be.biasGrad(X, G);
        return std::vector<std::vector<double>>{be.download(X), be.download(G)};
    });
}

TEST_P(Kernels, LayerNormAndRmsNormForwardAndBackward) {
    const int64_t n = 270, c = 96;
    for (bool rms : {false, true}) {
        const auto x = rnd(static_cast<size_t>(n * c), 11, 2.0), g = rnd(static_cast<size_t>(c), 12),
                   b = rnd(static_cast<size_t>(c), 13), dy = rnd(static_cast<size_t>(n * c), 14);
        compare(rms ? "rmsnorm" : "layernorm", [&](Backend& be) {
            Tensor X = make(be, x, {n, c}), G = make(be, g, {c}), B = make(be, b, {c});
            Tensor Y = be.empty({n, c}, MemoryCategory::Activations), mean = be.empty({n}, MemoryCategory::Activations),
                   rstd = be.empty({n}, MemoryCategory::Activations);
            be.normForward(X, G, rms ? Tensor() : B, rms, 1e-5, Y, mean, rstd);
            Tensor DY = make(be, dy, {n, c}), DX = be.empty({n, c}, MemoryCategory::Buffers),
                   DG = be.zeros({c}, MemoryCategory::Buffers), DB = be.zeros({c}, MemoryCategory::Buffers);
            be.normBackward(DY, X, G, mean, rstd, rms, DX, DG, rms ? DB : DB);
            return std::vector<std::vector<double>>{be.download(Y), be.download(DX), be.download(DG), be.download(DB)};
        });
    }
}

TEST_P(Kernels, SoftcapAndItsBackward) {
    const int64_t n = 33, f = 70;
    const auto x = rnd(static_cast<size_t>(n * f), 23, 40.0), dy = rnd(static_cast<size_t>(n * f), 24);
    compare("softcap", [&](Backend& be) {
        Tensor X = make(be, x, {n, f});
        be.softcap(X, 30.0);
        Tensor DY = make(be, dy, {n, f});
        be.softcapBackward(DY, X, 30.0);
        return std::vector<std::vector<double>>{be.download(X), be.download(DY)};
    });
}

// Dropout in place, the masks read at each row's (sequence, position) and the column: the same elements dropped as on
// the CPU backend (an element dropped on one side and kept on the other would be an error of order 1).
TEST_P(Kernels, DropoutReadsTheCpuBackendsMasks) {
    const int64_t n = 37, f = 70;
    const auto x = rnd(static_cast<size_t>(n * f), 25);
    std::vector<int64_t> seq(static_cast<size_t>(n)), pos(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) {
        seq[static_cast<size_t>(r)] = 3 + r / 16;
        pos[static_cast<size_t>(r)] = 100 + r % 16;
    }
    DropoutRule rule;
    rule.p = 0.25;
    rule.key = 0xfeedULL << 32 | 0xbeefULL;
    rule.layer = 7;
    rule.site = DropoutSite::MlpOutput;
    compare("dropout", [&](Backend& be) {
        Tensor X = make(be, x, {n, f});
        be.dropout(X, rule, seq, pos);
        return std::vector<std::vector<double>>{be.download(X)};
    });
}

TEST_P(Kernels, GeluAndGatedActivations) {
    const int64_t n = 33, f = 50;
    const auto x = rnd(static_cast<size_t>(n * 2 * f), 15, 2.0), dy = rnd(static_cast<size_t>(n * 2 * f), 16);
    const std::pair<const char*, Pointwise> plain[] = {
        {"gelu", Pointwise::Gelu}, {"silu", Pointwise::Silu}, {"squared relu", Pointwise::SquaredRelu}};
    for (const auto& [name, fn] : plain)
        compare(name, [&](Backend& be) {
            Tensor X = make(be, x, {n, 2 * f}), Y = be.empty({n, 2 * f}, MemoryCategory::Activations);
            be.activationForward(X, Y, fn);
            Tensor DY = make(be, dy, {n, 2 * f}), DX = be.empty({n, 2 * f}, MemoryCategory::Buffers);
            be.activationBackward(DY, X, DX, fn);
            return std::vector<std::vector<double>>{be.download(Y), be.download(DX)};
        });
    const std::vector<double> dyHalf(dy.begin(), dy.begin() + n * f);
    for (const Pointwise act : {Pointwise::Silu, Pointwise::Gelu})
        compare(act == Pointwise::Silu ? "swiglu" : "geglu", [&](Backend& be) {
            Tensor X = make(be, x, {n, 2 * f}), Y = be.empty({n, f}, MemoryCategory::Activations);
            be.gluForward(X, Y, act);
            Tensor DY = make(be, dyHalf, {n, f}), DX = be.empty({n, 2 * f}, MemoryCategory::Buffers);
            be.gluBackward(DY, X, DX, act);
            return std::vector<std::vector<double>>{be.download(Y), be.download(DX)};
        });
}

TEST_P(Kernels, RopeAndItsInverse) {
    const int64_t tokens = 40, heads = 3, d = 16;
    const auto x = rnd(static_cast<size_t>(tokens * heads * d), 17);
    std::vector<int64_t> pos(static_cast<size_t>(tokens));
    for (int64_t t = 0; t < tokens; ++t) pos[static_cast<size_t>(t)] = (t * 7) % 23;
    for (const int64_t r : {d, int64_t{4}})  // the whole head, and a partial rotary (the rest passed through)
        compare("rope", [&](Backend& be) {
            Tensor X = make(be, x, {tokens, heads, d});
            be.rope(X, pos, 10000.0, r, false);
            const auto rotated = be.download(X);
            be.rope(X, pos, 10000.0, r, true);
            return std::vector<std::vector<double>>{rotated, be.download(X)};
        });
}

const char* attentionName(CudaAttention a) { return a == CudaAttention::Gemm ? "gemm" : "tiles"; }

// Causal GQA attention forward and backward on `be`: o, lse, dq, dk (added to dk0), dv.
std::vector<std::vector<double>> runAttention(Backend& be, int64_t S, int64_t sq, int64_t skv, int64_t hq,
                                              int64_t hkv, int64_t d, const std::vector<int64_t>& qpos,
                                              const std::vector<int64_t>& kpos, const std::vector<double>& q,
                                              const std::vector<double>& k, const std::vector<double>& v,
                                              const std::vector<double>& dout, const std::vector<double>& dk0,
                                              const ScoreRule& rule = {}) {
    auto make = [&](const std::vector<double>& x, std::vector<int64_t> shape, MemoryCategory c) {
        Tensor t = be.empty(std::move(shape), c);
        be.upload(x, t);
        return t;
    };
    const auto A = MemoryCategory::Activations, B = MemoryCategory::Buffers;
    Tensor Q = make(q, {S * sq, hq, d}, A), K = make(k, {S * skv, hkv, d}, A), V = make(v, {S * skv, hkv, d}, A);
    Tensor O = be.empty({S * sq, hq, d}, A), L = be.empty({S * sq, hq}, A);
    be.attentionForward(Q, K, V, S, qpos, kpos, O, L, rule);
    Tensor DO = make(dout, {S * sq, hq, d}, A), DQ = be.empty({S * sq, hq, d}, B);
    Tensor DK = make(dk0, {S * skv, hkv, d}, B), DV = be.zeros({S * skv, hkv, d}, B);
    be.attentionBackward(DO, Q, K, V, O, L, S, qpos, kpos, DQ, DK, DV, rule);
    return {be.download(O), be.download(L), be.download(DQ), be.download(DK), be.download(DV)};
}

TEST_P(Kernels, CausalGqaAttentionForwardAndBackward) {
    // 2 sequences, 4 query heads over 2 kv heads; 70 queries against 90 keys (a chunk of a longer sequence,
    // as with context parallelism), positions not sorted; head dims 16 and 64; both implementations.
    for (CudaAttention impl : {CudaAttention::Gemm, CudaAttention::Tiles}) {
        setCudaAttention(*gpu, impl);
        for (int64_t d : {16, 64}) {
            const int64_t S = 2, sq = 70, skv = 90, hq = 4, hkv = 2;
            std::vector<int64_t> qpos(static_cast<size_t>(sq)), kpos(static_cast<size_t>(skv));
            for (int64_t i = 0; i < sq; ++i) qpos[static_cast<size_t>(i)] = 20 + (i * 37) % sq;
            for (int64_t j = 0; j < skv; ++j) kpos[static_cast<size_t>(j)] = j;
            const auto q = rnd(static_cast<size_t>(S * sq * hq * d), 18), k = rnd(static_cast<size_t>(S * skv * hkv * d), 19),
                       v = rnd(static_cast<size_t>(S * skv * hkv * d), 20), dout = rnd(static_cast<size_t>(S * sq * hq * d), 21),
                       dk0 = rnd(static_cast<size_t>(S * skv * hkv * d), 22);
            compare(std::string("attention ") + attentionName(impl) + " d=" + std::to_string(d), [&](Backend& be) {
                return runAttention(be, S, sq, skv, hq, hkv, d, qpos, kpos, q, k, v, dout, dk0);
            });
            // Gemma 2's soft-capped scores (a cap of 2 on these scores bends most of them), a sliding window of 13
            // keys (tiles of 32 keys partly and wholly outside it), ALiBi's biases on the second half of 8 heads (TP
            // rank 1 of 2) and all three: the tiled kernels either way (the gemm path hands such scores to them).
            // Attention dropout (0.1 of the probabilities, the masks read at the sequence's, positions' and head's
            // coordinates by the same Philox as the CPU backend), alone and with the other three.
            ScoreRule capped, windowed, alibi, all, dropped, droppedAll;
            capped.softcap = 2.0;
            windowed.window = 13;
            alibi.alibiHeads = 8;
            alibi.headOffset = 4;
            all = alibi;
            all.softcap = 2.0;
            all.window = 13;
            dropped.dropout.p = 0.1;
            dropped.dropout.key = 0x5eed;
            dropped.dropout.layer = 3;
            dropped.dropout.site = DropoutSite::Attention;
            dropped.firstSequence = 6;
            dropped.headOffset = 4;
            droppedAll = all;
            droppedAll.dropout = dropped.dropout;
            droppedAll.firstSequence = dropped.firstSequence;
            const std::pair<const char*, ScoreRule> rules[] = {
                {"softcap", capped}, {"window", windowed}, {"alibi", alibi}, {"softcap+window+alibi", all},
                {"dropout", dropped}, {"dropout+softcap+window+alibi", droppedAll}};
            for (const auto& [name, rule] : rules)
                compare(std::string("attention ") + name + " " + attentionName(impl) + " d=" + std::to_string(d),
                        [&](Backend& be) {
                            return runAttention(be, S, sq, skv, hq, hkv, d, qpos, kpos, q, k, v, dout, dk0, rule);
                        });
        }
    }
}

TEST_P(Kernels, AttentionImplementationsAgreeAndRepeatBitwise) {
    // GPT-2-like (2 sequences of 256, 12 heads of 64) and GQA (8 query heads over 2 kv heads, head dim 128),
    // causal; gemm against tiles within the dtype's band, and gemm twice bit for bit.
    struct Shape {
        int64_t hq, hkv, d;
    };
    for (const Shape& sh : {Shape{12, 12, 64}, Shape{8, 2, 128}}) {
        const int64_t S = 2, s = 256;
        std::vector<int64_t> pos(static_cast<size_t>(s));
        for (int64_t i = 0; i < s; ++i) pos[static_cast<size_t>(i)] = i;
        const auto nq = static_cast<size_t>(S * s * sh.hq * sh.d), nk = static_cast<size_t>(S * s * sh.hkv * sh.d);
        const auto q = rnd(nq, 31), k = rnd(nk, 32), v = rnd(nk, 33), dout = rnd(nq, 34), dk0 = rnd(nk, 35);
        const std::string what = "hq " + std::to_string(sh.hq) + " hkv " + std::to_string(sh.hkv) + " d " +
                                 std::to_string(sh.d);
        setCudaAttention(*gpu, CudaAttention::Tiles);
        const auto tiles = runAttention(*gpu, S, s, s, sh.hq, sh.hkv, sh.d, pos, pos, q, k, v, dout, dk0);
        setCudaAttention(*gpu, CudaAttention::Gemm);
        const auto gemm = runAttention(*gpu, S, s, s, sh.hq, sh.hkv, sh.d, pos, pos, q, k, v, dout, dk0);
        const auto again = runAttention(*gpu, S, s, s, sh.hq, sh.hkv, sh.d, pos, pos, q, k, v, dout, dk0);
        ASSERT_EQ(tiles.size(), gemm.size());
        for (size_t i = 0; i < gemm.size(); ++i) {
            const double err = relativeError(gemm[i], tiles[i]);
            EXPECT_LE(err, test::bandFor(CudaPrecision::Mixed)) << "gemm vs tiles, " << what << ", output " << i;
            EXPECT_EQ(gemm[i], again[i]) << "gemm run twice differs, " << what << ", output " << i;
            std::printf("attention gemm vs tiles %-18s %-5s output %zu relative difference %.3g\n", what.c_str(),
                        p() == CudaPrecision::Fp32 ? "fp32" : "bf16", i, err);
        }
    }
}

TEST(CudaBackend, AttentionImplementationIsSelectable) {
    EXPECT_EQ(cudaAttentionOf("gemm", "x"), CudaAttention::Gemm);
    EXPECT_EQ(cudaAttentionOf("tiles", "x"), CudaAttention::Tiles);
    EXPECT_THROW(cudaAttentionOf("flash", "TESSEL_CUDA_ATTENTION"), InputError);
    TESSEL_REQUIRE_GPU();
    auto be = makeCudaBackend(CudaPrecision::Mixed, 0);
    setCudaAttention(*be, CudaAttention::Tiles);
    EXPECT_EQ(cudaAttention(*be), CudaAttention::Tiles);
    setCudaAttention(*be, CudaAttention::Gemm);
    EXPECT_EQ(cudaAttention(*be), CudaAttention::Gemm);
}

TEST_P(Kernels, VocabParallelEmbedding) {
    const int64_t vocabLocal = 20, h = 24, vocabBegin = 10;
    std::vector<int32_t> tokens;
    for (int i = 0; i < 50; ++i) tokens.push_back((i * 13) % 45);   // some outside [10, 30), repeated rows
    const auto table = rnd(static_cast<size_t>(vocabLocal * h), 23), dout = rnd(tokens.size() * static_cast<size_t>(h), 24),
               dt0 = rnd(static_cast<size_t>(vocabLocal * h), 25);
    compare("embedding", [&](Backend& be) {
        Tensor T = make(be, table, {vocabLocal, h}, MemoryCategory::Weights),
               OUT = be.empty({static_cast<int64_t>(tokens.size()), h}, MemoryCategory::Activations);
        be.embeddingForward(tokens, T, vocabBegin, OUT);
        Tensor DO = make(be, dout, {static_cast<int64_t>(tokens.size()), h}), DT = make(be, dt0, {vocabLocal, h}, MemoryCategory::Grads);
        be.embeddingBackward(tokens, DO, vocabBegin, DT);
        return std::vector<std::vector<double>>{be.download(OUT), be.download(DT)};
    });
}

TEST_P(Kernels, CrossEntropyPiecesNeverMaterialiseProbabilities) {
    const int64_t n = 19, v = 1000, vocabBegin = 500;
    std::vector<int32_t> targets;
    for (int i = 0; i < n; ++i) targets.push_back((i * 97) % 1600);
    const auto logits = rnd(static_cast<size_t>(n * v), 26, 3.0);
    compare("cross-entropy pieces", [&](Backend& be) {
        Tensor Lg = make(be, logits, {n, v});
        std::vector<double> mx = be.rowMax(Lg);
        for (auto& m : mx) m += 0.25;   // a global max from another shard may exceed the local one
        const std::vector<double> se = be.rowSumExp(Lg, mx);
        const std::vector<double> tl = be.targetLogits(Lg, targets, vocabBegin);
        be.crossEntropyBackward(Lg, mx, se, targets, vocabBegin, 1.0 / static_cast<double>(n));
        return std::vector<std::vector<double>>{mx, se, tl, be.download(Lg)};
    });
}

TEST_P(Kernels, AdamwStepsAndSumOfSquares) {
    const int64_t n = 5000;
    const auto p0 = rnd(static_cast<size_t>(n), 27), g1 = rnd(static_cast<size_t>(n), 28), g2 = rnd(static_cast<size_t>(n), 29);
    compare("adamw x2 + sumSquares", [&](Backend& be) {
        Tensor P = make(be, p0, {n, 1}, MemoryCategory::Weights);
        Tensor M = be.zeros({n, 1}, MemoryCategory::Optimizer), V = be.zeros({n, 1}, MemoryCategory::Optimizer);
        Tensor G = make(be, g1, {n, 1}, MemoryCategory::Grads);
        be.adamw(P, G, M, V, 1e-2, 0.9, 0.95, 1e-8, 0.1, 1);
        be.upload(g2, G);
        be.adamw(P, G, M, V, 1e-2, 0.9, 0.95, 1e-8, 0.1, 2);
        return std::vector<std::vector<double>>{be.download(P), be.download(M), be.download(V), {be.sumSquares(G)}};
    });
}

// The gradient norm of a step: one read-back for all tensors gives bitwise the loop of per-tensor sums (same
// reductions, added in the same order), and the CPU float64 value within the dtype's band.
TEST_P(Kernels, SumOfSquaresOverManyTensorsIsTheLoopWithOneWait) {
    const std::vector<int64_t> sizes{1, 7, 4096, 70001, 3, 300000};
    std::vector<std::vector<double>> values;
    for (size_t i = 0; i < sizes.size(); ++i) values.push_back(rnd(static_cast<size_t>(sizes[i]), 40 + i));
    auto tensors = [&](Backend& be) {
        std::vector<Tensor> ts;
        for (size_t i = 0; i < sizes.size(); ++i) ts.push_back(make(be, values[i], {sizes[i], 1}, MemoryCategory::Grads));
        return ts;
    };
    const std::vector<Tensor> ts = tensors(*gpu);
    double loop = 0.0;
    for (const Tensor& t : ts) loop += gpu->sumSquares(t);
    EXPECT_EQ(gpu->sumSquaresAll(ts), loop);
    EXPECT_EQ(gpu->sumSquaresAll({}), 0.0);
    compare("sumSquaresAll", [&](Backend& be) { return std::vector<std::vector<double>>{{be.sumSquaresAll(tensors(be))}}; });
}

// Both modes keep the optimizer moments in fp32. Mixed mode adds an fp32 master beside each bf16 weight (counted
// under Optimizer: 2 + 2 + 4 + 4 + 4 = 16 B per parameter, the "mixed" recipe); fp32 mode needs none (4 + 4 + 4
// + 4). Either way an update below half a bf16 ulp at 1.0 survives: in the master, or in the fp32 weight itself.
TEST_P(Kernels, OptimizerStateIsFp32AndOnlyMixedModeCountsAMaster) {
    const bool mixed = p() == CudaPrecision::Mixed;
    Tensor w = gpu->zeros({1000, 1}, MemoryCategory::Weights);
    Tensor m = gpu->zeros({1000, 1}, MemoryCategory::Optimizer);
    EXPECT_EQ(w.type(), mixed ? ElementType::Bf16 : ElementType::F32);
    EXPECT_EQ(m.type(), ElementType::F32);
    Tensor g = gpu->zeros({1000, 1}, MemoryCategory::Grads), v = gpu->zeros({1000, 1}, MemoryCategory::Optimizer);
    const int64_t before = gpu->memory().currentBytes[static_cast<size_t>(MemoryCategory::Optimizer)];
    gpu->adamw(w, g, m, v, 1e-3, 0.9, 0.95, 1e-8, 0.0, 1);
    EXPECT_EQ(gpu->memory().currentBytes[static_cast<size_t>(MemoryCategory::Optimizer)] - before, mixed ? 4000 : 0);
    // 1000 steps of 1e-4 move the value by about 0.1 although each step is below half a bf16 ulp at 1.0.
    Tensor w2 = gpu->zeros({1, 1}, MemoryCategory::Weights), g2 = gpu->zeros({1, 1}, MemoryCategory::Grads),
           m2 = gpu->zeros({1, 1}, MemoryCategory::Optimizer), v2 = gpu->zeros({1, 1}, MemoryCategory::Optimizer);
    gpu->fill(w2, 1.0);
    gpu->fill(g2, 1.0);
    for (int s = 1; s <= 1000; ++s) gpu->adamw(w2, g2, m2, v2, 1e-4, 0.9, 0.95, 1e-8, 0.0, s);
    EXPECT_NEAR(gpu->download(w2)[0], 0.9, 0.01);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Kernels, ::testing::Values(CudaPrecision::Fp32, CudaPrecision::Mixed),
                         [](const auto& info) { return info.param == CudaPrecision::Fp32 ? "fp32" : "bf16"; });

TEST(CudaBackend, TimedRegionsAndProvenance) {
    TESSEL_REQUIRE_GPU();
    auto be = makeCudaBackend(CudaPrecision::Mixed, 0);
    EXPECT_TRUE(be->timesOnDevice());
    Tensor a = be->zeros({512, 512}, MemoryCategory::Activations), c = be->zeros({512, 512}, MemoryCategory::Activations);
    const int64_t h0 = be->beginTimedRegion();
    be->gemm(false, false, 1.0, a, a, 0.0, c);
    be->endTimedRegion(h0);
    const int64_t h1 = be->beginTimedRegion();
    be->endTimedRegion(h1);
    const auto regions = be->collectTimedRegions();
    ASSERT_EQ(regions.size(), 2u);
    EXPECT_EQ(regions[0].handle, h0);
    EXPECT_GT(regions[0].durationSeconds, 0.0);
    EXPECT_GE(regions[1].startSeconds, regions[0].startSeconds + regions[0].durationSeconds - 1e-6);
    // One copy: provenance() returns by value, so begin() and end() of two calls belong to two vectors.
    const auto pairs = be->provenance();
    std::map<std::string, std::string> prov(pairs.begin(), pairs.end());
    for (const char* key : {"device", "driver", "cuda", "cublas", "nccl"}) EXPECT_FALSE(prov[key].empty()) << key;
}

} // namespace
} // namespace tessel::exec
