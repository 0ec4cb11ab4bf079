// Reads a published record's pipeline into its plan (a step of validation_plan.cpp's reading): virtual stages
// stated or inferred, the schedule named in any of the keys and words records use, and the split of the layers
// over the stages (stated per stage, Megatron-LM's first/last-stage counts, or balanced). What the record does not
// state is an assumption; a split tessel cannot run is a refusal that names the field.
#include "validation_reading.hpp"

#include "validation_prose.hpp"

#include "tessel/cost/json_reader.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace tessel::sim::detail {

namespace {
using namespace prose;

// Megatron-core's pipeline layout (--pipeline-model-parallel-layout, 2025): virtual stages separated by '|', each a
// run of E (embedding), t (a transformer layer), m (an MTP layer) and L (the loss), "x*N" repeating a letter and
// "(...)*N" a group, '|' included ("Et*3|(tt|)*29,m|L": a ',' is a space). Read as the transformer layers of each
// virtual stage, in order, where there are pp x vpp of them and each holds one or more; otherwise refused naming the
// field (tessel's plans give every stage a layer).
bool readPipelineLayout(Reading& r, Plan& plan) {
    const std::string written = text(r.pl, "pipeline_model_parallel_layout");
    const std::string where = r.ptr + "/plan/pipeline_model_parallel_layout: \"" + written + "\" ";
    std::string expanded;
    size_t i = 0;
    bool ok = true;
    std::function<std::string(int)> group = [&](int depth) -> std::string {
        std::string out;
        while (ok && i < written.size()) {
            const char ch = written[i];
            if (ch == ')') return out;
            std::string unit;
            if (ch == '(') {
                ++i;
                if (depth > 8) { ok = false; return out; }
                unit = group(depth + 1);
                if (i >= written.size() || written[i] != ')') { ok = false; return out; }
                ++i;
            } else if (ch == 'E' || ch == 't' || ch == 'm' || ch == 'L' || ch == '|') {
                unit = std::string(1, ch);
                ++i;
            } else if (ch == ',' || ch == ' ') {
                ++i;
                continue;
            } else {
                ok = false;
                return out;
            }
            size_t times = 1;
            if (i < written.size() && written[i] == '*') {
                ++i;
                size_t digits = 0;
                times = 0;
                while (i < written.size() && std::isdigit(static_cast<unsigned char>(written[i])) && digits < 6)
                    times = times * 10 + static_cast<size_t>(written[i++] - '0'), ++digits;
                if (digits == 0) { ok = false; return out; }
            }
            if (out.size() + unit.size() * times > 1000000) { ok = false; return out; }
            for (size_t k = 0; k < times; ++k) out += unit;
        }
        return out;
    };
    expanded = group(0);
    if (!ok || i != written.size()) {
        r.refusal = where + "is not a layout of E, t, m, L and '|' with *N repeats (Megatron-core's syntax)";
        return false;
    }
    std::vector<int> layers{0};
    for (char ch : expanded) {
        if (ch == '|') layers.push_back(0);
        else if (ch == 't') ++layers.back();
    }
    const size_t stages = static_cast<size_t>(plan.pp) * static_cast<size_t>(std::max(plan.vpp, 1));
    int total = 0;
    for (int n : layers) total += n;
    if (layers.size() != stages && layers.size() % static_cast<size_t>(plan.pp) == 0 && plan.vpp <= 1 && !member(r.pl, "vpp")) {
        // Its virtual stages say the vpp where the record does not.
        plan.vpp = static_cast<int>(layers.size() / static_cast<size_t>(plan.pp));
        if (plan.schedule == Schedule::OneFOneB || plan.schedule == Schedule::Interleaved1F1B)
            plan.schedule = plan.vpp > 1 ? Schedule::Interleaved1F1B : Schedule::OneFOneB;
        r.assume("vpp = " + std::to_string(plan.vpp) + ", the layout's " + std::to_string(layers.size()) + " virtual stages over pp " +
                 std::to_string(plan.pp));
    }
    if (layers.size() != static_cast<size_t>(plan.pp) * static_cast<size_t>(std::max(plan.vpp, 1))) {
        r.refusal = where + "has " + std::to_string(layers.size()) + " stages, not pp x vpp = " +
                    std::to_string(plan.pp * std::max(plan.vpp, 1));
        return false;
    }
    if (total != r.c.scenario.model.layers) {
        r.refusal = where + "places " + std::to_string(total) + " transformer layers, but the model has " +
                    std::to_string(r.c.scenario.model.layers);
        return false;
    }
    // An embedding- or loss-only stage ("E|" at the front, "|L" at the back) holds no transformer layer; a stage in
    // between must hold one.
    for (size_t u = 1; u + 1 < layers.size(); ++u)
        if (layers[u] == 0) {
            r.refusal = where + "leaves virtual stage " + std::to_string(u) + " without transformer layers; only the first "
                        "(the embedding's) and the last (the loss's) may hold none";
            return false;
        }
    plan.pipelineLayers = layers;
    std::string counts;
    for (int n : layers) counts += (counts.empty() ? "" : ",") + std::to_string(n);
    r.assume("pipeline layout \"" + written + "\": " + counts + " transformer layers a virtual stage");
    return true;
}

// A pipeline schedule the record names besides 1F1B and its interleaved form: GPipe (all forwards, then all
// backwards: "fill-drain", torchtitan's GPipe) and zero bubble (ZB-H1, torchtitan's ZBVZeroBubble and
// InterleavedZeroBubble) are schedules tessel simulates, without virtual stages; ZB-V (torchtitan's ZBVZeroBubble) as
// itself, and DualPipe and DualPipeV as DualPipeV (two chunks a rank in a V) where the plan allows it; any other (LoopedBFS) keeps the 1F1B
// reading, and the assumption says so. `text` is the named schedule with the record's techniques, `named` the
// schedule keys alone.
void readNamedSchedule(const std::string& text, const std::string& named, Plan& plan, Reading& r) {
    if (plan.pp < 2) return;
    if (contains(text, "dualpipe") || contains(text, "dual pipe") || contains(text, "dual-pipe")) {
        // DeepSeek-V3's DualPipe (report §3.2.1) and its half, DualPipeV, have the same bubble and activations
        // (the DualPipe README's table); DualPipe also keeps a second copy of each rank's stage, for the reverse
        // direction, which DualPipeV does not, and needs an even pp.
        const bool v = contains(text, "dualpipev") || contains(text, "dualpipe-v") || contains(text, "dualpipe v");
        const int layers = r.c.scenario.model.layers;
        const int m = plan.microBatchesPerStep();
        std::string why;
        if (plan.vpp > 2) why = "vpp " + std::to_string(plan.vpp) + " stated, where DualPipe runs two stages a rank";
        else if (plan.firstStageLayers > 0 || plan.lastStageLayers > 0) why = "first/last-stage layer counts stated";
        else if (m < 2 * plan.pp) why = std::to_string(m) + " micro-batches a step, fewer than its 2 x pp";
        else if (layers < 2 * plan.pp) why = "fewer layers than its 2 x pp virtual stages";
        if (!why.empty()) {
            r.assume(std::string(v ? "DualPipeV" : "DualPipe") + " named, but " + why + ": read as " +
                     (plan.vpp > 1 ? "interleaved 1F1B" : "1F1B"));
            return;
        }
        plan.vpp = 2;
        plan.schedule = Schedule::DualPipeV;
        r.assume(v ? std::string("pipeline schedule read as DualPipeV (two chunks a rank in a V, forward and backward chunks overlapped in pairs)")
                   : std::string("pipeline schedule DualPipe read as DualPipeV: the same bubble, activations and overlapped "
                                 "forward-backward pairs; DualPipe's second copy of each rank's stage (2x its parameters, "
                                 "and their gradient sync) is not counted"));
        return;
    }
    const bool gpipe = contains(text, "gpipe") || contains(text, "fill-drain") || contains(text, "fill drain") ||
                       contains(text, "all-forward-all-backward") || contains(text, "all forward all backward");
    const bool zeroBubbleV = contains(text, "zbv") || contains(text, "zb-v") || contains(text, "zero bubble v") ||
                             contains(text, "zero-bubble-v") || contains(text, "zero_bubble_v");
    const bool zeroBubble = !zeroBubbleV && (contains(text, "zero bubble") || contains(text, "zero-bubble") ||
                                             contains(text, "zerobubble") || contains(text, "zb-h1") || contains(text, "zbh1"));
    if (zeroBubbleV) {
        // ZB-V (PyTorch's ScheduleZBVZeroBubble): two stages a rank in a V; any micro-batch count.
        const int layers = r.c.scenario.model.layers;
        std::string why;
        if (plan.vpp > 2) why = "vpp " + std::to_string(plan.vpp) + " stated, where ZB-V runs two stages a rank";
        else if (plan.firstStageLayers > 0 || plan.lastStageLayers > 0) why = "first/last-stage layer counts stated";
        else if (layers < 2 * plan.pp) why = "fewer layers than its 2 x pp virtual stages";
        if (!why.empty()) {
            r.assume("ZB-V named, but " + why + ": read as " + (plan.vpp > 1 ? std::string("interleaved 1F1B") : std::string("1F1B")));
            return;
        }
        plan.vpp = 2;
        plan.schedule = Schedule::ZeroBubbleV;
        r.assume("pipeline schedule read as ZB-V (two chunks a rank in a V, every backward split into input and weight halves)");
        return;
    }
    const std::string shown = [&] {
        size_t a = named.find_first_not_of(' '), b = named.find_last_not_of(' ');
        return a == std::string::npos ? std::string() : named.substr(a, b - a + 1);
    }();
    if (gpipe || zeroBubble) {
        const char* which = gpipe ? "GPipe" : "zero bubble (ZB-H1)";
        if (plan.vpp > 1) {
            r.assume(std::string(which) + " schedule with " + std::to_string(plan.vpp) +
                   " virtual stages: tessel simulates it without them; read as interleaved 1F1B");
        } else {
            plan.schedule = gpipe ? Schedule::Gpipe : Schedule::ZeroBubble;
            r.assume(std::string("pipeline schedule read as ") + which);
        }
    } else if (!shown.empty() && !contains(shown, "1f1b") && !contains(shown, "interleav") &&
               !contains(shown, "one-forward") && !contains(shown, "one forward") && !contains(shown, "pipedream")) {
        r.assume("pipeline schedule \"" + shown + "\" is not one tessel simulates: read as " +
               (plan.vpp > 1 ? std::string("interleaved 1F1B") : std::string("1F1B")));
    }
}

// The first per-stage layer counts a plan states, under the names records give them (the key is null where none
// is), as a list or as text ("7,8x14,7": 7, fourteen 8s, 7); pipeline_split holds counts only where it is not a word
// ("balanced", "even"). `valid` is false where the value is no list of whole numbers from 1 to `layers` (0 allowed
// for the first and the last stage, the embedding or the loss alone).
struct StatedSplit {
    const char* key = nullptr;
    bool valid = false;
    std::vector<int> counts;
};
StatedSplit statedSplit(const nlohmann::json& pl, int layers) {
    const bool splitCounts = std::regex_search(text(pl, "pipeline_split"), std::regex(R"(^\s*\[?\s*[0-9])"));
    for (const char* key : {"pipeline_layers", "pp_layers", "layers_per_stage", "stage_layers", "num_layers_per_stage",
                            "pipeline_split"}) {
        const nlohmann::json* v = member(pl, key);
        if (!v || (std::string(key) == "pipeline_split" && !splitCounts)) continue;
        StatedSplit out;
        out.key = key;
        if (v->is_array()) {
            for (const auto& n : *v) {
                if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() > layers) return out;
                out.counts.push_back(n.get<int>());
            }
        } else if (v->is_string()) {
            std::stringstream items(v->get<std::string>());
            std::string item;
            while (std::getline(items, item, ',')) {
                std::smatch m;
                if (!std::regex_match(item, m, std::regex(R"(\s*([0-9]{1,6})\s*(?:[x*]\s*([0-9]{1,6}))?\s*)"))) return out;
                const int count = std::stoi(m[1].str()), times = m[2].matched ? std::stoi(m[2].str()) : 1;
                if (count < 0 || count > layers || times < 1 || times > layers) return out;
                out.counts.insert(out.counts.end(), static_cast<size_t>(times), count);
            }
        } else {
            return out;
        }
        for (size_t u = 1; u + 1 < out.counts.size(); ++u)
            if (out.counts[u] == 0) return out;
        if (out.counts.size() < 2 && !out.counts.empty() && out.counts[0] == 0) return out;
        out.valid = true;
        return out;
    }
    return {};
}

} // namespace

