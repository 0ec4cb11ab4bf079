// Bytes and FLOPs of single kernels (kernel_cost in compute.hpp): the formulas the cost model's ops, the CUDA
// backend's launch plan and the trace importer share (FORMULAS.md §3).
#include "tessel/cost/compute.hpp"

#include <algorithm>
#include <cmath>

namespace tessel {
namespace {
double d(int64_t v) { return static_cast<double>(v); }
} // namespace

namespace kernel_cost {
double gemmFlops(int64_t m, int64_t n, int64_t k) { return 2.0 * d(m) * d(n) * d(k); }
double gemmBytes(int64_t m, int64_t n, int64_t k, int e) { return e * (d(m) * d(k) + d(k) * d(n) + d(m) * d(n)); }
double normBytes(int64_t rows, int64_t cols, int e) { return 2.0 * e * d(rows) * d(cols); }
double activationBytes(bool swiglu, int64_t rows, int64_t outCols, int e) {
    return (swiglu ? 3.0 : 2.0) * e * d(rows) * d(outCols);
}
double ropeBytes(int64_t tokens, int64_t rotatedCols, int e) { return 2.0 * e * d(tokens) * d(rotatedCols); }
double residualBytes(int64_t rows, int64_t cols, int e, int maskBytes, int streamBytes) {
    return (2.0 * streamBytes + e + maskBytes) * d(rows) * d(cols);
}
double residualBytes(int64_t rows, int64_t cols, int e, int maskBytes) { return residualBytes(rows, cols, e, maskBytes, e); }
double autocastCastBytes(double elements, int e, int r) { return (r + e) * elements; }
double unpadForwardBytes(double qkv, double out, int e) { return 2.0 * e * qkv + 3.0 * e * out; }
double unpadBackwardBytes(double qkv, double out, int e) { return 3.0 * e * qkv + 2.0 * e * out; }
double embeddingForwardBytes(int64_t tokens, int64_t hidden, int e) { return 8.0 * d(tokens) + 2.0 * e * d(tokens) * d(hidden); }
double embeddingBackwardBytes(int64_t tokens, int64_t hidden, int e) { return 3.0 * e * d(tokens) * d(hidden); }
double crossEntropyBytes(int64_t tokens, int64_t vocab, int e) { return (e + 4.0 + 4.0) * d(tokens) * d(vocab); }
double softmaxBytes(double elements, int e) { return 2.0 * e * elements; }
double alibiBiasBytes(double scores, int e) { return 2.0 * e * scores; }
double eagerRmsNormBytes(int64_t rows, int64_t cols, int e) { return (4.0 * e + 28.0) * d(rows) * d(cols); }
double eagerRmsNormBackwardFactor(int e) { return (6.0 * e + 52.0) / (4.0 * e + 28.0); }
double eagerScaleMaskSoftmaxBytes(double scores, int e) { return 6.0 * e * scores; }
double eagerScaleMaskSoftmaxBackwardFactor() { return 7.0 / 6.0; }
double eagerSoftcapBytes(double elements, int e) { return 6.0 * e * elements; }
double eagerRopeBytes(int64_t tokens, int64_t rotatedCols, int e) { return (2.0 * e + 16.0) * d(tokens) * d(rotatedCols); }
double eagerSwigluBytes(int64_t rows, int64_t outCols, int e) { return 5.0 * e * d(rows) * d(outCols); }
double eagerAttentionLayoutBytes(int64_t tokens, int64_t qCols, int64_t kvCols, int e) {
    // repeat_kv writes K and V at every query head and reads them once (none when kv heads = heads); the output
    // transpose(1, 2).contiguous() reads and writes it.
    const double expand = kvCols < qCols ? 2.0 * e * (d(qCols) + d(kvCols)) : 0.0;
    return (expand + 2.0 * e * d(qCols)) * d(tokens);
}
double eagerCrossEntropyBytes(int64_t tokens, int64_t vocab, int e) { return (e + 16.0) * d(tokens) * d(vocab); }
double eagerCrossEntropyBackwardFactor(int e) { return (20.0 + e) / (e + 16.0); }
namespace {
double unfusedCastBytes(int e) { return e < 4 ? 4.0 + e : 0.0; } // .float() copies only a narrower type
} // namespace
double unfusedCrossEntropyBytes(int64_t tokens, int64_t vocab, int e) {
    return (unfusedCastBytes(e) + 32.0) * d(tokens) * d(vocab);
}
double unfusedCrossEntropyBackwardFactor(int e) { return (8.0 + unfusedCastBytes(e)) / (unfusedCastBytes(e) + 32.0); }
double compiledCrossEntropyBytes(int64_t tokens, int64_t vocab, int e) { return e * d(tokens) * d(vocab); }
double eager16BitCrossEntropyBytes(int64_t tokens, int64_t vocab, int e) { return 4.0 * e * d(tokens) * d(vocab); }
int64_t fusedLinearCrossEntropyChunkTokens(int64_t tokens, int64_t vocab, int64_t hidden) {
    const int64_t incFactor = std::max<int64_t>(1, (vocab + hidden - 1) / std::max<int64_t>(1, hidden));
    const int64_t want = std::max<int64_t>(1, (tokens + incFactor - 1) / incFactor);
    int64_t chunk = 1;
    while (chunk < want) chunk *= 2; // triton.next_power_of_2
    return std::min(chunk, std::max<int64_t>(1, tokens));
}
double fusedLinearCrossEntropyBytes(int64_t tokens, int64_t vocab, int64_t hidden, int e) {
    return 3.0 * e * d(tokens) * d(vocab) + 4.0 * d(tokens) + e * (d(tokens) + d(vocab)) * d(hidden);
}
// Autocast's cast of the logits to fp32 (e in, 4 out) and log_softmax over them (4 in, 4 out); nll_loss reads one
// log-probability a row and nothing is kept for a backward.
double metricCrossEntropyBytes(int64_t tokens, int64_t vocab, int e) { return (e + 12.0) * d(tokens) * d(vocab); }
double fp8CastForwardBytes(double castInputs, int e) { return (e + 1.0) * castInputs; }
double fp8CastBackwardBytes(double outputs, double inputs, int e, bool transposes) {
    return transposes ? (e + 2.0) * outputs + 2.0 * inputs : (e + 1.0) * outputs;
}
double fp8CurrentScalingForwardBytes(double castInputs, double normFusedInputs, int e) {
    return e * castInputs + (e + 1.0) * normFusedInputs;
}
double fp8CurrentScalingBackwardBytes(double outputs, int e) { return e * outputs; }
double nvfp4CastForwardBytes(double inputs, double amaxInputs, int e, double q) {
    return (e + 2.0 * q) * inputs + e * amaxInputs;
}
double nvfp4CastBackwardBytes(double outputs, int e, double q, bool stochasticRounding) {
    return e * outputs + (e + 2.0 * q) * outputs * (stochasticRounding ? kNvfp4StochasticRoundingTimeFactor : 1.0);
}
double dropoutBytes(double elements, int e) { return (2.0 * e + 1.0) * elements; }
double flashAttentionFlops(int64_t sequences, int64_t heads, int64_t seqQ, int64_t seqKv, int64_t qkHeadDim, int64_t vHeadDim) {
    return 0.5 * 2.0 * d(sequences) * d(heads) * d(seqQ) * d(seqKv) * d(qkHeadDim + vHeadDim);
}
double flashAttentionFlops(int64_t sequences, int64_t heads, int64_t seqQ, int64_t seqKv, int64_t headDim) {
    return flashAttentionFlops(sequences, heads, seqQ, seqKv, headDim, headDim);
}
double attentionBytes(int64_t tokens, int64_t qCols, int64_t kCols, int64_t vCols, int64_t oCols, int e) {
    return e * d(tokens) * d(qCols + kCols + vCols + oCols);
}
double attentionBytes(int64_t tokens, int64_t qCols, int64_t kvCols, int e) { return attentionBytes(tokens, qCols, kvCols, kvCols, qCols, e); }
double ringMergeForwardBytes(RingMerge style, double eq, double ekv, int cp, int e) {
    const double steps = cp - 1;
    if (style == RingMerge::PyTorch) {
        // _templated_ring_attention: each step's output cast to fp32 (e + 4), merged by out - sigmoid(lse_b - lse)
        // * (out - out_b) as three eager ops over fp32 (12 + 8 + 12); step 0's cast and the final cast back
        // (2 (e + 4)); K and V concatenated into the send buffer before each of the cp-1 later steps (2 x 2e).
        return (2.0 * (e + 4) + steps * (e + 36.0)) * eq + steps * 4.0 * e * ekv;
    }
    // AttnFuncWithCPAndKVP2P: K, V packed once into the first send buffer (4e); the first half of the arriving K, V
    // made contiguous at each later step (2e); an fp32 output zeroed (4), corrected in place once per step by a
    // fused kernel (read the step's output e, read and write 8), cast back at the end (4 + e).
    return (8.0 + e + cp * (e + 8.0)) * eq + (4.0 * e + steps * 2.0 * e) * ekv;
}
double ringMergeBackwardBytes(RingMerge style, double eq, double ekv, int cp, int e) {
    const double steps = cp - 1;
    if (style == RingMerge::PyTorch) {
        // _templated_ring_attention_backward: dq, dk, dv zeroed in fp32 (4 + 8); K, V concatenated to send at the
        // cp-1 later steps (4e); step 0 adds dk, dv (2 (8 + e)) and concatenates them to send (16); each later step
        // adds its half of dk, dv into the arriving fp32 buffer through chunk + cat (2 ((8 + e) / 2 + 8)) and
        // concatenates them to send (16); dq += each step's (8 + e); dq and the final dk, dv cast back (4 + e).
        return (8.0 + e + cp * (8.0 + e)) * eq + (48.0 + 4.0 * e + steps * (40.0 + 5.0 * e)) * ekv;
    }
    // TE accumulates dq and dk, dv in the activation type: dq copied at one step (2e) and added at the others
    // (3e); K, V copied into the send buffer (4e); the full dk, dv added at the causal step (2 x 3e) and their
    // first halves at the later ones (3e), each of which also makes the first half of K, V contiguous (2e).
    return (2.0 * e + steps * 3.0 * e) * eq + (10.0 * e + steps * 5.0 * e) * ekv;
}
double scoreGemmFlops(int64_t sequences, int64_t heads, int64_t seqQ, int64_t seqKv, int64_t headDim, bool backward) {
    return (backward ? 10.0 : 4.0) * d(sequences) * d(heads) * d(seqQ) * d(seqKv) * d(headDim);
}
double scoreGemmBytes(int64_t sequences, int64_t heads, int64_t seqQ, int64_t seqKv, int64_t headDim, int e,
                      bool backward) {
    const double scores = d(sequences) * d(heads) * d(seqQ) * d(seqKv);
    const double rows = d(sequences) * d(heads) * (backward ? 7.0 : 2.0) * d(seqQ + seqKv);
    return scores * (backward ? 16.0 + 6.0 * e : 8.0 + 2.0 * e) + rows * d(headDim) * e;
}
int64_t scoreGemmBytesPerHead(int64_t seqQ, int64_t seqKv, int e) {
    return std::max<int64_t>(seqQ, 1) * std::max<int64_t>(seqKv, 1) * (4 + e);
}
int64_t scoreGemmKvHeadsPerChunk(int64_t seqQ, int64_t seqKv, int64_t kvHeads, int e) {
    return std::clamp<int64_t>(kScoreGemmWorkspaceBytes / scoreGemmBytesPerHead(seqQ, seqKv, e), 1,
                               std::max<int64_t>(kvHeads, 1));
}
int64_t scoreGemmSteps(int64_t sequences, int64_t queryHeads, int64_t kvHeads, int64_t seqQ, int64_t seqKv, int e) {
    kvHeads = std::max<int64_t>(kvHeads, 1);
    const int64_t group = std::max<int64_t>(queryHeads / kvHeads, 1);
    const int64_t perChunk = scoreGemmKvHeadsPerChunk(seqQ, seqKv, kvHeads, e);
    return std::max<int64_t>(sequences, 1) * group * ((kvHeads + perChunk - 1) / perChunk);
}
double optimizerFlops(double parameters) { return 12.0 * parameters; }
double optimizerAuxBytes(double parameters, const PrecisionRecipe& recipe) {
    // Megatron-LM's optimizer step (optimizer.py: get_grad_norm_fp32 reads every main gradient;
    // _copy_main_params_to_model_params reads the fp32 master and writes the model weights; zero_grad_buffer
    // clears the gradient buffer) and PyTorch's clip_grad_norm_ + zero_grad: memory-bound passes.
    double perParam = 2.0 * recipe.gradBytes;                                    // norm read + zeroing write
    if (recipe.masterBytes > 0) perParam += recipe.masterBytes + recipe.weightBytes; // master -> weights copy
    // FP8 and NVFP4: the new weights are cast once a step into their cached quantized copies.
    if (recipe.quantizedWeightCopyBytes > 0.0) perParam += recipe.weightBytes + recipe.quantizedWeightCopyBytes;
    return perParam * parameters;
}
double foreachOptimizerExtraBytes(double parameters, const PrecisionRecipe& recipe) {
    // torch.optim's _multi_tensor_adamw (PyTorch 2.5-2.6 adamw.py), one pass per op over every tensor:
    // _foreach_mul_(params) for the decay 2p, _foreach_lerp_(exp_avgs, grads) 2m + g, _foreach_mul_(exp_avg_sqs)
    // 2m, _foreach_addcmul_(exp_avg_sqs, grads, grads) 2m + 2g, _foreach_sqrt into a new list 2m, _foreach_div_ and
    // _foreach_add_ on it 4m, _foreach_addcdiv_(params, exp_avgs, denom) 2p + 2m: 4p + 14m + 3g against the fused
    // kernel's 2p + 4m + g. fp32: 84 B against 28; measured on an H100, 31.9 ms against 11.6 for 1.0 B parameters
    // (bench/torchtitan_block_probe.py, data/gpu/h100-2026-11-26/call4-torchtitan-block/block2.json).
    const double p = recipe.masterBytes > 0 ? recipe.masterBytes : recipe.weightBytes;
    return (2.0 * p + 10.0 * recipe.momentBytes + 2.0 * recipe.gradBytes) * parameters;
}
double optimizerBytes(double parameters, const PrecisionRecipe& recipe) {
    // AdamW reads the grad, reads and writes the master (or the weights) and both moments, and writes the
    // low-precision weights when a master copy exists; memory bound.
    const double master = recipe.masterBytes > 0 ? recipe.masterBytes : recipe.weightBytes;
    double perParam = recipe.gradBytes + 2.0 * master + 4.0 * recipe.momentBytes;
    if (recipe.masterBytes > 0) perParam += recipe.weightBytes;
    return perParam * parameters;
}
const std::vector<std::string>& kernelNames() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n{"gemm", "adamw", "embedding_forward", "embedding_backward"};
        for (const char* k : {"attention", "norm", "gelu", "swiglu", "rope", "residual", "cross_entropy", "permute", "softmax"}) {
            n.push_back(std::string(k) + "_forward");
            n.push_back(std::string(k) + "_backward");
        }
        return n;
    }();
    return names;
}

const std::vector<std::string>& transferNames() {
    static const std::vector<std::string> names{"copy_device_to_device", "copy_host_to_device", "copy_device_to_host"};
    return names;
}
} // namespace kernel_cost

} // namespace tessel
