// Helpers of the export tests: scenarios by preset name, the Megatron-LM launch script and torchtitan TOML parsed
// back, and the JSON pointers an export refuses a plan at.
#pragma once

#include "tessel/sim/export.hpp"

#include "tessel/cost/errors.hpp"
#include "tessel/cost/model.hpp"
#include "tessel/cost/scenario.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace tessel::sim::export_test {

inline Scenario preset(const std::string& name) {
    return loadScenarioFile(resolveScenarioPath(name, "test"));
}

// The Megatron export parsed back: the launch line, and each `--flag [value]` line between it and "$@".
struct MegatronArgs {
    std::string launch;
    std::vector<std::string> flags;            // in order
    std::map<std::string, std::string> values; // flag -> value ("" for switches)
    bool has(const std::string& flag) const { return values.count(flag) > 0; }
    std::string at(const std::string& flag) const {
        auto it = values.find(flag);
        return it == values.end() ? "<absent>" : it->second;
    }
};

inline MegatronArgs parseMegatron(const std::string& text) {
    MegatronArgs a;
    std::istringstream in(text);
    std::string line;
    bool inArgs = false;
    bool sawEnd = false;
    while (std::getline(in, line)) {
        if (!inArgs) {
            if (line.empty() || line[0] == '#') continue;
            a.launch = line;
            EXPECT_TRUE(line.size() > 2 && line.substr(line.size() - 2) == " \\")
                << "launch line must continue: " << line;
            inArgs = true;
            continue;
        }
        if (line == "    \"$@\"") {
            sawEnd = true;
            continue;
        }
        EXPECT_FALSE(sawEnd) << "text after the last argument: " << line;
        EXPECT_EQ(line.rfind("    --", 0), 0u) << "argument lines are indented flags: " << line;
        EXPECT_TRUE(line.size() > 2 && line.substr(line.size() - 2) == " \\")
            << "missing trailing backslash: " << line;
        std::istringstream words(line.substr(0, line.size() - 2));
        std::string flag, value, extra;
        words >> flag >> value;
        // One flag a line, one value (a list flag, nargs='+', its values space-separated).
        const bool list = flag == "--hierarchical-context-parallel-sizes" || flag == "--recompute-modules";
        while (words >> extra) {
            EXPECT_TRUE(list) << "one flag and at most one value per line: " << line;
            value += " " + extra;
        }
        EXPECT_EQ(a.values.count(flag), 0u) << "flag repeated: " << flag;
        a.flags.push_back(flag);
        a.values[flag] = value;
    }
    EXPECT_TRUE(sawEnd) << "the argument list must end with \"$@\"";
    return a;
}

// A TOML file parsed as section.key -> raw value (strings keep no quotes); comments skipped.
inline std::map<std::string, std::string> parseToml(const std::string& text) {
    std::map<std::string, std::string> kv;
    std::istringstream in(text);
    std::string line, section;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        if (line.front() == '[') {
            EXPECT_EQ(line.back(), ']') << line;
            section = line.substr(1, line.size() - 2);
            continue;
        }
        const auto eq = line.find(" = ");
        EXPECT_NE(eq, std::string::npos) << "not a key = value line: " << line;
        if (eq == std::string::npos) continue;
        std::string value = line.substr(eq + 3);
        if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
            value = value.substr(1, value.size() - 2);
        const std::string key = section + "." + line.substr(0, eq);
        EXPECT_EQ(kv.count(key), 0u) << "key repeated: " << key;
        kv[key] = value;
    }
    return kv;
}

// The message of the problem an export reports at `where` ("" when it reports none there).
inline std::string messageAt(const Scenario& sc, ExportFormat f, const std::string& where) {
    try {
        exportPlan(sc, f);
    } catch (const InputError& e) {
        for (const auto& p : e.problems())
            if (p.where == where) return p.message;
    }
    return std::string();
}

// The pointers of the problems `exportPlan` throws, or a failure when it does not throw.
inline std::vector<std::string> refusal(const Scenario& s, ExportFormat f) {
    try {
        const std::string text = exportPlan(s, f);
        ADD_FAILURE() << "expected InputError, got:\n" << text;
    } catch (const InputError& e) {
        std::vector<std::string> where;
        for (const auto& p : e.problems()) {
            EXPECT_FALSE(p.message.empty());
            where.push_back(p.where);
        }
        return where;
    }
    return {};
}

inline bool contains(const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
}

// Llama 3 8B on one node as pure data parallel, ZeRO-1: a plan DeepSpeed's config expresses on its own.
inline Scenario deepspeedPlan() {
    Scenario s = preset("llama3-8b-h100");
    s.plan.tp = 1;
    s.plan.dp = 8;
    s.plan.sequenceParallel = false;
    s.plan.zeroStage = 1;
    return s;
}

} // namespace tessel::sim::export_test
