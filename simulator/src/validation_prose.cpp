// Reading published records' prose: JSON accessors that take numbers written as text, the years a citation
// names, and the framework, GPU, inter-node link, recompute and ZeRO stage a record states in words.
#include "validation_prose.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <regex>
#include <utility>

namespace tessel::sim::prose {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}
bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

const nlohmann::json* member(const nlohmann::json& obj, const char* key) {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
}
std::string text(const nlohmann::json& obj, const char* key) {
    const nlohmann::json* v = member(obj, key);
    if (!v) return "";
    if (v->is_string()) return v->get<std::string>();
    return v->dump();
}
namespace {
// A leading number of a field written as text: "8", "8 (inferred)", a config's "5e8", a table's "1,024", with an
// abbreviated magnitude right after it ("265k", "1.5M", "22B": a letter k, M or B followed by no letter or digit),
// given as its multiplier (1 without one).
std::optional<std::pair<double, double>> leadingNumber(const std::string& s) {
    static const std::regex numberRe(R"(^\s*([0-9]{1,3}(,[0-9]{3})+|[0-9]+)(\.[0-9]+)?([eE][+-]?[0-9]+)?)");
    std::smatch m;
    if (!std::regex_search(s, m, numberRe)) return std::nullopt;
    std::string digits = m[0].str();
    digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
    const size_t at = static_cast<size_t>(m[0].length());
    double scale = 1.0;
    if (at < s.size() && std::strchr("kKMB", s[at]) &&
        (at + 1 == s.size() || !std::isalnum(static_cast<unsigned char>(s[at + 1]))))
        scale = s[at] == 'M' ? 1e6 : s[at] == 'B' ? 1e9 : 1e3;
    return std::make_pair(std::stod(digits), scale);
}
} // namespace

std::optional<double> number(const nlohmann::json& obj, const char* key) {
    const nlohmann::json* v = member(obj, key);
    if (v && v->is_number()) return v->get<double>();
    if (v && v->is_string())
        if (const auto n = leadingNumber(v->get<std::string>())) return n->first * n->second;
    return std::nullopt;
}
std::optional<int64_t> integer(const nlohmann::json& obj, const char* key) {
    auto v = number(obj, key);
    // Past 2^62 no count a record states is meant, and the cast would overflow.
    if (!v || *v < 0 || std::floor(*v) != *v || *v > 4.6e18) return std::nullopt;
    return static_cast<int64_t>(*v);
}
std::optional<int64_t> count(const nlohmann::json& obj, const char* key, int64_t least, int64_t most,
                             const std::string& where, std::string& refusal) {
    if (!member(obj, key)) return std::nullopt;
    // A count written with an abbreviated magnitude ("4k", "32K") is not read: k is 1000 in a vocabulary of 32000 and
    // 1024 in a width of 4096, and a guess either way would be silent.
    if (const nlohmann::json* t = member(obj, key); t->is_string())
        if (const auto n = leadingNumber(t->get<std::string>()); n && n->second != 1.0) {
            if (refusal.empty())
                refusal = where + "/" + key + ": \"" + t->get<std::string>() + "\" abbreviates the count; write it whole (" +
                          "k may be 1000 or 1024)";
            return std::nullopt;
        }
    const auto v = number(obj, key);
    if (v && std::floor(*v) == *v && *v >= static_cast<double>(least) && *v <= static_cast<double>(most))
        return static_cast<int64_t>(*v);
    if (refusal.empty())
        refusal = where + "/" + key + ": " + (v ? "got " + text(obj, key) + ", " : "\"" + text(obj, key) + "\" is not a number; ") +
                  "expected a whole number from " + std::to_string(least) + " to " + std::to_string(most);
    return std::nullopt;
}
std::optional<std::vector<int>> layerPattern(const std::string& text) {
    // Recursive descent over: expr := term ('+' term)*; term := atom ('*' n)*; atom := '[' 0|1 (',' 0|1)* ']' |
    // '(' expr ')'. Spaces anywhere; repeats bounded so a hostile count cannot exhaust memory.
    size_t i = 0;
    auto skip = [&] {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    };
    auto eat = [&](char c) {
        skip();
        if (i < text.size() && text[i] == c) {
            ++i;
            return true;
        }
        return false;
    };
    std::function<bool(std::vector<int>&)> expr;
    auto atom = [&](std::vector<int>& out) {
        if (eat('(')) return expr(out) && eat(')');
        if (!eat('[')) return false;
        do {
            skip();
            if (i >= text.size() || (text[i] != '0' && text[i] != '1')) return false;
            out.push_back(text[i++] - '0');
        } while (eat(','));
        return eat(']');
    };
    auto term = [&](std::vector<int>& out) {
        std::vector<int> part;
        if (!atom(part)) return false;
        while (eat('*')) {
            skip();
            size_t n = 0, digits = 0;
            while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && digits < 7) n = n * 10 + static_cast<size_t>(text[i++] - '0'), ++digits;
            if (digits == 0 || part.size() * n > 1000000) return false;
            std::vector<int> repeated;
            for (size_t k = 0; k < n; ++k) repeated.insert(repeated.end(), part.begin(), part.end());
            part = std::move(repeated);
        }
        out.insert(out.end(), part.begin(), part.end());
        return true;
    };
    expr = [&](std::vector<int>& out) {
        if (!term(out)) return false;
        while (eat('+'))
            if (!term(out)) return false;
        return true;
    };
    std::vector<int> out;
    if (!expr(out)) return std::nullopt;
    skip();
    if (i != text.size() || out.empty()) return std::nullopt;
    return out;
}

