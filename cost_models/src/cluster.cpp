// Cluster JSON loading/validation, dtype helpers and the GEMM efficiency table lookup.
#include "tessel/cost/cluster.hpp"
#include "tessel/cost/compute.hpp"

#include "tessel/cost/json_reader.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tessel {

std::string toString(Dtype d) {
    switch (d) {
    case Dtype::Fp64: return "fp64";
    case Dtype::Fp32: return "fp32";
    case Dtype::Tf32: return "tf32";
    case Dtype::Bf16: return "bf16";
    case Dtype::Fp16: return "fp16";
    case Dtype::Fp8: return "fp8";
    case Dtype::Fp4: return "fp4";
    }
    return "?";
}

double bytesPerElement(Dtype d) {
    switch (d) {
    case Dtype::Fp64: return 8;
    case Dtype::Fp32:
    case Dtype::Tf32: return 4;
    case Dtype::Bf16:
    case Dtype::Fp16: return 2;
    case Dtype::Fp8: return 1;
    case Dtype::Fp4: return 0.5; // E2M1, two to a byte; its block scales are the recipe's (PrecisionRecipe::quantizedBytes)
    }
    return 0;
}

bool runsOnTensorCores(Dtype d) { return d != Dtype::Fp32; }

namespace {
// A measured curve of the GPU (`key`): a non-empty array of {x, y} points by increasing x, each value in its range,
// every problem named at its pointer.
struct CurveAxis {
    const char* key;
    double min, max;
};
std::vector<std::pair<double, double>> readCurve(ObjectReader& gr, const char* key, CurveAxis x, CurveAxis y,
                                                 ProblemList& problems) {
    std::vector<std::pair<double, double>> out;
    const auto* arr = gr.child(key);
    if (!arr) return out;
    const std::string at = gr.pointer(key);
    if (!arr->is_array() || arr->empty()) {
        problems.add(at, std::string("expected a non-empty array of {") + x.key + ", " + y.key + "}");
        return out;
    }
    for (size_t i = 0; i < arr->size(); ++i) {
        ObjectReader pr((*arr)[i], at + "/" + std::to_string(i), problems);
        const double xv = pr.requireNumber(x.key, x.min, x.max);
        const double yv = pr.requireNumber(y.key, y.min, y.max);
        pr.finish();
        if (!out.empty() && xv <= out.back().first)
            problems.add(at + "/" + std::to_string(i) + "/" + x.key, "must increase along the curve");
        out.emplace_back(xv, yv);
    }
    return out;
}

const std::vector<Dtype>& allDtypes() {
    static const std::vector<Dtype> v{Dtype::Fp64, Dtype::Fp32, Dtype::Tf32, Dtype::Bf16, Dtype::Fp16, Dtype::Fp8,
                                      Dtype::Fp4};
    return v;
}

LinkTier parseTier(const nlohmann::json& doc, const std::string& ptr, ProblemList& problems) {
    LinkTier t;
    ObjectReader r(doc, ptr, problems);
    if (!r.isObject()) return t;
    t.name = r.requireString("name");
    t.bandwidthBytesPerSecond = r.requireNumber("bandwidth_bytes_per_second", 1e3, 1e15);
    t.latencySeconds = r.requireNumber("latency_seconds", 0.0, 1.0);
    t.efficiency = r.optNumber("efficiency", 1.0, 0.01, 1.0);
    t.meshLinks = static_cast<int>(r.optInt("mesh_links", 0, 0, 1024));
    if (const auto* pe = r.child("primitive_efficiency")) {
        ObjectReader pr(*pe, r.pointer("primitive_efficiency"), problems);
        for (Primitive p : allPrimitives()) {
            if (pr.has(toString(p))) t.primitiveEfficiency[p] = pr.requireNumber(toString(p), 0.01, 1.0);
        }
        pr.finish();
    }
    if (const auto* pl = r.child("primitive_latency_seconds")) {
        ObjectReader pr(*pl, r.pointer("primitive_latency_seconds"), problems);
        for (Primitive p : allPrimitives()) {
            if (pr.has(toString(p))) t.primitiveLatencySeconds[p] = pr.requireNumber(toString(p), 0.0, 1.0);
        }
        pr.finish();
    }
    r.finish();
    return t;
}

nlohmann::json tierToJson(const LinkTier& t) {
    nlohmann::json j{{"name", t.name},
                     {"bandwidth_bytes_per_second", t.bandwidthBytesPerSecond},
                     {"latency_seconds", t.latencySeconds},
                     {"efficiency", t.efficiency}};
    if (t.meshLinks > 0) j["mesh_links"] = t.meshLinks;
    if (!t.primitiveEfficiency.empty()) {
        nlohmann::json pe = nlohmann::json::object();
        for (const auto& [p, e] : t.primitiveEfficiency) pe[toString(p)] = e;
        j["primitive_efficiency"] = pe;
    }
    if (!t.primitiveLatencySeconds.empty()) {
        nlohmann::json pl = nlohmann::json::object();
        for (const auto& [p, l] : t.primitiveLatencySeconds) pl[toString(p)] = l;
        j["primitive_latency_seconds"] = pl;
    }
    return j;
}

// gpu.kernels: {"norm_forward": {"overhead_seconds": s, "bytes_per_second": r}, "attention_forward":
// {"overhead_seconds": s, "flops_per_second": r, "bytes_per_second": b, "counts": "score_gemms"}, "gemm":
// {"overhead_seconds": s}}; "counts" (attention only) says what the rates are per, "fused" when absent.
std::map<std::string, KernelFit> parseKernels(const nlohmann::json& doc, const std::string& ptr, ProblemList& problems) {
    std::map<std::string, KernelFit> out;
    ObjectReader r(doc, ptr, problems);
    if (!r.isObject()) return out;
    const auto& known = kernel_cost::kernelNames();
    for (auto it = doc.begin(); it != doc.end(); ++it) {
        if (std::find(known.begin(), known.end(), it.key()) == known.end()) {
            std::string list;
            for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
            problems.add(r.pointer(it.key()), "unknown kernel; expected one of " + list);
            continue;
        }
        ObjectReader kr(it.value(), r.pointer(it.key()), problems);
        KernelFit f;
        f.overheadSeconds = kr.requireNumber("overhead_seconds", 0.0, 1.0);
        f.bytesPerSecond = kr.optNumber("bytes_per_second", 0.0, 1.0, 1e16);
        f.flopsPerSecond = kr.optNumber("flops_per_second", 0.0, 1.0, 1e19);
        // Absent in files written before the key: the fused (FlashAttention) counts the rates were fitted on.
        const std::string counts = kr.optString("counts", "fused");
        if (counts == "score_gemms") f.scoreGemms = true;
        else if (counts != "fused") problems.add(kr.pointer("counts"), "expected \"fused\" or \"score_gemms\"");
        if (f.scoreGemms && it.key().rfind("attention", 0) != 0)
            problems.add(kr.pointer("counts"), "\"score_gemms\" applies to attention kernels only");
        f.stepSeconds = kr.optNumber("step_seconds", 0.0, 0.0, 1.0);
        if (f.stepSeconds > 0.0 && !f.scoreGemms)
            problems.add(kr.pointer("step_seconds"), "a time per launch step applies to \"counts\": \"score_gemms\" only");
        kr.finish();
        out[it.key()] = f;
    }
    return out;
}

// An array of `size` numbers in (0, hi]; problems name each bad element.
std::vector<double> positiveNumbers(const nlohmann::json& v, const std::string& ptr, size_t size, double hi,
                                    ProblemList& problems) {
    std::vector<double> out;
    if (!v.is_array() || v.size() != size) {
        problems.add(ptr, "expected an array of " + std::to_string(size) + " numbers, one per benchmark/seq");
        return out;
    }
    for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_number() || v[i].get<double>() <= 0.0 || v[i].get<double>() > hi) {
            problems.add(ptr + "/" + std::to_string(i), "expected a number above 0 and at most benchmark/peak_tflops");
            return {};
        }
        out.push_back(v[i].get<double>() * 1e12);
    }
    return out;
}

