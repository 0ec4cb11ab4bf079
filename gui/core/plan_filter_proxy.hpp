// Sorting and filtering of the plan table: "pp=8 zero>=1 mfu>50 1f1b" keeps plans matching every term.
#pragma once

#include <QSortFilterProxyModel>
#include <QString>

#include <vector>

namespace tessel::gui {

// A term is either `key op value` (key: a PlanTableModel column key such as tp, mb, zero, schedule, peak,
// step, bubble, mfu; op: = == != < <= > >=; numbers compare numerically against the column's raw value:
// GiB for peak, seconds for step, percent for bubble and MFU) or a bare word matched, case-insensitively,
// against the text of every column. Sorting uses the raw values, so 10 sorts after 9.
class PlanFilterProxy : public QSortFilterProxyModel {
    Q_OBJECT
public:
    explicit PlanFilterProxy(QObject* parent = nullptr);

    void setFilterText(const QString& text);
    QString filterText() const { return text_; }
    // Terms that named an unknown column (shown to the user; they are matched as bare words instead).
    QStringList unknownKeys() const { return unknownKeys_; }

protected:
    bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;

private:
    enum class Op { Eq, Ne, Lt, Le, Gt, Ge };
    struct Term {
        int column = -1;     // -1: a bare word
        Op op = Op::Eq;
        QString text;
        bool numeric = false;
        double number = 0.0;
    };
    bool matches(const Term& term, int sourceRow, const QModelIndex& sourceParent) const;

    QString text_;
    std::vector<Term> terms_;
    QStringList unknownKeys_;
};

} // namespace tessel::gui
