// Entry point of tessel_gui_tests: `tessel_gui_tests SUITE [Qt Test options]` runs one suite. Suites that
// need no window run under QCoreApplication (as QTEST_GUILESS_MAIN would), painting suites under
// QGuiApplication, and the main-window suite under QApplication.
#include "gui_test_support.hpp"

#include "core/search_request.hpp"

#include <QApplication>
#include <QCoreApplication>
#include <QGuiApplication>
#include <QTest>

#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

namespace tessel::gui::test {

Scenario llamaScenario() { return loadScenarioFile(resolveScenarioPath("llama3-8b-h100", "test")); }

const sim::SearchResult& smallSearchResult() {
    static const sim::SearchResult result = [] {
        ProblemList problems;
        SearchRequest r = makeSearchRequest(llamaScenario(), QStringLiteral("tp=2"), 40, problems);
        problems.throwIfAny();
        return sim::searchPlans(r.model, r.cluster, r.space, r.options);
    }();
    return result;
}

} // namespace tessel::gui::test

namespace {
enum class AppKind { Core, Gui, Widgets };
struct Suite {
    const char* name;
    AppKind app;
    std::function<std::unique_ptr<QObject>()> make;
};
} // namespace

int main(int argc, char** argv) {
    using namespace tessel::gui::test;
    const std::vector<Suite> suites{
        {"models", AppKind::Core, makeModelsTest},     {"session", AppKind::Core, makeSessionTest},
        {"timeline", AppKind::Core, makeTimelineTest}, {"measured", AppKind::Core, makeMeasuredTest},
        {"search", AppKind::Core, makeSearchTest},     {"charts", AppKind::Gui, makeChartsTest},
        {"window", AppKind::Widgets, makeWindowTest},
    };
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s SUITE [Qt Test options]; suites:", argv[0]);
        for (const auto& s : suites) std::fprintf(stderr, " %s", s.name);
        std::fprintf(stderr, "\n");
        return 2;
    }
    const Suite* suite = nullptr;
    for (const auto& s : suites)
        if (std::strcmp(s.name, argv[1]) == 0) suite = &s;
    if (!suite) {
        std::fprintf(stderr, "unknown suite %s\n", argv[1]);
        return 2;
    }
    // Qt Test sees the program name and the options after the suite name.
    std::vector<char*> args{argv[0]};
    for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
    int qtArgc = static_cast<int>(args.size());
    std::unique_ptr<QCoreApplication> app;
    switch (suite->app) {
    case AppKind::Core: app = std::make_unique<QCoreApplication>(qtArgc, args.data()); break;
    case AppKind::Gui: app = std::make_unique<QGuiApplication>(qtArgc, args.data()); break;
    case AppKind::Widgets: app = std::make_unique<QApplication>(qtArgc, args.data()); break;
    }
    auto test = suite->make();
    return QTest::qExec(test.get(), qtArgc, args.data());
}
