// GPU cluster description: the GPU (memory, peak flops per dtype, HBM, GEMM efficiency) and its network tiers.
#pragma once

#include "tessel/cost/errors.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

enum class Dtype { Fp64, Fp32, Tf32, Bf16, Fp16, Fp8, Fp4 };
std::string toString(Dtype d);
double bytesPerElement(Dtype d); // fp4: 0.5
// Whether GEMMs in this dtype run on the tensor cores: every dtype but fp32, which cuBLAS runs as FFMA on the CUDA
// cores when TF32 is off (PyTorch's default for matmul, tessel's fp32 recipe). The sustained share at the power
// limit (FORMULAS.md §3.3) applies to tensor-core work only: fp32 GEMMs held 6 s on a lent H200 kept their first
// 40 ms' rate (1.004-1.008, 1980 MHz, 563-609 W) while bf16 fell to 0.845 at 1473 MHz in the same call.
bool runsOnTensorCores(Dtype d);

// Collective and point-to-point primitives, named as in nccl-tests.
enum class Primitive { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, SendRecv };
std::string toString(Primitive p);
const std::vector<Primitive>& allPrimitives();

// One point of the GEMM efficiency table: achieved / peak flops for GEMMs whose smallest dimension
// (min of m, n, k) is `minDim`. Between points the efficiency is interpolated in log2(minDim).
struct GemmEfficiencyPoint {
    int64_t minDim = 0;
    double efficiency = 0.0;
};

// A kernel's time as fitted by `tessel calibrate`: overheadSeconds + quantity / rate, where the quantity is
// the bytes (memory kernels) or FLOPs (attention) the cost model counts for it (compute.hpp kernel_cost).
// For "gemm" only the overhead is used; the efficiency table carries the shape dependence.
// A calibrated kernel: t = overheadSeconds + bytes / bytesPerSecond + flops / flopsPerSecond (FORMULAS.md §7.2).
struct KernelFit {
    double overheadSeconds = 0.0;
    double bytesPerSecond = 0.0;  // 0 = bytes are not a term of the fit
    double flopsPerSecond = 0.0;  // 0 = FLOPs are not a term of the fit
    // Attention only: what the two rates are per. false ("fused", the default and every file written before
    // this key): the FlashAttention counts (causal half FLOPs, Q/K/V/O bytes once). true ("score_gemms"): the
    // CUDA executor's GEMM attention, full s_q x s_kv GEMM FLOPs and the bytes of its score workspace passes
    // (kernel_cost::scoreGemmFlops/scoreGemmBytes, FORMULAS.md §7.2).
    bool scoreGemms = false;
    // score_gemms only: seconds per launch step of the GEMM attention (kernel_cost::scoreGemmSteps), the host's
    // launches that bind it at short sequences; 0 = not a term of the fit (every file written before the key).
    double stepSeconds = 0.0;
};

// The work around a phase's kernels that no kernel names (dispatch, bias adds, copies, allocation, the
// optimizer's norm and shard copies), fitted from training runs (FORMULAS.md §7.5).
struct PhaseFit {
    double overheadSeconds = 0.0;
    double timeScale = 1.0;
    // Optimizer: host and launch time per parameter tensor of the stage (tessel's executor updates its tensors
    // one by one: a few kernels each), fitted by `tessel calibrate` from runs with different tensor counts.
    double perTensorSeconds = 0.0;
};

// GEMM efficiency from the GEMM's shape (FORMULAS.md §3.1): achieved / peak =
//   maxEfficiency(dtype) x k / (k + kOverhead(dtype)) x (batch m n) / (waves x smCount x tileM x tileN),
// tiles = batch ceil(m / tileM) ceil(n / tileN), waves = ceil(tiles / smCount), the better of the two tile
// orientations. maxEfficiency is the plateau of a GEMM with full waves and long k (derived from the measured
// maximum achievable matmul FLOPs), kOverhead the per-output-tile fixed cost (prologue, epilogue) in k
// elements; the last factor is tile and wave quantization (NVIDIA, Matrix Multiplication Background guide).
struct GemmShapeModel {
    std::map<Dtype, double> maxEfficiency;
    std::map<Dtype, double> kOverhead;
    // Efficiency of a GEMM whose n or k (leading dimensions) is not a multiple of 16 bytes of its element (8 bf16/fp16
    // elements, 16 fp8): cuBLAS cannot use the TMA/wgmma kernels (16-byte-aligned strides) and falls back to
    // align-1 tensor-core kernels (FORMULAS.md §3.1). A dtype absent here is not penalised (not measured).
    std::map<Dtype, double> unalignedEfficiency;
    // The same for a GEMM batched over attention heads (the unfused attention's scores and context), each head's
    // matrix at a head-dimension offset: a head dimension that is not a multiple of 16 bytes leaves every head's
    // operand misaligned. Measured apart where the two differ (FORMULAS.md §3.1); absent, unalignedEfficiency.
    std::map<Dtype, double> unalignedPerHeadEfficiency;
    int64_t tileM = 256;
    int64_t tileN = 128;
    int64_t smCount = 0;       // 0: no wave quantization (only the tiles' edges)
};

