// Strict JSON object reader: typed, range-checked fields; unknown keys and every problem reported by pointer.
#include "tessel/cost/json_reader.hpp"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace tessel {

std::string jsonPointerEscape(const std::string& key) {
    std::string out;
    for (char c : key) {
        if (c == '~') out += "~0";
        else if (c == '/') out += "~1";
        else out += c;
    }
    return out;
}

namespace {
std::string typeName(const nlohmann::json& v) {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "a boolean";
    if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
    if (v.is_number()) return "a number";
    if (v.is_string()) return "a string";
    if (v.is_array()) return "an array";
    return "an object";
}

std::string formatNumber(double v) {
    std::ostringstream s;
    s << v;
    return s.str();
}
} // namespace

ObjectReader::ObjectReader(const nlohmann::json& value, std::string pointer, ProblemList& problems)
    : pointer_(std::move(pointer)), problems_(problems) {
    if (value.is_object()) object_ = &value;
    else problems_.add(pointer_.empty() ? "/" : pointer_, "expected an object, got " + typeName(value));
}

bool ObjectReader::has(const std::string& key) const { return object_ && object_->contains(key); }

const nlohmann::json* ObjectReader::find(const std::string& key, bool required) {
    seen_.insert(key);
    if (!object_) return nullptr;
    auto it = object_->find(key);
    if (it == object_->end()) {
        if (required) problems_.add(pointer(key), "required field is missing");
        return nullptr;
    }
    return &*it;
}

std::optional<int64_t> ObjectReader::readInt(const std::string& key, bool required, int64_t lo, int64_t hi) {
    const auto* v = find(key, required);
    if (!v) return std::nullopt;
    int64_t value = 0;
    if (v->is_number_integer()) {
        value = v->get<int64_t>();
    } else if (v->is_number_float() && std::isfinite(v->get<double>()) &&
               std::floor(v->get<double>()) == v->get<double>() && std::fabs(v->get<double>()) < 9e15) {
        value = static_cast<int64_t>(v->get<double>()); // 1e9 written as a float is still a whole number
    } else {
        problems_.add(pointer(key), "expected an integer, got " + typeName(*v));
        return std::nullopt;
    }
    if (value < lo || value > hi) {
        problems_.add(pointer(key), "must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                                        ", got " + std::to_string(value));
        return std::nullopt;
    }
    return value;
}

std::optional<double> ObjectReader::readNumber(const std::string& key, bool required, double lo, double hi) {
    const auto* v = find(key, required);
    if (!v) return std::nullopt;
    if (!v->is_number()) {
        problems_.add(pointer(key), "expected a number, got " + typeName(*v));
        return std::nullopt;
    }
    double value = v->get<double>();
    if (!std::isfinite(value) || value < lo || value > hi) {
        problems_.add(pointer(key), "must be between " + formatNumber(lo) + " and " + formatNumber(hi) +
                                        ", got " + formatNumber(value));
        return std::nullopt;
    }
    return value;
}

std::optional<std::string> ObjectReader::readEnum(const std::string& key, bool required,
                                                  const std::vector<std::string>& allowed) {
    const auto* v = find(key, required);
    if (!v) return std::nullopt;
    if (!v->is_string()) {
        problems_.add(pointer(key), "expected a string, got " + typeName(*v));
        return std::nullopt;
    }
    auto s = v->get<std::string>();
    for (const auto& a : allowed)
        if (a == s) return s;
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : "|") + a;
    problems_.add(pointer(key), "must be one of " + list + ", got \"" + s + "\"");
    return std::nullopt;
}

int64_t ObjectReader::requireInt(const std::string& key, int64_t lo, int64_t hi) {
    return readInt(key, true, lo, hi).value_or(lo);
}
int64_t ObjectReader::optInt(const std::string& key, int64_t fallback, int64_t lo, int64_t hi) {
    return readInt(key, false, lo, hi).value_or(fallback);
}
double ObjectReader::requireNumber(const std::string& key, double lo, double hi) {
    return readNumber(key, true, lo, hi).value_or(lo);
}
double ObjectReader::optNumber(const std::string& key, double fallback, double lo, double hi) {
    return readNumber(key, false, lo, hi).value_or(fallback);
}

