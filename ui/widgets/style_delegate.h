// style_delegate.h — a combo box of the style names legal in the document's plan (built-in names of
// the current Transformers generation, the plan's custom styles, and "(none)" to remove the key).
#pragma once

#include <QStyledItemDelegate>

#include <functional>

namespace tpui {

class StyleDelegate final : public QStyledItemDelegate
{
    Q_OBJECT
public:
    // `names` is asked each time an editor opens (custom styles come and go).
    StyleDelegate(std::function<QStringList()> names, QObject* parent = nullptr);
    QWidget* createEditor(QWidget* parent, const QStyleOptionViewItem& option, const QModelIndex& index) const override;
    void setEditorData(QWidget* editor, const QModelIndex& index) const override;
    void setModelData(QWidget* editor, QAbstractItemModel* model, const QModelIndex& index) const override;
    static QString noneText();

private:
    std::function<QStringList()> m_names;
};

} // namespace tpui
