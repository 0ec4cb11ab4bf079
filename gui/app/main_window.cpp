// The main window: wires the scenario panel, the search, the plan table and the charts together.
#include "app/main_window.hpp"

#include "app/chart_widgets.hpp"
#include "app/knob_panel.hpp"
#include "app/scenario_panel.hpp"
#include "core/chart_export.hpp"
#include "core/format.hpp"

#include "tessel/sim/error_band.hpp"
#include "tessel/sim/export.hpp"
#include "tessel/sim/trace.hpp"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>

#include <exception>

namespace tessel::gui {

namespace {
QTableView* makeTable(QWidget* parent) {
    auto* v = new QTableView(parent);
    v->setSelectionBehavior(QAbstractItemView::SelectRows);
    v->setSelectionMode(QAbstractItemView::SingleSelection);
    v->setAlternatingRowColors(true);
    v->setSortingEnabled(true);
    v->verticalHeader()->hide();
    v->verticalHeader()->setDefaultSectionSize(v->fontMetrics().height() + 6);
    v->horizontalHeader()->setHighlightSections(false);
    v->setWordWrap(false);
    return v;
}

QString scenarioDirectory() {
    for (const auto& dir : scenarioSearchPath()) {
        const QString plans = QString::fromStdString((dir / "plans").string());
        if (QDir(plans).exists()) return plans;
    }
    return QDir::currentPath();
}

bool writeFile(const QString& path, const QByteArray& bytes, QString* error) {
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(bytes) != bytes.size()) {
        *error = f.errorString();
        return false;
    }
    return true;
}
} // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    proxy_.setSourceModel(&plans_);

    // Left: scenario and search, scrollable for small screens.
    panel_ = new ScenarioPanel;
    auto* scroll = new QScrollArea;
    scroll->setWidget(panel_);
    scroll->setWidgetResizable(true);
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    // Wide enough for the panel and a vertical scroll bar, never wider: the charts need the room.
    scroll->setMinimumWidth(panel_->minimumSizeHint().width() + 20);
    scroll->setMaximumWidth(panel_->minimumSizeHint().width() + 80);

    // Top right: the plan table with its filter and counts.
    auto* tableArea = new QWidget;
    auto* tl = new QVBoxLayout(tableArea);
    tl->setContentsMargins(2, 2, 2, 2);
    tl->setSpacing(3);
    auto* filterRow = new QHBoxLayout;
    filter_ = new QLineEdit;
    filter_->setPlaceholderText(QStringLiteral("filter plans: pp=8 zero>=1 mfu>50 1f1b"));
    filter_->setClearButtonEnabled(true);
    filter_->setToolTip(QStringLiteral("Terms key=value / key<value / key>value on columns (tp, pp, dp, mb, zero, recompute, "
                                       "schedule, peak [GiB], step [s], bubble [%], mfu [%]) or words matched anywhere"));
    counts_ = new QLabel;
    counts_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    filterRow->addWidget(filter_, 2);
    filterRow->addWidget(counts_, 3);
    tl->addLayout(filterRow);
    planView_ = makeTable(tableArea);
    planView_->setModel(&proxy_);
    planView_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    planView_->horizontalHeader()->setStretchLastSection(true);
    planView_->sortByColumn(PlanTableModel::Rank, Qt::AscendingOrder);
    tl->addWidget(planView_, 1);

    // Why plans were rejected, under the search controls where the panel has room.
    auto* rejectedBox = new QGroupBox(QStringLiteral("Rejected plans, by reason"));
    auto* rl = new QVBoxLayout(rejectedBox);
    rl->setContentsMargins(4, 4, 4, 4);
    rejectedView_ = makeTable(rejectedBox);
    rejectedView_->setModel(&rejections_);
    rejectedView_->setSortingEnabled(false);
    rejectedView_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
    rejectedView_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::ResizeToContents);
    rejectedView_->setSelectionMode(QAbstractItemView::NoSelection);
    rejectedView_->setMinimumHeight(90);
    rl->addWidget(rejectedView_);
    panel_->addSection(rejectedBox, 1);

    // Bottom right: knobs, then memory | breakdown, then the tabs (timeline, compare, measured).
    auto* detail = new QWidget;
    auto* dl = new QVBoxLayout(detail);
    dl->setContentsMargins(2, 0, 2, 2);
    dl->setSpacing(2);
    knobs_ = new KnobPanel(&session_);
    dl->addWidget(knobs_);
    auto* chartsSplit = new QSplitter(Qt::Vertical);
    auto* topCharts = new QSplitter(Qt::Horizontal);
    memoryChart_ = new MemoryChartWidget;
    breakdown_ = new BreakdownWidget;
    topCharts->addWidget(memoryChart_);
    topCharts->addWidget(breakdown_);
    topCharts->setSizes({470, 480});
    tabs_ = new QTabWidget;
    timeline_ = new TimelineWidget;
    tabs_->addTab(timeline_, QStringLiteral("Pipeline timeline"));
    tabs_->setTabToolTip(0, QStringLiteral("One row per pipeline stage: compute on top (hue = micro-batch; light forward, dark "
                                           "backward, hatched weight gradients), pipeline sends / receives and data-parallel "
                                           "collectives on the thin lanes, idle compute shaded. Wheel: zoom, drag: pan, "
                                           "double-click: fit, hover: details."));
    auto* compareTab = new QWidget;
    auto* cl = new QVBoxLayout(compareTab);
    cl->setContentsMargins(2, 2, 2, 2);
    compareHint_ = new QLabel(QStringLiteral("Pin a plan as A and another as B (buttons in the knob bar) to compare them."));
    compareHint_->setWordWrap(true);
    auto* compareView = makeTable(compareTab);
    compareView->setModel(&compare_);
    compareView->setSortingEnabled(false);
    compareView->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    cl->addWidget(compareHint_);
    cl->addWidget(compareView, 1);
    tabs_->addTab(compareTab, QStringLiteral("Compare A / B"));
    auto* measuredTab = new QWidget;
    auto* ml = new QVBoxLayout(measuredTab);
    ml->setContentsMargins(2, 2, 2, 2);
    measuredSummary_ = new QLabel(QStringLiteral("File > Open measured run... lays a run's trace (and memory) over the prediction."));
    measuredSummary_->setWordWrap(true);
    measuredSummary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    measuredProxy_ = new QSortFilterProxyModel(this);
    measuredProxy_->setSourceModel(&measuredModel_);
    measuredProxy_->setSortRole(MeasuredModel::SortRole);
    auto* measuredView = makeTable(measuredTab);
    measuredView->setModel(measuredProxy_);
    measuredView->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    ml->addWidget(measuredSummary_);
    ml->addWidget(measuredView, 1);
    tabs_->addTab(measuredTab, QStringLiteral("Measured vs predicted"));
    chartsSplit->addWidget(topCharts);
    chartsSplit->addWidget(tabs_);
    chartsSplit->setStretchFactor(0, 1);
    chartsSplit->setStretchFactor(1, 1);
    dl->addWidget(chartsSplit, 1);

    auto* rightSplit = new QSplitter(Qt::Vertical);
    rightSplit->addWidget(tableArea);
    rightSplit->addWidget(detail);
    rightSplit->setStretchFactor(0, 1);
    rightSplit->setStretchFactor(1, 3);
    rightSplit->setSizes({165, 590});
    chartsSplit->setSizes({215, 330});

    auto* mainSplit = new QSplitter(Qt::Horizontal);
    mainSplit->addWidget(scroll);
    mainSplit->addWidget(rightSplit);
    mainSplit->setStretchFactor(1, 1);
    mainSplit->setChildrenCollapsible(false);
    setCentralWidget(mainSplit);
    buildMenus();
    statusBar()->setSizeGripEnabled(false);

    // Wiring.
    connect(panel_, &ScenarioPanel::modelChanged, &session_, &PlanSession::setModel);
    connect(panel_, &ScenarioPanel::clusterChanged, &session_, &PlanSession::setCluster);
    connect(panel_, &ScenarioPanel::globalBatchChanged, &session_, &PlanSession::setGlobalBatch);
    connect(panel_, &ScenarioPanel::problem, this, [this](const QString& text) {
        QMessageBox::warning(this, QStringLiteral("tessel"), text);
    });
    connect(panel_, &ScenarioPanel::searchRequested, this, [this]() { startSearch(); });
    connect(panel_, &ScenarioPanel::cancelRequested, &search_, &SearchController::cancel);
    connect(&search_, &SearchController::started, this, [this]() {
        panel_->setSearchRunning(true);
        panel_->setSearchStatus(QStringLiteral("searching..."));
    });
    connect(&search_, &SearchController::progressChanged, panel_, &ScenarioPanel::setProgress);
    connect(&search_, &SearchController::finished, this, &MainWindow::onSearchFinished);
    connect(&search_, &SearchController::failed, this, [this](const QString& text) {
        panel_->setSearchRunning(false);
        panel_->setSearchStatus(text, true);
    });
    connect(filter_, &QLineEdit::textChanged, this, [this](const QString& text) {
        proxy_.setFilterText(text);
        updateCounts();
    });
    connect(planView_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, &MainWindow::onPlanRowChanged);
    connect(&session_, &PlanSession::evaluationChanged, this, &MainWindow::refreshCharts);
    connect(&session_, &PlanSession::scenarioChanged, this, &MainWindow::updateTitle);
    connect(&session_, &PlanSession::pinnedChanged, this, [this]() {
        compare_.setPlans(session_.pinned(0), session_.pinned(1));
        const bool both = session_.pinned(0) && session_.pinned(1);
        compareHint_->setText(both ? QStringLiteral("A: %1\nB: %2").arg(session_.pinned(0)->label, session_.pinned(1)->label)
                                   : QStringLiteral("Pinned %1. Pin another plan as %2 to compare.")
                                         .arg(session_.pinned(0) ? QStringLiteral("A") : QStringLiteral("B"),
                                              session_.pinned(0) ? QStringLiteral("B") : QStringLiteral("A")));
        if (both) tabs_->setCurrentIndex(1);
    });

    resize(1280, 800);
    try {
        setScenario(defaultScenario());
    } catch (const InputError& e) {
        message(QStringLiteral("default scenario: ") + problemsText(e.problems()));
    }
}

