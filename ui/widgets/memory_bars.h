// memory_bars.h — memory per rank as one horizontal stacked bar per rank: weights | KV cache |
// activations | communication buffer (PreviewResult::memory at batch × seq), the device's capacity
// as a vertical line across the bars, and each rank's headroom (or how far it is over) in GiB.
// Without a model, a hardware profile with device memory or a valid plan it says why instead.
#pragma once

#include "models/preview_service.h"

#include <QWidget>

#include <memory>

namespace tpui {

class MemoryBars final : public QWidget
{
    Q_OBJECT
public:
    explicit MemoryBars(QWidget* parent = nullptr);
    void setPreview(std::shared_ptr<const PreviewResult> r);

    // What is drawn (for tests and tooltips).
    int barCount() const { return int(m_ranks.size()); }
    const std::vector<tp::RankMemoryUse>& ranks() const { return m_ranks; }
    QString label(int rank) const;         // "12.3 GiB free" or "45.6 GiB over"
    QString emptyText() const { return m_empty; } // empty when bars are drawn

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void paintEvent(QPaintEvent*) override;
    bool event(QEvent* e) override;

private:
    struct Layout
    {
        int top = 0, rowHeight = 0, barLeft = 0, barRight = 0;
        double scale = 0; // pixels per byte
    };
    Layout layout() const;
    int rankAt(QPoint pos) const;

    std::vector<tp::RankMemoryUse> m_ranks;
    QString m_empty;
};

} // namespace tpui
