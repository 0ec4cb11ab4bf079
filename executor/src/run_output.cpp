// Run outputs: executor feasibility checks, measurement records, atomic files, and the merge of per-rank
// files into the run folder's measurements, Chrome trace and memory report.
#include "tessel/exec/run_output.hpp"

#include "tessel/exec/dropout.hpp"

#include "tessel/cost/errors.hpp"
#include "tessel/cost/json_reader.hpp"

#include <Eigen/Core>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace tessel::exec {

void latentAttentionProblems(const ModelConfig& model, ProblemList& problems) {
    if (!model.mla) return;
    // DeepSeek-V2/V3 have none of these; each would need its own code in the executor's latent attention.
    if (model.qkNorm) problems.add("/model/qk_norm", "latent attention (mla) has its own latent norms, not qk_norm");
    if (model.qkvBias) problems.add("/model/qkv_bias", "latent attention (mla) has no q, k, v biases");
    if (model.kvHeads != model.heads)
        problems.add("/model/kv_heads", "latent attention (mla) gives every head its own key and value: kv_heads must "
                                        "equal heads");
    if (model.position != PositionEmbedding::Rope)
        problems.add("/model/position_embedding", "latent attention (mla) rotates its decoupled key: it needs rope");
    if (model.mla->qkRopeHeadDim < 2 || model.mla->qkRopeHeadDim % 2 != 0)
        problems.add("/model/mla/qk_rope_head_dim", "RoPE rotates pairs of columns: an even width of at least 2");
    if (model.mla->vHeadDim > model.mla->qkHeadDim())
        problems.add("/model/mla/v_head_dim", "the executor pads each value head to the query heads' width (qk_nope_head_dim + "
                                              "qk_rope_head_dim = " + std::to_string(model.mla->qkHeadDim()) +
                                              "): v_head_dim " + std::to_string(model.mla->vHeadDim) + " is wider");
}

