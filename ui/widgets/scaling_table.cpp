#include "widgets/scaling_table.h"

#include "models/format.h"

#include <QGuiApplication>
#include <QHeaderView>
#include <QPalette>

namespace tpui {

namespace {
// Readable on light and dark bases alike.
QColor overflowColor() { return QColor(220, 50, 50); }
} // namespace

ScalingTableModel::ScalingTableModel(QObject* parent)
    : QAbstractTableModel(parent)
{
}

void ScalingTableModel::setPreview(std::shared_ptr<const PreviewResult> r)
{
    beginResetModel();
    m_points = r ? r->scaling : std::vector<tp::ScalingPoint>{};
    m_currentTp = r ? r->settings.tpSize : 0;
    m_devices = r && r->hardware ? r->hardware->devices : 0;
    m_hardware = r && r->hardware ? QString::fromStdString(r->hardware->id) : QString();
    m_batch = r ? r->settings.batch : 1;
    m_seq = r ? r->settings.seq : 1;
    endResetModel();
}

int ScalingTableModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : int(m_points.size());
}

int ScalingTableModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : NUM_COLUMNS;
}

QVariant ScalingTableModel::headerData(int section, Qt::Orientation o, int role) const
{
    if (o != Qt::Horizontal)
        return {};
    if (role == Qt::DisplayRole) {
        switch (section) {
        case TpColumn: return tr("T");
        case ValidColumn: return tr("Plan");
        case FitsColumn: return tr("Fits");
        case MemoryColumn: return tr("Memory/rank");
        case HeadroomColumn: return tr("Headroom");
        case BytesColumn: return tr("Sent/rank");
        case PrefillColumn: return tr("Prefill");
        case DecodeColumn: return tr("Decode step");
        case SpeedupColumn: return tr("Prefill speedup");
        case EfficiencyColumn: return tr("Efficiency");
        case DecodeSpeedupColumn: return tr("Decode speedup");
        }
    }
    if (role == Qt::ToolTipRole) {
        switch (section) {
        case FitsColumn:
        case MemoryColumn:
            return tr("The rank that needs the most: weights, KV cache at batch × context, prefill activation peak "
                      "and the largest collective's buffer");
        case HeadroomColumn: return tr("Device memory left on that rank (negative: over capacity)");
        case BytesColumn: return tr("Bytes each rank sends in one prefill forward (a ring all-reduce sends 2(T−1)/T of its "
                                    "tensor, the others (T−1)/T); the tooltip has the tensors' total");
        case PrefillColumn: return tr("Predicted forward of batch × sequence tokens, slowest rank");
        case DecodeColumn: return tr("Predicted decode step of batch tokens at context = sequence");
        case SpeedupColumn: return tr("Prefill time at T=1 / at T");
        case EfficiencyColumn: return tr("Prefill speedup / T");
        case DecodeSpeedupColumn: return tr("Decode step at T=1 / at T (the step reads every rank's weights: it scales apart from prefill)");
        }
    }
    return {};
}

QString ScalingTableModel::whyNot(const tp::ScalingPoint& p) const
{
    if (!p.valid)
        return p.reason.empty() ? tr("the plan has errors at T=%1").arg(p.tp) : QString::fromStdString(p.reason);
    if (m_devices > 0 && p.tp > m_devices)
        return tr("T=%1 needs %1 devices; %2 has %3 (the prediction lets ranks share them)").arg(p.tp).arg(m_hardware).arg(m_devices);
    return {};
}

