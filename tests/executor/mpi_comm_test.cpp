// Launches tessel_mpi_comm_check under mpirun: all checks pass on several world sizes, and with --hang the
// job fails within seconds with an error naming the rank that never joined.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#ifndef TESSEL_MPIEXEC
#define TESSEL_MPIEXEC "mpirun"
#endif
#ifndef TESSEL_MPIEXEC_NUMPROC_FLAG
#define TESSEL_MPIEXEC_NUMPROC_FLAG "-np"
#endif
#ifndef TESSEL_MPI_COMM_CHECK
#define TESSEL_MPI_COMM_CHECK "tessel_mpi_comm_check"
#endif

namespace {

struct RunResult {
    int exitCode = -1;
    std::string output;   // stdout and stderr together
    double seconds = 0;
};

// Runs the check program on `ranks` processes (bounded by coreutils timeout, in case the job itself hangs).
RunResult launch(int ranks, const std::string& args) {
    // Oversubscription: CI machines have fewer cores than ranks. Single-copy off: containers often forbid
    // the ptrace-based CMA that vader uses for large messages.
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
    const std::string command = std::string("timeout -k 5 120 ") + TESSEL_MPIEXEC + " " + TESSEL_MPIEXEC_NUMPROC_FLAG +
                                " " + std::to_string(ranks) + " --oversubscribe --allow-run-as-root " +
                                TESSEL_MPI_COMM_CHECK + " " + args + " 2>&1";
    RunResult result;
    const auto start = std::chrono::steady_clock::now();
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) return result;
    std::array<char, 4096> buffer{};
    while (fgets(buffer.data(), static_cast<int>(buffer.size()), pipe)) result.output += buffer.data();
    const int status = pclose(pipe);
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return result;
}

bool haveMpirun() {
    const std::string probe = std::string(TESSEL_MPIEXEC) + " --version > /dev/null 2>&1";
    return std::system(probe.c_str()) == 0;
}

TEST(MpiComm, AllChecksPassOnFourRanks) {
    if (!haveMpirun()) GTEST_SKIP() << "no " << TESSEL_MPIEXEC;
    const RunResult r = launch(4, "");
    EXPECT_EQ(r.exitCode, 0) << r.output;
    EXPECT_NE(r.output.find("all checks passed on 4 ranks"), std::string::npos) << r.output;
}

TEST(MpiComm, AllChecksPassOnOtherWorldSizes) {
    if (!haveMpirun()) GTEST_SKIP() << "no " << TESSEL_MPIEXEC;
    for (int ranks : {1, 2, 3}) {
        const RunResult r = launch(ranks, "");
        EXPECT_EQ(r.exitCode, 0) << ranks << " ranks:\n" << r.output;
        EXPECT_NE(r.output.find("all checks passed on " + std::to_string(ranks) + " ranks"), std::string::npos)
            << r.output;
    }
}

TEST(MpiComm, HangingRankIsNamedAndTheJobEnds) {
    if (!haveMpirun()) GTEST_SKIP() << "no " << TESSEL_MPIEXEC;
    // Collective timeout 2 s (set by --hang); the others must name rank 3 and MPI_Abort the job.
    const RunResult r = launch(4, "--hang");
    EXPECT_NE(r.exitCode, 0) << r.output;
    EXPECT_NE(r.exitCode, 124) << "the job had to be killed by timeout:\n" << r.output;
    EXPECT_NE(r.output.find("CommError"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("(group world of 4 ranks [0, 1, 2, 3], allReduce #1): timed out after 2 s waiting for "
                            "ranks [3]"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("still alive after 60 s"), std::string::npos) << r.output;
    // Liveness, not speed: 2 s timeout + 0.5 s grace + launch; a hang would take the 60 s of rank 3's sleep.
    EXPECT_LT(r.seconds, 10.0) << r.output;
    RecordProperty("hang_job_seconds", std::to_string(r.seconds));
}

} // namespace
