// shard_view.h — one parameter drawn as a matrix split into per-rank coloured slices. A strided
// (packed) split shows each rank twice — its gate rows and its up rows — so the interleave is
// visible; 3-D expert tensors show one expert's [dim 1 × dim 2] plane. The legend lists every
// rank's local shape and bytes.
#pragma once

#include "models/preview_service.h"

#include <QWidget>

namespace tpui {

class ShardView final : public QWidget
{
    Q_OBJECT
public:
    explicit ShardView(QWidget* parent = nullptr);
    void setPreview(std::shared_ptr<const PreviewResult> preview);
    // Full parameter name; a module path shows its "weight".
    void setParameter(const QString& path);
    QString parameter() const { return m_path; }
    QSize sizeHint() const override { return {520, 420}; }
    static QColor rankColor(int rank, int ranks);

protected:
    void paintEvent(QPaintEvent*) override;

private:
    const tp::ParamShard* shard() const;
    std::shared_ptr<const PreviewResult> m_p;
    QString m_path;
};

} // namespace tpui
