// Calibration fits (FORMULAS.md §7): robust relative least squares with Eigen over microbenchmark points and
// training-run measurements, written back into a cluster description with a `calibration` block.
#include "tessel/cost/calibration.hpp"

#include "tessel/cost/comm.hpp"
#include "tessel/cost/compute.hpp"

#include <Eigen/QR>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

namespace tessel {

namespace {
double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Least squares of rows `keep` with coefficients `active`, weights 1 / seconds; inactive coefficients are 0.
Eigen::VectorXd solveWeighted(const Eigen::MatrixXd& x, const Eigen::VectorXd& t, const std::vector<bool>& keep,
                              const std::vector<bool>& active, const Eigen::VectorXd* rowWeights) {
    std::vector<Eigen::Index> rows, cols;
    for (Eigen::Index i = 0; i < x.rows(); ++i)
        if (keep[static_cast<size_t>(i)]) rows.push_back(i);
    for (Eigen::Index j = 0; j < x.cols(); ++j)
        if (active[static_cast<size_t>(j)]) cols.push_back(j);
    Eigen::MatrixXd a(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(cols.size()));
    Eigen::VectorXd b = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(rows.size()));
    for (size_t r = 0; r < rows.size(); ++r) {
        const double w = rowWeights ? std::sqrt((*rowWeights)(rows[r])) : 1.0;
        b(static_cast<Eigen::Index>(r)) = w;
        for (size_t c = 0; c < cols.size(); ++c)
            a(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(c)) = w * x(rows[r], cols[c]) / t(rows[r]);
    }
    // Column scaling keeps the QR well conditioned when one column holds seconds-per-FLOP (~1e-11) and
    // another a constant.
    Eigen::VectorXd scale(a.cols());
    for (Eigen::Index c = 0; c < a.cols(); ++c) {
        scale(c) = a.col(c).norm();
        if (scale(c) > 0.0) a.col(c) /= scale(c);
    }
    const Eigen::VectorXd z = a.colPivHouseholderQr().solve(b);
    Eigen::VectorXd beta = Eigen::VectorXd::Zero(x.cols());
    for (size_t c = 0; c < cols.size(); ++c) {
        const Eigen::Index ci = static_cast<Eigen::Index>(c);
        beta(cols[c]) = scale(ci) > 0.0 ? z(ci) / scale(ci) : 0.0;
    }
    return beta;
}

// Knot of the GEMM efficiency table for a GEMM whose smallest dimension is `minDim`: the nearest power of 2.
int64_t gemmKnot(int64_t minDim) {
    const double l = std::round(std::log2(static_cast<double>(std::max<int64_t>(1, minDim))));
    return int64_t{1} << static_cast<int>(l);
}

TermReport report(std::string term, const LinearFit& f, nlohmann::json values) {
    TermReport r;
    r.term = std::move(term);
    r.points = static_cast<int>(f.kept.size());
    r.rejected = f.rejected();
    r.rmsRelativeResidual = f.rmsRelativeResidual();
    r.maxAbsRelativeResidual = f.maxAbsRelativeResidual();
    r.values = std::move(values);
    return r;
}

std::optional<Primitive> primitiveNamed(const std::string& name) {
    for (Primitive p : allPrimitives())
        if (toString(p) == name) return p;
    return std::nullopt;
}

// The dtype whose peak a benchmark's GEMM efficiency is relative to: `tessel bench --dtype`.
Dtype benchDtype(const std::string& name) {
    if (name == "fp64") return Dtype::Fp64;
    if (name == "fp32") return Dtype::Fp32;
    if (name == "mixed" || name == "bf16") return Dtype::Bf16;
    throw InputError("provenance/dtype", "unknown benchmark dtype \"" + name + "\" (fp64, fp32 or mixed)");
}

bool isComputeKernel(const std::string& k) {
    const auto& names = kernel_cost::kernelNames();
    return std::find(names.begin(), names.end(), k) != names.end();
}

bool isTransfer(const std::string& k) {
    const auto& names = kernel_cost::transferNames();
    return std::find(names.begin(), names.end(), k) != names.end();
}
} // namespace

int LinearFit::rejected() const { return static_cast<int>(std::count(kept.begin(), kept.end(), false)); }

double LinearFit::rmsRelativeResidual() const {
    double s = 0.0;
    int n = 0;
    for (size_t i = 0; i < kept.size(); ++i)
        if (kept[i]) {
            s += relativeResiduals[i] * relativeResiduals[i];
            ++n;
        }
    return n ? std::sqrt(s / n) : 0.0;
}

double LinearFit::maxAbsRelativeResidual() const {
    double m = 0.0;
    for (size_t i = 0; i < kept.size(); ++i)
        if (kept[i]) m = std::max(m, std::abs(relativeResiduals[i]));
    return m;
}