std::optional<bool> boolean(const nlohmann::json& obj, const char* key) {
    const nlohmann::json* v = member(obj, key);
    if (!v) return std::nullopt;
    if (v->is_boolean()) return v->get<bool>();
    if (v->is_string()) {
        const std::string s = lower(v->get<std::string>());
        if (s.starts_with("true") || s.starts_with("yes") || s.starts_with("on") || s == "enabled" ||
            s == "1")
            return true;
        if (s.starts_with("false") || s.starts_with("no") || s.starts_with("off") || s == "disabled" ||
            s == "0")
            return false;
    }
    if (v->is_number()) return v->get<double>() != 0.0;
    return std::nullopt;
}

// The year a source was published, from its citation ("SC'21", "NSDI'24", "(arXiv:2205.05198, MLSys'23)",
// "2022"): the earliest year named. 0 when none is found.
int sourceYear(const std::string& source) {
    int year = 0;
    auto consider = [&](int y) {
        if (y >= 2015 && y <= 2100 && (year == 0 || y < year)) year = y;
    };
    std::smatch m;
    std::string s = source;
    const std::regex full(R"((?:^|[^0-9])(20[0-9]{2})(?:[^0-9]|$))");
    for (auto it = std::sregex_iterator(source.begin(), source.end(), full); it != std::sregex_iterator(); ++it)
        consider(std::stoi((*it)[1]));
    const std::regex apostrophe(R"('([0-9]{2})(?:[^0-9]|$))");
    for (auto it = std::sregex_iterator(source.begin(), source.end(), apostrophe); it != std::sregex_iterator(); ++it)
        consider(2000 + std::stoi((*it)[1]));
    const std::regex arxiv(R"(arXiv:([0-9]{2})([0-9]{2})\.)");
    for (auto it = std::sregex_iterator(source.begin(), source.end(), arxiv); it != std::sregex_iterator(); ++it)
        consider(2000 + std::stoi((*it)[1]));
    return year;
}

// The year of the software a run used: a paper's arXiv number gives its month, and work submitted in the first
// quarter was done the year before; otherwise the earliest year the citation names.
int softwareYear(const std::string& source) {
    std::smatch m;
    if (std::regex_search(source, m, std::regex(R"(arXiv:([0-9]{2})([0-9]{2})\.)"))) {
        const int year = 2000 + std::stoi(m[1]), month = std::stoi(m[2]);
        return month <= 3 ? year - 1 : year;
    }
    return sourceYear(source);
}

std::string torchtitanKin(const std::string& words) {
    const std::string w = lower(words);
    if (contains(w, "torchtitan")) return "";
    if (contains(w, "olmo-core") || contains(w, "olmo_core") || contains(w, "olmocore") || contains(w, "olmo core"))
        return "OLMo-core";
    if (contains(w, "torchtune")) return "torchtune";
    // fully_shard, FSDP2's API, not fairseq's `fully_sharded` (FairScale's FSDP1).
    // "FSDP 2" is FSDP2, "FSDP 2.4" PyTorch 2.4's FSDP.
    if (std::regex_search(w, std::regex(R"(fsdp ?2(?![.0-9]))")) || std::regex_search(w, std::regex(R"(fully_shard(?!ed))")))
        return "FSDP2";
    return "";
}

