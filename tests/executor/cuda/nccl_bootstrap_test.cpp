// NCCL group construction and bootstrap: ncclCommSplit colours and keys against the groups ParallelContext
// builds for every rank of several plans, and the packing of the unique id for its trip over the host comm.
#include "nccl_bootstrap.hpp"

#include "tessel/exec/context.hpp"

#include <gtest/gtest.h>

#include <random>

namespace tessel::exec {
namespace {

// A Comm that only records the groups makeContext creates (the rest is never called here).
class RecordingComm final : public Comm {
public:
    explicit RecordingComm(int rank, int world) : rank_(rank), world_(world) {}
    int rank() const override { return rank_; }
    int worldSize() const override { return world_; }
    std::string name() const override { return "recording"; }
    void createGroup(const Group& g) override { groups.push_back(g); }
    void allReduce(Tensor&, const Group&) override { unused(); }
    void allGather(const Tensor&, Tensor&, const Group&) override { unused(); }
    void reduceScatter(const Tensor&, Tensor&, const Group&) override { unused(); }
    void broadcast(Tensor&, int, const Group&) override { unused(); }
    void allToAll(const Tensor&, Tensor&, const Group&) override { unused(); }
    void send(const Tensor&, int, int) override { unused(); }
    void recv(Tensor&, int, int) override { unused(); }
    std::vector<double> allReduceHost(const std::vector<double>&, const Group&) override { unused(); }
    void barrier(const Group&) override { unused(); }
    std::vector<Group> groups;

private:
    [[noreturn]] static void unused() { throw RuntimeError("not used by this test"); }
    int rank_, world_;
};

Plan plan(int tp, int pp, int dp, int cp) {
    Plan p;
    p.tp = tp;
    p.pp = pp;
    p.dp = dp;
    p.cp = cp;
    p.microBatch = 1;
    p.globalBatch = 8 * dp;
    return p;
}

class SplitAgainstContext : public ::testing::TestWithParam<Plan> {};

TEST_P(SplitAgainstContext, ColoursMatchGroupsAndKeysMatchIndices) {
    const Plan p = GetParam();
    const int world = p.worldSize();
    std::vector<std::vector<Group>> byRank(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) {
        RecordingComm comm(r, world);
        makeContext(p, r, comm, true);
        byRank[static_cast<size_t>(r)] = comm.groups;
        ASSERT_EQ(comm.groups.size(), byRank[0].size()) << "ranks create different numbers of groups";
    }
    for (size_t call = 0; call < byRank[0].size(); ++call) {
        for (int a = 0; a < world; ++a) {
            const Group& ga = byRank[static_cast<size_t>(a)][call];
            const nccl::SplitColorKey ka = nccl::splitColorKey(ga, a);
            EXPECT_EQ(ka.key, ga.myIndex);
            EXPECT_EQ(ga.ranks[static_cast<size_t>(ka.key)], a);
            EXPECT_GE(ka.color, 0);   // NCCL_SPLIT_NOCOLOR (-1) would drop the rank
            for (int b = 0; b < world; ++b) {
                const Group& gb = byRank[static_cast<size_t>(b)][call];
                const nccl::SplitColorKey kb = nccl::splitColorKey(gb, b);
                // Same colour exactly when the two ranks named the same group (same members, same order).
                EXPECT_EQ(ka.color == kb.color, ga.ranks == gb.ranks)
                    << ga.name << ": ranks " << a << " and " << b;
                if (a != b && ka.color == kb.color) EXPECT_NE(ka.key, kb.key);
            }
        }
    }
}

// ... and a2a+p2p's two context-parallel groups (all-to-all pairs, and the ranks of one index across them).
Plan hierarchicalCp() {
    Plan p = plan(1, 2, 1, 4);
    p.cpComm = CpComm::A2aP2p;
    p.cpA2a = 2;
    return p;
}

INSTANTIATE_TEST_SUITE_P(Plans, SplitAgainstContext,
                         ::testing::Values(plan(2, 2, 2, 1), plan(2, 1, 4, 1), plan(1, 4, 2, 1), plan(2, 2, 1, 2),
                                           plan(1, 1, 1, 1), hierarchicalCp()));

TEST(SplitColorKey, RefusesARankThatIsNotTheNamedMember) {
    Group g;
    g.name = "tp";
    g.ranks = {4, 5};
    g.myIndex = 1;
    EXPECT_EQ(nccl::splitColorKey(g, 5).color, 4);
    EXPECT_EQ(nccl::splitColorKey(g, 5).key, 1);
    EXPECT_THROW(nccl::splitColorKey(g, 4), CommError);
    g.ranks.clear();
    EXPECT_THROW(nccl::splitColorKey(g, 4), CommError);
}

TEST(Bootstrap, PackedIdSurvivesASumWithZeros) {
    std::mt19937 rng(3);
    std::vector<uint8_t> id(128);
    for (auto& b : id) b = static_cast<uint8_t>(rng());
    id[0] = 0xFF;
    id[127] = 0x00;
    const std::vector<double> mine = nccl::packBootstrapBytes(id);
    ASSERT_EQ(mine.size(), 32u);
    // What allReduceHost computes on 4 ranks when only rank 0 contributes.
    std::vector<double> summed(mine.size(), 0.0);
    for (int r = 0; r < 4; ++r)
        for (size_t i = 0; i < summed.size(); ++i) summed[i] += r == 0 ? mine[i] : 0.0;
    EXPECT_EQ(nccl::unpackBootstrapBytes(summed, 128), id);
}

TEST(Bootstrap, HandCheckedWordAndOddLength) {
    const std::vector<uint8_t> bytes{0x01, 0x02, 0x03, 0x04, 0xAB};
    const std::vector<double> packed = nccl::packBootstrapBytes(bytes);
    ASSERT_EQ(packed.size(), 2u);
    EXPECT_EQ(packed[0], 0x04030201);   // little-endian word
    EXPECT_EQ(packed[1], 0xAB);
    EXPECT_EQ(nccl::unpackBootstrapBytes(packed, 5), bytes);
}

TEST(Bootstrap, CorruptedValuesAreCommErrors) {
    EXPECT_THROW(nccl::unpackBootstrapBytes({1.5}, 4), CommError);
    EXPECT_THROW(nccl::unpackBootstrapBytes({-1.0}, 4), CommError);
    EXPECT_THROW(nccl::unpackBootstrapBytes({4294967296.0}, 4), CommError);
    EXPECT_THROW(nccl::unpackBootstrapBytes({1.0}, 8), CommError);   // too few values
}

TEST(Streams, DataParallelGroupsGetTheirOwnStream) {
    Group g;
    for (const char* n : {"dp", "dp_cp", "expert_dp"}) {
        g.name = n;
        EXPECT_TRUE(nccl::usesDataParallelStream(g)) << n;
    }
    for (const char* n : {"tp", "pp", "cp", "ep", "world", "embedding"}) {
        g.name = n;
        EXPECT_FALSE(nccl::usesDataParallelStream(g)) << n;
    }
}

} // namespace
} // namespace tessel::exec