void validateExecutable(const ModelConfig& model, const Plan& plan, const std::string& pointer, ProblemList& problems,
                        const std::string& backend) {
    if (model.moe) {
        // Megatron refuses MoE with TP but without SP; the executor splits the experts over TP (etp = tp) only.
        if (plan.tp > 1 && !plan.sequenceParallel)
            problems.add(pointer + "/sequence_parallel", "mixture-of-experts layers with tp > 1 need sequence parallelism "
                                                         "(Megatron-LM and Megatron-core refuse them without)");
        // Its schedule runs one action at a time, so a prediction with the overlap would meet a run without it.
        if (moeA2aOverlapOf(plan.framework))
            problems.add(pointer + "/moe_a2a_overlap", "the executor runs the expert all-to-all exposed (no batch-level "
                                                       "overlap yet); it is predicted and exported, not run by tessel run");
    }
    // DualPipeV's V puts the embedding and the output layer on rank 0, as separate copies of a tied matrix that the
    // executor would have to sum on the rank (it syncs them across stages only, over the embedding group).
    if (plan.vShape() && model.tiedEmbeddings)
        problems.add("/model/tied_embeddings", toString(plan.schedule) + " holds both ends of the model on rank 0, where the executor keeps "
                                               "two copies of a tied embedding and syncs them only across stages; use a "
                                               "model with untied embeddings, or another schedule");
    // Its overlapped forward-backward pairs hide the expert all-to-all in the prediction; the executor runs each pair's
    // two chunks one after the other, all-to-alls exposed, as it does for moe_a2a_overlap.
    if (plan.schedule == Schedule::DualPipeV && model.moe && plan.ep > 1)
        problems.add(pointer + "/schedule", "dualpipev hides the expert all-to-all of its overlapped forward-backward pairs, "
                                            "which the executor runs one after the other; predicted and exported, not run "
                                            "by tessel run with ep > 1");
    // Selective recompute: the executor runs every one of Megatron-core's recompute modules (core_attn keeps only the
    // log-sum-exp either way), so none is refused here.
    if (model.mtpLayers > 0)
        problems.add("/model/mtp_layers", "the executor trains the next token only; multi-token prediction is predicted and "
                                          "exported (Megatron-LM --mtp-num-layers), not run by tessel run yet");
    latentAttentionProblems(model, problems);
    if (model.attentionSinks)
        problems.add("/model/attention_sinks", "the executor's attention softmax has no learned sink (gpt-oss's); predicted "
                                               "and exported (Megatron-core --softmax-type learnable), not run by tessel run yet");
    if (model.dropout > 0.0 && (model.layers >= kDropoutMaxLayers || model.heads >= kDropoutMaxHeads))
        problems.add("/model/dropout", "the executor's dropout masks name at most " + std::to_string(kDropoutMaxLayers) +
                                           " layers and " + std::to_string(kDropoutMaxHeads) + " heads");
    // The executor's loss writes the gradient into the logits (tessel run marks its plans loss_in_place, costed as te);
    // a plan that names another kernel would be predicted with memory the run does not have.
    if (plan.framework.crossEntropy && *plan.framework.crossEntropy != "te")
        problems.add(pointer + "/cross_entropy", "the executor computes its own loss, the gradient written into the logits "
                                                 "(te's); " + *plan.framework.crossEntropy + " is predicted and exported, "
                                                 "not run by tessel run: unset cross_entropy or set te");
    // The executor lets go of the logits as the head's backward ends; a plan that holds them would be predicted with
    // memory the run does not have.
    if (plan.framework.logitsHeldThroughBackward.value_or(false))
        problems.add(pointer + "/logits_held_through_backward",
                     "the executor frees the logits as the head's backward ends; held logits are predicted, not run by "
                     "tessel run: unset logits_held_through_backward or set false");
    // The executor runs its own kernels, no torch.compile graph: a plan costed with one's gradients held at once
    // would be predicted with memory the run does not have.
    if (compileWholeModelOf(plan.framework))
        problems.add(pointer + "/compile_whole_model",
                     "the executor compiles no graph; a whole-model torch.compile is predicted, not run by tessel run: "
                     "unset compile_whole_model or set false");
    if (!plan.flashAttention)
        problems.add(pointer + "/flash_attention",
                     "the executor's attention keeps only the log-sum-exp (memory-efficient); set flash_attention true");
    // Each backend runs its own recipes: the CPU one float64 or float32 throughout, the CUDA one bf16 with fp32
    // master weights and moments ("mixed") or fp32 throughout (the same rule as cudaPrecisionOf, kept here so
    // that `tessel run` can check it without linking the CUDA libraries).
    const bool cpuRecipe = plan.precision == "cpu_fp64" || plan.precision == "cpu_fp32";
    const bool cudaRecipe = plan.precision == "mixed" || plan.precision == "fp32";
    if (backend == "cpu") {
        if (!cpuRecipe)
            problems.add(pointer + "/precision", "the cpu backend runs the cpu_fp64 or cpu_fp32 recipe, not \"" +
                                                     plan.precision + "\"" +
                                                     (cudaRecipe ? " (run that recipe with --backend cuda)" : ""));
    } else if (backend == "cuda") {
        if (!cudaRecipe)
            problems.add(pointer + "/precision", "the cuda backend runs the mixed (bf16 with fp32 master weights and "
                                                 "Adam moments) or fp32 recipe, not \"" + plan.precision + "\"" +
                                                     (cpuRecipe ? " (run that recipe with --backend cpu)" : ""));
        // Its 16-bit kernels are bf16: an fp16 plan (half_dtype, Volta) would run as something it does not say.
        else if (plan.precision == "mixed" && halfDtypeOf(plan.framework) == "fp16")
            problems.add(pointer + "/half_dtype", "the cuda backend computes the mixed recipe in bf16, not fp16 (its "
                                                  "kernels have no fp16 path); drop half_dtype, or run fp32");
        // Soft-capped, windowed and ALiBi scores and attention dropout run on its tiled attention kernels
        // (CudaBackend::attentionForward), built for head widths of 16, 32, 64 and 128.
        const bool tiledWidth = model.headDim == 16 || model.headDim == 32 || model.headDim == 64 || model.headDim == 128;
        const std::pair<bool, const char*> rules[] = {
            {model.attentionSoftcap > 0.0, "/model/attention_softcap"},
            {model.slidingWindow > 0, "/model/sliding_window"},
            {model.position == PositionEmbedding::Alibi, "/model/position_embedding"},
            {model.dropout > 0.0, "/model/dropout"}};
        for (const auto& [used, field] : rules)
            if (used && !tiledWidth)
                problems.add(field, std::string("the cuda backend applies it to the attention scores in its tiled "
                                                "kernels, which take head_dim 16, 32, 64 or 128, not ") +
                                        std::to_string(model.headDim) + "; run with --backend cpu");
    } else {
        problems.add("--backend", "unknown backend \"" + backend + "\"; the executor has cpu and cuda");
    }
}

