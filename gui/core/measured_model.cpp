// Predicted vs measured per action.
#include "core/measured_model.hpp"

#include "core/format.hpp"

#include <QBrush>
#include <QColor>

#include <cmath>

namespace tessel::gui {

MeasuredModel::MeasuredModel(QObject* parent) : QAbstractTableModel(parent) {}

void MeasuredModel::setComparison(const MeasuredComparison& comparison) {
    beginResetModel();
    comparison_ = comparison;
    endResetModel();
}

void MeasuredModel::clear() { setComparison({}); }

int MeasuredModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(comparison_.actions.size());
}
int MeasuredModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant MeasuredModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
    const ActionComparison& a = comparison_.actions[static_cast<size_t>(index.row())];
    if (role == Qt::TextAlignmentRole)
        return QVariant::fromValue(Qt::Alignment(index.column() == Action ? Qt::AlignLeft | Qt::AlignVCenter
                                                                         : Qt::AlignRight | Qt::AlignVCenter));
    if (role == Qt::ForegroundRole && index.column() == Error && std::fabs(a.error()) > 0.2)
        return QBrush(QColor(0xc6, 0x28, 0x28));   // off by more than 20%: worth a look
    if (role != Qt::DisplayRole && role != SortRole) return {};
    const bool display = role == Qt::DisplayRole;
    switch (index.column()) {
    case Stage: return display ? QVariant(QString::number(a.stage)) : QVariant(static_cast<double>(a.stage));
    case Action: return QString::fromStdString(a.name);
    case MicroBatch:
        return display ? QVariant(a.microBatch < 0 ? QStringLiteral("-") : QString::number(a.microBatch))
                       : QVariant(static_cast<double>(a.microBatch));
    case Chunk: return display ? QVariant(QString::number(a.chunk)) : QVariant(static_cast<double>(a.chunk));
    case Predicted: return display ? QVariant(secondsText(a.predictedSeconds)) : QVariant(a.predictedSeconds);
    case Measured: return display ? QVariant(secondsText(a.measuredMeanSeconds)) : QVariant(a.measuredMeanSeconds);
    case Error: return display ? QVariant(signedPercentText(a.error())) : QVariant(a.error());
    default: return {};
    }
}

QVariant MeasuredModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
    case Stage: return QStringLiteral("stage");
    case Action: return QStringLiteral("action");
    case MicroBatch: return QStringLiteral("mb");
    case Chunk: return QStringLiteral("chunk");
    case Predicted: return QStringLiteral("predicted");
    case Measured: return QStringLiteral("measured");
    case Error: return QStringLiteral("error");
    default: return {};
    }
}

} // namespace tessel::gui
