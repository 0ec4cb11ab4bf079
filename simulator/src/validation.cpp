// Predicts published training runs and summarises the error per group and overall (`tessel validate`).
#include "tessel/sim/validation.hpp"

#include "tessel/cost/errors.hpp"
#include "tessel/sim/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace tessel::sim {

std::string StepTerms::dominant() const {
    const std::pair<const char*, double> terms[] = {{"compute", computeSeconds}, {"tp", tpSeconds},
                                                    {"cp", cpSeconds},           {"ep", epSeconds},
                                                    {"pp", ppSeconds},           {"dp", dpSeconds},
                                                    {"optimizer", optimizerSeconds}, {"bubble", bubbleSeconds}};
    const auto* best = &terms[0];
    for (const auto& t : terms)
        if (t.second > best->second) best = &t;
    return best->first;
}

namespace {
std::string planString(const Plan& p) {
    std::string s = "tp" + std::to_string(p.tp) + " pp" + std::to_string(p.pp) + " dp" + std::to_string(p.dp);
    if (p.cp > 1) s += " cp" + std::to_string(p.cp) + (p.cpComm != CpComm::P2p ? ":" + toString(p.cpComm) : "");
    if (p.ep > 1) s += " ep" + std::to_string(p.ep);
    if (p.etp > 0 && p.etp != p.tp) s += " etp" + std::to_string(p.etp);
    if (p.vpp > 1) s += " vpp" + std::to_string(p.vpp);
    s += " mb" + std::to_string(p.microBatch) + " gb" + std::to_string(p.globalBatch);
    if (p.zeroStage > 0) s += " zero" + std::to_string(p.zeroStage);
    if (p.zeroReplicas > 1) s += "x" + std::to_string(p.zeroReplicas); // hybrid sharding: replicas of the sharded state
    if (p.recompute != Recompute::None) s += " rc:" + recomputeString(p);
    if (p.sequenceParallel) s += " sp";
    if (!p.flashAttention) s += " no-flash";
    else if (p.attentionKernel != "auto") s += " " + p.attentionKernel;
    return s;
}

CaseResult predictCase(const ValidationCase& c) {
    CaseResult r;
    r.id = c.id;
    r.group = c.group;
    r.pointer = c.pointer;
    r.assumptions = c.assumptions;
    r.plan = planString(c.scenario.plan);
    r.measuredStepSeconds = c.measured.stepSeconds;
    r.measuredMemoryBytes = c.measured.memoryBytes;
    r.measuredOutOfMemory = c.measured.outOfMemory;
    try {
        const PlanSimulation sim = simulatePlan(c.scenario.model, c.scenario.cluster, c.scenario.plan);
        r.predicted = true;
        r.predictedStepSeconds = sim.metrics.stepSeconds;
        r.predictedMfu = sim.metrics.mfu;
        // Allocated memory leaves out what the cluster reserves (CUDA context, allocator slack) and NCCL's buffers;
        // the allocator's reserved peak (max_memory_reserved) holds what it keeps beyond the allocated peak, not
        // NCCL's buffers; the device's (nvidia-smi) holds all. On the stage the record names, else the highest.
        const auto figureOf = [&](const StageMemory& st) {
            if (c.measured.memoryIsAllocated)
                return st.totalBytes() - static_cast<double>(c.scenario.cluster.gpu.reservedBytes) - st.other.collectiveLibraryBytes;
            return st.reservedPeakBytes() - (c.measured.memoryIsAllocatorReserved ? st.other.collectiveLibraryBytes : 0.0);
        };
        const auto& stages = sim.memory.stages;
        if (c.measured.memoryStage && *c.measured.memoryStage < static_cast<int>(stages.size())) {
            r.predictedPeakMemoryBytes = figureOf(stages[static_cast<size_t>(*c.measured.memoryStage)]);
        } else {
            r.predictedPeakMemoryBytes = 0.0;
            for (const StageMemory& st : stages) r.predictedPeakMemoryBytes = std::max(r.predictedPeakMemoryBytes, figureOf(st));
        }
        r.predictedFits = sim.memory.fits;
        const StepBreakdown& b = sim.metrics.breakdown;
        r.terms = {b.computeSeconds, b.tpSeconds,        b.cpSeconds,    b.epSeconds,
                   b.ppSeconds,      b.dpSeconds,        b.optimizerSeconds, b.bubbleSeconds};
        if (r.measuredStepSeconds) r.stepError = (r.predictedStepSeconds - *r.measuredStepSeconds) / *r.measuredStepSeconds;
        if (r.measuredMemoryBytes) r.memoryError = (r.predictedPeakMemoryBytes - *r.measuredMemoryBytes) / *r.measuredMemoryBytes;
        if (!r.measuredStepSeconds && !r.measuredMemoryBytes && !r.measuredOutOfMemory) {
            r.reason = "the record states no step time, throughput, memory or out-of-memory outcome to compare with";
            // A figure under a name tessel reads that is not one: named, with why.
            const auto& invalid = c.measured.invalidFields;
            if (!invalid.empty()) r.reason = "nothing to compare with";
            for (size_t i = 0; i < invalid.size(); ++i) r.reason += (i ? "; " : ": ") + invalid[i];
            // A figure under a name tessel does not read: named, with the names it does.
            const auto& unread = c.measured.unreadFields;
            if (!unread.empty()) {
                std::string names;
                for (size_t i = 0; i < unread.size(); ++i) names += (i ? ", " : "") + unread[i];
                r.reason += " (" + names + (unread.size() == 1 ? " holds a figure" : " hold figures") +
                            " under a name tessel does not read; it reads iteration_time_s or _ms, tokens_per_s, "
                            "tokens_per_s_per_gpu, samples_per_s, tflops_per_gpu, mfu, hfu and memory_gb, among others)";
            }
        }
    } catch (const InputError& e) {
        r.reason = e.problems().empty() ? e.what() : e.problems().front().where + ": " + e.problems().front().message;
    } catch (const std::exception& e) {
        r.reason = e.what();
    }
    return r;
}

ErrorSummary summarizeSet(const std::string& group, const std::vector<const CaseResult*>& rs) {
    ErrorSummary s;
    s.group = group;
    std::vector<double> abs, mem;
    double signedSum = 0.0;
    for (const CaseResult* r : rs) {
        ++s.records;
        if (r->stepError) {
            ++s.predicted;
            const double a = std::fabs(*r->stepError);
            abs.push_back(a);
            signedSum += *r->stepError;
            if (a >= s.maxAbsError) {
                s.maxAbsError = a;
                s.worst = r->id;
            }
        }
        if (r->memoryError) mem.push_back(std::fabs(*r->memoryError));
        if (r->measuredOutOfMemory && r->predicted) {
            ++s.oomCompared;
            if (*r->measuredOutOfMemory == !r->predictedFits) ++s.oomAgreed;
        }
    }
    s.medianAbsError = medianOf(abs);
    s.meanSignedError = abs.empty() ? 0.0 : signedSum / static_cast<double>(abs.size());
    s.memoryCompared = static_cast<int>(mem.size());
    s.memoryMedianAbsError = medianOf(mem);
    return s;
}
} // namespace