int64_t processPeakResidentBytes() {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
        if (line.rfind("VmHWM:", 0) != 0) continue;
        std::istringstream in(line.substr(6));
        int64_t kib = 0;
        in >> kib;
        return kib * 1024;
    }
    return 0;
}

nlohmann::json softwareVersions() {
    return {{"tessel", "0.1.0"},
            {"compiler", __VERSION__},
            {"eigen", std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
                          std::to_string(EIGEN_MINOR_VERSION)}};
}

nlohmann::json measurementToJson(const ActionRecord& r, const std::string& device) {
    nlohmann::json j{{"schema_version", 1},
                     {"step", r.step},
                     {"rank", r.rank},
                     {"stage", r.stage},
                     {"index", r.index},
                     {"action", r.name},
                     {"kind", r.kind},
                     {"micro_batch", r.microBatch},
                     {"chunk", r.chunk},
                     {"start_seconds", r.startSeconds},
                     {"duration_seconds", r.durationSeconds},
                     {"device", device}};
    if (r.bucket >= 0) j["bucket"] = r.bucket;
    if (!r.group.empty()) {
        j["group"] = r.group;
        j["group_size"] = r.groupSize;
    }
    if (r.peerRank >= 0) j["peer_rank"] = r.peerRank;
    if (r.bytes > 0) j["bytes"] = r.bytes;
    return j;
}

void writeFileAtomically(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw RuntimeError("cannot write \"" + tmp + "\"");
        out << text;
        out.flush();
        if (!out) throw RuntimeError("cannot write \"" + tmp + "\"");
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::error_code ignored;
        std::filesystem::remove(tmp, ignored); // leave no half-named file behind
        throw RuntimeError("cannot rename \"" + tmp + "\" to \"" + path + "\": " + ec.message());
    }
}

namespace {
int streamOfKind(const std::string& kind) {
    if (kind == "send_activation" || kind == "send_grad") return 1;
    if (kind == "recv_activation" || kind == "recv_grad") return 2;
    if (kind == "collective") return 3;
    return 0;
}
} // namespace

size_t mergeRunOutputs(const std::string& dir, int worldSize) {
    namespace fs = std::filesystem;
    std::string lines;
    nlohmann::json events = nlohmann::json::array();
    nlohmann::json memory = nlohmann::json::array();
    size_t records = 0;
    const char* streams[] = {"compute", "pp_send", "pp_recv", "dp"};
    for (int r = 0; r < worldSize; ++r) {
        const fs::path rankDir = fs::path(dir) / ("rank-" + std::to_string(r));
        std::ifstream in(rankDir / "measurements.jsonl");
        if (!in) throw RuntimeError("rank " + std::to_string(r) + " left no measurements in " + rankDir.string());
        events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", r}, {"args", {{"name", "rank " + std::to_string(r)}}}});
        for (int s = 0; s < 4; ++s)
            events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", r}, {"tid", s}, {"args", {{"name", streams[s]}}}});
        for (std::string line; std::getline(in, line);) {
            if (line.empty()) continue;
            lines += line + "\n";
            ++records;
            const nlohmann::json m = nlohmann::json::parse(line);
            nlohmann::json args{{"stage", m["stage"]}, {"chunk", m["chunk"]}, {"index", m["index"]}, {"step", m["step"]}};
            if (m["micro_batch"].get<int>() >= 0) args["micro_batch"] = m["micro_batch"];
            for (const char* k : {"bucket", "group", "group_size", "peer_rank", "bytes"})
                if (m.contains(k)) args[k] = m[k];
            events.push_back({{"ph", "X"},
                              {"name", m["action"]},
                              {"cat", m["kind"]},
                              {"pid", r},
                              {"tid", streamOfKind(m["kind"].get<std::string>())},
                              {"ts", m["start_seconds"].get<double>() * 1e6},
                              {"dur", m["duration_seconds"].get<double>() * 1e6},
                              {"args", args}});
        }
        memory.push_back(readJsonFile((rankDir / "memory.json").string()));
    }
    writeFileAtomically((fs::path(dir) / "measurements.jsonl").string(), lines);
    writeFileAtomically((fs::path(dir) / "trace.json").string(),
                        nlohmann::json{{"traceEvents", events},
                                       {"displayTimeUnit", "ms"},
                                       {"otherData", {{"source", "tessel measured"}}}}
                                .dump() +
                            "\n");
    writeFileAtomically((fs::path(dir) / "memory.json").string(),
                        nlohmann::json{{"schema_version", 1}, {"ranks", memory}}.dump(2) + "\n");
    return records;
}

} // namespace tessel::exec
