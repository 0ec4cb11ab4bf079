// Every shipped published-run record with one field made hostile (removed, null, negative, zero, a word, a huge
// number, the wrong JSON type) is read or refused naming the field, never thrown out of or crashed on, and what is
// read predicts to finite numbers (`tessel validate`'s "never a crash, never dropped" over the records' own fields).
#include "tessel/sim/validation.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tessel::sim {
namespace {

// The shipped runs and every check set beside them, each record with the file it came from.
std::vector<nlohmann::json> shippedRecords() {
    const std::filesystem::path shared = defaultValidationFile();
    std::vector<std::filesystem::path> files{shared};
    std::vector<std::filesystem::path> checks;
    for (const auto& entry : std::filesystem::directory_iterator(shared.parent_path())) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("check_", 0) == 0 && entry.path().extension() == ".json") checks.push_back(entry.path());
    }
    std::sort(checks.begin(), checks.end());
    files.insert(files.end(), checks.begin(), checks.end());
    std::vector<nlohmann::json> records;
    for (const auto& file : files) {
        const nlohmann::json doc = nlohmann::json::parse(std::ifstream(file));
        const nlohmann::json& list = doc.is_object() && doc.contains("records") ? doc["records"] : doc;
        for (const auto& r : list)
            if (r.is_object()) records.push_back(r);
    }
    return records;
}

// The leaves of the parts a prediction reads (model, system, plan, measured), as JSON pointers.
std::vector<nlohmann::json::json_pointer> leaves(const nlohmann::json& record) {
    std::vector<nlohmann::json::json_pointer> out;
    for (const char* part : {"model", "system", "plan", "measured"}) {
        if (!record.contains(part) || !record[part].is_object()) continue;
        for (const auto& [key, value] : record[part].items()) {
            if (value.is_object() || value.is_array()) continue;
            out.push_back(nlohmann::json::json_pointer("/" + std::string(part) + "/" + key));
        }
    }
    return out;
}

TEST(ValidationMutations, EveryHostileFieldIsReadOrRefusedNamingItNeverThrown) {
    const std::vector<nlohmann::json> records = shippedRecords();
    ASSERT_GT(records.size(), 400u);
    const std::vector<nlohmann::json> hostile{nullptr, -1, 0, "x", 1e300, nlohmann::json::object(), true};
    std::vector<LoadedRecord> read;
    size_t mutations = 0, refused = 0;
    for (size_t i = 0; i < records.size(); ++i) {
        const auto paths = leaves(records[i]);
        for (size_t p = 0; p < paths.size(); ++p) {
            // Each kind of field under every value across the records, a field of a record under one value in
            // twenty: about 5000 records read, not 490 x 50 x 8.
            for (size_t v = 0; v <= hostile.size(); ++v) {
                if ((i + p + v) % 20 != 0) continue;
                nlohmann::json mutated = records[i];
                if (v == hostile.size()) mutated[paths[p].parent_pointer()].erase(paths[p].back());
                else mutated[paths[p]] = hostile[v];
                std::vector<LoadedRecord> loaded;
                ASSERT_NO_THROW(loaded = loadValidationRecords(nlohmann::json::array({mutated}), "runs.json"))
                    << records[i].value("id", "?") << " " << paths[p].to_string();
                ASSERT_EQ(loaded.size(), 1u);
                ++mutations;
                if (loaded[0].validationCase) {
                    if (mutations % 60 == 0) read.push_back(loaded[0]); // a sample to predict, below
                } else {
                    ++refused;
                    EXPECT_EQ(loaded[0].refusal.rfind("runs.json#/0", 0), 0u)
                        << records[i].value("id", "?") << " " << paths[p].to_string() << ": " << loaded[0].refusal;
                }
            }
        }
    }
    EXPECT_GT(mutations, 4000u);
    EXPECT_GT(refused, 0u);
    ASSERT_GT(read.size(), 20u);
    // What is read predicts: no throw, and every number it prints is finite.
    ValidationReport report;
    ASSERT_NO_THROW(report = validateRecords(read));
    ASSERT_EQ(report.results.size(), read.size());
    for (const CaseResult& r : report.results) {
        if (!r.predicted) {
            EXPECT_FALSE(r.reason.empty()) << r.id;
            continue;
        }
        EXPECT_TRUE(std::isfinite(r.predictedStepSeconds) && r.predictedStepSeconds > 0.0) << r.id << " " << r.plan;
        EXPECT_TRUE(std::isfinite(r.predictedPeakMemoryBytes) && r.predictedPeakMemoryBytes > 0.0) << r.id;
        if (r.stepError) EXPECT_TRUE(std::isfinite(*r.stepError)) << r.id;
    }
}

} // namespace
} // namespace tessel::sim
