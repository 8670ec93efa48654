// class_plan_source.h — the user's own Transformers as the source of an unknown model type's default plans.
#pragma once

namespace tpapp {

// With TPSTUDIO_PYTHON set, registers (tp::setClassPlanSource) a source that runs the embedded tp_verify.py's
// class-plan in that Python for a model type TP Studio does not know: its config class's base_model_tp_plan /
// base_model_ep_plan and the head class's _tp_plan. Without it, nothing is registered and such a tree has no default
// plan (the diagnostics say how to give one).
void installClassPlanSource();

} // namespace tpapp