LinearFit fitRelativeLeastSquares(const Eigen::MatrixXd& x, const Eigen::VectorXd& seconds, double madLimit,
                                  const Eigen::VectorXd* rowWeights) {
    const size_t n = static_cast<size_t>(x.rows());
    const size_t p = static_cast<size_t>(x.cols());
    for (size_t i = 0; i < n; ++i)
        if (!(seconds(static_cast<Eigen::Index>(i)) > 0.0))
            throw RuntimeError("calibration: a measured duration is not positive (row " + std::to_string(i) + ")");
    LinearFit f;
    f.kept.assign(n, true);
    for (int round = 0; round < 8; ++round) {
        if (static_cast<size_t>(std::count(f.kept.begin(), f.kept.end(), true)) < p)
            throw RuntimeError("calibration: " + std::to_string(n) + " points, fewer than the " + std::to_string(p) +
                               " coefficients to fit once outliers are left out");
        // Active set for beta >= 0 (Lawson & Hanson 1974, ch. 23, in its simplest form): pin the most negative
        // coefficient at 0 and refit until none is negative.
        std::vector<bool> active(p, true);
        Eigen::VectorXd beta;
        for (;;) {
            beta = solveWeighted(x, seconds, f.kept, active, rowWeights);
            Eigen::Index worst = -1;
            for (Eigen::Index j = 0; j < beta.size(); ++j)
                if (active[static_cast<size_t>(j)] && beta(j) < 0.0 && (worst < 0 || beta(j) < beta(worst))) worst = j;
            if (worst < 0) break;
            active[static_cast<size_t>(worst)] = false;
        }
        f.beta = beta;
        const Eigen::VectorXd pred = x * beta;
        f.relativeResiduals.assign(n, 0.0);
        std::vector<double> keptResiduals;
        for (size_t i = 0; i < n; ++i) {
            const Eigen::Index ii = static_cast<Eigen::Index>(i);
            f.relativeResiduals[i] = (pred(ii) - seconds(ii)) / seconds(ii);
            if (f.kept[i]) keptResiduals.push_back(f.relativeResiduals[i]);
        }
        // Outliers: |r - median| > madLimit x 1.4826 MAD (the MAD scaled to a normal sigma; Rousseeuw & Croux
        // 1993), with a floor of 2% so that a near-perfect fit does not reject ordinary timer noise.
        const double med = median(keptResiduals);
        std::vector<double> dev;
        for (double r : keptResiduals) dev.push_back(std::abs(r - med));
        const double limit = std::max(0.02, madLimit * 1.4826 * median(dev));
        std::vector<bool> keep(n);
        for (size_t i = 0; i < n; ++i) keep[i] = std::abs(f.relativeResiduals[i] - med) <= limit;
        // Outliers are the exception: when the rule would drop more than a fifth of the rows, the model does
        // not fit the data (rather than the data being noisy), so keep the 80% closest to the median instead.
        const size_t minKept = n - n / 5;
        if (static_cast<size_t>(std::count(keep.begin(), keep.end(), true)) < minKept) {
            std::vector<size_t> order(n);
            for (size_t i = 0; i < n; ++i) order[i] = i;
            std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
                return std::abs(f.relativeResiduals[a] - med) < std::abs(f.relativeResiduals[b] - med);
            });
            keep.assign(n, false);
            for (size_t i = 0; i < minKept; ++i) keep[order[i]] = true;
        }
        if (keep == f.kept) break;
        f.kept = keep;
    }
    return f;
}

