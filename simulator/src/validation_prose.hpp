// Reading published records' prose (helpers of validation_record.cpp and validation_plan.cpp): JSON accessors that
// accept numbers written as text, and what a record states in words about its framework, GPU, links, recompute, ZeRO.
#pragma once

#include "tessel/cost/plan.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace tessel::sim::prose {

std::string lower(std::string s);
bool contains(const std::string& haystack, const std::string& needle);
// The member, or null when absent or JSON null.
const nlohmann::json* member(const nlohmann::json& obj, const char* key);
// The member as text (numbers and objects dumped); "" when absent.
std::string text(const nlohmann::json& obj, const char* key);
// A number, or a string that starts with one ("8 (inferred)").
std::optional<double> number(const nlohmann::json& obj, const char* key);
// A non-negative whole number.
std::optional<int64_t> integer(const nlohmann::json& obj, const char* key);
// A count a record states (a layer count, a parallel degree, a batch): nothing when the key is absent or null; else
// a whole number from `least` to `most` (as `integer` reads it), or `refusal`, if still empty, names the field
// (where + "/" + key) and the range, and nothing is returned. A count past `most` never wraps into an int.
std::optional<int64_t> count(const nlohmann::json& obj, const char* key, int64_t least, int64_t most,
                             const std::string& where, std::string& refusal);
// Megatron-LM's --moe-layer-freq written as a Python list expression ("([0]*3+[1]*58)", "[1,0]*24": 1 an expert
// layer): its 0/1 per layer, from lists of 0s and 1s, `* n` repeats and `+`; nothing when the text is not such an
// expression.
std::optional<std::vector<int>> layerPattern(const std::string& text);
// true/false, yes/no, on/off, the words "enabled" / "disabled" and "1" / "0", or a number (non-zero is true).
std::optional<bool> boolean(const nlohmann::json& obj, const char* key);
// The year a source was published, from its citation ("SC'21", "NSDI'24", "2022"): the earliest named; 0 if none.
int sourceYear(const std::string& source);
// The year of the software a run used (an arXiv number's month; first-quarter work counts as the year before).
int softwareYear(const std::string& source);
// What words name that tessel reads as torchtitan, not being torchtitan: "OLMo-core", "torchtune" or "FSDP2"
// (PyTorch's fully_shard, which torchtitan's costs are); "" otherwise.
std::string torchtitanKin(const std::string& words);
// The framework a record ran, in the plan's vocabulary ("" when not stated).
std::string frameworkOf(const nlohmann::json& plan, const std::string& source);

struct GpuChoice {
    std::string preset;
    std::string note;     // assumption text, empty when the record names the GPU exactly
    double nvlinkBytesPerSecond = 0.0; // per direction, where the part differs from the preset's (A800, H800)
    // GPUs in one NVLink domain where it spans more than a server (GB200 NVL72: the rack's 72, however many a
    // record counts to its 4-GPU compute tray); 0: the record's node is the domain.
    int nvlinkDomainGpus = 0;
    // A part read on a sibling's preset with fewer compute units (an MI250 on the MI250X GCD's): every peak x this.
    double peakScale = 1.0;
    std::string partName = {}; // the GPU's name where it is not the preset's (peakScale != 1)
    // Devices a package holds (AMD's MI250X and MI250: two GCDs, each a GPU to PyTorch and HIP; the presets are per
    // GCD); a record may count either (readCluster decides and says which).
    int devicesPerPackage = 1;
    // A cloud instance named for its GPUs: its network as its provider states it, for a record that states none.
    std::string instanceLink = {};
};

// A part's own memory where it differs from its preset's (GH200's 96 GB HBM3 on the H200 preset); empty name: none.
struct GpuPartMemory {
    std::string name;
    int64_t memoryBytes = 0;
    double hbmBytesPerSecond = 0.0;
    double nominalGigabytes = 0.0; // the datasheet's figure, for the assumption
    bool stated = false;           // the text names the memory; else the first (96 GB) part is taken
};

// The cluster preset of a GPU named in prose. Returns an empty preset for a GPU tessel has no figures for.
GpuChoice gpuPreset(const std::string& gpuText);
// The part's own memory where the preset's GPU stands for it (GH200); empty name for every other GPU.
GpuPartMemory gpuPartMemory(const std::string& gpuText);
// A board power limit written beside a GPU's name ("H100 96GB HBM2e (500W)", "700 W"), in watts; nothing when the
// text names none.
std::optional<double> powerLimitInProse(const std::string& gpuText);
// An out-of-memory outcome in prose ("OOM at step 1", "CUDA out of memory", "did not fit": true; "ran", "fits",
// "completed": false); nothing when the words say neither or only name a failure ("not successful").
std::optional<bool> outOfMemoryInProse(const std::string& outcome);
// Inter-node bandwidth per GPU, per direction, from prose ("8x 200Gb/s HDR", "400 Gbps per GPU"); 0 when not
// stated. `how` says how the text was read.
double interNodeBytesPerSecond(const std::string& linkText, int gpusPerNode, std::string& how);
// Activation recompute from prose; `known` is false when the text says nothing recognisable.
Recompute parseRecompute(const std::string& s, bool& known);
// The items of a list as Python prints it ("['p2p', 'a2a']", "[core_attn, mlp]", or one bare "p2p"), brackets,
// quotes and spaces stripped; "[]" gives none.
std::vector<std::string> pythonStringList(const std::string& text);
// The sentences of a record's prose (split at '.' and ';') that match `about`.
std::vector<std::string> sentencesAbout(const std::string& words, const std::regex& about);
// Whether words name Lightning (Trainer or Fabric) or lit-gpt, which runs on it.
bool namesLightning(const std::string& words);
// The recompute a record's prose (notes, techniques) states: the sentences that speak of activation checkpointing or
// recomputation, each read as parseRecompute reads a recompute value; a reading only where they agree. The sentence
// it came from is returned beside it.
std::optional<std::pair<Recompute, std::string>> recomputeInProse(const std::string& words);
// ZeRO stage from a number or prose ("ZeRO-3", "FULL_SHARD", "SHARD_GRAD_OP"). -1 when unknown.
int parseZero(const nlohmann::json& plan);

} // namespace tessel::sim::prose
