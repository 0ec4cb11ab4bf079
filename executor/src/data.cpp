// Deterministic byte-level data loader over a text: the same global batch whatever the parallel plan.
#include "tessel/exec/data.hpp"

#include "tessel/cost/errors.hpp"

#include <fstream>
#include <memory>
#include <sstream>

namespace tessel::exec {

namespace {
uint64_t mix(uint64_t x) { // SplitMix64 finaliser
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
} // namespace

DataSource textDataSource(std::string text, int64_t seqLen, int microBatch, int globalBatch, int dp, uint64_t seed) {
    if (static_cast<int64_t>(text.size()) < seqLen + 1)
        throw InputError("data", "the text has " + std::to_string(text.size()) + " bytes, fewer than seq_len + 1 = " +
                                     std::to_string(seqLen + 1));
    auto shared = std::make_shared<const std::string>(std::move(text));
    const int perReplica = globalBatch / dp;
    return [shared, seqLen, microBatch, perReplica, seed](int step, int dpIndex, int mb) {
        const std::string& t = *shared;
        const uint64_t span = t.size() - static_cast<uint64_t>(seqLen) - 1;
        MicroBatchData d;
        d.sequences = microBatch;
        d.seqLen = seqLen;
        d.firstSequence = static_cast<int64_t>(dpIndex) * perReplica + static_cast<int64_t>(mb) * microBatch;
        d.dropoutKey = mix(mix(seed) ^ (static_cast<uint64_t>(step) * 0x9e3779b97f4a7c15ULL + 0x64726f70ULL)); // "drop"
        d.tokens.reserve(static_cast<size_t>(microBatch * seqLen));
        d.targets.reserve(static_cast<size_t>(microBatch * seqLen));
        for (int i = 0; i < microBatch; ++i) {
            const uint64_t g = static_cast<uint64_t>(dpIndex) * static_cast<uint64_t>(perReplica) +
                               static_cast<uint64_t>(mb) * static_cast<uint64_t>(microBatch) + static_cast<uint64_t>(i);
            const uint64_t start = mix(seed ^ mix(static_cast<uint64_t>(step) * 0x100000001b3ULL ^ mix(g))) % (span + 1);
            for (int64_t k = 0; k < seqLen; ++k) {
                d.tokens.push_back(static_cast<unsigned char>(t[start + static_cast<uint64_t>(k)]));
                d.targets.push_back(static_cast<unsigned char>(t[start + static_cast<uint64_t>(k) + 1]));
            }
        }
        return d;
    };
}

std::string readTextFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path, "cannot open the training text");
    std::ostringstream buf;
    buf << in.rdbuf();
    if (buf.str().empty()) throw InputError(path, "the training text is empty");
    return buf.str();
}

} // namespace tessel::exec
