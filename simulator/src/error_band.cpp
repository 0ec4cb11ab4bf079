// Validated error bands per kind of run (GPU family x framework family) and the tie test the search uses.
#include "tessel/sim/error_band.hpp"

#include "tessel/cost/errors.hpp"
#include "tessel/cost/json_reader.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <system_error>

namespace tessel::sim {

std::string gpuFamily(const std::string& gpuName) {
    std::string g = gpuName;
    std::transform(g.begin(), g.end(), g.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    // The PCIe cards are families of their own: their links and power limits are not the SXM parts', so the SXM
    // parts' validated error does not vouch for them (no published run on them is in a check set).
    const bool pcie = g.find("PCIE") != std::string::npos;
    // GB300 before the B300 its name holds, GB200 before the B200, the MI250X before the MI250.
    for (const char* family : {"H200", "H100", "A100", "V100", "GB300", "B300", "GB200", "B200", "MI355X", "MI350X", "MI325X", "MI300X", "MI250X", "MI250"})
        if (g.find(family) != std::string::npos) return pcie ? std::string(family) + " PCIe" : std::string(family);
    return "other";
}

std::string gpuFamilyKind(const std::string& family) { return family + " (every framework)"; }

std::string siblingGpuFamily(const std::string& family) {
    if (family == "B300") return "B200";
    if (family == "GB300") return "GB200";
    if (family == "MI250") return "MI250X";
    if (family == "MI350X") return "MI355X";
    return "";
}

std::string frameworkFamily(const Plan& plan) {
    const std::string& name = plan.framework.name;
    const bool modelParallel = plan.tp > 1 || plan.pp > 1;
    if (name == "deepspeed" && modelParallel) return "DeepSpeed pipeline";
    const bool shardedOnly = name == "generic" && plan.zeroStage >= 3 && !modelParallel;
    return name == "fsdp" || name == "torchtitan" || name == "deepspeed" || shardedOnly
               ? "sharded data parallel"
               : "Megatron-style";
}

std::string runKind(const ClusterConfig& cluster, const Plan& plan, bool moe) {
    return gpuFamily(cluster.gpu.name) + " / " + frameworkFamily(plan) +
           (plan.cp > 1 ? " / context parallel" : "") + (moe ? " / mixture of experts" : "");
}

namespace {
// The fallback band's kind, as data/validation/error_bands.json stores it.
const char* const kOverallKind = "all published runs";

ErrorBand bandOf(const std::string& kind, std::vector<double> errors) {
    ErrorBand b;
    b.kind = kind;
    b.records = static_cast<int>(errors.size());
    if (errors.empty()) return b;
    double sum = 0.0;
    for (double e : errors) sum += e;
    b.meanSignedError = sum / static_cast<double>(errors.size());
    for (double& e : errors) e = std::fabs(e);
    std::sort(errors.begin(), errors.end());
    const size_t n = errors.size();
    b.medianAbsError = medianOf(errors);
    // The 90th percentile by the nearest-rank rule.
    b.p90AbsError = errors[std::min(n - 1, static_cast<size_t>(std::ceil(0.9 * static_cast<double>(n))) - 1)];
    return b;
}
} // namespace

ErrorBands computeErrorBands(const std::vector<LoadedRecord>& records, const ValidationReport& report,
                             const std::string& source) {
    ErrorBands out;
    out.source = source;
    std::map<std::string, std::vector<double>> byKind;
    std::vector<std::string> order;
    std::vector<double> all, contextParallel, moe;
    std::map<std::string, std::vector<double>> byFamily;
    std::vector<std::string> families;
    for (size_t i = 0; i < report.results.size() && i < records.size(); ++i) {
        const CaseResult& r = report.results[i];
        if (!r.stepError || !records[i].validationCase) continue;
        const Scenario& s = records[i].validationCase->scenario;
        const bool isMoe = s.model.moe.has_value();
        const std::string kind = runKind(s.cluster, s.plan, isMoe);
        if (!byKind.count(kind)) order.push_back(kind);
        byKind[kind].push_back(*r.stepError);
        const std::string family = gpuFamilyKind(gpuFamily(s.cluster.gpu.name));
        if (!byFamily.count(family)) families.push_back(family);
        byFamily[family].push_back(*r.stepError);
        all.push_back(*r.stepError);
        if (s.plan.cp > 1) contextParallel.push_back(*r.stepError);
        if (isMoe) moe.push_back(*r.stepError);
    }
    for (const auto& k : order) out.kinds.push_back(bandOf(k, byKind[k]));
    if (!contextParallel.empty()) out.kinds.push_back(bandOf(kContextParallelKind, contextParallel));
    if (!moe.empty()) out.kinds.push_back(bandOf(kMoeKind, moe));
    for (const auto& f : families) out.kinds.push_back(bandOf(f, byFamily[f]));
    out.overall = bandOf(kOverallKind, all);

    std::map<std::string, std::vector<double>> memoryByKind;
    std::vector<std::string> memoryOrder;
    std::vector<double> memoryAll;
    for (size_t i = 0; i < report.results.size() && i < records.size(); ++i) {
        const CaseResult& r = report.results[i];
        if (!r.memoryError || !records[i].validationCase) continue;
        const std::string kind = memoryKind(records[i].validationCase->scenario.plan);
        if (!memoryByKind.count(kind)) memoryOrder.push_back(kind);
        memoryByKind[kind].push_back(*r.memoryError);
        memoryAll.push_back(*r.memoryError);
    }
    for (const auto& k : memoryOrder) out.memoryKinds.push_back(bandOf(k, memoryByKind[k]));
    out.memoryOverall = bandOf(kOverallKind, memoryAll);
    return out;
}

std::string bandRunsText(const std::string& kind) {
    if (kind == kCalibratedKind) return "runs this cluster was calibrated on, each held out";
    return kind == kOverallKind ? std::string("runs of every kind (none of this kind)") : kind + " runs";
}

std::string bandSourceText(const std::string& kind) {
    return kind == kCalibratedKind ? bandRunsText(kind) : "published " + bandRunsText(kind);
}

std::string bandCommand(const std::string& kind) { return kind == kCalibratedKind ? "tessel calibrate" : "tessel validate"; }

std::optional<ErrorBand> calibratedErrorBand(const ClusterConfig& cluster) {
    if (!cluster.calibration || !cluster.calibration->is_object()) return std::nullopt;
    const auto it = cluster.calibration->find("step_runs");
    if (it == cluster.calibration->end() || !it->is_array()) return std::nullopt;
    std::vector<double> heldOut;
    for (const auto& run : *it)
        if (run.is_object() && run.contains("error_held_out") && run["error_held_out"].is_number())
            heldOut.push_back(run["error_held_out"].get<double>());
    if (static_cast<int>(heldOut.size()) < kGpuFamilyMinRecords) return std::nullopt;
    return bandOf(kCalibratedKind, heldOut);
}

nlohmann::json toJson(const ErrorBands& bands) {
    auto one = [](const ErrorBand& b) {
        return nlohmann::json{{"kind", b.kind},
                              {"records", b.records},
                              {"median_abs_error", b.medianAbsError},
                              {"p90_abs_error", b.p90AbsError},
                              {"mean_signed_error", b.meanSignedError}};
    };
    nlohmann::json kinds = nlohmann::json::array(), memoryKinds = nlohmann::json::array();
    for (const auto& k : bands.kinds) kinds.push_back(one(k));
    for (const auto& k : bands.memoryKinds) memoryKinds.push_back(one(k));
    return {{"schema_version", 1},
            {"generated_by", "tessel validate --write-bands"},
            {"source", bands.source},
            {"kinds", kinds},
            {"overall", one(bands.overall)},
            {"memory_kinds", memoryKinds},
            {"memory_overall", one(bands.memoryOverall)}};
}

ErrorBands parseErrorBands(const nlohmann::json& doc, const std::string& pointer) {
    ProblemList problems;
    ErrorBands out;
    ObjectReader r(doc, pointer, problems);
    auto band = [&](const nlohmann::json& j, const std::string& ptr) {
        ObjectReader br(j, ptr, problems);
        ErrorBand b;
        b.kind = br.requireString("kind");
        b.records = static_cast<int>(br.requireInt("records", 0, 1 << 30));
        b.medianAbsError = br.requireNumber("median_abs_error", 0.0, 100.0);
        b.p90AbsError = br.requireNumber("p90_abs_error", 0.0, 100.0);
        b.meanSignedError = br.requireNumber("mean_signed_error", -100.0, 100.0);
        br.finish();
        return b;
    };
    if (r.isObject()) {
        r.requireInt("schema_version", 1, 1);
        r.optString("generated_by", "");
        out.source = r.optString("source", "");
        auto bandList = [&](const char* key, std::vector<ErrorBand>& into) {
            if (const auto* k = r.child(key)) {
                if (!k->is_array()) problems.add(r.pointer(key), "expected an array");
                else
                    for (size_t i = 0; i < k->size(); ++i) into.push_back(band((*k)[i], r.pointer(key) + "/" + std::to_string(i)));
            }
        };
        bandList("kinds", out.kinds);
        if (const auto* o = r.child("overall")) out.overall = band(*o, r.pointer("overall"));
        else problems.add(r.pointer("overall"), "required field is missing");
        // Memory bands are optional: a file written before them has none, and predictions then show none.
        bandList("memory_kinds", out.memoryKinds);
        if (const auto* o = r.child("memory_overall")) out.memoryOverall = band(*o, r.pointer("memory_overall"));
        r.finish();
    }
    problems.throwIfAny();
    return out;
}

std::vector<std::string> errorBandValidationFiles() {
    const std::string runs = defaultValidationFile();
    if (runs.empty()) return {};
    std::vector<std::string> files{runs};
    for (const char* check : {"check_nemo_h100_fp8.json",
                              "check_torchtitan_h100.json",
                              "check_mpt_llm_foundry.json",
                              "check_megatron_lm_h100.json",
                              "check_megatron_bridge_b200_fp8.json",
                              "check_megatron_bridge_gb200_fp8.json",
                              "check_megatron_bridge_gb300_fp8.json",
                              "check_megatron_bridge_2026.json",
                              "check_dgxc_h100.json",
                              "check_bigscience_bloom.json",
                              "check_eleutherai_gpt_neox.json",
                              "check_torchtitan_h200.json",
                              "check_dgxc_405b_2505.json",
                              "check_megatron_lm_2019_v100.json",
                              "check_deepspeed_azure_zero3.json",
                              "check_olmo_core_h100.json",
                              "check_nemotron4_340b_h100.json",
                              "check_bigscience_zero1.json",
                              "check_nemo_long_context.json",
                              "check_dgxc_grok1_moe.json",
                              "check_lumi_megatron_mi250x.json",
                              "check_megatron_functional_memory_speed.json",
                              "check_automodel_h100.json",
                              "check_kempnerforge_h200.json",
                              "check_llama3_405b_paper.json",
                              "check_megatron_bridge_moe_h100.json",
                              "check_mlperf_training.json",
                              "check_nvfp4_blackwell.json",
                              "check_dgxc_maxtext_h100.json"}) {
        const std::filesystem::path p = std::filesystem::path(runs).parent_path() / check;
        std::error_code ec;
        if (std::filesystem::is_regular_file(p, ec)) files.push_back(p.string());
    }
    return files;
}

std::string shippedErrorBandsFile() {
    const std::string runs = defaultValidationFile();
    if (runs.empty()) return "";
    const std::filesystem::path p = std::filesystem::path(runs).parent_path() / "error_bands.json";
    std::error_code ec;
    return std::filesystem::is_regular_file(p, ec) ? p.string() : "";
}

const ErrorBands& shippedErrorBands() {
    static const ErrorBands bands = [] {
        const std::string file = shippedErrorBandsFile();
        if (file.empty()) return ErrorBands{};
        try {
            return parseErrorBands(readJsonFile(file), file + "#");
        } catch (const std::exception&) {
            return ErrorBands{}; // a broken shipped file means no bands, not a failed prediction
        }
    }();
    return bands;
}

std::optional<ErrorBand> errorBandFor(const ClusterConfig& cluster, const Plan& plan, bool moe, int minRecords) {
    if (auto own = calibratedErrorBand(cluster)) return own;
    const ErrorBands& bands = shippedErrorBands();
    if (bands.overall.records == 0) return std::nullopt;
    const std::string kind = runKind(cluster, plan, moe);
    for (const auto& b : bands.kinds)
        if (b.kind == kind && b.records >= minRecords) return b;
    if (moe)
        for (const auto& b : bands.kinds)
            if (b.kind == kMoeKind && b.records >= minRecords) return b;
    if (plan.cp > 1)
        for (const auto& b : bands.kinds)
            if (b.kind == kContextParallelKind && b.records >= minRecords) return b;
    const std::string own = gpuFamily(cluster.gpu.name);
    for (const std::string& family : {own, siblingGpuFamily(own)}) {
        if (family.empty()) continue;
        for (const auto& b : bands.kinds)
            if (b.kind == gpuFamilyKind(family) && b.records >= kGpuFamilyMinRecords) return b;
    }
    return bands.overall;
}

bool tiedWithin(double stepSeconds, double bestStepSeconds, const ErrorBand& band) {
    return stepSeconds <= bestStepSeconds * (1.0 + band.medianAbsError);
}

std::string memoryKind(const Plan& plan) {
    return frameworkFamily(plan);
}

std::optional<ErrorBand> memoryBandFor(const Plan& plan, int minRecords) {
    // No fallback to other families: their peaks are other allocators' (BLOOM's nvidia-smi under DeepSpeed runs
    // 16% over tessel, torchtitan's reserved 3%, Megatron-LM's own allocated peaks within 1.1%), and NVIDIA's
    // Megatron-style runs ran at 91-98% of the GPU by tessel's count, which the band over all families would call
    // at risk.
    const std::string kind = memoryKind(plan);
    for (const auto& b : shippedErrorBands().memoryKinds)
        if (b.kind == kind && b.records >= minRecords) return b;
    return std::nullopt;
}

std::string noMemoryBandText(const Plan& plan) {
    const std::string kind = memoryKind(plan);
    int own = 0;
    for (const auto& b : shippedErrorBands().memoryKinds)
        if (b.kind == kind) own = b.records;
    const ErrorBand& all = shippedErrorBands().memoryOverall;
    return (own > 0 ? "only " + std::to_string(own) : std::string("no")) + " published " + kind +
           " run" + (own == 1 ? " states its" : "s state their") + " peak, too few for a band (" +
           std::to_string(all.records - own) + " runs of other frameworks do)";
}

PeakRange peakRangeWithin(double predictedPeakBytes, const ErrorBand& band) {
    const double e = band.medianAbsError;
    return {predictedPeakBytes / (1.0 + e),
            e < 1.0 ? predictedPeakBytes / (1.0 - e) : std::numeric_limits<double>::infinity()};
}

double peakFittingBandBytes(double capacityBytes, const ErrorBand& band) {
    return capacityBytes * std::max(0.0, 1.0 - band.medianAbsError); // predicted / (1 - e) <= capacity
}

MemoryVerdict memoryVerdict(double allocatedPeakBytes, double reservedPeakBytes, double capacityBytes,
                            const std::optional<ErrorBand>& band) {
    if (allocatedPeakBytes > capacityBytes) return MemoryVerdict::OutOfMemory;
    const double reserved = std::max(allocatedPeakBytes, reservedPeakBytes);
    if (band && reserved > peakFittingBandBytes(capacityBytes, *band)) return MemoryVerdict::MayNotFit;
    return MemoryVerdict::Fits;
}

MemoryVerdict memoryVerdict(double predictedPeakBytes, double capacityBytes, const std::optional<ErrorBand>& band) {
    return memoryVerdict(predictedPeakBytes, predictedPeakBytes, capacityBytes, band);
}

const char* toString(MemoryVerdict v) {
    switch (v) {
    case MemoryVerdict::Fits: return "fits";
    case MemoryVerdict::MayNotFit: return "may_not_fit";
    case MemoryVerdict::OutOfMemory: return "out_of_memory";
    }
    return "fits";
}

} // namespace tessel::sim