MainWindow::~MainWindow() = default;

void MainWindow::buildMenus() {
    QMenu* file = menuBar()->addMenu(QStringLiteral("&File"));
    file->addAction(QStringLiteral("&Open scenario or plan..."), QKeySequence::Open, this, &MainWindow::openScenario);
    file->addAction(QStringLiteral("&Save scenario with this plan..."), QKeySequence::Save, this, &MainWindow::saveScenario);
    file->addSeparator();
    file->addAction(QStringLiteral("Open &measured run..."), this, &MainWindow::openMeasuredRun);
    file->addAction(QStringLiteral("Close measured run"), this, &MainWindow::clearMeasuredRun);
    file->addSeparator();
    file->addAction(QStringLiteral("Export timeline as Chrome &trace..."), this, &MainWindow::exportTrace);
    file->addAction(QStringLiteral("Export &charts as PNG / SVG..."), this, &MainWindow::exportChartImages);
    file->addSeparator();
    file->addAction(QStringLiteral("&Quit"), QKeySequence::Quit, this, &QWidget::close);

    QMenu* edit = menuBar()->addMenu(QStringLiteral("&Edit"));
    edit->addAction(QStringLiteral("Copy as &Megatron-LM arguments"), this, [this]() { copyAs(0); });
    edit->addAction(QStringLiteral("Copy as &DeepSpeed config"), this, [this]() { copyAs(1); });
    edit->addAction(QStringLiteral("Copy as &torchtitan config"), this, [this]() { copyAs(2); });
    edit->addSeparator();
    edit->addAction(QStringLiteral("&Filter plans"), QKeySequence::Find, this, [this]() { filter_->setFocus(); });

    QMenu* search = menuBar()->addMenu(QStringLiteral("&Search"));
    search->addAction(QStringLiteral("&Run search"), QKeySequence(Qt::CTRL | Qt::Key_R), this, [this]() { startSearch(); });
    search->addAction(QStringLiteral("&Cancel search"), QKeySequence(Qt::Key_Escape), &search_, &SearchController::cancel);

    QMenu* view = menuBar()->addMenu(QStringLiteral("&View"));
    view->addAction(QStringLiteral("Fit timeline"), QKeySequence(Qt::CTRL | Qt::Key_0), timeline_, &TimelineWidget::fitAll);
    view->addAction(QStringLiteral("Zoom in"), QKeySequence::ZoomIn, timeline_, &TimelineWidget::zoomIn);
    view->addAction(QStringLiteral("Zoom out"), QKeySequence::ZoomOut, timeline_, &TimelineWidget::zoomOut);
}

