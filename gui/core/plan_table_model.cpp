// The ranked plans of a search as a table model.
#include "core/plan_table_model.hpp"

#include "core/format.hpp"

#include <QStringList>

#include <array>

namespace tessel::gui {

namespace {
struct ColumnInfo {
    const char* key;
    const char* title;
    const char* tip;
};
// Keys double as filter names; titles stay short so all columns fit a 1280-pixel window.
constexpr std::array<ColumnInfo, PlanTableModel::ColumnCount> kColumns{{
    {"rank", "#", "Rank by the search objective"},
    {"step", "step", "Simulated step time"},
    {"band", "±", "Median |step error| of tessel on published runs of this kind (tessel validate), or on the runs a "
                  "calibrated cluster was fitted to, each held out (tessel calibrate); a rank marked = is inside the "
                  "wider of its band and #1's: the model cannot tell the two plans apart"},
    {"mfu", "MFU", "Model FLOPs utilisation"},
    {"bubble", "bubble", "Pipeline bubble (mean over stages, share of the step)"},
    {"peak", "peak GiB", "Peak memory per GPU over the pipeline stages"},
    {"tp", "tp", "Tensor-parallel degree"},
    {"pp", "pp", "Pipeline-parallel stages (an uneven split: layers per virtual stage)"},
    {"dp", "dp", "Data-parallel degree"},
    {"cp", "cp", "Context-parallel degree (and its exchange where it is not the K/V ring: a2a, allgather)"},
    {"ep", "ep", "Expert-parallel degree (with etp: the experts' own tensor-parallel width, MoE parallel folding)"},
    {"vpp", "vpp", "Virtual pipeline stages (model chunks) per rank"},
    {"mb", "mb", "Micro-batch size in sequences"},
    {"zero", "ZeRO", "ZeRO stage (0-3)"},
    {"recompute", "recompute", "Activation recomputation"},
    {"sp", "SP", "Sequence parallelism"},
    {"schedule", "schedule", "Pipeline schedule"},
    {"tokens", "tokens/s", "Training throughput"},
    {"order", "rank order", "Process-group rank order, fastest dimension first"},
    {"offload", "offload", "What lives in host memory: optimizer state (ZeRO-Offload), parameters (ZeRO-Infinity), "
                           "checkpointed activations; none when the plan fits without"},
    {"gpus", "GPUs", "GPUs the plan uses (of those asked; the rest idle)"},
    {"batch", "batch", "Global batch in sequences (a range search picks it per plan)"},
    {"frameworks", "runs on", "Frameworks that can run the plan (tessel export's rules)"},
}};
} // namespace

PlanTableModel::PlanTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void PlanTableModel::setPlans(std::vector<sim::RankedPlan> plans, double capacityBytes) {
    beginResetModel();
    plans_ = std::move(plans);
    capacityBytes_ = capacityBytes;
    endResetModel();
}

void PlanTableModel::clear() { setPlans({}, 0.0); }

int PlanTableModel::columnForKey(const QString& key) {
    const QString k = key.trimmed().toLower();
    if (k == QLatin1String("micro_batch") || k == QLatin1String("micro-batch")) return MicroBatch;
    if (k == QLatin1String("zero_stage")) return Zero;
    if (k == QLatin1String("mem") || k == QLatin1String("memory")) return PeakGiB;
    for (int c = 0; c < ColumnCount; ++c)
        if (k == QLatin1String(kColumns[static_cast<size_t>(c)].key)) return c;
    return -1;
}

QString PlanTableModel::columnKey(int column) {
    if (column < 0 || column >= ColumnCount) return {};
    return QLatin1String(kColumns[static_cast<size_t>(column)].key);
}

int PlanTableModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(plans_.size());
}

int PlanTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant PlanTableModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() < 0 || index.row() >= rowCount() || index.column() < 0 ||
        index.column() >= ColumnCount)
        return {};
    const sim::RankedPlan& r = plans_[static_cast<size_t>(index.row())];
    const Plan& p = r.plan;
    const bool fits = capacityBytes_ <= 0.0 || r.peakBytes <= capacityBytes_;
    if (role == FitsRole) return fits;
    if (role == Qt::ToolTipRole)
        return QString::fromStdString((r.memoryAtRisk && index.column() == PeakGiB
                                           ? "may not fit: published runs of this framework family had peaks off by more "
                                             "than this plan's headroom at the median (tessel validate); "
                                           : "") + r.why);
    if (role == Qt::TextAlignmentRole) {
        const int c = index.column();
        const bool words = c == Recompute || c == Schedule || c == RankOrder || c == SequenceParallel || c == Offload || c == Frameworks;
        return QVariant::fromValue(Qt::Alignment(words ? Qt::AlignLeft | Qt::AlignVCenter : Qt::AlignRight | Qt::AlignVCenter));
    }
    if (role != Qt::DisplayRole && role != SortRole) return {};
    const bool display = role == Qt::DisplayRole;
    auto number = [&](double v, const QString& text) { return display ? QVariant(text) : QVariant(v); };
    auto integer = [&](int v) { return display ? QVariant(QString::number(v)) : QVariant(static_cast<double>(v)); };
    switch (index.column()) {
    case Rank:
        if (display && r.tiedWithBest) return QString::number(index.row() + 1) + QLatin1Char('=');
        return integer(index.row() + 1);
    case ErrorBand:
        if (r.errorBandKind.empty()) return display ? QVariant(QStringLiteral("-")) : QVariant(0.0);
        return number(r.errorBand * 100.0, percentText(r.errorBand));
    case Tp: return integer(p.tp);
    case Pp: {
        const QString split = pipelineSplitLabel(p);
        if (display && !split.isEmpty()) return QStringLiteral("%1 (%2)").arg(p.pp).arg(split);
        return integer(p.pp);
    }
    case Dp: return integer(p.dp);
    case Cp: // a CP exchange other than the ring shows itself ("4 (a2a)"); filters and sorting see cp
        if (display && p.cp > 1 && p.cpComm != CpComm::P2p)
            return QStringLiteral("%1 (%2)").arg(p.cp).arg(QString::fromStdString(toString(p.cpComm)));
        return integer(p.cp);
    case Ep: // folded experts show their expert-TP width ("32 (etp 1)"); filters and sorting see ep
        if (display && p.expertFolded()) return QStringLiteral("%1 (etp %2)").arg(p.ep).arg(p.etp);
        return integer(p.ep);
    case Vpp: return integer(p.vpp);
    case MicroBatch: return integer(p.microBatch);
    case Zero: // hybrid sharding shows its replicas ("1x16"); filters and sorting see the stage
        if (display && p.zeroReplicas > 1) return QStringLiteral("%1x%2").arg(p.zeroStage).arg(p.zeroReplicas);
        return integer(p.zeroStage);
    case Recompute: // partial recompute shows its layers ("full:3"); filters and sorting see the kind
        return QString::fromStdString(display ? recomputeString(p) : toString(p.recompute));
    case SequenceParallel: return p.sequenceParallel ? QStringLiteral("on") : QStringLiteral("off");
    case Schedule: return QString::fromStdString(toString(p.schedule));
    case PeakGiB: // "!" marks a peak that fits but not at the validated band's upper end
        return number(toGiB(r.peakBytes), QString::number(toGiB(r.peakBytes), 'f', 1) + (r.memoryAtRisk ? QStringLiteral("!") : QString()));
    case StepSeconds: return number(r.metrics.stepSeconds, secondsText(r.metrics.stepSeconds));
    case Bubble: return number(r.metrics.bubbleFraction * 100.0, percentText(r.metrics.bubbleFraction));
    case Mfu: return number(r.metrics.mfu * 100.0, percentText(r.metrics.mfu));
    case TokensPerSecond:
        return number(r.metrics.tokensPerSecond, QString::number(r.metrics.tokensPerSecond, 'f', 0));
    case RankOrder: return QString::fromStdString(p.rankOrderString());
    case Offload: return QString::fromStdString(offloadString(p));
    case Gpus: return integer(p.worldSize());
    case GlobalBatch: return integer(p.globalBatch);
    case Frameworks: {
        QStringList names;
        for (const auto& f : r.frameworks) names << QString::fromStdString(f);
        return names.isEmpty() ? QStringLiteral("-") : names.join(QLatin1Char(','));
    }
    default: return {};
    }
}

QVariant PlanTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
    const ColumnInfo& c = kColumns[static_cast<size_t>(section)];
    if (role == Qt::DisplayRole) return QString::fromLatin1(c.title);
    if (role == Qt::ToolTipRole)
        return QString::fromLatin1(c.tip) + QStringLiteral(" (filter key: ") + QLatin1String(c.key) + QLatin1Char(')');
    return {};
}

} // namespace tessel::gui
