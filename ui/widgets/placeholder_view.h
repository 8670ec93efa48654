// placeholder_view.h — item views that say why they are empty: with no rows, the viewport shows a
// centred line of text (what would fill the view, and how to get it) instead of a blank grid.
#pragma once

#include <QAbstractItemModel>
#include <QHeaderView>
#include <QPainter>
#include <QPaintEvent>
#include <QString>
#include <QTableView>
#include <QTreeView>

namespace tpui {

template <class View>
class WithPlaceholder : public View
{
public:
    using View::View;
    void setPlaceholderText(const QString& text)
    {
        m_placeholder = text;
        this->viewport()->update();
    }
    QString placeholderText() const { return m_placeholder; }
    // True when the view has no rows to show, so the placeholder is drawn.
    bool showsPlaceholder() const { return !this->model() || this->model()->rowCount(this->rootIndex()) == 0; }

protected:
    void paintEvent(QPaintEvent* e) override
    {
        View::paintEvent(e);
        if (m_placeholder.isEmpty() || !showsPlaceholder())
            return;
        QPainter p(this->viewport());
        p.setPen(this->palette().color(QPalette::PlaceholderText));
        const int margin = this->fontMetrics().height() * 2;
        p.drawText(this->viewport()->rect().adjusted(margin, margin, -margin, -margin), Qt::AlignCenter | Qt::TextWordWrap,
                   m_placeholder);
    }

private:
    QString m_placeholder;
};

using PlaceholderTable = WithPlaceholder<QTableView>;
using PlaceholderTree = WithPlaceholder<QTreeView>;

// A table of the editor's look (alternating rows, whole-row selection, no row numbers) that says
// `placeholder` while it has no rows.
inline QTableView* makeTable(QAbstractItemModel* model, const QString& placeholder = {})
{
    auto* t = new PlaceholderTable;
    t->setPlaceholderText(placeholder);
    t->setModel(model);
    t->setAlternatingRowColors(true);
    t->setSelectionBehavior(QAbstractItemView::SelectRows);
    t->verticalHeader()->hide();
    t->verticalHeader()->setDefaultSectionSize(t->fontMetrics().height() + 8);
    t->horizontalHeader()->setHighlightSections(false);
    t->setWordWrap(false);
    return t;
}

} // namespace tpui
