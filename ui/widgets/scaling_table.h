// scaling_table.h — the plan side by side at T = 1…max (PreviewResult::scaling): whether the plan is
// valid there (the reason when not), whether its largest rank fits the device, its memory per rank
// and headroom, the bytes its collectives move per forward, the predicted prefill forward and decode
// step, the prefill speedup and efficiency (speedup / T). The row of the preview's T is highlighted,
// invalid rows are greyed with their reason as tooltip; clicking a row asks for that T.
#pragma once

#include "models/preview_service.h"

#include <QAbstractTableModel>
#include <QTableView>

#include <memory>

namespace tpui {

class ScalingTableModel final : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Column {
        TpColumn, ValidColumn, FitsColumn, MemoryColumn, HeadroomColumn, BytesColumn, PrefillColumn, DecodeColumn,
        SpeedupColumn, EfficiencyColumn, DecodeSpeedupColumn, NUM_COLUMNS
    };
    enum Role { TpRole = Qt::UserRole + 1, ValueRole }; // T of the row; the column's number (seconds, bytes, ratio)
    explicit ScalingTableModel(QObject* parent = nullptr);
    void setPreview(std::shared_ptr<const PreviewResult> r);
    int currentTp() const { return m_currentTp; }
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    QString whyNot(const tp::ScalingPoint& p) const;  // empty when valid and within the devices
    std::vector<tp::ScalingPoint> m_points;
    int m_currentTp = 0, m_devices = 0;
    qint64 m_batch = 1, m_seq = 1;
    QString m_hardware;
};

class ScalingTable final : public QTableView
{
    Q_OBJECT
public:
    explicit ScalingTable(QWidget* parent = nullptr);
    ScalingTableModel* scalingModel() const { return m_model; }
    void setPreview(std::shared_ptr<const PreviewResult> r);

signals:
    void tpActivated(int tp);

private:
    ScalingTableModel* m_model;
};

} // namespace tpui
