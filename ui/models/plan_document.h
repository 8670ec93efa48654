// plan_document.h — the plan being edited: the model, its tp_plan (entries + custom styles), the
// preview settings (tp size, batch, sequence, dtype, hardware), and the undo stack every plan edit
// goes through. Views never change the plan directly; they ask the document.
#pragma once

#include "tp/model/model_spec.h"
#include "tp/plan/plan.h"

#include <QObject>
#include <QUndoStack>

#include <memory>
#include <optional>

namespace tpui {

struct PreviewSettings
{
    int tpSize = 2;
    qint64 batch = 1;
    qint64 seq = 512;
    QString dtype = QStringLiteral("model"); // model, bf16, f16, f32
    QString hardware = QStringLiteral("h100-sxm-8");
    QString kvDtype = QStringLiteral("model"); // model (the activations', as Transformers' cache), fp8
    bool operator==(const PreviewSettings&) const = default;
    // The activations' dtype `dtype` names; nullopt for "model" (the model's own).
    std::optional<tp::DType> activationDtype() const;
    // What the KV cache stores; nullopt for "model" (the activations' dtype).
    std::optional<tp::DType> kvCacheDtype() const;
};

class PlanDocument final : public QObject
{
    Q_OBJECT
public:
    explicit PlanDocument(QObject* parent = nullptr);

    // A new model starts from its class's default plan; the undo history is cleared.
    void setModel(std::shared_ptr<const tp::ModelSpec> spec, const QString& source);
    const tp::ModelSpec* spec() const { return m_spec.get(); }
    std::shared_ptr<const tp::ModelSpec> specPtr() const { return m_spec; }
    QString source() const { return m_source; }

    const tp::Plan& plan() const { return m_plan; }
    QUndoStack* undoStack() { return &m_undo; }

    // The key an edit of `path` writes: the generic key ("model.layers.*.mlp.down_proj") when it
    // applies to every layer, else the exact path (an indexed key).
    static QString keyFor(const QString& path, bool everyLayer);
    // The style the plan's key `key` has, or "" when the key is absent.
    QString styleOf(const QString& key) const;

    // Plan edits (undoable; repeated edits of one key merge into one undo step).
    void setStyle(const QString& key, const QString& style); // "" removes the key
    void addCustomStyle(const tp::Style& style);
    void resetToDefault();
    // Replaces the whole plan — entries, custom styles, ep_implementation and tp size — as one undo
    // step (undo brings back the previous plan and its tp size).
    void replacePlan(const tp::Plan& plan, const QString& text);
    // Replaces the plan by an imported one (one undo step, its tp size included). Errors name the file.
    tp::Status importPlan(const QString& path);
    tp::Status exportJson(const QString& path) const;
    // Writes `plan` (a plan of this model) as Transformers JSON, as exportJson writes the document's.
    tp::Status writePlanJson(const tp::Plan& plan, const QString& path) const;
    tp::Status exportPython(const QString& path) const;

    const PreviewSettings& settings() const { return m_settings; }
    void setSettings(const PreviewSettings& s);

    // Session: model source, plan and settings as JSON.
    QByteArray sessionJson() const;
    // Restores plan and settings of a session for the model already set; the model source is returned.
    tp::Status restoreSession(const QByteArray& json, QString* modelSource);
    static tp::Result<QString> sessionModel(const QByteArray& json);

    // Applies a whole plan state (used by undo commands).
    void applyPlanState(const std::vector<tp::PlanEntry>& entries, const std::vector<tp::Style>& custom);
    // Applies a whole plan, its tp size included (used by replacePlan's undo command).
    void applyWholePlan(const tp::Plan& plan);

signals:
    void modelChanged();
    void planChanged();
    void settingsChanged();

private:
    void pushState(const QString& text, std::vector<tp::PlanEntry> entries, std::vector<tp::Style> custom, int mergeId,
                   const QString& mergeKey);

    std::shared_ptr<const tp::ModelSpec> m_spec;
    QString m_source;
    tp::Plan m_plan;
    PreviewSettings m_settings;
    QUndoStack m_undo;
};

} // namespace tpui