// A non-empty array of positive integers that increases along it (benchmark/seq, head_dims).
std::vector<int64_t> increasingPositiveInts(const nlohmann::json& v, const std::string& ptr, const std::string& what,
                                            ProblemList& problems) {
    std::vector<int64_t> out;
    if (!v.is_array() || v.empty()) {
        problems.add(ptr, "expected a non-empty array of " + what);
        return out;
    }
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string p = ptr + "/" + std::to_string(i);
        if (!v[i].is_number_integer() || v[i].get<int64_t>() < 1) problems.add(p, "expected a positive integer");
        else if (!out.empty() && v[i].get<int64_t>() <= out.back()) problems.add(p, "must increase along the array");
        else out.push_back(v[i].get<int64_t>());
    }
    return out;
}

// gpu/attention_kernels/<name>/benchmark: {peak_tflops, seq: [...], curves: [{head_dim, causal, forward_tflops,
// backward_tflops?}]} (FORMULAS.md §3.2).
AttentionBenchmark parseAttentionBenchmark(const nlohmann::json& doc, const std::string& ptr, ProblemList& problems) {
    AttentionBenchmark b;
    ObjectReader r(doc, ptr, problems);
    const double peakTflops = r.requireNumber("peak_tflops", 1.0, 1e6);
    b.peakFlopsPerSecond = peakTflops * 1e12;
    size_t seqCount = 0; // the declared length, so that one bad entry is one problem, not one per curve
    if (const auto* seq = r.child("seq")) {
        if (seq->is_array()) seqCount = seq->size();
        b.seq = increasingPositiveInts(*seq, r.pointer("seq"), "sequence lengths", problems);
    } else {
        problems.add(r.pointer("seq"), "required field is missing");
    }
    const auto* curves = r.child("curves");
    const std::string cp = r.pointer("curves");
    if (!curves || !curves->is_array() || curves->empty()) {
        problems.add(cp, "expected a non-empty array of {head_dim, causal, forward_tflops, backward_tflops}");
    } else {
        bool anyBackward = false;
        for (size_t i = 0; i < curves->size(); ++i) {
            ObjectReader cr((*curves)[i], cp + "/" + std::to_string(i), problems);
            AttentionBenchmarkCurve c;
            c.headDim = cr.requireInt("head_dim", 1, 4096);
            c.causal = cr.requireBool("causal");
            if (const auto* f = cr.child("forward_tflops"))
                c.forwardFlopsPerSecond = positiveNumbers(*f, cr.pointer("forward_tflops"), seqCount, peakTflops, problems);
            else
                problems.add(cr.pointer("forward_tflops"), "required field is missing");
            if (const auto* g = cr.child("backward_tflops")) {
                c.backwardFlopsPerSecond = positiveNumbers(*g, cr.pointer("backward_tflops"), seqCount, peakTflops, problems);
                anyBackward = true;
            }
            cr.finish();
            for (const auto& other : b.curves)
                if (other.headDim == c.headDim && other.causal == c.causal)
                    problems.add(cp + "/" + std::to_string(i), "a second curve for head_dim " + std::to_string(c.headDim) +
                                                                   (c.causal ? " with" : " without") + " the causal mask");
            b.curves.push_back(std::move(c));
        }
        if (!anyBackward) problems.add(cp, "no curve has backward_tflops: the backward kernel would have no figure");
    }
    r.finish();
    return b;
}

