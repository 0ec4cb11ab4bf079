// Two pinned plans side by side: one row per knob or metric, columns A, B and the change from A to B.
#pragma once

#include "core/plan_session.hpp"

#include <QAbstractTableModel>

#include <optional>
#include <vector>

namespace tessel::gui {

class CompareModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Metric = 0, A, B, Delta, ColumnCount };
    explicit CompareModel(QObject* parent = nullptr);

    void setPlans(const std::optional<PinnedPlan>& a, const std::optional<PinnedPlan>& b);
    // The raw value of a metric row for plan A (column A) or B (column B); nullopt for text rows or an
    // empty slot. Tests read numbers through this instead of parsing formatted text.
    std::optional<double> value(int row, int column) const;
    int rowForMetric(const QString& name) const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    struct Row {
        QString name;
        bool numeric = true;
        bool lowerIsBetter = true;
        std::optional<double> a, b;        // raw values
        QString textA, textB, delta;
    };
    std::vector<Row> rows_;
};

} // namespace tessel::gui