bool ObjectReader::requireBool(const std::string& key) {
    const auto* v = find(key, true);
    if (!v) return false;
    if (!v->is_boolean()) {
        problems_.add(pointer(key), "expected true or false, got " + typeName(*v));
        return false;
    }
    return v->get<bool>();
}
bool ObjectReader::optBool(const std::string& key, bool fallback) {
    if (!has(key)) {
        seen_.insert(key);
        return fallback;
    }
    return requireBool(key);
}

std::string ObjectReader::requireString(const std::string& key) {
    const auto* v = find(key, true);
    if (!v) return {};
    if (!v->is_string()) {
        problems_.add(pointer(key), "expected a string, got " + typeName(*v));
        return {};
    }
    return v->get<std::string>();
}
std::string ObjectReader::optString(const std::string& key, const std::string& fallback) {
    if (!has(key)) {
        seen_.insert(key);
        return fallback;
    }
    return requireString(key);
}

std::string ObjectReader::requireEnum(const std::string& key, const std::vector<std::string>& allowed) {
    return readEnum(key, true, allowed).value_or(allowed.front());
}
std::string ObjectReader::optEnum(const std::string& key, const std::string& fallback,
                                  const std::vector<std::string>& allowed) {
    return readEnum(key, false, allowed).value_or(fallback);
}

const nlohmann::json* ObjectReader::child(const std::string& key) { return find(key, false); }

void ObjectReader::finish() {
    if (!object_) return;
    for (auto it = object_->begin(); it != object_->end(); ++it)
        if (!seen_.count(it.key())) problems_.add(pointer(it.key()), "unknown key");
}

void checkSchemaVersion(ObjectReader& reader) {
    const auto& ptr = reader.pointer();
    const bool root = ptr.empty() || ptr.back() == '#';
    if (!reader.has("schema_version")) {
        if (!root) {
            reader.accept("schema_version");
            return;
        }
        reader.problems().add(reader.pointer("schema_version"), "required field is missing (use 1)");
        reader.accept("schema_version");
        return;
    }
    reader.requireInt("schema_version", 1, 1);
}

namespace {
// Where the parser is: one frame per open object or array, with the key or index of the value being read, so
// a duplicate key is reported at its JSON pointer. nlohmann::json keeps the last of two equal keys without a
// word (RFC 8259 leaves the choice open), which would let a user's second "tp" silently replace the first.
struct ParseFrame {
    bool array = false;
    int64_t index = -1;
    std::string key;
    std::set<std::string> keys;
};

std::string framePointer(const std::vector<ParseFrame>& frames, size_t depth) {
    std::string out;
    for (size_t i = 0; i < depth && i < frames.size(); ++i)
        out += "/" + (frames[i].array ? std::to_string(frames[i].index) : jsonPointerEscape(frames[i].key));
    return out;
}
} // namespace

nlohmann::json parseJsonText(const std::string& text, const std::string& source) {
    using Event = nlohmann::json::parse_event_t;
    std::vector<ParseFrame> frames;
    ProblemList duplicates;
    auto enterValue = [&]() {
        if (!frames.empty() && frames.back().array) ++frames.back().index;
    };
    auto callback = [&](int, Event event, nlohmann::json& parsed) -> bool {
        switch (event) {
        case Event::object_start:
        case Event::array_start:
            enterValue();
            frames.push_back({event == Event::array_start, -1, {}, {}});
            break;
        case Event::object_end:
        case Event::array_end:
            if (!frames.empty()) frames.pop_back();
            break;
        case Event::key: {
            ParseFrame& f = frames.back();
            f.key = parsed.get<std::string>();
            if (!f.keys.insert(f.key).second)
                duplicates.add(source + "#" + framePointer(frames, frames.size()),
                               "duplicate key: the object states it more than once (JSON keeps only the last)");
            break;
        }
        case Event::value:
            enterValue();
            break;
        }
        return true;
    };
    nlohmann::json doc;
    try {
        doc = nlohmann::json::parse(text, callback);
    } catch (const nlohmann::json::parse_error& e) {
        throw InputError(source, std::string("malformed JSON: ") + e.what());
    } catch (const nlohmann::json::out_of_range& e) {
        // A number literal beyond a double's range (1e999): the parser stops without a byte offset.
        throw InputError(source, std::string("a number is out of range (beyond +-1.8e308): ") + e.what());
    }
    duplicates.throwIfAny();
    return doc;
}

nlohmann::json readJsonFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path, "cannot open file");
    std::ostringstream buf;
    buf << in.rdbuf();
    return parseJsonText(buf.str(), path);
}

} // namespace tessel
