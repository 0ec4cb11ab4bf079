// Sorting and filtering of the plan table.
#include "core/plan_filter_proxy.hpp"

#include "core/plan_table_model.hpp"

#include <QRegularExpression>

#include <algorithm>
#include <cmath>

namespace tessel::gui {

PlanFilterProxy::PlanFilterProxy(QObject* parent) : QSortFilterProxyModel(parent) {
    setSortRole(PlanTableModel::SortRole);
    setDynamicSortFilter(true);
}

void PlanFilterProxy::setFilterText(const QString& text) {
    static const QRegularExpression termRe(QStringLiteral("^([A-Za-z_\\-]+)(<=|>=|!=|==|=|<|>)(.+)$"));
    static const QRegularExpression separators(QStringLiteral("[\\s,]+"));
    // Qt 6.4 has no beginFilterChange; invalidateFilter() below re-runs filterAcceptsRow on every row.
    text_ = text;
    terms_.clear();
    unknownKeys_.clear();
    for (const QString& word : text.split(separators, Qt::SkipEmptyParts)) {
        Term t;
        const auto m = termRe.match(word);
        if (m.hasMatch()) {
            const int column = PlanTableModel::columnForKey(m.captured(1));
            if (column >= 0) {
                t.column = column;
                const QString op = m.captured(2);
                t.op = op == QLatin1String("!=") ? Op::Ne
                       : op == QLatin1String("<") ? Op::Lt
                       : op == QLatin1String("<=") ? Op::Le
                       : op == QLatin1String(">") ? Op::Gt
                       : op == QLatin1String(">=") ? Op::Ge
                                                  : Op::Eq;
                t.text = m.captured(3);
                t.number = t.text.toDouble(&t.numeric);
                terms_.push_back(t);
                continue;
            }
            unknownKeys_ << m.captured(1);
        }
        t.text = word;
        terms_.push_back(t);
    }
    invalidateFilter();
}

bool PlanFilterProxy::matches(const Term& term, int sourceRow, const QModelIndex& sourceParent) const {
    const QAbstractItemModel* m = sourceModel();
    if (term.column < 0) {
        for (int c = 0; c < m->columnCount(sourceParent); ++c) {
            const QString cell = m->data(m->index(sourceRow, c, sourceParent), Qt::DisplayRole).toString();
            if (cell.contains(term.text, Qt::CaseInsensitive)) return true;
        }
        return false;
    }
    const QVariant raw = m->data(m->index(sourceRow, term.column, sourceParent), PlanTableModel::SortRole);
    int cmp = 0;
    if (term.numeric && raw.typeId() == QMetaType::Double) {
        const double v = raw.toDouble();
        // A relative 1e-9 tolerance absorbs rounding noise in the raw values.
        const double tolerance = 1e-9 * std::max(1.0, std::abs(term.number));
        cmp = v < term.number - tolerance ? -1 : v > term.number + tolerance ? 1 : 0;
    } else {
        cmp = QString::compare(raw.toString(), term.text, Qt::CaseInsensitive);
    }
    switch (term.op) {
    case Op::Eq: return cmp == 0;
    case Op::Ne: return cmp != 0;
    case Op::Lt: return cmp < 0;
    case Op::Le: return cmp <= 0;
    case Op::Gt: return cmp > 0;
    case Op::Ge: return cmp >= 0;
    }
    return false;
}

bool PlanFilterProxy::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const {
    for (const Term& t : terms_)
        if (!matches(t, sourceRow, sourceParent)) return false;
    return true;
}

} // namespace tessel::gui
