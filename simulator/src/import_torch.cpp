// PyTorch profiler traces (Chrome/Kineto JSON) -> bench points per cost-model kernel and a tessel run folder whose
// forward / backward / optimizer actions carry the traced steps' phase times (docs/import.md).
#include "tessel/sim/import.hpp"

#include "tessel/cost/comm.hpp"
#include "tessel/cost/compute.hpp"
#include "tessel/sim/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>

namespace tessel::sim {

namespace {

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// One complete ("X") event of a trace, as far as the import uses it.
struct Op {
    size_t index = 0;                         // position in traceEvents (for pointers)
    std::string name;
    double startUs = 0.0, durUs = 0.0;
    int64_t tid = 0;
    std::vector<std::vector<int64_t>> dims;   // args["Input Dims"]
    double endUs() const { return startUs + durUs; }
};

struct Instant {
    double startUs = 0.0;
    std::optional<double> totalAllocated;     // args["Total Allocated"] (Kineto)
};

const nlohmann::json& eventsOf(const nlohmann::json& doc) { return doc.is_array() ? doc : doc.at("traceEvents"); }

int64_t tidOf(const nlohmann::json& e) {
    const auto it = e.find("tid");
    if (it == e.end()) return 0;
    if (it->is_number_integer()) return it->get<int64_t>();
    if (it->is_string()) return static_cast<int64_t>(std::hash<std::string>{}(it->get<std::string>()) >> 1);
    return 0;
}

int64_t product(const std::vector<int64_t>& v, size_t from, size_t to) {
    int64_t p = 1;
    for (size_t i = from; i < to && i < v.size(); ++i) p *= v[i];
    return p;
}

// A point in `tessel bench`'s format (executor/src/microbench.cpp), with where it came from.
struct Point {
    std::string kernel;
    std::map<std::string, int64_t> shape;
    double flops = 0.0, bytes = 0.0;
    int groupSize = 1;
    std::string tier;
};

// Rows (every dimension but the last) and columns (the last) of a tensor's dims.
bool rowsCols(const std::vector<std::vector<int64_t>>& dims, size_t i, int64_t& rows, int64_t& cols) {
    if (dims.size() <= i || dims[i].size() < 2) return false;
    cols = dims[i].back();
    rows = product(dims[i], 0, dims[i].size() - 1);
    return rows > 0 && cols > 0;
}

enum class Phase { Forward, Backward, Optimizer };

// The cost model's kernel for one operator, with the FLOPs and bytes the model counts for it at that shape
// (cost_models/src/compute.cpp: layerCompute, headCompute, embeddingCompute; backward = forward bytes x
// kBackwardByteFactor). `e`: bytes per activation element, `g`: per gradient element.
std::optional<Point> mapOperator(const Op& op, Phase phase, int e, int64_t tokens) {
    namespace kc = kernel_cost;
    const auto& d = op.dims;
    Point p;
    auto gemmPoint = [&](int64_t batch, int64_t m, int64_t k, int64_t k2, int64_t n) -> std::optional<Point> {
        if (k != k2 || m <= 0 || n <= 0 || k <= 0 || batch <= 0) return std::nullopt;
        p.kernel = "gemm";
        p.shape = {{"m", m}, {"n", n}, {"k", k}};
        if (batch > 1) p.shape["batch"] = batch;
        p.flops = static_cast<double>(batch) * kc::gemmFlops(m, n, k);
        p.bytes = static_cast<double>(batch) * kc::gemmBytes(m, n, k, e);
        return p;
    };
    if (op.name == "aten::mm" && d.size() >= 2 && d[0].size() == 2 && d[1].size() == 2)
        return gemmPoint(1, d[0][0], d[0][1], d[1][0], d[1][1]);
    if (op.name == "aten::addmm" && d.size() >= 3 && d[1].size() == 2 && d[2].size() == 2)
        return gemmPoint(1, d[1][0], d[1][1], d[2][0], d[2][1]);
    if (op.name == "aten::bmm" && d.size() >= 2 && d[0].size() == 3 && d[1].size() == 3 && d[0][0] == d[1][0])
        return gemmPoint(d[0][0], d[0][1], d[0][2], d[1][1], d[1][2]);
    if (op.name == "aten::baddbmm" && d.size() >= 3 && d[1].size() == 3 && d[2].size() == 3 && d[1][0] == d[2][0])
        return gemmPoint(d[1][0], d[1][1], d[1][2], d[2][1], d[2][2]);
    int64_t rows = 0, cols = 0;
    auto memoryPoint = [&](const char* kernel, double bytes) {
        p.kernel = kernel;
        p.shape = {{"rows", rows}, {"cols", cols}};
        p.bytes = bytes;
        return p;
    };
    const double back = kc::kBackwardByteFactor;
    if (op.name == "aten::native_layer_norm" && rowsCols(d, 0, rows, cols))
        return memoryPoint("norm_forward", kc::normBytes(rows, cols, e));
    if (op.name == "aten::native_layer_norm_backward" && rowsCols(d, 0, rows, cols))
        return memoryPoint("norm_backward", back * kc::normBytes(rows, cols, e));
    if (op.name == "aten::gelu" && rowsCols(d, 0, rows, cols))
        return memoryPoint("gelu_forward", kc::activationBytes(false, rows, cols, e));
    if (op.name == "aten::gelu_backward" && rowsCols(d, 0, rows, cols))
        return memoryPoint("gelu_backward", back * kc::activationBytes(false, rows, cols, e));
    if (op.name == "aten::_softmax" && rowsCols(d, 0, rows, cols))
        return memoryPoint("softmax_forward", kc::softmaxBytes(static_cast<double>(rows) * static_cast<double>(cols), e));
    if (op.name == "aten::_softmax_backward_data" && rowsCols(d, 0, rows, cols))
        return memoryPoint("softmax_backward", back * kc::softmaxBytes(static_cast<double>(rows) * static_cast<double>(cols), e));
    if (op.name == "aten::_log_softmax" && rowsCols(d, 0, rows, cols))
        return memoryPoint("cross_entropy_forward", kc::crossEntropyBytes(rows, cols, e));
    if (op.name == "aten::_log_softmax_backward_data" && rowsCols(d, 0, rows, cols))
        return memoryPoint("cross_entropy_backward", back * kc::crossEntropyBytes(rows, cols, e));
    if (op.name == "aten::embedding" && d.size() >= 2 && d[0].size() == 2 && !d[1].empty()) {
        rows = product(d[1], 0, d[1].size());
        cols = d[0][1];
        return memoryPoint("embedding_forward", kc::embeddingForwardBytes(rows, cols, e));
    }
    if (op.name == "aten::embedding_dense_backward" && d.size() >= 2 && !d[0].empty() && !d[1].empty()) {
        rows = product(d[1], 0, d[1].size());
        cols = d[0].back();
        return memoryPoint("embedding_backward", kc::embeddingBackwardBytes(rows, cols, e));
    }
    // A residual add: two activations of the same [tokens, hidden] shape, in forward (x + f(x)) or backward
    // (the gradient of x summed over its two uses). The optimizer's adds and broadcast adds are not residuals.
    if (op.name == "aten::add" && phase != Phase::Optimizer && d.size() >= 2 && d[0] == d[1] && rowsCols(d, 0, rows, cols) &&
        rows == tokens)
        return memoryPoint(phase == Phase::Forward ? "residual_forward" : "residual_backward",
                           (phase == Phase::Forward ? 1.0 : back) * kc::residualBytes(rows, cols, e, 0));
    return std::nullopt;
}

// A collective issued by torch.distributed: gloo/nccl record_function ranges ("gloo:all_reduce") with the
// flattened bucket's element count, or Kineto's record_param_comms with its own args.
std::optional<std::pair<Primitive, int64_t>> collectiveOf(const Op& op, const nlohmann::json& args) {
    static const std::map<std::string, Primitive> byName{
        {"all_reduce", Primitive::AllReduce},         {"allreduce", Primitive::AllReduce},
        {"all_gather", Primitive::AllGather},         {"allgather", Primitive::AllGather},
        {"reduce_scatter", Primitive::ReduceScatter}, {"_reduce_scatter_base", Primitive::ReduceScatter},
        {"broadcast", Primitive::Broadcast},          {"all_to_all", Primitive::AllToAll},
        {"alltoall", Primitive::AllToAll}};
    std::string kind;
    int64_t elements = 0;
    if (startsWith(op.name, "gloo:") || startsWith(op.name, "nccl:")) {
        kind = op.name.substr(5);
        if (op.dims.empty()) return std::nullopt;
        for (const auto& t : op.dims) elements += product(t, 0, t.size());
    } else if (op.name == "record_param_comms" && args.is_object() && args.contains("Collective name") &&
               args["Collective name"].is_string() && args.contains("In msg nelems") && args["In msg nelems"].is_number()) {
        kind = args["Collective name"].get<std::string>();
        elements = args["In msg nelems"].get<int64_t>();
    } else {
        return std::nullopt;
    }
    const auto it = byName.find(kind);
    if (it == byName.end() || elements <= 0) return std::nullopt;
    return std::make_pair(it->second, elements);
}

int elementBytesOfType(const std::string& t) {
    if (t == "float" || t == "int" || t == "c10::complex<float>") return 4;
    if (t == "double" || t == "long int" || t == "long") return 8;
    if (t == "c10::BFloat16" || t == "c10::Half" || t == "short") return 2;
    return 0;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    if (v.empty()) return 0.0;
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

} // namespace

TorchTrace parseTorchTrace(const std::string& text, const std::string& source) {
    TorchTrace t;
    t.source = source;
    try {
        t.doc = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        throw InputError(source + "#", "not valid JSON (truncated?) at byte " + std::to_string(e.byte) + ": " + e.what());
    } catch (const nlohmann::json::out_of_range& e) {
        throw InputError(source + "#", std::string("a number is out of range (beyond +-1.8e308): ") + e.what());
    }
    const bool bare = t.doc.is_array();
    if (!bare && !(t.doc.is_object() && t.doc.contains("traceEvents") && t.doc["traceEvents"].is_array()))
        throw InputError(source + "#/traceEvents", "not a Chrome trace: expected an array of trace events");
    const std::string base = source + "#" + (bare ? "" : "/traceEvents");
    ProblemList problems;
    if (!bare && t.doc.contains("distributedInfo")) {
        const auto& di = t.doc["distributedInfo"];
        for (const char* key : {"rank", "world_size"})
            if (!di.is_object() || !di.contains(key) || !di[key].is_number_integer())
                problems.add(source + "#/distributedInfo/" + key, "expected an integer");
        if (problems.empty()) {
            t.rank = di["rank"].get<int>();
            t.worldSize = di["world_size"].get<int>();
            if (t.worldSize < 1 || t.rank < 0 || t.rank >= t.worldSize)
                problems.add(source + "#/distributedInfo", "rank must lie in 0..world_size-1");
        }
    }
    const auto& events = eventsOf(t.doc);
    for (size_t i = 0; i < events.size(); ++i) {
        const auto& e = events[i];
        const std::string at = base + "/" + std::to_string(i);
        if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) {
            problems.add(at + "/ph", "expected an event object with a phase (\"ph\")");
            continue;
        }
        const std::string ph = e["ph"].get<std::string>();
        if (ph != "X" && ph != "i") continue;
        if (!e.contains("name") || !e["name"].is_string()) problems.add(at + "/name", "expected the event's name");
        if (!e.contains("ts") || !e["ts"].is_number()) problems.add(at + "/ts", "expected a start time in microseconds");
        if (ph == "X" && (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0.0))
            problems.add(at + "/dur", "expected a duration in microseconds (>= 0)");
        if (e.contains("args") && !e["args"].is_object()) problems.add(at + "/args", "expected an object");
        else if (e.contains("args") && e["args"].contains("Input Dims")) {
            const auto& dims = e["args"]["Input Dims"];
            bool ok = dims.is_array();
            for (size_t k = 0; ok && k < dims.size(); ++k) {
                ok = dims[k].is_array();
                for (size_t j = 0; ok && j < dims[k].size(); ++j) ok = dims[k][j].is_number_integer() && dims[k][j].get<int64_t>() >= 0;
            }
            if (!ok) problems.add(at + "/args/Input Dims", "expected a list of shapes (lists of non-negative integers)");
        }
    }
    problems.throwIfAny();
    return t;
}

ImportedRun importTorchTraces(const std::vector<TorchTrace>& traces, const Scenario& scenario, const TorchImportOptions& o) {
    const Plan& plan = scenario.plan;
    ProblemList problems;
    if (traces.empty()) throw InputError("traces", "no trace given");
    if (plan.tp != 1 || plan.pp != 1 || plan.cp != 1 || plan.ep != 1)
        problems.add("/plan", "a profiler trace is mapped onto data-parallel plans only (tp = pp = cp = ep = 1)");
    if (plan.worldSize() != static_cast<int>(traces.size()))
        problems.add("/plan/dp", "the plan has " + std::to_string(plan.worldSize()) + " ranks but " +
                                     std::to_string(traces.size()) + " trace file(s) were given (one per rank)");
    if (plan.microBatchesPerStep() != 1)
        problems.add("/plan/global_batch", "one micro-batch per step is mapped (global_batch = micro_batch x dp); "
                                           "gradient accumulation is not");
    std::set<int> ranks;
    for (const TorchTrace& t : traces) {
        if (t.worldSize != static_cast<int>(traces.size()))
            problems.add(t.source + "#/distributedInfo/world_size", "says " + std::to_string(t.worldSize) + " ranks; " +
                                                                         std::to_string(traces.size()) + " traces given");
        if (!ranks.insert(t.rank).second) problems.add(t.source + "#/distributedInfo/rank", "two traces of rank " + std::to_string(t.rank));
    }
    problems.throwIfAny();

    const PrecisionRecipe& recipe = scenario.recipe();
    const int defaultE = static_cast<int>(bytesPerElement(recipe.computeDtype));
    const int64_t tokens = static_cast<int64_t>(plan.microBatch) * scenario.model.seqLen;
    const ActionSchedule schedule = buildSchedule(scenario.model, plan);
    const StageSchedule& stage0 = schedule.stages.at(0);
    auto actionIndex = [&](ActionKind kind) {
        for (size_t i = 0; i < stage0.actions.size(); ++i)
            if (stage0.actions[i].kind == kind) return static_cast<int>(i);
        return -1;
    };

    ImportedRun out;
    std::map<std::string, std::pair<int, double>> unmapped;   // operator -> (events, inclusive seconds)
    std::map<std::string, int> mappedCounts;
    std::map<int, double> slowestStepSeconds;                 // step -> the slowest rank's span
    bool typesFromTrace = false;
    std::optional<double> anyTotalAllocated;
    nlohmann::json memoryRanks = nlohmann::json::array();
    nlohmann::json events = nlohmann::json::array();
    std::vector<double> stepStartUs;                          // per event (and measurement): its step's start
    for (const TorchTrace& t : traces) {
        const auto& raw = eventsOf(t.doc);
        const std::string base = t.source + "#" + (t.doc.is_array() ? "" : "/traceEvents");
        std::vector<Op> ops, steps;
        std::vector<Instant> instants;
        for (size_t i = 0; i < raw.size(); ++i) {
            const auto& e = raw[i];
            const std::string ph = e["ph"].get<std::string>();
            if (ph == "i") {
                Instant in;
                in.startUs = e["ts"].get<double>();
                if (e.contains("args") && e["args"].contains("Total Allocated") && e["args"]["Total Allocated"].is_number())
                    in.totalAllocated = e["args"]["Total Allocated"].get<double>();
                instants.push_back(in);
                continue;
            }
            if (ph != "X") continue;
            Op op;
            op.index = i;
            op.name = e["name"].get<std::string>();
            op.startUs = e["ts"].get<double>();
            op.durUs = e["dur"].get<double>();
            op.tid = tidOf(e);
            if (e.contains("args") && e["args"].contains("Input Dims"))
                for (const auto& dim : e["args"]["Input Dims"]) op.dims.push_back(dim.get<std::vector<int64_t>>());
            (startsWith(op.name, "ProfilerStep#") ? steps : ops).push_back(std::move(op));
        }
        if (steps.empty())
            throw InputError(base, "no ProfilerStep#N ranges: record with torch.profiler.schedule and call prof.step() "
                                   "after each training step");
        std::sort(steps.begin(), steps.end(), [](const Op& a, const Op& b) { return a.startUs < b.startUs; });
        std::sort(ops.begin(), ops.end(), [](const Op& a, const Op& b) { return a.startUs < b.startUs; });
        const int64_t mainTid = steps.front().tid;

        for (size_t s = 0; s < steps.size(); ++s) {
            const Op& st = steps[s];
            const std::string stepAt = base + "/" + std::to_string(st.index);
            // Phases of the step (docs/import.md): backward from the first autograd function to the optimizer's
            // step, optimizer from there to the step's end plus zero_grad, forward the rest before backward.
            double backwardStart = std::numeric_limits<double>::infinity(), optimizerStart = backwardStart, zeroGradUs = 0.0;
            for (const Op& op : ops) {
                if (op.startUs < st.startUs || op.endUs() > st.endUs()) continue;
                if (startsWith(op.name, "autograd::engine::evaluate_function")) backwardStart = std::min(backwardStart, op.startUs);
                if (startsWith(op.name, "Optimizer.zero_grad#")) zeroGradUs += op.durUs;
            }
            for (const Op& op : ops)
                if (op.startUs >= backwardStart && op.endUs() <= st.endUs() && startsWith(op.name, "Optimizer.step#"))
                    optimizerStart = std::min(optimizerStart, op.startUs);
            if (!std::isfinite(backwardStart))
                throw InputError(stepAt, "step " + st.name + " has no backward (no autograd::engine::evaluate_function event)");
            if (!std::isfinite(optimizerStart))
                throw InputError(stepAt, "step " + st.name + " has no optimizer step (no Optimizer.step#... range after backward)");
            const double forwardUs = backwardStart - st.startUs - zeroGradUs;
            const double backwardUs = optimizerStart - backwardStart;
            const double optimizerUs = st.endUs() - optimizerStart + zeroGradUs;
            const int step = static_cast<int>(s) + 1;
            slowestStepSeconds[step] = std::max(slowestStepSeconds[step], st.durUs * 1e-6);
            const std::pair<ActionKind, std::pair<double, double>> phases[] = {
                {ActionKind::Forward, {st.startUs, forwardUs}},
                {ActionKind::Backward, {backwardStart, backwardUs}},
                {ActionKind::OptimizerStep, {optimizerStart, optimizerUs}}};
            for (const auto& [kind, span] : phases) {
                const int index = actionIndex(kind);
                if (index < 0) continue;
                const Action& a = stage0.actions[static_cast<size_t>(index)];
                nlohmann::json m{{"schema_version", 1},  {"step", step},        {"rank", t.rank},
                                 {"stage", 0},           {"index", index},      {"action", a.traceName()},
                                 {"kind", toString(kind)}, {"micro_batch", a.microBatch}, {"chunk", 0},
                                 {"start_seconds", span.first * 1e-6}, {"duration_seconds", std::max(0.0, span.second) * 1e-6},
                                 {"device", "torch trace"}};
                out.measurements.push_back(m);
                nlohmann::json args{{"stage", 0}, {"chunk", 0}, {"index", index}, {"step", step}};
                if (a.microBatch >= 0) args["micro_batch"] = a.microBatch;
                events.push_back({{"ph", "X"}, {"name", a.traceName()}, {"cat", toString(kind)}, {"pid", t.rank}, {"tid", 0},
                                  {"ts", span.first}, {"dur", std::max(0.0, span.second)}, {"args", args}});
                stepStartUs.push_back(st.startUs);
            }
            // Kernels: every operator of the step mapped to a cost-model kernel becomes one point.
            for (const Op& op : ops) {
                if (op.startUs < st.startUs || op.endUs() > st.endUs()) continue;
                const nlohmann::json& args = raw[op.index].contains("args") ? raw[op.index]["args"] : nlohmann::json();
                int e = defaultE;
                if (args.is_object() && args.contains("Input type") && args["Input type"].is_array() && !args["Input type"].empty() &&
                    args["Input type"][0].is_string())
                    if (int b = elementBytesOfType(args["Input type"][0].get<std::string>())) {
                        e = b;
                        typesFromTrace = true;
                    }
                std::optional<Point> p;
                if (const auto c = collectiveOf(op, args)) {
                    Point q;
                    q.kernel = toString(c->first);
                    q.shape = {{"elements", c->second}};
                    q.bytes = static_cast<double>(c->second) * (e == defaultE ? recipe.gradBytes : e);
                    q.groupSize = t.worldSize;
                    q.tier = t.worldSize <= scenario.cluster.gpusPerNode ? "intra_node" : "inter_node";
                    p = q;
                } else if (op.tid == mainTid) {
                    const Phase phase = op.startUs < backwardStart ? Phase::Forward : op.startUs < optimizerStart ? Phase::Backward
                                                                                                                : Phase::Optimizer;
                    p = mapOperator(op, phase, e, tokens);
                }
                if (!p) {
                    if (startsWith(op.name, "aten::")) {
                        auto& u = unmapped[op.name];
                        ++u.first;
                        u.second += op.durUs * 1e-6;
                    }
                    continue;
                }
                ++mappedCounts[p->kernel];
                nlohmann::json point{{"schema_version", 1}, {"kind", "microbenchmark"}, {"kernel", p->kernel},
                                     {"shape", p->shape},   {"flops", p->flops},        {"bytes", p->bytes},
                                     {"group_size", p->groupSize}, {"rank", t.rank},   {"samples", 1},
                                     {"median_seconds", std::max(op.durUs, 0.001) * 1e-6}, {"device", "torch trace"},
                                     {"operator", op.name}, {"step", step}, {"source", base + "/" + std::to_string(op.index)}};
                if (!p->tier.empty()) point["tier"] = p->tier;
                out.benchPoints.push_back(point);
            }
        }
        // Memory: Kineto's [memory] events carry the allocator's running total; its peak over the trace is the
        // rank's tensor peak. Without it (older exporters) the trace says nothing about memory held before it began.
        std::optional<double> peak;
        for (const Instant& in : instants)
            if (in.totalAllocated) peak = std::max(peak.value_or(0.0), *in.totalAllocated);
        if (peak) {
            anyTotalAllocated = peak;
            memoryRanks.push_back({{"rank", t.rank}, {"stage", 0}, {"peak_total_bytes", *peak}});
        }
    }

    std::vector<double> spans;
    for (const auto& [step, seconds] : slowestStepSeconds) spans.push_back(seconds);
    out.stepSeconds = median(spans);
    const double tracedStepSeconds = out.stepSeconds;
    if (o.unprofiledStepSeconds) {
        if (!(*o.unprofiledStepSeconds > 0.0)) throw InputError("--step-seconds", "must be positive");
        // Every phase shrinks by the same factor: the profiler's cost is per operator, and every phase is operators.
        const double factor = *o.unprofiledStepSeconds / tracedStepSeconds;
        // Times shrink toward each step's start, so the phases stay contiguous and the steps keep their order.
        for (size_t i = 0; i < events.size(); ++i) {
            const double startUs = stepStartUs[i] + factor * (events[i]["ts"].get<double>() - stepStartUs[i]);
            events[i]["ts"] = startUs;
            events[i]["dur"] = events[i]["dur"].get<double>() * factor;
            out.measurements[i]["start_seconds"] = startUs * 1e-6;
            out.measurements[i]["duration_seconds"] = out.measurements[i]["duration_seconds"].get<double>() * factor;
        }
        out.stepSeconds = *o.unprofiledStepSeconds;
    }
    out.scenario = scenarioToJson(scenario);
    out.trace = {{"traceEvents", events},
                 {"displayTimeUnit", "ms"},
                 {"otherData", {{"source", "tessel import torch"}, {"step_seconds", out.stepSeconds}, {"plan", planToJson(plan)}}}};
    if (anyTotalAllocated) out.memory = {{"schema_version", 1}, {"ranks", memoryRanks}};
    nlohmann::json unmappedJson = nlohmann::json::array();
    std::vector<std::pair<std::string, std::pair<int, double>>> byTime(unmapped.begin(), unmapped.end());
    std::sort(byTime.begin(), byTime.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
    for (const auto& [name, v] : byTime) unmappedJson.push_back({{"operator", name}, {"events", v.first}, {"inclusive_seconds", v.second}});
    if (!anyTotalAllocated)
        out.warnings.push_back("memory: the traces carry no \"Total Allocated\" ([memory] events of a Kineto profiler run "
                               "with profile_memory=True); memory is not compared");
    if (!typesFromTrace)
        out.warnings.push_back("element size: the traces give no \"Input type\"; bytes use the plan's precision (" +
                               recipe.name + ": " + std::to_string(defaultE) + " B per activation element)");
    std::vector<std::string> sources;
    for (const TorchTrace& t : traces) sources.push_back(t.source);
    out.report = {{"schema_version", 1},
                  {"importer", "torch"},
                  {"sources", sources},
                  {"steps", spans.size()},
                  {"step_seconds", out.stepSeconds},
                  {"traced_step_seconds", tracedStepSeconds},
                  {"phase_scale_to_unprofiled", out.stepSeconds / tracedStepSeconds},
                  {"rules",
                   {"steps: every ProfilerStep#N range (the profiler schedule's wait and warm-up steps are not recorded); "
                    "the step is the median over steps of the slowest rank's span; with --step-seconds (measured without the "
                    "profiler) every phase is scaled by step-seconds / traced step",
                    "phases: backward from the first autograd::engine::evaluate_function to Optimizer.step#, optimizer "
                    "from there to the step's end plus Optimizer.zero_grad#, forward the rest",
                    "kernels: aten::mm/addmm/bmm/baddbmm by Input Dims -> gemm; native_layer_norm(_backward) -> norm; "
                    "gelu(_backward); _softmax(_backward_data) -> softmax; _log_softmax(_backward_data) -> cross_entropy; "
                    "embedding / embedding_dense_backward; aten::add of two [tokens, hidden] activations -> residual; "
                    "gloo:/nccl: collectives and record_param_comms -> collectives by bytes and group size"}},
                  {"mapped_points", mappedCounts},
                  {"not_mapped", unmappedJson},
                  {"warnings", out.warnings}};
    return out;
}

} // namespace tessel::sim