double medianOf(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void summarize(ValidationReport& report) {
    report.groups.clear();
    std::vector<std::string> order;
    std::map<std::string, std::vector<const CaseResult*>> byGroup;
    std::vector<const CaseResult*> all;
    for (const auto& r : report.results) {
        if (!byGroup.count(r.group)) order.push_back(r.group);
        byGroup[r.group].push_back(&r);
        all.push_back(&r);
    }
    for (const auto& g : order) report.groups.push_back(summarizeSet(g, byGroup[g]));
    report.overall = summarizeSet("", all);
}

ValidationReport validateRecords(const std::vector<LoadedRecord>& records) {
    ValidationReport report;
    for (const auto& rec : records) {
        if (rec.validationCase) {
            report.results.push_back(predictCase(*rec.validationCase));
        } else {
            CaseResult r;
            r.id = rec.id;
            r.group = rec.group;
            r.pointer = rec.pointer;
            r.reason = rec.refusal;
            report.results.push_back(std::move(r));
        }
    }
    summarize(report);
    return report;
}

namespace {
// The records with every GPU's sustained tensor-core share set to `fraction`.
std::vector<LoadedRecord> withSustainedFraction(std::vector<LoadedRecord> records, double fraction) {
    for (auto& r : records)
        if (r.validationCase) r.validationCase->scenario.cluster.gpu.sustainedTensorFraction = fraction;
    return records;
}

// Median of log(predicted / measured) step time, and how many records it is over.
std::pair<double, int> medianLogStepRatio(const ValidationReport& report) {
    std::vector<double> logs;
    for (const auto& r : report.results)
        if (r.predicted && r.measuredStepSeconds && *r.measuredStepSeconds > 0.0 && r.predictedStepSeconds > 0.0)
            logs.push_back(std::log(r.predictedStepSeconds / *r.measuredStepSeconds));
    return {medianOf(logs), static_cast<int>(logs.size())};
}
} // namespace

SustainedFit fitSustainedTensorFraction(const std::vector<LoadedRecord>& all) {
    // Only records whose GPU takes the constant: where the sustained share was measured as a curve over the duty
    // (gpu.sustained_share_by_duty) the constant does not apply, and those records do not move with it.
    std::vector<LoadedRecord> records;
    for (const auto& r : all)
        if (r.validationCase && r.validationCase->scenario.cluster.gpu.sustainedShareByDuty.empty()) records.push_back(r);
    // Tensor-core time scales as 1 / fraction and the rest not at all, so the step's log error falls by less
    // than log(f1 / f0) when the share rises from f0 to f1: the fixed-point step f <- f x exp(median log error)
    // never overshoots and converges in a few passes over the records.
    SustainedFit fit;
    double f = 1.0;
    for (int pass = 0; pass < 12; ++pass) {
        const auto [m, n] = medianLogStepRatio(validateRecords(withSustainedFraction(records, f)));
        fit.records = n;
        fit.medianLogError = m;
        fit.passes = pass + 1;
        if (n == 0) break;
        const double next = std::clamp(f * std::exp(m), 0.05, 1.0);
        if (std::abs(next - f) < 1e-4) {
            f = next;
            break;
        }
        f = next;
    }
    fit.fraction = f;
    return fit;
}

LeaveOneGroupOut leaveOneGroupOut(const std::vector<LoadedRecord>& records) {
    // The one constant fitted to published runs is gpu.sustained_tensor_fraction (FORMULAS.md §3.3). For each
    // group it is refitted on the other groups only and the group is predicted with that value.
    LeaveOneGroupOut out;
    std::vector<std::string> groups;
    for (const auto& r : records)
        if (std::find(groups.begin(), groups.end(), r.group) == groups.end()) groups.push_back(r.group);
    std::map<std::string, double> fractionOf;
    for (const auto& g : groups) {
        std::vector<LoadedRecord> others;
        for (const auto& r : records)
            if (r.group != g) others.push_back(r);
        // A set of one group has nothing to fit on, nor one whose other groups all ran on GPUs with a measured
        // curve (their records do not take the constant): it keeps the shipped value.
        if (others.empty()) continue;
        const SustainedFit fit = fitSustainedTensorFraction(others);
        if (fit.records > 0) fractionOf[g] = fit.fraction;
    }
    std::vector<CaseResult> results;
    for (const auto& r : records) {
        std::vector<LoadedRecord> one{r};
        const auto it = fractionOf.find(r.group);
        if (it != fractionOf.end()) one = withSustainedFraction(std::move(one), it->second);
        results.push_back(validateRecords(one).results.front());
    }
    out.report.results = std::move(results);
    summarize(out.report);
    for (const auto& g : groups) {
        const auto it = fractionOf.find(g);
        out.fittedConstants.push_back("gpu.sustained_tensor_fraction without " + g + ": " +
                                      (it == fractionOf.end() ? std::string("not refitted (no other group on a GPU that takes it)")
                                                              : std::to_string(it->second).substr(0, 5)));
    }
    return out;
}

nlohmann::json toJson(const ValidationReport& report) {
    auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    nlohmann::json results = nlohmann::json::array();
    for (const auto& r : report.results) {
        nlohmann::json j{{"id", r.id},
                         {"group", r.group},
                         {"record", r.pointer},
                         {"predicted", r.predicted},
                         {"plan", r.plan},
                         {"measured_step_seconds", opt(r.measuredStepSeconds)},
                         {"predicted_step_seconds", r.predicted ? nlohmann::json(r.predictedStepSeconds) : nlohmann::json(nullptr)},
                         {"step_error", opt(r.stepError)},
                         {"measured_memory_bytes", opt(r.measuredMemoryBytes)},
                         {"predicted_peak_memory_bytes", r.predicted ? nlohmann::json(r.predictedPeakMemoryBytes) : nlohmann::json(nullptr)},
                         {"memory_error", opt(r.memoryError)},
                         {"measured_out_of_memory", r.measuredOutOfMemory ? nlohmann::json(*r.measuredOutOfMemory) : nlohmann::json(nullptr)},
                         {"predicted_fits", r.predictedFits},
                         {"predicted_mfu", r.predictedMfu},
                         {"dominant_term", r.predicted ? r.terms.dominant() : ""},
                         {"terms_seconds",
                          {{"compute", r.terms.computeSeconds},
                           {"tp", r.terms.tpSeconds},
                           {"cp", r.terms.cpSeconds},
                           {"ep", r.terms.epSeconds},
                           {"pp", r.terms.ppSeconds},
                           {"dp", r.terms.dpSeconds},
                           {"optimizer", r.terms.optimizerSeconds},
                           {"bubble", r.terms.bubbleSeconds}}},
                         {"assumptions", r.assumptions}};
        if (!r.reason.empty()) j["reason"] = r.reason;
        results.push_back(std::move(j));
    }
    auto summary = [](const ErrorSummary& s) {
        return nlohmann::json{{"group", s.group},
                              {"records", s.records},
                              {"predicted", s.predicted},
                              {"median_abs_step_error", s.medianAbsError},
                              {"max_abs_step_error", s.maxAbsError},
                              {"mean_signed_step_error", s.meanSignedError},
                              {"worst", s.worst},
                              {"memory_compared", s.memoryCompared},
                              {"median_abs_memory_error", s.memoryMedianAbsError},
                              {"oom_compared", s.oomCompared},
                              {"oom_agreed", s.oomAgreed}};
    };
    nlohmann::json groups = nlohmann::json::array();
    for (const auto& g : report.groups) groups.push_back(summary(g));
    return {{"results", results}, {"groups", groups}, {"overall", summary(report.overall)}};
}

} // namespace tessel::sim
