// Shared by the validation tests: small published-run records a reader can check by hand, and their reading.
#pragma once

#include "tessel/sim/validation.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace tessel::sim::test {

// A GPT 7B on 32 A100 80 GB (4 DGX nodes) under Megatron-LM, throughput given, several fields unstated.
inline nlohmann::json record() {
    return nlohmann::json::parse(R"json({
      "id": "test-run", "group": "g1", "kind": "training_throughput",
      "source": "Someone et al., 'A paper' (arXiv:2205.01234)",
      "model": {"name": "GPT 7B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": null, "ffn_hidden": null,
                "vocab": 51200, "seq": 2048, "params": null},
      "system": {"gpu": "A100-SXM4-80GB", "gpus_per_node": 8, "nodes": 4, "total_gpus": 32,
                 "intra_node_link": "NVLink", "inter_node_link": "8x NVIDIA Mellanox 200Gb/s HDR InfiniBand HCAs per node",
                 "precision": "bf16"},
      "plan": {"tp": 4, "pp": 2, "dp": 4, "cp": 1, "ep": 1, "vpp": 1, "micro_batch": 2, "global_batch": 64,
               "recompute": "full (every layer)", "sequence_parallel": true, "zero": 0,
               "distributed_optimizer": true, "framework": "Megatron-LM"},
      "measured": {"iteration_time_s": null, "tokens_per_s": 65536.0, "mfu": null, "memory_gb": null},
      "derived": {}
    })json");
}

// The record read as a scenario; a refusal fails the calling test with its reason.
inline ValidationCase load(const nlohmann::json& rec) {
    auto loaded = loadValidationRecords(nlohmann::json::array({rec}), "runs.json");
    EXPECT_EQ(loaded.size(), 1u);
    if (loaded.size() != 1u || !loaded[0].validationCase) {
        ADD_FAILURE() << "refused: " << (loaded.empty() ? std::string() : loaded[0].refusal);
        return ValidationCase{}; // the failure is reported; the caller's checks then fail rather than crash
    }
    return *loaded[0].validationCase;
}

// The record's refusal: it must be refused (one record, no scenario); the caller checks the reason names the field.
inline std::string refusalOf(const nlohmann::json& rec) {
    auto loaded = loadValidationRecords(nlohmann::json::array({rec}), "runs.json");
    EXPECT_EQ(loaded.size(), 1u);
    if (loaded.size() != 1u) return "";
    EXPECT_FALSE(loaded[0].validationCase.has_value()) << "read, not refused";
    return loaded[0].refusal;
}

inline bool mentions(const std::vector<std::string>& assumptions, const std::string& what) {
    return std::any_of(assumptions.begin(), assumptions.end(),
                       [&](const std::string& a) { return a.find(what) != std::string::npos; });
}

// The record on `nodes` nodes of 8 GPUs at tp x pp with dp 1 and micro-batch 1.
inline nlohmann::json onNodes(nlohmann::json r, int nodes, int tp, int pp) {
    r["system"]["nodes"] = nodes;
    r["system"]["total_gpus"] = nodes * 8;
    r["plan"]["tp"] = tp;
    r["plan"]["pp"] = pp;
    r["plan"]["dp"] = 1;
    r["plan"]["micro_batch"] = 1;
    return r;
}

// The record's 32 GPUs as pure data parallelism (tp 1, pp 1, no sequence parallelism).
inline void dataParallelOnly(nlohmann::json& r) {
    r["plan"]["tp"] = 1;
    r["plan"]["pp"] = 1;
    r["plan"]["dp"] = 32;
    r["plan"]["sequence_parallel"] = false;
}

// Llama 3 405B as Meta describes it (Llama Team 2024, §3.3.2): 126 layers on 16 pipeline stages, one layer fewer
// on the first and the last; context parallelism 16 for the long-context stage; FP8 on H100.
inline nlohmann::json llama405(int gpus, int cp, int seq) {
    nlohmann::json r = record();
    r["id"] = "llama3-405b";
    r["model"] = {{"name", "Llama 3 405B"}, {"layers", 126}, {"hidden", 16384}, {"heads", 128}, {"kv_heads", 8},
                  {"ffn_hidden", 53248}, {"vocab", 128256}, {"seq", seq}, {"params", 405e9}};
    r["system"] = {{"gpu", "H100-SXM5-80GB"}, {"gpus_per_node", 8}, {"nodes", gpus / 8}, {"total_gpus", gpus},
                   {"intra_node_link", "NVLink"}, {"inter_node_link", "RoCE 400 Gb/s"}, {"precision", "bf16"}};
    r["plan"] = {{"tp", 8}, {"pp", 16}, {"cp", cp}, {"dp", gpus / (8 * 16 * cp)}, {"ep", 1}, {"vpp", 1},
                 {"micro_batch", 1}, {"global_batch", gpus / (8 * 16 * cp) * 16}, {"recompute", "selective"},
                 {"sequence_parallel", true}, {"zero", 1}, {"distributed_optimizer", true}, {"framework", "Megatron-LM"}};
    return r;
}

} // namespace tessel::sim::test