std::vector<BenchSample> parseBenchSamples(const std::string& text, const std::string& source) {
    std::vector<BenchSample> out;
    std::istringstream in(text);
    int lineNo = 0;
    ProblemList problems;
    for (std::string line; std::getline(in, line);) {
        ++lineNo;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = source + ":" + std::to_string(lineNo);
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object()) {
            problems.add(where, "not a JSON object");
            continue;
        }
        // A string field: absent is "", anything else but a string is a problem (json::value would throw).
        auto stringField = [&](const char* key) -> std::string {
            if (!j.contains(key) || j[key].is_null()) return "";
            if (j[key].is_string()) return j[key].get<std::string>();
            problems.add(where + "#/" + key, "expected a string");
            return "";
        };
        if (stringField("kind") != "microbenchmark") continue;
        BenchSample s;
        s.where = where;
        auto number = [&](const char* key, double& dst, bool required) {
            if (!j.contains(key)) {
                if (required) problems.add(where + "#/" + key, "required field is missing");
                return;
            }
            if (!j[key].is_number()) problems.add(where + "#/" + key, "expected a number");
            else dst = j[key].get<double>();
        };
        if (!j.contains("kernel") || !j["kernel"].is_string()) {
            problems.add(where + "#/kernel", "expected the kernel's name");
            continue;
        }
        s.kernel = j["kernel"].get<std::string>();
        if (!isComputeKernel(s.kernel) && !isTransfer(s.kernel) && !primitiveNamed(s.kernel))
            problems.add(where + "#/kernel", "unknown kernel or primitive \"" + s.kernel + "\"");
        number("median_seconds", s.seconds, true);
        number("flops", s.flops, false);
        number("bytes", s.bytes, false);
        double group = 1.0, rank = 0.0;
        number("group_size", group, false);
        number("rank", rank, false);
        // Counts an int holds (a cast of 1e308 is undefined): ranks as a plan's (PlanLimits::ranks).
        if (group < 1.0 || group > static_cast<double>(PlanLimits::ranks) || group != std::floor(group))
            problems.add(where + "#/group_size", "expected a whole number from 1 to " + std::to_string(PlanLimits::ranks));
        else
            s.groupSize = static_cast<int>(group);
        if (rank < 0.0 || rank >= static_cast<double>(PlanLimits::ranks) || rank != std::floor(rank))
            problems.add(where + "#/rank", "expected a whole number from 0 to " + std::to_string(PlanLimits::ranks - 1));
        else
            s.rank = static_cast<int>(rank);
        s.tier = stringField("tier");
        s.device = stringField("device");
        // Shape entries are sizes (m, n, k, seq, ...) or flags (trans_a, pinned): whole numbers from 0 to 2^40.
        if (j.contains("shape") && !j["shape"].is_null()) {
            if (!j["shape"].is_object()) problems.add(where + "#/shape", "expected an object of sizes");
            else
                for (auto it = j["shape"].begin(); it != j["shape"].end(); ++it) {
                    const nlohmann::json& v = it.value();
                    if (!v.is_number()) continue; // names and labels a sweep adds beside its sizes
                    const double d = v.get<double>();
                    if (d < 0.0 || d > static_cast<double>(int64_t{1} << 40) || d != std::floor(d))
                        problems.add(where + "#/shape/" + it.key(), "expected a whole number from 0 to 2^40");
                    else
                        s.shape[it.key()] = static_cast<int64_t>(d);
                }
        }
        // The GEMM fit reads each point's smallest dimension.
        if (s.kernel == "gemm")
            for (const char* dim : {"m", "n", "k"})
                if (!s.shape.count(dim) && !(j.contains("shape") && j["shape"].is_object() && j["shape"].contains(dim) &&
                                             j["shape"][dim].is_number())) // a bad number is reported above
                    problems.add(where + "#/shape/" + dim, "a gemm point needs its m, n and k");
        if (!(s.seconds > 0.0)) problems.add(where + "#/median_seconds", "must be positive");
        out.push_back(std::move(s));
    }
    problems.throwIfAny();
    return out;
}