// The framework a record ran, in the plan's vocabulary.
std::string frameworkOf(const nlohmann::json& plan, const std::string& source) {
    const std::string f = lower(text(plan, "framework") + " " + text(plan, "ddp_impl") + " " + text(plan, "fsdp_sharding"));
    const std::string src = lower(source);
    if (contains(f, "megascale")) return "megascale";
    // PyTorch FSDP2 (fully_shard) is what torchtitan costs, not FSDP1's flat parameters: AI2's OLMo-core builds it
    // and per-block torch.compile as torchtitan does (its Transformer.apply_fsdp is adapted from torchtitan's
    // parallelize_llama: fully_shard per block, the last block kept unsharded after forward; float8 through torchao),
    // and torchtune shards with fully_shard too (training.shard_model), so their runs take torchtitan's costs.
    if (contains(f, "torchtitan") || !torchtitanKin(f).empty()) return "torchtitan";
    // Megatron-Bridge is NeMo 2's training library and runs NeMo's performance recipes.
    if (contains(f, "nemo") || contains(f, "megatron-bridge") || contains(f, "megatron bridge")) return "nemo";
    // GPT-NeoX trains with DeepSpeed's engine (pipeline, ZeRO) around Megatron's tensor parallelism.
    if (contains(f, "deepspeed") || contains(f, "neox")) return "deepspeed";
    // Metaseq (OPT) and fairscale shard with FairScale's FSDP, PyTorch FSDP's ancestor.
    // Also by its long name ("Fully Sharded Data Parallel", fairseq's --ddp-backend fully_sharded over FairScale), and
    // MosaicML's llm-foundry, which trains under Composer's FSDP.
    if (contains(f, "fsdp") || contains(f, "composer") || contains(f, "llm-foundry") || contains(f, "llmfoundry") ||
        contains(f, "llm foundry") || contains(f, "full_shard") || contains(f, "shard_grad_op") ||
        contains(f, "metaseq") || contains(f, "fairscale") || contains(f, "fully_sharded") ||
        contains(f, "fully sharded") || contains(f, "fully-sharded"))
        return "fsdp";
    if (contains(f, "megatron")) return "megatron";
    // A framework the record names that is none of the above (Colossal-AI, PaddlePaddle, ...) is that
    // framework, not one guessed from the source's words: the caller reads it as generic and says so. Words that
    // name no framework of their own ("PyTorch", "DDP", "in-house") leave the source to decide.
    {
        std::string rest = " " + lower(text(plan, "framework")) + " ";
        for (char& ch : rest)
            if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-') ch = ' ';
        for (const char* generic : {" pytorch ", " torch ", " ddp ", " native ", " custom ", " in-house ", " internal ",
                                    " distributed ", " data ", " parallel "})
            for (size_t at; (at = rest.find(generic)) != std::string::npos;) rest.replace(at, std::strlen(generic) - 1, "");
        if (rest.find_first_not_of(' ') != std::string::npos) return "";
    }
    if (contains(src, "nemo") || contains(src, "megatron-bridge")) return "nemo";
    if (contains(src, "megatron") || contains(src, "narayanan") || contains(src, "korthikanti")) return "megatron";
    if (contains(src, "llm-foundry") || contains(src, "mosaicml")) return "fsdp";
    if (contains(src, "deepspeed") || contains(src, "zero") || contains(src, "neox")) return "deepspeed";
    if (contains(src, "torchtitan")) return "torchtitan";
    if (contains(src, "metaseq")) return "fsdp";
    return "";
}

