// activation.h — the nonlinearity of an MLP, act(gate) · up or act(x) (a graph attribute and an op
// argument; kept apart so that device code can include it alone).
#pragma once

namespace tp {

enum class Activation {
    Silu,         // x·sigmoid(x) ("silu")
    GeluTanh,     // the tanh approximation of GELU ("gelu_pytorch_tanh", "gelu_new", "gelu_fast")
    Gelu,         // GELU, 0.5·x·(1 + erf(x / √2)) ("gelu")
    Relu2,        // relu(x)² ("relu2")
    Sigmoid,      // sigmoid(x): gates (Qwen2-MoE's shared expert, Qwen3-Next's attention output)
    Softplus,     // log(1 + exp(x)): Laguna's gate on the attention output
    Tanh,         // tanh(x): Inkling 2 Loop's message gates
    Identity,     // x: a plain product act(gate) · up = gate · up (LFM2's short convolution gates)
};
const char* activationName(Activation a);

} // namespace tp
