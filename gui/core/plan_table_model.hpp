// The ranked plans of a search as a table model: one row per plan, one column per knob or metric.
#pragma once

#include "tessel/sim/search.hpp"

#include <QAbstractTableModel>

#include <vector>

namespace tessel::gui {

class PlanTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        // The numbers plans are compared by come first, so they stay visible in a narrow window.
        Rank = 0, StepSeconds, ErrorBand, Mfu, Bubble, PeakGiB, Tp, Pp, Dp, Cp, Ep, Vpp, MicroBatch, Zero, Recompute,
        SequenceParallel, Schedule, TokensPerSecond, RankOrder, Offload, Gpus, GlobalBatch, Frameworks, ColumnCount
    };
    // Raw value for sorting and filtering: numbers as double, words as QString (DisplayRole is formatted).
    static constexpr int SortRole = Qt::UserRole;
    // True when the plan fits in GPU memory (search results always do; kept for plans added by hand).
    static constexpr int FitsRole = Qt::UserRole + 1;

    explicit PlanTableModel(QObject* parent = nullptr);

    void setPlans(std::vector<sim::RankedPlan> plans, double capacityBytes);
    void clear();
    const sim::RankedPlan& plan(int row) const { return plans_.at(static_cast<size_t>(row)); }
    const std::vector<sim::RankedPlan>& plans() const { return plans_; }
    double capacityBytes() const { return capacityBytes_; }

    // The short key a filter names a column by ("tp", "mb", "mfu", ...); -1 if unknown.
    static int columnForKey(const QString& key);
    static QString columnKey(int column);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<sim::RankedPlan> plans_;
    double capacityBytes_ = 0.0;
};

} // namespace tessel::gui
