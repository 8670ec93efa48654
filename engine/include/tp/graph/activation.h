// activation.h — the nonlinearity of an MLP, act(gate) · up or act(x) (a graph attribute and an op
// argument; kept apart so that device code can include it alone).
#pragma once

namespace tp {

enum class Activation {
    Silu,         // x·sigmoid(x) ("silu")
    GeluTanh,     // the tanh approximation of GELU ("gelu_pytorch_tanh", "gelu_new", "gelu_fast")
    Gelu,         // GELU, 0.5·x·(1 + erf(x / √2)) ("gelu")
    Relu2,        // relu(x)² ("relu2")
    Sigmoid,      // sigmoid(x): Qwen3-Next's gate on the attention output (planned; the backends refuse it)
    Softplus,     // log(1 + exp(x)): Laguna's gate on the attention output (planned; the backends refuse it)
    Tanh,         // tanh(x): Inkling 2 Loop's message gates (planned; the backends refuse it)
};
const char* activationName(Activation a);
// Whether the backends compute it (the gates Sigmoid, Softplus and Tanh are planned only).
inline bool computedActivation(Activation a) { return a != Activation::Sigmoid && a != Activation::Softplus && a != Activation::Tanh; }

} // namespace tp