nlohmann::json attentionBenchmarkJson(const AttentionBenchmark& b) {
    auto tflops = [](const std::vector<double>& v) {
        nlohmann::json a = nlohmann::json::array();
        for (double x : v) a.push_back(x / 1e12);
        return a;
    };
    nlohmann::json curves = nlohmann::json::array();
    for (const auto& c : b.curves) {
        nlohmann::json j = {{"head_dim", c.headDim}, {"causal", c.causal}, {"forward_tflops", tflops(c.forwardFlopsPerSecond)}};
        if (!c.backwardFlopsPerSecond.empty()) j["backward_tflops"] = tflops(c.backwardFlopsPerSecond);
        curves.push_back(j);
    }
    return {{"peak_tflops", b.peakFlopsPerSecond / 1e12}, {"seq", b.seq}, {"curves", curves}};
}
} // namespace

double GpuSpec::powerLimitShareScale() const {
    if (!sustainedSharePower || powerLimitWatts <= 0.0) return 1.0;
    const SharePower& w = *sustainedSharePower;
    // A throttled block draws the limit: P = idle + c f^n, so at another limit its clock, and the rate of its
    // compute-bound kernels, is ((P_cap - idle) / (P_measured - idle))^(1/n) of the curve's.
    return std::pow((powerLimitWatts - w.idleWatts) / (w.measuredAtWatts - w.idleWatts), 1.0 / w.clockExponent);
}

std::string GpuSpec::powerLimitProblem(double watts) const {
    if (!sustainedSharePower)
        return name + " carries no power law for its tensor-core share (gpu.sustained_share_power): only a measured "
                      "curve can be moved to another limit";
    char why[160];
    if (!(watts > sustainedSharePower->idleWatts)) {
        std::snprintf(why, sizeof why, "%g W is no limit this GPU runs at (it draws %.0f W idle)", watts,
                      sustainedSharePower->idleWatts);
        return why;
    }
    if (watts > 5000.0) {
        std::snprintf(why, sizeof why, "%g W is above 5000 W", watts);
        return why;
    }
    return "";
}

double GpuSpec::sustainedTensorShare(double duty) const {
    if (sustainedShareByDuty.empty()) return sustainedTensorFraction;
    duty = std::clamp(duty, 0.0, 1.0);
    const double scale = powerLimitShareScale();
    DutyShare below{0.0, 1.0};
    for (DutyShare p : sustainedShareByDuty) {
        p.share = std::min(1.0, p.share * scale);
        if (duty <= p.duty) return below.share + (duty - below.duty) / (p.duty - below.duty) * (p.share - below.share);
        below = p;
    }
    return below.share;
}

double GpuSpec::contentionShareOfCtas(double ctas) const {
    if (contentionByCtas.empty() || !(ctas > 0.0)) return 0.0;
    CtaShare below{0.0, 0.0};
    for (const CtaShare& p : contentionByCtas) {
        if (ctas <= p.ctas) return below.share + (ctas - below.ctas) / (p.ctas - below.ctas) * (p.share - below.share);
        below = p;
    }
    return below.share;
}

double GpuSpec::collectiveContention(double ctas) const {
    if (contentionByCtas.empty() || ncclCollChannels <= 0) return commContention;
    return std::max(0.0, commContention - contentionShareOfCtas(ncclCollChannels) + contentionShareOfCtas(ctas));
}

double contentionSeconds(double kappa, double kappaMax, double commSeconds, double computeSeconds) {
    const double charge = kappa * commSeconds;
    return kappaMax > 0.0 ? std::min(charge, kappaMax * computeSeconds) : charge;
}

double GpuSpec::contentionSeconds(double commSeconds, double computeSeconds) const {
    return tessel::contentionSeconds(commContention, commContentionMax, commSeconds, computeSeconds);
}

const PhaseFit& GpuSpec::phaseFit(const std::string& phase) const {
    static const PhaseFit identity;
    const auto it = phaseFits.find(phase);
    return it != phaseFits.end() ? it->second : identity;
}

double LinkTier::latencyFor(Primitive p) const {
    const auto it = primitiveLatencySeconds.find(p);
    return it != primitiveLatencySeconds.end() ? it->second : latencySeconds;
}

double ClusterConfig::peakFlops(Dtype d) const {
    auto it = gpu.peakFlopsPerSecond.find(d);
    if (it != gpu.peakFlopsPerSecond.end()) return it->second;
    throw InputError("/gpu/peak_flops_per_second/" + toString(d),
                     "cluster '" + name + "' gives no peak for dtype " + toString(d));
}

