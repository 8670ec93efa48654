// module_tree_model.h — the module tree of a ModelSpec: modules with their parameters as children.
//
// Rows are computed on demand from the spec (no item objects), so a 126-layer model costs nothing
// until its rows are expanded. Internal ids encode (module index, parameter index + 1).
#pragma once

#include "tp/model/model_spec.h"
#include "models/preview_service.h"

#include <QAbstractItemModel>

#include <memory>

namespace tpui {

class ModuleTreeModel final : public QAbstractItemModel
{
    Q_OBJECT
public:
    enum Column {
        NameColumn,
        TypeColumn,
        StyleColumn,      // the style the plan gives the module (forward) or parameter (placement); editable
        KeyColumn,        // the plan key that matched it
        ShapeColumn,
        LocalShapeColumn, // rank 0's shard
        DTypeColumn,
        ParamsColumn,
        SizeColumn,
        NUM_COLUMNS
    };
    enum Role {
        PathRole = Qt::UserRole + 1, // full dotted path of the module or parameter
        SortRole,                    // numbers for numeric columns
        IsParameterRole,
    };

    explicit ModuleTreeModel(QObject* parent = nullptr);

    void setSpec(std::shared_ptr<const tp::ModelSpec> spec);
    // The plan applied to the spec: fills the style, key and local-shape columns.
    void setPreview(std::shared_ptr<const PreviewResult> preview);
    const tp::ModelSpec* spec() const { return m_spec.get(); }
    // Index of the module or parameter with this full path (column 0), invalid when absent.
    QModelIndex indexForPath(const QString& path) const;

    QModelIndex index(int row, int column, const QModelIndex& parent = {}) const final;
    QModelIndex parent(const QModelIndex& child) const final;
    int rowCount(const QModelIndex& parent = {}) const final;
    int columnCount(const QModelIndex& parent = {}) const final;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const final;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const final;
    Qt::ItemFlags flags(const QModelIndex& index) const final;
    // An edit of the style column is a request: the document decides (and the preview comes back).
    bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) final;
    QStringList mimeTypes() const final;

signals:
    void styleEditRequested(const QString& path, const QString& style);

private:
    struct Node
    {
        int module = -1;
        int param = -1; // -1: the module itself
    };
    static quintptr encode(Node n) { return (quintptr(n.module + 1) << 24) | quintptr(n.param + 1); }
    static Node decode(quintptr id) { return {int(id >> 24) - 1, int(id & 0xffffff) - 1}; }
    Node nodeOf(const QModelIndex& index) const;
    QModelIndex moduleIndex(int module) const;
    // Subtree totals per module, for the Params and Size columns.
    std::vector<std::int64_t> m_subtreeParams, m_subtreeBytes;
    std::vector<int> m_rowInParent; // per module: its row under its parent
    const tp::ParamAssignment* assignment(Node n) const;
    std::shared_ptr<const tp::ModelSpec> m_spec;
    std::shared_ptr<const PreviewResult> m_preview;
};

} // namespace tpui
