// activation.h — the nonlinearity of a gated MLP, act(gate) · up (a graph attribute and an op
// argument; kept apart so that device code can include it alone).
#pragma once

namespace tp {

enum class Activation {
    Silu,         // x·sigmoid(x) ("silu")
    GeluTanh,     // the tanh approximation of GELU ("gelu_pytorch_tanh")
    Sigmoid,      // sigmoid(x): Qwen3-Next's gate on the attention output (planned; the backends refuse it)
    Softplus,     // log(1 + exp(x)): Laguna's gate on the attention output (planned; the backends refuse it)
    Tanh,         // tanh(x): Inkling 2 Loop's message gates (planned; the backends refuse it)
};
const char* activationName(Activation a);

} // namespace tp