// The cluster preset of a GPU named in prose. Returns an empty preset for a GPU tessel has no figures for.
GpuChoice gpuPreset(const std::string& gpuText) {
    const std::string g = lower(gpuText);
    auto has = [&](const char* s) { return contains(g, s); };
    // A cloud instance named for its GPUs (AWS p4d/p4de/p5/p5e/p5en, Azure's ND A100 v4 SKUs, Google's A2, Oracle's
    // BM.GPU4.8 / A100-v2.8): the GPU it carries, said, and its network as its provider states it (AWS: p4d 400 Gbps
    // of EFA, p5 3200 Gbps; Azure ND A100 v4: 8 x 200 Gb/s HDR; Oracle: 1600 Gbps of RDMA) for a record stating none.
    // Longer names first, where one contains another.
    struct Instance {
        const char* name;
        const char* gpu;
        const char* link;
    };
    static const Instance instances[] = {
        {"p4de", "A100-SXM4-80GB", "EFA 400 Gbps per node"},       {"p4d", "A100-SXM4-40GB", "EFA 400 Gbps per node"},
        {"p5en", "H200", "EFA 3200 Gbps per node"},                {"p5e", "H200", "EFA 3200 Gbps per node"},
        {"p5.", "H100 SXM", "EFA 3200 Gbps per node"},             {"p5 ", "H100 SXM", "EFA 3200 Gbps per node"},
        {"nd96amsr", "A100-SXM4-80GB", "8x 200 Gb/s HDR"},         {"ndm a100 v4", "A100-SXM4-80GB", "8x 200 Gb/s HDR"},
        {"nd96asr", "A100-SXM4-40GB", "8x 200 Gb/s HDR"},          {"nd a100 v4", "A100-SXM4-40GB", "8x 200 Gb/s HDR"},
        {"a2-ultragpu", "A100-SXM4-80GB", ""},                     {"a2-highgpu", "A100-SXM4-40GB", ""},
        {"a2-megagpu", "A100-SXM4-40GB", ""},                      {"a3-ultragpu", "H200", ""},
        {"a3-highgpu", "H100 SXM", ""},                            {"a3-megagpu", "H100 SXM", ""},
        {"a3-edgegpu", "H100 SXM", ""},                            {"a4-highgpu", "B200", ""},
        {"bm.gpu4.8", "A100-SXM4-40GB", "1600 Gbps per node"},     {"bm.gpu.a100-v2.8", "A100-SXM4-80GB", "1600 Gbps per node"}};
    const std::string spaced = " " + g + " ";
    for (const Instance& i : instances)
        if (contains(spaced, i.name)) {
            GpuChoice choice = gpuPreset(i.gpu);
            if (choice.preset.empty()) return choice;
            choice.note = "\"" + gpuText + "\" read as the instance's GPU, " + i.gpu + (choice.note.empty() ? "" : "; " + choice.note);
            choice.instanceLink = i.link;
            return choice;
        }
    if (has("gh200")) {
        const GpuPartMemory part = gpuPartMemory(gpuText);
        char memory[64];
        std::snprintf(memory, sizeof memory, "%.0f GB at %.1f TB/s", part.nominalGigabytes, part.hbmBytesPerSecond / 1e12);
        return {"h200-single", "GH200 taken as the H200 preset's GPU (same SMs, clocks and BF16 peak) with its own memory: " +
                                   std::string(memory) + (part.stated ? "" : " (memory not stated: the 96 GB part, the first GH200)") +
                                   "; the preset's NVLink and NICs, not the Grace module's C2C link or its shared power budget"};
    }
    // Blackwell Ultra: the GB300 NVL72 rack (72 GPUs one NVLink domain, as the GB200's) and the B300 of HGX/DGX
    // B300 nodes; before the GB200 and B200 tests, whose names they do not contain but whose families they share.
    if (has("gb300")) return {"gb300-nvl72", "", 0.0, 72};
    if (has("b300")) return {"dgx-b300", ""};
    // Grace Blackwell (GB200 NVL72): the rack's 72 GPUs are one NVLink domain, at the GB200's own clocks; before the
    // B200 test, whose name it contains.
    if (has("gb200")) return {"gb200-nvl72", "", 0.0, 72};
    if (has("b200")) return {"dgx-b200", ""};
    // The H200 NVL is the PCIe card (141 GB, 4.8 TB/s, up to 600 W, NVLink bridges of two or four cards): the SXM
    // part's figures, said; a limit the record states ("600 W") moves its power curve.
    if (has("h200"))
        return {"h200-single", has("nvl") ? "H200 NVL taken as the H200 SXM part (141 GB, 4.8 TB/s, 700 W): tessel has no NVL "
                                            "figures (its 600 W limit, PCIe and NVLink bridges); a stated limit moves the power curve"
                                          : ""};
    if (has("h100") || has("h800")) {
        // The PCIe card: 114 SMs, 350 W, HBM2e, no NVSwitch (scenarios/clusters/pcie-h100-80g.json).
        if (has("pcie")) return {"pcie-h100-80g", ""};
        if (has("h800")) return {"dgx-h100-80g", "H800 taken as an H100 SXM (same SM and HBM) with NVLink at 400 GB/s, not 900", 200e9};
        // Meta's Grand Teton part: 96 GB of HBM2e at 2.4 TB/s, 500 W (torchtitan's H100 benchmarks ran on it).
        if (has("96") || has("hbm2e"))
            return {"grand-teton-h100-96g", "H100 with 96 GB HBM2e taken as Meta's Grand Teton part (2.4 TB/s, 500 W)"};
        if (has("nvl")) return {"dgx-h100-80g", "H100 NVL taken as an H100 SXM (80 GB, 700 W): tessel has no NVL figures"};
        return {"dgx-h100-80g", ""};
    }
    if (has("a800")) {
        // The export variant of the A100: same SM count, clocks and HBM; NVLink cut to 400 GB/s (NVIDIA A800 datasheet).
        // Its PCIe card is the A100 PCIe's but for the bridge, which the PCIe presets do not model.
        if (has("pcie"))
            return {has("40") ? "pcie-a100-40g" : "pcie-a100-80g", "A800 PCIe taken as the A100 PCIe card (same GPU; only its NVLink bridge differs)"};
        return {has("40") ? "dgx-a100-40g" : "dgx-a100-80g", "A800 taken as an A100 SXM (same SM and HBM) with NVLink at 400 GB/s, not 600", 200e9};
    }
    if (has("a100")) {
        // The PCIe card has no NVSwitch (PCIe Gen4, NVLink bridges between pairs) and a 300 W (80 GB) or 250 W (40 GB)
        // limit: not the SXM part (scenarios/clusters/pcie-a100-80g.json, pcie-a100-40g.json).
        if (has("pcie")) {
            if (has("40")) return {"pcie-a100-40g", ""};
            if (has("80")) return {"pcie-a100-80g", ""};
            return {"pcie-a100-80g", "A100 PCIe memory size not stated: the 80 GB card assumed"};
        }
        if (has("40")) return {"dgx-a100-40g", ""};
        if (has("80")) return {"dgx-a100-80g", ""};
        return {"dgx-a100-80g", "A100 memory size not stated: the 80 GB SXM part assumed"};
    }
    if (has("ampere")) return {"dgx-a100-80g", "'Ampere' GPU taken as an A100-SXM4-80GB"};
    // AMD Instinct. CDNA3: the MI300X and MI325X, one device each on 8-GPU Infinity Fabric platforms. CDNA2: the
    // MI250X and MI250, two GCDs a package, each a GPU to PyTorch, HIP and Slurm; frontier-mi250x is per GCD.
    const bool instinct = has("mi2") || has("mi3") || has("instinct");
    if (instinct) {
        auto compact = g;
        compact.erase(std::remove_if(compact.begin(), compact.end(), [](char ch) { return ch == ' ' || ch == '-'; }),
                      compact.end());
        auto part = [&](const char* s) { return compact.find(s) != std::string::npos; };
        if (part("mi325")) return {"mi325x-platform", ""};
        if (part("mi300x")) return {"mi300x-platform", ""};
        if (part("mi300a"))
            return {"", "the MI300A (an APU: 228 CUs and CPU cores on one package, 128 GB of shared HBM3) has no built-in "
                        "figures; the nearest preset is mi300x-platform"};
        // CDNA4: the MI355X, and the MI350X, the same silicon at 2200 against 2400 MHz (and 1000 W against 1400).
        if (part("mi355")) return {"mi355x-platform", ""};
        if (part("mi350")) {
            GpuChoice c{"mi355x-platform", "MI350X taken as the MI355X's preset at its 2200 MHz clock: every peak x 2200/2400 "
                                           "(2,292 TFLOP/s of BF16), its memory, links and NICs the MI355X platform's"};
            c.peakScale = 2200.0 / 2400.0;
            c.partName = "AMD Instinct MI350X OAM (288 GB HBM3E)";
            return c;
        }
        if (part("mi250x")) {
            GpuChoice c{"frontier-mi250x", ""};
            c.devicesPerPackage = 2;
            return c;
        }
        if (part("mi250")) {
            // 208 CUs a package against the MI250X's 220, at the same 1700 MHz clock and the same HBM2e: 362.1
            // against 383 TFLOP/s of BF16 (ROCm docs/conceptual/gpu-arch/mi250.md).
            GpuChoice c{"frontier-mi250x", "MI250 taken as the MI250X GCD's preset with 104 of its 110 CUs: every peak x 104/110 "
                                           "(181.0 TFLOP/s of BF16 a GCD, 362.1 a package), its links and NICs the Frontier node's"};
            c.peakScale = 104.0 / 110.0;
            c.partName = "AMD Instinct MI250 GCD (one of two, 64 GB HBM2e)";
            c.devicesPerPackage = 2;
            return c;
        }
        return {"", "of AMD's Instinct parts tessel has figures for the MI250X, MI250, MI300X, MI325X, MI350X and MI355X only "
                    "(frontier-mi250x, mi300x-platform, mi325x-platform, mi355x-platform)"};
    }
    if (has("v100")) {
        // The DGX-2H's 450 W part is named "-H" after the memory ("V100-SXM3-32GB-H") or as the system.
        const bool dgx2h = has("gb-h") || has("dgx-2h") || has("dgx2h");
        // Volta: the DGX-2's SXM3 modules on NVSwitch, or the DGX-1's SXM2 modules on its NVLink cube-mesh (the
        // 32 GB SXM2 part takes its memory from gpuPartMemory). The PCIe card: 250 W, no NVLink fabric.
        if (has("pcie")) return {"", "V100 PCIe is not a built-in GPU (no NVLink fabric: PCIe Gen3, 250 W)"};
        if (has("sxm3") || has("dgx-2") || has("dgx2") || dgx2h)
            return {"dgx2-v100", dgx2h ? "the DGX-2H's 450 W V100 (2.1 PFLOPS a system, NVIDIA DGX-2H datasheet) read "
                                             "with the DGX-2's figures (2 PFLOPS: 125 TFLOPS a GPU)"
                                 : has("sxm3") ? "" : "V100 taken as the DGX-2's V100-SXM3-32GB on NVSwitch"};
        return {"dgx1-v100", has("sxm2") ? "" : "V100 taken as the DGX-1's V100-SXM2 on its NVLink cube-mesh"};
    }
    return {"", ""};
}

