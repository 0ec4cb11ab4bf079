// Two pinned plans side by side with the change from A to B.
#include "core/compare_model.hpp"

#include "core/format.hpp"
#include "tessel/sim/error_band.hpp"

#include <QBrush>
#include <QColor>
#include <functional>

namespace tessel::gui {

CompareModel::CompareModel(QObject* parent) : QAbstractTableModel(parent) {}

void CompareModel::setPlans(const std::optional<PinnedPlan>& a, const std::optional<PinnedPlan>& b) {
    beginResetModel();
    rows_.clear();
    auto text = [&](const QString& name, const std::function<QString(const PinnedPlan&)>& f) {
        Row r;
        r.name = name;
        r.numeric = false;
        if (a) r.textA = f(*a);
        if (b) r.textB = f(*b);
        if (a && b && r.textA != r.textB) r.delta = QStringLiteral("changed");
        rows_.push_back(r);
    };
    // `format` turns a raw value into the cell text; the delta is B - A in the same unit plus B/A - 1.
    auto number = [&](const QString& name, bool lowerIsBetter, const std::function<double(const PinnedPlan&)>& f,
                      const std::function<QString(double)>& format) {
        Row r;
        r.name = name;
        r.lowerIsBetter = lowerIsBetter;
        if (a) r.a = f(*a), r.textA = format(*r.a);
        if (b) r.b = f(*b), r.textB = format(*r.b);
        // Parts neither plan has (CP and EP time of a dense model without CP) would only be noise.
        if (r.a && r.b && *r.a == 0.0 && *r.b == 0.0 && name.startsWith(QStringLiteral("exposed"))) return;
        if (r.a && r.b) {
            const double d = *r.b - *r.a;
            r.delta = (d >= 0 ? QStringLiteral("+") : QString()) + format(d);
            if (*r.a != 0.0) r.delta += QStringLiteral(" (") + signedPercentText(d / *r.a) + QLatin1Char(')');
        }
        rows_.push_back(r);
    };
    auto seconds = [](double s) { return secondsText(s); };
    auto gib = [](double bytes) { return gibText(bytes, 2); };
    auto pct = [](double f) { return percentText(f); };
    auto plain = [](double v) { return QString::number(v, 'f', 0); };

    text(QStringLiteral("plan"), [](const PinnedPlan& p) { return p.label; });
    number(QStringLiteral("step time"), true, [](const PinnedPlan& p) { return p.metrics.stepSeconds; }, seconds);
    number(QStringLiteral("tokens/s"), false, [](const PinnedPlan& p) { return p.metrics.tokensPerSecond; }, plain);
    number(QStringLiteral("MFU"), false, [](const PinnedPlan& p) { return p.metrics.mfu; }, pct);
    number(QStringLiteral("bubble"), true, [](const PinnedPlan& p) { return p.metrics.bubbleFraction; }, pct);
    number(QStringLiteral("peak memory"), true, [](const PinnedPlan& p) { return p.memory.peakBytes; }, gib);
    number(QStringLiteral("headroom (min)"), false,
           [](const PinnedPlan& p) { return p.memory.capacityBytes - p.memory.peakBytes; }, gib);
    text(QStringLiteral("fits"), [](const PinnedPlan& p) {
        if (!p.memory.fits) return QStringLiteral("no (OOM on stage %1)").arg(p.memory.peakStage);
        // Fits as predicted; the validated peak band (tessel validate) may still reach past the GPU's memory.
        return sim::memoryVerdict(p.memory.peakBytes, p.memory.reservedPeakBytes, p.memory.capacityBytes, sim::memoryBandFor(p.plan)) ==
                       sim::MemoryVerdict::MayNotFit
                   ? QStringLiteral("may not fit (the validated peak band reaches past the GPU's memory)")
                   : QStringLiteral("yes");
    });
    // The bottleneck stage's breakdown, the parts that explain a step-time change.
    number(QStringLiteral("compute"), true, [](const PinnedPlan& p) { return p.metrics.breakdown.computeSeconds; }, seconds);
    number(QStringLiteral("exposed TP"), true, [](const PinnedPlan& p) { return p.metrics.breakdown.tpSeconds; }, seconds);
    number(QStringLiteral("exposed CP"), true, [](const PinnedPlan& p) { return p.metrics.breakdown.cpSeconds; }, seconds);
    number(QStringLiteral("exposed EP"), true, [](const PinnedPlan& p) { return p.metrics.breakdown.epSeconds; }, seconds);
    number(QStringLiteral("exposed PP"), true, [](const PinnedPlan& p) { return p.metrics.breakdown.ppSeconds; }, seconds);
    number(QStringLiteral("exposed DP"), true, [](const PinnedPlan& p) { return p.metrics.breakdown.dpSeconds; }, seconds);
    number(QStringLiteral("optimizer"), true, [](const PinnedPlan& p) { return p.metrics.breakdown.optimizerSeconds; }, seconds);
    number(QStringLiteral("bubble time"), true, [](const PinnedPlan& p) { return p.metrics.breakdown.bubbleSeconds; }, seconds);
    endResetModel();
}

std::optional<double> CompareModel::value(int row, int column) const {
    if (row < 0 || row >= rowCount()) return std::nullopt;
    const Row& r = rows_[static_cast<size_t>(row)];
    if (column == A) return r.a;
    if (column == B) return r.b;
    return std::nullopt;
}

int CompareModel::rowForMetric(const QString& name) const {
    for (size_t i = 0; i < rows_.size(); ++i)
        if (rows_[i].name == name) return static_cast<int>(i);
    return -1;
}

int CompareModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }
int CompareModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant CompareModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
    const Row& r = rows_[static_cast<size_t>(index.row())];
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
        case Metric: return r.name;
        case A: return r.textA;
        case B: return r.textB;
        case Delta: return r.delta;
        default: return {};
        }
    }
    if (role == Qt::ForegroundRole && index.column() == Delta && r.a && r.b && *r.a != *r.b) {
        // Green when B is better than A for this metric, red when worse.
        const bool better = r.lowerIsBetter ? *r.b < *r.a : *r.b > *r.a;
        return QBrush(better ? QColor(0x2e, 0x7d, 0x32) : QColor(0xc6, 0x28, 0x28));
    }
    if (role == Qt::TextAlignmentRole && index.column() != Metric)
        return QVariant::fromValue(Qt::Alignment(Qt::AlignRight | Qt::AlignVCenter));
    return {};
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
    case Metric: return QStringLiteral("metric");
    case A: return QStringLiteral("A");
    case B: return QStringLiteral("B");
    case Delta: return QStringLiteral("B - A");
    default: return {};
    }
}

} // namespace tessel::gui
