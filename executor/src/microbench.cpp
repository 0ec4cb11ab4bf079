// Microbenchmarks for calibration: compute kernels on one backend and collectives over a group, timed with
// the host clock around completed work, counted with the cost model's FLOP and byte formulas.
#include "tessel/exec/microbench.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/plan.hpp"
#include "tessel/cost/shapes.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <set>
#include <tuple>

namespace tessel::exec {

namespace {
using Clock = std::chrono::steady_clock;

double quantile(const std::vector<double>& sorted, double q) {
    // Linear interpolation between closest ranks (NumPy's default "linear" method).
    const double pos = q * static_cast<double>(sorted.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(sorted.size() - 1, lo + 1);
    const double f = pos - static_cast<double>(lo);
    return sorted[lo] + f * (sorted[hi] - sorted[lo]);
}

// Deterministic values in [-1, 1): a small LCG keeps benchmark inputs identical on every run and rank.
std::vector<double> pseudoRandom(int64_t n, uint64_t seed) {
    std::vector<double> v(static_cast<size_t>(n));
    uint64_t x = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    for (auto& e : v) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        e = static_cast<double>(x >> 11) / static_cast<double>(uint64_t{1} << 53) * 2.0 - 1.0;
    }
    return v;
}

Tensor randomTensor(Backend& be, std::vector<int64_t> shape, MemoryCategory c, uint64_t seed, double scale = 1.0) {
    Tensor t = be.empty(std::move(shape), c);
    auto v = pseudoRandom(t.numel(), seed);
    for (auto& e : v) e *= scale;
    be.upload(v, t);
    return t;
}

struct GemmShape {
    int64_t m, n, k;
    bool transA, transB;
    bool operator<(const GemmShape& o) const {
        return std::tie(m, n, k, transA, transB) < std::tie(o.m, o.n, o.k, o.transA, o.transB);
    }
};

// The GEMMs of a layer as the executor runs them: forward Y = X W (NN), dX = dY W^T (NT), dW += X^T dY (TN).
void addLinear(std::set<GemmShape>& out, int64_t tokens, int64_t in, int64_t outDim) {
    if (tokens <= 0 || in <= 0 || outDim <= 0) return;
    out.insert({tokens, outDim, in, false, false});
    out.insert({tokens, in, outDim, false, true});
    out.insert({in, outDim, tokens, true, false});
}

std::set<GemmShape> gemmShapes(const BenchOptions& o) {
    std::set<GemmShape> shapes;
    for (const ModelConfig& model : o.models) {
        for (int64_t mb : o.quick ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 2}) {
            for (int tp : o.quick ? std::vector<int>{1} : std::vector<int>{1, 2}) {
                if (model.heads % tp != 0 || model.kvHeads % tp != 0) continue;
                const int64_t T = mb * model.seqLen;
                const int64_t hd = model.hidden / model.heads;
                const int64_t q = model.heads / tp * hd, kv = model.kvHeads / tp * hd;
                const bool swiglu = model.gatedMlp();
                addLinear(shapes, T, model.hidden, q);
                addLinear(shapes, T, model.hidden, kv);
                addLinear(shapes, T, q, model.hidden);
                addLinear(shapes, T, model.hidden, (swiglu ? 2 : 1) * model.ffnHidden / tp);
                addLinear(shapes, T, model.ffnHidden / tp, model.hidden);
                addLinear(shapes, T, model.hidden, model.vocab / tp);
            }
        }
    }
    // A sweep of square GEMMs around the layer shapes, so the efficiency table has points on both sides.
    for (int64_t n : o.quick ? std::vector<int64_t>{16, 32, 64, 128, 256} : std::vector<int64_t>{16, 32, 64, 128, 256, 512})
        shapes.insert({n, n, n, false, false});
    return shapes;
}

int elemBytes(const Backend& be) { return elementBytes(be.elementType()); }

// The recipe whose optimizer bytes the backend moves: the CPU backend's float64/float32 throughout; the CUDA
// backend's bf16 with fp32 masters and moments ("mixed") or fp32 throughout.
const PrecisionRecipe& recipeFor(const Backend& be) {
    if (be.elementType() == ElementType::Bf16) return *findPrecisionRecipe("mixed");
    if (be.elementType() == ElementType::F32) return *findPrecisionRecipe(be.name() == "cpu" ? "cpu_fp32" : "fp32");
    return *findPrecisionRecipe("cpu_fp64");
}

// In training a kernel's operands were last touched by other work, so they come from memory, not cache; timing
// one buffer over and over would measure the cache instead (a 2 MiB reduce-scatter read 3x too fast on the CPU
// host). Each call takes the next of enough buffer sets to span 64 MiB (at most 16).
constexpr int64_t kColdSpanBytes = int64_t{64} << 20;
int coldSets(int64_t bytesPerSet) {
    return static_cast<int>(std::clamp<int64_t>(kColdSpanBytes / std::max<int64_t>(1, bytesPerSet), 1, 16));
}

template <class Bufs>
struct Rotating {
    std::vector<Bufs> sets;
    size_t next = 0;
    Bufs& operator()() { return sets[next++ % sets.size()]; }
};

template <class Make>
auto rotating(int64_t bytesPerSet, Make make) {
    Rotating<decltype(make())> r;
    for (int i = coldSets(bytesPerSet); i > 0; --i) r.sets.push_back(make());
    return r;
}
} // namespace

