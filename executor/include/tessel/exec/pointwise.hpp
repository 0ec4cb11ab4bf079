// The pointwise activations of the MLP, plain or as a gated MLP's gate: one list for the backends' ops and the CUDA
// kernels.
#pragma once

namespace tessel::exec {

// SiLU, x sigmoid(x) (SwiGLU's gate; Shazeer 2020, "GLU Variants Improve Transformer"); GELU in its tanh form (GPT-2's
// MLP, GeGLU's gate, Gemma's gelu_pytorch_tanh); squared ReLU, max(0, x)^2 (So et al. 2021, "Primer"; Nemotron-4's
// MLP, Megatron-LM --squared-relu).
enum class Pointwise { Silu, Gelu, SquaredRelu };

} // namespace tessel::exec