GpuPartMemory gpuPartMemory(const std::string& gpuText) {
    const std::string g = lower(gpuText);
    // The DGX-1's V100 came as 16 GB and, from 2018, 32 GB SXM2 modules: the same GPU and HBM2 bandwidth (Tesla
    // V100 datasheet); 32 GB read as the SXM3 32 GB part's usable bytes (scenarios/clusters/dgx2-v100.json).
    if (contains(g, "v100") && contains(g, "32") && !contains(g, "sxm3") && !contains(g, "dgx-2") && !contains(g, "dgx2") &&
        !contains(g, "gb-h"))
        return {"Tesla V100-SXM2-32GB", 34069000000, 9.0e11, 32.0, true};
    if (!contains(g, "gh200")) return {};
    // Grace Hopper: the H100/H200 GPU (132 SMs, the same clocks, 989 TFLOP/s BF16 dense) with 96 GB HBM3 at 4 TB/s
    // or 144 GB HBM3e at 4.9 TB/s (NVIDIA GH200 Grace Hopper Superchip datasheet). Usable bytes scale as the
    // presets' parts': 96/80 of the H100 80 GB's 85,520,809,984, 144/141 of the H200's 150,754,820,096.
    const bool stated = contains(g, "96") || contains(g, "hbm3") || contains(g, "144") || contains(g, "141");
    if (contains(g, "144") || contains(g, "141") || contains(g, "hbm3e"))
        return {"NVIDIA GH200 (144 GB HBM3e)", std::llround(150754820096.0 * 144.0 / 141.0), 4.9e12, 144.0, true};
    return {"NVIDIA GH200 (96 GB HBM3)", std::llround(85520809984.0 * 96.0 / 80.0), 4.0e12, 96.0, stated};
}