// One published benchmark curve of a fused attention kernel: achieved FLOP/s at each sequence length of its
// benchmark, for one head dimension, with or without the causal mask (FLOPs counted as the FlashAttention papers
// do: forward 4 s^2 d heads, halved when causal; backward 2.5 x forward). backward may be empty.
struct AttentionBenchmarkCurve {
    int64_t headDim = 0;
    bool causal = true;
    std::vector<double> forwardFlopsPerSecond;   // one per AttentionBenchmark::seq
    std::vector<double> backwardFlopsPerSecond;  // empty, or one per AttentionBenchmark::seq
};

// A kernel's benchmark: the sequence lengths it was timed at, the peak its fractions are of, and its curves.
struct AttentionBenchmark {
    double peakFlopsPerSecond = 0.0;
    std::vector<int64_t> seq;                    // increasing
    std::vector<AttentionBenchmarkCurve> curves;
};

// A fused attention kernel (FlashAttention and its kin): achieved / peak for the FLOPs it executes (causal:
// half the square). Without a benchmark: efficiency x s_kv / (s_kv + seqHalf); with one, the benchmark's causal
// curves interpolated in head dimension and log sequence length (FORMULAS.md §3.2). `headDims`: the head
// dimensions the kernel is built for (increasing; empty: any); a head dimension between them runs the next one up,
// zero-padded, so only d / padded of the work it does is useful.
struct AttentionKernelSpec {
    double forwardEfficiency = 0.0;
    double backwardEfficiency = 0.0;
    double seqHalf = 0.0;
    std::optional<AttentionBenchmark> benchmark;
    std::vector<int64_t> headDims;
    // The kernel's time with attention dropout on (Philox numbers drawn per score element in the forward and
    // again in the backward) over its time without, measured (FORMULAS.md §3.2); 0 = not measured, not costed.
    double dropoutForwardTimeFactor = 0.0;
    double dropoutBackwardTimeFactor = 0.0;
};

