// Training on the GPU: the tiny model for a few steps against the CPU float64 run, measured peak memory
// against the cost model's "mixed" recipe, and multi-rank plans (tp, pp, dp with ZeRO-1/3) on one GPU through
// the staged in-process device communicator (NCCL refuses several ranks on one device) matching one rank.
// Skips where no GPU answers.
#include "gpu_test_support.hpp"

#include "executor_support.hpp"
#include "staged_comm.hpp"

#include "tessel/cost/memory.hpp"

#include <algorithm>
#include <filesystem>

#include <unistd.h>

namespace tessel::exec {
namespace {

// Checkpointing of a run: resume from the newest checkpoint under `dir` first, save after the steps in saveAt.
struct Checkpointing {
    std::string dir;
    bool resume = false;
    std::vector<int> saveAt;
};

// Runs `plan` on world-size threads, each with its own CUDA backend on device 0 and a staged comm, up to step
// `steps` (from 0, or from the checkpoint it resumed); `losses` holds the steps it ran.
test::RunResult runOnGpu(const ModelConfig& model, const Plan& plan, int steps, CudaPrecision precision,
                         const Checkpointing& ck = {}) {
    const int world = plan.worldSize();
    test::RunResult result;
    result.losses.assign(static_cast<size_t>(steps), 0.0);
    result.memory.resize(static_cast<size_t>(world));
    std::mutex mu;
    const std::string text = test::testText();
    test::onInProcessRanks(world, [&](int r, const std::shared_ptr<InProcessWorld>& w) {
        auto backend = makeCudaBackend(precision, 0);
        auto comm = makeStagedComm(makeInProcessComm(w, r), cudaStagingFor(*backend));
        comm->setTimeoutSeconds(120.0);
        ParallelContext ctx = makeContext(plan, r, *comm, model.tiedEmbeddings);
        TrainHyper hyper;
        Trainer trainer(model, ctx, *backend, hyper,
                        textDataSource(text, model.seqLen, plan.microBatch, plan.globalBatch, plan.dp, 7));
        std::vector<double> losses;
        for (int s = ck.resume ? trainer.loadCheckpoint(ck.dir) : 0; s < steps; ++s) {
            losses.push_back(trainer.step(s).loss);
            if (std::find(ck.saveAt.begin(), ck.saveAt.end(), s + 1) != ck.saveAt.end()) trainer.saveCheckpoint(ck.dir, s + 1);
        }
        backend->synchronize();
        std::lock_guard<std::mutex> lock(mu);
        if (r == 0) result.losses = losses;
        result.memory[static_cast<size_t>(r)] = backend->memory();
    });
    return result;
}

Plan withPrecision(Plan p, CudaPrecision precision) {
    p.precision = precision == CudaPrecision::Mixed ? "mixed" : "fp32";
    return p;
}

// Loss of every step against the reference, relative.
void expectLossesNear(const std::vector<double>& got, const std::vector<double>& want, double band, const char* what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        std::printf("%-30s step %zu loss %.6f reference %.6f\n", what, i, got[i], want[i]);
        EXPECT_NEAR(got[i], want[i], band * std::abs(want[i])) << what << " step " << i;
    }
}

TEST(GpuTraining, TinyModelMatchesTheCpuFloat64Run) {
    TESSEL_REQUIRE_GPU();
    for (bool swiglu : {false, true}) {
        const ModelConfig model = test::tinyModel(swiglu);
        const test::RunResult cpu = test::runPlan(model, test::basePlan(), 4);
        // fp32 differs from float64 by fp32 rounding only; bf16 by 8-bit mantissas in every stored tensor.
        const test::RunResult fp32 = runOnGpu(model, withPrecision(test::basePlan(), CudaPrecision::Fp32), 4,
                                              CudaPrecision::Fp32);
        expectLossesNear(fp32.losses, cpu.losses, 1e-4, swiglu ? "fp32 swiglu" : "fp32 gelu");
        const test::RunResult mixed = runOnGpu(model, withPrecision(test::basePlan(), CudaPrecision::Mixed), 4,
                                               CudaPrecision::Mixed);
        expectLossesNear(mixed.losses, cpu.losses, 2e-2, swiglu ? "bf16 swiglu" : "bf16 gelu");
    }
}

TEST(GpuTraining, PeakMemoryWithinFivePercentOfTheMixedRecipe) {
    TESSEL_REQUIRE_GPU();
    const ModelConfig model = test::tinyModel();
    for (int pp : {1, 2}) {
        Plan plan = withPrecision(test::basePlan(), CudaPrecision::Mixed);
        plan.pp = pp;
        // The executor's loss keeps the bf16 logits (overwritten by their gradient) and fp32 row statistics,
        // not the fp32 softmax of a fused cross-entropy: the model is told so, as `tessel run` tells it.
        plan.framework.lossInPlace = true;
        const test::RunResult run = runOnGpu(model, plan, 2, CudaPrecision::Mixed);   // masters exist after step 1
        ClusterConfig cluster = loadClusterRef("h200-single", "test");
        cluster.gpusPerNode = plan.worldSize();
        cluster.nodes = 1;
        const MemoryReport predicted = predictMemory(model, cluster, plan);
        for (int r = 0; r < plan.worldSize(); ++r) {
            const StageMemory& st = predicted.stages[static_cast<size_t>(rankCoords(plan, r).pp)];
            test::expectCategoryPeaksNear(st, run.memory[static_cast<size_t>(r)], 0.05,
                                          "mixed pp" + std::to_string(pp) + " rank " + std::to_string(r));
        }
    }
}

// Mixed precision keeps fp32 masters (ZeRO-0: per parameter, ZeRO >= 1: per shard) and checkpoints hold them:
// a run stopped after step 2 and resumed gives bitwise the losses of an uninterrupted run. Without the masters
// in the checkpoint the resumed run would restart them from the bf16 values and drift by sub-ulp updates.
TEST(GpuTraining, MixedPrecisionResumeIsBitwiseEqual) {
    TESSEL_REQUIRE_GPU();
    const ModelConfig model = test::tinyModel();
    for (int zero : {0, 1}) {
        Plan plan = withPrecision(test::basePlan(), CudaPrecision::Mixed);
        if (zero > 0) {
            plan.dp = 2;
            plan.zeroStage = zero;
        }
        const std::string dir = (std::filesystem::temp_directory_path() /
                                 ("tessel-gpu-resume-" + std::to_string(::getpid()) + "-zero" + std::to_string(zero)))
                                    .string();
        std::filesystem::remove_all(dir);
        const test::RunResult whole = runOnGpu(model, plan, 4, CudaPrecision::Mixed);
        const test::RunResult before = runOnGpu(model, plan, 2, CudaPrecision::Mixed, {dir, false, {2}});
        const test::RunResult after = runOnGpu(model, plan, 4, CudaPrecision::Mixed, {dir, true, {}});
        std::filesystem::remove_all(dir);
        ASSERT_EQ(whole.losses.size(), 4u);
        ASSERT_EQ(after.losses.size(), 2u) << "ZeRO-" << zero;
        EXPECT_EQ(before.losses, std::vector<double>(whole.losses.begin(), whole.losses.begin() + 2)) << "ZeRO-" << zero;
        EXPECT_EQ(after.losses, std::vector<double>(whole.losses.begin() + 2, whole.losses.end())) << "ZeRO-" << zero;
    }
}

struct MultiRankCase {
    std::string name;
    Plan plan;
};

class GpuMultiRank : public ::testing::TestWithParam<MultiRankCase> {};

TEST_P(GpuMultiRank, MatchesOneRank) {
    TESSEL_REQUIRE_GPU();
    ModelConfig model = test::tinyModel();
    if (GetParam().name.find("mla") != std::string::npos) {
        // Latent attention: q/k heads of 16 (12 + 4 rotary), value heads of 8 padded to 16, on the RoPE model.
        model = test::tinyModel(true);
        model.kvHeads = model.heads;
        model.mla = MlaConfig{24, 16, 12, 4, 8};
    }
    if (GetParam().name.find("dropout") != std::string::npos) model.dropout = 0.1; // the masks read at coordinates
    for (CudaPrecision precision : {CudaPrecision::Fp32, CudaPrecision::Mixed}) {
        const test::RunResult one = runOnGpu(model, withPrecision(test::basePlan(), precision), 3, precision);
        const test::RunResult many = runOnGpu(model, withPrecision(GetParam().plan, precision), 3, precision);
        // fp32: sums in another order only; bf16: also roundings at different points (partial sums over TP,
        // gradient shards under ZeRO) at 2^-9 each.
        expectLossesNear(many.losses, one.losses, precision == CudaPrecision::Fp32 ? 1e-4 : 2e-2,
                         (GetParam().name + (precision == CudaPrecision::Fp32 ? " fp32" : " bf16")).c_str());
    }
}

std::vector<MultiRankCase> multiRankCases() {
    std::vector<MultiRankCase> cases;
    auto add = [&](std::string name, auto edit) {
        Plan p = test::basePlan();
        edit(p);
        cases.push_back({std::move(name), p});
    };
    add("tp2", [](Plan& p) { p.tp = 2; });
    add("pp2_1f1b", [](Plan& p) { p.pp = 2; p.schedule = Schedule::OneFOneB; });
    add("dp2_zero1", [](Plan& p) { p.dp = 2; p.zeroStage = 1; });
    add("dp2_zero3", [](Plan& p) { p.dp = 2; p.zeroStage = 3; });
    add("tp2_pp2_dp2_zero1", [](Plan& p) { p.tp = 2; p.pp = 2; p.dp = 2; p.zeroStage = 1; });
    // Context parallelism both ways: K and V gathered, and the heads exchanged by all-to-all (its log-sum-exp kept in
    // the heads' layout, where the backend's fp32 values for it live).
    add("cp2_allgather", [](Plan& p) { p.cp = 2; p.cpComm = CpComm::AllGather; });
    add("cp2_a2a", [](Plan& p) { p.cp = 2; p.cpComm = CpComm::A2a; });
    // Dropout on the embedding, the probabilities and both blocks' outputs: each rank drops what one rank drops.
    add("tp2_sp_dropout", [](Plan& p) { p.tp = 2; p.sequenceParallel = true; });
    add("cp2_a2a_dropout", [](Plan& p) { p.cp = 2; p.cpComm = CpComm::A2a; });
    // Megatron-core's hierarchical exchange: all-to-all in pairs, K and V gathered across them.
    add("cp4_a2a2_p2p", [](Plan& p) { p.cp = 4; p.cpComm = CpComm::A2aP2p; p.cpA2a = 2; });
    // Latent attention (MLA): heads split, latents gathered; with dropout, the tiled kernels.
    add("mla_tp2_sp", [](Plan& p) { p.tp = 2; p.sequenceParallel = true; });
    add("mla_tp2_sp_dropout", [](Plan& p) { p.tp = 2; p.sequenceParallel = true; });
    add("mla_cp2", [](Plan& p) { p.cp = 2; });
    add("mla_cp2_a2a", [](Plan& p) { p.cp = 2; p.cpComm = CpComm::A2a; });
    return cases;
}

INSTANTIATE_TEST_SUITE_P(Plans, GpuMultiRank, ::testing::ValuesIn(multiRankCases()),
                         [](const ::testing::TestParamInfo<MultiRankCase>& i) { return i.param.name; });

} // namespace
} // namespace tessel::exec
