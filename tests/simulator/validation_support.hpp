// Shared by the validation tests: a small published-run record a reader can check by hand, and its reading.
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
    EXPECT_TRUE(loaded[0].validationCase.has_value()) << loaded[0].refusal;
    return *loaded[0].validationCase;
}

inline bool mentions(const std::vector<std::string>& assumptions, const std::string& what) {
    return std::any_of(assumptions.begin(), assumptions.end(),
                       [&](const std::string& a) { return a.find(what) != std::string::npos; });
}

} // namespace tessel::sim::test
