// preview_models.h — table models over a preview: the plan's keys, the collectives per layer with
// their predicted time, memory per rank, and the diagnostics. Each is reset when a new preview
// arrives (they are small: one row per key, collective, rank or finding).
#pragma once

#include "models/preview_service.h"

#include <QAbstractTableModel>
#include <QHash>

namespace tpui {

// A table whose column titles are a fixed list.
class HeaderedTableModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    HeaderedTableModel(QStringList headers, QObject* parent);
    int columnCount(const QModelIndex& parent = {}) const final;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const final;

private:
    QStringList m_headers;
};

// A table over one preview, reset when a new preview arrives.
class PreviewTableModel : public HeaderedTableModel
{
    Q_OBJECT
public:
    using HeaderedTableModel::HeaderedTableModel;
    void setPreview(std::shared_ptr<const PreviewResult> preview);

protected:
    std::shared_ptr<const PreviewResult> m_p;
};

class PlanTableModel final : public PreviewTableModel
{
    Q_OBJECT
public:
    enum Column { KeyColumn, StyleColumn, MatchesColumn, CollectiveColumn, NUM_COLUMNS };
    explicit PlanTableModel(QObject* parent = nullptr);
    int rowCount(const QModelIndex& parent = {}) const final;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
    Qt::ItemFlags flags(const QModelIndex& index) const final;
    bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) final;
    QString keyAt(int row) const;

signals:
    void styleEditRequested(const QString& key, const QString& style);
};

class CollectivesModel final : public PreviewTableModel
{
    Q_OBJECT
public:
    // Bytes and predicted time in prefill (B × S tokens) and in one decode step (B tokens at context S).
    enum Column { LayerColumn, KindColumn, WhereColumn, StyleColumn, BytesColumn, TimeColumn, DecodeBytesColumn, DecodeTimeColumn, NUM_COLUMNS };
    enum Role { PathRole = Qt::UserRole + 1, SortRole };
    explicit CollectivesModel(QObject* parent = nullptr);
    int rowCount(const QModelIndex& parent = {}) const final;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
};

class MemoryModel final : public PreviewTableModel
{
    Q_OBJECT
public:
    enum Column { RankColumn, WeightsColumn, KvColumn, KvAtSeqColumn, ActivationColumn, TotalColumn, NUM_COLUMNS };
    explicit MemoryModel(QObject* parent = nullptr);
    int rowCount(const QModelIndex& parent = {}) const final;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
};

class DiagnosticsModel final : public HeaderedTableModel
{
    Q_OBJECT
public:
    enum Column { SeverityColumn, WhereColumn, MessageColumn, NUM_COLUMNS };
    enum Role { WhereRole = Qt::UserRole + 1, FollowsRole }; // FollowsRole: the cause's where, empty for a cause
    explicit DiagnosticsModel(QObject* parent = nullptr);
    // The model's own findings (loading) followed by the preview's (plan).
    void setDiagnostics(std::vector<tp::Diagnostic> diagnostics);
    int rowCount(const QModelIndex& parent = {}) const final;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
    int count(tp::Severity s) const;

private:
    std::vector<tp::Diagnostic> m_d;
    QHash<QString, int> m_consequences; // a cause's where → how many errors follow from it
};

} // namespace tpui
