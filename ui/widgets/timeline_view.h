// timeline_view.h — the spans of one forward as Perfetto or Nsight draw them: one lane per rank
// (rank 0 on top, labelled in a left gutter), alternating bands per decoder layer, compute and
// communication in their own rows of a lane, span names inside spans where they fit, comm spans
// split into the wait for the other ranks (hatched) and the transfer (solid), a time axis in units
// by magnitude. Wheel zooms around the cursor, drag pans, double-click fits everything; a search
// box dims what does not match and Enter zooms to the next match; a click on a span emits the
// module it belongs to. Below the lanes, "where the time went": the spans folded over the layers
// (layers.*.mlp.down_proj, layers.*.self_attn.o_proj/all_reduce), the slowest rank's total of
// each, its share of the forward and, for collectives, how much of it was waiting; activating a
// row searches for it.
#pragma once

#include "tp/profile/run_record.h"

#include <QStringList>
#include <QWidget>

#include <vector>

class QLabel;
class QLineEdit;
class QSplitter;
class QTreeWidget;

namespace tpui {

class TimelineCanvas;

class TimelineView final : public QWidget
{
    Q_OBJECT
public:
    explicit TimelineView(QWidget* parent = nullptr);

    // Spans of every rank of one forward (µs from its start); tp: the number of lanes.
    void setSpans(std::vector<tp::RecordedSpan> spans, int tp, const QString& caption);
    const std::vector<tp::RecordedSpan>& spans() const { return m_spans; }
    int tpSize() const { return m_tp; }

    // The painted area (spanAt/spanRect/laneRect are in its coordinates).
    QWidget* canvas() const;
    QLineEdit* searchBox() const { return m_search; }
    // Where the time went: one row per module folded over the layers (columns: what, op, spans per
    // rank, time on the slowest rank, share of the forward, waiting), longest first.
    QTreeWidget* hotspots() const { return m_hot; }
    // The span name folded over the layers: "model.layers.3.mlp.down_proj" → "model.layers.*.mlp.down_proj".
    static QString foldedName(const QString& spanName);
    QString matchText() const; // "3 of 12", "no match", "" without a search

    int spanAt(QPoint p) const;     // index into spans(), -1: none
    QRectF spanRect(int i) const;   // where span i is drawn (empty when it is out of view)
    QRectF laneRect(int rank) const;
    double visibleStartUs() const { return m_v0; }
    double visibleEndUs() const { return m_v1; }
    void setVisibleRange(double startUs, double endUs);
    void fitAll();                  // the whole forward (double-click)
    double fullEndUs() const;       // the range fitAll shows ends here

    int matchCount() const { return static_cast<int>(m_matches.size()); }
    int currentMatch() const { return m_current; } // index into the matches, -1: none chosen
    void nextMatch();               // Enter in the search box: zoom to the next match

    // What the last paint laid out (for tests): the span labels as drawn (elided), and how many comm
    // spans were drawn with a wait part.
    QStringList drawnLabels() const { return m_drawnLabels; }
    int drawnWaitParts() const { return m_drawnWaits; }
    QStringList drawnBandLabels() const { return m_drawnBands; } // "L0", "L1"… where they fit
    QString emptyText() const;      // shown when there are no spans

    // The module a span belongs to: its node name without the collective ("/all_reduce") and op
    // (":residual_attn") suffixes — "model.layers.3.self_attn.q_proj/all_reduce" names
    // "model.layers.3.self_attn.q_proj".
    static QString modulePathOf(const QString& spanName);
    QString toolTipFor(int i) const;

signals:
    void spanActivated(const QString& modulePath);

protected:
    void resizeEvent(QResizeEvent* e) override;

private:
    friend class TimelineCanvas;
    void search(const QString& text);
    void fillHotspots();
    void fitLanes(); // the splitter gives the lanes what they need, the table the rest
    void paintCanvas(QPainter& p);
    double xOf(double us) const;
    double usAt(double x) const;
    int gutter() const;
    int plotTop() const;
    int laneHeight() const;
    void zoomTo(int spanIndex);

    TimelineCanvas* m_canvas;
    QSplitter* m_split;
    QTreeWidget* m_hot;
    QLineEdit* m_search;
    QLabel *m_matchLabel, *m_caption;
    std::vector<tp::RecordedSpan> m_spans;
    std::vector<int> m_matches;
    std::vector<bool> m_isMatch;
    int m_current = -1;
    int m_tp = 1;
    double m_v0 = 0, m_v1 = 1;
    QStringList m_drawnLabels, m_drawnBands;
    int m_drawnWaits = 0;
    bool m_userSized = false; // the splitter was moved: keep the user's sizes
};

} // namespace tpui
