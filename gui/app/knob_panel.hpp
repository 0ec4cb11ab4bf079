// The knobs of the selected plan (micro-batch, recompute and its modules, ZeRO, vpp, schedule, loss kernel): turning one re-validates
// and re-simulates the plan at once through PlanSession; problems show inline, in red.
#pragma once

#include <QWidget>

#include <vector>

class QAction;
class QComboBox;
class QLabel;
class QToolButton;
class QPushButton;
class QSpinBox;

namespace tessel::gui {

class PlanSession;

class KnobPanel : public QWidget {
    Q_OBJECT
public:
    KnobPanel(PlanSession* session, QWidget* parent = nullptr);

    QSpinBox* microBatch() const { return microBatch_; }
    QComboBox* recompute() const { return recompute_; }
    QSpinBox* recomputeLayers() const { return recomputeLayers_; }
    QComboBox* zero() const { return zero_; }
    QSpinBox* zeroReplicas() const { return zeroReplicas_; }
    QSpinBox* vpp() const { return vpp_; }
    QComboBox* schedule() const { return schedule_; }
    QComboBox* loss() const { return loss_; } // item 0: the framework's kernel; then crossEntropyKinds()
    QComboBox* fp8Recipe() const { return fp8Recipe_; } // item 0: unstated (delayed); then fp8RecipeKinds(); FP8 plans only
    // Selective recompute's modules (Megatron-core's --recompute-modules): a menu of checkable modules, in
    // recomputeModuleNames' order; enabled under selective recompute.
    QToolButton* recomputeModules() const { return modules_; }
    const std::vector<QAction*>& moduleActions() const { return moduleActions_; }
    QPushButton* pinA() const { return pinA_; }
    QPushButton* pinB() const { return pinB_; }

private:
    void refresh();

    PlanSession* session_;
    bool updating_ = false;
    QLabel* summary_;
    QSpinBox* microBatch_;
    QComboBox* recompute_;
    QSpinBox* recomputeLayers_;
    QComboBox* zero_;
    QSpinBox* zeroReplicas_;
    QSpinBox* vpp_;
    QComboBox* schedule_;
    QComboBox* loss_;
    QComboBox* fp8Recipe_;
    QToolButton* modules_;
    std::vector<QAction*> moduleActions_;
    QPushButton* reset_;
    QPushButton* pinA_;
    QPushButton* pinB_;
    QLabel* problems_;
};

} // namespace tessel::gui
