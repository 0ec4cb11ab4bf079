// Tests of the in-process Comm: every collective on 1 to 8 thread ranks, concurrent strided groups,
// tagged send/recv, identical bits on every member, and the error paths (timeout, failed rank, mismatch).
#include "tessel/exec/inproc_comm.hpp"

#include "host_backend.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>

namespace tessel::exec {
namespace {

using test::HostBackend;
using Clock = std::chrono::steady_clock;

Group makeGroup(const std::string& name, std::vector<int> ranks, int me) {
    Group g;
    g.name = name;
    g.ranks = std::move(ranks);
    g.myIndex = -1;
    for (int i = 0; i < g.size(); ++i)
        if (g.ranks[static_cast<size_t>(i)] == me) g.myIndex = i;
    return g;
}

Group worldGroup(int n, int me) {
    std::vector<int> all(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    return makeGroup("world", all, me);
}

double seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// Runs body(rank, comm) on one thread per rank. A rank whose body throws is marked failed (so its peers stop
// waiting) and its message is returned; an empty string means the rank finished cleanly.
std::vector<std::string> runRanks(int n, const std::function<void(int, Comm&)>& body, double timeoutSeconds = 20.0,
                                  std::shared_ptr<InProcessWorld> world = nullptr) {
    if (!world) world = makeInProcessWorld(n);
    std::vector<std::string> errors(static_cast<size_t>(n));
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
        threads.emplace_back([&, r] {
            auto comm = makeInProcessComm(world, r);
            comm->setTimeoutSeconds(timeoutSeconds);
            try {
                body(r, *comm);
            } catch (const std::exception& e) {
                errors[static_cast<size_t>(r)] = std::string("error: ") + e.what();
                failRank(*world, r, e.what());
            }
        });
    }
    for (auto& t : threads) t.join();
    return errors;
}

void expectNoErrors(const std::vector<std::string>& errors) {
    for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// ---- every collective against hand-computed results, on 1, 2, 3, 4 and 8 ranks, float64 and float32 ----

struct CollectiveCase {
    int ranks;
    ElementType type;
};

void PrintTo(const CollectiveCase& c, std::ostream* out) {
    *out << c.ranks << " ranks, " << (c.type == ElementType::F64 ? "f64" : "f32");
}

class EveryCollective : public ::testing::TestWithParam<CollectiveCase> {};

TEST_P(EveryCollective, MatchesHandComputedResults) {
    const int n = GetParam().ranks;
    const ElementType type = GetParam().type;
    expectNoErrors(runRanks(n, [&](int r, Comm& comm) {
        HostBackend backend(type);
        const Group world = worldGroup(n, r);
        comm.createGroup(world);
        const double rd = r;
        const double nd = n;

        // allReduce: member r holds 10 (r + 1) + i; the sum is 10 n (n + 1) / 2 + n i.
        Tensor x = backend.make({10 * (rd + 1), 10 * (rd + 1) + 1, 10 * (rd + 1) + 2, 10 * (rd + 1) + 3, 10 * (rd + 1) + 4,
                                 10 * (rd + 1) + 5},
                                {2, 3});
        comm.allReduce(x, world);
        const auto reduced = backend.download(x);
        for (int i = 0; i < 6; ++i) EXPECT_EQ(reduced[static_cast<size_t>(i)], 10 * nd * (nd + 1) / 2 + nd * i);

        // allGather: member r contributes rows {100 r + i}; block j of the result came from member j.
        Tensor part = backend.make({100 * rd, 100 * rd + 1, 100 * rd + 2, 100 * rd + 3}, {2, 2});
        Tensor gathered = backend.empty({2 * static_cast<int64_t>(n), 2}, MemoryCategory::Buffers);
        comm.allGather(part, gathered, world);
        const auto all = backend.download(gathered);
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < 4; ++i) EXPECT_EQ(all[static_cast<size_t>(4 * j + i)], 100.0 * j + i);

        // reduceScatter: member r holds r + 10 k at k in [0, 2n); member i gets k in [2i, 2i + 2) summed:
        // n (n - 1) / 2 + 10 k n.
        std::vector<double> scatterIn(static_cast<size_t>(2 * n));
        for (int k = 0; k < 2 * n; ++k) scatterIn[static_cast<size_t>(k)] = rd + 10 * k;
        Tensor big = backend.make(scatterIn, {2 * static_cast<int64_t>(n), 1});
        Tensor mine = backend.empty({2, 1}, MemoryCategory::Buffers);
        comm.reduceScatter(big, mine, world);
        const auto scattered = backend.download(mine);
        for (int k = 0; k < 2; ++k) {
            const double globalK = 2 * r + k;
            EXPECT_EQ(scattered[static_cast<size_t>(k)], nd * (nd - 1) / 2 + 10 * globalK * nd);
        }

        // broadcast from every root in turn: the root holds 1000 root + i, the others -1.
        for (int root = 0; root < n; ++root) {
            Tensor b = r == root ? backend.make({1000.0 * root, 1000.0 * root + 1, 1000.0 * root + 2})
                                 : backend.make({-1, -1, -1});
            comm.broadcast(b, root, world);
            EXPECT_EQ(backend.download(b), (std::vector<double>{1000.0 * root, 1000.0 * root + 1, 1000.0 * root + 2}));
        }

        // allToAll: block j of member r's input is {100 r + 10 j + e}; block i of its output came from member i's
        // block r: {100 i + 10 r + e}.
        std::vector<double> a2aIn;
        for (int j = 0; j < n; ++j)
            for (int e = 0; e < 2; ++e) a2aIn.push_back(100 * rd + 10 * j + e);
        Tensor a2a = backend.make(a2aIn, {2 * static_cast<int64_t>(n), 1});
        Tensor a2aOut = backend.empty({2 * static_cast<int64_t>(n), 1}, MemoryCategory::Buffers);
        comm.allToAll(a2a, a2aOut, world);
        const auto exchanged = backend.download(a2aOut);
        for (int i = 0; i < n; ++i)
            for (int e = 0; e < 2; ++e)
                EXPECT_EQ(exchanged[static_cast<size_t>(2 * i + e)], 100.0 * i + 10 * rd + e);

        // allReduceHost: {1, r} sums to {n, n (n - 1) / 2}.
        EXPECT_EQ(comm.allReduceHost({1.0, rd}, world), (std::vector<double>{nd, nd * (nd - 1) / 2}));
        comm.barrier(world);
    }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, EveryCollective,
                         ::testing::Values(CollectiveCase{1, ElementType::F64}, CollectiveCase{2, ElementType::F64},
                                           CollectiveCase{3, ElementType::F64}, CollectiveCase{4, ElementType::F64},
                                           CollectiveCase{8, ElementType::F64}, CollectiveCase{1, ElementType::F32},
                                           CollectiveCase{2, ElementType::F32}, CollectiveCase{3, ElementType::F32},
                                           CollectiveCase{4, ElementType::F32}, CollectiveCase{8, ElementType::F32}),
                         [](const ::testing::TestParamInfo<CollectiveCase>& param) {
                             return std::to_string(param.param.ranks) + "ranks_" +
                                    (param.param.type == ElementType::F64 ? "f64" : "f32");
                         });

// ---- identical bits on every member, equal to a sum in group order ----

template <typename T>
void expectIdenticalBits(ElementType type) {
    const int n = 8;
    const int count = 257;
    // Values whose sum depends on the order of addition, so any member summing in another order would differ.
    auto value = [](int r, int i) { return (r % 2 ? -1.0 : 1.0) * (0.1 * (r + 1) + 1e-3 * i + 1.0 / (3.0 + i + r)) * (r == 3 ? 1e8 : 1.0); };
    std::vector<std::vector<T>> results(static_cast<size_t>(n));
    expectNoErrors(runRanks(n, [&](int r, Comm& comm) {
        HostBackend backend(type);
        const Group world = worldGroup(n, r);
        std::vector<double> mine(count);
        for (int i = 0; i < count; ++i) mine[static_cast<size_t>(i)] = value(r, i);
        Tensor x = backend.make(mine);
        comm.allReduce(x, world);
        results[static_cast<size_t>(r)].assign(x.data<T>(), x.data<T>() + count);
    }));
    std::vector<T> expected(count);
    for (int i = 0; i < count; ++i) {
        T sum = static_cast<T>(value(0, i));
        for (int r = 1; r < n; ++r) sum += static_cast<T>(value(r, i));
        expected[static_cast<size_t>(i)] = sum;
    }
    for (int r = 0; r < n; ++r) {
        ASSERT_EQ(results[static_cast<size_t>(r)].size(), expected.size());
        EXPECT_EQ(std::memcmp(results[static_cast<size_t>(r)].data(), expected.data(), count * sizeof(T)), 0)
            << "rank " << r << " differs from the sum in group order";
    }
}

TEST(InProcessComm, AllReduceGivesIdenticalBitsInGroupOrderF64) { expectIdenticalBits<double>(ElementType::F64); }
TEST(InProcessComm, AllReduceGivesIdenticalBitsInGroupOrderF32) { expectIdenticalBits<float>(ElementType::F32); }

// ---- bf16 (the cuda backend's element type): moved bit for bit, summed in fp32 and rounded once ----

std::vector<uint16_t> bitsOf(const Tensor& t) {
    return std::vector<uint16_t>(t.data<uint16_t>(), t.data<uint16_t>() + t.numel());
}

TEST(InProcessComm, Bf16SumsAccumulateInFp32InGroupOrderAndRoundOnce) {
    const int n = 3;
    const double q = 1.0 / 256, e = 1.0 / 512;   // 2^-8 and 2^-9: half and a quarter of bf16's ulp at 1
    // Per element, what ranks 0, 1, 2 hold, and the sum rounded once to bf16 (to nearest, ties to even):
    // 1 + 2^-8 + 2^-8 is 1 + 2^-7 exactly (rounding after each addition would give 1, two ties to even);
    // 1 + 3 * 2^-9 rounds up to 1 + 2^-7; 256 + 1 is a tie between 256 and 258 and goes to even 256.
    const std::vector<std::vector<double>> held{{1.0, 1.0, -3.0, 256.0}, {q, q, 0.5, 1.0}, {q, e, 0.25, 0.0}};
    const std::vector<double> expected{1.0078125, 1.0078125, -2.25, 256.0};
    std::vector<std::vector<uint16_t>> reducedBits(n), scatteredBits(n);
    std::vector<std::vector<double>> scattered(n);
    expectNoErrors(runRanks(n, [&](int r, Comm& comm) {
        HostBackend backend(ElementType::Bf16);
        const Group world = worldGroup(n, r);
        Tensor x = backend.make(held[static_cast<size_t>(r)]);
        ASSERT_EQ(x.type(), ElementType::Bf16);
        comm.allReduce(x, world);
        EXPECT_EQ(backend.download(x), expected) << "rank " << r;
        reducedBits[static_cast<size_t>(r)] = bitsOf(x);

        // reduceScatter of 6 = 3 x 2 values: member r's input is held[r] followed by {1, -1} (rank 0) or
        // {2^-8, -2^-8}; member i keeps the sums of elements 2i and 2i + 1.
        std::vector<double> in = held[static_cast<size_t>(r)];
        in.push_back(r == 0 ? 1.0 : q);
        in.push_back(r == 0 ? -1.0 : -q);
        Tensor big = backend.make(in, {6, 1});
        Tensor mine = backend.empty({2, 1}, MemoryCategory::Buffers);
        comm.reduceScatter(big, mine, world);
        scattered[static_cast<size_t>(r)] = backend.download(mine);
        scatteredBits[static_cast<size_t>(r)] = bitsOf(mine);
    }));
    for (int r = 1; r < n; ++r) EXPECT_EQ(reducedBits[static_cast<size_t>(r)], reducedBits[0]) << "rank " << r;
    EXPECT_EQ(scattered[0], (std::vector<double>{1.0078125, 1.0078125}));
    EXPECT_EQ(scattered[1], (std::vector<double>{-2.25, 256.0}));
    EXPECT_EQ(scattered[2], (std::vector<double>{1.0078125, -1.0078125}));
}

TEST(InProcessComm, Bf16CopiesMoveEveryBit) {
    const int n = 3;
    // Raw bf16 patterns, NaN and infinity included: copies must not go through arithmetic.
    auto pattern = [](int r, int i) { return static_cast<uint16_t>(r == 1 && i == 0 ? 0x7fc1 : 0x3f80 + 37 * r + i); };
    expectNoErrors(runRanks(n, [&](int r, Comm& comm) {
        HostBackend backend(ElementType::Bf16);
        const Group world = worldGroup(n, r);
        Tensor part = backend.empty({2, 1}, MemoryCategory::Buffers);
        for (int i = 0; i < 2; ++i) part.data<uint16_t>()[i] = pattern(r, i);
        Tensor all = backend.empty({2 * n, 1}, MemoryCategory::Buffers);
        comm.allGather(part, all, world);
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < 2; ++i) EXPECT_EQ(all.data<uint16_t>()[2 * j + i], pattern(j, i)) << "rank " << r;

        Tensor b = backend.empty({2}, MemoryCategory::Buffers);
        for (int i = 0; i < 2; ++i) b.data<uint16_t>()[i] = r == 2 ? static_cast<uint16_t>(0x7f80 + i) : 0;
        comm.broadcast(b, 2, world);
        EXPECT_EQ(bitsOf(b), (std::vector<uint16_t>{0x7f80, 0x7f81})) << "rank " << r;

        // allToAll: block i of the output is member i's block r.
        Tensor a2a = backend.empty({n, 1}, MemoryCategory::Buffers);
        for (int j = 0; j < n; ++j) a2a.data<uint16_t>()[j] = static_cast<uint16_t>(0x4000 + 16 * r + j);
        Tensor a2aOut = backend.empty({n, 1}, MemoryCategory::Buffers);
        comm.allToAll(a2a, a2aOut, world);
        for (int i = 0; i < n; ++i) EXPECT_EQ(a2aOut.data<uint16_t>()[i], 0x4000 + 16 * i + r) << "rank " << r;

        // send/recv around the ring.
        comm.send(all, (r + 1) % n, 7);
        Tensor got = backend.empty({2 * n, 1}, MemoryCategory::Buffers);
        comm.recv(got, (r + n - 1) % n, 7);
        EXPECT_EQ(bitsOf(got), bitsOf(all)) << "rank " << r;
    }));
}

TEST(InProcessComm, Bf16AgainstF32IsATypeMismatchNamingBoth) {
    // Two bf16 values and one f32 are both 4 bytes: only the type tells them apart.
    auto errors = runRanks(2, [&](int r, Comm& comm) {
        HostBackend backend(r == 0 ? ElementType::Bf16 : ElementType::F32);
        Tensor x = backend.make(std::vector<double>(r == 0 ? 2 : 1, 1.0));
        comm.allReduce(x, worldGroup(2, r));
    });
    for (const auto& e : errors) {
        EXPECT_NE(e.find("allReduce of 4 bytes (bf16)"), std::string::npos) << e;
        EXPECT_NE(e.find("allReduce of 4 bytes (f32)"), std::string::npos) << e;
    }
    errors = runRanks(2, [&](int r, Comm& comm) {
        if (r == 0) {
            HostBackend backend(ElementType::Bf16);
            comm.send(backend.make({1.0, 2.0}), 1, 0);
        } else {
            HostBackend backend(ElementType::F32);
            Tensor t = backend.empty({1}, MemoryCategory::Buffers);
            comm.recv(t, 0, 0);
        }
    });
    EXPECT_EQ(errors[0], "");
    EXPECT_NE(errors[1].find("rank 0 sent 4 bytes (bf16)"), std::string::npos) << errors[1];
    EXPECT_NE(errors[1].find("holds 4 bytes (f32)"), std::string::npos) << errors[1];
}

// ---- strided groups used concurrently ----

TEST(InProcessComm, StridedGroupsRunConcurrently) {
    // 8 ranks as tp = 2 (consecutive pairs) x dp = 4 (stride 2). Half the ranks call tp before dp and half
    // the other way round, so the groups progress independently and interleave between threads.
    const int n = 8;
    const int rounds = 50;
    expectNoErrors(runRanks(n, [&](int r, Comm& comm) {
        HostBackend backend(ElementType::F64);
        const int tpBase = r - r % 2;
        const Group tp = makeGroup("tp", {tpBase, tpBase + 1}, r);
        const Group dp = r % 2 == 0 ? makeGroup("dp", {0, 2, 4, 6}, r) : makeGroup("dp", {1, 3, 5, 7}, r);
        const Group world = worldGroup(n, r);
        comm.createGroup(tp);
        comm.createGroup(dp);
        comm.createGroup(world);
        const bool tpFirst = (r / 2) % 2 == 0;
        for (int round = 0; round < rounds; ++round) {
            auto doTp = [&] {
                Tensor x = backend.make({double(r), double(round)});
                comm.allReduce(x, tp);
                EXPECT_EQ(backend.download(x), (std::vector<double>{double(2 * tpBase + 1), double(2 * round)}));
            };
            auto doDp = [&] {
                Tensor part = backend.make({double(r * 1000 + round)});
                Tensor all = backend.empty({4}, MemoryCategory::Buffers);
                comm.allGather(part, all, dp);
                std::vector<double> expected;
                for (int q : dp.ranks) expected.push_back(double(q * 1000 + round));
                EXPECT_EQ(backend.download(all), expected);
            };
            if (tpFirst) {
                doTp();
                doDp();
            } else {
                doDp();
                doTp();
            }
            if (round % 10 == 9) {
                EXPECT_EQ(comm.allReduceHost({1.0}, world), std::vector<double>{8.0});
            }
        }
    }));
}

// ---- point to point ----

TEST(InProcessComm, SendRecvKeepsOrderPerTag) {
    expectNoErrors(runRanks(2, [&](int r, Comm& comm) {
        HostBackend backend(ElementType::F64);
        if (r == 0) {
            for (double v : {1.0, 2.0, 3.0}) comm.send(backend.make({v, -v}), 1, 1);
            for (double v : {10.0, 20.0}) comm.send(backend.make({v, -v}), 1, 2);
        } else {
            // Tag 2 first although it was sent last: tags are separate streams, each in order.
            Tensor t = backend.empty({2}, MemoryCategory::Buffers);
            for (double v : {10.0, 20.0}) {
                comm.recv(t, 0, 2);
                EXPECT_EQ(backend.download(t), (std::vector<double>{v, -v}));
            }
            for (double v : {1.0, 2.0, 3.0}) {
                comm.recv(t, 0, 1);
                EXPECT_EQ(backend.download(t), (std::vector<double>{v, -v}));
            }
        }
    }));
}

TEST(InProcessComm, SendRecvRingAndSelf) {
    const int n = 4;
    expectNoErrors(runRanks(n, [&](int r, Comm& comm) {
        HostBackend backend(ElementType::F32);
        comm.send(backend.make({double(r), 0.5}), (r + 1) % n, 7);
        comm.send(backend.make({double(r) + 100}), r, 8);
        Tensor fromLeft = backend.empty({2}, MemoryCategory::Buffers);
        comm.recv(fromLeft, (r + n - 1) % n, 7);
        EXPECT_EQ(backend.download(fromLeft), (std::vector<double>{double((r + n - 1) % n), 0.5}));
        Tensor fromSelf = backend.empty({1}, MemoryCategory::Buffers);
        comm.recv(fromSelf, r, 8);
        EXPECT_EQ(backend.download(fromSelf), std::vector<double>{double(r) + 100});
    }));
}

TEST(InProcessComm, RecvOfTheWrongSizeIsAnError) {
    const auto errors = runRanks(2, [&](int r, Comm& comm) {
        HostBackend backend(ElementType::F64);
        if (r == 0) {
            comm.send(backend.make({1, 2, 3}), 1, 0);
        } else {
            Tensor t = backend.empty({2}, MemoryCategory::Buffers);
            comm.recv(t, 0, 0);
        }
    });
    EXPECT_EQ(errors[0], "");
    EXPECT_NE(errors[1].find("rank 0 sent 24 bytes"), std::string::npos) << errors[1];
    EXPECT_NE(errors[1].find("holds 16 bytes"), std::string::npos) << errors[1];
}

// ---- error paths ----

TEST(InProcessComm, TimeoutNamesTheMissingRankTheGroupAndTheCall) {
    const int n = 3;
    std::vector<double> elapsed(n, 0.0);
    const auto errors = runRanks(
        n,
        [&](int r, Comm& comm) {
            HostBackend backend(ElementType::F64);
            const Group world = worldGroup(n, r);
            Tensor x = backend.make({1.0});
            comm.allReduce(x, world);   // #0 completes
            if (r == 2) return;         // rank 2 never calls #1
            const auto start = Clock::now();
            try {
                comm.allReduce(x, world);
            } catch (const CommError&) {
                elapsed[static_cast<size_t>(r)] = seconds(start);
                throw;
            }
        },
        0.3);
    for (int r = 0; r < 2; ++r) {
        const std::string& e = errors[static_cast<size_t>(r)];
        EXPECT_NE(e.find("group world"), std::string::npos) << e;
        EXPECT_NE(e.find("allReduce #1"), std::string::npos) << e;
        EXPECT_NE(e.find("waiting for ranks [2]"), std::string::npos) << e;
        EXPECT_GT(elapsed[static_cast<size_t>(r)], 0.0);
        EXPECT_LT(elapsed[static_cast<size_t>(r)], 3.0);
    }
    EXPECT_EQ(errors[2], "");
    // At least one waiter reports its own timeout (the other may learn of it from the first one).
    EXPECT_TRUE(errors[0].find("timed out after 0.3 s") != std::string::npos ||
                errors[1].find("timed out after 0.3 s") != std::string::npos)
        << errors[0] << "\n" << errors[1];
    RecordProperty("timeout_to_error_seconds_rank0", std::to_string(elapsed[0]));
}

TEST(InProcessComm, RecvTimeoutNamesThePeer) {
    const auto start = Clock::now();
    const auto errors = runRanks(
        2,
        [&](int r, Comm& comm) {
            HostBackend backend(ElementType::F64);
            if (r == 1) {
                Tensor t = backend.empty({1}, MemoryCategory::Buffers);
                comm.recv(t, 0, 5);
            }
        },
        0.3);
    EXPECT_LT(seconds(start), 3.0);
    EXPECT_EQ(errors[0], "");
    EXPECT_NE(errors[1].find("rank 1 (recv #0 from rank 0, tag 5): timed out after 0.3 s"), std::string::npos)
        << errors[1];
}

TEST(InProcessComm, FailRankWakesWaitersWithAnErrorNamingIt) {
    const int n = 4;
    auto world = makeInProcessWorld(n);
    std::atomic<int> waiting{0};
    std::thread killer([&] {
        while (waiting.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));   // let them block
        failRank(*world, 3, "out of memory");
    });
    const auto start = Clock::now();
    const auto errors = runRanks(
        n,
        [&](int r, Comm& comm) {
            HostBackend backend(ElementType::F64);
            if (r == 3) return;   // never arrives; failed by the killer thread
            if (r == 2) {
                // A receive waiting on the failed rank wakes as well.
                Tensor t = backend.empty({1}, MemoryCategory::Buffers);
                ++waiting;
                comm.recv(t, 3, 0);
                return;
            }
            Tensor x = backend.make({1.0});
            ++waiting;
            comm.allReduce(x, worldGroup(n, r));
        },
        60.0, world);
    killer.join();
    EXPECT_LT(seconds(start), 3.0);   // woken by the failure, not by the 60 s timeout
    EXPECT_NE(errors[0].find("rank 0 (group world of 4 ranks [0, 1, 2, 3], allReduce #0): peer rank 3 failed: out of memory"),
              std::string::npos)
        << errors[0];
    EXPECT_NE(errors[1].find("peer rank 3 failed: out of memory"), std::string::npos) << errors[1];
    EXPECT_NE(errors[2].find("rank 2 (recv #0 from rank 3, tag 0): peer rank 3 failed"), std::string::npos) << errors[2];

    // Later calls that need the failed rank fail at once; calls among the living still work.
    auto c0 = makeInProcessComm(world, 0);
    HostBackend backend(ElementType::F64);
    Tensor x = backend.make({1.0});
    try {
        c0->allReduce(x, makeGroup("pair", {0, 3}, 0));
        ADD_FAILURE() << "no error";
    } catch (const CommError& e) {
        EXPECT_NE(std::string(e.what()).find("peer rank 3 failed"), std::string::npos) << e.what();
    }
    EXPECT_THROW(c0->send(x, 3, 0), CommError);
}

TEST(InProcessComm, SizeMismatchIsAnError) {
    const auto errors = runRanks(2, [&](int r, Comm& comm) {
        HostBackend backend(ElementType::F64);
        Tensor x = backend.make(std::vector<double>(r == 0 ? 3 : 4, 1.0));
        comm.allReduce(x, worldGroup(2, r));
    });
    for (const auto& e : errors) {
        EXPECT_NE(e.find("mismatched calls"), std::string::npos) << e;
        EXPECT_NE(e.find("allReduce of 24 bytes (f64)"), std::string::npos) << e;
        EXPECT_NE(e.find("allReduce of 32 bytes (f64)"), std::string::npos) << e;
    }
}

TEST(InProcessComm, CallKindAndTypeMismatchesAreErrors) {
    auto errors = runRanks(2, [&](int r, Comm& comm) {
        HostBackend backend(ElementType::F64);
        Tensor x = backend.make({1.0, 2.0});
        if (r == 0)
            comm.allReduce(x, worldGroup(2, r));
        else
            comm.broadcast(x, 0, worldGroup(2, r));
    });
    for (const auto& e : errors) {
        EXPECT_NE(e.find("mismatched calls"), std::string::npos) << e;
        EXPECT_NE(e.find("broadcast"), std::string::npos) << e;
    }
    errors = runRanks(2, [&](int r, Comm& comm) {
        HostBackend backend(r == 0 ? ElementType::F64 : ElementType::F32);
        Tensor x = backend.make(std::vector<double>(r == 0 ? 1 : 2, 1.0));   // both 8 bytes
        comm.allReduce(x, worldGroup(2, r));
    });
    for (const auto& e : errors) {
        EXPECT_NE(e.find("(f64)"), std::string::npos) << e;
        EXPECT_NE(e.find("(f32)"), std::string::npos) << e;
    }
}

TEST(InProcessComm, LocalShapeErrorsAreReportedAtOnce) {
    auto world = makeInProcessWorld(2);
    auto comm = makeInProcessComm(world, 0);
    HostBackend backend(ElementType::F64);
    const Group g = worldGroup(2, 0);
    Tensor in = backend.make({1.0, 2.0});
    Tensor wrong = backend.empty({3}, MemoryCategory::Buffers);
    EXPECT_THROW(comm->allGather(in, wrong, g), CommError);
    EXPECT_THROW(comm->reduceScatter(in, wrong, g), CommError);
    EXPECT_THROW(comm->allToAll(in, wrong, g), CommError);
    EXPECT_THROW(comm->broadcast(in, 2, g), CommError);
    EXPECT_THROW(comm->allReduce(in, makeGroup("bad", {0, 1}, 1)), CommError);     // my index names rank 1
    EXPECT_THROW(comm->createGroup(makeGroup("bad", {0, 0}, 0)), CommError);       // repeated rank
    EXPECT_THROW(comm->createGroup(makeGroup("bad", {0, 5}, 0)), CommError);       // outside the world
    EXPECT_THROW(comm->send(in, 2, 0), CommError);
    EXPECT_THROW(makeInProcessComm(world, 2), RuntimeError);
}

TEST(InProcessComm, ManyRoundsReuseSlotsSafely) {
    // Back-to-back collectives where members overwrite their buffer right after each call returns: a member
    // leaving before the others finished reading would corrupt their sums.
    const int n = 4;
    expectNoErrors(runRanks(n, [&](int r, Comm& comm) {
        HostBackend backend(ElementType::F64);
        const Group world = worldGroup(n, r);
        Tensor x = backend.make({0.0, 0.0});
        for (int round = 0; round < 500; ++round) {
            backend.upload({double(r + round), 1.0}, x);
            comm.allReduce(x, world);
            const auto got = backend.download(x);
            EXPECT_EQ(got[0], 6.0 + 4.0 * round);
            EXPECT_EQ(got[1], 4.0);
        }
    }));
}

} // namespace
} // namespace tessel::exec