struct GpuSpec {
    std::string name;
    int64_t memoryBytes = 0;
    int64_t reservedBytes = 0;                 // CUDA context + allocator slack, never usable by tensors
    // The collective channels NCCL builds on this GPU's node (the "coll channels" of its INFO log): how many
    // buffer sets each communicator holds (collectiveLibraryBytes, FORMULAS.md §2). 0 = not counted.
    int ncclCollChannels = 0;
    double hbmBytesPerSecond = 0.0;
    double memoryEfficiency = 0.8;             // achieved / peak HBM bandwidth for elementwise kernels
    double kernelOverheadSeconds = 0.0;        // launch + tail per kernel
    std::map<Dtype, double> peakFlopsPerSecond; // dense, no sparsity
    std::vector<GemmEfficiencyPoint> gemmEfficiency; // sorted by minDim; used when gemmModel is absent
    std::optional<GemmShapeModel> gemmModel;          // the shape model; a calibrated table replaces it
    std::map<std::string, AttentionKernelSpec> attentionKernels; // "flash2", "flash3", ... by name
    std::string defaultAttentionKernel;               // what plans with attention_kernel "auto" use
    std::map<std::string, KernelFit> kernels;        // calibrated kernels by name ("norm_forward", ...)
    // Calibrated from training runs, per phase ("forward", "backward", "optimizer"): a compute action of that
    // phase takes overheadSeconds + timeScale x (the sum of its kernels' times). "communication": collectives
    // (DP actions and the TP/CP/EP ones inside compute) take timeScale x the benchmark-fitted time. Absent = 0, 1.
    std::map<std::string, PhaseFit> phaseFits;
    const PhaseFit& phaseFit(const std::string& phase) const;
    // Whether collectives and transfers run concurrently with compute (GPUs: NCCL on its own streams). False for
    // the CPU executor, whose one thread runs a rank's actions in order: the simulator then serialises them.
    bool overlapsCommunication = true;
    // Relative standard deviation of a rank's work between two synchronisations of its group (noise, clocks,
    // neighbours): a collective over n ranks waits for the slowest, E[max] - E[mean] = σ e(n) W for W seconds
    // of work since the last synchronisation (FORMULAS.md §6). 0 = ranks run like clockwork.
    double syncJitterFraction = 0.0;
    // Compute lost to a collective or transfer that runs concurrently with it, per second of the transfer's own
    // (isolated) time: NCCL kernels take SMs and HBM bandwidth from the overlapped kernels and are slowed by them
    // in turn (FORMULAS.md §6.2). 0 = overlap is free.
    double commContention = 0.0;
    // The most compute a collective can cost a kernel it runs beside for all of the kernel's time, per second of
    // that kernel's own time: the kernel then runs at 1 / (1 + this) of its speed, however long the collective
    // (FORMULAS.md §6.2). Caps commContention's charge on each compute action. 0 = no ceiling.
    double commContentionMax = 0.0;
    // Whether the GPU's FP8 tensor-core GEMMs take operands in any layout (Blackwell, sm 100-119 and 130 on), so that
    // Transformer Engine keeps no transpose beside a per-tensor-scaled FP8 tensor (its quantizers' create_transpose =
    // columnwise_usage && !nvte_is_non_tn_fp8_gemm_supported()); Hopper's take TN only (FORMULAS.md §3.6).
    bool fp8GemmAnyLayout = false;
    // Compute seconds lost by `computeSeconds` of kernels that `commSeconds` of communication (its isolated time) ran
    // beside (contentionSeconds below with this GPU's two terms).
    double contentionSeconds(double commSeconds, double computeSeconds) const;
    // Where measured (bench/gpu_kernels_probe.py --only contention): compute seconds lost per second of a kernel's
    // isolated time when that kernel holds `ctas` of the SMs and streams HBM beside the compute, as a collective's
    // channels do. Points by increasing CTA count, joined by straight lines, (0, 0) below the first. It sizes the
    // part of commContention a collective's own CTAs make, so that one running on fewer SMs than NCCL's channels
    // (NCCL user buffers, FORMULAS.md §6.2) is charged less: collectiveContention.
    struct CtaShare {
        double ctas = 0.0;
        double share = 0.0;
    };
    std::vector<CtaShare> contentionByCtas;
    // The measured curve at `ctas` (0 where the GPU has none).
    double contentionShareOfCtas(double ctas) const;
    // Compute seconds lost per second of a collective that holds `ctas` SMs: commContention less the part NCCL's
    // ncclCollChannels CTAs make, plus the part `ctas` make (both from contentionByCtas). commContention itself
    // where the GPU has no curve or no channel count.
    double collectiveContention(double ctas) const;
    // Share of the benchmarked tensor-core throughput (the GEMM plateau, the attention kernels) that a training
    // step sustains: the benchmarks behind them time one kernel for a fraction of a second, a training step runs
    // them for seconds at the power limit (FORMULAS.md §3.3). Fitted to published runs by `tessel validate --fit`,
    // one value for every GPU; 1 = the benchmark's throughput.
    double sustainedTensorFraction = 1.0;
    // Where measured at the power limit (bench/power_probe.py), the sustained share as a function of the duty: the
    // share of a block's kernel time (at benchmark rates) its tensor-core kernels take. Points by increasing duty,
    // joined by straight lines, (0, 1) below the first; it replaces sustainedTensorFraction (FORMULAS.md §3.3).
    struct DutyShare {
        double duty = 1.0;
        double share = 1.0;
    };
    std::vector<DutyShare> sustainedShareByDuty;
    // What the curve's tensor-core kernels draw against their SM clock where it was measured: the limit it was
    // measured at, the card's draw idle at its top clock, and the exponent of dynamic power in the clock
    // (bench/power_dvfs_fit.py). With powerLimitWatts, the limit this part runs at, a block the curve throttles
    // holds its clock where its power meets that limit instead (FORMULAS.md §3.3).
    struct SharePower {
        double measuredAtWatts = 0.0;
        double idleWatts = 0.0;
        double clockExponent = 0.0;
    };
    std::optional<SharePower> sustainedSharePower;
    double powerLimitWatts = 0.0; // 0: the limit the curve was measured at
    // The factor a power limit other than the curve's puts on its shares: ((limit - idle) / (measured - idle))^(1 /
    // exponent), 1 where the part runs at the curve's limit.
    double powerLimitShareScale() const;
    // Why `watts` cannot be the limit this GPU runs at, "" when it can: moving the curve needs its power law, and a
    // limit above the card's idle draw, at most 5000 W.
    std::string powerLimitProblem(double watts) const;
    // The share a block sustains whose tensor-core kernels take `duty` of its time: the measured curve (its shares
    // scaled to the part's power limit, at most 1), else the fitted constant.
    double sustainedTensorShare(double duty) const;
};

// Compute seconds lost by `computeSeconds` of kernels that `commSeconds` of communication (its isolated time) ran
// beside (FORMULAS.md §6.2): kappa x commSeconds, at most kappaMax x computeSeconds (kappaMax 0: no ceiling).
double contentionSeconds(double kappa, double kappaMax, double commSeconds, double computeSeconds);

