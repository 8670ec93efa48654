#include "models/module_tree_model.h"

#include "models/format.h"

#include <QPalette>

#include <algorithm>
#include <string_view>
#include <functional>

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
    foldIdenticalChildren();
    std::vector<int> firstParam(m_subtreeParams.size(), 0);
    for (std::size_t i = 1; i < firstParam.size(); ++i)
        firstParam[i] = firstParam[i - 1] + int(m_spec->modules[i - 1].params.size());
    m_firstParam = std::make_shared<const std::vector<int>>(std::move(firstParam));
    m_groupOfShared = std::make_shared<const std::vector<int>>(m_groupOf);
    m_filter = filterVerdicts(m_filter.text);
    endResetModel();
}

void ModuleTreeModel::setFilterVerdicts(FilterVerdicts v)
{
    m_filter = std::move(v);
}

ModuleTreeModel::FilterVerdicts ModuleTreeModel::filterVerdicts(const QString& text) const
{
    return computeVerdicts(filterInput(), text);
}

ModuleTreeModel::FilterInput ModuleTreeModel::filterInput() const
{
    return {m_spec, m_groupOfShared, m_firstParam, int(m_groups.size())};
}

ModuleTreeModel::FilterVerdicts ModuleTreeModel::computeVerdicts(const FilterInput& in, const QString& text)
{
    FilterVerdicts v;
    v.text = text;
    if (text.isEmpty() || !in.spec)
        return v;
    // ASCII case folding (paths are identifiers); a needle with other letters matches them exactly.
    const std::string needle = text.toLower().toStdString();
    const auto contains = [&needle](std::string_view hay) {
        return std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
                   return (a >= 'A' && a <= 'Z' ? char(a - 'A' + 'a') : a) == b;
               }) != hay.end();
    };
    const auto& modules = in.spec->modules;
    const std::vector<int>& firstParam = *in.firstParam;
    const std::vector<int>& groupOf = *in.groupOf;
    v.modules.assign(modules.size(), 0);
    v.params.assign(modules.empty() ? 0 : std::size_t(firstParam.back()) + modules.back().params.size(), 0);
    v.groups.assign(std::size_t(in.groups), 0);
    // A path is its parent's + "." + its name: when the parent's path holds the text, so does the child's;
    // else only a window that reaches into ".name" can, so each path is searched from there on, not
    // whole (1.2 M paths of 100,000 layers in a few milliseconds).
    // Without a '.', the text cannot span the dot: the window is the name alone.
    const std::size_t reach = needle.find('.') == std::string::npos ? 0 : needle.size() - 1;
    std::vector<char> own(modules.size(), 0);
    std::string tail; // a parameter's window: the end of its module's path, ".", its name
    for (std::size_t m = 0; m < modules.size(); ++m) {
        const std::string& path = modules[m].path;
        const int parent = modules[m].parent;
        if (parent >= 0 && own[std::size_t(parent)]) {
            own[m] = 1;
        } else {
            const std::size_t prefix = parent >= 0 && !modules[std::size_t(parent)].path.empty()
                ? modules[std::size_t(parent)].path.size() + (reach ? 0 : 1) // past the dot when it cannot match
                : 0;
            const std::size_t from = prefix > reach ? prefix - reach : 0;
            own[m] = from <= path.size() && contains(std::string_view(path).substr(from));
        }
        for (std::size_t p = 0; p < modules[m].params.size(); ++p) {
            bool match = own[m];
            if (!match && !reach) {
                match = contains(modules[m].params[p].name);
            } else if (!match) {
                tail.assign(path, path.size() > reach ? path.size() - reach : 0);
                if (!path.empty())
                    tail += '.';
                tail += modules[m].params[p].name;
                match = contains(tail);
            }
            if (match) {
                v.params[std::size_t(firstParam[m]) + p] = 1;
                v.modules[m] = 1;
            }
        }
        v.modules[m] |= own[m];
    }
    // Children after parents: a reverse pass carries every match up to its ancestors and groups.
    for (std::size_t m = modules.size(); m-- > 0;) {
        if (!v.modules[m])
            continue;
        if (modules[m].parent >= 0)
            v.modules[std::size_t(modules[m].parent)] = 1;
        if (groupOf[m] >= 0)
            v.groups[std::size_t(groupOf[m])] = 1;
    }
    return v;
}

