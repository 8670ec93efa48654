#include "models/plan_document.h"

#include "tp/model/loader.h"
#include "tp/plan/plan_io.h"

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QUndoCommand>

namespace tpui {

namespace {

// One plan edit: the whole (entries, custom styles) state before and after. Consecutive edits of the
// same key merge, so flipping a combo box through five styles is one undo step.
class PlanStateCommand final : public QUndoCommand
{
public:
    PlanStateCommand(PlanDocument* doc, const QString& text, std::vector<tp::PlanEntry> before,
                     std::vector<tp::Style> customBefore, std::vector<tp::PlanEntry> after,
                     std::vector<tp::Style> customAfter, int mergeId, QString mergeKey)
        : QUndoCommand(text)
        , m_doc(doc)
        , m_before(std::move(before))
        , m_after(std::move(after))
        , m_customBefore(std::move(customBefore))
        , m_customAfter(std::move(customAfter))
        , m_id(mergeId)
        , m_key(std::move(mergeKey))
    {
    }
    void undo() override { m_doc->applyPlanState(m_before, m_customBefore); }
    void redo() override { m_doc->applyPlanState(m_after, m_customAfter); }
    int id() const override { return m_id; }
    bool mergeWith(const QUndoCommand* other) override
    {
        const auto* o = static_cast<const PlanStateCommand*>(other);
        if (o->m_key != m_key)
            return false;
        m_after = o->m_after;
        m_customAfter = o->m_customAfter;
        setText(o->text());
        return true;
    }

private:
    PlanDocument* m_doc;
    std::vector<tp::PlanEntry> m_before, m_after;
    std::vector<tp::Style> m_customBefore, m_customAfter;
    int m_id;
    QString m_key;
};

// A whole plan replaced (an import, an advisor's candidate): its entries, custom styles,
// ep_implementation and tp size before and after. Never merges.
class ReplacePlanCommand final : public QUndoCommand
{
public:
    ReplacePlanCommand(PlanDocument* doc, const QString& text, tp::Plan before, tp::Plan after)
        : QUndoCommand(text), m_doc(doc), m_before(std::move(before)), m_after(std::move(after))
    {
    }
    void undo() override { m_doc->applyWholePlan(m_before); }
    void redo() override { m_doc->applyWholePlan(m_after); }

private:
    PlanDocument* m_doc;
    tp::Plan m_before, m_after;
};

constexpr int kSetStyleId = 1;

tp::VersionProfile currentProfile() { return tp::VersionProfile::G3; }

} // namespace

std::optional<tp::DType> PreviewSettings::activationDtype() const
{
    if (dtype == QLatin1String("bf16"))
        return tp::DType::BF16;
    if (dtype == QLatin1String("f16"))
        return tp::DType::F16;
    if (dtype == QLatin1String("f32"))
        return tp::DType::F32;
    return std::nullopt;
}

std::optional<tp::DType> PreviewSettings::kvCacheDtype() const
{
    return kvDtype == QLatin1String("fp8") ? std::optional(tp::DType::F8E4M3) : std::nullopt;
}

PlanDocument::PlanDocument(QObject* parent)
    : QObject(parent)
{
    m_undo.setUndoLimit(500);
}

void PlanDocument::setModel(std::shared_ptr<const tp::ModelSpec> spec, const QString& source)
{
    m_spec = std::move(spec);
    m_source = source;
    m_plan = m_spec ? tp::defaultPlan(*m_spec, m_settings.tpSize, currentProfile()) : tp::Plan{};
    m_undo.clear();
    emit modelChanged();
    emit planChanged();
}

QString PlanDocument::keyFor(const QString& path, bool everyLayer)
{
    return everyLayer ? QString::fromStdString(tp::genericName(path.toStdString())) : path;
}

QString PlanDocument::styleOf(const QString& key) const
{
    for (const auto& e : m_plan.entries)
        if (e.key == key.toStdString())
            return QString::fromStdString(e.style);
    return {};
}

void PlanDocument::applyPlanState(const std::vector<tp::PlanEntry>& entries, const std::vector<tp::Style>& custom)
{
    m_plan.entries = entries;
    m_plan.customStyles = custom;
    emit planChanged();
}

void PlanDocument::applyWholePlan(const tp::Plan& plan)
{
    m_plan.entries = plan.entries;
    m_plan.customStyles = plan.customStyles;
    m_plan.epImplementation = plan.epImplementation;
    m_plan.replicateKvHeads = plan.replicateKvHeads;
    m_plan.ppSize = plan.ppSize;
    emit planChanged();
    if (plan.tpSize != m_settings.tpSize) {
        PreviewSettings s = m_settings;
        s.tpSize = plan.tpSize;
        setSettings(s);
    }
}

void PlanDocument::replacePlan(const tp::Plan& plan, const QString& text)
{
    if (!m_spec)
        return;
    tp::Plan before = m_plan, after = m_plan;
    before.tpSize = m_settings.tpSize;
    after.entries = plan.entries;
    after.customStyles = plan.customStyles;
    after.epImplementation = plan.epImplementation;
    after.replicateKvHeads = plan.replicateKvHeads;
    after.ppSize = plan.ppSize;
    after.tpSize = std::max(1, plan.tpSize);
    m_undo.push(new ReplacePlanCommand(this, text, std::move(before), std::move(after)));
}

void PlanDocument::pushState(const QString& text, std::vector<tp::PlanEntry> entries, std::vector<tp::Style> custom,
                             int mergeId, const QString& mergeKey)
{
    m_undo.push(new PlanStateCommand(this, text, m_plan.entries, m_plan.customStyles, std::move(entries),
                                     std::move(custom), mergeId, mergeKey));
}

void PlanDocument::setStyle(const QString& key, const QString& style)
{
    if (!m_spec || key.isEmpty() || styleOf(key) == style)
        return;
    std::vector<tp::PlanEntry> entries = m_plan.entries;
    const std::string k = key.toStdString();
    auto it = std::find_if(entries.begin(), entries.end(), [&](const tp::PlanEntry& e) { return e.key == k; });
    if (style.isEmpty()) {
        if (it != entries.end())
            entries.erase(it);
    } else if (it != entries.end()) {
        it->style = style.toStdString();
    } else {
        entries.push_back({k, style.toStdString()});
    }
    pushState(style.isEmpty() ? tr("Remove %1").arg(key) : tr("%1 → %2").arg(key, style), std::move(entries),
              m_plan.customStyles, kSetStyleId, key);
}

void PlanDocument::addCustomStyle(const tp::Style& style)
{
    auto custom = m_plan.customStyles;
    std::erase_if(custom, [&](const tp::Style& s) { return s.name == style.name; });
    custom.push_back(style);
    pushState(tr("Define style %1").arg(QString::fromStdString(style.name)), m_plan.entries, std::move(custom), -1, {});
}

void PlanDocument::resetToDefault()
{
    if (!m_spec)
        return;
    pushState(tr("Reset to the default plan"), m_spec->defaultTpPlan, {}, -1, {});
}

tp::Status PlanDocument::importPlan(const QString& path)
{
    if (!m_spec)
        return tp::Status(tp::StatusCode::FailedPrecondition, "open a model before importing a plan");
    auto p = tp::loadPlanFile(path.toStdString(), currentProfile());
    if (!p.ok())
        return p.status();
    tp::Plan merged = tp::resolveOverrides(*m_spec, *p); // ep_implementation kept as the file has it
    merged.tpSize = p->tpSize > 1 ? p->tpSize : m_settings.tpSize;
    replacePlan(merged, tr("Import %1").arg(path));
    return {};
}

namespace {
tp::Status writeText(const QString& path, const std::string& text)
{
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(text.data(), qint64(text.size())) != qint64(text.size()))
        return tp::Status(tp::StatusCode::InvalidArgument, path.toStdString() + ": cannot write");
    return {};
}
} // namespace

