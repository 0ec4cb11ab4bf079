// What a run leaves on disk: per-rank measurements (JSON lines), memory peaks and losses, and the merged
// measurements, Chrome trace (the simulator's action names), memory and loss files in the run folder.
#pragma once

#include "tessel/cost/model.hpp"
#include "tessel/cost/plan.hpp"
#include "tessel/exec/backend.hpp"
#include "tessel/exec/runtime.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace tessel::exec {

// Checks that the executor can run `plan` for `model` on `backend` ("cpu" or "cuda"; beyond validatePlan):
// features it does not run yet, non-memory-efficient attention, a precision recipe the backend does
// not implement (cpu: cpu_fp64 and cpu_fp32; cuda: mixed and fp32). An unknown backend is a problem at --backend.
void validateExecutable(const ModelConfig& model, const Plan& plan, const std::string& pointer, ProblemList& problems,
                        const std::string& backend = "cpu");
// What the executor's latent attention (model.mla) does not run, each at its model field: qk_norm, q/k/v biases,
// kv_heads other than heads, a position embedding other than RoPE, an odd rotary width, value heads wider than q's.
void latentAttentionProblems(const ModelConfig& model, ProblemList& problems);

// One measurement record (DESIGN.md §3): rank, action, shapes/bytes, group, timing, device and versions.
nlohmann::json measurementToJson(const ActionRecord& r, const std::string& device);
// The software this run used, for provenance.
nlohmann::json softwareVersions();

// The process's peak resident set (VmHWM of /proc/self/status) in bytes; 0 where the kernel does not say.
// On the CPU backend this is the rank's "device" memory: tensors plus runtime, MPI buffers and allocator slack,
// the counterpart of a GPU's reserved bytes that `tessel calibrate` fits.
int64_t processPeakResidentBytes();

// Writes `text` to `path` through `path.tmp` and a rename, so a reader never sees half a file.
void writeFileAtomically(const std::string& path, const std::string& text);

// Merges the rank files under `dir` (rank-R/measurements.jsonl, rank-R/memory.json) into
// dir/measurements.jsonl, dir/trace.json and dir/memory.json. Returns the number of records.
size_t mergeRunOutputs(const std::string& dir, int worldSize);

} // namespace tessel::exec