CalibrationResult calibrateFromBench(const ClusterConfig& base, const CalibrationInputs& in, const CalibrationOptions& o) {
    CalibrationResult result;
    result.cluster = base;
    GpuSpec& gpu = result.cluster.gpu;
    std::map<std::string, std::vector<const BenchSample*>> byKernel;
    for (const BenchSample& s : in.bench) byKernel[s.kernel].push_back(&s);

    // GEMMs: t = overhead + flops x c_knot, c_knot = 1 / (peak x efficiency(knot)) (FORMULAS.md §7.1).
    if (const auto it = byKernel.find("gemm"); it != byKernel.end() && it->second.size() >= 3) {
        std::set<int64_t> knots;
        for (const BenchSample* s : it->second)
            knots.insert(gemmKnot(std::min({s->shape.at("m"), s->shape.at("n"), s->shape.at("k")})));
        const std::vector<int64_t> knotList(knots.begin(), knots.end());
        Eigen::MatrixXd x = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(it->second.size()),
                                                  static_cast<Eigen::Index>(knotList.size() + 1));
        Eigen::VectorXd t(x.rows());
        for (size_t i = 0; i < it->second.size(); ++i) {
            const BenchSample& s = *it->second[i];
            const int64_t knot = gemmKnot(std::min({s.shape.at("m"), s.shape.at("n"), s.shape.at("k")}));
            const auto col = std::find(knotList.begin(), knotList.end(), knot) - knotList.begin();
            const Eigen::Index row = static_cast<Eigen::Index>(i);
            x(row, 0) = 1.0;
            x(row, col + 1) = s.flops;
            t(row) = s.seconds;
        }
        const LinearFit f = fitRelativeLeastSquares(x, t, o.madLimit);
        nlohmann::json values{{"overhead_seconds", f.beta(0)}, {"before", nlohmann::json::array()}, {"after", nlohmann::json::array()}};
        for (const auto& p : gpu.gemmEfficiency) values["before"].push_back({{"min_dim", p.minDim}, {"efficiency", p.efficiency}});
        // Efficiency is relative to the cluster's peak for the dtype the points were measured in.
        const double peak = base.peakFlops(benchDtype(o.provenance.value("dtype", "fp64")));
        std::vector<GemmEfficiencyPoint> table;
        for (size_t j = 0; j < knotList.size(); ++j) {
            const double c = f.beta(static_cast<Eigen::Index>(j + 1));
            if (!(c > 0.0)) continue; // no rate: leave the knot out, the table interpolates over it
            GemmEfficiencyPoint p;
            p.minDim = knotList[j];
            p.efficiency = std::clamp(1.0 / (peak * c), 0.001, 1.0);
            table.push_back(p);
            values["after"].push_back({{"min_dim", p.minDim}, {"efficiency", p.efficiency}});
        }
        if (!table.empty()) {
            gpu.gemmEfficiency = table;
            // The measured table replaces the shape model (it carries this machine's shape dependence).
            if (gpu.gemmModel) values["replaced"] = "gpu/gemm_model";
            gpu.gemmModel.reset();
        }
        gpu.kernels["gemm"] = KernelFit{f.beta(0), 0.0, 0.0};
        result.terms.push_back(report("gpu/gemm_efficiency", f, values));
    } else {
        result.uncalibrated.push_back("gpu/gemm_efficiency: fewer than 3 GEMM points");
    }

    // Other compute kernels: t = overhead + quantity / rate, quantity = bytes as the cost model counts them
    // (memory kernels). Attention gets t = overhead + flops / F + bytes / B (FORMULAS.md §7.2) in the counts of
    // the implementation that was timed: the CUDA executor's GEMM attention materialises every [s_q, s_kv]
    // score block, so its FLOPs are the full GEMMs' and its bytes the score workspace passes
    // (kernel_cost::scoreGemm*, from each point's shape), both growing with s^2 but in a ratio set by the head
    // dimension; other backends (the CPU's row loop) keep the fused counts the points carry, whose FLOPs grow
    // with s^2 and bytes with s. Where the two columns are proportional over the points only FLOPs are fitted.
    const bool scoreGemmAttention = o.provenance.value("backend", "") == "cuda";
    const int benchElementBytes = static_cast<int>(bytesPerElement(benchDtype(o.provenance.value("dtype", "fp64"))));
    for (const std::string& name : kernel_cost::kernelNames()) {
        if (name == "gemm") continue;
        const auto it = byKernel.find(name);
        const bool attention = name.rfind("attention", 0) == 0;
        // The points' (flops, bytes) in the counts the fit is for, and (GEMM attention) their launch steps.
        std::vector<std::pair<double, double>> q;
        std::vector<double> steps;
        bool scoreCounts = attention && scoreGemmAttention && it != byKernel.end();
        if (scoreCounts)
            for (const BenchSample* s : it->second)
                for (const char* key : {"sequences", "seq", "heads", "head_dim"})
                    if (!s->shape.count(key)) scoreCounts = false; // an older sweep: keep the counts it carries
        if (it != byKernel.end())
            for (const BenchSample* s : it->second) {
                if (!scoreCounts) {
                    q.emplace_back(s->flops, s->bytes);
                    continue;
                }
                const bool backward = name == "attention_backward";
                const int64_t n = s->shape.at("sequences"), seq = s->shape.at("seq"), h = s->shape.at("heads"),
                              dim = s->shape.at("head_dim");
                q.emplace_back(kernel_cost::scoreGemmFlops(n, h, seq, seq, dim, backward),
                               kernel_cost::scoreGemmBytes(n, h, seq, seq, dim, benchElementBytes, backward));
                const auto kv = s->shape.find("kv_heads");
                steps.push_back(static_cast<double>(kernel_cost::scoreGemmSteps(
                    n, h, kv != s->shape.end() ? kv->second : h, seq, seq, benchElementBytes)));
            }
        std::set<double> sizes, ratios;
        for (const auto& [flops, bytes] : q) {
            sizes.insert(attention ? flops : bytes);
            if (attention && bytes > 0.0) ratios.insert(std::round(1e6 * flops / bytes));
        }
        if (it == byKernel.end() || sizes.size() < 2) {
            result.uncalibrated.push_back("gpu/kernels/" + name + ": no benchmark points at two or more sizes");
            continue;
        }
        bool flopsTerm = attention;
        const bool bytesTerm = !attention || (ratios.size() >= 2 && it->second.size() >= 4);
        // The GEMM attention's launch steps (FORMULAS.md §7.2): a column of their own where the points hold two or
        // more step counts and enough points for four coefficients; short sequences pay them beside FLOPs and bytes.
        bool stepsTerm = scoreCounts && std::set<double>(steps.begin(), steps.end()).size() >= 2 &&
                         it->second.size() >= 6;
        auto fitTerms = [&](bool withFlops, KernelFit& k) {
            Eigen::MatrixXd x(static_cast<Eigen::Index>(it->second.size()),
                              1 + int{stepsTerm} + int{withFlops} + int{bytesTerm});
            Eigen::VectorXd t(x.rows());
            for (size_t i = 0; i < it->second.size(); ++i) {
                const Eigen::Index r = static_cast<Eigen::Index>(i);
                Eigen::Index c = 0;
                x(r, c++) = 1.0;
                if (stepsTerm) x(r, c++) = steps[i];
                if (withFlops) x(r, c++) = q[i].first;
                if (bytesTerm) x(r, c++) = q[i].second;
                t(r) = it->second[i]->seconds;
            }
            const LinearFit f = fitRelativeLeastSquares(x, t, o.madLimit);
            k = KernelFit{};
            k.overheadSeconds = f.beta(0);
            k.scoreGemms = scoreCounts;
            Eigen::Index c = 1;
            if (stepsTerm) k.stepSeconds = f.beta(c++);
            if (withFlops) {
                const double secondsPerFlop = f.beta(c++);
                if (secondsPerFlop > 0.0) k.flopsPerSecond = 1.0 / secondsPerFlop;
            }
            if (bytesTerm) {
                const double secondsPerByte = f.beta(c++);
                if (secondsPerByte > 0.0) k.bytesPerSecond = 1.0 / secondsPerByte;
            }
            return f;
        };
        // (A step time the points would make negative is pinned at 0 by the fit's active set, which refits without
        // the column: such a kernel gets no step_seconds.)
        KernelFit k;
        LinearFit f = fitTerms(flopsTerm, k);
        // A FLOP rate above the GPU's peak is no rate: the points are bound by bytes and cannot pin it (the CUDA
        // executor's attention backward on the H100 fitted 3.6e16 /s). Then the kernel is fitted on bytes alone.
        const double peak = base.peakFlops(benchDtype(o.provenance.value("dtype", "fp64")));
        if (flopsTerm && bytesTerm && peak > 0.0 && k.flopsPerSecond > peak) {
            flopsTerm = false;
            f = fitTerms(false, k);
        }
        if (!(k.flopsPerSecond > 0.0 || k.bytesPerSecond > 0.0)) {
            result.uncalibrated.push_back("gpu/kernels/" + name + ": time does not grow with size in the points");
            continue;
        }
        gpu.kernels[name] = k;
        nlohmann::json values{{"overhead_seconds", k.overheadSeconds}};
        if (k.stepSeconds > 0.0) values["step_seconds"] = k.stepSeconds;
        if (k.flopsPerSecond > 0.0) values["flops_per_second"] = k.flopsPerSecond;
        if (k.bytesPerSecond > 0.0) values["bytes_per_second"] = k.bytesPerSecond;
        if (attention) values["counts"] = scoreCounts ? "score_gemms" : "fused";
        result.terms.push_back(report("gpu/kernels/" + name, f, values));
    }

    // Copies: t = overhead + bytes / rate, bytes counting every byte read and written (FORMULAS.md §7.7).
    // Reported, not applied: the device copy beside the datasheet's HBM bandwidth, the host copies for the
    // staged comm and checkpoints, which the model does not time.
    for (const std::string& name : kernel_cost::transferNames()) {
        const auto it = byKernel.find(name);
        std::set<double> sizes;
        if (it != byKernel.end())
            for (const BenchSample* s : it->second) sizes.insert(s->bytes);
        if (sizes.size() < 2) continue;
        // Pinned and pageable host buffers are separate lines (the "pinned" shape key), reported one by one.
        std::map<int64_t, std::vector<const BenchSample*>> byPinned;
        for (const BenchSample* s : it->second) byPinned[s->shape.count("pinned") ? s->shape.at("pinned") : -1].push_back(s);
        for (const auto& [pinned, pts] : byPinned) {
            Eigen::MatrixXd x(static_cast<Eigen::Index>(pts.size()), 2);
            Eigen::VectorXd t(x.rows());
            for (size_t i = 0; i < pts.size(); ++i) {
                x(static_cast<Eigen::Index>(i), 0) = 1.0;
                x(static_cast<Eigen::Index>(i), 1) = pts[i]->bytes;
                t(static_cast<Eigen::Index>(i)) = pts[i]->seconds;
            }
            const LinearFit f = fitRelativeLeastSquares(x, t, o.madLimit);
            if (!(f.beta(1) > 0.0)) continue;
            nlohmann::json values{{"overhead_seconds", f.beta(0)}, {"bytes_per_second", 1.0 / f.beta(1)}};
            if (name == "copy_device_to_device")
                values["fraction_of_datasheet_hbm"] = 1.0 / f.beta(1) / base.gpu.hbmBytesPerSecond;
            std::string term = "measured/" + name;
            if (pinned >= 0) term += pinned ? "/pinned" : "/pageable";
            result.measured.push_back(report(term, f, values));
        }
    }

    // Collectives per tier and primitive: t = alpha + bytes x busFactor / rate (nccl-tests convention,
    // FORMULAS.md §4 and §7.3); alpha is stored per latency step of the ring algorithm.
    for (const char* tierName : {"intra_node", "inter_node"}) {
        LinkTier& tier = std::string(tierName) == "intra_node" ? result.cluster.intraNode : result.cluster.interNode;
        std::map<Primitive, double> rates;
        std::map<Primitive, LinearFit> fits;
        for (Primitive p : allPrimitives()) {
            std::vector<const BenchSample*> pts;
            if (const auto it = byKernel.find(toString(p)); it != byKernel.end())
                for (const BenchSample* s : it->second)
                    if (s->tier == tierName && s->groupSize >= 2) pts.push_back(s);
            std::set<double> sizes;
            for (const BenchSample* s : pts) sizes.insert(s->bytes);
            if (sizes.size() < 2) continue;
            Eigen::MatrixXd x(static_cast<Eigen::Index>(pts.size()), 2);
            Eigen::VectorXd t(x.rows());
            for (size_t i = 0; i < pts.size(); ++i) {
                const Eigen::Index r = static_cast<Eigen::Index>(i);
                // One latency column scaled by the ring's step count, so groups of several sizes share alpha.
                x(r, 0) = latencySteps(p, pts[i]->groupSize, CommAlgorithm::Ring);
                x(r, 1) = pts[i]->bytes * busFactor(p, pts[i]->groupSize);
                t(r) = pts[i]->seconds;
            }
            const LinearFit f = fitRelativeLeastSquares(x, t, o.madLimit);
            if (!(f.beta(1) > 0.0)) continue;
            rates[p] = 1.0 / f.beta(1);
            fits.emplace(p, f);
            tier.primitiveLatencySeconds[p] = f.beta(0);
        }
        if (rates.empty()) {
            result.uncalibrated.push_back(std::string("network/") + tierName +
                                          ": no collective benchmarks over groups on this tier");
            continue;
        }
        // The tier's bandwidth becomes the fastest achieved bus bandwidth; each primitive's efficiency is its
        // own rate against it, so every primitive's fitted rate is reproduced exactly.
        double best = 0.0;
        for (const auto& [p, r] : rates) best = std::max(best, r);
        const double before = tier.bandwidthBytesPerSecond;
        tier.bandwidthBytesPerSecond = best;
        tier.efficiency = 1.0;
        for (const auto& [p, r] : rates) {
            tier.primitiveEfficiency[p] = std::clamp(r / best, 0.01, 1.0);
            result.terms.push_back(report(std::string("network/") + tierName + "/" + toString(p), fits.at(p),
                                          {{"latency_seconds_per_step", tier.primitiveLatencySeconds[p]},
                                           {"bus_bytes_per_second", r},
                                           {"efficiency", tier.primitiveEfficiency[p]},
                                           {"tier_bandwidth_before", before}}));
        }
        for (Primitive p : allPrimitives())
            if (!rates.count(p))
                result.uncalibrated.push_back(std::string("network/") + tierName + "/" + toString(p) +
                                              ": not benchmarked (efficiency 1 of the fitted tier bandwidth assumed)");
    }
    return result;
}

