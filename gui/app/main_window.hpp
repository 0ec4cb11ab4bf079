// The main window: scenario and search on the left; the ranked plans (filterable, with rejection counts)
// above; the selected plan's knobs, memory per stage, step breakdown and pipeline timeline below, with
// tabs to compare two pinned plans and to lay a measured run over the prediction.
#pragma once

#include "core/compare_model.hpp"
#include "core/measured_model.hpp"
#include "core/measured_run.hpp"
#include "core/plan_filter_proxy.hpp"
#include "core/plan_session.hpp"
#include "core/plan_table_model.hpp"
#include "core/rejection_model.hpp"
#include "core/search_controller.hpp"

#include <QMainWindow>

#include <optional>

class QLabel;
class QLineEdit;
class QSortFilterProxyModel;
class QTabWidget;
class QTableView;

namespace tessel::gui {

class BreakdownWidget;
class KnobPanel;
class MemoryChartWidget;
class ScenarioPanel;
class TimelineWidget;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    void setScenario(const Scenario& scenario);
    // Starts a search of the current scenario with the panel's fixes; false (with the reason shown) when
    // the request has problems or a search runs.
    bool startSearch();
    // Selects a row of the (sorted, filtered) plan table.
    void selectPlanRow(int row);
    // Lays a measured run over the current plan (switching to the plan it ran when the trace names it).
    void setMeasuredRun(const MeasuredRun& run);
    void clearMeasuredRun();
    bool openScenarioFile(const QString& path);   // a file or a preset name under scenarios/plans
    bool saveScenarioFile(const QString& path);   // overwrites: confirmation is the caller's job
    bool openMeasuredRunFiles(const QString& tracePath, const QString& memoryPath = {});
    // Opens a run's trace with what lies next to it in the run folder: memory.json (or NAME.memory.json)
    // for the measured peaks, and scenario.json (the model, cluster and plan that ran), which replaces the
    // scenario on screen so the prediction is of the same run.
    bool openMeasuredRunWithSiblings(const QString& tracePath);
    // Writes the current plan's predicted timeline as a Chrome trace; false (and `error`) on failure.
    bool writeTraceFile(const QString& path, QString* error);
    // The current plan as Megatron-LM (0), DeepSpeed (1) or torchtitan (2) settings; empty with the
    // framework's reasons in `problems` when it cannot run the plan as predicted.
    QString frameworkSettings(int format, QString* problems) const;

    PlanSession* session() { return &session_; }
    SearchController* searchController() { return &search_; }
    PlanTableModel* planModel() { return &plans_; }
    PlanFilterProxy* planProxy() { return &proxy_; }
    RejectionModel* rejectionModel() { return &rejections_; }
    CompareModel* compareModel() { return &compare_; }
    MeasuredModel* measuredModel() { return &measuredModel_; }
    ScenarioPanel* scenarioPanel() { return panel_; }
    KnobPanel* knobPanel() { return knobs_; }
    QTableView* planView() { return planView_; }
    QLineEdit* filterEdit() { return filter_; }
    MemoryChartWidget* memoryChart() { return memoryChart_; }
    BreakdownWidget* breakdownChart() { return breakdown_; }
    TimelineWidget* timeline() { return timeline_; }
    QTabWidget* detailTabs() { return tabs_; }

private:
    void buildMenus();
    void refreshCharts();
    void refreshMeasured();
    void onSearchFinished(bool cancelled);
    void onPlanRowChanged();
    void updateCounts();
    void updateTitle();
    void message(const QString& text, int timeoutMs = 6000);

    // File actions (with dialogs).
    void openScenario();
    void saveScenario();
    void openMeasuredRun();
    void exportTrace();
    void exportChartImages();
    void copyAs(int format);
    bool confirmOverwrite(const QString& path);

    PlanSession session_;
    SearchController search_;
    PlanTableModel plans_;
    PlanFilterProxy proxy_;
    RejectionModel rejections_;
    CompareModel compare_;
    MeasuredModel measuredModel_;
    QSortFilterProxyModel* measuredProxy_ = nullptr;
    std::optional<MeasuredRun> measured_;
    QString scenarioPath_;

    ScenarioPanel* panel_ = nullptr;
    QLineEdit* filter_ = nullptr;
    QLabel* counts_ = nullptr;
    QTableView* planView_ = nullptr;
    QTableView* rejectedView_ = nullptr;
    KnobPanel* knobs_ = nullptr;
    MemoryChartWidget* memoryChart_ = nullptr;
    BreakdownWidget* breakdown_ = nullptr;
    TimelineWidget* timeline_ = nullptr;
    QTabWidget* tabs_ = nullptr;
    QLabel* compareHint_ = nullptr;
    QLabel* measuredSummary_ = nullptr;
};

} // namespace tessel::gui