// A network tier: NVLink inside a node, InfiniBand/RoCE across nodes. Bandwidth is per GPU, per direction.
struct LinkTier {
    std::string name;
    double bandwidthBytesPerSecond = 0.0;
    double latencySeconds = 0.0;
    double efficiency = 1.0;                                // achieved bus bandwidth / link bandwidth
    std::map<Primitive, double> primitiveEfficiency;        // overrides `efficiency` where measured
    std::map<Primitive, double> primitiveLatencySeconds;    // overrides `latencySeconds` where measured
    // A switchless full mesh (AMD's Infinity Fabric between MI300X GPUs): the bandwidth is the sum of a GPU's
    // mesh_links direct links, and a group of m of the node's GPUs reaches its members over m - 1 of them, a pair
    // over one (FORMULAS.md §5). 0: a switch (NVSwitch), every group at the whole bandwidth.
    int meshLinks = 0;
    double latencyFor(Primitive p) const;
    double efficiencyFor(Primitive p) const;
    // The share of the bandwidth a group with `ranksOnNode` of its ranks on one node uses on this tier: 1 behind a
    // switch; on a mesh (m - 1) / mesh_links, one link for a send/recv.
    double meshShare(Primitive p, int ranksOnNode) const;
};

// The host side of a node, for offload (ZeRO-Offload / ZeRO-Infinity, Megatron's optimizer CPU offload,
// activation swap): absent (all zero) on clusters whose file does not describe it, which then cannot offload.
struct HostSpec {
    double memoryBytes = 0.0;                  // host DRAM per node usable by training
    double pcieBytesPerSecond = 0.0;           // achievable host<->GPU copy rate per GPU, per direction
    double cpuAdamParametersPerSecond = 0.0;   // DeepSpeed CPUAdam throughput of one node's CPUs (all cores)
    bool present() const { return memoryBytes > 0.0 && pcieBytesPerSecond > 0.0 && cpuAdamParametersPerSecond > 0.0; }
};

struct ClusterConfig {
    std::string name;
    int gpusPerNode = 0;
    int nodes = 0;
    GpuSpec gpu;
    LinkTier intraNode;
    LinkTier interNode;
    double pricePerGpuHour = 0.0;                           // USD; 0 = unknown
    HostSpec host;                                          // "host" block; absent = no offload
    std::map<std::string, std::string> sources;             // JSON pointer -> citation
    std::optional<nlohmann::json> calibration;              // kept verbatim; written by `tessel calibrate`
    int totalGpus() const { return gpusPerNode * nodes; }
    double peakFlops(Dtype d) const;                        // throws InputError when the GPU has no figure
};

// The most GPUs a cluster (nodes x gpus_per_node) or a search may have: 2^20, a world whose rank arithmetic stays well
// inside an int and which a search covers in seconds (bench/search_bench.cpp, BM_PruningStageWorld: 3.1 s for GPT-3
// 175B's pruning stage on 2^20 GPUs, 2026-12-03).
constexpr int kMaxClusterGpus = 1 << 20;
// Adds a problem at `where` when nodes x gpusPerNode is above kMaxClusterGpus (computed without overflow).
void checkClusterGpus(int64_t nodes, int64_t gpusPerNode, const std::string& where, ProblemList& problems);

ClusterConfig parseCluster(const nlohmann::json& doc, const std::string& pointer = "");
ClusterConfig parseCluster(const nlohmann::json& doc, const std::string& pointer, ProblemList& problems);
nlohmann::json clusterToJson(const ClusterConfig& c);

// GEMM efficiency for a GEMM whose smallest dimension is `minDim`, from the table (clamped at the ends).
double gemmEfficiency(const GpuSpec& gpu, int64_t minDim);
// GEMM efficiency of `batch` (m x k) @ (k x n) GEMMs in `dtype` (one batched kernel): the shape model where the GPU
// has one, else the table. `perHead`: batched over attention heads (unalignedPerHeadEfficiency applies).
double gemmEfficiency(const GpuSpec& gpu, int64_t m, int64_t n, int64_t k, Dtype dtype, int64_t batch = 1,
                      bool perHead = false);
// The GEMM plateau: the efficiency of the largest aligned GEMMs in `dtype` (gemm_model/max_efficiency, else the
// table's last point, else 1), what a large GEMM benchmark times.
double gemmPlateauEfficiency(const GpuSpec& gpu, Dtype dtype);
// The attention kernel a plan's "auto" resolves to, or `requested` itself; "" when the GPU describes none.
std::string resolveAttentionKernel(const GpuSpec& gpu, const std::string& requested);

} // namespace tessel
