// Deterministic, sharding-independent parameter initialisation from named full tensors.
#include "tessel/exec/params.hpp"

#include "tessel/cost/errors.hpp"

#include <algorithm>
#include <cmath>

namespace tessel::exec {

namespace {
// SplitMix64 (Steele, Lea & Flood 2014): a bijective mixer, good enough to key a normal draw on an index.
uint64_t splitMix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t hashName(const std::string& s) {
    uint64_t h = 1469598103934665603ULL; // FNV-1a 64
    for (unsigned char c : s) {
        h ^= c;
        h *= 1099511628211ULL;
    }
    return h;
}

double uniform01(uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
} // namespace

double initialValue(uint64_t seed, const ParamPiece& piece, int64_t row, int64_t col, InitKind kind, double stdDev) {
    if (kind == InitKind::Ones) return 1.0;
    if (kind == InitKind::Zeros) return 0.0;
    const uint64_t index = static_cast<uint64_t>(row * piece.fullCols + col);
    const uint64_t key = splitMix64(seed ^ splitMix64(hashName(piece.fullName)) ^ splitMix64(index * 2 + 1));
    const double u1 = uniform01(splitMix64(key));
    const double u2 = uniform01(splitMix64(key ^ 0x5851f42d4c957f2dULL));
    // Box-Muller transform (Box & Muller 1958).
    return stdDev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

int64_t localRows(const ParamInfo& info) {
    int64_t r = 0;
    for (const auto& p : info.pieces) r = std::max(r, p.localRow + (p.rowEnd - p.rowBegin));
    return r;
}

int64_t localCols(const ParamInfo& info) {
    int64_t c = 0;
    for (const auto& p : info.pieces) c = std::max(c, p.localCol + (p.colEnd - p.colBegin));
    return c;
}

void initialiseParameters(Backend& backend, std::vector<Parameter>& params, uint64_t seed, bool allocateGrads) {
    for (auto& p : params) {
        const int64_t rows = localRows(p.info), cols = localCols(p.info);
        if (rows <= 0 || cols <= 0) throw RuntimeError("parameter " + p.info.name + " has no elements");
        std::vector<double> host(static_cast<size_t>(rows * cols), 0.0);
        for (const auto& piece : p.info.pieces)
            for (int64_t r = piece.rowBegin; r < piece.rowEnd; ++r)
                for (int64_t c = piece.colBegin; c < piece.colEnd; ++c) {
                    const int64_t lr = piece.localRow + (r - piece.rowBegin);
                    const int64_t lc = piece.localCol + (c - piece.colBegin);
                    host[static_cast<size_t>(lr * cols + lc)] = initialValue(seed, piece, r, c, p.info.init, p.info.initStd);
                }
        p.value = backend.empty({rows, cols}, MemoryCategory::Weights);
        backend.upload(host, p.value);
        if (allocateGrads) p.grad = backend.zeros({rows, cols}, MemoryCategory::Grads);
    }
}

} // namespace tessel::exec