void MainWindow::message(const QString& text, int timeoutMs) { statusBar()->showMessage(text, timeoutMs); }

void MainWindow::setScenario(const Scenario& scenario) {
    search_.cancel();
    plans_.clear();
    rejections_.setCounts({});
    clearMeasuredRun();
    panel_->setScenario(scenario);
    session_.setScenario(scenario);
    counts_->setText(QStringLiteral("showing the scenario's plan; Search ranks every plan"));
    updateTitle();
}

void MainWindow::updateTitle() {
    const Scenario& s = session_.scenario();
    setWindowTitle(QStringLiteral("tessel - %1 on %2 x %3%4")
                       .arg(QString::fromStdString(s.model.name))
                       .arg(s.cluster.totalGpus())
                       .arg(QString::fromStdString(s.cluster.gpu.name))
                       .arg(scenarioPath_.isEmpty() ? QString() : QStringLiteral(" [%1]").arg(QFileInfo(scenarioPath_).fileName())));
}

bool MainWindow::startSearch() {
    if (search_.isRunning()) return false;
    ProblemList problems;
    SearchRequest request =
        makeSearchRequest(session_.scenario(), panel_->fixText(), panel_->topK(), problems, panel_->memoryBandOnly());
    if (!problems.empty()) {
        panel_->setSearchStatus(problemsText(problems.items()), true);
        return false;
    }
    return search_.start(std::move(request));
}