tp::Status PlanDocument::exportJson(const QString& path) const
{
    tp::Plan p = m_plan;
    p.tpSize = m_settings.tpSize;
    return writePlanJson(p, path);
}

tp::Status PlanDocument::writePlanJson(const tp::Plan& plan, const QString& path) const
{
    return writeText(path, tp::planToJson(plan, m_spec.get()));
}

tp::Status PlanDocument::exportPython(const QString& path) const
{
    if (!m_spec)
        return tp::Status(tp::StatusCode::FailedPrecondition, "no model");
    tp::Plan p = m_plan;
    p.tpSize = m_settings.tpSize;
    return writeText(path, tp::planToPython(p, *m_spec, path.toStdString(), "the TP Studio GUI (File > Export Plan)"));
}

void PlanDocument::setSettings(const PreviewSettings& s)
{
    if (s == m_settings)
        return;
    m_settings = s;
    m_plan.tpSize = s.tpSize;
    emit settingsChanged();
}

QByteArray PlanDocument::sessionJson() const
{
    tp::Plan p = m_plan;
    p.tpSize = m_settings.tpSize;
    QJsonObject o;
    o[QStringLiteral("schema")] = QStringLiteral("tpstudio.session/1");
    o[QStringLiteral("model")] = m_source;
    o[QStringLiteral("plan")] = QJsonDocument::fromJson(QByteArray::fromStdString(tp::planToJson(p, m_spec.get()))).object();
    o[QStringLiteral("batch")] = m_settings.batch;
    o[QStringLiteral("seq")] = m_settings.seq;
    o[QStringLiteral("dtype")] = m_settings.dtype;
    o[QStringLiteral("kv_dtype")] = m_settings.kvDtype;
    o[QStringLiteral("hardware")] = m_settings.hardware;
    return QJsonDocument(o).toJson();
}

