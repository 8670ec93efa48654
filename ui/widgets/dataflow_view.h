// dataflow_view.h — one decoder layer of the sharded graph as a diagram: operations top to bottom,
// each output labelled with its layout on every rank (Replicate, Shard(-1) with the local widths,
// Partial), data edges on the left (residual edges arc around), and the collectives the plan
// inserts drawn as highlighted boxes with their bytes and predicted time.
#pragma once

#include "models/preview_service.h"

#include <QWidget>

namespace tpui {

class DataflowView final : public QWidget
{
    Q_OBJECT
public:
    explicit DataflowView(QWidget* parent = nullptr);
    void setPreview(std::shared_ptr<const PreviewResult> preview);
    void setLayer(int layer);
    int layer() const { return m_layer; }
    QSize sizeHint() const override;

signals:
    void moduleActivated(const QString& path);

protected:
    void paintEvent(QPaintEvent*) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;

private:
    struct Box
    {
        QRectF rect;
        int node = -1;        // graph node, or -1 for a collective box
        int collective = -1;
        int firstCollective = -1; // the node's first collective (the one a node box precedes)
    };
    void layoutBoxes();
    QString layoutText(int tensor) const;
    QString localText(int node, int firstCollective) const; // before the node's collectives

    std::shared_ptr<const PreviewResult> m_p;
    int m_layer = 0;
    std::vector<Box> m_boxes;
};

} // namespace tpui
