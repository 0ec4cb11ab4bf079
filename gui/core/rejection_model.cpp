// Why the search rejected plans: one row per reason with its count.
#include "core/rejection_model.hpp"

#include "core/format.hpp"

#include <algorithm>

namespace tessel::gui {

RejectionModel::RejectionModel(QObject* parent) : QAbstractTableModel(parent) {}

void RejectionModel::setCounts(const std::map<std::string, uint64_t>& rejected) {
    beginResetModel();
    rows_.clear();
    for (const auto& [reason, n] : rejected) rows_.emplace_back(QString::fromStdString(reason), n);
    // Most frequent first; the map's order (alphabetical) breaks ties so the order is stable.
    std::stable_sort(rows_.begin(), rows_.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    endResetModel();
}

uint64_t RejectionModel::total() const {
    uint64_t n = 0;
    for (const auto& r : rows_) n += r.second;
    return n;
}

int RejectionModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(rows_.size()); }
int RejectionModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : 2; }

QVariant RejectionModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= 2) return {};
    const auto& r = rows_[static_cast<size_t>(index.row())];
    if (role == Qt::DisplayRole) return index.column() == 0 ? QVariant(r.first) : QVariant(countText(r.second));
    if (role == Qt::UserRole) return index.column() == 0 ? QVariant(r.first) : QVariant(static_cast<double>(r.second));
    if (role == Qt::ToolTipRole && index.column() == 0) return r.first;
    if (role == Qt::TextAlignmentRole)
        return QVariant::fromValue(Qt::Alignment(index.column() == 0 ? Qt::AlignLeft | Qt::AlignVCenter : Qt::AlignRight | Qt::AlignVCenter));
    return {};
}

QVariant RejectionModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
    if (section == 0) return QStringLiteral("rejected because");
    if (section == 1) return QStringLiteral("plans");
    return {};
}

} // namespace tessel::gui