BenchPoint summarize(std::string kernel, std::vector<double> samples) {
    if (samples.empty()) throw RuntimeError("benchmark " + kernel + ": no samples");
    std::sort(samples.begin(), samples.end());
    BenchPoint p;
    p.kernel = std::move(kernel);
    p.samples = static_cast<int>(samples.size());
    p.medianSeconds = quantile(samples, 0.5);
    p.minSeconds = samples.front();
    p.maxSeconds = samples.back();
    p.p10Seconds = quantile(samples, 0.1);
    p.p90Seconds = quantile(samples, 0.9);
    return p;
}

std::vector<double> timeSamples(const std::function<void()>& body, const BenchSync& sync, const BenchOptions& o) {
    double lastSeconds = 0.0;
    for (int i = 0; i < std::max(1, o.warmup); ++i) {
        if (sync.barrier) sync.barrier();
        const auto t0 = Clock::now();
        body();
        lastSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    int count = o.minSamples;
    if (lastSeconds > 0.0)
        count = static_cast<int>(std::clamp(std::ceil(o.minSecondsPerPoint / lastSeconds), static_cast<double>(o.minSamples),
                                            static_cast<double>(o.maxSamples)));
    if (sync.agree) count = sync.agree(count);
    std::vector<double> samples;
    samples.reserve(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
        if (sync.barrier) sync.barrier();
        const auto t0 = Clock::now();
        body();
        samples.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return samples;
}

std::vector<BenchPoint> runComputeBenchmarks(Backend& be, const BenchOptions& o, const BenchSync& sync) {
    std::vector<BenchPoint> out;
    const int e = elemBytes(be);
    auto record = [&](BenchPoint p, std::map<std::string, int64_t> shape, double flops, double bytes) {
        p.shape = std::move(shape);
        p.flops = flops;
        p.bytes = bytes;
        out.push_back(std::move(p));
    };
    // The same sampling discipline for every kernel; a shared-load barrier between samples when asked. Each
    // sample waits for the device (an asynchronous backend returns before the work is done).
    auto measure = [&](const std::string& kernel, const std::function<void()>& body) {
        return summarize(kernel, timeSamples([&] { body(); be.synchronize(); }, sync, o));
    };

    for (const GemmShape& g : gemmShapes(o)) {
        struct Bufs { Tensor a, b, c; };
        auto bufs = rotating((g.m * g.k + g.k * g.n + g.m * g.n) * e, [&] {
            return Bufs{randomTensor(be, g.transA ? std::vector<int64_t>{g.k, g.m} : std::vector<int64_t>{g.m, g.k},
                                     MemoryCategory::Buffers, 1),
                        randomTensor(be, g.transB ? std::vector<int64_t>{g.n, g.k} : std::vector<int64_t>{g.k, g.n},
                                     MemoryCategory::Buffers, 2),
                        be.zeros({g.m, g.n}, MemoryCategory::Buffers)};
        });
        BenchPoint p = measure("gemm", [&] {
            Bufs& t = bufs();
            be.gemm(g.transA, g.transB, 1.0, t.a, t.b, 0.0, t.c);
        });
        record(p, {{"m", g.m}, {"n", g.n}, {"k", g.k}, {"trans_a", g.transA}, {"trans_b", g.transB}},
               kernel_cost::gemmFlops(g.m, g.n, g.k), kernel_cost::gemmBytes(g.m, g.n, g.k, e));
    }

    // Row-wise kernels over [rows, cols] shapes taken from the models (tokens x hidden, tokens x ffn).
    std::set<std::pair<int64_t, int64_t>> rowShapes;
    std::set<std::tuple<int64_t, int64_t, int64_t, int64_t>> attentionShapes; // sequences, seq, heads, kv heads x d
    std::set<std::pair<int64_t, int64_t>> vocabShapes;
    std::map<int64_t, int64_t> hidden; // hidden width -> the model's head dimension (RoPE rotates per head)
    for (const ModelConfig& m : o.models) {
        for (int64_t mb : o.quick ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1, 2, 4}) {
            const int64_t T = mb * m.seqLen;
            rowShapes.insert({T, m.hidden});
            rowShapes.insert({T, m.ffnHidden});
            vocabShapes.insert({T, m.vocab});
            // Attention at half, once and twice the model's sequence: its FLOPs grow with s^2 and its bytes
            // with s, and calibration needs both to tell them apart (FORMULAS.md §7.2).
            for (int64_t seq : {std::max<int64_t>(1, m.seqLen / 2), m.seqLen, 2 * m.seqLen})
                attentionShapes.insert({mb, seq, m.heads, m.kvHeads * 1000 + m.hidden / m.heads});
            hidden.emplace(m.hidden, m.hidden / m.heads);
        }
    }
    for (const auto& [n, c] : rowShapes) {
        struct Bufs { Tensor x, dy, gamma, beta, y, dx, mean, rstd, dgamma, dbeta, h, dh; };
        auto bufs = rotating((6 * n * c + 2 * n + 4 * c) * e, [&] {
            Bufs t{randomTensor(be, {n, c}, MemoryCategory::Buffers, 3), randomTensor(be, {n, c}, MemoryCategory::Buffers, 4),
                   randomTensor(be, {c}, MemoryCategory::Buffers, 5), randomTensor(be, {c}, MemoryCategory::Buffers, 6),
                   be.zeros({n, c}, MemoryCategory::Buffers), be.zeros({n, c}, MemoryCategory::Buffers),
                   be.zeros({n}, MemoryCategory::Buffers), be.zeros({n}, MemoryCategory::Buffers),
                   be.zeros({c}, MemoryCategory::Buffers), be.zeros({c}, MemoryCategory::Buffers), Tensor{}, Tensor{}};
            if (c % 2 == 0) {
                t.h = be.zeros({n, c / 2}, MemoryCategory::Buffers);
                t.dh = randomTensor(be, {n, c / 2}, MemoryCategory::Buffers, 7);
            }
            return t;
        });
        Tensor noBeta;
        const std::map<std::string, int64_t> shape{{"rows", n}, {"cols", c}};
        const double normBytes = kernel_cost::normBytes(n, c, e);
        for (bool rms : {false, true}) {
            auto s = shape;
            s["rms"] = rms;
            record(measure("norm_forward",
                           [&] {
                               Bufs& t = bufs();
                               be.normForward(t.x, t.gamma, t.beta, rms, 1e-5, t.y, t.mean, t.rstd);
                           }),
                   s, 0.0, normBytes);
            record(measure("norm_backward",
                           [&] {
                               Bufs& t = bufs();
                               be.normBackward(t.dy, t.x, t.gamma, t.mean, t.rstd, rms, t.dx, t.dgamma, rms ? noBeta : t.dbeta);
                           }),
                   s, 0.0, kernel_cost::kBackwardByteFactor * normBytes);
        }
        const double geluBytes = kernel_cost::activationBytes(false, n, c, e);
        record(measure("gelu_forward", [&] { Bufs& t = bufs(); be.activationForward(t.x, t.y, Pointwise::Gelu); }), shape, 0.0, geluBytes);
        record(measure("gelu_backward", [&] { Bufs& t = bufs(); be.activationBackward(t.dy, t.x, t.dx, Pointwise::Gelu); }), shape, 0.0,
               kernel_cost::kBackwardByteFactor * geluBytes);
        if (c % 2 == 0) {
            const double swigluBytes = kernel_cost::activationBytes(true, n, c / 2, e);
            auto s = shape;
            s["cols"] = c / 2;
            record(measure("swiglu_forward", [&] { Bufs& t = bufs(); be.gluForward(t.x, t.h, Pointwise::Silu); }), s, 0.0, swigluBytes);
            record(measure("swiglu_backward", [&] { Bufs& t = bufs(); be.gluBackward(t.dh, t.x, t.dx, Pointwise::Silu); }), s, 0.0,
                   kernel_cost::kBackwardByteFactor * swigluBytes);
        }
        const double residual = kernel_cost::residualBytes(n, c, e, 0);
        record(measure("residual_forward", [&] { Bufs& t = bufs(); be.add(t.dy, t.y); }), shape, 0.0, residual);
        record(measure("residual_backward", [&] { Bufs& t = bufs(); be.add(t.dy, t.dx); }), shape, 0.0,
               kernel_cost::kBackwardByteFactor * residual);
        if (hidden.count(c)) {
            // RoPE over the hidden width as the model's heads.
            const int64_t d = hidden.at(c);
            std::vector<int64_t> positions(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) positions[static_cast<size_t>(i)] = i % 1024;
            const double ropeBytes = kernel_cost::ropeBytes(n, c, e);
            record(measure("rope_forward", [&] { Tensor r = bufs().x.view({n, c / d, d}); be.rope(r, positions, 10000.0, d, false); }),
                   shape, 0.0, ropeBytes);
            record(measure("rope_backward", [&] { Tensor r = bufs().x.view({n, c / d, d}); be.rope(r, positions, 10000.0, d, true); }),
                   shape, 0.0, kernel_cost::kBackwardByteFactor * ropeBytes);
            // Embedding lookup over a vocabulary of 256 byte tokens (the executor's tokenizer).
            const int64_t vocab = 256;
            struct Tables { Tensor table, dtable; };
            auto tables = rotating(2 * vocab * c * e, [&] {
                return Tables{randomTensor(be, {vocab, c}, MemoryCategory::Buffers, 8), be.zeros({vocab, c}, MemoryCategory::Buffers)};
            });
            std::vector<int32_t> tokens(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) tokens[static_cast<size_t>(i)] = static_cast<int32_t>((i * 37) % vocab);
            record(measure("embedding_forward", [&] { be.embeddingForward(tokens, tables().table, 0, bufs().y); }), shape,
                   0.0, kernel_cost::embeddingForwardBytes(n, c, e));
            record(measure("embedding_backward", [&] { be.embeddingBackward(tokens, bufs().dy, 0, tables().dtable); }),
                   shape, 0.0, kernel_cost::embeddingBackwardBytes(n, c, e));
        }
    }
    for (const auto& [n, v] : vocabShapes) {
        auto logits = rotating(n * v * e, [&] { return randomTensor(be, {n, v}, MemoryCategory::Buffers, 9, 4.0); });
        std::vector<int32_t> targets(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) targets[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7) % v);
        std::vector<double> mx, se;
        const double bytes = kernel_cost::crossEntropyBytes(n, v, e);
        const std::map<std::string, int64_t> shape{{"rows", n}, {"cols", v}};
        record(measure("cross_entropy_forward",
                       [&] {
                           Tensor& l = logits();
                           mx = be.rowMax(l);
                           se = be.rowSumExp(l, mx);
                           (void)be.targetLogits(l, targets, 0);
                       }),
               shape, 0.0, bytes);
        record(measure("cross_entropy_backward",
                       [&] { be.crossEntropyBackward(logits(), mx, se, targets, 0, 1.0 / static_cast<double>(n)); }),
               shape, 0.0, kernel_cost::kBackwardByteFactor * bytes);
    }
    for (const auto& [sequences, seq, heads, kvd] : attentionShapes) {
        const int64_t kvHeads = kvd / 1000, d = kvd % 1000;
        const int64_t T = sequences * seq;
        struct Bufs { Tensor q, k, v, dout, o, lse, dq, dk, dv; };
        auto bufs = rotating((5 * T * heads * d + 4 * T * kvHeads * d + T * heads) * e, [&] {
            return Bufs{randomTensor(be, {T, heads, d}, MemoryCategory::Buffers, 10),
                        randomTensor(be, {T, kvHeads, d}, MemoryCategory::Buffers, 11),
                        randomTensor(be, {T, kvHeads, d}, MemoryCategory::Buffers, 12),
                        randomTensor(be, {T, heads, d}, MemoryCategory::Buffers, 13),
                        be.zeros({T, heads, d}, MemoryCategory::Buffers), be.zeros({T, heads}, MemoryCategory::Buffers),
                        be.zeros({T, heads, d}, MemoryCategory::Buffers), be.zeros({T, kvHeads, d}, MemoryCategory::Buffers),
                        be.zeros({T, kvHeads, d}, MemoryCategory::Buffers)};
        });
        std::vector<int64_t> pos(static_cast<size_t>(seq));
        std::iota(pos.begin(), pos.end(), 0);
        const std::map<std::string, int64_t> shape{
            {"sequences", sequences}, {"seq", seq}, {"heads", heads}, {"kv_heads", kvHeads}, {"head_dim", d}};
        const double flops = kernel_cost::flashAttentionFlops(sequences, heads, seq, seq, d);
        const double bytes = kernel_cost::attentionBytes(T, heads * d, kvHeads * d, e);
        record(measure("attention_forward",
                       [&] {
                           Bufs& t = bufs();
                           be.attentionForward(t.q, t.k, t.v, sequences, pos, pos, t.o, t.lse);
                       }),
               shape, flops, bytes);
        record(measure("attention_backward",
                       [&] {
                           Bufs& t = bufs();
                           be.attentionBackward(t.dout, t.q, t.k, t.v, t.o, t.lse, sequences, pos, pos, t.dq, t.dk, t.dv);
                       }),
               shape, kernel_cost::kFlashBackwardFlopFactor * flops, kernel_cost::kBackwardByteFactor * bytes);
    }
    // AdamW over parameter counts around a layer's share.
    std::set<int64_t> paramCounts{4096, 65536};
    for (const ModelConfig& m : o.models) paramCounts.insert(12 * m.hidden * m.hidden);
    if (!o.quick) paramCounts.insert(1 << 20);
    for (int64_t n : paramCounts) {
        // As in training: the moments are optimizer state (fp32 beside bf16 weights and grads on CUDA).
        struct Bufs { Tensor w, g, m, v; };
        auto bufs = rotating(4 * n * e, [&] {
            return Bufs{randomTensor(be, {n}, MemoryCategory::Weights, 14), randomTensor(be, {n}, MemoryCategory::Grads, 15),
                        be.zeros({n}, MemoryCategory::Optimizer), be.zeros({n}, MemoryCategory::Optimizer)};
        });
        int64_t step = 0;
        const auto& recipe = recipeFor(be);
        record(measure("adamw",
                       [&] {
                           Bufs& t = bufs();
                           be.adamw(t.w, t.g, t.m, t.v, 1e-4, 0.9, 0.95, 1e-8, 0.1, ++step);
                       }),
               {{"parameters", n}}, kernel_cost::optimizerFlops(static_cast<double>(n)),
               kernel_cost::optimizerBytes(static_cast<double>(n), recipe));
    }
    // Device memory bandwidth: a copy between two buffers reads and writes each byte once (nccl-tests and
    // STREAM "copy" count both), over sizes from 1 MiB to 256 MiB (quick: 16 MiB), past any cache.
    for (int64_t bytes = int64_t{1} << 20; bytes <= (o.quick ? int64_t{16} << 20 : int64_t{256} << 20); bytes *= 4) {
        const int64_t n = bytes / e;
        struct Bufs { Tensor src, dst; };
        auto bufs = rotating(2 * n * e, [&] {
            return Bufs{randomTensor(be, {n}, MemoryCategory::Buffers, 16), be.zeros({n}, MemoryCategory::Buffers)};
        });
        record(measure("copy_device_to_device", [&] { Bufs& t = bufs(); be.copy(t.src, t.dst); }), {{"elements", n}}, 0.0,
               2.0 * static_cast<double>(n * e));
    }
    return out;
}

