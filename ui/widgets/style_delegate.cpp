#include "widgets/style_delegate.h"

#include <QComboBox>

namespace tpui {

StyleDelegate::StyleDelegate(std::function<QStringList()> names, QObject* parent)
    : QStyledItemDelegate(parent)
    , m_names(std::move(names))
{
}

QString StyleDelegate::noneText() { return tr("(none)"); }

QWidget* StyleDelegate::createEditor(QWidget* parent, const QStyleOptionViewItem&, const QModelIndex&) const
{
    auto* combo = new QComboBox(parent);
    combo->addItem(noneText());
    combo->addItems(m_names());
    // Commit as soon as a style is picked: the edit goes through the undo stack at once.
    connect(combo, &QComboBox::activated, this, [this, combo] {
        emit const_cast<StyleDelegate*>(this)->commitData(combo);
        emit const_cast<StyleDelegate*>(this)->closeEditor(combo);
    });
    return combo;
}

void StyleDelegate::setEditorData(QWidget* editor, const QModelIndex& index) const
{
    auto* combo = static_cast<QComboBox*>(editor);
    const int i = combo->findText(index.data(Qt::EditRole).toString());
    combo->setCurrentIndex(i < 0 ? 0 : i);
}

void StyleDelegate::setModelData(QWidget* editor, QAbstractItemModel* model, const QModelIndex& index) const
{
    const QString text = static_cast<QComboBox*>(editor)->currentText();
    model->setData(index, text == noneText() ? QString() : text, Qt::EditRole);
}

} // namespace tpui