double gemmEfficiency(const GpuSpec& gpu, int64_t minDim) {
    const auto& t = gpu.gemmEfficiency;
    if (t.empty()) return 1.0;
    if (minDim <= t.front().minDim) return t.front().efficiency;
    if (minDim >= t.back().minDim) return t.back().efficiency;
    auto hi = std::upper_bound(t.begin(), t.end(), minDim,
                               [](int64_t v, const GemmEfficiencyPoint& p) { return v < p.minDim; });
    auto lo = hi - 1;
    // Linear in log2(minDim) between table points: GEMM efficiency grows roughly with the log of tile
    // occupancy (NVIDIA Matrix Multiplication Background guide, wave quantisation); calibration refines it.
    const double x = std::log2(static_cast<double>(minDim));
    const double x0 = std::log2(static_cast<double>(lo->minDim));
    const double x1 = std::log2(static_cast<double>(hi->minDim));
    const double f = (x - x0) / (x1 - x0);
    return lo->efficiency + f * (hi->efficiency - lo->efficiency);
}

double gemmPlateauEfficiency(const GpuSpec& gpu, Dtype dtype) {
    if (!gpu.gemmModel) return gpu.gemmEfficiency.empty() ? 1.0 : gpu.gemmEfficiency.back().efficiency;
    const auto& table = gpu.gemmModel->maxEfficiency;
    auto it = table.find(dtype);
    if (it == table.end()) it = table.find(Dtype::Bf16); // FP16 runs on BF16's tensor-core paths
    return it != table.end() ? it->second : 1.0;
}

double gemmEfficiency(const GpuSpec& gpu, int64_t m, int64_t n, int64_t k, Dtype dtype, int64_t batch, bool perHead) {
    if (!gpu.gemmModel) return gemmEfficiency(gpu, std::min({m, n, k}));
    const GemmShapeModel& g = *gpu.gemmModel;
    // FP16 runs on the same tensor-core paths as BF16; a dtype the model does not list takes BF16's figures.
    auto lookup = [&](const std::map<Dtype, double>& table, double fallback) {
        auto it = table.find(dtype);
        if (it == table.end()) it = table.find(Dtype::Bf16);
        return it != table.end() ? it->second : fallback;
    };
    // A leading dimension that is not a multiple of 16 bytes of the element rules out the TMA/wgmma kernels: the
    // GEMM runs on cuBLAS's align-1 fallback at its measured rate, whatever its shape (FORMULAS.md §3.1). The
    // operands and result of (m x k) @ (k x n), and of its two gradients, have leading dimensions k and n only: the
    // row count m (the tokens) may be anything.
    // A GEMM batched over attention heads whose head dimension is unaligned takes its own measured rate where the
    // GPU has one (A100: cuBLAS's batched fallback, far below its plain one), else the plain figure.
    const int64_t align = std::max<int64_t>(1, static_cast<int64_t>(16.0 / bytesPerElement(dtype)));
    if (n % align != 0 || k % align != 0) {
        const auto& table = perHead && !g.unalignedPerHeadEfficiency.empty() ? g.unalignedPerHeadEfficiency
                                                                            : g.unalignedEfficiency;
        auto un = table.find(dtype);
        if (un == table.end() && dtype == Dtype::Fp16) un = table.find(Dtype::Bf16);
        if (un != table.end()) return un->second;   // a dtype not measured is not penalised
    }
    const double plateau = lookup(g.maxEfficiency, 1.0);
    const double k0 = lookup(g.kOverhead, 0.0);
    const double kd = static_cast<double>(std::max<int64_t>(k, 1));
    const int64_t mm = std::max<int64_t>(m, 1), nn = std::max<int64_t>(n, 1), bb = std::max<int64_t>(batch, 1);
    // Each output tile pays a fixed prologue/epilogue worth k0 elements of its main loop (fitted to the DeepGEMM
    // FP8 k sweep); the tiles run in waves of one per SM, and a GEMM pays for every slot of its last wave and
    // for the padding of its edge tiles. cuBLAS picks the orientation of the tile that quantizes better.
    auto quantization = [&](int64_t tm, int64_t tn) {
        const int64_t tiles = bb * ((mm + tm - 1) / tm) * ((nn + tn - 1) / tn);
        const int64_t slots = g.smCount > 0 ? (tiles + g.smCount - 1) / g.smCount * g.smCount : tiles;
        return static_cast<double>(bb) * static_cast<double>(mm) * static_cast<double>(nn) /
               (static_cast<double>(slots) * static_cast<double>(tm) * static_cast<double>(tn));
    };
    const double q = std::max(quantization(g.tileM, g.tileN), quantization(g.tileN, g.tileM));
    const double e = plateau * kd / (kd + k0) * q;
    return std::clamp(e, 1e-4, 1.0);
}

std::string resolveAttentionKernel(const GpuSpec& gpu, const std::string& requested) {
    if (requested.empty() || requested == "auto") return gpu.defaultAttentionKernel;
    return requested;
}

void checkClusterGpus(int64_t nodes, int64_t gpusPerNode, const std::string& where, ProblemList& problems) {
    if (nodes < 1 || gpusPerNode < 1 || nodes * gpusPerNode <= kMaxClusterGpus) return;
    problems.add(where, std::to_string(nodes) + " nodes x " + std::to_string(gpusPerNode) + " GPUs = " +
                            std::to_string(nodes * gpusPerNode) + " GPUs, more than the " +
                            std::to_string(kMaxClusterGpus) + " (2^20) a cluster may have");
}