std::vector<BenchPoint> runCommBenchmarks(Backend& be, Comm& comm, const Group& g, const BenchOptions& o) {
    std::vector<BenchPoint> out;
    const int n = g.size();
    const int64_t e = elemBytes(be);
    // Members agree on the sample count (the mean of their wishes, rounded up) so they run the same calls.
    const BenchSync sync{[&] { comm.barrier(g); }, [&](int wish) {
                             const double total = comm.allReduceHost({static_cast<double>(wish)}, g).at(0);
                             return static_cast<int>(std::ceil(total / n));
                         }};
    const int64_t maxBytes = o.quick ? std::min<int64_t>(o.maxMessageBytes, int64_t{8} << 20) : o.maxMessageBytes;
    for (int64_t bytes = 8; bytes <= maxBytes; bytes *= 4) {
        // Buffers as nccl-tests sizes them: `bytes` is the full buffer (all-gather output, reduce-scatter input).
        const int64_t elems = std::max<int64_t>(n, (bytes / e) / n * n);
        const int64_t per = elems / n;
        const double size = static_cast<double>(elems * e);
        auto add = [&](const std::string& kernel, const std::function<void()>& body) {
            BenchPoint p = summarize(kernel, timeSamples([&] { body(); be.synchronize(); }, sync, o));
            p.groupSize = n;
            p.bytes = size;
            p.shape = {{"elements", elems}};
            out.push_back(std::move(p));
        };
        // Cold buffers, as in training (coldSets above): gradients were written by the backward, parameters read
        // by the optimizer.
        const int sets = coldSets(3 * elems * e);
        std::vector<Tensor> full, full2, part;
        for (int i = 0; i < sets; ++i) {
            full.push_back(randomTensor(be, {elems}, MemoryCategory::Buffers, 20));
            full2.push_back(be.zeros({elems}, MemoryCategory::Buffers));
            part.push_back(randomTensor(be, {per}, MemoryCategory::Buffers, 21));
        }
        int next = 0;
        auto set = [&] { return static_cast<size_t>(next++ % sets); };
        add("all_reduce", [&] { comm.allReduce(full[set()], g); });
        add("all_gather", [&] { const size_t i = set(); comm.allGather(part[i], full2[i], g); });
        add("reduce_scatter", [&] { const size_t i = set(); comm.reduceScatter(full[i], part[i], g); });
        add("broadcast", [&] { comm.broadcast(full[set()], 0, g); });
        add("all_to_all", [&] { const size_t i = set(); comm.allToAll(full[i], full2[i], g); });
        if (n >= 2) {
            add("send_recv", [&] {
                const size_t i = set();
                if (g.myIndex == 0) comm.send(full[i], g.ranks[1], 7);
                else if (g.myIndex == 1) comm.recv(full2[i], g.ranks[0], 7);
            });
        }
    }
    return out;
}

nlohmann::json benchPointToJson(const BenchPoint& p, int rank, const std::string& device, const std::string& dtype) {
    nlohmann::json shape = nlohmann::json::object();
    for (const auto& [k, v] : p.shape) shape[k] = v;
    return {{"schema_version", 1},
            {"kind", "microbenchmark"},
            {"kernel", p.kernel},
            {"shape", shape},
            {"flops", p.flops},
            {"bytes", p.bytes},
            {"group_size", p.groupSize},
            {"samples", p.samples},
            {"median_seconds", p.medianSeconds},
            {"min_seconds", p.minSeconds},
            {"max_seconds", p.maxSeconds},
            {"p10_seconds", p.p10Seconds},
            {"p90_seconds", p.p90Seconds},
            {"rank", rank},
            {"device", device},
            {"dtype", dtype}};
}

} // namespace tessel::exec