void calibrateFromRuns(CalibrationResult& result, const CalibrationInputs& in, const CalibrationOptions& o) {
    GpuSpec& gpu = result.cluster.gpu;
    // Reserved bytes: what a rank holds beyond its tensors (runtime, communication library, allocator slack):
    // the median over ranks and runs of process peak - tensor peak (FORMULAS.md §7.4).
    std::vector<double> extra;
    for (const MemorySample& m : in.memory)
        if (m.processPeakBytes > 0.0) extra.push_back(m.processPeakBytes - m.tensorPeakBytes);
    if (!extra.empty()) {
        const double reserved = std::max(0.0, median(extra));
        TermReport r;
        r.term = "gpu/reserved_bytes";
        r.points = static_cast<int>(extra.size());
        double rms = 0.0, worst = 0.0;
        for (const MemorySample& m : in.memory) {
            if (!(m.processPeakBytes > 0.0)) continue;
            const double rel = (m.tensorPeakBytes + reserved - m.processPeakBytes) / m.processPeakBytes;
            rms += rel * rel;
            worst = std::max(worst, std::abs(rel));
        }
        r.rmsRelativeResidual = std::sqrt(rms / static_cast<double>(extra.size()));
        r.maxAbsRelativeResidual = worst;
        r.values = {{"before", gpu.reservedBytes}, {"after", static_cast<int64_t>(reserved)}};
        gpu.reservedBytes = static_cast<int64_t>(reserved);
        result.terms.push_back(r);
    } else {
        result.uncalibrated.push_back("gpu/reserved_bytes: no training run with process_peak_resident_bytes");
    }
    // Per phase: host work around the kernels that no kernel accounts for (dispatch, bias adds, copies,
    // allocation; the optimizer's norm, clipping and shard copies), fitted as measured = overhead + scale x
    // predicted over the phase's actions (FORMULAS.md §7.5).
    std::map<std::string, std::vector<const ActionSample*>> byPhase;
    for (const ActionSample& a : in.actions) {
        const std::string phase = a.action == "forward" ? "forward" : a.action == "optimizer_step" ? "optimizer" : "backward";
        byPhase[phase].push_back(&a);
    }
    for (const char* phase : {"forward", "backward", "optimizer"}) {
        const auto& pts = byPhase[phase];
        if (std::string(phase) == "optimizer" && !pts.empty() &&
            std::all_of(pts.begin(), pts.end(), [](const ActionSample* a) { return a->parameterTensors > 0; })) {
            // tessel's executor updates its parameter tensors one by one (a few kernels and host work each), so
            // its step is the AdamW kernels' time (the sweep's bandwidth, scale 1) plus a latency per tensor:
            // measured = predicted + c x tensors, c by least squares on relative error, each run weighing the
            // same (runs of different tensor counts pin it; FORMULAS.md §7.5).
            std::map<std::string, int> perRun;
            for (const ActionSample* a : pts) ++perRun[a->run];
            double num = 0.0, den = 0.0;
            for (const ActionSample* a : pts) {
                const double w = 1.0 / perRun[a->run] / (a->measuredSeconds * a->measuredSeconds);
                num += w * (a->measuredSeconds - a->predictedSeconds) * a->parameterTensors;
                den += w * static_cast<double>(a->parameterTensors) * a->parameterTensors;
            }
            PhaseFit fit;
            fit.perTensorSeconds = std::max(0.0, num / den);
            LinearFit f;
            f.beta = Eigen::VectorXd::Constant(1, fit.perTensorSeconds);
            f.kept.assign(pts.size(), true);
            for (const ActionSample* a : pts)
                f.relativeResiduals.push_back((a->predictedSeconds + fit.perTensorSeconds * a->parameterTensors -
                                               a->measuredSeconds) / a->measuredSeconds);
            gpu.phaseFits[phase] = fit;
            result.terms.push_back(report("gpu/phase_fits/optimizer", f,
                                          {{"per_tensor_seconds", fit.perTensorSeconds}, {"time_scale", 1.0}}));
            continue;
        }
        std::set<double> sizes;
        for (const ActionSample* a : pts) sizes.insert(a->predictedSeconds);
        if (pts.empty()) {
            result.uncalibrated.push_back(std::string("gpu/phase_fits/") + phase + ": no actions of this phase in the runs");
            continue;
        }
        // Overhead and scale need 3 actions of 2 sizes; with fewer, the scale alone (overhead 0).
        const bool both = pts.size() >= 3 && sizes.size() >= 2;
        Eigen::MatrixXd x(static_cast<Eigen::Index>(pts.size()), both ? 2 : 1);
        Eigen::VectorXd t(x.rows());
        for (size_t i = 0; i < pts.size(); ++i) {
            const Eigen::Index r = static_cast<Eigen::Index>(i);
            if (both) x(r, 0) = 1.0;
            x(r, both ? 1 : 0) = pts[i]->predictedSeconds;
            t(r) = pts[i]->measuredSeconds;
        }
        // Each run weighs the same in a phase, however many actions its schedule has (a pipeline of 4 micro-batches
        // would otherwise outvote a data-parallel run of 2), so the fit spans the runs' action sizes evenly.
        std::map<std::string, int> perRun;
        for (const ActionSample* a : pts) ++perRun[a->run];
        Eigen::VectorXd w(x.rows());
        for (size_t i = 0; i < pts.size(); ++i) w(static_cast<Eigen::Index>(i)) = 1.0 / perRun[pts[i]->run];
        const LinearFit f = fitRelativeLeastSquares(x, t, o.madLimit, &w);
        PhaseFit fit;
        fit.overheadSeconds = both ? f.beta(0) : 0.0;
        const double scale = f.beta(both ? 1 : 0);
        fit.timeScale = scale > 0.0 ? scale : 1.0;
        gpu.phaseFits[phase] = fit;
        result.terms.push_back(report(std::string("gpu/phase_fits/") + phase, f,
                                      {{"overhead_seconds", fit.overheadSeconds}, {"time_scale", fit.timeScale}}));
    }
}