std::optional<bool> outOfMemoryInProse(const std::string& outcome) {
    const std::string o = " " + lower(outcome) + " ";
    std::string words = o; // letters only, so "OOM," and "(oom)" are the word oom
    for (char& ch : words)
        if (!std::isalpha(static_cast<unsigned char>(ch))) ch = ' ';
    // A negated out-of-memory ("no OOM", "without OOM errors", "did not run out of memory") is a run that fit.
    static const std::regex negated(
        R"( (no|not|without|never|didn t|did not|zero) (an? )?(oom|ooms|oomed|out ?of ?memory|run out of memory|ran out of memory|running out of memory)( |error))");
    if (std::regex_search(words, negated)) return false;
    for (const char* oom : {" oom ", " ooms ", " oomed ", " oom d ", "out of memory", "out-of-memory", "outofmemory",
                            "not fit", "n't fit", "exceeds memory", "exceeded memory", "insufficient memory"})
        if (contains(o, oom) || contains(words, oom)) return true;
    // A failure or a negation that names no memory ("not successful", "failed: NCCL timeout") says neither.
    for (const char* unsure : {" not ", " no ", "n t ", " fail", " crash", " error"})
        if (contains(words, unsure)) return std::nullopt;
    for (const char* ran : {" fits ", " fit ", " ran ", " runs ", " completed ", " success", " ok ", " trained "})
        if (contains(words, ran)) return false;
    return std::nullopt;
}

std::optional<double> powerLimitInProse(const std::string& gpuText) {
    // Watts as datasheets and papers write a limit: three or four digits, "W" on its own (not "Wh", not a word).
    std::smatch m;
    if (std::regex_search(gpuText, m, std::regex(R"((^|[^0-9.])([0-9]{3,4})\s?[Ww](?![A-Za-z]))"))) return std::stod(m[2]);
    return std::nullopt;
}

