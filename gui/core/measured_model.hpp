// Predicted vs measured per action, one row per matched action, sortable by the error.
#pragma once

#include "core/measured_run.hpp"

#include <QAbstractTableModel>

namespace tessel::gui {

class MeasuredModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Stage = 0, Action, MicroBatch, Chunk, Predicted, Measured, Error, ColumnCount };
    static constexpr int SortRole = Qt::UserRole;   // raw numbers (seconds, error fraction)

    explicit MeasuredModel(QObject* parent = nullptr);
    void setComparison(const MeasuredComparison& comparison);
    void clear();
    const MeasuredComparison& comparison() const { return comparison_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    MeasuredComparison comparison_;
};

} // namespace tessel::gui
