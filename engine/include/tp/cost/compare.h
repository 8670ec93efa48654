// compare.h — a run record's measured time per layer and per phase next to what the cost model
// predicts for the same model, plan, batch, prompt, logits and decode context on a hardware
// profile: how far the profile (a datasheet's, or one `tpstudio-cli calibrate` measured) is from
// this machine.
//
//   auto c = compareRecord(record, spec, plan, findHardware("calibrated-vm").value());
//   for (const RunComparison& r : *c) r.prefill.worstLayerError();
#pragma once

#include "tp/core/status.h"
#include "tp/cost/hardware.h"
#include "tp/model/model_spec.h"
#include "tp/plan/plan.h"
#include "tp/profile/run_record.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tp {

struct LayerComparison
{
    int layer = -1;            // -1: outside the decoder layers (embedding, final norm, head)
    double measuredUs = 0;     // compute + communication of the slowest rank: the median over the
                               // record's samples (iterations, decode steps), else its one forward's
    double predictedUs = 0;    // the same from the cost model: its compute and communication
    double predictedComputeUs = 0, predictedCommUs = 0;
    double error() const { return measuredUs > 0 ? (predictedUs - measuredUs) / measuredUs : 0; }
};

struct PhaseComparison
{
    std::vector<LayerComparison> layers;
    double measuredUs = 0;     // prefill: the median forward; decode: the median step (ITL)
    double predictedUs = 0;
    double error() const { return measuredUs > 0 ? (predictedUs - measuredUs) / measuredUs : 0; }
    double worstLayerError() const;   // largest |error| over the layers
};

struct RunComparison
{
    int tp = 1;
    PhaseComparison prefill;
    std::optional<PhaseComparison> decode;  // when the run decoded
    std::int64_t decodeContext = 0;         // the context the decode step was predicted at
};

// Digests that tie a run record to what it ran (16 hex digits, FNV-1a 64): the model's class and
// every tensor's name, shape and dtype; its config (parsed, so that layout and key order do not
// count: a changed value does, such as a sliding window the tensors do not show); the resolved plan
// as `plan export` writes it, its tp size aside.
std::string modelDigest(const ModelSpec& spec);
std::string configDigest(std::string_view configJson);
std::string planDigest(const Plan& plan, const ModelSpec& spec);

// One entry per tp size of the record. `plan` is the plan the run used (its tpSize is set per
// size); the record's storage dtype, batch, prompt and logits set the workload; the ITL and the
// decode layers' medians are predicted at the middle step's context (a record without per-layer
// samples: its layers at the context of the step whose spans it kept). InvalidArgument when the plan is not valid at a recorded size,
// or when the record's digests (where it has them) are not those of `spec` and `plan`: another model or plan than it ran.
// `configJson`: the text `spec` was built from (configText), held to the record's config digest.
Result<std::vector<RunComparison>> compareRecord(const RunRecord& record, const ModelSpec& spec, std::string_view configJson,
                                                 const Plan& plan, const HardwareProfile& hw);

} // namespace tp
