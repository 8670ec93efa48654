// tree_expander.cpp — see tree_expander.h.
#include "widgets/tree_expander.h"

#include <QElapsedTimer>
#include <QTimer>
#include <QTreeView>

namespace tpui {

TreeExpander::TreeExpander(QTreeView* view)
    : QObject(view)
    , m_view(view)
{
}

void TreeExpander::cancel()
{
    ++m_generation;
    m_queue.clear();
}

void TreeExpander::expand(const QModelIndex& root, int levels)
{
    cancel();
    m_expanded = 0;
    m_wide = 0;
    if (root.isValid()) {
        m_view->expand(root);
        ++m_expanded;
    }
    if (levels != 0)
        m_queue.push_back({root, 0, levels, !root.isValid()});
    slice();
}

void TreeExpander::slice()
{
    QAbstractItemModel* model = m_view->model();
    QElapsedTimer t;
    t.start();
    while (!m_queue.empty() && m_expanded < kCap && t.elapsed() < kSliceMs) {
        Pending& p = m_queue.front();
        const QModelIndex parent = p.parent;
        if (!model || (!p.root && !parent.isValid()) || p.next >= model->rowCount(parent)) {
            m_queue.pop_front();
            continue;
        }
        const QModelIndex child = model->index(p.next++, 0, parent);
        if (!model->hasChildren(child))
            continue;
        if (model->rowCount(child) > kWideRows) {
            ++m_wide;
            continue;
        }
        m_view->expand(child);
        ++m_expanded;
        if (p.levels != 1)
            m_queue.push_back({child, 0, p.levels - 1, false});
    }
    if (!m_queue.empty() && m_expanded < kCap) {
        QTimer::singleShot(0, this, [this, gen = m_generation] {
            if (gen == m_generation)
                slice();
        });
        return;
    }
    const bool capped = !m_queue.empty();
    m_queue.clear();
    emit finished(m_expanded, capped, m_wide);
}

} // namespace tpui
