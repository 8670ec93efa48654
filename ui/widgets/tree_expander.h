// tree_expander.h — expands a tree view's rows a slice at a time, so that expanding a filter's
// matches or pressing * on a model of 100,000 layers never holds the GUI thread: each slice expands
// breadth-first for at most a few milliseconds, then yields to the event loop; a new request (or a
// model reset) cancels the one running; at most `kCap` rows are expanded, and the rest stay folded. A
// row of more than kWideRows children (the fold of 100,000 identical layers) is not opened: laying out
// its rows is one long stall however it is sliced.
#pragma once

#include <QModelIndex>
#include <QObject>
#include <QPersistentModelIndex>

#include <deque>
#include <functional>

class QTreeView;

namespace tpui {

class TreeExpander final : public QObject
{
    Q_OBJECT
public:
    static constexpr int kCap = 4000;          // rows expanded by one request, at most
    static constexpr int kSliceMs = 8;         // GUI-thread time per slice
    static constexpr int kWideRows = 256;      // rows with more children stay folded

    explicit TreeExpander(QTreeView* view);
    // Expands `root` (when valid) and its descendants down to `levels` below it (-1: all): 1 expands
    // its children, as QTreeView::expandToDepth(0) does for the top level.
    void expand(const QModelIndex& root, int levels);
    void cancel();

signals:
    // capped: rows were left folded at the cap; wide: rows left folded for their many children.
    void finished(int expanded, bool capped, int wide);

private:
    void slice();
    QTreeView* m_view;
    struct Pending
    {
        QPersistentModelIndex parent; // whose children from row `next` on are looked at
        int next = 0;
        int levels = 0;               // how deep below `parent` to go (< 0: no limit)
        bool root = false;            // `parent` is the invalid root index, not a row since removed
    };
    std::deque<Pending> m_queue; // breadth-first; a parent of 100,000 rows is one entry, not 100,000
    int m_expanded = 0, m_wide = 0;
    quint64 m_generation = 0;
};

} // namespace tpui