// The pipeline: virtual stages, the schedule and the split of the layers over the stages.
bool readPipeline(Reading& r) {
    const nlohmann::json& rec = r.rec;
    const nlohmann::json& pl = r.pl;
    Plan& plan = r.c.scenario.plan;
    ModelConfig& model = r.c.scenario.model;
    // Virtual stages without a pipeline have nothing to interleave: read as one, said (the plan check would
    // refuse the schedule, a field the record did not write).
    if (plan.pp == 1 && plan.vpp > 1) {
        r.assume("vpp " + std::to_string(plan.vpp) + " read as 1: pp 1 has no pipeline to interleave");
        plan.vpp = 1;
    }
    // Megatron-LM's first/last-rank layer counts, under the names records use.
    int statedFirst = 0, statedLast = 0;
    for (const char* key : {"first_stage_layers", "num_layers_in_first_pipeline_stage", "decoder_first_pipeline_num_layers"})
        if (auto v = count(pl, key, 1, model.layers, r.ptr + "/plan", r.refusal)) statedFirst = static_cast<int>(*v);
    for (const char* key : {"last_stage_layers", "num_layers_in_last_pipeline_stage", "decoder_last_pipeline_num_layers"})
        if (auto v = count(pl, key, 1, model.layers, r.ptr + "/plan", r.refusal)) statedLast = static_cast<int>(*v);
    if (!r.refusal.empty()) return false;
    // The schedule a record names, under the keys records use (torchtitan's config: pipeline_parallel_schedule).
    const std::string namedSchedule = lower(text(pl, "schedule") + " " + text(pl, "pipeline_schedule") + " " +
                                            text(pl, "pp_schedule") + " " + text(pl, "pipeline_parallel_schedule"));
    // A Megatron-core layout gives the virtual stages itself (readPipelineLayout).
    const bool vppInferred = plan.pp > 1 && !member(pl, "vpp") && !member(pl, "pipeline_model_parallel_layout");
    // Per-stage layer counts stated without a vpp give it: one count a virtual stage, so pp counts are a split
    // without interleaving and k x pp counts k virtual stages (before 2026-12-01 the vpp was inferred first and a
    // list of pp counts refused against it).
    const StatedSplit split = statedSplit(pl, model.layers);
    const int splitEntries = split.valid ? static_cast<int>(split.counts.size()) : 0;
    if (vppInferred && splitEntries > 0 && splitEntries % plan.pp == 0) {
        plan.vpp = splitEntries / plan.pp;
        r.assume("vpp = " + std::to_string(plan.vpp) + ": the stated per-stage split lists " + std::to_string(splitEntries) +
                 " stages over pp " + std::to_string(plan.pp));
    } else if (vppInferred) {
        // No virtual stages stated. A record that says its schedule is interleaved gets two layers per virtual
        // stage, the median of NVIDIA's published NeMo recipes (1-4: GPT-3 175B pp 8 vp 6, Llama 3 70B pp 4 vp 5,
        // Llama 3.1 405B pp 8 vp 8), where the layers (or the layers plus embedding and loss) split evenly and
        // the micro-batches divide by pp, as Megatron-LM's interleaved schedule needs; otherwise 1F1B. Stated
        // first/last-rank counts must leave the other ranks a whole number of layers per chunk.
        std::string sched = namedSchedule + " " + lower(text(pl, "techniques"));
        // The record's notes count where they say it and never deny it ("non-interleaved", "without interleaving"
        // anywhere in them leaves the notes out: a note that says both is no reading).
        const std::string notes = lower(text(rec, "notes"));
        if (contains(notes, "interleav") && !std::regex_search(notes, std::regex(R"((non|not|without|no)[- ]+interleav)")))
            sched += " " + notes;
        const int microBatches = plan.globalBatch / (plan.microBatch * plan.dp);
        auto fitsStated = [&](int cand) {
            if (statedFirst == 0 && statedLast == 0) return true;
            int rest = model.layers, ranks = plan.pp;
            if (statedFirst > 0) rest -= statedFirst, --ranks;
            if (statedLast > 0) rest -= statedLast, --ranks;
            return (statedFirst == 0 || statedFirst >= cand) && (statedLast == 0 || statedLast >= cand) &&
                   (ranks == 0 ? rest == 0 : rest > 0 && rest % (ranks * cand) == 0);
        };
        // Whether the record says anything of its schedule (its notes count even where they deny interleaving).
        const bool schedulesNamed =
            contains(notes, "interleav") ||
            std::regex_search(sched, std::regex(R"(interleav|1f1b|gpipe|fill[- ]drain|zero[- ]?bubble|\bzb|dualpipe|pipedream|looped ?bfs|\bbfs\b|\bdfs\b)"));
        // A denial ("1F1B non-interleaved", "without interleaving") is no interleaving.
        if (std::regex_search(sched, std::regex(R"((non|not|without|no)[- ]+interleav)"))) sched = namedSchedule.empty() ? "" : "1f1b";
        // A Megatron-LM, NeMo or MegaScale run that names no schedule at all. Megatron-LM's command line runs 1F1B
        // unless virtual stages are given, but the runs published with it interleave: every pipelined NeMo and
        // Megatron-Bridge recipe in the check sets (44 of 44), and Megatron-LM's README runs, which say their
        // pipeline communication overlaps compute, as Megatron-LM does only under the interleaved schedule
        // (arguments.py sets overlap_p2p_comm off otherwise, 2024-07). Read as interleaved where the layers split.
        const bool megatronKin = r.framework == "megatron" || r.framework == "nemo" || r.framework == "megascale";
        const bool interleaveByDefault = megatronKin && !schedulesNamed;
        if (interleaveByDefault) sched += " interleaved";
        int v = 1;
        // A count the schedule's words give ("vpp 2", "2 virtual stages per device", "4 model chunks") is taken where
        // Megatron-LM could run it.
        std::smatch counted;
        if (std::regex_search(sched, counted, std::regex(R"(\bvpp\s*[=:]?\s*([0-9]+))")) ||
            std::regex_search(sched, counted, std::regex(R"(([0-9]+)\s*(virtual (pipeline )?stages?|model chunks?)\b)"))) {
            const int stated = std::stoi(counted[1].str());
            const bool runs = stated >= 2 && microBatches % plan.pp == 0 &&
                              ((model.layers % (plan.pp * stated) == 0) || (model.layers + 2) % (plan.pp * stated) == 0) &&
                              fitsStated(stated);
            if (runs) v = stated;
            else r.assume("the schedule's " + std::to_string(stated) + " virtual stages do not split " +
                          std::to_string(model.layers) + " layers over pp " + std::to_string(plan.pp) +
                          " with the micro-batches dividing by pp: read without that count");
        }
        bool oneLayerEach = false;
        if (v == 1 && contains(sched, "interleav") && microBatches % plan.pp == 0) {
            for (int extra : {0, 2}) {
                for (int cand = (model.layers + extra) / (2 * plan.pp); cand >= 2 && v == 1; --cand)
                    if ((model.layers + extra) % (plan.pp * cand) == 0 && fitsStated(cand)) v = cand;
                if (v > 1) break;
            }
            // Where no chunk of two or more layers splits them, one layer a virtual stage, as NVIDIA's Nemotron-4
            // 340B recipes run (pp 8 x vp 12 over 96 layers, dgxc-benchmarking and NeMo 24.09).
            for (int extra : {0, 2})
                if (v == 1 && (model.layers + extra) % plan.pp == 0 && (model.layers + extra) / plan.pp >= 2 &&
                    fitsStated((model.layers + extra) / plan.pp))
                    v = (model.layers + extra) / plan.pp, oneLayerEach = true;
        }
        plan.vpp = v;
        const std::string how = interleaveByDefault
                                    ? std::string("no schedule stated: interleaved, as the published ") +
                                          (r.framework == "nemo" ? "NeMo" : r.framework == "megascale" ? "MegaScale" : "Megatron-LM") +
                                          " runs are (Megatron-LM overlaps pipeline communication only under it)"
                                    : "interleaved schedule without a vpp";
        if (v > 1 && std::regex_search(sched, std::regex(R"(\bvpp\s*[=:]?\s*[0-9]|[0-9]+\s*(virtual (pipeline )?stages?|model chunks?)\b)")))
            r.assume("vpp = " + std::to_string(v) + ", the count the schedule names");
        else if (v > 1 && oneLayerEach)
            r.assume(how + ": vpp = " + std::to_string(v) + " (one layer per virtual stage; no split of two or more fits)");
        else if (v > 1)
            r.assume(how + ": vpp = " + std::to_string(v) + " (about two layers per virtual stage, the median of NVIDIA's "
                     "published recipes)");
        else if (contains(sched, "interleav") && microBatches % plan.pp != 0)
            r.assume(how + ", but its " + std::to_string(microBatches) + " micro-batches a step do not divide by pp = " +
                     std::to_string(plan.pp) + ", as Megatron-LM's interleaved schedule needs: 1F1B");
        else if (contains(sched, "interleav"))
            r.assume(how + ", and no split of one or two layers per virtual stage fits: 1F1B");
        else
            r.assume("vpp not stated: 1 (no interleaving)");
    }
    plan.schedule = plan.vpp > 1 ? Schedule::Interleaved1F1B : Schedule::OneFOneB;
    plan.firstStageLayers = statedFirst; // (set again below; the named schedule reads them)
    plan.lastStageLayers = statedLast;
    readNamedSchedule(namedSchedule + " " + lower(text(pl, "techniques")), namedSchedule, plan, r);

    // Pipeline split: as stated (per-stage layers, or Megatron-LM's first/last-stage counts), else even where
    // pp x vpp divides the layers and, where it does not, what the frameworks do: the embedding and the output
    // layer + loss counted as one layer each (Megatron-LM --account-for-embedding/loss-in-pipeline-split,
    // DeepSpeed's "type:transformer|embedding" partition of BLOOM; Llama 3 405B's 7,8x14,7 is the same), or the
    // time-balanced split where the record says so (FORMULAS.md §5.4).
    // Megatron-core's --pipeline-model-parallel-layout: one string of every virtual stage's layers.
    if (member(pl, "pipeline_model_parallel_layout") && !readPipelineLayout(r, plan)) return false;
    // Per-stage layer counts (statedSplit); a count that does not read is refused naming its field, never dropped.
    if (split.key && plan.pipelineLayers.empty()) {
        if (!split.valid) {
            r.refusal = r.ptr + "/plan/" + split.key + ": \"" + text(pl, split.key) + "\" is not a list of per-stage layer counts "
                        "(whole numbers from 1 to " + std::to_string(model.layers) + ", 0 only for the first or the last stage, or text such "
                        "as \"7,8x14,7\")";
            return false;
        }
        plan.pipelineLayers = split.counts;
    }
    plan.firstStageLayers = statedFirst;
    plan.lastStageLayers = statedLast;
    if (vppInferred && plan.vpp > 1 && (statedFirst % plan.vpp != 0 || statedLast % plan.vpp != 0)) {
        // The vpp is tessel's reading, not the record's: first/last-rank counts it does not divide are the
        // record's schedule, not Megatron-LM's rule (which would refuse them). Llama 3's 405B run "reduces one
        // Transformer layer each from the first and the last stages" under its interleaved schedule (Llama Team
        // 2024, arXiv:2407.21783 §3.3.2): the missing layer comes off the chunk with the embedding or the loss.
        const auto chunks = firstLastChunkLayers(model.layers, plan.pp, plan.vpp, statedFirst, statedLast);
        if (!chunks.empty()) {
            plan.pipelineLayers = chunks;
            plan.firstStageLayers = plan.lastStageLayers = 0;
            r.assume("first/last pipeline ranks as stated under the inferred vpp " + std::to_string(plan.vpp) +
                   ": the layers they lack come off the chunk with the embedding / the loss (" + pipelineSplitText(chunks) + ")");
        }
    }
    if (plan.pipelineLayers.empty() && plan.firstStageLayers == 0 && plan.lastStageLayers == 0 &&
        model.layers % (plan.pp * plan.vpp) != 0) {
        plan.pipelineSplit = contains(lower(text(pl, "pipeline_split")), "balanced") ? PipelineSplit::Balanced
                                                                                    : PipelineSplit::EndsAsLayers;
    }
    return true;
}

} // namespace tessel::sim::detail
