// Which elements dropout drops: a counter-based generator (Philox4x32-10) keyed by the step and read at each element's
// coordinates in the model (sequence of the step, position, column or head and key), one definition for the CPU
// reference backend and the CUDA kernels.
//
// Why counter-based and not a stream: a mask read at the element's global coordinates is the same whatever the plan
// (the rank that holds the element, the micro-batch it is in, whether the layer is recomputed), so a plan on N ranks
// trains the very model one rank trains, and a recomputed forward or a backward finds the forward's mask without
// keeping it or restoring a generator's state (Megatron-LM's CudaRNGStatesTracker; FlashAttention regenerates its
// attention-dropout mask from Philox the same way). Philox is written here because the host and the device must
// agree bit for bit; cuRAND's device Philox has no host twin in a Debian package.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TESSEL_DROPOUT_HD __host__ __device__
#else
#define TESSEL_DROPOUT_HD
#endif

namespace tessel::exec {

// Philox4x32-10 (Salmon, Moraes, Dror & Shaw 2011, "Parallel random numbers: as easy as 1, 2, 3", §3.2; the
// Random123 reference's constants and round order, checked against its kat_vectors in the tests).
struct Philox4x32 {
    uint32_t v[4];
};

TESSEL_DROPOUT_HD inline Philox4x32 philox4x32(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                               uint32_t k1) {
    constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += kW0;
            k1 += kW1;
        }
        const uint64_t p0 = static_cast<uint64_t>(kM0) * c0, p1 = static_cast<uint64_t>(kM1) * c2;
        const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
        const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
        const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
    return {{c0, c1, c2, c3}};
}

// Where in the model a mask is read: the embedding's output, the attention's probabilities, and the attention and MLP
// blocks' outputs before their residual add (Megatron-LM's embedding_dropout, attention_dropout and the two
// bias-dropout-adds; a parallel block's one output).
enum class DropoutSite : uint32_t { Embedding = 0, Attention = 1, AttentionOutput = 2, MlpOutput = 3 };

// One dropout call. p: the probability an element is dropped (0: none); kept elements are scaled by 1 / (1 - p)
// (inverted dropout, as torch.nn.Dropout). key: the step's key (from the run's seed and the step index). Within a
// step an element is named by its sequence (the step's global sequence index, the same on every data-parallel rank
// layout), the layer, the site, and two coordinates: (position, column) for a hidden state, (query position, key
// position) for an attention probability, with the model's head beside the site.
struct DropoutRule {
    double p = 0.0;
    uint64_t key = 0;
    uint32_t layer = 0;
    DropoutSite site = DropoutSite::Embedding;
    TESSEL_DROPOUT_HD bool active() const { return p > 0.0; }
};

// Layers and heads a mask can name (the site word packs layer, head and site into 32 bits).
constexpr int64_t kDropoutMaxLayers = 1 << 14;
constexpr int64_t kDropoutMaxHeads = 1 << 16;

// One draw serves four neighbours: the elements (sequence, a, 4 g + i), i = 0..3, read word i of Philox at counter
// (a, g, sequence, site word) under the step's key (a kernel walking b in order draws once per four elements).
// head: the model's head (0 for a hidden state).
TESSEL_DROPOUT_HD inline Philox4x32 dropoutDraw(const DropoutRule& r, int64_t sequence, int64_t a, int64_t group,
                                                int64_t head = 0) {
    const uint32_t word = (r.layer << 18) | (static_cast<uint32_t>(head) << 2) | static_cast<uint32_t>(r.site);
    return philox4x32(static_cast<uint32_t>(a), static_cast<uint32_t>(group), static_cast<uint32_t>(sequence), word,
                      static_cast<uint32_t>(r.key), static_cast<uint32_t>(r.key >> 32));
}

// A word of a draw, read as a fraction of 2^32, keeps its element when it is at least p.
TESSEL_DROPOUT_HD inline bool dropoutKeepsWord(const DropoutRule& r, uint32_t word) {
    return static_cast<double>(word) * (1.0 / 4294967296.0) >= r.p;
}

// Whether the element at (sequence, a, b) is kept: word b mod 4 of the draw of group b / 4.
TESSEL_DROPOUT_HD inline bool dropoutKeeps(const DropoutRule& r, int64_t sequence, int64_t a, int64_t b,
                                           int64_t head = 0) {
    return dropoutKeepsWord(r, dropoutDraw(r, sequence, a, b >> 2, head).v[b & 3]);
}

// dropoutKeeps for one (sequence, a, head) walking b: the last group's draw is kept, so b in order takes one Philox
// draw per four elements (the CUDA attention kernels' walk over a query's keys). Any order gives dropoutKeeps.
struct DropoutWalk {
    int64_t group = -1;
    Philox4x32 draw{};
    TESSEL_DROPOUT_HD bool keeps(const DropoutRule& r, int64_t sequence, int64_t a, int64_t b, int64_t head = 0) {
        if ((b >> 2) != group) {
            group = b >> 2;
            draw = dropoutDraw(r, sequence, a, group, head);
        }
        return dropoutKeepsWord(r, draw.v[b & 3]);
    }
};

// The factor an element is multiplied by: 1 / (1 - p) kept, 0 dropped, 1 without dropout.
TESSEL_DROPOUT_HD inline double dropoutFactor(const DropoutRule& r, int64_t sequence, int64_t a, int64_t b,
                                              int64_t head = 0) {
    if (!r.active()) return 1.0;
    return dropoutKeeps(r, sequence, a, b, head) ? 1.0 / (1.0 - r.p) : 0.0;
}

} // namespace tessel::exec
