// One published record's reading in progress (validation_plan.cpp and the step files beside it): the state its steps
// share and the steps that read the run's numerics. Internal to the simulator library.
#pragma once

#include "tessel/sim/validation.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>

namespace tessel::sim::detail {

// One record's reading in progress: what each step reads from the record and writes into the case.
struct Reading {
    const nlohmann::json& rec;
    const std::string& ptr;
    ValidationCase& c;
    std::string& refusal;
    const nlohmann::json sys;  // the record's "system" (an empty object when absent)
    const nlohmann::json pl;   // its "plan"
    const std::string source;  // its source and source_url, for the year and the framework
    const std::string framework;
    int64_t world = 0;              // GPUs in all (readCluster)
    bool microBatchAssumed = false; // one micro-batch a step, the framework's default (readBatch)
    bool llmFoundry = false;        // MosaicML's llm-foundry / Composer model code (readFramework)
    // What the record did not state and tessel took, listed with the case.
    void assume(std::string what) { c.assumptions.push_back(std::move(what)); }
    // A field the record states in words tessel does not read: named with its value and what is taken
    // instead, so that an unread statement is never reported as an unstated one ("plan/recompute
    // \"sometimes\" names no recompute tessel reads (...): read as not stated").
    void unread(const std::string& field, const std::string& value, const std::string& expected,
                const std::string& taken) {
        assume(field + " \"" + value + "\" names no " + expected + ": " + taken);
    }
};


// The step of validation_pipeline.cpp, run after the cluster and batch steps: virtual stages, the schedule and the
// split of the layers over the stages. False with `refusal` set when the record cannot be read.
bool readPipeline(Reading& r);

// The step of validation_framework.cpp, run after the pipeline step: the framework, its version and its settings.
bool readFramework(Reading& r);

// The numerics, run after the cluster, batch, pipeline and framework steps: the precision recipe, ZeRO stage and
// hybrid sharding (validation_numerics.cpp); the attention kernel (validation_attention.cpp); recompute and SP raised
// until the plan fits, and the checks of the finished plan (validation_recompute.cpp). Each returns false with
// `refusal` set when the record cannot be read.
bool readPrecisionAndSharding(Reading& r);
bool readAttention(Reading& r);
bool readRecomputeAndCheck(Reading& r);

} // namespace tessel::sim::detail
