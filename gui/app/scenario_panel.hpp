// The left panel: model (preset, HuggingFace config.json or fields by hand), cluster (preset or nodes, GPUs
// per node, GPU type and links by hand), the global batch, and the search controls.
#pragma once

#include "tessel/cost/scenario.hpp"

#include <QWidget>

#include <map>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace tessel::gui {

class ScenarioPanel : public QWidget {
    Q_OBJECT
public:
    explicit ScenarioPanel(QWidget* parent = nullptr);

    // Shows a scenario's model, cluster and global batch (no signals are emitted).
    void setScenario(const Scenario& scenario);
    QString fixText() const;
    void setFixText(const QString& text);
    int topK() const;
    // Search only plans that fit at the validated peak band's upper end (tessel search --memory-band on).
    bool memoryBandOnly() const;

    // Search state: running disables Search and enables Cancel; progress in [0, 1].
    void setSearchRunning(bool running);
    void setProgress(double fraction);
    void setSearchStatus(const QString& text, bool error = false);

    // Adds a section under the search controls (the rejection counts); `stretch` > 0 lets it grow.
    void addSection(QWidget* section, int stretch);

    QPushButton* searchButton() const { return searchButton_; }
    QPushButton* cancelButton() const { return cancelButton_; }
    QProgressBar* progressBar() const { return progress_; }

signals:
    void modelChanged(const tessel::ModelConfig& model);
    void clusterChanged(const tessel::ClusterConfig& cluster);
    void globalBatchChanged(int globalBatch);
    void searchRequested();
    void cancelRequested();
    void problem(const QString& message);

private:
    void loadModelPreset(const QString& name);
    void openHuggingFaceConfig();
    void loadClusterPreset(const QString& name);
    void modelFieldsEdited();
    void clusterFieldsEdited();
    void showModel(const ModelConfig& m);
    void showCluster(const ClusterConfig& c);

    ModelConfig model_;
    ClusterConfig cluster_;
    std::map<QString, GpuSpec> gpus_;   // GPU types of the shipped cluster presets, by name
    bool updating_ = false;

    QComboBox* modelPreset_;
    QSpinBox *layers_, *hidden_, *heads_, *kvHeads_, *ffnHidden_, *vocab_, *seqLen_;
    QComboBox* activation_;
    QLabel* modelInfo_;
    QComboBox* clusterPreset_;
    QSpinBox *nodes_, *gpusPerNode_;
    QComboBox* gpuType_;
    QDoubleSpinBox *intraGBps_, *interGBps_;
    QSpinBox* powerLimit_;   // the GPUs' board limit in watts; "n/a" for a GPU whose share is not a measured curve
    QLabel* clusterInfo_;
    QSpinBox* globalBatch_;
    QLineEdit* fix_;
    QSpinBox* topK_;
    QCheckBox* memoryBand_;
    QPushButton *searchButton_, *cancelButton_;
    QProgressBar* progress_;
    QLabel* searchStatus_;
};

} // namespace tessel::gui