QVariant ScalingTableModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= NUM_COLUMNS)
        return {};
    const tp::ScalingPoint& p = m_points[std::size_t(index.row())];
    const QString why = whyNot(p);
    const bool hasMemory = p.valid && p.deviceBytes > 0;
    const double headroom = double(p.deviceBytes) - double(p.memoryBytes);
    switch (role) {
    case TpRole: return p.tp;
    case ValueRole:
        switch (index.column()) {
        case TpColumn: return p.tp;
        case ValidColumn: return p.valid;
        case FitsColumn: return hasMemory ? QVariant(p.fits) : QVariant();
        case MemoryColumn: return hasMemory ? QVariant(qint64(p.memoryBytes)) : QVariant();
        case HeadroomColumn: return hasMemory ? QVariant(headroom) : QVariant();
        case BytesColumn: return p.valid ? QVariant(qint64(p.commBytesPerRank)) : QVariant();
        case PrefillColumn: return p.valid ? QVariant(p.seconds) : QVariant();
        case DecodeColumn: return p.valid && p.decodeStepSeconds > 0 ? QVariant(p.decodeStepSeconds) : QVariant();
        case SpeedupColumn: return p.valid && p.speedup > 0 ? QVariant(p.speedup) : QVariant();
        case EfficiencyColumn: return p.valid && p.speedup > 0 ? QVariant(p.efficiency()) : QVariant();
        case DecodeSpeedupColumn: return p.valid && p.decodeSpeedup > 0 ? QVariant(p.decodeSpeedup) : QVariant();
        }
        return {};
    case Qt::TextAlignmentRole:
        return index.column() == ValidColumn ? QVariant() : QVariant(Qt::AlignRight | Qt::AlignVCenter);
    case Qt::ToolTipRole:
        if (!why.isEmpty())
            return why;
        if (index.column() == BytesColumn && p.valid)
            return tr("%1 sent by each rank; the collectives' tensors total %2 (nccl-tests' sizes)")
                .arg(humanBytes(double(p.commBytesPerRank)), humanBytes(double(p.commBytes)));
        if (index.column() == SpeedupColumn || index.column() == DecodeColumn || index.column() == DecodeSpeedupColumn)
            return tr("Decode step at context %1 × batch %2: %3 (%4× over T=1), %5 tokens/s, %6 % communicating")
                .arg(m_seq)
                .arg(m_batch)
                .arg(humanSeconds(p.decodeStepSeconds))
                .arg(p.decodeSpeedup, 0, 'f', 2)
                .arg(p.decodeTokensPerSecond, 0, 'f', 1)
                .arg(p.decodeCommShare * 100, 0, 'f', 1);
        if (hasMemory && (index.column() == MemoryColumn || index.column() == FitsColumn || index.column() == HeadroomColumn))
            return tr("Rank %1 needs %2 of %3").arg(p.memoryRank).arg(humanBytes(double(p.memoryBytes)), humanBytes(double(p.deviceBytes)));
        return {};
    case Qt::ForegroundRole: {
        const QPalette pal = QGuiApplication::palette();
        if (!why.isEmpty())
            return pal.color(QPalette::Disabled, QPalette::Text);
        if (hasMemory && !p.fits && (index.column() == FitsColumn || index.column() == HeadroomColumn))
            return overflowColor();
        return {};
    }
    case Qt::BackgroundRole:
        if (p.tp == m_currentTp) {
            QColor c = QGuiApplication::palette().color(QPalette::Highlight);
            c.setAlpha(70);
            return c;
        }
        return {};
    case Qt::FontRole:
        if (p.tp == m_currentTp) {
            QFont f;
            f.setBold(true);
            return f;
        }
        return {};
    case Qt::DisplayRole: break;
    default: return {};
    }
    const QString dash = QStringLiteral("–");
    switch (index.column()) {
    case TpColumn: return p.tp;
    case ValidColumn: return !p.valid ? tr("invalid") : why.isEmpty() ? tr("valid") : tr("valid, > %1 devices").arg(m_devices);
    case FitsColumn: return hasMemory ? (p.fits ? tr("yes") : tr("no")) : dash;
    case MemoryColumn: return hasMemory ? humanBytes(double(p.memoryBytes)) : dash;
    case HeadroomColumn:
        return !hasMemory ? dash : headroom >= 0 ? humanBytes(headroom) : tr("%1 over").arg(humanBytes(-headroom));
    case BytesColumn: return p.valid ? humanBytes(double(p.commBytesPerRank)) : dash;
    case PrefillColumn: return p.valid ? humanSeconds(p.seconds) : dash;
    case DecodeColumn: return p.valid && p.decodeStepSeconds > 0 ? humanSeconds(p.decodeStepSeconds) : dash;
    case SpeedupColumn: return p.valid && p.speedup > 0 ? QStringLiteral("%1×").arg(p.speedup, 0, 'f', 2) : dash;
    case EfficiencyColumn: return p.valid && p.speedup > 0 ? QStringLiteral("%1 %").arg(p.efficiency() * 100, 0, 'f', 0) : dash;
    case DecodeSpeedupColumn: return p.valid && p.decodeSpeedup > 0 ? QStringLiteral("%1×").arg(p.decodeSpeedup, 0, 'f', 2) : dash;
    }
    return {};
}

ScalingTable::ScalingTable(QWidget* parent)
    : QTableView(parent)
    , m_model(new ScalingTableModel(this))
{
    setModel(m_model);
    setSelectionBehavior(QAbstractItemView::SelectRows);
    setSelectionMode(QAbstractItemView::SingleSelection);
    setEditTriggers(QAbstractItemView::NoEditTriggers);
    setWordWrap(false);
    verticalHeader()->hide();
    verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 8);
    horizontalHeader()->setHighlightSections(false);
    horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    setToolTip(tr("Click a row to set T"));
    connect(this, &QTableView::clicked, this, [this](const QModelIndex& i) {
        if (i.isValid())
            emit tpActivated(i.data(ScalingTableModel::TpRole).toInt());
    });
    connect(this, &QTableView::activated, this, [this](const QModelIndex& i) {
        if (i.isValid())
            emit tpActivated(i.data(ScalingTableModel::TpRole).toInt());
    });
}

void ScalingTable::setPreview(std::shared_ptr<const PreviewResult> r)
{
    m_model->setPreview(std::move(r));
}

} // namespace tpui