// Inter-node bandwidth per GPU, per direction, from prose such as "8x 200Gb/s HDR InfiniBand HCAs per node",
// "8x 200G NICs per server", "1600 Gbps node-node interconnect", "400 Gbps per GPU", "InfiniBand NDR 400 Gb/s".
// 0 when not stated. A bare rate that one port can carry (InfiniBand EDR/HDR/NDR/XDR, 100-800 GbE: at most
// 800 Gb/s) and is not said to be the node's is one NIC's rate, and the DGX/HGX A100 and H100 systems carry one
// such NIC per GPU (NVIDIA DGX A100 / DGX H100 user guides: 8 ConnectX-6 / ConnectX-7 compute ports for 8 GPUs).
// AWS's Elastic Fabric Adapter is the exception: AWS gives EFA bandwidth per instance (p4d.24xlarge 400 Gbps over
// four 100 Gbps adapters, p5.48xlarge 3200 Gbps over 32), so a bare EFA rate is the node's.
namespace {
double linkBytesPerSecond(const std::string& linkText, int gpusPerNode, std::string& how, bool readGenerations) {
    constexpr double kLargestPortGbits = 800.0;   // InfiniBand XDR, 800GbE
    std::string t = lower(linkText);
    // A product's number is no count or rate ("4x Slingshot-11 200 Gb/s", "8x ConnectX-7 400 Gb/s"): a word joined by
    // a hyphen to digits that no unit follows has its digits masked, in place, so positions stay the original's.
    {
        const std::regex named(R"([a-z]{3,}-([0-9]+)(?![0-9.])(?!\s*(g|t)(b/s|bps|b\b|bit)))");
        for (auto it = std::sregex_iterator(t.begin(), t.end(), named); it != std::sregex_iterator(); ++it)
            for (auto i = static_cast<size_t>(it->position(1)); i < static_cast<size_t>(it->position(1) + it->length(1)); ++i) t[i] = '#';
    }
    std::smatch m;
    // A rate's unit as written: "GB/s" and "GBps" are bytes, "Gb/s", "Gbps" and "Gbit/s" bits (matched on the
    // lowered text, whose positions are the original's).
    auto bitsPer = [&](int unitGroup) {
        const size_t b = static_cast<size_t>(m.position(unitGroup)) + 1;
        return b < linkText.size() && linkText[b] == 'B' ? 8.0 : 1.0;
    };
    // "N x M Gb/s" (N NICs of M Gb/s per node).
    if (std::regex_search(t, m, std::regex(R"(([0-9]+)\s*x\s*[^0-9]{0,40}?([0-9]+(?:\.[0-9]+)?)\s*(g|t)(?:b/s|bps|b\b|\b))"))) {
        const double nics = std::stod(m[1]);
        double gbits = std::stod(m[2]) * (m[3] == "t" ? 1000.0 : 1.0) * bitsPer(3);
        how = m.str(0) + " per node";
        return nics * gbits * 1e9 / 8.0 / gpusPerNode;
    }
    // "M Gbps per GPU" or "M Gbps" per node; an Ethernet port's "100GbE" or a bare "400G" is the same rate.
    if (std::regex_search(t, m, std::regex(R"(([0-9]+(?:\.[0-9]+)?)\s*(g|t)(?:b/s|bps|bit/s|be\b|b\b|\b))"))) {
        double gbits = std::stod(m[1]) * (m[2] == "t" ? 1000.0 : 1.0) * bitsPer(2);
        const bool perGpu = contains(t, "per gpu") || contains(t, "/gpu") || contains(t, " a gpu") || contains(t, "each gpu");
        // A port's rate with its count written after it: "NDR 400 Gb/s, 8x ConnectX-7 a node", "400 Gb/s x 8",
        // "400 Gb/s (8 per node)". The count is the NICs of a node, whatever the order the record wrote them in.
        if (!perGpu && gbits <= kLargestPortGbits) {
            const std::string rest = t.substr(static_cast<size_t>(m.position(0) + m.length(0)));
            std::smatch c;
            static const std::regex countAfter(
                R"((?:^|[^0-9a-z.#])([0-9]{1,2})\s*x(?![a-z0-9])|(?:^|[^a-z0-9])x\s*([0-9]{1,2})(?![0-9.])|(?:^|[^0-9.#])([0-9]{1,2})\s*(?:nics?|hcas?|adapters?|ports?|rails?)?\s*(?:per|a|each)\s+(?:node|server|host))");
            if (std::regex_search(rest, c, countAfter)) {
                const double nics = std::stod(c[1].matched ? c[1].str() : c[2].matched ? c[2].str() : c[3].str());
                how = m.str(0) + " x " + std::to_string(static_cast<int>(nics)) + " per node";
                return nics * gbits * 1e9 / 8.0 / gpusPerNode;
            }
        }
        const bool perNode = contains(t, "node") || contains(t, "server") || contains(t, "host") ||
                             contains(t, "aggregate") || contains(t, "efa") || gbits > kLargestPortGbits;
        if (perGpu || !perNode) {
            how = m.str(0) + (perGpu ? " per GPU" : " per NIC, one NIC per GPU");
            return gbits * 1e9 / 8.0;
        }
        how = m.str(0) + " per node";
        return gbits * 1e9 / 8.0 / gpusPerNode;
    }
    // No rate written: an InfiniBand generation by name ("NDR400 x8", "4x HDR", "InfiniBand NDR") is its port's rate
    // (XDR 800, NDR 400, HDR 200, EDR 100, FDR 56 Gb/s; a number joined to it, "NDR200", the port's own), read as if
    // written so.
    static const std::regex generation(R"(\b(xdr|ndr|hdr|edr|fdr)\s*-?\s*([0-9]{2,3})?\b)");
    if (readGenerations && std::regex_search(t, m, generation)) {
        const std::string g = m[1].str();
        const std::string rate = m[2].matched ? m[2].str()
                                 : g == "xdr" ? "800" : g == "ndr" ? "400" : g == "hdr" ? "200" : g == "edr" ? "100" : "56";
        const std::string written = linkText.substr(0, static_cast<size_t>(m.position(0))) + rate + " Gb/s" +
                                    linkText.substr(static_cast<size_t>(m.position(0) + m.length(0)));
        const double bytes = linkBytesPerSecond(written, gpusPerNode, how, false);
        if (bytes > 0.0) how += " (InfiniBand " + lower(m[0].str()) + ": " + rate + " Gb/s a port)";
        return bytes;
    }
    return 0.0;
}
} // namespace

double interNodeBytesPerSecond(const std::string& linkText, int gpusPerNode, std::string& how) {
    return linkBytesPerSecond(linkText, gpusPerNode, how, true);
}

Recompute parseRecompute(const std::string& s, bool& known) {
    const std::string r = lower(s);
    known = true;
    if (r.empty()) {
        known = false;
        return Recompute::None;
    }
    // A denial first: "no activation checkpointing", "without recompute", "w/o AC".
    if (std::regex_search(r, std::regex(R"((^|[^a-z])(no|not|without|w/o)[- ]+(full[- ]+|selective[- ]+)?(activation[- ]+|gradient[- ]+)?(checkpoint|recomput|ac([^a-z]|$)))")))
        return Recompute::None;
    // Selective: Korthikanti et al.'s attention-only recompute, torchtitan's op-level SAC.
    if (contains(r, "selective") || contains(r, "attention-only") || contains(r, "attention only") ||
        contains(r, "core attention") || std::regex_search(r, std::regex(R"((^|[^a-z])sac([^a-z]|$))")))
        return Recompute::Selective;
    // Full: Megatron-LM's --checkpoint-activations (before --recompute-granularity), Hugging Face's gradient
    // checkpointing, activation checkpointing of whole layers.
    if (contains(r, "full") || contains(r, "every layer") || contains(r, "activation checkpointing") ||
        contains(r, "uniform") || contains(r, "block") || contains(r, "checkpoint-activations") ||
        contains(r, "checkpoint_activations") || contains(r, "checkpoint activations") ||
        contains(r, "gradient checkpointing"))
        return Recompute::Full;
    if (contains(r, "none") || r == "no" || r == "false" || contains(r, "off") || contains(r, "disabled")) return Recompute::None;
    known = false;
    return Recompute::None;
}