ClusterConfig parseCluster(const nlohmann::json& doc, const std::string& pointer, ProblemList& problems) {
    ClusterConfig c;
    ObjectReader r(doc, pointer, problems);
    if (!r.isObject()) return c;
    checkSchemaVersion(r);
    c.name = r.requireString("name");
    c.gpusPerNode = static_cast<int>(r.requireInt("gpus_per_node", 1, 1024));
    c.nodes = static_cast<int>(r.requireInt("nodes", 1, 1 << 20));
    checkClusterGpus(c.nodes, c.gpusPerNode, r.pointer("nodes"), problems);
    c.pricePerGpuHour = r.optNumber("price_per_gpu_hour", 0.0, 0.0, 1e4);
    if (const auto* h = r.child("host")) {
        ObjectReader hr(*h, r.pointer("host"), problems);
        c.host.memoryBytes = hr.requireNumber("memory_bytes", 1e6, 1e16);
        c.host.pcieBytesPerSecond = hr.requireNumber("pcie_bytes_per_second", 1e6, 1e13);
        c.host.cpuAdamParametersPerSecond = hr.requireNumber("cpu_adam_parameters_per_second", 1e3, 1e14);
        hr.finish();
    }
    if (const auto* g = r.child("gpu")) {
        ObjectReader gr(*g, r.pointer("gpu"), problems);
        c.gpu.name = gr.requireString("name");
        c.gpu.memoryBytes = gr.requireInt("memory_bytes", 1 << 20, int64_t{1} << 50);
        c.gpu.reservedBytes = gr.optInt("reserved_bytes", 0, 0, int64_t{1} << 50);
        if (c.gpu.reservedBytes >= c.gpu.memoryBytes && c.gpu.memoryBytes > 0)
            problems.add(gr.pointer("reserved_bytes"), "must be less than memory_bytes");
        c.gpu.hbmBytesPerSecond = gr.requireNumber("hbm_bytes_per_second", 1e6, 1e15);
        c.gpu.memoryEfficiency = gr.optNumber("memory_efficiency", 0.8, 0.01, 1.0);
        c.gpu.kernelOverheadSeconds = gr.optNumber("kernel_overhead_seconds", 0.0, 0.0, 1.0);
        if (const auto* pf = gr.child("peak_flops_per_second")) {
            ObjectReader pr(*pf, gr.pointer("peak_flops_per_second"), problems);
            for (Dtype d : allDtypes())
                if (pr.has(toString(d))) c.gpu.peakFlopsPerSecond[d] = pr.requireNumber(toString(d), 1e6, 1e18);
            pr.finish();
            if (pr.isObject() && c.gpu.peakFlopsPerSecond.empty())
                problems.add(gr.pointer("peak_flops_per_second"), "needs at least one dtype");
        } else {
            problems.add(gr.pointer("peak_flops_per_second"), "required field is missing");
        }
        if (const auto* ge = gr.child("gemm_efficiency")) {
            const std::string gp = gr.pointer("gemm_efficiency");
            if (!ge->is_array() || ge->empty()) {
                problems.add(gp, "expected a non-empty array of {min_dim, efficiency}");
            } else {
                for (size_t i = 0; i < ge->size(); ++i) {
                    ObjectReader er((*ge)[i], gp + "/" + std::to_string(i), problems);
                    GemmEfficiencyPoint p;
                    p.minDim = er.requireInt("min_dim", 1, int64_t{1} << 32);
                    p.efficiency = er.requireNumber("efficiency", 0.001, 1.0);
                    er.finish();
                    if (!c.gpu.gemmEfficiency.empty() && p.minDim <= c.gpu.gemmEfficiency.back().minDim)
                        problems.add(gp + "/" + std::to_string(i) + "/min_dim", "must increase along the table");
                    c.gpu.gemmEfficiency.push_back(p);
                }
            }
        }
        if (const auto* gm = gr.child("gemm_model")) {
            ObjectReader mr(*gm, gr.pointer("gemm_model"), problems);
            GemmShapeModel model;
            auto perDtype = [&](const char* key, double lo, double hi, std::map<Dtype, double>& into) {
                const auto* v = mr.child(key);
                if (!v) {
                    problems.add(mr.pointer(key), "required field is missing");
                    return;
                }
                ObjectReader dr(*v, mr.pointer(key), problems);
                for (Dtype d : allDtypes())
                    if (dr.has(toString(d))) into[d] = dr.requireNumber(toString(d), lo, hi);
                dr.finish();
            };
            perDtype("max_efficiency", 0.01, 1.0, model.maxEfficiency);
            perDtype("k_overhead", 0.0, 1e6, model.kOverhead);
            if (mr.has("unaligned_efficiency")) perDtype("unaligned_efficiency", 0.001, 1.0, model.unalignedEfficiency);
            if (mr.has("unaligned_per_head_efficiency"))
                perDtype("unaligned_per_head_efficiency", 0.001, 1.0, model.unalignedPerHeadEfficiency);
            model.tileM = mr.optInt("tile_m", 256, 1, 4096);
            model.tileN = mr.optInt("tile_n", 128, 1, 4096);
            model.smCount = mr.optInt("sm_count", 0, 0, 100000);
            mr.finish();
            if (model.maxEfficiency.empty()) problems.add(gr.pointer("gemm_model") + "/max_efficiency", "needs at least one dtype");
            c.gpu.gemmModel = model;
        }
        if (const auto* ak = gr.child("attention_kernels")) {
            ObjectReader ar(*ak, gr.pointer("attention_kernels"), problems);
            if (ar.isObject()) {
                for (auto it = ak->begin(); it != ak->end(); ++it) {
                    ObjectReader kr(it.value(), ar.pointer(it.key()), problems);
                    ar.accept(it.key());
                    AttentionKernelSpec spec;
                    if (const auto* bm = kr.child("benchmark")) spec.benchmark = parseAttentionBenchmark(*bm, kr.pointer("benchmark"), problems);
                    // With a benchmark the plateau figures are optional (the benchmark replaces them).
                    spec.forwardEfficiency = spec.benchmark ? kr.optNumber("forward_efficiency", 0.0, 0.001, 1.0)
                                                            : kr.requireNumber("forward_efficiency", 0.001, 1.0);
                    spec.backwardEfficiency = spec.benchmark ? kr.optNumber("backward_efficiency", 0.0, 0.001, 1.0)
                                                             : kr.requireNumber("backward_efficiency", 0.001, 1.0);
                    spec.seqHalf = kr.optNumber("seq_half", 0.0, 0.0, 1e7);
                    if (const auto* df = kr.child("dropout_time_factor")) {
                        ObjectReader dr(*df, kr.pointer("dropout_time_factor"), problems);
                        spec.dropoutForwardTimeFactor = dr.requireNumber("forward", 1.0, 10.0);
                        spec.dropoutBackwardTimeFactor = dr.requireNumber("backward", 1.0, 10.0);
                        dr.finish();
                    }
                    if (const auto* hd = kr.child("head_dims"))
                        spec.headDims = increasingPositiveInts(*hd, kr.pointer("head_dims"), "head dimensions", problems);
                    kr.finish();
                    c.gpu.attentionKernels[it.key()] = spec;
                }
            }
            ar.finish();
        }
        c.gpu.defaultAttentionKernel = gr.optString("default_attention_kernel", "");
        if (!c.gpu.defaultAttentionKernel.empty() && !c.gpu.attentionKernels.count(c.gpu.defaultAttentionKernel))
            problems.add(gr.pointer("default_attention_kernel"),
                         "\"" + c.gpu.defaultAttentionKernel + "\" is not one of gpu/attention_kernels");
        if (const auto* k = gr.child("kernels")) c.gpu.kernels = parseKernels(*k, gr.pointer("kernels"), problems);
        if (const auto* pf = gr.child("phase_fits")) {
            ObjectReader pr(*pf, gr.pointer("phase_fits"), problems);
            for (const char* phase : {"forward", "backward", "optimizer", "communication"}) {
                const auto* one = pr.child(phase);
                if (!one) continue;
                ObjectReader fr(*one, pr.pointer(phase), problems);
                PhaseFit f;
                f.overheadSeconds = fr.requireNumber("overhead_seconds", 0.0, 10.0);
                f.timeScale = fr.requireNumber("time_scale", 0.01, 100.0);
                f.perTensorSeconds = fr.optNumber("per_tensor_seconds", 0.0, 0.0, 1.0);
                fr.finish();
                c.gpu.phaseFits[phase] = f;
            }
            pr.finish();
        }
        c.gpu.overlapsCommunication = gr.optBool("overlaps_communication", true);
        c.gpu.syncJitterFraction = gr.optNumber("sync_jitter_fraction", 0.0, 0.0, 1.0);
        c.gpu.ncclCollChannels = static_cast<int>(gr.optInt("nccl_channels", 0, 0, 64));
        c.gpu.commContention = gr.optNumber("comm_contention", 0.0, 0.0, 4.0);
        c.gpu.commContentionMax = gr.optNumber("comm_contention_max", 0.0, 0.0, 4.0);
        c.gpu.fp8GemmAnyLayout = gr.optBool("fp8_gemm_any_layout", false);
        for (const auto& [ctas, share] : readCurve(gr, "contention_by_ctas", {"ctas", 1.0, 1024.0}, {"share", 0.0, 4.0}, problems))
            c.gpu.contentionByCtas.push_back({ctas, share});
        // The curve is read against NCCL's own channels (collectiveContention): without them it would be ignored in silence.
        if (gr.child("contention_by_ctas") && c.gpu.ncclCollChannels <= 0)
            problems.add(gr.pointer("contention_by_ctas"),
                         "needs nccl_channels, the CTAs NCCL's own collectives hold, to price a collective on fewer");
        c.gpu.sustainedTensorFraction = gr.optNumber("sustained_tensor_fraction", 1.0, 0.05, 1.0);
        if (gr.child("sustained_share_by_duty")) {
            for (const auto& [duty, share] :
                 readCurve(gr, "sustained_share_by_duty", {"duty", 0.001, 1.0}, {"share", 0.05, 1.0}, problems))
                c.gpu.sustainedShareByDuty.push_back({duty, share});
            // The measured curve replaces the fitted constant: given both, one would be ignored in silence.
            if (gr.child("sustained_tensor_fraction"))
                problems.add(gr.pointer("sustained_tensor_fraction"),
                             "give either sustained_tensor_fraction or sustained_share_by_duty, not both (the measured "
                             "curve replaces the fitted constant)");
        }
        if (const auto* sw = gr.child("sustained_share_power")) {
            ObjectReader wr(*sw, gr.pointer("sustained_share_power"), problems);
            GpuSpec::SharePower w;
            w.measuredAtWatts = wr.requireNumber("measured_at_watts", 1.0, 5000.0);
            w.idleWatts = wr.requireNumber("idle_watts", 0.0, 5000.0);
            w.clockExponent = wr.requireNumber("clock_exponent", 0.5, 6.0);
            wr.finish();
            if (w.idleWatts >= w.measuredAtWatts)
                problems.add(gr.pointer("sustained_share_power") + "/idle_watts",
                             "must be below measured_at_watts (the idle draw is what the limit's throttling leaves)");
            if (!gr.child("sustained_share_by_duty"))
                problems.add(gr.pointer("sustained_share_power"),
                             "describes the measured sustained_share_by_duty curve, which this GPU does not give");
            c.gpu.sustainedSharePower = w;
        }
        if (gr.child("power_limit_watts")) {
            c.gpu.powerLimitWatts = gr.requireNumber("power_limit_watts", 1.0, 5000.0);
            // A limit scales the measured curve; without the curve's power law it would be ignored in silence.
            if (const std::string why = c.gpu.powerLimitProblem(c.gpu.powerLimitWatts); !why.empty())
                problems.add(gr.pointer("power_limit_watts"), why);
        }
        gr.finish();
    } else {
        problems.add(r.pointer("gpu"), "required field is missing");
    }
    if (const auto* n = r.child("network")) {
        ObjectReader nr(*n, r.pointer("network"), problems);
        if (const auto* t = nr.child("intra_node")) c.intraNode = parseTier(*t, nr.pointer("intra_node"), problems);
        else problems.add(nr.pointer("intra_node"), "required field is missing");
        if (const auto* t = nr.child("inter_node")) c.interNode = parseTier(*t, nr.pointer("inter_node"), problems);
        else problems.add(nr.pointer("inter_node"), "required field is missing");
        // A mesh of direct GPU links is inside a node; across nodes every GPU's NIC reaches the fabric's switches.
        if (c.interNode.meshLinks > 0)
            problems.add(nr.pointer("inter_node") + "/mesh_links",
                         "a mesh of direct GPU links is a node's (intra_node); across nodes the NICs reach a switched fabric");
        nr.finish();
    } else {
        problems.add(r.pointer("network"), "required field is missing");
    }
    if (const auto* s = r.child("sources")) {
        ObjectReader sr(*s, r.pointer("sources"), problems);
        if (sr.isObject()) {
            for (auto it = s->begin(); it != s->end(); ++it) {
                if (it.value().is_string()) c.sources[it.key()] = it.value().get<std::string>();
                else problems.add(sr.pointer(it.key()), "expected a citation string");
            }
        }
    }
    if (const auto* cal = r.child("calibration")) {
        if (!cal->is_object()) problems.add(r.pointer("calibration"), "expected an object");
        else c.calibration = *cal;
        // The held-out errors of `tessel calibrate`'s runs known by their step are the calibrated cluster's error
        // band (sim::calibratedErrorBand): an entry that is not a number is a problem, not a run left out.
        if (cal->is_object() && cal->contains("step_runs")) {
            const std::string at = r.pointer("calibration") + "/step_runs";
            const nlohmann::json& runs = (*cal)["step_runs"];
            if (!runs.is_array()) problems.add(at, "expected the array of runs `tessel calibrate` writes");
            else
                for (size_t i = 0; i < runs.size(); ++i) {
                    const std::string here = at + "/" + std::to_string(i);
                    if (!runs[i].is_object()) problems.add(here, "expected an object");
                    else if (runs[i].contains("error_held_out") &&
                             (!runs[i]["error_held_out"].is_number() || !std::isfinite(runs[i]["error_held_out"].get<double>())))
                        problems.add(here + "/error_held_out", "expected a number (predicted / measured - 1)");
                }
        }
    }
    r.finish();
    return c;
}

