// The staged device communicator over the in-process comm, with a host fake of the device staging: every
// collective and transfer gives what the in-process comm gives, through fp32 buffers.
#include "staged_comm.hpp"

#include "executor_support.hpp"

#include "tessel/exec/cpu_backend.hpp"
#include "tessel/exec/inproc_comm.hpp"

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <thread>

namespace tessel::exec {
namespace {

// "Device" tensors are CPU float64 tensors; staging converts them to and from fp32 and counts the trips.
class HostStaging final : public DeviceStaging {
public:
    void toHost(const Tensor& device, float* host) override {
        for (int64_t i = 0; i < device.numel(); ++i) host[i] = static_cast<float>(device.data<double>()[i]);
        ++toHostCalls;
    }
    void fromHost(const float* host, Tensor& device) override {
        for (int64_t i = 0; i < device.numel(); ++i) device.data<double>()[i] = host[i];
        ++fromHostCalls;
    }
    int toHostCalls = 0, fromHostCalls = 0;
};

Group worldOf(int size, int rank) {
    Group g;
    g.name = "world";
    for (int r = 0; r < size; ++r) g.ranks.push_back(r);
    g.myIndex = rank;
    return g;
}

void onRanks(int world, const std::function<void(Comm&, Backend&, HostStaging&, int)>& body) {
    test::onInProcessRanks(world, [&](int r, const std::shared_ptr<InProcessWorld>& w) {
        auto staging = std::make_shared<HostStaging>();
        auto comm = makeStagedComm(makeInProcessComm(w, r), staging);
        comm->setTimeoutSeconds(20.0);
        auto be = makeCpuBackend(ElementType::F64);
        comm->createGroup(worldOf(world, r));
        body(*comm, *be, *staging, r);
    });
}

Tensor tensorOf(Backend& be, const std::vector<double>& v) {
    Tensor t = be.empty({static_cast<int64_t>(v.size())}, MemoryCategory::Buffers);
    be.upload(v, t);
    return t;
}

TEST(StagedComm, AllReduceSumsInFp32AndStagesBothWays) {
    onRanks(3, [](Comm& comm, Backend& be, HostStaging& staging, int r) {
        EXPECT_EQ(comm.name(), "staged-inproc");
        Tensor t = tensorOf(be, {1.0 + r, 0.5 * r, -2.0});
        comm.allReduce(t, worldOf(3, r));
        EXPECT_EQ(be.download(t), (std::vector<double>{6.0, 1.5, -6.0}));
        EXPECT_EQ(staging.toHostCalls, 1);
        EXPECT_EQ(staging.fromHostCalls, 1);
        // 0.1 travels as fp32: the sum is float(0.1) * 3 in fp32, not 0.3.
        Tensor f = tensorOf(be, {0.1});
        comm.allReduce(f, worldOf(3, r));
        const float tenth = 0.1f;
        EXPECT_EQ(be.download(f)[0], static_cast<double>(tenth + tenth + tenth));
    });
}

TEST(StagedComm, GatherScatterBroadcastAndAllToAll) {
    onRanks(2, [](Comm& comm, Backend& be, HostStaging&, int r) {
        const Group g = worldOf(2, r);
        Tensor in = tensorOf(be, {10.0 * r, 10.0 * r + 1});
        Tensor all = be.empty({4}, MemoryCategory::Buffers);
        comm.allGather(in, all, g);
        EXPECT_EQ(be.download(all), (std::vector<double>{0, 1, 10, 11}));
        Tensor part = be.empty({2}, MemoryCategory::Buffers);
        comm.reduceScatter(all, part, g);   // every member holds [0, 1, 10, 11]: sums are doubled
        EXPECT_EQ(be.download(part), r == 0 ? (std::vector<double>{0, 2}) : (std::vector<double>{20, 22}));
        Tensor b = tensorOf(be, {r == 1 ? 7.0 : 0.0});
        comm.broadcast(b, 1, g);
        EXPECT_EQ(be.download(b)[0], 7.0);
        Tensor send = tensorOf(be, {100.0 * r, 100.0 * r + 1});
        Tensor got = be.empty({2}, MemoryCategory::Buffers);
        comm.allToAll(send, got, g);
        EXPECT_EQ(be.download(got), r == 0 ? (std::vector<double>{0, 100}) : (std::vector<double>{1, 101}));
    });
}

TEST(StagedComm, SendsAreBufferedSoNeighboursMaySendFirst) {
    onRanks(2, [](Comm& comm, Backend& be, HostStaging&, int r) {
        const int peer = 1 - r;
        Tensor mine = tensorOf(be, {static_cast<double>(r + 1), 2.0});
        comm.send(mine, peer, 5);   // both ranks send before either receives
        be.fill(mine, -1.0);        // the caller may reuse its tensor at once
        Tensor got = be.empty({2}, MemoryCategory::Buffers);
        comm.recv(got, peer, 5);
        EXPECT_EQ(be.download(got), (std::vector<double>{static_cast<double>(peer + 1), 2.0}));
        EXPECT_EQ(comm.allReduceHost({1.0, static_cast<double>(r)}, worldOf(2, r)), (std::vector<double>{2.0, 1.0}));
        comm.barrier(worldOf(2, r));
    });
}

TEST(StagedComm, TimeoutIsPassedDownAndNamesTheRank) {
    auto w = makeInProcessWorld(2);
    auto comm = makeStagedComm(makeInProcessComm(w, 0), std::make_shared<HostStaging>());
    comm->setTimeoutSeconds(0.2);
    auto be = makeCpuBackend(ElementType::F64);
    Tensor t = be->empty({1}, MemoryCategory::Buffers);
    try {
        comm->recv(t, 1, 0);   // rank 1 never sends
        FAIL() << "expected a timeout";
    } catch (const CommError& e) {
        EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
    }
}

} // namespace
} // namespace tessel::exec