std::vector<std::string> pythonStringList(const std::string& text) {
    std::vector<std::string> items{""};
    for (char ch : text) {
        if (ch == ',') items.emplace_back();
        else if (ch != '[' && ch != ']' && ch != '\'' && ch != '"' && ch != ' ') items.back() += ch;
    }
    if (items.size() == 1 && items.front().empty()) items.clear();
    return items;
}

std::vector<std::string> sentencesAbout(const std::string& words, const std::regex& about) {
    static const std::regex sentenceRe(R"([^.;]+)");
    std::vector<std::string> out;
    for (auto it = std::sregex_iterator(words.begin(), words.end(), sentenceRe); it != std::sregex_iterator(); ++it)
        if (std::regex_search(it->str(), about)) out.push_back(it->str());
    return out;
}

bool namesLightning(const std::string& words) {
    const std::string w = lower(words);
    return contains(w, "lightning") || contains(w, "fabric") || contains(w, "lit-gpt") || contains(w, "litgpt");
}

std::optional<std::pair<Recompute, std::string>> recomputeInProse(const std::string& words) {
    // Activation checkpoints and recomputation, not a model's saved checkpoints.
    static const std::regex aboutRe(
        R"(activation[- ]+checkpoint|gradient[- ]+checkpoint|checkpoint[-_ ]+activations|recomput|\bac\b|\bsac\b)");
    std::optional<std::pair<Recompute, std::string>> out;
    for (std::string sentence : sentencesAbout(lower(words), aboutRe)) {
        bool known = false;
        const Recompute rc = parseRecompute(sentence, known);
        if (!known) continue;
        sentence.erase(0, sentence.find_first_not_of(' '));
        if (out && out->first != rc) return std::nullopt;
        if (!out) out = std::pair<Recompute, std::string>{rc, sentence};
    }
    return out;
}

// ZeRO stage from a number or prose ("ZeRO-3", "FULL_SHARD", "SHARD_GRAD_OP"). -1 when unknown.
int parseZero(const nlohmann::json& plan) {
    if (auto z = integer(plan, "zero")) return *z <= 3 ? static_cast<int>(*z) : -1;
    // DeepSpeed's config writes the stage as zero_optimization.stage; records copy it as zero_stage.
    if (!member(plan, "zero")) {
        if (auto z = integer(plan, "zero_stage")) return *z <= 3 ? static_cast<int>(*z) : -1;
        if (const nlohmann::json* zo = member(plan, "zero_optimization"))
            if (auto z = integer(*zo, "stage")) return *z <= 3 ? static_cast<int>(*z) : -1;
    }
    // FSDP's sharding_strategy and Megatron FSDP's data_parallel_sharding_strategy, in their own words.
    const std::string z = lower(text(plan, "zero") + " " + text(plan, "fsdp_sharding") + " " + text(plan, "fsdp") + " " +
                                text(plan, "sharding_strategy") + " " + text(plan, "data_parallel_sharding_strategy") + " " +
                                text(plan, "zero_stage"));
    auto stage = [&](char n) {
        for (const char* form : {"zero-", "zero", "zero ", "stage ", "stage-", "stage"})
            if (contains(z, std::string(form) + n)) return true;
        return false;
    };
    // The ZeRO paper's notation (Rajbhandari et al. 2020): P_os (stage 1), P_os+g (2), P_os+g+p (3).
    {
        std::string compact;
        for (char ch : z)
            if (!std::isspace(static_cast<unsigned char>(ch)) && ch != '_' && ch != '{' && ch != '}' && ch != '$') compact += ch;
        if (contains(compact, "pos+g+p")) return 3;
        if (contains(compact, "pos+g")) return 2;
        if (std::regex_search(compact, std::regex(R"((^|[^a-z])pos([^a-z+]|$))"))) return 1;
    }
    // ZeRO++ (Wang et al. 2023) is built on ZeRO-3.
    if (contains(z, "full_shard") || contains(z, "optim_grads_params") || stage('3') || contains(z, "zero++") ||
        contains(z, "zeropp"))
        return 3;
    if (contains(z, "shard_grad_op") || contains(z, "optim_grads") || stage('2')) return 2;
    if (stage('1')) return 1;
    // Megatron-Bridge's performance tables print an FSDP column: the GPUs sharding with Megatron FSDP (ZeRO-3,
    // "optim_grads_params"), 0 when the distributed optimizer runs instead.
    if (const nlohmann::json* f = member(plan, "fsdp"); f && (f->is_number() || f->is_boolean())) {
        if (auto on = boolean(plan, "fsdp"); on && *on) return 3;
    }
    if (contains(z, "no_shard") || stage('0')) return 0;
    // No ZeRO, said in words or as false ("none", "off", "disabled", "no"); true names no stage.
    if (const nlohmann::json* f = member(plan, "zero"); f && f->is_boolean() && !f->get<bool>()) return 0;
    if (std::regex_match(lower(text(plan, "zero")), std::regex(R"(\s*(none|no|off|disabled|false|not used)\s*)"))) return 0;
    return -1;
}

} // namespace tessel::sim::prose