void calibrateSyncJitter(CalibrationResult& result, const CalibrationInputs& in) {
    std::vector<const SyncSample*> pts;
    bool anyWork = false;
    for (const SyncSample& s : in.syncs)
        if (s.measuredSeconds > 0.0 && s.transferSeconds > 0.0) {
            pts.push_back(&s);
            anyWork = anyWork || s.workSeconds > 0.0;
        }
    if (pts.size() < 3 || !anyWork) {
        result.uncalibrated.push_back("gpu/sync_jitter_fraction and gpu/phase_fits/communication: fewer than 3 "
                                      "collectives of a group of 2 or more ranks after compute in the runs");
        return;
    }
    Eigen::MatrixXd x(static_cast<Eigen::Index>(pts.size()), 2);
    Eigen::VectorXd t(x.rows());
    for (size_t i = 0; i < pts.size(); ++i) {
        const Eigen::Index r = static_cast<Eigen::Index>(i);
        x(r, 0) = pts[i]->transferSeconds;
        x(r, 1) = expectedMaxOfNormals(pts[i]->groupSize) * pts[i]->workSeconds;
        t(r) = pts[i]->measuredSeconds;
    }
    // Ordinary least squares on seconds, not relative error and no outlier rejection: waits are a skewed,
    // additive noise whose mean is what a step pays, and a relative fit would chase the short ones.
    Eigen::Vector2d beta = x.colPivHouseholderQr().solve(t);
    for (Eigen::Index c = 0; c < 2; ++c)
        if (beta(c) < 0.0) { // pin it at 0 and refit the other column alone (Lawson & Hanson, as above)
            const Eigen::Index other = 1 - c;
            beta(c) = 0.0;
            beta(other) = std::max(0.0, x.col(other).dot(t) / x.col(other).squaredNorm());
        }
    GpuSpec& gpu = result.cluster.gpu;
    const double scale = beta(0) > 0.0 ? std::clamp(beta(0), 0.01, 100.0) : 1.0;
    const double sigma = std::clamp(beta(1), 0.0, 1.0);
    TermReport r;
    r.points = static_cast<int>(pts.size());
    double rms = 0.0, worst = 0.0, meanMeasured = 0.0, meanPredicted = 0.0;
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
        const double predicted = scale * x(i, 0) + sigma * x(i, 1);
        const double rel = (predicted - t(i)) / t(i);
        rms += rel * rel;
        worst = std::max(worst, std::abs(rel));
        meanMeasured += t(i);
        meanPredicted += predicted;
    }
    r.rmsRelativeResidual = std::sqrt(rms / static_cast<double>(x.rows()));
    r.maxAbsRelativeResidual = worst;
    r.values = {{"time_scale", scale},
                {"sync_jitter_fraction", sigma},
                {"sync_jitter_fraction_before", gpu.syncJitterFraction},
                {"mean_measured_seconds", meanMeasured / static_cast<double>(x.rows())},
                {"mean_predicted_seconds", meanPredicted / static_cast<double>(x.rows())}};
    gpu.phaseFits["communication"] = PhaseFit{0.0, scale};
    gpu.syncJitterFraction = sigma;
    r.term = "gpu/phase_fits/communication + gpu/sync_jitter_fraction"; // one fit, two coefficients
    result.terms.push_back(r);
}

