// preview_models.h — table models over a preview: the plan's keys, the collectives per layer with
// their predicted time, memory per rank, and the diagnostics. Each is reset when a new preview
// arrives (they are small: one row per key, collective, rank or finding).
#pragma once

#include "models/preview_service.h"

#include <QAbstractTableModel>

namespace tpui {

class PlanTableModel final : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Column { KeyColumn, StyleColumn, MatchesColumn, CollectiveColumn, NUM_COLUMNS };
    using QAbstractTableModel::QAbstractTableModel;
    void setPreview(std::shared_ptr<const PreviewResult> preview);
    int rowCount(const QModelIndex& parent = {}) const final;
    int columnCount(const QModelIndex& parent = {}) const final;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const final;
    Qt::ItemFlags flags(const QModelIndex& index) const final;
    bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) final;
    QString keyAt(int row) const;

signals:
    void styleEditRequested(const QString& key, const QString& style);

private:
    std::shared_ptr<const PreviewResult> m_p;
};

class CollectivesModel final : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Column { LayerColumn, KindColumn, WhereColumn, StyleColumn, BytesColumn, TimeColumn, NUM_COLUMNS };
    enum Role { PathRole = Qt::UserRole + 1, SortRole };
    using QAbstractTableModel::QAbstractTableModel;
    void setPreview(std::shared_ptr<const PreviewResult> preview);
    int rowCount(const QModelIndex& parent = {}) const final;
    int columnCount(const QModelIndex& parent = {}) const final;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const final;

private:
    std::shared_ptr<const PreviewResult> m_p;
};

class MemoryModel final : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Column { RankColumn, WeightsColumn, KvColumn, KvAtSeqColumn, ActivationColumn, TotalColumn, NUM_COLUMNS };
    using QAbstractTableModel::QAbstractTableModel;
    void setPreview(std::shared_ptr<const PreviewResult> preview);
    int rowCount(const QModelIndex& parent = {}) const final;
    int columnCount(const QModelIndex& parent = {}) const final;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const final;

private:
    std::shared_ptr<const PreviewResult> m_p;
};

class DiagnosticsModel final : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Column { SeverityColumn, WhereColumn, MessageColumn, NUM_COLUMNS };
    enum Role { WhereRole = Qt::UserRole + 1 };
    using QAbstractTableModel::QAbstractTableModel;
    // The model's own findings (loading) followed by the preview's (plan).
    void setDiagnostics(std::vector<tp::Diagnostic> diagnostics);
    int rowCount(const QModelIndex& parent = {}) const final;
    int columnCount(const QModelIndex& parent = {}) const final;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const final;
    int count(tp::Severity s) const;

private:
    std::vector<tp::Diagnostic> m_d;
};

} // namespace tpui
