// Text for numbers shown in the GUI: GiB, adaptive seconds, percentages, plan summaries.
#include "core/format.hpp"

#include <cmath>

namespace tessel::gui {

QString gibText(double bytes, int decimals) { return QString::number(toGiB(bytes), 'f', decimals) + QStringLiteral(" GiB"); }

QString gibLabel(double gib) {
    return gib >= 100.0 || std::fabs(gib - std::round(gib)) < 1e-9 ? QString::number(gib, 'f', 0) : QString::number(gib, 'f', 1);
}

QString secondsText(double seconds) {
    const double a = std::fabs(seconds);
    auto three = [](double v) {
        // Three significant digits without switching to exponent notation.
        const double m = std::fabs(v);
        const int decimals = m >= 100.0 ? 0 : m >= 10.0 ? 1 : 2;
        return QString::number(v, 'f', decimals);
    };
    if (a == 0.0) return QStringLiteral("0 s");
    if (a >= 1.0) return three(seconds) + QStringLiteral(" s");
    if (a >= 1e-3) return three(seconds * 1e3) + QStringLiteral(" ms");
    return three(seconds * 1e6) + QStringLiteral(" us");
}

QString percentText(double fraction, int decimals) { return QString::number(fraction * 100.0, 'f', decimals) + QLatin1Char('%'); }

QString signedPercentText(double fraction, int decimals) {
    return (fraction >= 0.0 ? QStringLiteral("+") : QString()) + percentText(fraction, decimals);
}

QString countText(uint64_t n) {
    QString s = QString::number(static_cast<qulonglong>(n));
    for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(i, QLatin1Char(','));
    return s;
}

QString pipelineSplitLabel(const Plan& p) {
    const std::vector<int>& counts = !p.pipelineLayers.empty() ? p.pipelineLayers : p.resolvedPipelineLayers;
    if (!counts.empty()) return QString::fromStdString(pipelineSplitText(counts));
    QString s;
    if (p.firstStageLayers > 0) s += QStringLiteral("first %1").arg(p.firstStageLayers);
    if (p.lastStageLayers > 0) s += (s.isEmpty() ? QString() : QStringLiteral(", ")) + QStringLiteral("last %1").arg(p.lastStageLayers);
    if (s.isEmpty() && p.pipelineSplit != PipelineSplit::Even) s = QString::fromStdString(toString(p.pipelineSplit));
    return s;
}

QString planSummary(const Plan& p) {
    const QString split = pipelineSplitLabel(p);
    QString s = QStringLiteral("tp%1 pp%2%3 dp%4").arg(p.tp).arg(p.pp).arg(split.isEmpty() ? QString() : QStringLiteral(" (%1)").arg(split)).arg(p.dp);
    if (p.cp > 1) s += QStringLiteral(" cp%1").arg(p.cp) + (p.cpComm != CpComm::P2p ? QStringLiteral(":") + QString::fromStdString(toString(p.cpComm)) : QString());
    if (p.ep > 1) s += QStringLiteral(" ep%1").arg(p.ep);
    if (p.expertFolded()) s += QStringLiteral(" etp%1").arg(p.etp);
    if (p.vpp > 1) s += QStringLiteral(" vpp%1").arg(p.vpp);
    s += QStringLiteral(" mb%1 zero%2%3 %4 %5")
             .arg(p.microBatch)
             .arg(p.zeroStage)
             .arg(p.zeroReplicas > 1 ? QStringLiteral("x%1").arg(p.zeroReplicas) : QString()) // hybrid sharding
             .arg(QString::fromStdString(recomputeString(p)), QString::fromStdString(toString(p.schedule)));
    if (p.sequenceParallel) s += QStringLiteral(" sp");
    return s;
}

} // namespace tessel::gui
