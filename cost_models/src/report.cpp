// Assembles the cost-model prediction of a scenario and serialises it for `tessel predict --json`.
#include "tessel/cost/report.hpp"

namespace tessel {

CostPrediction predictCosts(const Scenario& s) {
    CostPrediction p;
    const PrecisionRecipe& recipe = s.recipe();
    p.memory = predictMemory(s.model, s.cluster, s.plan);
    p.layer = layerCompute(s.model, s.cluster, s.plan, recipe);
    if (s.model.moe && !s.model.moe->denseLayers.empty())
        p.denseLayer = layerCompute(s.model.denseLayerModel(), s.cluster, s.plan, recipe);
    if (s.model.slidingWindow > 0 && !s.model.fullAttentionLayers.empty())
        p.fullAttentionLayer = layerCompute(s.model.fullAttentionLayerModel(), s.cluster, s.plan, recipe);
    p.embedding = embeddingCompute(s.model, s.cluster, s.plan, recipe);
    p.head = headCompute(s.model, s.cluster, s.plan, recipe);
    if (s.model.mtpLayers > 0) p.mtpModule = mtpCompute(s.model, s.cluster, s.plan, recipe);
    p.layerComm = layerCommOps(s.model, s.cluster, s.plan);
    p.pipelineComm = pipelineCommOps(s.model, s.cluster, s.plan);
    const double denseShards = s.plan.zeroStage >= 1 ? s.plan.zeroShardSize() : 1.0;
    const double expertShards =
        s.plan.zeroStage >= 1 ? static_cast<double>(s.plan.expertZeroShardSize()) : 1.0;
    for (int stage = 0; stage < s.plan.pp; ++stage) {
        const StageParameters params = stageParameters(s.model, s.plan, stage);
        p.optimizerPerStage.push_back(
            optimizerCompute(params.dense / denseShards + params.expert / expertShards, s.cluster, recipe,
                             foreachOptimizerOf(s.plan.framework)));
        p.dpComm.push_back(dataParallelCommOps(s.model, s.cluster, s.plan, stage));
    }
    const auto counts = countParameters(s.model);
    p.parameters = counts.total(s.model.layers);
    p.activeParameters = activeParameters(s.model);
    p.modelFlopsPerStep = modelFlopsPerStep(s.model, s.plan);
    return p;
}

nlohmann::json memoryToJson(const MemoryReport& m) {
    nlohmann::json stages = nlohmann::json::array();
    for (const auto& st : m.stages) {
        stages.push_back({{"stage", st.stage},
                          {"layers", st.layers},
                          {"parameters", st.parameters},
                          {"in_flight_micro_batches", st.inFlight},
                          {"weights_bytes", st.weightsBytes},
                          {"grads_bytes", st.gradsBytes},
                          {"optimizer_bytes", st.optimizerBytes},
                          {"activations_bytes", st.activationsBytes},
                          {"other_bytes", st.otherBytes()},
                          {"other",
                           {{"zero3_gather_bytes", st.other.zero3GatherBytes},
                            {"comm_buffer_bytes", st.other.commBufferBytes},
                            {"backward_working_bytes", st.other.backwardWorkingBytes},
                            {"logits_loss_bytes", st.other.logitsLossBytes},
                            {"step_copy_bytes", st.other.stepCopyBytes},
                            {"reserved_bytes", st.other.reservedBytes},
                            {"collective_library_bytes", st.other.collectiveLibraryBytes}}},
                          {"peak_moment", st.moment == StageMemory::Moment::LossBackward        ? "loss_backward"
                                          : st.moment == StageMemory::Moment::LastLayerBackward ? "last_layer_backward"
                                                                                                : "whole"},
                          {"other_moment_activations_bytes", st.otherMomentActivationsBytes},
                          {"loss_backward_bytes", st.lossBackwardBytes},
                          {"layer_backward_working_bytes", st.layerBackwardWorkingBytes},
                          {"allocator_kept_bytes", st.allocatorKeptBytes},
                          {"total_bytes", st.totalBytes()},
                          {"fits", st.fits},
                          {"headroom_bytes", st.headroomBytes},
                          {"host_bytes", st.hostBytes},
                          {"host_fits", st.hostFits}});
    }
    return {{"stages", stages},
            {"peak_bytes", m.peakBytes},
            {"peak_stage", m.peakStage},
            {"reserved_peak_bytes", m.reservedPeakBytes},
            {"capacity_bytes", m.capacityBytes},
            {"host_peak_bytes", m.hostPeakBytes},
            {"host_bytes_per_node", m.hostBytesPerNode()},
            {"host_capacity_bytes", m.hostCapacityBytes},
            {"fits", m.fits}};
}

nlohmann::json opToJson(const OpCost& op) {
    nlohmann::json j{{"name", op.name}, {"flops", op.flops}, {"bytes", op.bytes}, {"seconds", op.seconds}};
    if (op.opClass != OpClass::Memory) j["shape"] = {op.m, op.n, op.k};
    return j;
}

namespace {
nlohmann::json phaseToJson(const PhaseCost& p) {
    return {{"seconds", p.seconds}, {"flops", p.flops}, {"model_flops", p.modelFlops}};
}
} // namespace

nlohmann::json blockToJson(const BlockCompute& b) {
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& op : b.forwardOps) ops.push_back(opToJson(op));
    return {{"forward", phaseToJson(b.forward)},
            {"backward_input", phaseToJson(b.backwardInput)},
            {"backward_weight", phaseToJson(b.backwardWeight)},
            {"recompute", phaseToJson(b.recompute)},
            {"forward_ops", ops}};
}

