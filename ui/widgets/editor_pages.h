// editor_pages.h — the plan editor's pages, one class each: Summary (the model's configuration),
// Plan (the keys and their styles), Layer dataflow (one decoder layer), Collectives & memory (the
// collectives, T side by side, memory per rank) and Diagnostics. MainWindow places them in its tabs,
// hands each the newest preview and connects what they ask for (select a module, set T).
#pragma once

#include "models/preview_service.h"

#include "tp/core/diagnostic.h"
#include "tp/model/model_spec.h"

#include <QTextBrowser>
#include <QWidget>

#include <functional>
#include <memory>

class QComboBox;
class QTableWidget;
class QLabel;
class QSpinBox;
class QTableView;


namespace tpui {

class CollectivesModel;
class DataflowView;
class DiagnosticsModel;
class MemoryBars;
class MemoryModel;
class PlanDocument;
class PlanTableModel;
class ScalingTable;

class SummaryPage final : public QTextBrowser
{
    Q_OBJECT
public:
    explicit SummaryPage(QWidget* parent = nullptr);
    // The configuration of `spec` and its checkpoint's totals (checkpointBytes < 0: none).
    void showModel(const tp::ModelSpec& spec, std::size_t checkpointFiles, std::size_t checkpointTensors, std::int64_t checkpointBytes);
    // Above the configuration: what the plan gives at the toolbar's T on its hardware (fit, prefill,
    // decode step, collectives, the KV cache's layout), or why it gives nothing.
    void setPreview(const PreviewResult& r);

private:
    void render();
    QString m_model, m_plan; // the two parts, as HTML
};

class PlanPage final : public QWidget
{
    Q_OBJECT
public:
    PlanPage(PlanDocument* doc, std::function<QStringList()> styleNames, QWidget* parent = nullptr);
    PlanTableModel* model() const { return m_model; }
    QTableView* view() const { return m_view; }
    void setPreview(std::shared_ptr<const PreviewResult> preview);
    // Adds `key` (as replicate) when it names a module or parameter of the model; else returns why
    // not and changes nothing.
    QString addKey(const QString& key);

signals:
    void pathActivated(const QString& path);
    void keyRefused(const QString& why);

private:
    PlanDocument* m_doc;
    PlanTableModel* m_model;
    QTableView* m_view;
};

class DataflowPage final : public QWidget
{
    Q_OBJECT
public:
    explicit DataflowPage(QWidget* parent = nullptr);
    DataflowView* view() const { return m_view; }
    QSpinBox* layerBox() const { return m_layer; }
    void setLayerCount(int layers);

private:
    DataflowView* m_view;
    QSpinBox* m_layer;
};

class CollectivesPage final : public QWidget
{
    Q_OBJECT
public:
    explicit CollectivesPage(QWidget* parent = nullptr);
    CollectivesModel* collectivesModel() const { return m_collectivesModel; }
    MemoryModel* memoryModel() const { return m_memoryModel; }
    ScalingTable* scalingTable() const { return m_scalingTable; }
    MemoryBars* memoryBars() const { return m_memoryBars; }
    QComboBox* kvDtypeBox() const { return m_kvDtype; }
    QLabel* kvLayoutLabel() const { return m_kvLayout; }
    // Coverage: the weight matrices whole on every rank, by plan key (tp::wholeWeights).
    QTableWidget* wholeWeightsTable() const { return m_whole; }
    void setPreview(std::shared_ptr<const PreviewResult> preview);

signals:
    void pathActivated(const QString& path);
    void tpActivated(int tp);
    void kvDtypeChosen(const QString& kvDtype); // PreviewSettings::kvDtype

private:
    CollectivesModel* m_collectivesModel;
    MemoryModel* m_memoryModel;
    ScalingTable* m_scalingTable;
    MemoryBars* m_memoryBars;
    QLabel* m_caption; // the scaling table's: hardware, batch × seq, this T's split
    QComboBox* m_kvDtype;
    QLabel* m_kvLayout; // the cache layout and dtype the KV figures assume
    QTableWidget* m_whole;
    QLabel* m_wholeCaption;
    QTableView* m_collectivesView = nullptr;
};

class DiagnosticsPage final : public QWidget
{
    Q_OBJECT
public:
    explicit DiagnosticsPage(QWidget* parent = nullptr);
    DiagnosticsModel* model() const { return m_model; }
    QTableView* view() const { return m_view; }
    void setDiagnostics(std::vector<tp::Diagnostic> diagnostics);

signals:
    void pathActivated(const QString& path);

private:
    DiagnosticsModel* m_model;
    QTableView* m_view;
};

} // namespace tpui
