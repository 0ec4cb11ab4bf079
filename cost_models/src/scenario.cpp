// Scenario documents (model + cluster + plan) and resolution of preset names and paths.
#include "tessel/cost/scenario.hpp"

#include "tessel/cost/json_reader.hpp"

#include <algorithm>
#include <cstdlib>
#include <system_error>

#ifndef TESSEL_SCENARIO_DIR
#define TESSEL_SCENARIO_DIR ""
#endif

namespace fs = std::filesystem;

namespace tessel {

namespace {
// Problems found inside a referenced file are reported as "FILE#/pointer".
std::string filePointer(const fs::path& file) { return file.string() + "#"; }

std::string joinNames(const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
    return s.empty() ? "(none found)" : s;
}

fs::path findPreset(const std::string& kind, const std::string& name) {
    for (const auto& dir : scenarioSearchPath()) {
        fs::path candidate = dir / kind / (name + ".json");
        std::error_code ec;
        if (fs::is_regular_file(candidate, ec)) return candidate;
    }
    return {};
}

bool looksLikePath(const std::string& ref) {
    return ref.find('/') != std::string::npos || ref.ends_with(".json") || ref == "." || ref == "..";
}

// Why a path that names no regular file cannot be read: absent, or there but a device, pipe or socket.
std::string notAFile(const std::string& ref) {
    std::error_code ec;
    if (fs::exists(ref, ec))
        return "\"" + ref + "\" is not a regular file (a device, pipe or socket): give a JSON file";
    return "file \"" + ref + "\" does not exist";
}

nlohmann::json loadRefDocument(const std::string& ref, const std::string& kind, const std::string& where,
                               fs::path& resolved) {
    std::error_code ec;
    fs::path p(ref);
    if (fs::is_directory(p, ec)) {
        if (kind != "models") throw InputError(where, "\"" + ref + "\" is a folder, expected a " + kind + " file");
        p /= "config.json";
        if (!fs::is_regular_file(p, ec))
            throw InputError(where, "folder \"" + ref + "\" has no config.json (expected a HuggingFace checkpoint folder)");
    } else if (!fs::is_regular_file(p, ec)) {
        if (looksLikePath(ref)) throw InputError(where, notAFile(ref));
        p = findPreset(kind, ref);
        if (p.empty())
            throw InputError(where, "no file or preset named \"" + ref + "\"; presets: " + joinNames(presetNames(kind)));
    }
    resolved = p;
    return readJsonFile(p.string());
}
} // namespace

std::vector<fs::path> scenarioSearchPath() {
    std::vector<fs::path> dirs;
    if (const char* env = std::getenv("TESSEL_SCENARIOS")) {
        std::string s(env);
        size_t start = 0;
        while (start <= s.size()) {
            size_t end = s.find(':', start);
            if (end == std::string::npos) end = s.size();
            if (end > start) dirs.emplace_back(s.substr(start, end - start));
            start = end + 1;
        }
    }
    if (std::string(TESSEL_SCENARIO_DIR).size() > 0) dirs.emplace_back(TESSEL_SCENARIO_DIR);
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) dirs.push_back(exe.parent_path().parent_path() / "share" / "tessel" / "scenarios");
    return dirs;
}

std::vector<std::string> presetNames(const std::string& kind) {
    std::vector<std::string> names;
    for (const auto& dir : scenarioSearchPath()) {
        std::error_code ec;
        for (fs::directory_iterator it(dir / kind, ec), end; !ec && it != end; it.increment(ec)) {
            if (it->path().extension() == ".json") {
                auto stem = it->path().stem().string();
                if (std::find(names.begin(), names.end(), stem) == names.end()) names.push_back(stem);
            }
        }
    }
    std::sort(names.begin(), names.end());
    return names;
}

ModelConfig loadModelRef(const std::string& ref, const std::string& where) {
    fs::path resolved;
    auto doc = loadRefDocument(ref, "models", where, resolved);
    return parseModel(doc, filePointer(resolved));
}

ClusterConfig loadClusterRef(const std::string& ref, const std::string& where) {
    fs::path resolved;
    auto doc = loadRefDocument(ref, "clusters", where, resolved);
    return parseCluster(doc, filePointer(resolved));
}

