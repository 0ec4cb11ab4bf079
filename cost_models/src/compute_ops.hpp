// The ops every compute block is built from (a GEMM, a memory-bound kernel, a norm as the framework runs it) and the
// passes that finish a block (kernel times at the block's tensor-core share, gradient accumulation, FSDP's copies):
// shared by compute.cpp (the transformer layer) and compute_ends.cpp (embedding, output layer, MTP, optimizer); and
// attention's own ops, compute_attention.cpp's, which the layer calls.
#pragma once

#include "tessel/cost/compute.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::compute_detail {

double d(int64_t v);
// A GEMM (m x k) @ (k x n), `count` of them: 2mnk FLOPs each; reads A and B, writes C.
OpCost gemm(std::string name, int64_t m, int64_t n, int64_t k, int bytesPerElem, double count = 1.0);
// A memory-bound op; `kernel` names its kernel without the phase ("norm" -> "norm_forward"/"norm_backward").
OpCost memoryOp(std::string name, std::string kernel, double bytes);
// Soft-capping over `elements` scores or logits (ModelConfig::attentionSoftcap, logitSoftcap): three eager ops each
// way (kernel_cost::eagerSoftcapBytes), no weights.
OpCost softcapOp(const char* name, double elements, int e);
// A pre-norm (or the final norm) as the framework runs it (FORMULAS.md §3.4, §3.5).
OpCost normOp(const char* name, const ModelConfig& model, const LocalShapes& s, bool eager, bool autocast);
// Times every op's kernels at the block's sustained tensor-core share and sums them into its phases.
// Times the block's ops and sums them by phase; selective recompute reruns the ops of `modules` (recompute_module bits).
void finishBlock(BlockCompute& b, const ClusterConfig& cluster, Dtype dtype, Recompute recompute,
                 uint8_t modules = recompute_module::Default);
// This micro-batch's weight gradients of `parameters` added into the step's (FORMULAS.md §3.6).
void addGradAccumulation(BlockCompute& b, double parameters, const ClusterConfig& cluster, const Plan& plan,
                         const PrecisionRecipe& recipe);
// PyTorch FSDP's copies around a sharded unit's collectives (FORMULAS.md §3.7).
void addFsdpCopies(BlockCompute& b, double parameters, const ClusterConfig& cluster, const Plan& plan,
                   const PrecisionRecipe& recipe);
// Both passes over a block's `parameters`: the gradient accumulation and FSDP's copies.
void addParameterPasses(BlockCompute& b, double parameters, const ClusterConfig& cluster, const Plan& plan,
                        const PrecisionRecipe& recipe);

// Attention's own ops (compute_attention.cpp, FORMULAS.md §3.2):
// QK^T and PV of one rank's heads, seqQ queries against seqKv keys, counted whole (a causal kernel does half).
double attentionCoreFlops(const LocalShapes& s, int64_t seqQ, int64_t seqKv);
// The keys a sliding window leaves the queries, over those the causal mask leaves (1 without a window).
double slidingWindowKeyFraction(int64_t seq, int64_t window);
// Multi-head latent attention's projections, in place of the QKV GEMM.
void addLatentProjections(std::vector<OpCost>& ops, const ModelConfig& model, const LocalShapes& s, const Plan& plan,
                          bool eager);
// The load-balanced context-parallel ring's steps and merges in place of the causal kernel `att`.
void addRingAttention(std::vector<OpCost>& ops, const OpCost& att, const LocalShapes& s, const Plan& plan, int e);
// The other context-parallel exchanges' kernels and copies (a2a, a2a+p2p, allgather) in place of `att`.
void addCpAttention(std::vector<OpCost>& ops, const OpCost& att, const LocalShapes& s, const Plan& plan, int e);

} // namespace tessel::compute_detail
