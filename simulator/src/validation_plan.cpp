// Reads a published record's system and plan (runs.json schema) into a tessel cluster and plan, step by step:
// the GPU's preset in the record's shape, parallel degrees and batches, the pipeline (validation_pipeline.cpp), the
// framework's settings (validation_framework.cpp); then the numerics: precision and sharding
// (validation_numerics.cpp), the attention kernel (validation_attention.cpp), recompute (validation_recompute.cpp).
// What the record does not state is an assumption; a plan tessel cannot run is a refusal that names the field.
#include "validation_plan.hpp"
#include "validation_reading.hpp"

#include "validation_prose.hpp"

#include "tessel/cost/compute.hpp"
#include "tessel/cost/errors.hpp"
#include "tessel/cost/json_reader.hpp"
#include "tessel/cost/memory.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <regex>
#include <utility>
#include <vector>

namespace tessel::sim::detail {

namespace {
using namespace prose;

// A power limit the record states (system/power_limit_watts, or watts written beside the GPU's name): where the
// preset's measured share curve carries the power law of its kernels, the curve moves to that limit (FORMULAS.md
// §3.3); said either way. False (with the refusal) for a field that is no limit.
bool readPowerLimit(Reading& r, ClusterConfig& cluster) {
    std::optional<double> watts;
    std::string from;
    for (const char* key : {"power_limit_watts", "power_limit_w", "tdp_watts", "tdp_w"}) {
        if (!r.sys.contains(key)) continue;
        watts = number(r.sys, key);
        from = r.ptr + "/system/" + key;
        if (!watts || *watts < 50.0 || *watts > 5000.0) {
            r.refusal = from + ": expected a board power limit in watts, 50 to 5000";
            return false;
        }
        break;
    }
    if (!watts) {
        watts = powerLimitInProse(text(r.sys, "gpu"));
        from = r.ptr + "/system/gpu";
        if (watts && (*watts < 100.0 || *watts > 3000.0)) watts.reset(); // a number that reads as no board limit
        // A Grace Hopper module's watts are the module's, shared with its CPU and memory: not the GPU's limit.
        if (watts && contains(lower(text(r.sys, "gpu")), "gh200")) {
            r.assume("the " + std::to_string(static_cast<int>(*watts)) + " W beside GH200 read as the module's power, "
                     "shared with its Grace CPU, not the GPU's limit: the H200 preset's curve at its own limit");
            watts.reset();
        }
    }
    if (!watts) return true;
    const auto& law = cluster.gpu.sustainedSharePower;
    const double running = cluster.gpu.powerLimitWatts > 0.0 ? cluster.gpu.powerLimitWatts : law ? law->measuredAtWatts : 0.0;
    if (law && std::abs(*watts - running) < 0.5) return true; // the preset's own limit
    if (law) {
        if (const std::string why = cluster.gpu.powerLimitProblem(*watts); !why.empty()) {
            r.refusal = from + ": " + why;
            return false;
        }
    }
    char said[160];
    if (law) {
        cluster.gpu.powerLimitWatts = *watts;
        std::snprintf(said, sizeof said, "%.0f W: the tensor cores' share curve, measured at %.0f W, x%.3f",
                      *watts, law->measuredAtWatts, cluster.gpu.powerLimitShareScale());
        r.assume(std::string("power limit ") + said + " (" + from + ")");
    } else {
        std::snprintf(said, sizeof said, "%.0f W", *watts);
        r.assume(std::string("power limit ") + said + " stated (" + from + "); " + cluster.gpu.name +
                 " carries no power law for its tensor-core share, so the preset's own limit is costed");
    }
    return true;
}

// A package of several devices (an MI250X: two GCDs, each a GPU to PyTorch, HIP and Slurm; the preset is per
// GCD): whether the record counts packages or devices, and its counts in devices. Said either way. The record's words
// ("GCD") decide; else 4 a node is a Frontier / LUMI-G / MI250 node's 4 packages and 8 its 8 GCDs; else a plan whose
// stated degrees multiply to twice the GPUs counts packages (MosaicML counts MI250s, the Frontier and LUMI papers
// GCDs); else devices, as software counts them. False with the refusal when the counts cannot be devices.
bool packageCountsAreDevices(Reading& r, const GpuChoice& gpu, int64_t statedPerNode, int64_t& world, int64_t& perNode) {
    const int64_t per = gpu.devicesPerPackage;
    const std::string words = lower(text(r.sys, "gpu") + " " + text(r.sys, "notes") + " " + text(r.rec, "notes"));
    bool packages = false;
    std::string why;
    if (contains(words, "gcd")) {
        why = "the record counts GCDs";
    } else if (statedPerNode == 4) {
        packages = true;
        why = "4 a node are a node's 4 packages (Frontier, LUMI-G and MI250 nodes hold 4)";
    } else if (statedPerNode == 8) {
        why = "8 a node are a node's 8 GCDs";
    } else {
        int64_t product = 1;
        bool all = true;
        for (const char* key : {"tp", "pp", "cp", "dp"}) {
            const nlohmann::json* v = member(r.pl, key);
            if (v && v->is_number_integer() && v->get<int64_t>() >= 1) product *= v->get<int64_t>();
            else if (std::string(key) == "dp" || std::string(key) == "tp") all = false;
        }
        packages = all && product == per * world;
        why = packages ? "the plan's degrees multiply to " + std::to_string(product) + ", " + std::to_string(per) + " GCDs a counted GPU"
                       : "counted as software counts them, a GCD a GPU";
    }
    if (packages) {
        if (world * per > PlanLimits::degree) {
            r.refusal = r.ptr + "/system/total_gpus: " + std::to_string(world) + " packages of " + std::to_string(per) +
                        " GCDs are more than " + std::to_string(PlanLimits::degree) + " GPUs";
            return false;
        }
        world *= per;
        if (statedPerNode > 0) perNode *= per; // else the preset's node, already in GCDs
    }
    r.assume(std::string(packages ? "GPUs read as packages of " + std::to_string(per) + " GCDs, " + std::to_string(world) + " GCDs in all"
                                  : "GPUs read as GCDs (" + std::to_string(per) + " a package)") +
             ": " + why + " (" + gpu.preset + " is per GCD)");
    return true;
}

// The cluster: the GPU's preset (its figures and their sources live in scenarios/clusters) in the record's
// shape (GPUs per node, nodes) and with its inter-node link.
bool readCluster(Reading& r) {
    const nlohmann::json& sys = r.sys;
    const std::string& ptr = r.ptr;
    ValidationCase& c = r.c;
    std::string& refusal = r.refusal;
    // Cluster: the GPU's preset (its figures and their sources live in scenarios/clusters), the record's shape.
    GpuChoice gpu = gpuPreset(text(sys, "gpu"));
    if (gpu.preset.empty()) {
        refusal = ptr + "/system/gpu: \"" + text(sys, "gpu") + "\" is not a GPU tessel has figures for" +
                  (gpu.note.empty() ? "" : " (" + gpu.note + ")");
        return false;
    }
    // GPUs that talk over PCIe inside the node, at most with NVLink bridges between pairs, are the PCIe cards (no
    // NVSwitch, a lower power limit), whatever the GPU field leaves unsaid: the A100's and H100's have presets of
    // their own, other parts' PCIe cards none. A link that names NVSwitch or NVLink other than bridges (PCIe then
    // being the host's), or a GPU named SXM, is read as before.
    const std::string intra = lower(text(sys, "intra_node_link")), gpuName = lower(text(sys, "gpu"));
    const bool nvlinkFabric = contains(intra, "nvswitch") || (contains(intra, "nvlink") && !contains(intra, "bridge"));
    const bool pcieCard = gpu.preset.rfind("pcie-", 0) == 0;
    if (!pcieCard && contains(intra, "pcie") && !nvlinkFabric && !contains(gpuName, "sxm")) {
        const GpuChoice card = gpuPreset(text(sys, "gpu") + " pcie");
        if (card.preset.empty() || card.preset.rfind("pcie-", 0) != 0) {
            refusal = ptr + "/system/intra_node_link: \"" + text(sys, "intra_node_link") + "\" puts the GPUs on PCIe inside "
                      "the node: the PCIe card, which tessel has figures for only for the A100 and H100 (pcie-a100-80g, "
                      "pcie-a100-40g, pcie-h100-80g)";
            return false;
        }
        r.assume("the intra-node link is PCIe: the GPU read as the PCIe card (" + card.preset + "), not the SXM part");
        gpu = card;
    }
    // The PCIe presets have one tier inside the node; the NVLink bridges some servers pair their cards with are not
    // modelled, so a group of two on a bridged pair is costed at the PCIe rate.
    if (gpu.preset.rfind("pcie-", 0) == 0 && contains(intra, "bridge"))
        r.assume("NVLink bridges between pairs of cards not modelled: every group inside the node runs at the PCIe rate (" +
                 gpu.preset + ")");
    if (!gpu.note.empty()) r.assume(gpu.note);
    ClusterConfig cluster = loadClusterRef(gpu.preset, ptr + "/system/gpu");
    // A link named in words tessel does not read runs as the preset's, said.
    if (intra.find_first_not_of(' ') != std::string::npos && !contains(intra, "nvl") &&
        !contains(intra, "nvswitch") && !contains(intra, "pcie") && !contains(intra, "xgmi") &&
        !contains(intra, "infinity"))
        r.unread("system/intra_node_link", text(sys, "intra_node_link"),
                 "link tessel reads (NVLink, NVSwitch, PCIe, xGMI / Infinity Fabric)",
                 "the preset's " + cluster.intraNode.name);
    if (gpu.nvlinkBytesPerSecond > 0.0) cluster.intraNode.bandwidthBytesPerSecond = gpu.nvlinkBytesPerSecond;
    if (gpu.peakScale != 1.0) {
        for (auto& [dtype, flops] : cluster.gpu.peakFlopsPerSecond) flops *= gpu.peakScale;
        cluster.gpu.name = gpu.partName;
    }
    if (const GpuPartMemory part = gpuPartMemory(text(sys, "gpu")); !part.name.empty()) {
        cluster.gpu.name = part.name;
        cluster.gpu.memoryBytes = part.memoryBytes;
        cluster.gpu.hbmBytesPerSecond = part.hbmBytesPerSecond;
    }
    if (!readPowerLimit(r, cluster)) return false;
    const int64_t most = PlanLimits::degree; // GPUs in all, a node's and nodes: as many as a data-parallel degree
    const int64_t total = count(sys, "total_gpus", 1, most, ptr + "/system", refusal).value_or(0);
    const int64_t statedPerNode = count(sys, "gpus_per_node", 1, most, ptr + "/system", refusal).value_or(0);
    int64_t perNode = statedPerNode;
    if (perNode <= 0) {
        perNode = cluster.gpusPerNode;
        if (gpu.nvlinkDomainGpus == 0) r.assume("gpus_per_node not stated: " + std::to_string(perNode) + " (" + gpu.preset + ")");
    }
    int64_t nodes = count(sys, "nodes", 1, most, ptr + "/system", refusal).value_or(0);
    if (!refusal.empty()) return false;
    int64_t world = total > 0 ? total : nodes * perNode;
    if (gpu.devicesPerPackage > 1 && !packageCountsAreDevices(r, gpu, statedPerNode, world, perNode)) return false;
    if (world > most) {
        refusal = ptr + "/system/nodes: " + std::to_string(nodes) + " nodes of " + std::to_string(perNode) + " GPUs are more than " +
                  std::to_string(most) + " GPUs";
        return false;
    }
    if (world <= 0) {
        refusal = ptr + "/system/total_gpus: neither total_gpus nor nodes is stated";
        return false;
    }
    if (gpu.nvlinkDomainGpus > 0) {
        // A rack-scale NVLink domain: tessel's node is the domain, whatever the record calls a node (a GB200
        // compute tray holds 4). A job that does not fill whole racks takes the largest share of one that divides
        // it (a 256-GPU job as 4 x 64; schedulers place such jobs in equal NVLink partitions).
        int64_t domain = std::min<int64_t>(gpu.nvlinkDomainGpus, world);
        while (world % domain != 0) --domain;
        if (domain != perNode)
            r.assume("NVLink domain of " + std::to_string(domain) + " GPUs (" + gpu.preset + ": " +
                     std::to_string(gpu.nvlinkDomainGpus) + " a rack" +
                     (statedPerNode > 0 ? ", not the " + std::to_string(statedPerNode) + " a node the record counts" : "") +
                     (domain < std::min<int64_t>(gpu.nvlinkDomainGpus, world) ? "; the job does not fill whole racks" : "") + ")");
        perNode = domain;
    }
    if (perNode > world) perNode = world;
    nodes = (world + perNode - 1) / perNode;
    if (nodes * perNode != world) {
        refusal = ptr + "/system/total_gpus: " + std::to_string(world) + " GPUs do not fill nodes of " + std::to_string(perNode);
        return false;
    }
    // Four SXM GPUs of the A100 / H100 / H200 generations a node sit on an HGX 4-GPU board, which has no NVSwitch:
    // each GPU's NVLinks are split evenly over direct links to its three peers (A100 4 a peer of 12, Hopper 6 of 18),
    // so a group of m of the board's GPUs reaches the others over m - 1 of the three (a pair over one), where the
    // 8-GPU board's NVSwitch gives every group all of them (LinkTier::meshShare; FORMULAS.md §5).
    if (statedPerNode == 4 && gpu.nvlinkDomainGpus == 0 && cluster.intraNode.meshLinks == 0 &&
        contains(lower(cluster.intraNode.name), "via nvswitch") && !contains(intra, "nvswitch") &&
        (contains(cluster.intraNode.name, "NVLink 3") || contains(cluster.intraNode.name, "NVLink 4"))) {
        cluster.intraNode.meshLinks = 3;
        cluster.intraNode.name = "NVLink, 4 GPUs a node on an HGX 4-GPU board: direct links, a third of each GPU's to each peer";
        r.assume("4 SXM GPUs a node: an HGX 4-GPU board, no NVSwitch; each GPU's NVLinks a third to each of its 3 peers");
    }
    cluster.gpusPerNode = static_cast<int>(perNode);
    cluster.nodes = static_cast<int>(nodes);
    std::string how;
    // The record's link, else the network of the cloud instance it names.
    std::string linkText = text(sys, "inter_node_link");
    if (linkText.empty() && !gpu.instanceLink.empty() && nodes > 1) {
        linkText = gpu.instanceLink;
        r.assume("inter-node link not stated: the instance's, " + linkText);
    }
    // A rate "per node" is shared by the GPUs of the record's node: on a rack-scale NVLink domain that is the
    // compute tray the record counts (a GB200's 4), not the domain tessel calls a node.
    const double inter = interNodeBytesPerSecond(linkText, statedPerNode > 0 ? static_cast<int>(statedPerNode) : cluster.gpusPerNode, how);
    if (inter > 0.0) {
        // The record's link, not the preset's name for its own (Jean Zay's 4 Omni-Path ports per node are not a
        // DGX's eight InfiniBand HCAs): its bandwidth is the record's; latency and protocol stay the preset's.
        if (std::abs(inter - cluster.interNode.bandwidthBytesPerSecond) > 1e-6 * inter) {
            char rate[64];
            std::snprintf(rate, sizeof rate, "%.2f GB/s per GPU", inter / 1e9);
            cluster.interNode.name = linkText + " (" + rate + (linkText == text(sys, "inter_node_link") ? ", as the record states)" : ", the instance's)");
        }
        cluster.interNode.bandwidthBytesPerSecond = inter;
        if (contains(how, "one NIC per GPU")) r.assume("inter-node link read as " + how);
    } else if (nodes > 1) {
        const std::string written = text(sys, "inter_node_link");
        r.assume((written.empty() ? std::string("inter-node link not stated: ")
                                  : "inter-node link \"" + written + "\" names no rate tessel reads: ") +
                 cluster.interNode.name + " (" + gpu.preset + ")");
    }
    c.scenario.cluster = cluster;
    c.scenario.name = c.id;
    r.world = world;
    return true;
}

// Whether a feature's degree is written as unused: "n/a", "-", "none", "off" or 0, as NVIDIA's performance tables
// print a virtual pipeline size they do not use. Read as 1 and said; any other value is the degree's to check.
bool unusedDegree(Reading& r, const char* key) {
    const nlohmann::json* v = member(r.pl, key);
    if (!v) return false;
    std::string s = v->is_string() ? lower(v->get<std::string>()) : "";
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
    const bool zero = v->is_number() && v->get<double>() == 0.0;
    const bool word = v->is_string() && (s.empty() || s == "n/a" || s == "na" || s == "-" || s == "none" || s == "off" ||
                                         s == "no" || s == "disabled" || s == "null");
    if (!zero && !word) return false;
    r.assume(std::string(key) + " " + (v->is_string() ? "\"" + v->get<std::string>() + "\"" : v->dump()) +
             " read as 1 (not used)");
    return true;
}

// How a context-parallel record's ranks exchange what attention needs when no cp_comm_type says it: PyTorch's
// rotate method under torchtitan's key, else the record's own words (a sentence of its notes or techniques that
// names context parallelism, or K and V, beside the exchange: Meta's Llama 3 report gathers K and V whole), else the
// framework's default, the ring. Said either way: the exchange moves a long-sequence run's step by several points.
static void readContextParallelExchange(Reading& r, Plan& plan) {
    const nlohmann::json& pl = r.pl;
    const std::string rotate = lower(text(pl, "context_parallel_rotate_method"));
    if (!rotate.empty()) {
        // torch's _templated_ring_attention runs the ring's steps either way; "allgather" (its default) gathers K and
        // V once behind the first step, "alltoall" passes them step by step. Both are costed as the ring's steps.
        plan.cpComm = CpComm::P2p;
        r.assume("context_parallel_rotate_method \"" + rotate + "\": PyTorch's ring attention, its steps and merges "
                 "costed as the ring (p2p) whichever way K and V travel");
        return;
    }
    const std::string words = lower(text(pl, "techniques") + ". " + text(r.rec, "notes") + ". " +
                                    text(pl, "context_parallel") + ". " + text(pl, "cp_type"));
    static const std::regex cpRe(R"(context[- ]parallel|\bcp\b|ring attention|\bk and v\b|\bkv\b|key[- ]value|keys and values)");
    static const std::regex gatherRe(R"(all[- ]?gather)");
    static const std::regex a2aRe(R"(all[- ]?to[- ]?all|\ba2a\b|ulysses)");
    static const std::regex ringRe(R"(\bring\b|\bp2p\b|point[- ]to[- ]point|send[- ]?recv)");
    int gather = 0, a2a = 0, ring = 0;
    for (const std::string& sentence : sentencesAbout(words, cpRe)) {
        const bool g = std::regex_search(sentence, gatherRe), a = std::regex_search(sentence, a2aRe);
        gather += g;
        a2a += a;
        ring += !g && !a && std::regex_search(sentence, ringRe);
    }
    // An all-to-all the shape cannot run (each rank's query and key/value heads split over cp, Transformer Engine's
    // check in Plan::validate) is not the record's plan: the ring, said, rather than a refusal of a field it lacks.
    const ModelConfig& model = r.c.scenario.model;
    const int tp = std::max(1, plan.tp);
    if (a2a > 0 && gather == 0 && ring == 0 && ((model.heads / tp) % plan.cp != 0 || (model.kvHeads / tp) % plan.cp != 0)) {
        plan.cpComm = CpComm::P2p;
        r.assume("context-parallel exchange read from the record's words as an all-to-all over attention heads, which "
                 "this shape cannot split over cp = " + std::to_string(plan.cp) + " (" + std::to_string(model.heads / tp) +
                 " query and " + std::to_string(model.kvHeads / tp) + " key/value heads a rank): costed as the ring (p2p)");
        return;
    }
    if ((gather > 0) + (a2a > 0) + (ring > 0) == 1) {
        plan.cpComm = gather ? CpComm::AllGather : a2a ? CpComm::A2a : CpComm::P2p;
        r.assume(std::string("context-parallel exchange read from the record's words: ") +
                 (gather ? "K and V all-gathered whole (cp_comm_type allgather)"
                         : a2a ? "all-to-all over attention heads (cp_comm_type a2a)" : "the ring (cp_comm_type p2p)"));
        return;
    }
    plan.cpComm = CpComm::P2p;
    if (gather + a2a + ring > 0)
        r.assume("context-parallel exchange: the record's words name more than one; costed as the ring (cp_comm_type p2p)");
    else if (r.framework == "torchtitan")
        r.assume("context-parallel exchange not stated: PyTorch's ring attention (torchtitan), costed as the ring (p2p)");
    else if (r.framework == "megatron" || r.framework == "nemo" || r.framework == "megascale")
        r.assume("context-parallel exchange not stated: Megatron-core's default, the ring (cp_comm_type p2p)");
    else
        r.assume("context-parallel exchange not stated: the ring (cp_comm_type p2p)");
}

// The order of the parallel dimensions over the ranks, fastest first: tessel's rank_order, a record's
// parallelism_order as its source writes it (the Llama 3 paper's "[TP, CP, PP, DP]", Megatron-core's "tp-cp-ep-dp-pp"),
// with a missing ep placed after cp (where both of Megatron-core's orders have it), or Megatron-LM's
// --use-tp-pp-dp-mapping (tp-cp-ep-pp-dp). Unstated: tessel's (Megatron-core's) default. One that does not read is
// refused naming its field, never dropped.
static bool readRankOrder(Reading& r, Plan& plan, const std::string& where) {
    const nlohmann::json& pl = r.pl;
    if (boolean(pl, "use_tp_pp_dp_mapping").value_or(false) && !member(pl, "rank_order") && !member(pl, "parallelism_order")) {
        plan.rankOrder = {ParallelDim::Tp, ParallelDim::Cp, ParallelDim::Ep, ParallelDim::Pp, ParallelDim::Dp};
        r.assume("use_tp_pp_dp_mapping: ranks ordered tp-cp-ep-pp-dp (Megatron-LM's mapping)");
        return true;
    }
    for (const char* key : {"rank_order", "parallelism_order"}) {
        const nlohmann::json* v = member(pl, key);
        if (!v) continue;
        std::string written;
        if (v->is_array()) {
            for (const auto& e : *v) written += (e.is_string() ? e.get<std::string>() : e.dump()) + " ";
        } else {
            written = text(pl, key);
        }
        static const std::vector<std::pair<std::string, ParallelDim>> names{
            {"tp", ParallelDim::Tp}, {"tensor", ParallelDim::Tp}, {"cp", ParallelDim::Cp}, {"context", ParallelDim::Cp},
            {"ep", ParallelDim::Ep}, {"expert", ParallelDim::Ep}, {"dp", ParallelDim::Dp}, {"data", ParallelDim::Dp},
            {"fsdp", ParallelDim::Dp}, {"pp", ParallelDim::Pp}, {"pipeline", ParallelDim::Pp}};
        std::vector<ParallelDim> dims;
        bool ok = true;
        const std::string l = lower(written);
        static const std::regex word_re("[a-z]+");
        for (std::sregex_iterator it(l.begin(), l.end(), word_re), end; it != end && ok; ++it) {
            const std::string word = it->str();
            if (word == "parallel" || word == "parallelism") continue;
            const auto n = std::find_if(names.begin(), names.end(), [&](const auto& e) { return e.first == word; });
            ok = n != names.end() && std::find(dims.begin(), dims.end(), n->second) == dims.end();
            if (ok) dims.push_back(n->second);
        }
        const bool hasEp = std::find(dims.begin(), dims.end(), ParallelDim::Ep) != dims.end();
        if (ok && dims.size() == 4 && !hasEp) {
            const auto cp = std::find(dims.begin(), dims.end(), ParallelDim::Cp);
            dims.insert(cp == dims.end() ? cp : cp + 1, ParallelDim::Ep);
            if (plan.ep > 1) r.assume(std::string(key) + " names no ep: placed after cp, where Megatron-core's orders have it");
        }
        if (!ok || dims.size() != 5) {
            if (r.refusal.empty())
                r.refusal = where + "/" + key + ": \"" + written + "\" is not an order of the parallel dimensions (tp, cp, ep, dp "
                            "and pp once each, fastest first; ep may be left out)";
            return false;
        }
        std::copy(dims.begin(), dims.end(), plan.rankOrder.begin());
        return true;
    }
    return true;
}

// A step runs whole micro-batches on every data-parallel rank, so a batch that is not a multiple of `unit` (micro_batch
// x dp) is a rounded figure ("2M tokens" for OPT-175B's 992 ranks): read as the nearest multiple where that moves it
// by at most 5%, said. Further off the plan and the batch disagree: refused with the nearest ones named, or, where
// `refuse` is false (a trial reading), left as it was.
bool roundedToWholeMicroBatches(Reading& r, const std::string& ptr, int64_t unit, const char* what, bool refuse = true) {
    Plan& plan = r.c.scenario.plan;
    if (unit <= 0 || plan.globalBatch % unit == 0) return true;
    const int64_t below = plan.globalBatch / unit * unit, above = below + unit;
    const int64_t nearest = below > 0 && plan.globalBatch - below <= above - plan.globalBatch ? below : above;
    const double moved = std::abs(static_cast<double>(nearest - plan.globalBatch)) / plan.globalBatch;
    if (moved > 0.05 || nearest > PlanLimits::globalBatch) {
        if (refuse)
            r.refusal = ptr + "/plan/global_batch: " + std::to_string(plan.globalBatch) + " is not a multiple of " + what +
                        " = " + std::to_string(unit) + " (the nearest, " +
                        (below > 0 ? std::to_string(below) + " or " : std::string()) + std::to_string(above) +
                        ", are more than 5% from it)";
        return false;
    }
    r.assume("global_batch " + std::to_string(plan.globalBatch) + " read as " + std::to_string(nearest) +
             ", the nearest multiple of " + what + " = " + std::to_string(unit) +
             " (a step runs whole micro-batches on every rank; the published figure is rounded)");
    plan.globalBatch = static_cast<int>(nearest);
    return true;
}

// Parallel degrees, the global batch and the micro-batch: stated, implied by the GPU count, or the framework's
// default.
bool readBatch(Reading& r) {
    const nlohmann::json& pl = r.pl;
    const std::string& ptr = r.ptr;
    ValidationCase& c = r.c;
    std::string& refusal = r.refusal;
    const std::string& framework = r.framework;
    int64_t world = r.world;
    // Plan.
    Plan& plan = c.scenario.plan;
    using L = PlanLimits;
    const std::string where = ptr + "/plan";
    plan.tp = static_cast<int>(count(pl, "tp", 1, L::degree, where, refusal).value_or(1));
    plan.pp = static_cast<int>(count(pl, "pp", 1, L::degree, where, refusal).value_or(1));
    plan.cp = unusedDegree(r, "cp") ? 1 : static_cast<int>(count(pl, "cp", 1, L::degree, where, refusal).value_or(1));
    plan.ep = unusedDegree(r, "ep") ? 1 : static_cast<int>(count(pl, "ep", 1, L::degree, where, refusal).value_or(1));
    // DeepSpeed-Ulysses splits the sequence over its group as context parallelism does and exchanges attention heads
    // by all-to-all: cp_comm_type a2a. A record that names it with its own degree key is read as cp of that degree;
    // without it the group would be counted as dp.
    const std::string spWords = lower(text(pl, "sequence_parallel") + " " + text(pl, "sequence_parallel_type") + " " +
                                      text(pl, "techniques"));
    // Megatron-DeepSpeed's --ds-sequence-parallel-size is Ulysses' degree by its name; DeepSpeed's own
    // sequence_parallel_size too (a DeepSpeed record's). Elsewhere a sequence_parallel_size that names no exchange is
    // said, not read (it had been counted as data parallelism in silence).
    const bool ulysses = contains(spWords, "ulysses") || member(pl, "ds_sequence_parallel_size") ||
                         (r.framework == "deepspeed" && integer(pl, "sequence_parallel_size").value_or(1) > 1);
    if (!member(pl, "cp") && !ulysses && integer(pl, "sequence_parallel_size").value_or(1) > 1)
        r.assume("sequence_parallel_size " + text(pl, "sequence_parallel_size") +
                 " names a sequence split without its exchange (Ulysses, ring): not read; state cp and cp_comm_type");
    if (!member(pl, "cp") && ulysses)
        for (const char* key : {"ds_sequence_parallel_size", "sequence_parallel_size", "ulysses_degree", "sp_degree", "sp"})
            if (member(pl, key)) {
                plan.cp = static_cast<int>(count(pl, key, 1, L::degree, where, refusal).value_or(1));
                r.assume(std::string("DeepSpeed-Ulysses over ") + key + " = " + std::to_string(plan.cp) +
                         " ranks read as context parallelism of that degree");
                break;
            }
    // How the CP ranks exchange what attention needs (Megatron-core's --cp-comm-type); Ulysses is the all-to-all.
    for (const char* key : {"cp_comm_type", "cp_comm"}) {
        if (!member(pl, key)) continue;
        const std::string v = lower(text(pl, key));
        if (v == "p2p" || v == "ring") plan.cpComm = CpComm::P2p;
        else if (v == "a2a" || v == "all-to-all" || v == "alltoall" || v == "ulysses") plan.cpComm = CpComm::A2a;
        else if (v == "allgather" || v == "all_gather" || v == "all-gather") plan.cpComm = CpComm::AllGather;
        else if (v == "a2a+p2p") {
            // Its levels: Megatron-core's hierarchical_context_parallel_sizes [a2a, p2p], or cp_a2a_size.
            int a2a = 0;
            if (pl.contains("hierarchical_context_parallel_sizes") && pl["hierarchical_context_parallel_sizes"].is_array() &&
                !pl["hierarchical_context_parallel_sizes"].empty() && pl["hierarchical_context_parallel_sizes"][0].is_number_integer())
                a2a = pl["hierarchical_context_parallel_sizes"][0].get<int>();
            else if (member(pl, "cp_a2a_size"))
                a2a = static_cast<int>(count(pl, "cp_a2a_size", 1, L::degree, where, refusal).value_or(0));
            if (a2a > 0) {
                plan.cpComm = CpComm::A2aP2p;
                plan.cpA2a = a2a;
            } else {
                r.assume(std::string(key) + " = a2a+p2p without its levels (hierarchical_context_parallel_sizes): costed as "
                                            "the ring (p2p)");
            }
        } else if (refusal.empty())
            refusal = where + "/" + key + ": \"" + text(pl, key) + "\" is not a context-parallel exchange tessel costs (p2p, "
                      "a2a, allgather, a2a+p2p)";
        break;
    }
    if (ulysses && plan.cp > 1 && !member(pl, "cp_comm_type") && !member(pl, "cp_comm")) {
        plan.cpComm = CpComm::A2a;
        r.assume("DeepSpeed-Ulysses over cp = " + std::to_string(plan.cp) + " ranks: its all-to-all over attention heads "
                 "(cp_comm_type a2a)");
    } else if (plan.cp > 1 && !member(pl, "cp_comm_type") && !member(pl, "cp_comm")) {
        readContextParallelExchange(r, plan);
    }
    if (!readRankOrder(r, plan, where)) return false;
    // Expert tensor parallelism (Megatron-core's expert_tensor_parallel_size; absent: tp). One that differs from tp
    // is MoE parallel folding.
    for (const char* key : {"etp", "expert_tensor_parallel_size"})
        if (pl.contains(key)) {
            const int etp = static_cast<int>(count(pl, key, 1, L::degree, where, refusal).value_or(0));
            if (etp != plan.tp) plan.etp = etp;
            break;
        }
    plan.vpp = unusedDegree(r, "vpp") ? 1 : static_cast<int>(count(pl, "vpp", 1, L::virtualStages, where, refusal).value_or(1));
    if (!refusal.empty()) return false;
    // One of tp and pp unstated beside a stated dp: the GPUs the others leave, where they divide and leave more
    // than one (a record of 512 GPUs at tp 8 and dp 16 runs pp 4, not tp 8 x dp 64 over a stated dp 16); said.
    const bool tpStated = member(pl, "tp") != nullptr, ppStated = member(pl, "pp") != nullptr;
    if (const auto statedDp = integer(pl, "dp"); statedDp && *statedDp > 0 && tpStated != ppStated) {
        const int64_t others = static_cast<int64_t>(tpStated ? plan.tp : plan.pp) * plan.cp * *statedDp;
        if (world % others == 0 && world / others > 1 && world / others <= L::degree) {
            (tpStated ? plan.pp : plan.tp) = static_cast<int>(world / others);
            r.assume(std::string(tpStated ? "pp" : "tp") + " not stated: GPUs / (" + (tpStated ? "tp" : "pp") + " x cp x dp) = " +
                     std::to_string(world / others));
        }
    }
    const int64_t modelRanks = static_cast<int64_t>(plan.tp) * plan.pp * plan.cp;
    // Every degree stated and their product a few GPUs off the count: the count is the rounded figure ("1000 GPUs"
    // for 1024), since the plan's ranks are the GPUs the job ran on; where it fills whole nodes and is within 5%,
    // the plan's, said.
    if (const auto statedDp = integer(pl, "dp"); statedDp && *statedDp > 0 && tpStated && ppStated) {
        const int64_t ranks = modelRanks * *statedDp;
        ClusterConfig& cluster = c.scenario.cluster;
        if (ranks != world && ranks <= L::degree && ranks % cluster.gpusPerNode == 0 &&
            std::abs(static_cast<double>(ranks - world)) <= 0.05 * static_cast<double>(world)) {
            r.assume(std::to_string(world) + " GPUs read as the plan's tp x pp x cp x dp = " + std::to_string(ranks) +
                     " (the published count rounded)");
            world = r.world = ranks;
            cluster.nodes = static_cast<int>(ranks / cluster.gpusPerNode);
        }
    }
    if (world % modelRanks != 0) {
        refusal = ptr + "/plan: tp x pp x cp = " + std::to_string(modelRanks) + " does not divide the " +
                  std::to_string(world) + " GPUs";
        return false;
    }
    const int impliedDp = static_cast<int>(world / modelRanks);
    auto dp = integer(pl, "dp");
    if (!dp || *dp != impliedDp) {
        if (dp) r.assume("dp " + std::to_string(*dp) + " does not fill the " + std::to_string(world) + " GPUs with tp x pp x cp; dp = " + std::to_string(impliedDp));
        else if (member(pl, "dp") && !member(pl, "dp")->is_null())
            r.assume("dp " + text(pl, "dp") + " is not a whole number of GPUs: dp = GPUs / (tp x pp x cp) = " +
                     std::to_string(impliedDp));
        else r.assume("dp = GPUs / (tp x pp x cp) = " + std::to_string(impliedDp));
    }
    plan.dp = impliedDp;
    // A global batch written in tokens ("4M tokens", "2,097,152 tokens"): that many sequences of the model's length.
    std::optional<int64_t> gb;
    // A batch written in tokens, with its unit or a bare "4M" / "1B" (a batch of millions of sequences is none a run
    // has); under a tokens key any number, suffixed or not. "4M" is 4e6 or 2^22: the one that is a whole number of
    // sequences (Llama's "4M tokens" is 2048 x 2048).
    const auto tokensWritten = [&](const char* key, bool tokensKey) -> std::optional<double> {
        const nlohmann::json* v = member(pl, key);
        if (!v || v->is_null()) return std::nullopt;
        if (tokensKey && v->is_number()) return v->get<double>();
        std::string written = lower(text(pl, key));
        written.erase(std::remove(written.begin(), written.end(), ','), written.end());
        std::smatch m;
        if (!std::regex_search(written, m, std::regex(R"(^\s*([0-9]+(\.[0-9]+)?)\s*([kmb])?\s*tok(en)?s?\b)")) &&
            !std::regex_search(written, m, std::regex(tokensKey ? R"(^\s*([0-9]+(\.[0-9]+)?)\s*([kmb])?\s*$)"
                                                                : R"(^\s*([0-9]+(\.[0-9]+)?)\s*([mb])\s*$)")))
            return std::nullopt;
        const double value = std::stod(m[1]), seq = static_cast<double>(c.scenario.model.seqLen);
        const double decimal = m[3] == "k" ? 1e3 : m[3] == "m" ? 1e6 : m[3] == "b" ? 1e9 : 1.0;
        const double binary = m[3] == "k" ? 1024.0 : m[3] == "m" ? 1048576.0 : m[3] == "b" ? 1073741824.0 : 1.0;
        auto whole = [&](double t) { return std::fabs(t / seq - std::round(t / seq)) < 1e-9; };
        return !whole(value * decimal) && whole(value * binary) ? value * binary : value * decimal;
    };
    const char* tokensKey = "global_batch";
    std::optional<double> batchTokens = tokensWritten("global_batch", false);
    if (const nlohmann::json* stated = member(pl, "global_batch"); !batchTokens && (!stated || stated->is_null()))
        for (const char* key : {"global_batch_tokens", "tokens_per_batch", "global_batch_size_tokens", "batch_tokens"})
            if ((batchTokens = tokensWritten(key, true))) {
                tokensKey = key;
                break;
            }
    if (batchTokens) {
        const double seq = static_cast<double>(c.scenario.model.seqLen);
        const double sequences = std::round(*batchTokens / seq);
        const std::string written = text(pl, tokensKey);
        if (sequences < 1 || sequences > static_cast<double>(L::globalBatch)) {
            refusal = where + "/" + tokensKey + ": \"" + written + "\" is not a batch of " +
                      std::to_string(c.scenario.model.seqLen) + "-token sequences tessel takes";
            return false;
        }
        gb = static_cast<int64_t>(sequences);
        r.assume(std::string(tokensKey) + " \"" + written + "\" read in tokens: " + std::to_string(*gb) + " sequences of " +
                 std::to_string(c.scenario.model.seqLen) +
                 (std::fabs(sequences * seq - *batchTokens) > 0.5 ? " (the nearest whole number)" : ""));
    } else {
        gb = count(pl, "global_batch", 1, L::globalBatch, where, refusal);
    }
    if (!refusal.empty()) return false;
    if (!gb) {
        // No batch at all: micro_batch x grad_accum x dp where both are stated; without a pipeline, one micro-batch a
        // step (the data-parallel frameworks' default: no accumulation unless told), said. A pipeline's bubble
        // depends on its micro-batch count, which nothing else gives: refused.
        const auto mbOnly = integer(pl, "micro_batch"), gaOnly = integer(pl, "grad_accum");
        if (mbOnly && *mbOnly > 0 && gaOnly && *gaOnly > 0) {
            gb = *mbOnly * *gaOnly * plan.dp;
            r.assume("global_batch not stated: micro_batch x grad_accum x dp = " + std::to_string(*gb));
        } else if (mbOnly && *mbOnly > 0 && plan.pp == 1) {
            gb = *mbOnly * plan.dp;
            r.assume("global_batch not stated: micro_batch x dp = " + std::to_string(*gb) +
                     " (one micro-batch a step, no gradient accumulation)");
        }
        if (gb && *gb > L::globalBatch) {
            refusal = where + "/global_batch: not stated, and micro_batch x grad_accum x dp = " + std::to_string(*gb) +
                      " sequences are more than " + std::to_string(L::globalBatch);
            return false;
        }
    }
    if (!gb || *gb <= 0) {
        refusal = ptr + "/plan/global_batch: missing (nor a batch in tokens: global_batch_tokens" +
                  std::string(plan.pp > 1 ? "; a pipeline's micro-batches a step decide its bubble" : ", nor a micro_batch") + ")";
        return false;
    }
    plan.globalBatch = static_cast<int>(*gb);
    bool microBatchAssumed = false; // one micro-batch a step, read from the framework's default
    const auto mb = count(pl, "micro_batch", 1, L::microBatch, where, refusal);
    const auto ga = count(pl, "grad_accum", 1, L::globalBatch, where, refusal);
    if (!refusal.empty()) return false;
    if (mb) {
        plan.microBatch = static_cast<int>(*mb);
    } else if (ga && plan.globalBatch % (*ga * plan.dp) == 0) {
        plan.microBatch = static_cast<int>(plan.globalBatch / (*ga * plan.dp));
        r.assume("micro_batch = global_batch / (grad_accum x dp) = " + std::to_string(plan.microBatch));
    } else if (const bool shardedEngine = framework.empty() && parseZero(pl) == 3;
               plan.pp == 1 && (framework == "fsdp" || framework == "torchtitan" || framework == "deepspeed" || shardedEngine) &&
               (plan.globalBatch % plan.dp == 0 || roundedToWholeMicroBatches(r, ptr, plan.dp, "dp", false))) {
        // Without a pipeline these frameworks take one micro-batch a step unless told to accumulate (DeepSpeed's
        // gradient_accumulation_steps, Composer's device_train_microbatch_size, torchtitan's and plain training
        // loops' accumulation all default to none); 1 would multiply ZeRO-3's per-micro-batch gathers. So does a
        // ZeRO-3 run under a framework tessel has no defaults for (SageMaker's sharded data parallelism,
        // Colossal-AI's Gemini): a sharded engine's batch per GPU, accumulated only where its config says so.
        plan.microBatch = plan.globalBatch / plan.dp;
        microBatchAssumed = true;
        r.assume("micro_batch not stated: global_batch / dp = " + std::to_string(plan.microBatch) + ", no gradient accumulation (" +
                 (shardedEngine ? std::string("a ZeRO-3 engine's default") : framework + "'s default") + ")");
    } else {
        plan.microBatch = 1;
        r.assume("micro_batch not stated: 1 (the Megatron-LM default)");
    }
    if (!roundedToWholeMicroBatches(r, ptr, static_cast<int64_t>(plan.microBatch) * plan.dp, "micro_batch x dp")) return false;
    r.microBatchAssumed = microBatchAssumed;
    return true;
}

} // namespace

void readSystemAndPlan(const nlohmann::json& rec, const std::string& ptr, ValidationCase& c, std::string& refusal) {
    nlohmann::json pl = rec.value("plan", nlohmann::json::object());
    // The schema's degree and batch keys, else the names Megatron-LM, NeMo, torchtitan and DeepSpeed configs give them.
    if (pl.is_object()) {
        static const std::vector<std::pair<const char*, std::vector<const char*>>> aliases = {
            {"tp", {"tensor_model_parallel_size", "tensor_parallel_size", "tensor_parallel_degree", "tp_size", "tensor_parallel"}},
            {"pp", {"pipeline_model_parallel_size", "pipeline_parallel_size", "pipeline_parallel_degree", "pp_size",
                    "pipeline_parallel"}},
            {"cp", {"context_parallel_size", "context_parallel_degree", "cp_size", "context_parallel"}},
            {"ep", {"expert_model_parallel_size", "expert_parallel_size", "expert_parallel_degree", "ep_size", "expert_parallel"}},
            {"dp", {"data_parallel_size", "data_parallel_degree", "dp_size"}},
            {"vpp", {"virtual_pipeline_model_parallel_size", "virtual_pipeline_parallel_size",
                     "num_virtual_stages_per_pipeline_rank"}},
            // Hugging Face Trainer's per_device_train_batch_size, Composer's device_train_microbatch_size.
            {"micro_batch", {"micro_batch_size", "micro_batch_size_per_gpu", "train_micro_batch_size_per_gpu", "mbs",
                             "local_batch_size", "per_device_train_batch_size", "device_train_microbatch_size"}},
            {"global_batch", {"global_batch_size", "train_batch_size", "gbs"}},
            // Nanotron's batch_accumulation_per_replica, Lightning's accumulate_grad_batches.
            {"grad_accum", {"gradient_accumulation_steps", "grad_accum_steps", "gradient_accumulation",
                            "batch_accumulation_per_replica", "accumulate_grad_batches"}}};
        for (const auto& [key, names] : aliases)
            if (!member(pl, key))
                for (const char* name : names)
                    if (const nlohmann::json* v = member(pl, name); v && !v->is_boolean()) { // "context_parallel": true names no degree
                        // A config's "derive it" (torchtitan's -1, Hugging Face's DeepSpeed "auto") states nothing.
                        if ((v->is_number() && v->get<double>() < 0) || lower(text(pl, name)) == "auto") {
                            c.assumptions.push_back(std::string(name) + " " + text(pl, name) + " (the framework derives it): not stated");
                            break;
                        }
                        pl[key] = *v;
                        break;
                    }
        // Megatron-LM's --num-layers-per-virtual-pipeline-stage n gives vpp = layers / (pp x n).
        if (const auto n = integer(pl, "num_layers_per_virtual_pipeline_stage"); n && *n >= 1 && !member(pl, "vpp")) {
            const auto pp = integer(pl, "pp");
            const int64_t layers = c.scenario.model.layers;
            if (pp && *pp >= 1 && layers > 0 && layers % (*pp * *n) == 0) {
                pl["vpp"] = layers / (*pp * *n);
                c.assumptions.push_back("vpp = " + std::to_string(layers / (*pp * *n)) + ": " + std::to_string(layers) +
                                        " layers / (pp " + std::to_string(*pp) + " x num_layers_per_virtual_pipeline_stage " +
                                        std::to_string(*n) + ")");
            } else {
                c.assumptions.push_back("num_layers_per_virtual_pipeline_stage " + text(pl, "num_layers_per_virtual_pipeline_stage") +
                                        " does not split " + std::to_string(layers) + " layers over pp " + text(pl, "pp") +
                                        ": not read");
            }
        }
    }
    const std::string source = text(rec, "source") + " " + text(rec, "source_url");
    Reading r{rec, ptr, c, refusal, rec.value("system", nlohmann::json::object()), pl, source, frameworkOf(pl, source)};
    // In this order: each step reads what the ones before it settled; the first refusal ends the reading.
    for (bool (*step)(Reading&) : {readCluster, readBatch, readPipeline, readFramework, readPrecisionAndSharding,
                                   readAttention, readRecomputeAndCheck})
        if (!step(r)) return;
}

} // namespace tessel::sim::detail
