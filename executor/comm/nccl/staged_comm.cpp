// Staged device communicator: device tensor -> fp32 host tensor -> host Comm -> device tensor.
#include "staged_comm.hpp"

#include "tessel/exec/cpu_backend.hpp"

#include <string>

namespace tessel::exec {

namespace {

class StagedComm final : public Comm {
public:
    StagedComm(std::unique_ptr<Comm> host, std::shared_ptr<DeviceStaging> staging)
        : host_(std::move(host)), staging_(std::move(staging)), buffers_(makeCpuBackend(ElementType::F32)) {
        if (!host_ || !staging_) throw RuntimeError("staged comm: needs a host comm and a device staging");
        setTimeoutSeconds(host_->timeoutSeconds());
    }

    int rank() const override { return host_->rank(); }
    int worldSize() const override { return host_->worldSize(); }
    std::string name() const override { return "staged-" + host_->name(); }

    void createGroup(const Group& g) override { sync().createGroup(g); }

    void allReduce(Tensor& inout, const Group& g) override {
        Tensor h = stage(inout);
        sync().allReduce(h, g);
        unstage(h, inout);
    }
    void allGather(const Tensor& in, Tensor& out, const Group& g) override {
        exchange(in, out, [&](const Tensor& hin, Tensor& hout) { sync().allGather(hin, hout, g); });
    }
    void reduceScatter(const Tensor& in, Tensor& out, const Group& g) override {
        exchange(in, out, [&](const Tensor& hin, Tensor& hout) { sync().reduceScatter(hin, hout, g); });
    }
    void broadcast(Tensor& inout, int rootIndex, const Group& g) override {
        Tensor h = stage(inout);
        sync().broadcast(h, rootIndex, g);
        unstage(h, inout);
    }
    void allToAll(const Tensor& in, Tensor& out, const Group& g) override {
        exchange(in, out, [&](const Tensor& hin, Tensor& hout) { sync().allToAll(hin, hout, g); });
    }
    void send(const Tensor& t, int peerRank, int tag) override {
        Tensor h = stage(t);
        sync().send(h, peerRank, tag);   // the host comms buffer sends, so `h` may go at once
    }
    void recv(Tensor& t, int peerRank, int tag) override {
        Tensor h = hostLike(t);
        sync().recv(h, peerRank, tag);
        unstage(h, t);
    }
    std::vector<double> allReduceHost(const std::vector<double>& values, const Group& g) override {
        return sync().allReduceHost(values, g);
    }
    void barrier(const Group& g) override { sync().barrier(g); }

private:
    Comm& sync() {
        host_->setTimeoutSeconds(timeoutSeconds());
        return *host_;
    }
    Tensor hostLike(const Tensor& device) {
        if (!device.defined()) throw CommError(name() + ": undefined tensor");
        return buffers_->empty(device.shape(), MemoryCategory::Buffers);
    }
    Tensor stage(const Tensor& device) {
        Tensor h = hostLike(device);
        staging_->toHost(device, h.data<float>());
        return h;
    }
    void unstage(const Tensor& h, Tensor& device) { staging_->fromHost(h.data<float>(), device); }
    // in -> host -> call(host in, host out) -> out
    template <typename Call>
    void exchange(const Tensor& in, Tensor& out, Call&& call) {
        Tensor hin = stage(in);
        Tensor hout = hostLike(out);
        call(hin, hout);
        unstage(hout, out);
    }

    std::unique_ptr<Comm> host_;
    std::shared_ptr<DeviceStaging> staging_;
    std::unique_ptr<Backend> buffers_;
};

} // namespace

std::unique_ptr<Comm> makeStagedComm(std::unique_ptr<Comm> host, std::shared_ptr<DeviceStaging> staging) {
    return std::make_unique<StagedComm>(std::move(host), std::move(staging));
}

} // namespace tessel::exec