fs::path resolveScenarioPath(const std::string& ref, const std::string& where) {
    std::error_code ec;
    if (fs::is_regular_file(ref, ec)) return fs::path(ref);
    if (fs::is_directory(ref, ec)) throw InputError(where, "\"" + ref + "\" is a folder, expected a scenario file");
    if (looksLikePath(ref)) throw InputError(where, notAFile(ref));
    auto p = findPreset("plans", ref);
    if (p.empty())
        throw InputError(where, "no scenario file or preset named \"" + ref + "\"; presets: " + joinNames(presetNames("plans")));
    return p;
}

PrecisionRecipe Scenario::recipe() const {
    if (!findPrecisionRecipe(plan.precision))
        throw InputError("/plan/precision", "unknown precision recipe \"" + plan.precision + "\"");
    // On this scenario's GPU (fp8OnGpu: Blackwell's FP8 copies without a transpose), as the memory model takes it.
    return fp8OnGpu(precisionRecipeOf(plan), plan.framework, cluster.gpu);
}

Scenario parseScenario(const nlohmann::json& doc, const std::string& source, const fs::path& baseDir) {
    Scenario s;
    ProblemList problems;
    const std::string base = source.empty() ? "" : source + "#";
    ObjectReader r(doc, base, problems);
    if (!r.isObject()) problems.throwIfAny();
    checkSchemaVersion(r);
    s.name = r.optString("name", "");
    s.description = r.optString("description", "");
    auto loadPart = [&](const char* key, auto&& fromRef, auto&& fromObject) {
        const auto* v = r.child(key);
        if (!v) {
            problems.add(r.pointer(key), "required field is missing (a preset name, a file path, or an object)");
            return;
        }
        if (v->is_string()) {
            try {
                // Beside the scenario file first (a scenario and the cluster file it names travel together).
                std::string ref = v->get<std::string>();
                std::error_code ec;
                if (!baseDir.empty() && fs::path(ref).is_relative() && fs::exists(baseDir / ref, ec))
                    ref = (baseDir / ref).string();
                fromRef(ref, r.pointer(key));
            } catch (const InputError& e) {
                problems.append(e.problems());
            }
        } else {
            fromObject(*v, r.pointer(key));
        }
    };
    loadPart(
        "model", [&](const std::string& ref, const std::string& w) { s.model = loadModelRef(ref, w); },
        [&](const nlohmann::json& v, const std::string& w) { s.model = parseModel(v, w, problems); });
    loadPart(
        "cluster", [&](const std::string& ref, const std::string& w) { s.cluster = loadClusterRef(ref, w); },
        [&](const nlohmann::json& v, const std::string& w) { s.cluster = parseCluster(v, w, problems); });
    if (r.has("nodes")) s.cluster.nodes = static_cast<int>(r.requireInt("nodes", 1, 1 << 20));
    // Part of a node (one process of a workstation's cores, one GPU of eight): the plan then uses that many per node.
    if (r.has("gpus_per_node")) s.cluster.gpusPerNode = static_cast<int>(r.requireInt("gpus_per_node", 1, 1 << 20));
    if (r.has("nodes") || r.has("gpus_per_node"))
        checkClusterGpus(s.cluster.nodes, s.cluster.gpusPerNode, r.pointer(r.has("nodes") ? "nodes" : "gpus_per_node"),
                         problems);
    if (const auto* p = r.child("plan")) s.plan = parsePlan(*p, r.pointer("plan"), problems);
    else r.accept("plan");
    r.finish();
    problems.throwIfAny();
    resolvePipelineSplit(s.model, s.cluster, s.plan);
    return s;
}

Scenario loadScenarioFile(const fs::path& path) {
    auto doc = readJsonFile(path.string());
    Scenario s = parseScenario(doc, path.string(), path.parent_path());
    if (s.name.empty()) s.name = path.stem().string();
    return s;
}

Scenario defaultScenario() {
    return loadScenarioFile(resolveScenarioPath("gpt3-175b-megatron", "default scenario"));
}

void finishScenario(const Scenario& s) {
    ProblemList problems;
    validatePlan(s.model, s.cluster, s.plan, "/plan", problems);
    problems.throwIfAny();
}

nlohmann::json scenarioToJson(const Scenario& s) {
    nlohmann::json j{{"schema_version", 1},
                     {"name", s.name},
                     {"model", modelToJson(s.model)},
                     {"cluster", clusterToJson(s.cluster)},
                     {"plan", planToJson(s.plan)}};
    if (!s.description.empty()) j["description"] = s.description;
    return j;
}

} // namespace tessel