void MainWindow::onSearchFinished(bool cancelled) {
    const sim::SearchResult& r = search_.result();
    panel_->setSearchRunning(false);
    panel_->setProgress(cancelled ? 0.0 : 1.0);
    panel_->setSearchStatus(QStringLiteral("%1 %2 plans in %3; %4 feasible, %5 simulated")
                                .arg(cancelled ? QStringLiteral("Cancelled after") : QStringLiteral("Searched"),
                                     countText(r.considered), secondsText(r.wallSeconds), countText(r.feasible),
                                     countText(r.simulated)));
    plans_.setPlans(r.top, static_cast<double>(search_.request().cluster.gpu.memoryBytes));
    rejections_.setCounts(r.rejected);
    updateCounts();
    statusBar()->clearMessage();
    if (proxy_.rowCount() > 0) selectPlanRow(0);
    else if (r.top.empty() && !cancelled) message(QStringLiteral("no feasible plan: every plan is invalid or runs out of memory"));
}

void MainWindow::updateCounts() {
    if (plans_.rowCount() == 0 && rejections_.total() == 0) return;
    const sim::SearchResult& r = search_.result();
    QString text = QStringLiteral("%1 of %2 best plans shown; %3 considered, %4 rejected")
                       .arg(proxy_.rowCount())
                       .arg(plans_.rowCount())
                       .arg(countText(r.considered), countText(rejections_.total()));
    if (r.cancelled) text += QStringLiteral(" (cancelled: best so far)");
    if (!proxy_.unknownKeys().isEmpty())
        text += QStringLiteral("; unknown filter key: ") + proxy_.unknownKeys().join(QStringLiteral(", "));
    counts_->setText(text);
}