nlohmann::json calibrationBlock(const CalibrationResult& result, const CalibrationInputs& in, const CalibrationOptions& o) {
    auto toJson = [](const std::vector<TermReport>& reports) {
        nlohmann::json out = nlohmann::json::array();
        for (const TermReport& t : reports)
            out.push_back({{"term", t.term},
                           {"points", t.points},
                           {"rejected_outliers", t.rejected},
                           {"rms_relative_residual", t.rmsRelativeResidual},
                           {"max_abs_relative_residual", t.maxAbsRelativeResidual},
                           {"values", t.values}});
        return out;
    };
    const nlohmann::json terms = toJson(result.terms), measured = toJson(result.measured);
    return {{"schema_version", 1},
            {"created_utc", o.createdUtc},
            {"method", "relative least squares (Eigen ColPivHouseholderQR), coefficients >= 0, outliers beyond 3.5 "
                       "scaled MADs rejected; see cost_models/FORMULAS.md §7"},
            {"provenance", o.provenance},
            {"inputs", in.sources},
            {"microbenchmark_points", in.bench.size()},
            {"memory_samples", in.memory.size()},
            {"action_samples", in.actions.size()},
            {"sync_samples", in.syncs.size()},
            {"terms", terms},
            {"measured", measured},
            {"uncalibrated", result.uncalibrated}};
}

} // namespace tessel
