// The left panel: model, cluster, global batch and the search controls.
#include "app/scenario_panel.hpp"

#include "core/format.hpp"
#include "core/gpu_types.hpp"
#include "core/search_controller.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>
#include <QDir>
#include <QFileInfo>

#include <algorithm>
#include <cmath>

namespace tessel::gui {

namespace {
QSpinBox* intSpin(int min, int max, QWidget* parent) {
    auto* s = new QSpinBox(parent);
    s->setRange(min, max);
    // Only commit on Enter, arrows or focus change: typing "128" must not simulate 1 and 12 on the way.
    s->setKeyboardTracking(false);
    s->setAccelerated(true);
    return s;
}

QDoubleSpinBox* gbpsSpin(QWidget* parent) {
    auto* s = new QDoubleSpinBox(parent);
    s->setRange(0.1, 100000.0);
    s->setDecimals(1);
    s->setKeyboardTracking(false);
    return s;
}

// Long preset and GPU names must not widen the panel: the combo shows what fits, the popup shows all.
void compactCombo(QComboBox* c) {
    c->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    c->setMinimumContentsLength(8);
}

void addPair(QGridLayout* g, int row, const QString& a, QWidget* wa, const QString& b, QWidget* wb) {
    g->addWidget(new QLabel(a), row, 0);
    g->addWidget(wa, row, 1);
    if (wb) {
        g->addWidget(new QLabel(b), row, 2);
        g->addWidget(wb, row, 3);
    }
}

QString paramsText(int64_t n) {
    const double v = static_cast<double>(n);
    if (v >= 1e9) return QString::number(v / 1e9, 'f', 1) + QStringLiteral(" B");
    return QString::number(v / 1e6, 'f', 0) + QStringLiteral(" M");
}
} // namespace

ScenarioPanel::ScenarioPanel(QWidget* parent) : QWidget(parent) {
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(4, 4, 4, 4);
    outer->setSpacing(6);

    // Model.
    auto* modelBox = new QGroupBox(QStringLiteral("Model"), this);
    auto* mg = new QGridLayout(modelBox);
    mg->setContentsMargins(6, 4, 6, 4);
    mg->setVerticalSpacing(3);
    modelPreset_ = new QComboBox(modelBox);
    for (const auto& n : presetNames("models")) modelPreset_->addItem(QString::fromStdString(n));
    modelPreset_->setToolTip(QStringLiteral("A model preset from scenarios/models"));
    compactCombo(modelPreset_);
    auto* hfButton = new QPushButton(QStringLiteral("config.json..."), modelBox);
    hfButton->setToolTip(QStringLiteral("Load a HuggingFace config.json (llama, mistral, mixtral, gpt2, qwen2) or a tessel model file"));
    mg->addWidget(modelPreset_, 0, 0, 1, 3);
    mg->addWidget(hfButton, 0, 3);
    layers_ = intSpin(1, 100000, modelBox);
    hidden_ = intSpin(1, 1 << 20, modelBox);
    heads_ = intSpin(1, 100000, modelBox);
    kvHeads_ = intSpin(1, 100000, modelBox);
    ffnHidden_ = intSpin(1, 1 << 22, modelBox);
    vocab_ = intSpin(1, 1 << 24, modelBox);
    seqLen_ = intSpin(1, 1 << 24, modelBox);
    activation_ = new QComboBox(modelBox);
    activation_->addItems({QStringLiteral("gelu"), QStringLiteral("swiglu"), QStringLiteral("squared_relu"), QStringLiteral("geglu")});
    // Object names let tests (and style sheets) find the fields.
    layers_->setObjectName(QStringLiteral("layers"));
    hidden_->setObjectName(QStringLiteral("hidden"));
    heads_->setObjectName(QStringLiteral("heads"));
    kvHeads_->setObjectName(QStringLiteral("kvHeads"));
    addPair(mg, 1, QStringLiteral("layers"), layers_, QStringLiteral("hidden"), hidden_);
    addPair(mg, 2, QStringLiteral("heads"), heads_, QStringLiteral("kv heads"), kvHeads_);
    addPair(mg, 3, QStringLiteral("ffn"), ffnHidden_, QStringLiteral("vocab"), vocab_);
    addPair(mg, 4, QStringLiteral("seq len"), seqLen_, QStringLiteral("act."), activation_);
    modelInfo_ = new QLabel(modelBox);
    modelInfo_->setWordWrap(true);
    mg->addWidget(modelInfo_, 5, 0, 1, 4);
    outer->addWidget(modelBox);

    // Cluster.
    auto* clusterBox = new QGroupBox(QStringLiteral("Cluster"), this);
    auto* cg = new QGridLayout(clusterBox);
    cg->setContentsMargins(6, 4, 6, 4);
    cg->setVerticalSpacing(3);
    clusterPreset_ = new QComboBox(clusterBox);
    gpuType_ = new QComboBox(clusterBox);
    compactCombo(clusterPreset_);
    compactCombo(gpuType_);
    std::vector<ClusterConfig> presets;
    for (const auto& n : presetNames("clusters")) {
        clusterPreset_->addItem(QString::fromStdString(n));
        try {
            presets.push_back(loadClusterRef(n, n));
        } catch (const std::exception&) {
            // A broken preset is reported when chosen; the GPU list just lacks it.
        }
    }
    gpus_ = gpuTypesFromPresets(presets);
    for (const auto& [name, spec] : gpus_) gpuType_->addItem(name);
    gpuType_->setToolTip(QStringLiteral("GPU type (memory, peak FLOPs, HBM bandwidth) taken from a cluster preset"));
    gpuType_->setObjectName(QStringLiteral("gpuType"));
    cg->addWidget(clusterPreset_, 0, 0, 1, 4);
    nodes_ = intSpin(1, 1 << 20, clusterBox);
    gpusPerNode_ = intSpin(1, 1024, clusterBox);
    intraGBps_ = gbpsSpin(clusterBox);
    interGBps_ = gbpsSpin(clusterBox);
    intraGBps_->setToolTip(QStringLiteral("Bandwidth per GPU inside a node (NVLink), GB/s"));
    interGBps_->setToolTip(QStringLiteral("Bandwidth per GPU across nodes (InfiniBand/RoCE), GB/s"));
    nodes_->setObjectName(QStringLiteral("nodes"));
    gpusPerNode_->setObjectName(QStringLiteral("gpusPerNode"));
    addPair(cg, 1, QStringLiteral("nodes"), nodes_, QStringLiteral("GPUs/node"), gpusPerNode_);
    cg->addWidget(new QLabel(QStringLiteral("GPU")), 2, 0);
    cg->addWidget(gpuType_, 2, 1, 1, 3);
    addPair(cg, 3, QStringLiteral("NVLink"), intraGBps_, QStringLiteral("network"), interGBps_);
    // The board power limit (nvidia-smi -pl): moves a measured share curve by its power law (FORMULAS.md §3.3).
    powerLimit_ = intSpin(0, 5000, clusterBox);
    powerLimit_->setObjectName(QStringLiteral("powerLimit"));
    powerLimit_->setSuffix(QStringLiteral(" W"));
    powerLimit_->setSpecialValueText(QStringLiteral("n/a"));
    powerLimit_->setToolTip(QStringLiteral("Board power limit of the GPUs (nvidia-smi -pl): the tensor cores' measured share "
                                           "curve moves to it by its clock-power law (Hopper presets; n/a where the share "
                                           "is a fitted constant)"));
    cg->addWidget(new QLabel(QStringLiteral("power")), 4, 0);
    cg->addWidget(powerLimit_, 4, 1);
    clusterInfo_ = new QLabel(clusterBox);
    clusterInfo_->setWordWrap(true);
    cg->addWidget(clusterInfo_, 5, 0, 1, 4);
    outer->addWidget(clusterBox);

    // Search.
    auto* searchBox = new QGroupBox(QStringLiteral("Search"), this);
    auto* sg = new QGridLayout(searchBox);
    sg->setContentsMargins(6, 4, 6, 4);
    sg->setVerticalSpacing(3);
    globalBatch_ = intSpin(1, 1 << 24, searchBox);
    globalBatch_->setToolTip(QStringLiteral("Global batch in sequences"));
    globalBatch_->setObjectName(QStringLiteral("globalBatch"));
    topK_ = intSpin(1, 1000, searchBox);
    topK_->setValue(50);
    topK_->setToolTip(QStringLiteral("How many of the best plans the table keeps"));
    addPair(sg, 0, QStringLiteral("batch"), globalBatch_, QStringLiteral("keep"), topK_);
    fix_ = new QLineEdit(searchBox);
    fix_->setPlaceholderText(QStringLiteral("fix: tp=8, schedule=1f1b"));
    fix_->setToolTip(QStringLiteral("Pin plan fields (as tessel search --fix): tp, pp, dp, cp, ep, vpp, micro_batch, "
                                    "zero_stage, recompute, schedule, sp, cp_comm_type, rank_order"));
    sg->addWidget(new QLabel(QStringLiteral("fix")), 1, 0);
    sg->addWidget(fix_, 1, 1, 1, 3);
    memoryBand_ = new QCheckBox(QStringLiteral("only plans that fit at the validated peak band"), searchBox);
    memoryBand_->setObjectName(QStringLiteral("memoryBand"));
    memoryBand_->setToolTip(QStringLiteral("As tessel search --memory-band on: leave out plans whose predicted peak fits "
                                           "but which published runs of their framework family say may not (the peak "
                                           "marked ! otherwise)"));
    sg->addWidget(memoryBand_, 2, 0, 1, 4);
    searchButton_ = new QPushButton(QStringLiteral("Search"), searchBox);
    searchButton_->setDefault(true);
    cancelButton_ = new QPushButton(QStringLiteral("Cancel"), searchBox);
    cancelButton_->setEnabled(false);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(searchButton_);
    buttons->addWidget(cancelButton_);
    sg->addLayout(buttons, 3, 0, 1, 4);
    progress_ = new QProgressBar(searchBox);
    progress_->setRange(0, 1000);
    progress_->setValue(0);
    progress_->setFormat(QStringLiteral("%p%"));
    sg->addWidget(progress_, 4, 0, 1, 4);
    searchStatus_ = new QLabel(searchBox);
    searchStatus_->setWordWrap(true);
    searchStatus_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    sg->addWidget(searchStatus_, 5, 0, 1, 4);
    outer->addWidget(searchBox);

    connect(modelPreset_, &QComboBox::activated, this, [this](int i) { loadModelPreset(modelPreset_->itemText(i)); });
    connect(hfButton, &QPushButton::clicked, this, &ScenarioPanel::openHuggingFaceConfig);
    for (QSpinBox* s : {layers_, hidden_, heads_, kvHeads_, ffnHidden_, vocab_, seqLen_})
        connect(s, &QSpinBox::valueChanged, this, &ScenarioPanel::modelFieldsEdited);
    connect(activation_, &QComboBox::activated, this, &ScenarioPanel::modelFieldsEdited);
    connect(clusterPreset_, &QComboBox::activated, this, [this](int i) { loadClusterPreset(clusterPreset_->itemText(i)); });
    for (QSpinBox* s : {nodes_, gpusPerNode_, powerLimit_})
        connect(s, &QSpinBox::valueChanged, this, &ScenarioPanel::clusterFieldsEdited);
    for (QDoubleSpinBox* s : {intraGBps_, interGBps_})
        connect(s, &QDoubleSpinBox::valueChanged, this, &ScenarioPanel::clusterFieldsEdited);
    connect(gpuType_, &QComboBox::activated, this, &ScenarioPanel::clusterFieldsEdited);
    connect(globalBatch_, &QSpinBox::valueChanged, this, [this](int v) {
        if (!updating_) emit globalBatchChanged(v);
    });
    connect(searchButton_, &QPushButton::clicked, this, &ScenarioPanel::searchRequested);
    connect(fix_, &QLineEdit::returnPressed, this, &ScenarioPanel::searchRequested);
    connect(cancelButton_, &QPushButton::clicked, this, &ScenarioPanel::cancelRequested);
}

void ScenarioPanel::setScenario(const Scenario& s) {
    showModel(s.model);
    showCluster(s.cluster);
    updating_ = true;
    globalBatch_->setValue(s.plan.globalBatch);
    updating_ = false;
}

void ScenarioPanel::showModel(const ModelConfig& m) {
    model_ = m;
    updating_ = true;
    const int preset = modelPreset_->findText(QString::fromStdString(m.name));
    if (preset >= 0) modelPreset_->setCurrentIndex(preset);
    else {
        // A model from a file or edited by hand: show its name as an extra entry.
        modelPreset_->addItem(QString::fromStdString(m.name));
        modelPreset_->setCurrentIndex(modelPreset_->count() - 1);
    }
    layers_->setValue(m.layers);
    hidden_->setValue(static_cast<int>(m.hidden));
    heads_->setValue(m.heads);
    kvHeads_->setValue(m.kvHeads);
    ffnHidden_->setValue(static_cast<int>(m.ffnHidden));
    vocab_->setValue(static_cast<int>(m.vocab));
    seqLen_->setValue(static_cast<int>(m.seqLen));
    activation_->setCurrentIndex(m.activation == Activation::Swiglu        ? 1
                                 : m.activation == Activation::SquaredRelu ? 2
                                 : m.activation == Activation::Geglu       ? 3
                                                                           : 0);
    QString info = paramsText(countParameters(m).total(m.layers)) + QStringLiteral(" parameters");
    if (m.moe) info += QStringLiteral(", MoE %1 experts top-%2").arg(m.moe->experts).arg(m.moe->topK);
    modelInfo_->setText(info);
    updating_ = false;
}

void ScenarioPanel::showCluster(const ClusterConfig& c) {
    cluster_ = c;
    updating_ = true;
    const int preset = clusterPreset_->findText(QString::fromStdString(c.name));
    if (preset >= 0) clusterPreset_->setCurrentIndex(preset);
    else {
        clusterPreset_->addItem(QString::fromStdString(c.name));
        clusterPreset_->setCurrentIndex(clusterPreset_->count() - 1);
    }
    nodes_->setValue(c.nodes);
    gpusPerNode_->setValue(c.gpusPerNode);
    const QString gpu = QString::fromStdString(c.gpu.name);
    if (gpus_.find(gpu) == gpus_.end()) {
        gpus_[gpu] = c.gpu;
        gpuType_->addItem(gpu);
    }
    gpuType_->setCurrentText(gpu);
    intraGBps_->setValue(c.intraNode.bandwidthBytesPerSecond / 1e9);
    interGBps_->setValue(c.interNode.bandwidthBytesPerSecond / 1e9);
    const auto& law = c.gpu.sustainedSharePower;
    powerLimit_->setEnabled(law.has_value());
    powerLimit_->setMinimum(law ? static_cast<int>(std::floor(law->idleWatts)) + 1 : 0);
    powerLimit_->setValue(law ? static_cast<int>(std::lround(c.gpu.powerLimitWatts > 0.0 ? c.gpu.powerLimitWatts : law->measuredAtWatts)) : 0);
    QString info = QStringLiteral("%1 GPUs, %2 each").arg(c.totalGpus()).arg(gibText(static_cast<double>(c.gpu.memoryBytes), 0));
    if (const double scale = c.gpu.powerLimitShareScale(); scale != 1.0)
        info += QStringLiteral("; tensor cores x%1 of the curve measured at %2 W").arg(scale, 0, 'f', 3).arg(law->measuredAtWatts, 0, 'f', 0);
    clusterInfo_->setText(info);
    updating_ = false;
}

void ScenarioPanel::loadModelPreset(const QString& name) {
    try {
        const ModelConfig m = loadModelRef(name.toStdString(), "model preset");
        showModel(m);
        emit modelChanged(model_);
    } catch (const InputError& e) {
        emit problem(problemsText(e.problems()));
    }
}

void ScenarioPanel::openHuggingFaceConfig() {
    const QString path = QFileDialog::getOpenFileName(this, QStringLiteral("Open a model (HuggingFace config.json or tessel model)"),
                                                      QString(), QStringLiteral("JSON (*.json);;All files (*)"));
    if (path.isEmpty()) return;
    try {
        ModelConfig m = loadModelRef(path.toStdString(), path.toStdString());
        if (m.name.empty()) m.name = QFileInfo(path).dir().dirName().toStdString();
        showModel(m);
        emit modelChanged(model_);
    } catch (const InputError& e) {
        emit problem(problemsText(e.problems()));
    }
}

void ScenarioPanel::loadClusterPreset(const QString& name) {
    try {
        ClusterConfig c = loadClusterRef(name.toStdString(), "cluster preset");
        // Keep the GPU count the user had when the new nodes are as large: a preset switch changes hardware,
        // not the job size.
        if (c.gpusPerNode == cluster_.gpusPerNode && cluster_.nodes > 0) c.nodes = cluster_.nodes;
        showCluster(c);
        emit clusterChanged(cluster_);
    } catch (const InputError& e) {
        emit problem(problemsText(e.problems()));
    }
}

void ScenarioPanel::modelFieldsEdited() {
    if (updating_) return;
    ModelConfig m = model_;
    // head_dim follows hidden / heads unless the model set it to something else.
    const bool derivedHeadDim = m.heads > 0 && m.headDim == m.hidden / m.heads;
    m.layers = layers_->value();
    m.hidden = hidden_->value();
    m.heads = heads_->value();
    m.kvHeads = kvHeads_->value();
    m.ffnHidden = ffnHidden_->value();
    m.vocab = vocab_->value();
    m.seqLen = seqLen_->value();
    const int act = activation_->currentIndex();
    m.activation = act == 1 ? Activation::Swiglu : act == 2 ? Activation::SquaredRelu : act == 3 ? Activation::Geglu : Activation::Gelu;
    if (derivedHeadDim && m.heads > 0) m.headDim = m.hidden / m.heads;
    // Latent attention gives every head its own key and value: kv heads follow the heads.
    if (m.mla) m.kvHeads = m.heads;
    // Dense layers past a shortened model's last layer go with it (the model file's rule: indices below layers).
    if (m.moe)
        m.moe->denseLayers.erase(std::remove_if(m.moe->denseLayers.begin(), m.moe->denseLayers.end(),
                                                [&](int l) { return l >= m.layers; }),
                                 m.moe->denseLayers.end());
    if (m.name.find(" (edited)") == std::string::npos) m.name += " (edited)";
    showModel(m);
    emit modelChanged(model_);
}

void ScenarioPanel::clusterFieldsEdited() {
    if (updating_) return;
    ClusterConfig c = cluster_;
    c.nodes = nodes_->value();
    c.gpusPerNode = gpusPerNode_->value();
    // Only a GPU type the user picked replaces the GPU: several presets name the same GPU with other figures (the
    // calibrated h100-single beside dgx-h100-80g), and an edit of another field must keep the cluster's own.
    if (gpuType_->currentText() != QString::fromStdString(cluster_.gpu.name))
        if (const auto it = gpus_.find(gpuType_->currentText()); it != gpus_.end()) c.gpu = it->second;
    c.intraNode.bandwidthBytesPerSecond = intraGBps_->value() * 1e9;
    c.interNode.bandwidthBytesPerSecond = interGBps_->value() * 1e9;
    // Another GPU brings its own limit; the same GPU takes the field's (its curve's own limit being no cap).
    if (c.gpu.name == cluster_.gpu.name && c.gpu.sustainedSharePower) {
        const double watts = powerLimit_->value();
        c.gpu.powerLimitWatts = watts == c.gpu.sustainedSharePower->measuredAtWatts ? 0.0 : watts;
    }
    // Node count alone is the job size, not a different cluster: keep the preset's name then.
    const bool hardwareEdited = c.gpusPerNode != cluster_.gpusPerNode || c.gpu.name != cluster_.gpu.name ||
                                c.intraNode.bandwidthBytesPerSecond != cluster_.intraNode.bandwidthBytesPerSecond ||
                                c.interNode.bandwidthBytesPerSecond != cluster_.interNode.bandwidthBytesPerSecond ||
                                c.gpu.powerLimitWatts != cluster_.gpu.powerLimitWatts;
    if (hardwareEdited && c.name.find(" (edited)") == std::string::npos) c.name += " (edited)";
    showCluster(c);
    emit clusterChanged(cluster_);
}

void ScenarioPanel::addSection(QWidget* section, int stretch) {
    static_cast<QVBoxLayout*>(layout())->addWidget(section, stretch);
}

QString ScenarioPanel::fixText() const { return fix_->text(); }
void ScenarioPanel::setFixText(const QString& text) { fix_->setText(text); }
int ScenarioPanel::topK() const { return topK_->value(); }
bool ScenarioPanel::memoryBandOnly() const { return memoryBand_->isChecked(); }

void ScenarioPanel::setSearchRunning(bool running) {
    searchButton_->setEnabled(!running);
    cancelButton_->setEnabled(running);
    if (running) progress_->setValue(0);
}

void ScenarioPanel::setProgress(double fraction) {
    progress_->setValue(static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * 1000.0)));
}

void ScenarioPanel::setSearchStatus(const QString& text, bool error) {
    searchStatus_->setStyleSheet(error ? QStringLiteral("color: #c62828;") : QString());
    searchStatus_->setText(text);
}

} // namespace tessel::gui
