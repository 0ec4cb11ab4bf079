// Shared pieces of the GUI test suites: the suite registry (one ctest per suite, each in its own process so
// it gets the Qt application type it needs) and small scenarios that search in well under a second.
#pragma once

#include "tessel/cost/scenario.hpp"
#include "tessel/sim/search.hpp"

#include <QObject>

#include <memory>

namespace tessel::gui::test {

// Llama 3 8B on one DGX H100 node (8 GPUs): a search space small enough to enumerate in a test.
Scenario llamaScenario();
// A finished search of llamaScenario() (tp fixed to 2 to keep it short), run once per process.
const sim::SearchResult& smallSearchResult();

std::unique_ptr<QObject> makeModelsTest();
std::unique_ptr<QObject> makeSessionTest();
std::unique_ptr<QObject> makeTimelineTest();
std::unique_ptr<QObject> makeMeasuredTest();
std::unique_ptr<QObject> makeChartsTest();
std::unique_ptr<QObject> makeSearchTest();
std::unique_ptr<QObject> makeWindowTest();

} // namespace tessel::gui::test
