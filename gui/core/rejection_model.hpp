// Why the search rejected plans: one row per reason with its count, most frequent first.
#pragma once

#include <QAbstractTableModel>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tessel::gui {

class RejectionModel : public QAbstractTableModel {
    Q_OBJECT
public:
    explicit RejectionModel(QObject* parent = nullptr);
    void setCounts(const std::map<std::string, uint64_t>& rejected);
    uint64_t total() const;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<std::pair<QString, uint64_t>> rows_;
};

} // namespace tessel::gui
