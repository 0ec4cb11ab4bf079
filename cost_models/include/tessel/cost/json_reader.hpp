// Strict reader for one JSON object: typed fields with ranges, every problem recorded with its JSON pointer,
// and keys that were never read reported as unknown.
#pragma once

#include "tessel/cost/errors.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tessel {

// Escapes a key for use in a JSON pointer (RFC 6901: "~" -> "~0", "/" -> "~1").
std::string jsonPointerEscape(const std::string& key);

// Reads the fields of one JSON object. Getters never throw: a missing, mistyped or out-of-range field
// is recorded in the ProblemList and a neutral value is returned, so validation continues and every
// problem is reported at once.
class ObjectReader {
public:
    // `pointer` is the JSON pointer of `value` in the document ("" for the root).
    ObjectReader(const nlohmann::json& value, std::string pointer, ProblemList& problems);

    bool isObject() const noexcept { return object_ != nullptr; }
    bool has(const std::string& key) const;
    std::string pointer(const std::string& key) const { return pointer_ + "/" + jsonPointerEscape(key); }
    const std::string& pointer() const noexcept { return pointer_; }

    int64_t requireInt(const std::string& key, int64_t lo, int64_t hi);
    int64_t optInt(const std::string& key, int64_t fallback, int64_t lo, int64_t hi);
    double requireNumber(const std::string& key, double lo, double hi);
    double optNumber(const std::string& key, double fallback, double lo, double hi);
    bool requireBool(const std::string& key);
    bool optBool(const std::string& key, bool fallback);
    std::string requireString(const std::string& key);
    std::string optString(const std::string& key, const std::string& fallback);
    std::string requireEnum(const std::string& key, const std::vector<std::string>& allowed);
    std::string optEnum(const std::string& key, const std::string& fallback,
                        const std::vector<std::string>& allowed);
    // The raw child value, marked as read; nullptr if absent.
    const nlohmann::json* child(const std::string& key);
    // Marks a key as known without reading it (e.g. a key handled elsewhere).
    void accept(const std::string& key) { seen_.insert(key); }

    // Records every key of the object that no getter read as "unknown key".
    void finish();

    ProblemList& problems() { return problems_; }

private:
    const nlohmann::json* find(const std::string& key, bool required);
    std::optional<int64_t> readInt(const std::string& key, bool required, int64_t lo, int64_t hi);
    std::optional<double> readNumber(const std::string& key, bool required, double lo, double hi);
    std::optional<std::string> readEnum(const std::string& key, bool required,
                                        const std::vector<std::string>& allowed);

    const nlohmann::json* object_ = nullptr;
    std::string pointer_;
    ProblemList& problems_;
    std::set<std::string> seen_;
};

// Checks "schema_version" (must be 1, the only version so far). It is required at a document's root
// (pointer "" or "FILE#") and optional on objects nested inside a scenario.
void checkSchemaVersion(ObjectReader& reader);

// Parses JSON text; a syntax error becomes an InputError naming `source` and the byte offset.
nlohmann::json parseJsonText(const std::string& text, const std::string& source);
// Reads and parses a file; a missing file or a syntax error becomes an InputError naming the path.
nlohmann::json readJsonFile(const std::string& path);

} // namespace tessel