void MainWindow::selectPlanRow(int row) {
    if (row < 0 || row >= proxy_.rowCount()) return;
    planView_->selectionModel()->setCurrentIndex(proxy_.index(row, 0),
                                                 QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    planView_->scrollTo(proxy_.index(row, 0));
}

void MainWindow::onPlanRowChanged() {
    const QModelIndex current = planView_->selectionModel()->currentIndex();
    if (!current.isValid()) return;
    const QModelIndex source = proxy_.mapToSource(current);
    if (!source.isValid()) return;
    session_.selectPlan(plans_.plan(source.row()).plan);
}

void MainWindow::refreshCharts() {
    const PlanEvaluation& e = session_.evaluation();
    if (!e.ok()) {
        const QString why = !e.problems.empty() ? QStringLiteral("This plan is not valid:\n") + problemsText(e.problems)
                                                : QStringLiteral("Simulation failed: ") + e.error;
        memoryChart_->setData(MemoryChartData::empty(why));
        breakdown_->setData(BreakdownData::empty(why));
        timeline_->setSimulation(nullptr);
        measuredModel_.clear();
        return;
    }
    const sim::PlanSimulation& s = *e.simulation;
    MemoryChartData memory = MemoryChartData::fromReport(s.memory);
    memory.mayNotFit = sim::memoryVerdict(s.memory.peakBytes, s.memory.reservedPeakBytes, s.memory.capacityBytes, sim::memoryBandFor(e.plan)) ==
                       sim::MemoryVerdict::MayNotFit;
    memoryChart_->setData(memory);
    breakdown_->setData(BreakdownData::fromSimulation(s));
    timeline_->setSimulation(&s);
    refreshMeasured();
}

void MainWindow::refreshMeasured() {
    const PlanEvaluation& e = session_.evaluation();
    if (!measured_ || !e.ok()) {
        measuredModel_.clear();
        return;
    }
    const MeasuredComparison c = compareWithPrediction(*measured_, *e.simulation);
    measuredModel_.setComparison(c);
    MemoryChartData memory = memoryChart_->data();
    std::vector<std::optional<double>> measuredGib;
    for (const auto& m : c.memory) measuredGib.push_back(m.measuredBytes ? std::optional<double>(toGiB(*m.measuredBytes)) : std::nullopt);
    memory.setMeasured(measuredGib);
    memoryChart_->setData(memory);
    BreakdownData breakdown = breakdown_->data();
    breakdown.measuredStepSeconds = c.measuredStepSeconds;
    breakdown_->setData(breakdown);
    timeline_->setMeasured(c.measuredLane);

    QString summary = QStringLiteral("<b>%1</b>: step predicted %2, measured %3 (<b>%4</b>); %5 actions matched, mean |error| %6")
                          .arg(QFileInfo(measured_->source()).fileName().toHtmlEscaped(), secondsText(c.predictedStepSeconds),
                               secondsText(c.measuredStepSeconds), signedPercentText(c.stepError()))
                          .arg(c.actions.size())
                          .arg(percentText(c.meanAbsoluteError()));
    if (c.unmatchedMeasured || c.unmatchedPredicted)
        summary += QStringLiteral("; unmatched: %1 measured, %2 predicted").arg(c.unmatchedMeasured).arg(c.unmatchedPredicted);
    QStringList mem;
    for (const auto& m : c.memory)
        if (m.measuredBytes)
            mem << QStringLiteral("stage %1 %2 vs %3 (%4)")
                       .arg(m.stage)
                       .arg(gibText(*m.measuredBytes), gibText(m.predictedBytes), signedPercentText(*m.error()));
    if (!mem.isEmpty()) summary += QStringLiteral("<br>memory measured vs predicted: ") + mem.join(QStringLiteral(", "));
    measuredSummary_->setText(summary);
    measuredSummary_->setToolTip(measured_->source());
}

void MainWindow::setMeasuredRun(const MeasuredRun& run) {
    measured_ = run;
    // The trace names the plan it ran: show that plan so the comparison is like for like.
    if (run.planJson()) {
        ProblemList problems;
        const Plan plan = parsePlan(*run.planJson(), "/otherData/plan", problems);
        if (problems.empty() && planToJson(plan) != planToJson(session_.currentPlan())) {
            session_.selectPlan(plan);   // refreshCharts -> refreshMeasured
            tabs_->setCurrentIndex(2);
            return;
        }
    }
    refreshCharts();
    tabs_->setCurrentIndex(2);
}

void MainWindow::clearMeasuredRun() {
    measured_.reset();
    measuredModel_.clear();
    measuredSummary_->setText(QStringLiteral("File > Open measured run... lays a run's trace (and memory) over the prediction."));
    refreshCharts();
}

bool MainWindow::openScenarioFile(const QString& path) {
    try {
        // A file, or a preset name under scenarios/plans (as `tessel predict NAME` takes).
        Scenario s = loadScenarioFile(resolveScenarioPath(path.toStdString(), "scenario"));
        scenarioPath_ = path;
        setScenario(s);
        message(QStringLiteral("opened %1").arg(path));
        return true;
    } catch (const InputError& e) {
        QMessageBox::warning(this, QStringLiteral("Cannot open scenario"), problemsText(e.problems()));
    } catch (const std::exception& e) {
        QMessageBox::warning(this, QStringLiteral("Cannot open scenario"), QString::fromUtf8(e.what()));
    }
    return false;
}

bool MainWindow::saveScenarioFile(const QString& path) {
    Scenario s = session_.currentScenario();
    if (s.name.empty()) s.name = QFileInfo(path).completeBaseName().toStdString();
    QString error;
    if (!writeFile(path, QByteArray::fromStdString(scenarioToJson(s).dump(2) + "\n"), &error)) {
        QMessageBox::warning(this, QStringLiteral("Cannot save"), error);
        return false;
    }
    scenarioPath_ = path;
    updateTitle();
    message(QStringLiteral("saved %1 (tessel predict %1 reads it)").arg(path));
    return true;
}

bool MainWindow::openMeasuredRunFiles(const QString& tracePath, const QString& memoryPath) {
    try {
        setMeasuredRun(MeasuredRun::load(tracePath, memoryPath));
        return true;
    } catch (const InputError& e) {
        QMessageBox::warning(this, QStringLiteral("Cannot open measured run"), problemsText(e.problems()));
    }
    return false;
}

bool MainWindow::confirmOverwrite(const QString& path) {
    if (!QFileInfo::exists(path)) return true;
    return QMessageBox::question(this, QStringLiteral("Replace file?"),
                                 QStringLiteral("%1 already exists. Replace it?").arg(QFileInfo(path).fileName()),
                                 QMessageBox::Yes | QMessageBox::No, QMessageBox::No) == QMessageBox::Yes;
}

void MainWindow::openScenario() {
    const QString path = QFileDialog::getOpenFileName(this, QStringLiteral("Open scenario or plan"), scenarioDirectory(),
                                                      QStringLiteral("Scenario JSON (*.json);;All files (*)"));
    if (!path.isEmpty()) openScenarioFile(path);
}

void MainWindow::saveScenario() {
    const QString path = QFileDialog::getSaveFileName(this, QStringLiteral("Save scenario with this plan"),
                                                      scenarioPath_.isEmpty() ? QDir::currentPath() : scenarioPath_,
                                                      QStringLiteral("Scenario JSON (*.json)"), nullptr,
                                                      QFileDialog::DontConfirmOverwrite);
    if (path.isEmpty() || !confirmOverwrite(path)) return;
    saveScenarioFile(path);
}

void MainWindow::openMeasuredRun() {
    const QString trace = QFileDialog::getOpenFileName(this, QStringLiteral("Open a measured run's trace"), QString(),
                                                       QStringLiteral("Chrome trace (*.json);;All files (*)"));
    if (trace.isEmpty()) return;
    openMeasuredRunWithSiblings(trace);
}

bool MainWindow::openMeasuredRunWithSiblings(const QString& trace) {
    const QFileInfo info(trace);
    QString memory;
    for (const QString& name : {QStringLiteral("memory.json"), info.completeBaseName() + QStringLiteral(".memory.json"),
                                info.completeBaseName() + QStringLiteral("_memory.json")}) {
        const QString candidate = info.dir().filePath(name);
        if (candidate != trace && QFileInfo::exists(candidate)) {
            memory = candidate;
            break;
        }
    }
    const QString scenario = info.dir().filePath(QStringLiteral("scenario.json"));
    if (scenario != trace && QFileInfo::exists(scenario)) {
        if (!openScenarioFile(scenario)) return false;
    }
    return openMeasuredRunFiles(trace, memory);
}

void MainWindow::exportTrace() {
    const PlanEvaluation& e = session_.evaluation();
    if (!e.ok()) {
        QMessageBox::information(this, QStringLiteral("Nothing to export"), QStringLiteral("The current plan is not simulated."));
        return;
    }
    const QString path = QFileDialog::getSaveFileName(this, QStringLiteral("Export timeline as Chrome trace"),
                                                      QStringLiteral("trace.json"), QStringLiteral("Chrome trace (*.json)"),
                                                      nullptr, QFileDialog::DontConfirmOverwrite);
    if (path.isEmpty() || !confirmOverwrite(path)) return;
    QString error;
    if (!writeTraceFile(path, &error)) QMessageBox::warning(this, QStringLiteral("Cannot export"), error);
    else message(QStringLiteral("wrote %1: open it at https://ui.perfetto.dev").arg(path));
}

bool MainWindow::writeTraceFile(const QString& path, QString* error) {
    const PlanEvaluation& e = session_.evaluation();
    if (!e.ok()) {
        *error = QStringLiteral("the current plan is not simulated");
        return false;
    }
    return writeFile(path, QByteArray::fromStdString(sim::chromeTrace(*e.simulation).dump() + "\n"), error);
}

void MainWindow::exportChartImages() {
    const QString filters = svgExportAvailable() ? QStringLiteral("PNG image (*.png);;SVG image (*.svg)") : QStringLiteral("PNG image (*.png)");
    QString path = QFileDialog::getSaveFileName(this, QStringLiteral("Export charts"), QStringLiteral("plan.png"), filters,
                                                nullptr, QFileDialog::DontConfirmOverwrite);
    if (path.isEmpty()) return;
    if (QFileInfo(path).suffix().isEmpty()) path += QStringLiteral(".png");
    if (!confirmOverwrite(path)) return;
    ChartSet set{memoryChart_->data(), breakdown_->data(), timeline_->geometry(),
                 QStringLiteral("%1 - %2").arg(QString::fromStdString(session_.scenario().model.name), planSummary(session_.currentPlan()))};
    const QString error = exportCharts(path, set);
    if (!error.isEmpty()) QMessageBox::warning(this, QStringLiteral("Cannot export"), error);
    else message(QStringLiteral("wrote %1").arg(path));
}

QString MainWindow::frameworkSettings(int format, QString* problems) const {
    const sim::ExportFormat f = format == 0 ? sim::ExportFormat::Megatron : format == 1 ? sim::ExportFormat::DeepSpeed : sim::ExportFormat::Torchtitan;
    try {
        return QString::fromStdString(sim::exportPlan(session_.currentScenario(), f));
    } catch (const InputError& e) {
        *problems = problemsText(e.problems());
    } catch (const std::exception& e) {
        *problems = QString::fromUtf8(e.what());
    }
    return {};
}

void MainWindow::copyAs(int format) {
    const QString name = format == 0 ? QStringLiteral("Megatron-LM") : format == 1 ? QStringLiteral("DeepSpeed") : QStringLiteral("torchtitan");
    QString problems;
    const QString text = frameworkSettings(format, &problems);
    if (text.isEmpty()) {
        QMessageBox::warning(this, QStringLiteral("%1 cannot run this plan as predicted").arg(name), problems);
        return;
    }
    QApplication::clipboard()->setText(text);
    message(QStringLiteral("copied the plan as %1 settings").arg(name));
}

} // namespace tessel::gui
