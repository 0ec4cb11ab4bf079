// Standalone check of the MPI Comm, run as `mpirun -np 4 tessel_mpi_comm_check`: every collective and send/recv
// on the world and on strided groups; exits 0 when all pass. With --hang, rank 3 never joins an all-reduce and
// the other ranks must report a CommError naming it, then take the job down with MPI_Abort.
#include "tessel/exec/mpi_comm.hpp"

#include "host_backend.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>

using namespace tessel::exec;
using tessel::exec::test::HostBackend;

namespace {

std::vector<std::string> failures;

void expect(bool ok, const std::string& what) {
    if (!ok) failures.push_back(what);
}

std::string show(const std::vector<double>& v) {
    std::ostringstream out;
    out << "[";
    for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << v[i];
    return out.str() + "]";
}

void expectEqual(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
    expect(got == want, what + ": got " + show(got) + ", want " + show(want));
}

Group makeGroup(const std::string& name, std::vector<int> ranks, int me) {
    Group g;
    g.name = name;
    g.ranks = std::move(ranks);
    g.myIndex = -1;
    for (int i = 0; i < g.size(); ++i)
        if (g.ranks[static_cast<size_t>(i)] == me) g.myIndex = i;
    return g;
}

// Expects `body` to throw a CommError whose message contains `needle`.
template <typename F>
void expectCommError(F body, const std::string& needle, const std::string& what) {
    try {
        body();
        failures.push_back(what + ": no CommError");
    } catch (const CommError& e) {
        expect(std::string(e.what()).find(needle) != std::string::npos,
               what + ": message lacks '" + needle + "': " + e.what());
    }
}

// Every collective on group g, against hand-computed results. The values are small integers, exact in f32;
// in bf16 the sums stay exact (at most 9 significant bits) and the copied values are compared as stored
// (rounded to bf16 on upload), so a copy that changed any bit, or a sum rounded twice, would show.
void checkCollectives(Comm& comm, const Group& g, ElementType type) {
    HostBackend backend(type);
    const int n = g.size();
    const double me = g.myIndex;
    const double nd = n;
    const std::string tag = g.name + "/" + toString(type) + " rank " + std::to_string(comm.rank());
    auto stored = [&](std::vector<double> v) {
        if (type == ElementType::Bf16)
            for (double& x : v) x = widenBf16(narrowToBf16(static_cast<float>(x)));
        return v;
    };

    Tensor x = backend.make({10 * (me + 1), 10 * (me + 1) + 1, 10 * (me + 1) + 2, 10 * (me + 1) + 3}, {2, 2});
    comm.allReduce(x, g);
    std::vector<double> want;
    for (int i = 0; i < 4; ++i) want.push_back(10 * nd * (nd + 1) / 2 + nd * i);
    expectEqual(backend.download(x), stored(want), tag + " allReduce");

    Tensor part = backend.make({100 * me, 100 * me + 1}, {1, 2});
    Tensor all = backend.empty({static_cast<int64_t>(n), 2}, MemoryCategory::Buffers);
    comm.allGather(part, all, g);
    want.clear();
    for (int j = 0; j < n; ++j) {
        want.push_back(100.0 * j);
        want.push_back(100.0 * j + 1);
    }
    expectEqual(backend.download(all), stored(want), tag + " allGather");

    std::vector<double> big;
    for (int k = 0; k < 2 * n; ++k) big.push_back(me + 10 * k);
    Tensor in = backend.make(big, {2 * static_cast<int64_t>(n)});
    Tensor mine = backend.empty({2}, MemoryCategory::Buffers);
    comm.reduceScatter(in, mine, g);
    want.clear();
    for (int k = 0; k < 2; ++k) want.push_back(nd * (nd - 1) / 2 + 10 * (2 * me + k) * nd);
    expectEqual(backend.download(mine), stored(want), tag + " reduceScatter");

    for (int root = 0; root < n; ++root) {
        Tensor b = g.myIndex == root ? backend.make({1000.0 * root, 1000.0 * root + 1}) : backend.make({-1, -1});
        comm.broadcast(b, root, g);
        expectEqual(backend.download(b), stored({1000.0 * root, 1000.0 * root + 1}), tag + " broadcast from " + std::to_string(root));
    }

    std::vector<double> a2a;
    for (int j = 0; j < n; ++j)
        for (int e = 0; e < 2; ++e) a2a.push_back(100 * me + 10 * j + e);
    Tensor a2aIn = backend.make(a2a, {2 * static_cast<int64_t>(n)});
    Tensor a2aOut = backend.empty({2 * static_cast<int64_t>(n)}, MemoryCategory::Buffers);
    comm.allToAll(a2aIn, a2aOut, g);
    want.clear();
    for (int i = 0; i < n; ++i)
        for (int e = 0; e < 2; ++e) want.push_back(100.0 * i + 10 * me + e);
    expectEqual(backend.download(a2aOut), stored(want), tag + " allToAll");

    expectEqual(comm.allReduceHost({1.0, me}, g), {nd, nd * (nd - 1) / 2}, tag + " allReduceHost");
    comm.barrier(g);
}

// Every member must receive the same bits from an all-reduce whose result depends on the order of addition;
// the result must also agree with the sum in group order to float64 rounding.
void checkIdenticalBits(Comm& comm, const Group& g) {
    HostBackend backend(ElementType::F64);
    const int count = 1000;
    auto value = [](int r, int i) { return (r % 2 ? -1.0 : 1.0) * (0.1 * (r + 1) + 1e-3 * i + 1.0 / (3.0 + i + r)); };
    std::vector<double> mine;
    for (int i = 0; i < count; ++i) mine.push_back(value(g.ranks[static_cast<size_t>(g.myIndex)], i));
    Tensor x = backend.make(mine);
    comm.allReduce(x, g);
    Tensor gathered = backend.empty({static_cast<int64_t>(g.size()) * count}, MemoryCategory::Buffers);
    comm.allGather(x, gathered, g);
    const double* all = gathered.data<double>();
    for (int j = 1; j < g.size(); ++j)
        expect(std::memcmp(all, all + j * count, count * sizeof(double)) == 0,
               g.name + ": member " + std::to_string(j) + " got other bits than member 0 from allReduce");
    double worst = 0;
    for (int i = 0; i < count; ++i) {
        double sum = 0;
        for (int r : g.ranks) sum += value(r, i);
        worst = std::max(worst, std::abs(x.data<double>()[i] - sum));
    }
    expect(worst < 1e-13, g.name + ": allReduce differs from the sum in group order by " + std::to_string(worst));
}

void checkPointToPoint(Comm& comm) {
    HostBackend backend(ElementType::F64);
    const int n = comm.worldSize();
    const int r = comm.rank();
    const int right = (r + 1) % n;
    const int left = (r + n - 1) % n;
    // Every rank sends before it receives (safe: sends are buffered), on two tags, and reads tag 2 first.
    for (double v : {1.0, 2.0, 3.0}) comm.send(backend.make({v + 10 * r, -v}), right, 1);
    for (double v : {4.0, 5.0}) comm.send(backend.make({v + 10 * r, -v}), right, 2);
    // A large message too (beyond any eager limit), sent both ways at once.
    std::vector<double> large(200000);
    std::iota(large.begin(), large.end(), double(r));
    comm.send(backend.make(large), right, 3);
    comm.send(backend.make(large), left, 4);
    Tensor t = backend.empty({2}, MemoryCategory::Buffers);
    for (double v : {4.0, 5.0}) {
        comm.recv(t, left, 2);
        expectEqual(backend.download(t), {v + 10 * left, -v}, "recv tag 2 order");
    }
    for (double v : {1.0, 2.0, 3.0}) {
        comm.recv(t, left, 1);
        expectEqual(backend.download(t), {v + 10 * left, -v}, "recv tag 1 order");
    }
    Tensor bigIn = backend.empty({200000}, MemoryCategory::Buffers);
    comm.recv(bigIn, left, 3);
    expect(bigIn.data<double>()[0] == left && bigIn.data<double>()[199999] == left + 199999.0, "large recv from left");
    comm.recv(bigIn, right, 4);
    expect(bigIn.data<double>()[0] == right && bigIn.data<double>()[199999] == right + 199999.0, "large recv from right");

    // Wrong sizes are errors that name the sender; the comm stays usable afterwards.
    if (n >= 2) {
        if (r == 1) {
            comm.send(backend.make({1, 2, 3, 4}), 0, 50);
            comm.send(backend.make({1}), 0, 51);
        }
        if (r == 0) {
            Tensor two = backend.empty({2}, MemoryCategory::Buffers);
            expectCommError([&] { comm.recv(two, 1, 50); }, "rank 1 sent more than", "recv of a larger message");
            expectCommError([&] { comm.recv(two, 1, 51); }, "rank 1 sent 1 elements", "recv of a smaller message");
        }
        // A receive nobody answers times out (0.3 s), naming the peer, and is cancelled cleanly.
        if (r == 0) {
            const double saved = comm.timeoutSeconds();
            comm.setTimeoutSeconds(0.3);
            expectCommError([&] { comm.recv(t, 1, 99); }, "recv #0 from rank 1, tag 99): timed out after 0.3 s",
                            "recv timeout");
            comm.setTimeoutSeconds(saved);
        }
    }
}

int runChecks(Comm& comm) {
    const int n = comm.worldSize();
    const int r = comm.rank();
    std::vector<int> everyone(static_cast<size_t>(n));
    std::iota(everyone.begin(), everyone.end(), 0);
    const Group world = makeGroup("world", everyone, r);
    // tp: consecutive pairs; dp: stride 2 (with 4 ranks: tp {0,1} {2,3}, dp {0,2} {1,3}).
    const int tpSize = n % 2 == 0 ? 2 : 1;
    std::vector<int> tpRanks, dpRanks;
    for (int i = 0; i < tpSize; ++i) tpRanks.push_back(r - r % tpSize + i);
    for (int q = r % tpSize; q < n; q += tpSize) dpRanks.push_back(q);
    const Group tp = makeGroup("tp", tpRanks, r);
    const Group dp = makeGroup("dp", dpRanks, r);

    expectCommError([&] { HostBackend b(ElementType::F64); Tensor x = b.make({1.0}); comm.allReduce(x, world); },
                    "was not created", "collective on a group never created");
    comm.createGroup(world);
    comm.createGroup(tp);
    comm.createGroup(dp);

    for (ElementType type : {ElementType::F64, ElementType::F32, ElementType::Bf16})
        for (const Group* g : {&world, &tp, &dp}) checkCollectives(comm, *g, type);
    // Interleave the groups: tp and dp calls alternate, each group in its own order.
    for (int round = 0; round < 20; ++round) {
        expectEqual(comm.allReduceHost({1.0}, tp), {double(tp.size())}, "interleaved tp");
        expectEqual(comm.allReduceHost({1.0}, dp), {double(dp.size())}, "interleaved dp");
    }
    checkIdenticalBits(comm, world);
    checkIdenticalBits(comm, dp);
    {
        HostBackend backend(ElementType::F64);
        Tensor in = backend.make({1.0, 2.0});
        Tensor wrong = backend.empty({3}, MemoryCategory::Buffers);
        expectCommError([&] { comm.allGather(in, wrong, world); }, "must hold", "allGather into a wrong output");
    }
    checkPointToPoint(comm);
    if (n >= 3) {
        // Members that disagree on a group: rank 0 names {0, 1} while ranks 1 and 2 name {1, 2}. The split
        // leaves rank 0 alone, which it must report; ranks 1 and 2 agree and get their group.
        const Group odd = r == 0 ? makeGroup("odd", {0, 1}, r)
                                 : r <= 2 ? makeGroup("odd", {1, 2}, r) : makeGroup("odd", {r}, r);
        if (r == 0)
            expectCommError([&] { comm.createGroup(odd); }, "disagree on its members", "createGroup disagreement");
        else
            comm.createGroup(odd);
    }
    comm.barrier(world);

    const double failed = comm.allReduceHost({double(failures.empty() ? 0 : 1)}, world)[0];
    for (const auto& f : failures) std::cerr << "rank " << r << ": FAIL " << f << "\n";
    if (r == 0) {
        if (failed == 0)
            std::cout << "mpi_comm_check: all checks passed on " << n << " ranks\n";
        else
            std::cout << "mpi_comm_check: " << failed << " of " << n << " ranks had failures\n";
    }
    return failed == 0 ? 0 : 1;
}

// Rank 3 never joins the all-reduce: every other rank must get a CommError naming it, then abort the job.
int runHang(Comm& comm) {
    const int n = comm.worldSize();
    const int r = comm.rank();
    std::vector<int> everyone(static_cast<size_t>(n));
    std::iota(everyone.begin(), everyone.end(), 0);
    const Group world = makeGroup("world", everyone, r);
    comm.createGroup(world);
    comm.barrier(world);
    if (r == 3) {
        std::this_thread::sleep_for(std::chrono::seconds(60));   // MPI_Abort from the others ends this
        std::cerr << "rank 3: still alive after 60 s; nobody aborted the job\n";
        return 4;
    }
    HostBackend backend(ElementType::F64);
    Tensor x = backend.make({1.0});
    const auto start = std::chrono::steady_clock::now();
    try {
        comm.allReduce(x, world);
        std::cerr << "rank " << r << ": FAIL allReduce completed without rank 3\n";
        abortMpi(5);
    } catch (const CommError& e) {
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::cerr << "rank " << r << ": CommError after " << seconds << " s: " << e.what() << "\n" << std::flush;
        abortMpi(3);
    }
}

} // namespace

int main(int argc, char** argv) {
    bool hang = false;
    double timeoutSeconds = 30.0;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--hang") {
            hang = true;
            timeoutSeconds = 2.0;
        } else if (arg == "--timeout" && i + 1 < argc) {
            timeoutSeconds = std::stod(argv[++i]);
        } else {
            std::cerr << "usage: mpirun -np 4 " << argv[0] << " [--hang] [--timeout SECONDS]\n";
            return 2;
        }
    }
    try {
        auto comm = makeMpiComm();
        comm->setTimeoutSeconds(timeoutSeconds);
        if (hang) {
            if (comm->worldSize() < 4) {
                std::cerr << "--hang needs at least 4 ranks\n";
                abortMpi(2);
            }
            return runHang(*comm);
        }
        return runChecks(*comm);
    } catch (const std::exception& e) {
        std::cerr << "mpi_comm_check: " << e.what() << "\n" << std::flush;
        abortMpi(1);
    }
}