tp::Result<QString> PlanDocument::sessionModel(const QByteArray& json)
{
    const QJsonDocument d = QJsonDocument::fromJson(json);
    if (!d.isObject() || d.object().value(QStringLiteral("schema")).toString() != QStringLiteral("tpstudio.session/1"))
        return tp::Status(tp::StatusCode::InvalidArgument, "not a TP Studio session (schema tpstudio.session/1)");
    return d.object().value(QStringLiteral("model")).toString();
}

tp::Status PlanDocument::restoreSession(const QByteArray& json, QString* modelSource)
{
    auto model = sessionModel(json);
    if (!model.ok())
        return model.status();
    if (modelSource)
        *modelSource = *model;
    if (!m_spec)
        return tp::Status(tp::StatusCode::FailedPrecondition, "open the session's model first");
    const QJsonObject o = QJsonDocument::fromJson(json).object();
    const QByteArray planText = QJsonDocument(o.value(QStringLiteral("plan")).toObject()).toJson();
    auto p = tp::parsePlanJson(planText.toStdString(), "session", currentProfile());
    if (!p.ok())
        return p.status();
    const tp::Plan merged = tp::resolveOverrides(*m_spec, *p);
    m_plan.entries = merged.entries;
    m_plan.customStyles = merged.customStyles;
    m_plan.epImplementation = merged.epImplementation;
    m_plan.replicateKvHeads = merged.replicateKvHeads;
    m_plan.ppSize = merged.ppSize;
    m_undo.clear();
    PreviewSettings s = m_settings;
    s.tpSize = std::max(1, p->tpSize);
    s.batch = std::max<qint64>(1, o.value(QStringLiteral("batch")).toInteger(1));
    s.seq = std::max<qint64>(1, o.value(QStringLiteral("seq")).toInteger(512));
    s.dtype = o.value(QStringLiteral("dtype")).toString(QStringLiteral("model"));
    s.kvDtype = o.value(QStringLiteral("kv_dtype")).toString() == QLatin1String("fp8") ? QStringLiteral("fp8") : QStringLiteral("model");
    s.hardware = o.value(QStringLiteral("hardware")).toString(QStringLiteral("h100-sxm-8"));
    emit planChanged();
    setSettings(s);
    return {};
}

} // namespace tpui