ClusterConfig parseCluster(const nlohmann::json& doc, const std::string& pointer) {
    ProblemList problems;
    ClusterConfig c = parseCluster(doc, pointer, problems);
    problems.throwIfAny();
    return c;
}

nlohmann::json clusterToJson(const ClusterConfig& c) {
    nlohmann::json peak = nlohmann::json::object();
    for (const auto& [d, f] : c.gpu.peakFlopsPerSecond) peak[toString(d)] = f;
    nlohmann::json gemm = nlohmann::json::array();
    for (const auto& p : c.gpu.gemmEfficiency) gemm.push_back({{"min_dim", p.minDim}, {"efficiency", p.efficiency}});
    nlohmann::json j{{"schema_version", 1},
                     {"name", c.name},
                     {"gpus_per_node", c.gpusPerNode},
                     {"nodes", c.nodes},
                     {"gpu",
                      {{"name", c.gpu.name},
                       {"memory_bytes", c.gpu.memoryBytes},
                       {"reserved_bytes", c.gpu.reservedBytes},
                       {"hbm_bytes_per_second", c.gpu.hbmBytesPerSecond},
                       {"memory_efficiency", c.gpu.memoryEfficiency},
                       {"kernel_overhead_seconds", c.gpu.kernelOverheadSeconds},
                       {"peak_flops_per_second", peak}}},
                     {"network", {{"intra_node", tierToJson(c.intraNode)}, {"inter_node", tierToJson(c.interNode)}}}};
    if (!c.gpu.kernels.empty()) {
        nlohmann::json k = nlohmann::json::object();
        for (const auto& [name, f] : c.gpu.kernels) {
            nlohmann::json e{{"overhead_seconds", f.overheadSeconds}};
            if (f.bytesPerSecond > 0.0) e["bytes_per_second"] = f.bytesPerSecond;
            if (f.flopsPerSecond > 0.0) e["flops_per_second"] = f.flopsPerSecond;
            if (f.scoreGemms) e["counts"] = "score_gemms";
            if (f.stepSeconds > 0.0) e["step_seconds"] = f.stepSeconds;
            k[name] = e;
        }
        j["gpu"]["kernels"] = k;
    }
    if (!c.gpu.phaseFits.empty()) {
        nlohmann::json pf = nlohmann::json::object();
        for (const auto& [phase, f] : c.gpu.phaseFits) {
            pf[phase] = {{"overhead_seconds", f.overheadSeconds}, {"time_scale", f.timeScale}};
            if (f.perTensorSeconds > 0.0) pf[phase]["per_tensor_seconds"] = f.perTensorSeconds;
        }
        j["gpu"]["phase_fits"] = pf;
    }
    if (!gemm.empty()) j["gpu"]["gemm_efficiency"] = gemm;
    if (c.gpu.gemmModel) {
        nlohmann::json eff = nlohmann::json::object(), k0 = nlohmann::json::object();
        for (const auto& [d, v] : c.gpu.gemmModel->maxEfficiency) eff[toString(d)] = v;
        for (const auto& [d, v] : c.gpu.gemmModel->kOverhead) k0[toString(d)] = v;
        j["gpu"]["gemm_model"] = {{"max_efficiency", eff},
                                  {"k_overhead", k0},
                                  {"tile_m", c.gpu.gemmModel->tileM},
                                  {"tile_n", c.gpu.gemmModel->tileN},
                                  {"sm_count", c.gpu.gemmModel->smCount}};
        if (!c.gpu.gemmModel->unalignedEfficiency.empty()) {
            nlohmann::json un = nlohmann::json::object();
            for (const auto& [d, v] : c.gpu.gemmModel->unalignedEfficiency) un[toString(d)] = v;
            j["gpu"]["gemm_model"]["unaligned_efficiency"] = un;
        }
        if (!c.gpu.gemmModel->unalignedPerHeadEfficiency.empty()) {
            nlohmann::json un = nlohmann::json::object();
            for (const auto& [d, v] : c.gpu.gemmModel->unalignedPerHeadEfficiency) un[toString(d)] = v;
            j["gpu"]["gemm_model"]["unaligned_per_head_efficiency"] = un;
        }
    }
    if (!c.gpu.attentionKernels.empty()) {
        nlohmann::json ak = nlohmann::json::object();
        for (const auto& [name, spec] : c.gpu.attentionKernels) {
            nlohmann::json k = {{"seq_half", spec.seqHalf}};
            if (spec.forwardEfficiency > 0.0) k["forward_efficiency"] = spec.forwardEfficiency;
            if (spec.backwardEfficiency > 0.0) k["backward_efficiency"] = spec.backwardEfficiency;
            if (spec.benchmark) k["benchmark"] = attentionBenchmarkJson(*spec.benchmark);
            if (!spec.headDims.empty()) k["head_dims"] = spec.headDims;
            if (spec.dropoutForwardTimeFactor > 0.0)
                k["dropout_time_factor"] = {{"forward", spec.dropoutForwardTimeFactor},
                                            {"backward", spec.dropoutBackwardTimeFactor}};
            ak[name] = k;
        }
        j["gpu"]["attention_kernels"] = ak;
    }
    if (!c.gpu.defaultAttentionKernel.empty()) j["gpu"]["default_attention_kernel"] = c.gpu.defaultAttentionKernel;
    if (!c.gpu.overlapsCommunication) j["gpu"]["overlaps_communication"] = false;
    if (c.gpu.syncJitterFraction > 0.0) j["gpu"]["sync_jitter_fraction"] = c.gpu.syncJitterFraction;
    if (c.gpu.ncclCollChannels > 0) j["gpu"]["nccl_channels"] = c.gpu.ncclCollChannels;
    if (c.gpu.commContention > 0.0) j["gpu"]["comm_contention"] = c.gpu.commContention;
    if (c.gpu.commContentionMax > 0.0) j["gpu"]["comm_contention_max"] = c.gpu.commContentionMax;
    if (c.gpu.fp8GemmAnyLayout) j["gpu"]["fp8_gemm_any_layout"] = true;
    if (!c.gpu.contentionByCtas.empty()) {
        nlohmann::json curve = nlohmann::json::array();
        for (const auto& p : c.gpu.contentionByCtas) curve.push_back({{"ctas", p.ctas}, {"share", p.share}});
        j["gpu"]["contention_by_ctas"] = curve;
    }
    if (c.gpu.sustainedTensorFraction != 1.0) j["gpu"]["sustained_tensor_fraction"] = c.gpu.sustainedTensorFraction;
    if (!c.gpu.sustainedShareByDuty.empty()) {
        nlohmann::json curve = nlohmann::json::array();
        for (const auto& p : c.gpu.sustainedShareByDuty) curve.push_back({{"duty", p.duty}, {"share", p.share}});
        j["gpu"]["sustained_share_by_duty"] = curve;
    }
    if (c.gpu.sustainedSharePower)
        j["gpu"]["sustained_share_power"] = {{"measured_at_watts", c.gpu.sustainedSharePower->measuredAtWatts},
                                            {"idle_watts", c.gpu.sustainedSharePower->idleWatts},
                                            {"clock_exponent", c.gpu.sustainedSharePower->clockExponent}};
    if (c.gpu.powerLimitWatts > 0.0) j["gpu"]["power_limit_watts"] = c.gpu.powerLimitWatts;
    if (c.pricePerGpuHour > 0) j["price_per_gpu_hour"] = c.pricePerGpuHour;
    if (c.host.present())
        j["host"] = {{"memory_bytes", c.host.memoryBytes},
                     {"pcie_bytes_per_second", c.host.pcieBytesPerSecond},
                     {"cpu_adam_parameters_per_second", c.host.cpuAdamParametersPerSecond}};
    if (!c.sources.empty()) j["sources"] = c.sources;
    if (c.calibration) j["calibration"] = *c.calibration;
    return j;
}

} // namespace tessel
