// What the GUI asks the search for.
#include "core/search_request.hpp"

#include <QRegularExpression>

#include <map>

namespace tessel::gui {

void applyFixes(const QString& text, sim::SearchSpace& space, ProblemList& problems) {
    // The same keys and messages as `tessel search --fix`; entries may be separated by spaces, commas or ';'.
    static const QRegularExpression separators(QStringLiteral("[\\s,;]+"));
    std::vector<std::string> entries;
    for (const QString& entry : text.split(separators, Qt::SkipEmptyParts)) entries.push_back(entry.toStdString());
    sim::applySearchFixes(entries, space, problems, "fix");
}

SearchRequest makeSearchRequest(const Scenario& scenario, const QString& fixText, int topK, ProblemList& problems,
                                bool memoryBand) {
    SearchRequest r;
    r.model = scenario.model;
    r.cluster = scenario.cluster;
    r.space.gpus = scenario.cluster.totalGpus();
    sim::takeScenarioPlan(r.space, scenario.plan);
    // A scenario that shards hybrid asks the search to weigh hybrid sharding too (tessel search --hybrid-sharding).
    r.space.hybridSharding = scenario.plan.zeroReplicas > 1;
    r.space.memoryBand = memoryBand;
    applyFixes(fixText, r.space, problems);
    r.options.topK = topK;
    problems.append(sim::searchProblems(r.model, r.cluster, r.space, r.options));
    return r;
}

} // namespace tessel::gui
