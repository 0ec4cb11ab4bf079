// What the GUI asks the search for.
#include "core/search_request.hpp"

#include <QRegularExpression>

#include <map>

namespace tessel::gui {

void applyFixes(const QString& text, sim::SearchSpace& space, ProblemList& problems) {
    static const QRegularExpression separators(QStringLiteral("[\\s,;]+"));
    static const std::map<std::string, std::string> intKeys{
        {"tp", "tp"}, {"pp", "pp"}, {"dp", "dp"}, {"cp", "cp"}, {"ep", "ep"}, {"vpp", "vpp"},
        {"micro_batch", "micro_batch"}, {"mb", "micro_batch"}, {"micro-batch", "micro_batch"},
        {"zero_stage", "zero_stage"}, {"zero", "zero_stage"}};
    for (const QString& entry : text.split(separators, Qt::SkipEmptyParts)) {
        const qsizetype eq = entry.indexOf(QLatin1Char('='));
        if (eq <= 0 || eq + 1 >= entry.size()) {
            problems.add("fix", "expected key=value, got \"" + entry.toStdString() + "\"");
            continue;
        }
        const std::string key = entry.left(eq).trimmed().toLower().toStdString();
        const QString value = entry.mid(eq + 1).trimmed();
        const std::string v = value.toStdString();
        const std::string where = "fix " + key;
        if (auto it = intKeys.find(key); it != intKeys.end()) {
            bool ok = false;
            const int n = value.toInt(&ok);
            if (ok) space.fixed[it->second] = n;
            else problems.add(where, "expected an integer, got \"" + v + "\"");
        } else if (key == "recompute") {
            if (v == "none") space.recompute = {Recompute::None};
            else if (v == "selective") space.recompute = {Recompute::Selective};
            else if (v == "full") space.recompute = {Recompute::Full};
            else problems.add(where, "must be none, selective or full, got \"" + v + "\"");
        } else if (key == "schedule") {
            if (v == "gpipe") space.schedules = {Schedule::Gpipe};
            else if (v == "1f1b") space.schedules = {Schedule::OneFOneB};
            else if (v == "interleaved_1f1b") space.schedules = {Schedule::Interleaved1F1B};
            else if (v == "zero_bubble") space.schedules = {Schedule::ZeroBubble};
            else problems.add(where, "must be gpipe, 1f1b, interleaved_1f1b or zero_bubble, got \"" + v + "\"");
        } else if (key == "sp" || key == "sequence_parallel") {
            if (v == "on" || v == "true") space.sequenceParallel = {true};
            else if (v == "off" || v == "false") space.sequenceParallel = {false};
            else problems.add(where, "must be on or off, got \"" + v + "\"");
        } else if (key == "rank_order") {
            space.rankOrders = {parseRankOrder(v, where, problems)};
        } else {
            problems.add(where, "unknown key; known keys: tp, pp, dp, cp, ep, vpp, micro_batch, zero_stage, recompute, "
                                "schedule, sp, rank_order");
        }
    }
}

SearchRequest makeSearchRequest(const Scenario& scenario, const QString& fixText, int topK, ProblemList& problems) {
    SearchRequest r;
    r.model = scenario.model;
    r.cluster = scenario.cluster;
    r.space.gpus = scenario.cluster.totalGpus();
    r.space.globalBatch = scenario.plan.globalBatch;
    r.space.precision = scenario.plan.precision;
    r.space.flashAttention = scenario.plan.flashAttention;
    applyFixes(fixText, r.space, problems);
    r.options.topK = topK;
    problems.append(sim::searchProblems(r.model, r.cluster, r.space, r.options));
    return r;
}

} // namespace tessel::gui
