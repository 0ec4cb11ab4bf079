// The knobs of the selected plan, wired to PlanSession.
#include "app/knob_panel.hpp"

#include "core/format.hpp"
#include "core/plan_session.hpp"
#include "core/search_controller.hpp"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QToolButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include <algorithm>
#include <optional>
#include <string>

namespace tessel::gui {

namespace {
constexpr Schedule kSchedules[] = {Schedule::Gpipe, Schedule::OneFOneB, Schedule::Interleaved1F1B, Schedule::ZeroBubble,
                                   Schedule::DualPipeV, Schedule::ZeroBubbleV};
constexpr Recompute kRecomputes[] = {Recompute::None, Recompute::Selective, Recompute::Full};
} // namespace

KnobPanel::KnobPanel(PlanSession* session, QWidget* parent) : QWidget(parent), session_(session) {
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(4, 2, 4, 2);
    outer->setSpacing(2);
    auto* row = new QHBoxLayout;
    row->setSpacing(6);
    row->addWidget(new QLabel(QStringLiteral("<b>Knobs</b>"), this));

    auto label = [&](const QString& text) { row->addWidget(new QLabel(text, this)); };
    microBatch_ = new QSpinBox(this);
    microBatch_->setRange(1, 4096);
    microBatch_->setKeyboardTracking(false);
    microBatch_->setToolTip(QStringLiteral("Micro-batch size in sequences"));
    label(QStringLiteral("mb"));
    row->addWidget(microBatch_);
    recompute_ = new QComboBox(this);
    for (Recompute r : kRecomputes) recompute_->addItem(QString::fromStdString(toString(r)));
    recompute_->setToolTip(QStringLiteral("Activation recomputation (rc): none, selective (the attention core, or the modules "
                                          "chosen beside the loss kernel), full"));
    label(QStringLiteral("rc")); // as tessel's plan strings write it ("rc:full"); the tooltips say the rest
    row->addWidget(recompute_);
    recomputeLayers_ = new QSpinBox(this);
    recomputeLayers_->setRange(0, 4096);
    recomputeLayers_->setKeyboardTracking(false);
    recomputeLayers_->setSpecialValueText(QStringLiteral("all"));
    recomputeLayers_->setButtonSymbols(QAbstractSpinBox::NoButtons); // typed, as the ZeRO replicas are
    recomputeLayers_->setMaximumWidth(40);
    recomputeLayers_->setToolTip(QStringLiteral("With full recompute: layers of each chunk recomputed, from its first "
                                                "(Megatron-LM's block method); \"all\" recomputes every layer"));
    row->addWidget(recomputeLayers_);
    zero_ = new QComboBox(this);
    zero_->addItems({QStringLiteral("0"), QStringLiteral("1"), QStringLiteral("2"), QStringLiteral("3")});
    zero_->setToolTip(QStringLiteral("ZeRO stage: 1 shards optimizer state, 2 also gradients, 3 also weights"));
    label(QStringLiteral("ZeRO"));
    row->addWidget(zero_);
    zeroReplicas_ = new QSpinBox(this);
    zeroReplicas_->setKeyboardTracking(false);
    zeroReplicas_->setToolTip(QStringLiteral("Hybrid sharding: replicas of the sharded ZeRO state across the data-parallel "
                                             "group (FSDP HYBRID_SHARD, Megatron's optimizer instances); 1 shards over all"));
    zeroReplicas_->setPrefix(QStringLiteral("x")); // "ZeRO 3 x2": three, over two replicas
    zeroReplicas_->setRange(1, 999);
    zeroReplicas_->setButtonSymbols(QAbstractSpinBox::NoButtons);
    row->addWidget(zeroReplicas_);
    vpp_ = new QSpinBox(this);
    vpp_->setRange(1, 64);
    vpp_->setKeyboardTracking(false);
    vpp_->setToolTip(QStringLiteral("Virtual pipeline stages per rank (interleaved_1f1b needs >= 2; dualpipev exactly 2)"));
    label(QStringLiteral("vpp"));
    row->addWidget(vpp_);
    schedule_ = new QComboBox(this);
    for (Schedule s : kSchedules) schedule_->addItem(QString::fromStdString(toString(s)));
    schedule_->setToolTip(QStringLiteral("Pipeline schedule"));
    row->addWidget(schedule_);
    loss_ = new QComboBox(this);
    loss_->addItem(QStringLiteral("auto"));
    for (const std::string& k : crossEntropyKinds()) loss_->addItem(QString::fromStdString(k));
    loss_->setToolTip(QStringLiteral("The loss kernel, which decides what the last stage keeps of the logits: auto (the "
                                     "framework's), fused (Megatron-core's, an fp32 softmax), te (Transformer Engine's, the "
                                     "gradient written into the logits), eager (cross_entropy(logits.float())), flash_attn, "
                                     "compiled (torch.compile's), fused_linear (Liger-Kernel's: the logits never whole; tp 1)"));
    fp8Recipe_ = new QComboBox(this);
    fp8Recipe_->addItem(QStringLiteral("auto (delayed)"));
    for (const std::string& k : fp8RecipeKinds()) fp8Recipe_->addItem(QString::fromStdString(k));
    fp8Recipe_->setToolTip(QStringLiteral("FP8 plans: Transformer Engine's scaling (Megatron-core's --fp8-recipe): delayed (the "
                                          "amax history), tensorwise (current scaling: an amax pass before each cast, and its "
                                          "all-reduce over TP under SP), mxfp8 or blockwise (scales inside the cast)"));
    // Selective recompute's modules: each a checkable entry; the plan's validation says when one names a part the
    // model lacks (shown in red below, not simulated).
    modules_ = new QToolButton(this);
    modules_->setPopupMode(QToolButton::InstantPopup);
    modules_->setToolTip(QStringLiteral("With selective recompute: what each layer reruns (Megatron-core's --recompute-modules): "
                                        "core_attn the attention core; moe_act the experts' activation; layernorm the norms "
                                        "Transformer Engine does not fuse; mla_up_proj MLA's up projections; mlp a dense "
                                        "layer's MLP; moe the whole MoE layer; shared_experts the shared experts"));
    auto* menu = new QMenu(modules_);
    for (const auto& [name, bit] : recomputeModuleNames()) {
        QAction* action = menu->addAction(QString::fromStdString(name));
        action->setCheckable(true);
        action->setData(static_cast<int>(bit));
        moduleActions_.push_back(action);
        connect(action, &QAction::toggled, this, [this]() {
            if (updating_) return;
            uint8_t modules = 0;
            for (QAction* a : moduleActions_)
                if (a->isChecked()) modules |= static_cast<uint8_t>(a->data().toInt());
            session_->setRecomputeModules(modules);
        });
    }
    modules_->setMenu(menu);
    reset_ = new QPushButton(QStringLiteral("Reset"), this);
    reset_->setToolTip(QStringLiteral("Back to the selected plan's knobs"));
    pinA_ = new QPushButton(QStringLiteral("Pin A"), this);
    pinB_ = new QPushButton(QStringLiteral("Pin B"), this);
    pinA_->setToolTip(QStringLiteral("Keep this plan as A in the Compare tab"));
    pinB_->setToolTip(QStringLiteral("Keep this plan as B in the Compare tab"));
    row->addStretch(1);
    row->addWidget(reset_);
    row->addWidget(pinA_);
    row->addWidget(pinB_);
    outer->addLayout(row);
    // Second line: what is on screen (the plan, marked when a knob changed it) and why it is not simulated.
    // The loss kernel sits on this line, beside the plan it changes (the knob row fills a 1280-wide window).
    summary_ = new QLabel(this);
    summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    summary_->setWordWrap(true);
    auto* second = new QHBoxLayout;
    second->setSpacing(6);
    second->addWidget(summary_, 1);
    second->addWidget(new QLabel(QStringLiteral("rc modules"), this));
    second->addWidget(modules_);
    second->addWidget(new QLabel(QStringLiteral("loss"), this));
    second->addWidget(loss_);
    second->addWidget(new QLabel(QStringLiteral("fp8"), this));
    second->addWidget(fp8Recipe_);
    outer->addLayout(second);
    problems_ = new QLabel(this);
    problems_->setWordWrap(true);
    problems_->setStyleSheet(QStringLiteral("color: #c62828;"));
    problems_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    problems_->hide();
    outer->addWidget(problems_);

    connect(microBatch_, &QSpinBox::valueChanged, this, [this](int v) {
        if (!updating_) session_->setMicroBatch(v);
    });
    connect(recompute_, &QComboBox::activated, this, [this](int i) { session_->setRecompute(kRecomputes[i]); });
    connect(recomputeLayers_, &QSpinBox::valueChanged, this, [this](int v) {
        if (!updating_) session_->setRecomputeLayers(v);
    });
    connect(zero_, &QComboBox::activated, this, [this](int i) { session_->setZeroStage(i); });
    connect(zeroReplicas_, &QSpinBox::valueChanged, this, [this](int v) {
        if (!updating_) session_->setZeroReplicas(v);
    });
    connect(vpp_, &QSpinBox::valueChanged, this, [this](int v) {
        if (!updating_) session_->setVpp(v);
    });
    connect(schedule_, &QComboBox::activated, this, [this](int i) { session_->setSchedule(kSchedules[i]); });
    connect(loss_, &QComboBox::activated, this, [this](int i) {
        session_->setCrossEntropy(i == 0 ? std::nullopt : std::optional<std::string>(crossEntropyKinds()[static_cast<size_t>(i - 1)]));
    });
    connect(fp8Recipe_, &QComboBox::activated, this, [this](int i) {
        session_->setFp8Recipe(i == 0 ? std::nullopt : std::optional<std::string>(fp8RecipeKinds()[static_cast<size_t>(i - 1)]));
    });
    connect(reset_, &QPushButton::clicked, session_, &PlanSession::resetKnobs);
    connect(pinA_, &QPushButton::clicked, this, [this]() { session_->pin(0); });
    connect(pinB_, &QPushButton::clicked, this, [this]() { session_->pin(1); });
    connect(session_, &PlanSession::evaluationChanged, this, &KnobPanel::refresh);
    refresh();
}

void KnobPanel::refresh() {
    updating_ = true;
    const PlanEvaluation& e = session_->evaluation();
    const Plan& p = e.plan;
    microBatch_->setValue(p.microBatch);
    recompute_->setCurrentIndex(static_cast<int>(p.recompute));
    recomputeLayers_->setValue(p.recomputeLayers);
    recomputeLayers_->setEnabled(p.recompute == Recompute::Full);
    {
        const bool selective = p.recompute == Recompute::Selective;
        const uint8_t modules = selective ? p.recomputeModules : recompute_module::Default;
        for (QAction* a : moduleActions_) a->setChecked((modules & a->data().toInt()) != 0);
        modules_->setText(selective ? QString::fromStdString(modules ? recomputeModulesString(modules) : "nothing")
                                    : QStringLiteral("-"));
        modules_->setEnabled(selective);
        // Wide enough for the set's names beside the menu arrow (a tool button sizes to its icon otherwise).
        modules_->setMinimumWidth(modules_->fontMetrics().horizontalAdvance(modules_->text()) + 28);
    }
    zero_->setCurrentIndex(p.zeroStage);
    zeroReplicas_->setValue(p.zeroReplicas);
    vpp_->setValue(p.vpp);
    schedule_->setCurrentIndex(static_cast<int>(p.schedule));
    {
        // "auto" names the kernel the framework's default resolves to.
        FrameworkSettings unstated = p.framework;
        unstated.crossEntropy.reset();
        loss_->setItemText(0, QStringLiteral("auto (%1)").arg(QString::fromStdString(crossEntropyOf(unstated))));
        const auto& kinds = crossEntropyKinds();
        const auto it = p.framework.crossEntropy ? std::find(kinds.begin(), kinds.end(), *p.framework.crossEntropy) : kinds.end();
        loss_->setCurrentIndex(it == kinds.end() ? 0 : 1 + static_cast<int>(it - kinds.begin()));
    }
    {
        const auto& kinds = fp8RecipeKinds();
        const auto it = p.framework.fp8Recipe ? std::find(kinds.begin(), kinds.end(), *p.framework.fp8Recipe) : kinds.end();
        fp8Recipe_->setCurrentIndex(it == kinds.end() ? 0 : 1 + static_cast<int>(it - kinds.begin()));
        fp8Recipe_->setEnabled(p.precision == "fp8");
    }
    QString text = QStringLiteral("<b>%1</b>").arg(planSummary(p).toHtmlEscaped());
    if (session_->isEdited()) text += QStringLiteral(" <i>(edited)</i>");
    summary_->setText(text);
    reset_->setEnabled(session_->isEdited());
    pinA_->setEnabled(e.ok());
    pinB_->setEnabled(e.ok());
    QString problems;
    if (!e.problems.empty()) problems = QStringLiteral("Not simulated - fix the plan: ") + problemsText(e.problems).replace(QLatin1Char('\n'), QStringLiteral("; "));
    else if (!e.error.isEmpty()) problems = QStringLiteral("Simulation failed: ") + e.error;
    problems_->setText(problems);
    problems_->setVisible(!problems.isEmpty());
    updating_ = false;
}

} // namespace tessel::gui