bool ModuleTreeModel::accepts(const QModelIndex& index) const
{
    if (m_filter.text.isEmpty() || m_filter.modules.empty())
        return true;
    const Node n = nodeOf(index);
    if (n.group >= 0)
        return m_filter.groups[std::size_t(n.group)];
    if (n.module < 0)
        return false;
    return n.param >= 0 ? m_filter.params[std::size_t((*m_firstParam)[std::size_t(n.module)] + n.param)]
                        : m_filter.modules[std::size_t(n.module)];
}

void ModuleTreeModel::foldIdenticalChildren()
{
    m_groups.clear();
    const std::size_t n = m_spec ? m_spec->modules.size() : 0;
    m_rows.assign(n, {});
    m_groupOf.assign(n, -1);
    if (!m_spec)
        return;
    const auto& modules = m_spec->modules;
    // A structure signature per module: its class, its parameters' names, shapes and dtypes, and its
    // children's names and signatures (parents precede children, so a reverse pass builds them).
    std::vector<std::size_t> sig(n);
    const std::hash<std::string> hashText;
    for (std::size_t i = n; i-- > 0;) {
        const auto& m = modules[i];
        std::size_t h = hashText(m.className);
        auto mix = [&h](std::size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
        for (const auto& p : m.params) {
            mix(hashText(p.name));
            mix(std::size_t(p.dtype) * 4 + std::size_t(p.buffer) * 2 + std::size_t(p.tiedTo.empty()));
            for (std::int64_t d : p.shape)
                mix(std::size_t(d));
            mix(~std::size_t(0));
        }
        for (int c : m.children) {
            mix(hashText(modules[std::size_t(c)].name));
            mix(sig[std::size_t(c)]);
        }
        sig[i] = h;
    }
    auto numbered = [&](int c) {
        const std::string& name = modules[std::size_t(c)].name;
        return !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    };
    for (std::size_t mi = 0; mi < n; ++mi) {
        const auto& m = modules[mi];
        if (m.children.size() < 2 || !std::all_of(m.children.begin(), m.children.end(), numbered))
            continue;
        std::vector<int> rows;
        const std::size_t firstGroup = m_groups.size();
        for (std::size_t a = 0; a < m.children.size();) {
            std::size_t b = a + 1;
            while (b < m.children.size() && sig[std::size_t(m.children[b])] == sig[std::size_t(m.children[a])])
                ++b;
            const int row = int(m.params.size() + rows.size());
            if (b - a >= 2) {
                Group g{int(mi), int(a), int(b - a), row, 0, 0};
                for (std::size_t k = a; k < b; ++k) {
                    const auto c = std::size_t(m.children[k]);
                    g.params += m_subtreeParams[c];
                    g.bytes += m_subtreeBytes[c];
                    m_groupOf[c] = int(m_groups.size());
                    m_rowInParent[c] = int(k - a);
                }
                rows.push_back(int(m_groups.size()));
                m_groups.push_back(g);
            } else {
                rows.push_back(-2 - m.children[a]);
                m_rowInParent[std::size_t(m.children[a])] = row;
            }
            a = b;
        }
        if (m_groups.size() > firstGroup) {
            m_rows[mi] = std::move(rows);
        } else { // nothing folds: the children keep their plain rows
            for (std::size_t c = 0; c < m.children.size(); ++c)
                m_rowInParent[std::size_t(m.children[c])] = int(m.params.size() + c);
        }
    }
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
    if (nodeOf(index).group >= 0)
        return f; // a fold: styles go on its layers (or on every layer at once), not on the fold
    if (index.isValid() && index.column() == StyleColumn && nodeOf(index).module > 0)
        f |= Qt::ItemIsEditable;
    if (index.isValid())
        f |= Qt::ItemIsDropEnabled;
    return f;
}

bool ModuleTreeModel::setData(const QModelIndex& index, const QVariant& value, int role)
{
    if (!m_spec || !index.isValid() || index.column() != StyleColumn || role != Qt::EditRole || nodeOf(index).group >= 0)
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
    if (p.group >= 0) {
        const Group& g = m_groups[std::size_t(p.group)];
        if (row >= g.count)
            return {};
        return createIndex(row, column, encode({m_spec->modules[std::size_t(g.list)].children[std::size_t(g.first + row)], -1}));
    }
    if (p.param >= 0)
        return {};
    const auto& m = m_spec->modules[std::size_t(p.module)];
    const int nParams = int(m.params.size());
    if (row < nParams)
        return createIndex(row, column, encode({p.module, row}));
    if (const auto& rows = m_rows[std::size_t(p.module)]; !rows.empty()) {
        if (row - nParams >= int(rows.size()))
            return {};
        const int e = rows[std::size_t(row - nParams)];
        return createIndex(row, column, e >= 0 ? encode({-1, -1, e}) : encode({-2 - e, -1}));
    }
    if (row - nParams < int(m.children.size()))
        return createIndex(row, column, encode({m.children[std::size_t(row - nParams)], -1}));
    return {};
}

QModelIndex ModuleTreeModel::parent(const QModelIndex& child) const
{
    if (!m_spec || !child.isValid())
        return {};
    const Node n = nodeOf(child);
    if (n.group >= 0)
        return moduleIndex(m_groups[std::size_t(n.group)].list);
    if (n.param >= 0) // a parameter's parent is its module
        return moduleIndex(n.module);
    if (const int g = m_groupOf[std::size_t(n.module)]; g >= 0)
        return groupIndex(g);
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

QModelIndex ModuleTreeModel::groupIndex(int group) const
{
    return createIndex(m_groups[std::size_t(group)].row, 0, encode({-1, -1, group}));
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
    if (n.group >= 0)
        return m_groups[std::size_t(n.group)].count;
    if (n.param >= 0)
        return 0;
    const auto& m = m_spec->modules[std::size_t(n.module)];
    const auto& rows = m_rows[std::size_t(n.module)];
    return int(m.params.size() + (rows.empty() ? m.children.size() : rows.size()));
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
    if (n.group >= 0)
        return groupData(n.group, index.column(), role);
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

QVariant ModuleTreeModel::groupData(int group, int column, int role) const
{
    const Group& g = m_groups[std::size_t(group)];
    const auto& list = m_spec->modules[std::size_t(g.list)];
    const auto& first = m_spec->modules[std::size_t(list.children[std::size_t(g.first)])];
    const auto& last = m_spec->modules[std::size_t(list.children[std::size_t(g.first + g.count - 1)])];
    switch (role) {
    case PathRole: return QString::fromStdString(list.path + ".*");
    case IsParameterRole: return false;
    case IsGroupRole: return true;
    case SortRole:
        if (column == ParamsColumn)
            return qlonglong(g.params);
        if (column == SizeColumn)
            return qlonglong(g.bytes);
        return groupData(group, column, Qt::DisplayRole);
    case Qt::ToolTipRole:
        return tr("%1 identical %2 modules, %3.%4 to %3.%5: the same parameters, shapes and dtypes. Expand to see each.")
            .arg(g.count)
            .arg(QString::fromStdString(first.className), QString::fromStdString(list.path), QString::fromStdString(first.name),
                 QString::fromStdString(last.name));
    case Qt::DisplayRole:
        switch (column) {
        case NameColumn:
            return tr("%1 %2–%3 ×%4")
                .arg(QString::fromStdString(list.name), QString::fromStdString(first.name), QString::fromStdString(last.name))
                .arg(g.count);
        case TypeColumn: return QString::fromStdString(first.className);
        case ParamsColumn: return g.params ? humanCount(g.params) : QString();
        case SizeColumn: return g.bytes ? humanBytes(double(g.bytes)) : QString();
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
