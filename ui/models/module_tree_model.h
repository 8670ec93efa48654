// module_tree_model.h — the module tree of a ModelSpec: modules with their parameters as children.
//
// Rows are computed on demand from the spec (no item objects), so a 126-layer model costs nothing
// until its rows are expanded. Internal ids encode (module index, parameter index + 1), or a group.
//
// Identical layers fold: the children of a list module (numbered "0", "1", …) that have the same
// structure (class, parameter names, shapes and dtypes, all the way down) and follow each other
// form one group row, "layers 0–79 ×80", whose rows are the layers themselves. DeepSeek-V3's dense
// layers 0–2 and MoE layers 3–60 are two groups; a layer unlike its neighbours stays a row of its own.
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
        IsGroupRole,                 // a fold of identical list entries
    };

    explicit ModuleTreeModel(QObject* parent = nullptr);

    void setSpec(std::shared_ptr<const tp::ModelSpec> spec);
    // The plan applied to the spec: fills the style, key and local-shape columns.
    void setPreview(std::shared_ptr<const PreviewResult> preview);
    const tp::ModelSpec* spec() const { return m_spec.get(); }
    // Index of the module or parameter with this full path (column 0), invalid when absent.
    QModelIndex indexForPath(const QString& path) const;
    // The filter: a row whose path contains `text` (case-insensitive), or that holds such a row, is
    // accepted; every row for "". The verdicts come from one pass over the spec's paths (a worker may
    // make them: computeVerdicts() reads only the immutable FilterInput), so that accepts() is a lookup.
    struct FilterVerdicts
    {
        QString text;
        std::vector<char> modules, params, groups; // empty: every row
    };
    struct FilterInput
    {
        std::shared_ptr<const tp::ModelSpec> spec;
        std::shared_ptr<const std::vector<int>> groupOf, firstParam;
        int groups = 0;
    };
    void setFilterVerdicts(FilterVerdicts v);
    FilterVerdicts filterVerdicts(const QString& text) const;
    FilterInput filterInput() const;
    static FilterVerdicts computeVerdicts(const FilterInput& in, const QString& text);
    bool accepts(const QModelIndex& index) const;

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
        int group = -1; // ≥ 0: a group row (module and param unused)
    };
    static constexpr quintptr kGroupBit = quintptr(1) << (sizeof(quintptr) * 8 - 2);
    static quintptr encode(Node n)
    {
        return n.group >= 0 ? kGroupBit | quintptr(n.group) : (quintptr(n.module + 1) << 24) | quintptr(n.param + 1);
    }
    static Node decode(quintptr id)
    {
        if (id & kGroupBit)
            return {-1, -1, int(id & ~kGroupBit)};
        return {int(id >> 24) - 1, int(id & 0xffffff) - 1, -1};
    }
    Node nodeOf(const QModelIndex& index) const;
    QModelIndex moduleIndex(int module) const;
    QModelIndex groupIndex(int group) const;
    QVariant groupData(int group, int column, int role) const;
    void foldIdenticalChildren();
    // A run of identical children of a list module: children[first, first + count) of `list`.
    struct Group
    {
        int list = -1, first = 0, count = 0;
        int row = 0; // its row under the list
        std::int64_t params = 0, bytes = 0;
    };
    std::vector<Group> m_groups;
    // Per list module that folds: its rows after its parameters, each a group (≥ 0) or a child
    // module (−2 − module index). Empty for a module that does not fold.
    std::vector<std::vector<int>> m_rows;
    std::vector<int> m_groupOf; // per module: the group it is a row of, or -1
    // Subtree totals per module, for the Params and Size columns.
    std::vector<std::int64_t> m_subtreeParams, m_subtreeBytes;
    std::vector<int> m_rowInParent; // per module: its row under its parent (or its group)
    // Per module: the index of its first parameter among all (a prefix sum); and m_groupOf's copy, for the
    // filter's worker (shared: a filter may still be computing when the model resets).
    std::shared_ptr<const std::vector<int>> m_firstParam, m_groupOfShared;
    FilterVerdicts m_filter;
    const tp::ParamAssignment* assignment(Node n) const;
    std::shared_ptr<const tp::ModelSpec> m_spec;
    std::shared_ptr<const PreviewResult> m_preview;
};

} // namespace tpui