nlohmann::json commOpToJson(const CommOp& op) {
    return {{"name", op.name},
            {"group", toString(op.group)},
            {"group_size", op.placement.size},
            {"group_nodes", op.placement.nodes},
            {"primitive", toString(op.primitive)},
            {"phase", toString(op.phase)},
            {"bytes", op.bytes},
            {"seconds", op.cost.seconds},
            {"latency_seconds", op.cost.latencySeconds},
            {"bandwidth_seconds", op.cost.bandwidthSeconds},
            {"algorithm", toString(op.cost.algorithm)},
            {"hierarchical", op.cost.hierarchical},
            {"tier", op.cost.tier}};
}

nlohmann::json predictionToJson(const Scenario& s, const CostPrediction& p) {
    auto list = [](const std::vector<CommOp>& ops) {
        nlohmann::json a = nlohmann::json::array();
        for (const auto& op : ops) a.push_back(commOpToJson(op));
        return a;
    };
    nlohmann::json dp = nlohmann::json::array();
    for (size_t i = 0; i < p.dpComm.size(); ++i) dp.push_back({{"stage", i}, {"ops", list(p.dpComm[i])}});
    nlohmann::json opt = nlohmann::json::array();
    for (size_t i = 0; i < p.optimizerPerStage.size(); ++i)
        opt.push_back({{"stage", i}, {"seconds", p.optimizerPerStage[i].seconds}, {"bytes", p.optimizerPerStage[i].bytes}});
    nlohmann::json out = {{"schema_version", 1},
            {"scenario", {{"name", s.name}, {"model", s.model.name}, {"cluster", s.cluster.name},
                          {"gpus", s.cluster.totalGpus()}, {"plan", planToJson(s.plan)}}},
            {"model", {{"parameters", p.parameters}, {"active_parameters", p.activeParameters},
                       {"model_flops_per_step", p.modelFlopsPerStep}}},
            {"memory", memoryToJson(p.memory)},
            {"compute", {{"per_layer", blockToJson(p.layer)}, {"embedding", blockToJson(p.embedding)},
                         {"head", blockToJson(p.head)}, {"optimizer", opt}}},
            {"communication", {{"per_layer", list(p.layerComm)}, {"pipeline", list(p.pipelineComm)},
                               {"data_parallel", dp}}}};
    if (p.denseLayer) out["compute"]["dense_layer"] = blockToJson(*p.denseLayer); // an MoE model's dense layers
    if (p.fullAttentionLayer) out["compute"]["full_attention_layer"] = blockToJson(*p.fullAttentionLayer);
    if (p.mtpModule) {
        // Each module's own ops; it also runs a layer (per_layer, or dense_layer where the last layer is dense) and the
        // head again, on the stage holding the head.
        out["compute"]["mtp_module"] = blockToJson(*p.mtpModule);
        out["compute"]["mtp_module"]["modules"] = s.model.mtpLayers;
        out["compute"]["mtp_module"]["stage"] = s.plan.stageOfVirtual(s.plan.pp * s.plan.vpp - 1);
    }
    return out;
}

} // namespace tessel
