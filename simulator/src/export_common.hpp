// What export.cpp, export_deepspeed.cpp and export_torchtitan.cpp share: text helpers, the recipe families, the
// rank-order check, and the DeepSpeed and torchtitan exporters' entry points (Megatron-LM's stays in export.cpp).
#pragma once

#include "tessel/cost/errors.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"
#include "tessel/cost/scenario.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tessel::sim::export_detail {

std::string str(int64_t v);
std::string displayName(const Scenario& s);
// PyTorch FSDP's mixed precision (fp32 shards): fsdp, fsdp_pure, fsdp_fp8.
bool isFsdpRecipe(const std::string& precision);
// FP8 GEMMs: Transformer Engine's recipe (fp8) or torchao's under FSDP (fsdp_fp8).
bool isFp8Recipe(const std::string& precision);
// bf16 weights with an fp32 master: megatron, mixed.
bool isHalfRecipe(const std::string& precision);
// Records a problem unless the plan's rank order builds the same groups as one the framework can lay out.
void checkRankOrder(const Plan& p, const std::vector<std::array<ParallelDim, 5>>& layouts,
                    const std::string& framework, const std::string& how, ProblemList& problems);

// What no exporter writes because it is the model's or the training script's code, not the framework's settings: a
// plan that needs it (attention_unpad, llm-foundry's unpadded flash attention; tf32, PyTorch's allow_tf32) is refused by
// every framework. `framework` is the target's name in messages ("Megatron-LM"), `codeName` tessel's name for it
// ("megatron", FrameworkSettings::name), whose defaults say what its model code does.
void modelCodeRules(const ModelConfig& m, const Plan& p, const std::string& framework, const std::string& codeName,
                    ProblemList& problems);
// The optimizer state tessel predicted (16-bit master remainders, bf16 state) where `framework` cannot keep it;
// `remainders`: the framework has a master-remainder optimizer.
void optimizerStateRules(const Plan& p, const std::string& framework, bool remainders, ProblemList& problems);

using O = std::array<ParallelDim, 5>;
constexpr auto Tp = ParallelDim::Tp;
constexpr auto Cp = ParallelDim::Cp;
constexpr auto Ep = ParallelDim::Ep;
constexpr auto Dp = ParallelDim::Dp;
constexpr auto Pp = ParallelDim::Pp;

// The plans DeepSpeed cannot run, every one at its plan pointer; and the ds_config.json of one it can.
void deepSpeedRules(const ModelConfig& m, const ClusterConfig& cluster, const Plan& p, ProblemList& problems, bool withOrder);
std::string exportDeepSpeed(const Scenario& s, ProblemList& problems);

// The plans torchtitan cannot run, every one at its plan pointer; and the TOML job config of one it can.
void torchtitanRules(const ModelConfig& m, const ClusterConfig& cluster, const Plan& p, ProblemList& problems, bool withOrder);
std::string exportTorchtitan(const Scenario& s, ProblemList& problems);

} // namespace tessel::sim::export_detail
