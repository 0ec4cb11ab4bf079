// Translation of a HuggingFace transformers config.json (llama, mistral, mixtral, gpt2, qwen2) into a ModelConfig.
#pragma once

#include "tessel/cost/errors.hpp"
#include "tessel/cost/model.hpp"

#include <nlohmann/json.hpp>

namespace tessel {

// True when `doc` looks like a HuggingFace config (it has "model_type" and no "schema_version").
bool isHuggingFaceConfig(const nlohmann::json& doc);

// Maps the config's fields onto a ModelConfig; unsupported model_type or missing fields are recorded
// as problems with their JSON pointer. Keys tessel does not need are ignored (the format is foreign).
ModelConfig parseHuggingFaceConfig(const nlohmann::json& doc, const std::string& pointer, ProblemList& problems);

} // namespace tessel
