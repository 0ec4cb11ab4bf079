// Tests of the strict JSON reader: every problem collected with its JSON pointer, unknown keys rejected.
#include "tessel/cost/json_reader.hpp"

#include <gtest/gtest.h>

namespace tessel {
namespace {

TEST(JsonReader, CollectsEveryProblemWithPointers) {
    auto doc = nlohmann::json::parse(R"({"a": "x", "b": -3, "c": 1.5, "zzz": 1, "nested": {"k": true}})");
    ProblemList problems;
    ObjectReader r(doc, "/root", problems);
    r.requireInt("a", 0, 10);
    r.requireInt("b", 0, 10);
    r.requireInt("c", 0, 10);
    r.requireInt("missing", 0, 10);
    ObjectReader n(*r.child("nested"), r.pointer("nested"), problems);
    n.requireString("k");
    n.finish();
    r.finish();
    ASSERT_EQ(problems.items().size(), 6u);
    EXPECT_EQ(problems.items()[0].where, "/root/a");
    EXPECT_NE(problems.items()[0].message.find("expected an integer"), std::string::npos);
    EXPECT_EQ(problems.items()[1].where, "/root/b");
    EXPECT_NE(problems.items()[1].message.find("between 0 and 10"), std::string::npos);
    EXPECT_EQ(problems.items()[2].where, "/root/c");
    EXPECT_EQ(problems.items()[3].where, "/root/missing");
    EXPECT_EQ(problems.items()[4].where, "/root/nested/k");
    EXPECT_EQ(problems.items()[5].where, "/root/zzz");
    EXPECT_EQ(problems.items()[5].message, "unknown key");
}

TEST(JsonReader, WholeFloatsAreIntegersAndDefaultsApply) {
    auto doc = nlohmann::json::parse(R"({"n": 1e9, "s": "on"})");
    ProblemList problems;
    ObjectReader r(doc, "", problems);
    EXPECT_EQ(r.requireInt("n", 0, int64_t{1} << 40), 1000000000);
    EXPECT_EQ(r.optEnum("s", "off", {"on", "off"}), "on");
    EXPECT_EQ(r.optInt("absent", 7, 0, 10), 7);
    EXPECT_TRUE(r.optBool("flag", true));
    r.finish();
    EXPECT_TRUE(problems.empty());
}

TEST(JsonReader, EnumListsTheAllowedValues) {
    auto doc = nlohmann::json::parse(R"({"mode": "sometimes"})");
    ProblemList problems;
    ObjectReader r(doc, "", problems);
    r.requireEnum("mode", {"none", "full"});
    ASSERT_EQ(problems.items().size(), 1u);
    EXPECT_EQ(problems.items()[0].where, "/mode");
    EXPECT_NE(problems.items()[0].message.find("none|full"), std::string::npos);
}

TEST(JsonReader, PointerEscapesSpecialCharacters) {
    EXPECT_EQ(jsonPointerEscape("a/b~c"), "a~1b~0c");
}

TEST(JsonReader, MalformedJsonAndMissingFileAreInputErrors) {
    EXPECT_THROW(parseJsonText("{\"a\": ", "x.json"), InputError);
    try {
        readJsonFile("/nonexistent/tessel.json");
        FAIL();
    } catch (const InputError& e) {
        EXPECT_EQ(e.problems().front().where, "/nonexistent/tessel.json");
    }
}

TEST(JsonReader, DuplicateKeysAreReportedAtTheirPointers) {
    // JSON parsers keep the last of two equal keys; a user's second "tp" must not silently replace the first.
    try {
        parseJsonText(R"({"plan": {"tp": 0, "pp": 2, "tp": 1}, "list": [{"a": 1}, {"b": 2, "b": 3}]})", "x.json");
        FAIL() << "duplicate keys accepted";
    } catch (const InputError& e) {
        ASSERT_EQ(e.problems().size(), 2u);
        EXPECT_EQ(e.problems()[0].where, "x.json#/plan/tp");
        EXPECT_NE(e.problems()[0].message.find("duplicate key"), std::string::npos);
        EXPECT_EQ(e.problems()[1].where, "x.json#/list/1/b");
    }
    // The same key in sibling objects, and escaped pointer characters, are not duplicates.
    const nlohmann::json ok = parseJsonText(R"({"a": {"k": 1}, "b": {"k": 2}, "c/d": [[{"k": 1}], {"k": 2}]})", "x.json");
    EXPECT_EQ(ok["b"]["k"], 2);
    try {
        parseJsonText(R"({"c/d": [[{"k": 1, "k": 2}]]})", "y.json");
        FAIL();
    } catch (const InputError& e) {
        EXPECT_EQ(e.problems().front().where, "y.json#/c~1d/0/0/k");
    }
}

TEST(JsonReader, NumberBeyondADoubleIsAnInputError) {
    // nlohmann throws out_of_range (not parse_error) for 1e999: an input error naming the file, not an internal one.
    try {
        parseJsonText(R"({"plan": {"tp": 1e999}})", "x.json");
        FAIL();
    } catch (const InputError& e) {
        EXPECT_EQ(e.problems().front().where, "x.json");
        EXPECT_NE(e.problems().front().message.find("out of range"), std::string::npos);
    }
}

TEST(JsonReader, NotAnObjectIsReported) {
    ProblemList problems;
    ObjectReader r(nlohmann::json::array(), "/plan", problems);
    EXPECT_FALSE(r.isObject());
    ASSERT_EQ(problems.items().size(), 1u);
    EXPECT_EQ(problems.items()[0].where, "/plan");
}

} // namespace
} // namespace tessel
