#include "models/module_tree_model.h"

#include "models/format.h"

#include <QPalette>

namespace tpui {

ModuleTreeModel::ModuleTreeModel(QObject* parent)
    : QAbstractItemModel(parent)
{
}

void ModuleTreeModel::setSpec(std::shared_ptr<const tp::ModelSpec> spec)
{
    beginResetModel();
    m_spec = std::move(spec);
    if (m_preview && m_preview->spec != m_spec)
        m_preview.reset(); // another model's preview: its rows are not these (the next preview comes)
    m_subtreeParams.assign(m_spec ? m_spec->modules.size() : 0, 0);
    m_subtreeBytes.assign(m_subtreeParams.size(), 0);
    m_rowInParent.assign(m_subtreeParams.size(), 0);
    if (m_spec) {
        // A module's row under its parent, after the parent's parameters: parent() is then O(1),
        // not a search of a 100,000-child "layers" module for every row the view lays out.
        for (const auto& m : m_spec->modules)
            for (std::size_t c = 0; c < m.children.size(); ++c)
                m_rowInParent[std::size_t(m.children[c])] = int(m.params.size() + c);
        // Parents precede children, so a reverse pass accumulates subtrees.
        for (std::size_t i = m_spec->modules.size(); i-- > 0;) {
            const auto& m = m_spec->modules[i];
            for (const auto& p : m.params)
                if (p.tiedTo.empty()) {
                    if (!p.buffer)
                        m_subtreeParams[i] += p.numel();
                    m_subtreeBytes[i] += p.bytes();
                }
            if (m.parent >= 0) {
                m_subtreeParams[std::size_t(m.parent)] += m_subtreeParams[i];
                m_subtreeBytes[std::size_t(m.parent)] += m_subtreeBytes[i];
            }
        }
    }
    endResetModel();
}

void ModuleTreeModel::setPreview(std::shared_ptr<const PreviewResult> preview)
{
    if (preview && preview->spec != m_spec)
        return; // a preview of another model
    // Same rows, new column values: a layout change keeps expansion and selection.
    emit layoutAboutToBeChanged();
    m_preview = std::move(preview);
    emit layoutChanged();
}

const tp::ParamAssignment* ModuleTreeModel::assignment(Node n) const
{
    if (!m_preview || n.param < 0)
        return nullptr;
    const auto& g = m_preview->graph;
    if (std::size_t(n.module) >= g.moduleFirstParam.size() || g.moduleFirstParam[std::size_t(n.module)] < 0)
        return nullptr;
    const std::size_t i = std::size_t(g.moduleFirstParam[std::size_t(n.module)] + n.param);
    return i < g.match.params.size() ? &g.match.params[i] : nullptr;
}

Qt::ItemFlags ModuleTreeModel::flags(const QModelIndex& index) const
{
    Qt::ItemFlags f = QAbstractItemModel::flags(index);
    if (index.isValid() && index.column() == StyleColumn && nodeOf(index).module > 0)
        f |= Qt::ItemIsEditable;
    if (index.isValid())
        f |= Qt::ItemIsDropEnabled;
    return f;
}

bool ModuleTreeModel::setData(const QModelIndex& index, const QVariant& value, int role)
{
    if (!m_spec || !index.isValid() || index.column() != StyleColumn || role != Qt::EditRole)
        return false;
    emit styleEditRequested(index.data(PathRole).toString(), value.toString());
    return true;
}

QStringList ModuleTreeModel::mimeTypes() const { return {QStringLiteral("application/x-tpstudio-style")}; }

ModuleTreeModel::Node ModuleTreeModel::nodeOf(const QModelIndex& index) const
{
    return index.isValid() ? decode(index.internalId()) : Node{};
}

QModelIndex ModuleTreeModel::index(int row, int column, const QModelIndex& parent) const
{
    if (!m_spec || row < 0 || column < 0 || column >= NUM_COLUMNS)
        return {};
    if (!parent.isValid())
        return row == 0 ? createIndex(0, column, encode({0, -1})) : QModelIndex();
    const Node p = nodeOf(parent);
    if (p.param >= 0)
        return {};
    const auto& m = m_spec->modules[std::size_t(p.module)];
    const int nParams = int(m.params.size());
    if (row < nParams)
        return createIndex(row, column, encode({p.module, row}));
    if (row - nParams < int(m.children.size()))
        return createIndex(row, column, encode({m.children[std::size_t(row - nParams)], -1}));
    return {};
}

QModelIndex ModuleTreeModel::parent(const QModelIndex& child) const
{
    if (!m_spec || !child.isValid())
        return {};
    const Node n = nodeOf(child);
    if (n.param >= 0) // a parameter's parent is its module
        return moduleIndex(n.module);
    const int parentModule = m_spec->modules[std::size_t(n.module)].parent;
    return parentModule < 0 ? QModelIndex() : moduleIndex(parentModule);
}

QModelIndex ModuleTreeModel::moduleIndex(int mi) const
{
    // A module's row under its parent: after the parent's parameters, at its place among the children.
    const auto& m = m_spec->modules[std::size_t(mi)];
    if (m.parent < 0)
        return createIndex(0, 0, encode({mi, -1}));
    return createIndex(m_rowInParent[std::size_t(mi)], 0, encode({mi, -1}));
}

int ModuleTreeModel::rowCount(const QModelIndex& parent) const
{
    if (!m_spec)
        return 0;
    if (!parent.isValid())
        return 1;
    if (parent.column() != 0)
        return 0;
    const Node n = nodeOf(parent);
    if (n.param >= 0)
        return 0;
    const auto& m = m_spec->modules[std::size_t(n.module)];
    return int(m.params.size() + m.children.size());
}

int ModuleTreeModel::columnCount(const QModelIndex&) const { return NUM_COLUMNS; }

QModelIndex ModuleTreeModel::indexForPath(const QString& path) const
{
    if (!m_spec)
        return {};
    const std::string p = path.toStdString();
    int mi = m_spec->indexOf(p);
    int param = -1;
    if (mi < 0) { // a parameter: module path + "." + name
        const auto dot = p.rfind('.');
        mi = m_spec->indexOf(dot == std::string::npos ? std::string() : p.substr(0, dot));
        if (mi < 0)
            return {};
        const auto& params = m_spec->modules[std::size_t(mi)].params;
        const std::string name = dot == std::string::npos ? p : p.substr(dot + 1);
        for (std::size_t i = 0; i < params.size(); ++i)
            if (params[i].name == name)
                param = int(i);
        if (param < 0)
            return {};
        return createIndex(param, 0, encode({mi, param}));
    }
    return moduleIndex(mi);
}

QVariant ModuleTreeModel::data(const QModelIndex& index, int role) const
{
    if (!m_spec || !index.isValid())
        return {};
    if (role == Qt::TextAlignmentRole)
        return index.column() >= ParamsColumn ? QVariant(int(Qt::AlignRight | Qt::AlignVCenter)) : QVariant();
    const Node n = nodeOf(index);
    const auto& m = m_spec->modules[std::size_t(n.module)];
    if (n.param >= 0) {
        const auto& p = m.params[std::size_t(n.param)];
        switch (role) {
        case PathRole: return QString::fromStdString(m.paramPath(p));
        case IsParameterRole: return true;
        case SortRole:
            if (index.column() == ParamsColumn)
                return qlonglong(p.numel());
            if (index.column() == SizeColumn)
                return qlonglong(p.bytes());
            return data(index, Qt::DisplayRole);
        case Qt::ToolTipRole:
            if (!p.tiedTo.empty())
                return tr("Tied to %1: stored once").arg(QString::fromStdString(p.tiedTo));
            if (!p.checkpointTensors.empty())
                return tr("From %n checkpoint tensor(s), first: %1", nullptr, int(p.checkpointTensors.size()))
                    .arg(QString::fromStdString(p.checkpointTensors.front()));
            return {};
        case Qt::EditRole:
        case Qt::DisplayRole:
            switch (index.column()) {
            case StyleColumn: {
                const auto* a = assignment(n);
                if (!a || !a->style)
                    return {};
                const QString st = QString::fromStdString(a->style->name);
                return a->viaModuleKey && role == Qt::DisplayRole ? tr("(%1)").arg(st) : st;
            }
            case KeyColumn: {
                const auto* a = assignment(n);
                if (!a || a->entry < 0 || a->viaModuleKey)
                    return {};
                return QString::fromStdString(m_preview->graph.plan->entries[std::size_t(a->entry)].key);
            }
            case LocalShapeColumn: {
                const auto* a = assignment(n);
                if (!a)
                    return {};
                const auto& shard = m_preview->graph.params[std::size_t(a - m_preview->graph.match.params.data())];
                return shard.dim < 0 ? tr("whole") : shapeText(shard.shapes[0]);
            }
            case NameColumn: return QString::fromStdString(p.name);
            case TypeColumn: return p.buffer ? tr("buffer") : p.tiedTo.empty() ? tr("parameter") : tr("tied parameter");
            case ShapeColumn: return shapeText(p.shape);
            case DTypeColumn: return dtypeText(p.dtype);
            case ParamsColumn: return p.buffer ? QString() : humanCount(p.numel());
            case SizeColumn: return humanBytes(double(p.bytes()));
            }
            return {};
        case Qt::ForegroundRole:
            if (!p.tiedTo.empty() || p.buffer)
                return QPalette().color(QPalette::Disabled, QPalette::Text);
            return {};
        }
        return {};
    }
    switch (role) {
    case PathRole: return QString::fromStdString(m.path);
    case IsParameterRole: return false;
    case SortRole:
        if (index.column() == ParamsColumn)
            return qlonglong(m_subtreeParams[std::size_t(n.module)]);
        if (index.column() == SizeColumn)
            return qlonglong(m_subtreeBytes[std::size_t(n.module)]);
        return data(index, Qt::DisplayRole);
    case Qt::ToolTipRole: return QString::fromStdString(m.path.empty() ? m_spec->className : m.path);
    case Qt::EditRole:
    case Qt::DisplayRole:
        switch (index.column()) {
        case StyleColumn:
        case KeyColumn: {
            if (!m_preview || std::size_t(n.module) >= m_preview->graph.match.moduleEntry.size())
                return {};
            const int e = m_preview->graph.match.moduleEntry[std::size_t(n.module)];
            if (e < 0)
                return {};
            const auto& entry = m_preview->graph.plan->entries[std::size_t(e)];
            return QString::fromStdString(index.column() == StyleColumn ? entry.style : entry.key);
        }
        case NameColumn: return QString::fromStdString(m.name.empty() ? m_spec->className : m.name);
        case TypeColumn: return QString::fromStdString(m.className);
        case ParamsColumn: return m_subtreeParams[std::size_t(n.module)] ? humanCount(m_subtreeParams[std::size_t(n.module)]) : QString();
        case SizeColumn: return m_subtreeBytes[std::size_t(n.module)] ? humanBytes(double(m_subtreeBytes[std::size_t(n.module)])) : QString();
        }
        return {};
    }
    return {};
}

QVariant ModuleTreeModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    switch (section) {
    case NameColumn: return tr("Module");
    case TypeColumn: return tr("Type");
    case StyleColumn: return tr("Style");
    case KeyColumn: return tr("Matched key");
    case ShapeColumn: return tr("Shape");
    case LocalShapeColumn: return tr("Rank 0 shard");
    case DTypeColumn: return tr("DType");
    case ParamsColumn: return tr("Params");
    case SizeColumn: return tr("Size");
    }
    return {};
}

} // namespace tpui
